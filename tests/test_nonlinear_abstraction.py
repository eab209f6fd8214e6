"""Products and quotients of unknowns abstracted to facts (smt.zops `ABSTRACT`), and the shared
reads of a persistent kernel resolved through the next tile's prefetch (smt.program's candidate
instances).

The abstraction must keep every real model: each fact it adds holds of the real product, floor
quotient and remainder (checked on random integers), so a query it finds unsatisfiable is
unsatisfiable exactly. It decides the ring positions (`tile_index * KT + kt`) of persistent kernels,
which the nonlinear solver does not; and the persistent kernel's first reads of each tile, which
the previous tile's prefetch wrote, are proved initialised, where a prologue under the wrong tile
is a violation that replays.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_verify import smt
from argus_verify.frontend import compile_file, compile_source
from argus_verify.replay import NOT_REPRODUCED, reproduce
from argus_verify.smt import query as Q
from argus_verify.smt import zops as Z
from argus_verify.smt.analysis import Analysis

ROOT = Path(__file__).resolve().parents[1]
INTS = st.integers(min_value=-60, max_value=60)


def _abstract_terms(build):
    """Build terms with the abstraction on, as a query does; return them and the facts it added."""
    saved = (Z.MODE, Z.ABSTRACT)
    Z.set_mode("int")
    sink = Z.begin_query()
    Z.ABSTRACT = True
    try:
        terms = build()
        Z.end_defs()
    finally:
        Z.ABSTRACT = False
        Z.MODE = saved[0]
    return terms, list(sink)


@settings(max_examples=150, deadline=None)
@given(INTS, INTS, INTS, INTS)
def test_every_fact_of_the_abstraction_holds_of_the_real_operations(a, b, c, d):
    x, y, z, w = (z3.Int(n) for n in "xyzw")
    (p1, p2, p3, q1, q2, r1), facts = _abstract_terms(lambda: (
        Z.mul(x, y), Z.mul(z, y), Z.mul(x, w), Z.floordiv(x, y), Z.floordiv(z, y), Z.mod(z, y)))
    assert not any(z3.is_mul(t) or z3.is_div(t) for t in (p1, p2, p3, q1, q2))  # fresh variables
    s = z3.Solver()
    s.add(*facts, x == a, y == b, z == c, w == d, p1 == a * b, p2 == c * b, p3 == a * d)
    if b != 0:  # (Python's // by zero is an error; the abstraction leaves that quotient free)
        s.add(q1 == a // b, q2 == c // b, r1 == c % b)
    assert s.check() == z3.sat


@settings(max_examples=150, deadline=None)
@given(INTS, INTS, INTS, st.sampled_from([-3, 2, 8]))
def test_facts_of_products_with_constant_multipliers_hold(a, b, c, k):
    # q * (k * y) is k * (q * y): the facts compare k * q with the other products' cofactors
    x, y, z = (z3.Int(n) for n in "xyz")
    (p1, p2, q1), facts = _abstract_terms(lambda: (
        Z.mul(x, Z.mul(y, Z.bv(k))), Z.mul(z, y), Z.floordiv(z, Z.mul(y, Z.bv(k)))))
    s = z3.Solver()
    s.add(*facts, x == a, y == b, z == c, p1 == a * b * k, p2 == c * b)
    if b != 0:
        s.add(q1 == c // (b * k))
    assert s.check() == z3.sat


def test_a_grouped_tile_order_keeps_its_group_inside_the_tile_rows():
    # grp = tile // (GROUP * TN) with tile < TM * TN: grp * GROUP < TM (so a group has a row), which
    # needs the product of the quotient and 8 * TN compared with TM * TN through their factor TN
    an = Analysis(compile_file(ROOT / "specs" / "vecadd.arg"))
    an.finish(10.0)

    def build(q, claim):
        tile, tm, tn = z3.Int("tile"), z3.Int("TM"), z3.Int("TN")
        q.add(tile >= 0, tm >= 1, tn >= 1, tile < Z.mul(tm, tn))
        grp = Z.floordiv(tile, Z.mul(Z.bv(8), tn))
        q.add(Z.Not(claim(Z.mul(grp, Z.bv(8)), tm)))
        return tile

    res = Q.prove_in_ints(an, 10.0, lambda q: build(q, Z.Lt), abstract=True, rlimit=Q.ABSTRACT_RLIMIT)
    assert res is not None and res[0].status == "proved"
    # and not the false claim that the group's last row is inside too
    false = Q.prove_in_ints(an, 10.0, lambda q: build(q, lambda g, tm: Z.Le(Z.add(g, Z.bv(8)), tm)),
                            abstract=True, rlimit=Q.ABSTRACT_RLIMIT)
    assert false is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(0, 3)), min_size=1, max_size=4),
       st.integers(-40, 40), st.sampled_from([2, 3, 4, 132]), st.lists(st.integers(-50, 50), min_size=4, max_size=4))
def test_exact_quotients_are_the_floor_division(parts, const, c, values):
    names = [z3.Int(f"u{i}") for i in range(4)]

    def dividend(extra):
        a = Z.bv(const * c + extra)
        for coef, i in parts:
            a = Z.add(a, Z.mul(names[i], Z.bv(coef * c)))
        return a

    (a, q), _ = _abstract_terms(lambda: (dividend(0), Z.floordiv(dividend(0), Z.bv(c))))
    assert not z3.is_div(q)  # every coefficient is a multiple of c: no division left
    sub = [(n, z3.IntVal(v)) for n, v in zip(names, values, strict=True)]
    exact = z3.simplify(z3.substitute(a, *sub)).as_long() // c
    assert z3.simplify(z3.substitute(q, *sub)).as_long() == exact
    (q2,), _ = _abstract_terms(lambda: (Z.floordiv(dividend(1), Z.bv(c)),))  # not a multiple
    assert z3.simplify(z3.substitute(q2, *sub)).as_long() == (exact * c + 1) // c


def _ring(claim):
    """An integer query over the ring position of a persistent kernel: tile counter c, k tiles KT,
    base = c * KT; `claim` is refuted when the query is unsatisfiable."""
    an = Analysis(compile_file(ROOT / "specs" / "vecadd.arg"))
    an.finish(10.0)

    def build(q):
        c, kt, n = z3.Int("c"), z3.Int("kt"), z3.Int("KT")
        q.add(c >= 1, n >= 1, kt >= 0, kt < n)
        here = Z.mod(Z.add(Z.mul(c, n), kt), Z.bv(3))  # the stage read at (c, kt)
        # the previous tile's prefetch: (c - 1) * KT + KT + kt, the same ring position
        there = Z.mod(Z.add(Z.add(Z.mul(Z.sub(c, Z.bv(1)), n), n), kt), Z.bv(3))
        q.add(Z.Not(claim(here, there)))
        return c

    return an, build


def test_the_abstraction_proves_ring_positions_and_nothing_false():
    an, build = _ring(lambda here, there: Z.Eq(here, there))
    res = Q.prove_in_ints(an, 10.0, build, abstract=True, rlimit=Q.ABSTRACT_RLIMIT)
    assert res is not None and res[0].status == "proved"
    an, build = _ring(lambda here, there: Z.Ne(here, there))  # false: they are equal
    assert Q.prove_in_ints(an, 10.0, build, abstract=True, rlimit=Q.ABSTRACT_RLIMIT) is None
    assert Z.ABSTRACT is False


KERNEL = (ROOT / "tests" / "hopper" / "persistent_prefetch_reads.arg").read_text()


def _verify(text, tmp_path):
    path = tmp_path / "persistent_prefetch_reads.arg"
    path.write_text(text)
    k = compile_source(text, str(path))
    return k, path, smt.verify(k, checks=("uninitialised-read",))


def test_reads_fed_by_the_previous_tiles_prefetch_are_proved_initialised(tmp_path):
    _, _, rep = _verify(KERNEL, tmp_path)
    got = {r.message.split(" was written")[0]: r.status for r in rep.results}
    assert [r.status for r in rep.results] == ["proved"] * 3, [(r.status, r.message) for r in rep.results]
    assert "every element read from sA" in got and "every element read from sB" in got


def test_a_prologue_under_the_wrong_tile_leaves_the_first_reads_uninitialised(tmp_path):
    bad = KERNEL.replace("if thread_id == 0 and tile == block_id.x:", "if thread_id == 0 and tile == block_id.x + SMS:")
    assert bad != KERNEL
    k, path, rep = _verify(bad, tmp_path)
    line = next(i for i, s in enumerate(bad.splitlines(), 1) if "part = wgmma(" in s)
    found = [r for r in rep.results if r.status == "violated"]
    assert {(r.obligation, r.location.line) for r in found} == {("uninitialised-read", line)}
    for r in found:
        assert reproduce(k, r, str(path))["status"] != NOT_REPRODUCED


@pytest.mark.slow
def test_the_final_hopper_gemms_operand_reads_are_proved_initialised():
    k = compile_file(ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_prefetch.arg")
    rep = smt.verify(k, checks=("uninitialised-read",))
    assert [r.status for r in rep.results] == ["proved"] * 3, [(r.status, r.message) for r in rep.results]
