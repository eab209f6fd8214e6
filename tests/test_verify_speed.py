"""The verifier's speed measures keep its answers: the integer proof attempt proves only what is
unsatisfiable and leaves the encoding state as it found it, the collector is restored after a
verification, and the parser's table cache gives the same parser."""

from __future__ import annotations

import gc
from pathlib import Path

import z3

from argus_verify import smt
from argus_verify.frontend import compile_file
from argus_verify.frontend import parser as FP
from argus_verify.smt import query as Q
from argus_verify.smt import zops as Z
from argus_verify.smt.analysis import Analysis

ROOT = Path(__file__).resolve().parents[1]


def _analysis(name="vecadd.arg"):
    an = Analysis(compile_file(ROOT / "specs" / name))
    an.finish(10.0)
    return an


def test_integer_attempt_proves_only_unsatisfiable_queries_and_restores_the_encoding():
    an = _analysis()
    # the state a bit-vector query is in when solve() makes the attempt
    q = Q.Query(an, 10.0, "bv")
    n = list(an.sizes.values())[0]
    q.add(n > 3)
    before = (Z.MODE, Z._SINK, dict(Z._RANGE), dict(Z._DIVS), dict(Z.STATS))

    def impossible(qq):
        m = list(qq.an.sizes.values())[0]
        qq.add(m > 5, m < 5)
        return m

    def possible(qq):
        m = list(qq.an.sizes.values())[0]
        qq.add(m > 5)
        return m

    res = Q.prove_in_ints(an, 10.0, impossible)
    assert res is not None and res[0].status == "proved" and res[1].mode == "int"
    assert Q.prove_in_ints(an, 10.0, possible) is None
    after = (Z.MODE, Z._SINK, dict(Z._RANGE), dict(Z._DIVS), dict(Z.STATS))
    assert after == before
    assert Z.MODE == "bv" and Z.is_true(Z.And()) and z3.is_bv(Z.var("n_probe"))


def test_integer_attempt_is_bounded_by_a_resource_limit(monkeypatch):
    # with no budget at all the attempt cannot prove anything: it answers None, never "proved"
    an = _analysis()
    monkeypatch.setattr(Q, "PROVE_INT_RLIMIT", 1)

    def hard(qq):
        xs = [qq.S.var(f"x{i}") for i in range(6)]
        qq.add(*[x >= 0 for x in xs], *[x < 1000 for x in xs])
        qq.add(Z.Eq(sum(x * (i + 7) for i, x in enumerate(xs)), 123457))
        return xs

    assert Q.prove_in_ints(an, 10.0, hard) is None


def test_verify_restores_the_collector():
    k = compile_file(ROOT / "specs" / "vecadd.arg")
    assert gc.isenabled() and gc.get_freeze_count() == 0
    rep = smt.verify(k, jobs=1)
    assert rep.exit_code == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    # a caller's own frozen objects stay frozen
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        smt.verify(k, jobs=1)
        # still frozen: verify() neither unfroze them nor froze its own objects on top (a frozen
        # object whose last reference goes away is still freed, so the count may drop by a few)
        assert frozen - 64 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_parser_table_cache_is_keyed_by_grammar_and_module():
    grammar = FP.GRAMMAR.read_text()
    a = FP._cache_file(grammar)
    assert a == FP._cache_file(grammar)
    assert a != FP._cache_file(grammar + "\n// edited\n")
    # the cached parser parses what a freshly built one does (1 << 2 is a shift, not two '<')
    src = "kernel k(x: f32[N]):\n    grid(1)\n    block(32)\n    s = 1 << 2\n"
    fresh = FP.Lark(
        grammar, parser="lalr", lexer="contextual", postlex=FP._ArgusIndenter(), propagate_positions=True,
        maybe_placeholders=True, edit_terminals=FP._edit_terminal,
    )
    assert FP._parser().parse(src) == fresh.parse(src)
