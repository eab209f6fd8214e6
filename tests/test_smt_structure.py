"""The verifier's structure: complete visitors, one module per obligation registered once, operator
meaning read from the semantics table, and no other stage imported."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

from argus_verify import ir, semantics
from argus_verify.frontend import compile_file
from argus_verify.smt import obligations as O
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.analysis import Analysis, AnalysisError
from argus_verify.smt.ints import IntCompiler, TagTerms, combine, int_term
from argus_verify.smt.report import OBLIGATIONS
from argus_verify.visitor import FAMILIES, Visitor

ROOT = Path(__file__).resolve().parents[1]
SMT = ROOT / "smt"
OTHER_STAGES = ("frontend", "lowering", "runtime", "planner")


def _smt_modules() -> list[str]:
    pkg = importlib.import_module("argus_verify.smt")
    return ["argus_verify.smt"] + [m.name for m in pkgutil.walk_packages(pkg.__path__, "argus_verify.smt.")]


def _smt_visitors() -> list[type]:
    for name in _smt_modules():
        importlib.import_module(name)
    found, todo = [], list(Visitor.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("argus_verify.smt"):
            found.append(cls)
    return found


def test_the_verifier_dispatches_through_complete_visitors():
    visitors = {cls.__qualname__: cls for cls in _smt_visitors()}
    assert {"Analysis", "IntCompiler", "TagTerms"} <= set(visitors)
    assert set(Analysis.families) == {"statements", "fragment_ops"}
    assert IntCompiler.families == TagTerms.families == ("int_exprs",)
    for name, cls in visitors.items():
        assert cls.missing == (), f"{name} has no handler for {cls.missing}"


def test_an_incomplete_visitor_is_detected():
    # the check above can fail: a visitor lacking a handler lists it
    class Partial(Visitor, families=("statements",)):
        def visit_Let(self, s):
            return s

    assert "statements.Store" in Partial.missing
    assert len(Partial.missing) == len(FAMILIES["statements"]) - 1


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("path", sorted(SMT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_smt_module_imports_another_stage(path):
    bad = sorted(
        m
        for m in _imports(path)
        if m.split(".")[0] in OTHER_STAGES or any(m.startswith(f"argus_verify.{s}") for s in OTHER_STAGES)
    )
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_import_check_sees_stage_imports(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from argus_verify.frontend.build import fold\nimport argus_verify.runtime\n")
    assert {"argus_verify.frontend.build", "argus_verify.runtime"} <= _imports(p)


def test_every_obligation_module_is_registered_once():
    registered = {fn.__module__: fn for _, fn in O.STEPS}
    modules = {
        f"argus_verify.smt.obligations.{m.name}"
        for m in pkgutil.iter_modules(O.__path__)
        if m.name != "common"
    }
    assert set(registered) == modules
    assert len(O.STEPS) == len(modules)
    assert {name for name, _ in O.STEPS} <= set(OBLIGATIONS)
    for name in ("check_assertions", "check_agreements", "check_contracts", "check_once", "check_bounds",
                 "check_divergence", "check_races", "check_uninit", "check_banks", "check_coalescing"):
        assert callable(getattr(O, name))


@pytest.mark.parametrize("op", sorted(semantics.INT_OPS))
def test_integer_terms_are_the_tables(op):
    Z.set_mode("int")
    Z.begin_query()
    a, b = Z.var("a"), Z.var("b")
    assert int_term(op, a, b).eq(semantics.INT_OPS[op].z3(Z, a, b))
    with pytest.raises(AnalysisError):
        int_term("**", a, b)


def test_constant_operands_fold_through_the_table():
    seven, two, zero = V.const_int(7), V.const_int(2), V.const_int(0)
    assert combine("cdiv", seven, two).lin == ({}, semantics.fold("cdiv", 7, 2))
    assert combine("//", seven, zero).lin is None  # undefined: left to the query, not folded
    thread = IntCompiler(None).visit(ir.ISpecial("lane_id"), {}, None)
    both = combine("^", thread, V.const_int(5))
    threads = np.arange(64)
    assert both.np_fn(threads).tolist() == [semantics.int_eval("^", t % 32, 5) for t in range(64)]


def test_the_analysis_refuses_what_it_has_no_handler_for():
    an = Analysis(compile_file(str(ROOT / "specs" / "vecadd.arg")))

    class FutureOp:  # an operation the IR does not (yet) have
        pass

    with pytest.raises(AnalysisError, match="FutureOp"):
        an.visit(FutureOp(), None, None, {}, "", frozenset())
