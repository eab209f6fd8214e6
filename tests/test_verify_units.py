"""Unit tests of the verifier's pieces: Z3 arithmetic in both encodings, layouts through Z3,
the tag algebra, program order and commit counting, and tag propagation checked against a
brute-force enumeration of the layouts."""

from __future__ import annotations

import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_verify import ir
from argus_verify.frontend import compile_file, compile_source
from argus_verify.layout import ComposedLayout, Layout, Swizzle
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.analysis import Analysis
from argus_verify.smt.query import Query
from argus_verify.smt.records import boxes_of

FAST = settings(max_examples=40, deadline=None)
MODES = ("int", "bv")


def value(term, **fixed) -> int:
    """The value of `term` with the named variables fixed (the current encoding's sort)."""
    s = z3.Solver()
    s.add(*(Z._SINK or []))  # definitions of constant-division quotients (bit-vector encoding)
    for k, v in fixed.items():
        s.add(Z.var(k) == v)
    r = Z.var("__r")
    s.add(r == term)
    assert s.check() == z3.sat
    out = s.model()[r]
    return out.as_signed_long() if z3.is_bv_value(out) else out.as_long()


def unique(term, **fixed) -> bool:
    """`term` has exactly one value once the named variables are fixed."""
    s = z3.Solver()
    s.add(*(Z._SINK or []))
    for k, v in fixed.items():
        s.add(Z.var(k) == v)
    v0 = value(term, **fixed)
    s.add(term != v0)
    return s.check() == z3.unsat


@pytest.fixture(params=MODES)
def mode(request):
    Z.set_mode(request.param)
    Z.begin_query()
    yield request.param
    Z.end_defs()
    Z.set_mode("int")


INTS = st.integers(-5000, 5000)
DIVS = st.sampled_from([1, 2, 3, 5, 7, 8, 16, 48, -3, -8])


