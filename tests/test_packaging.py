"""One installed name: a wheel built from the project holds `argus_verify` and nothing else at the
top level, and no module imports a stage by its bare folder name."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("frontend", "smt", "lowering", "runtime", "planner")


def test_wheel_has_exactly_one_top_level_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("argus_verify-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"argus_verify"}
    for stage in STAGES:
        assert f"argus_verify/{stage}/__init__.py" in names
    assert "argus_verify/frontend/argus.lark" in names
    assert not any("/tests/" in n or n.startswith("tests/") for n in names)


def test_every_package_folder_is_mapped():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {Path(folder) for folder in cfg["package-dir"].values()}
    listed = set(cfg["packages"])
    for init in ROOT.glob("**/__init__.py"):
        folder = init.parent.relative_to(ROOT)
        if folder.parts[0] in ("tests", ".venv", "build", "bench") or folder.parts[0].startswith("."):
            continue
        assert folder in mapped, f"{folder} is a package folder but not in [tool.setuptools.package-dir]"
    for pkg, folder in cfg["package-dir"].items():
        assert pkg in listed, f"{pkg} is mapped but not listed in packages"
        assert (ROOT / folder / "__init__.py").exists(), folder


def _python_files():
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if rel.parts[0].startswith(".") or rel.parts[0] in ("build", "dist"):
            continue
        yield p


def test_no_module_imports_a_stage_by_its_bare_name():
    bad = []
    for p in _python_files():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{p.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in STAGES]
    assert not bad, "import stages as argus_verify.<stage>:\n" + "\n".join(bad)
