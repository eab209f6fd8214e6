"""The architecture the issue asked for, enforced.

- Stages meet only through the IR: a stage imports core modules and its own package, never another
  stage; core modules import no stage; the CLI and the other driver modules sit above everything.
- Every stage's visitors have a handler for every IR node of the families they declare, so a new
  node without a handler fails here, not in a user's run.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

from argus_verify.visitor import Visitor

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("frontend", "smt", "lowering", "runtime", "planner")
STAGE_FOLDERS = {s: ROOT / s for s in STAGES}
CORE = ("ir", "layout", "diagnostics", "semantics", "visitor", "instructions", "printer", "reference", "thread_ir",
        "atoms")


def _imported_modules(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "argus_verify" and len(parts) > 1 and parts[1] in STAGES:
        return parts[1]
    return None


def _layer_files():
    for stage, folder in STAGE_FOLDERS.items():
        for p in folder.rglob("*.py"):
            yield f"stage {stage}", stage, p
    for name in CORE:
        p = ROOT / "argus_verify" / f"{name}.py"
        if p.exists():
            yield "core", None, p


@pytest.mark.parametrize("layer,own,path", list(_layer_files()),
                         ids=[str(p.relative_to(ROOT)) for _, _, p in _layer_files()])
def test_stages_meet_only_through_the_ir(layer, own, path):
    bad = sorted({m for m in _imported_modules(path) if _stage_of(m) not in (None, own)})
    assert not bad, f"{path.relative_to(ROOT)} ({layer}) imports {bad}"


def _all_visitors() -> list[type]:
    for stage in STAGES:
        pkg = importlib.import_module(f"argus_verify.{stage}")
        for info in pkgutil.walk_packages(pkg.__path__, f"argus_verify.{stage}."):
            importlib.import_module(info.name)
    importlib.import_module("argus_verify.printer")
    importlib.import_module("argus_verify.source")  # `argus ir --source`: a printer too
    found, todo = [], list(Visitor.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_stage_dispatches_through_complete_visitors():
    visitors = _all_visitors()
    incomplete = {f"{c.__module__}.{c.__qualname__}": c.missing for c in visitors if c.missing}
    assert not incomplete, incomplete
    for who in ("argus_verify.smt", "argus_verify.lowering", "argus_verify.runtime", "argus_verify.printer"):
        families = {fam for c in visitors if c.__module__.startswith(who) for fam in c.families}
        assert {"statements", "fragment_ops"} <= families, f"{who} lacks complete statement / operation visitors"