@FAST
@given(a=INTS, b=DIVS)
def test_floor_division_and_modulo(a, b):
    for m in MODES:
        Z.set_mode(m)
        Z.begin_query()
        x, y = Z.var("x"), Z.var("y")
        assert value(Z.floordiv(x, Z.bv(b)), x=a) == a // b
        assert value(Z.mod(x, Z.bv(b)), x=a) == a % b
        assert value(Z.floordiv(x, y), x=a, y=b) == a // b
        assert value(Z.mod(x, y), x=a, y=b) == a % b
        assert value(Z.cdiv(x, Z.bv(b)), x=a) == -(-a // b)
        Z.end_defs()
    Z.set_mode("int")


@FAST
@given(a=st.integers(-3000, 3000), c=st.integers(0, 300), k=st.integers(0, 6))
def test_bit_operations_with_constants(a, c, k):
    for m in MODES:
        Z.set_mode(m)
        Z.begin_query()
        x = Z.var("x")
        assert value(Z.xor(x, Z.bv(c)), x=a) == a ^ c
        assert value(Z.band(x, Z.bv(c)), x=a) == a & c
        assert value(Z.bor(x, Z.bv(c)), x=a) == a | c
        assert value(Z.shr(x, Z.bv(k)), x=a) == a >> k
        assert value(Z.shl(x, Z.bv(k)), x=a) == a << k
        Z.end_defs()
    Z.set_mode("int")


@FAST
@given(a=st.integers(0, 1023), b=st.integers(0, 31))
def test_xor_of_two_symbols(a, b):
    for m in MODES:
        Z.set_mode(m)
        Z.begin_query()
        x, y = Z.var("x"), Z.var("y")
        lane = Z.band(y, Z.bv(31))  # a bounded operand: decomposed over 5 bits in the integer encoding
        assert value(Z.xor(x, lane), x=a, y=b) == a ^ b
        assert value(Z.xor(x, y), x=a, y=b) == a ^ b  # unbounded: exact fallback
        Z.end_defs()
    Z.set_mode("int")


LAYOUTS = [
    Layout((64, 16), (16, 1)),
    Layout((3, 64, 16), (1024, 16, 1)),
    ComposedLayout(Swizzle(5, 0, 5), Layout((32, 32), (32, 1))),
    ComposedLayout(Swizzle(3, 3, 3), Layout((2, 64, 64), (4096, 64, 1))),
    ComposedLayout(Swizzle(2, 2, 3), Layout((64, 32), (32, 1))),
    Layout(((4, 8), 16), ((16, 64), 1)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_layout_offsets_through_z3_match_concrete(layout, mode):
    rng = np.random.default_rng(0)
    inner = layout.inner if isinstance(layout, ComposedLayout) else layout
    shape = tuple(inner.mode(i).size for i in range(inner.rank))
    names = [f"c{i}" for i in range(len(shape))]
    off = ir.layout_offset(layout, tuple(Z.var(n) for n in names), Z.OPS)
    for _ in range(12):
        c = tuple(int(rng.integers(0, s)) for s in shape)
        assert value(off, **dict(zip(names, c, strict=True))) == layout(c)


def test_tv_coords_through_z3_match_the_table(mode):
    tv = ir.TVLayout(Layout(((16, 16), (8, 4)), ((4, 512), (64, 1))), (128, 64))
    table = tv.coord_table()
    c = tv.coords(Z.var("t"), Z.var("v"), Z.OPS)
    for t, v in [(0, 0), (5, 7), (255, 31), (17, 12)]:
        assert [value(x, t=t, v=v) for x in c] == list(table[t, v])


def tag_of(tg: V.TagVal):
    s = z3.Solver()
    s.add(tg.cons)
    assert s.check() == z3.sat
    m = s.model()
    if z3.is_true(m.eval(tg.none, model_completion=True)):
        return None
    return tuple(
        "*" if z3.is_true(m.eval(st_, model_completion=True)) else m.eval(v, model_completion=True).as_long()
        for v, st_ in tg.comps
    )


def test_tag_algebra():
    Z.set_mode("int")
    a = V.tagged([Z.bv(3), Z.bv(7)], 2)
    b = V.tagged([Z.bv(3), Z.bv(9)], 2)
    star = a.replace(comps=[a.comps[0], (Z.bv(0), Z.TRUE)])
    none = V.untagged(2)
    assert z3.is_false(z3.simplify(V.agree(a, b)))
    assert z3.is_true(z3.simplify(V.agree(a, b, skip={1})))
    assert z3.is_true(z3.simplify(V.agree(star, b)))  # `*` agrees with anything
    assert z3.is_true(z3.simplify(V.agree(none, b)))  # a constant agrees with anything
    assert tag_of(V.merge(star, b)) == (3, 9)  # the tagged component fills the `*`
    assert tag_of(V.merge(none, a)) == (3, 7)
    assert tag_of(V.merge(none, none)) is None
    c = z3.Bool("c")
    s = z3.Solver()
    s.add(c)
    s.add(V.ite(c, a, b).comps[1][0] != 7)
    assert s.check() == z3.unsat
    assert z3.is_false(z3.simplify(V.same_pattern(star, b)))
    sel = Z.var("sel")
    pick = V.select(sel, [(Z.FALSE, a), (Z.TRUE, b)], 2)
    s = z3.Solver()
    s.add(pick.cons, pick.comps[1][0] != 9)
    assert s.check() == z3.unsat  # only the valid option can be chosen


@FAST
@given(st.sets(st.tuples(st.integers(0, 5), st.integers(0, 7)), min_size=1, max_size=30))
def test_boxes_cover_exactly(points):
    boxes = boxes_of(points)
    covered = {(i, j) for lo, hi in boxes for i in range(lo[0], hi[0]) for j in range(lo[1], hi[1])}
    assert covered == points
    assert sum((hi[0] - lo[0]) * (hi[1] - lo[1]) for lo, hi in boxes) == len(points)  # disjoint


def pipelined():
    # the three-stage schedule: two commit groups in the prologue, one per iteration
    return Analysis(compile_file("specs/gemm_pipelined.arg", {"STAGES": 3}))


def test_program_order_and_commit_groups():
    an = pipelined()
    an.finish(10)
    Z.set_mode("int")
    Z.begin_query()
    S = V.Session(an)
    ctx = V.Ctx([Z.bv(0)] * 3, Z.TRUE)
    copy_main = [w for w in an.sh_writes["sA"] if w.node.loops and w.node.loops[0].var == "kt"][0].node
    load = an.sh_reads["sA"][0].node
    wait = an.waits[0]

    def at(node, **cnt):
        inst = V.Inst(node)
        for L in node.loops:
            n = Z.bv(cnt[L.var])
            start, _ = L.bounds(S, ctx, inst)
            inst.cnt[L.var], inst.vals[L.var] = n, Z.add(start, Z.mul(n, Z.bv(L.step)))
        return inst

    s = z3.Solver()
    s.add(Z.var("K") == 160)
    assert s.check() == z3.sat
    ev = s.model()
    assert z3.is_true(
        ev.eval(P.before(at(copy_main, kt=2), at(load, kt=2)))
    )  # copy precedes load in the body
    assert z3.is_false(ev.eval(P.before(at(load, kt=2), at(copy_main, kt=2))))
    assert z3.is_true(ev.eval(P.before(at(load, kt=1), at(copy_main, kt=2))))  # earlier iteration first
    # commit groups: 2 in the prologue, one per iteration
    assert an.commits.exact
    g = an.group_of(S, ctx, at(copy_main, kt=3))
    assert ev.eval(g, model_completion=True).as_long() == 5
    assert ev.eval(an.group_of(S, ctx, at(wait, kt=3)), model_completion=True).as_long() == 5
    # the latest wait before the load of iteration 3 is the one of iteration 3
    cands = P.recent_before(S, ctx, wait, at(load, kt=3), 1)
    assert any(z3.is_true(ev.eval(Z.And(ex, Z.Eq(i.cnt["kt"], Z.bv(3))))) for i, ex in cands)


TRANSPOSE = """\
kernel tr<T=32>(x: f32[M, N]) -> out: f32[N, M]:
    grid(cdiv(N, T), cdiv(M, T))
    block(256)
    tag x[i, j] = (i, j)
    tag out[j, i] = (i, j) once
    m0 = block_id.y * T
    n0 = block_id.x * T
    s = shared(f32[T, T], layout=Swizzle(5, 0, 5) o (T, T):(T, 1))
    a = load(x[m0 : m0 + T, n0 : n0 + T], tv=(256, 4):(1, 256), mask=True)
    store(s, a)
    barrier()
    b = load(s, tv=((T, 8), 4):((T, 1), 8))
"""


@pytest.mark.parametrize("mode_", MODES)
def test_tags_through_swizzled_shared_memory_match_brute_force(mode_):
    """The tag of b[value v] of thread t, resolved through the swizzled shared tile, is the element
    of x the layouts put there (computed independently from the coordinate tables)."""
    k = compile_source(TRANSPOSE, "tr.arg")
    an = Analysis(k)
    an.finish(10)
    b = an.env["b"]
    table = b.typ.coords.coord_table()  # [T, V, 2]: coordinate of s each (t, v) reads
    for t, v in [(0, 0), (37, 2), (255, 3), (100, 1)]:
        q = Query(an, 10, mode_)
        S = q.S
        ctx = V.Ctx([Z.bv(1), Z.bv(2), Z.bv(0)], Z.TRUE)
        inst = V.Inst(None)
        tg = b.tag(S, ctx, inst, Z.bv(t), Z.bv(v))
        r, c = table[t, v]
        want = (2 * 32 + r, 1 * 32 + c)  # element (m0 + r, n0 + c) of x
        s = z3.Solver()
        s.add(*q.cons, Z.var("M") == 128, Z.var("N") == 128, tg.cons, z3.Not(tg.err))
        assert s.check() == z3.sat
        m = s.model()
        got = tuple(m.eval(x, model_completion=True) for x, _ in tg.comps)
        got = tuple(g.as_signed_long() if z3.is_bv_value(g) else g.as_long() for g in got)
        assert got == want
        s.add(z3.Or(*[x != w for (x, _), w in zip(tg.comps, want, strict=True)]))
        assert s.check() == z3.unsat  # and no other writer is possible
    Z.set_mode("int")


def test_loop_carried_accumulator_gets_an_invariant():
    an = pipelined()
    an.finish(10)
    assert [(c.name, c.mode) for c in an.cells] == [("acc", "first")]


def test_affine_induction_variable():
    src = """\
kernel aff(x: f32[M, N]) -> out: f32[M, N]:
    requires N % 256 == 0
    grid(M)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    row = block_id.x
    c = 0
    for it in range(N // 256):
        xs = load(x[row : row + 1, c : c + 256], tv=(256, 1):(1, 0))
        assert tag(xs)[1] // 256 == it
        store(out[row : row + 1, c : c + 256], xs)
        c = c + 256
"""
    from argus_verify import smt
    an = Analysis(compile_source(src, "aff.arg"))
    an.finish(10)
    assert [(c.name, c.mode) for c in an.cells] == [("c", "affine")]
    rep = smt.verify(compile_source(src, "aff.arg"))
    assert rep.exit_code == 0, rep.render_text()
