"""The lowering's structure: complete visitors, no other stage imported, operator meaning read
from the semantics table (no local operator tables, emitter helpers that agree with it)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from argus_verify import semantics
from argus_verify.lowering import ptx
from argus_verify.lowering.emitter import Emitter
from argus_verify.visitor import Visitor

ROOT = Path(__file__).resolve().parents[1]
LOWERING = ROOT / "lowering"
MODULES = sorted(LOWERING.glob("*.py"))


def lowering_visitors() -> list:
    pkg = importlib.import_module("argus_verify.lowering")
    for info in pkgutil.iter_modules(pkg.__path__, "argus_verify.lowering."):
        importlib.import_module(info.name)
    found, todo = [], list(Visitor.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("argus_verify.lowering."):
            found.append(cls)
    return found


def test_lowering_visitors_have_no_missing_handlers():
    visitors = lowering_visitors()
    assert ptx.Lowerer in visitors
    assert {"statements", "fragment_ops"} <= set(ptx.Lowerer.families)
    assert {f"{c.__module__}.{c.__qualname__}": c.missing for c in visitors if c.missing} == {}


def imported(path: Path) -> set:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.update({node.module, *(f"{node.module}.{a.name}" for a in node.names)})
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_lowering_imports_no_other_stage(path):
    bad = sorted(m for m in imported(path)
                 if re.match(r"argus_verify\.(smt|runtime|frontend|planner|testing)(\.|$)", m))
    assert not bad, f"{path.name} imports {bad}"


def table_mnemonics() -> set:
    """The distinctive instructions of the table's elementwise templates (a local copy of one in
    the lowering would mean it has its own operator table again)."""
    out = set()
    for entry in (*semantics.FLOAT_UNARY.values(), *semantics.FLOAT_BINARY.values()):
        for lines in entry.ptx.values():
            out.update(line.split()[0] for line in lines if "." in line.split()[0])
    return {m for m in out if re.search(r"\.(rn|approx)\.", m)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_local_copy_of_the_table(path):
    text = path.read_text()
    assert table_mnemonics(), "the table has no .rn / .approx templates?"
    assert not [m for m in table_mnemonics() if m in text]
    assert "shfl.sync.bfly" not in text and "cvt.rn." not in text


@pytest.mark.parametrize("op", [o for o in semantics.INT_OPS.values() if not (o.compare or o.logical)],
                         ids=lambda o: o.name)
def test_emitter_helper_of_each_integer_operator(op):
    """`emit` names a helper; on registers of unknown range it emits the table's mnemonic (`//` and
    `%` then also their rounding towards minus infinity)."""
    em = Emitter()
    a = em.input("b32", "a", "mov.u32 {d}, %tid.x;")
    b = em.input("b32", "b", "mov.u32 {d}, %ctaid.x;")
    em.mat(getattr(em, f"int_{op.emit}")(a, b))
    emitted = [line.split()[0] for line in em.buffers[0]]
    if op.ptx is None:  # composed from other helpers (cdiv)
        assert emitted
    else:
        assert op.ptx in emitted, emitted


def test_integer_operators_fold_as_the_table_evaluates():
    em = Emitter()
    for op in semantics.INT_OPS.values():
        if op.compare or op.logical:
            continue
        for a, b in ((7, 3), (12, 5), (0, 4), (31, 2)):
            assert getattr(em, f"int_{op.emit}")(a, b) == semantics.fold(op.name, a, b), (op.name, a, b)
    assert em.buffers[0] == []
