"""Tests for argus_verify.layout: CuTe documentation examples plus brute-force property checks.

Doc references: "CuTe Layout Algebra" (cutlass media/docs/cpp/cute/02_layout_algebra.md), cited per
test as [algebra].  Every property test compares against an independent enumeration of the layout
function (``brute``), not against the implementation's own index arithmetic.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_verify.layout import (
    ComposedLayout,
    IntOps,
    Layout,
    LayoutError,
    NumpyOps,
    Swizzle,
    coalesce,
    col_major,
    compatible,
    complement,
    compose,
    composition,
    congruent,
    flatten,
    functionally_equal,
    inverse_table,
    is_int,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    product,
    right_inverse,
    row_major,
    zipped_divide,
)

FAST = settings(max_examples=60, deadline=None)
L = Layout.parse


# ---------------------------------------------------------------------------------------------
# Independent reference semantics
# ---------------------------------------------------------------------------------------------


def brute(layout: Layout) -> list[int]:
    """Images in colexicographic order by enumerating coordinates (first mode fastest)."""
    shp, std = flatten(layout.shape), flatten(layout.stride)
    out = []
    for rev in itertools.product(*[range(s) for s in reversed(shp)]):
        crd = rev[::-1]
        out.append(sum(c * d for c, d in zip(crd, std, strict=True)))
    return out


def ext(layout: Layout, x: int) -> int:
    """The natural extension beyond size: the last flat coordinate is not reduced."""
    shp, std = flatten(layout.shape), flatten(layout.stride)
    head = product(shp[:-1])  # size of the box spanned by all but the last leaf
    q, r = divmod(x, head)
    return brute(layout)[r] + q * std[-1]  # brute(...)[r] for r < head has last coordinate 0


def idx2crd(i: int, shape):
    """Hierarchical colexicographic coordinate of flat index i (congruent to shape)."""
    if is_int(shape):
        return i
    out = []
    for k, sub in enumerate(shape):
        n = product(sub)
        if k == len(shape) - 1:
            out.append(idx2crd(i, sub))
        else:
            out.append(idx2crd(i % n, sub))
            i //= n
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


EXTENTS = st.integers(1, 4)
STRIDES = st.integers(0, 12)
GAPS = st.integers(1, 3)


def shapes(extents=EXTENTS, max_leaves=4):
    return st.recursive(
        extents,
        lambda ch: st.lists(ch, min_size=1, max_size=3).map(tuple),
        max_leaves=max_leaves,
    )


def _rebuild(tree, leaves):
    it = iter(leaves)

    def go(t):
        if is_int(t):
            return next(it)
        return tuple(go(e) for e in t)

    return go(tree)


@st.composite
def layouts(draw, extents=EXTENTS, strides=STRIDES, max_leaves=4):
    shape = draw(shapes(extents, max_leaves))
    n = len(flatten(shape))
    std = draw(st.lists(strides, min_size=n, max_size=n))
    return Layout(shape, _rebuild(shape, std))


@st.composite
def injective_layouts(draw, extents=EXTENTS, gaps=GAPS, max_leaves=4):
    """A permutation of the modes of a compact layout with gaps: always injective, complement exists."""
    shape = draw(shapes(extents, max_leaves))
    leaves = flatten(shape)
    order = draw(st.permutations(range(len(leaves))))
    std = [0] * len(leaves)
    cur = 1
    for k in order:
        cur *= draw(gaps)
        std[k] = cur
        cur *= leaves[k]
    return Layout(shape, _rebuild(shape, std))


def bijective_layouts(extents=EXTENTS, max_leaves=4):
    return injective_layouts(extents, st.just(1), max_leaves)


POW2 = st.sampled_from([1, 2, 4])


# ---------------------------------------------------------------------------------------------
# Construction, printing, evaluation
# ---------------------------------------------------------------------------------------------


def test_construction_normalises_and_defaults():
    a = Layout([4, [2, 3]], [1, [4, 8]])
    assert a.shape == (4, (2, 3)) and a.stride == (1, (4, 8))
    assert Layout(np.int64(8), np.int32(1)) == L("8:1")
    assert Layout((4, 8)) == L("(4,8):(1,4)")  # default stride: compact column-major
    assert hash(a) == hash(Layout((4, (2, 3)), (1, (4, 8))))


def test_bad_layouts_raise_helpfully():
    with pytest.raises(LayoutError, match="not congruent"):
        Layout((2, 3), (1, (2, 4)))
    with pytest.raises(LayoutError, match="not congruent"):
        Layout((2, 3), 1)
    with pytest.raises(LayoutError, match="non-positive"):
        Layout((2, 0), (1, 2))
    with pytest.raises(LayoutError, match="int or a nested tuple"):
        Layout((2, 2.5), (1, 2))
    with pytest.raises(LayoutError):
        L("(2,3)")
    with pytest.raises(LayoutError):
        L("(2,3:(1,2)")
    with pytest.raises(LayoutError, match="out of range"):
        L("(2,3):(1,2)")((2, 0))
    with pytest.raises(LayoutError, match="not compatible"):
        L("(2,3):(1,2)")((1, 0, 0))
    with pytest.raises(LayoutError, match="negative"):
        L("8:1")(-1)
    with pytest.raises(LayoutError):
        L("(2,3):(1,2)").mode(2)


def test_str_cute_style():
    assert str(L("(6,2):(8,2)")) == "(6,2):(8,2)"
    assert str(Layout(((2, 2), 3), ((24, 2), 8))) == "((2,2),3):((24,2),8)"
    assert str(Layout(8, 1)) == "8:1"
    assert str(L("(_5,(_2,_2)):(_16,(_80,_4))")) == "(5,(2,2)):(16,(80,4))"
    assert repr(L("8:1")) == "Layout('8:1')"


@FAST
@given(layouts(strides=st.integers(-3, 12)))
def test_parse_roundtrip(a):
    assert L(str(a)) == a


def test_basic_properties():
    a = L("((2,2),3):((24,2),8)")
    assert (a.size, a.cosize, a.rank, a.depth) == (12, 43, 2, 2)
    assert L("8:1").rank == 1 and L("8:1").depth == 0
    assert a.mode(0) == L("(2,2):(24,2)") and a.mode(1) == L("3:8")
    assert L("8:0").cosize == 1
    assert L("(4,2):(1,-4)").cosize == 4  # images 0..3 and -4..-1
    assert make_layout().size == 1


def test_row_and_col_major():
    assert row_major((4, 8)) == L("(4,8):(8,1)")
    assert col_major((4, 8)) == L("(4,8):(1,4)")
    assert row_major((2, (3, 4))) == L("(2,(3,4)):(12,(4,1))")
    assert col_major(5) == L("5:1")
    assert row_major((4, 8))((1, 2)) == 10


@FAST
@given(layouts(strides=st.integers(-3, 12)))
def test_call_flat_and_coordinates_agree_with_enumeration(a):
    ref = brute(a)
    for i, want in enumerate(ref):
        assert a(i) == want
        assert a(idx2crd(i, a.shape)) == want
        if not is_int(a.shape):  # hierarchical: one int per top-level mode
            top = []
            j = i
            for k, sub in enumerate(a.shape):
                n = product(sub)
                top.append(j if k == len(a.shape) - 1 else j % n)
                j //= n
            assert a(tuple(top)) == want
    assert np.array_equal(a.map_all(), np.array(ref, dtype=np.int64))
    assert a.cosize == max(ref) + 1


@FAST
@given(layouts(strides=st.integers(-3, 12)), st.integers(0, 200))
def test_call_natural_extension(a, x):
    assert a(x) == ext(a, x)


@FAST
@given(layouts(strides=st.integers(-3, 12)))
def test_apply_intops_numpyops_equal_call(a):
    ref = brute(a)
    idx = np.arange(a.size, dtype=np.int64)
    # a constant layout yields ops.const(0), a numpy scalar that broadcasts
    assert np.array_equal(np.broadcast_to(a.apply(idx, NumpyOps()), idx.shape), np.array(ref))
    assert [a.apply(i, IntOps()) for i in range(a.size)] == ref
    wrap = np.arange(3 * a.size, dtype=np.int64)
    got = np.broadcast_to(a.apply(wrap, NumpyOps(), bounded=False), wrap.shape)
    assert np.array_equal(got, np.array(ref * 3))
    assert [a.apply(i, IntOps(), bounded=False) for i in range(3 * a.size)] == ref * 3


class StrOps:
    """Records the expression so we can check that trivial operations are skipped."""

    def const(self, c):
        return str(c)

    def add(self, a, b):
        return f"({a} + {b})"

    def mul(self, a, c):
        return f"{a}*{c}"

    def floordiv(self, a, c):
        return f"{a}/{c}"

    def mod(self, a, c):
        return f"{a}%{c}"

    def xor(self, a, b):
        return f"({a} ^ {b})"

    def and_(self, a, c):
        return f"({a} & {c})"

    def shr(self, a, c):
        return f"({a} >> {c})"

    def shl(self, a, c):
        return f"({a} << {c})"


def test_apply_skips_trivial_operations():
    ops = StrOps()
    assert L("(4,8):(1,4)").apply("i", ops) == "i"  # coalesces to 32:1
    assert L("(4,8):(1,4)").apply("i", ops, bounded=False) == "i%32"
    assert row_major((4, 8)).apply("i", ops) == "(i%4*8 + i/4)"
    assert L("(4,8):(0,1)").apply("i", ops) == "i/4"
    assert L("(4,8):(0,0)").apply("i", ops) == "0"
    assert Swizzle(3, 3, 3).apply("x", ops) == "(x ^ ((x & 448) >> 3))"
    assert Swizzle(2, 0, -3).apply("x", ops) == "(x ^ ((x & 3) << 3))"


def test_apply_with_z3_proves_equivalence():
    z3 = pytest.importorskip("z3")

    class Z3Ops(IntOps):
        def const(self, c):
            return z3.IntVal(c)

        def floordiv(self, a, c):
            return a / c  # z3 integer division (floor for positive divisors)

    a = L("((2,2),3):((24,2),8)")
    b = composition(L("(6,2):(8,2)"), L("(4,3):(3,1)"))
    i = z3.Int("i")
    s = z3.Solver()
    s.add(i >= 0, i < a.size, a.apply(i, Z3Ops()) != b.apply(i, Z3Ops()))
    assert s.check() == z3.unsat


# ---------------------------------------------------------------------------------------------
# Coalesce
# ---------------------------------------------------------------------------------------------


def test_coalesce_doc_examples():
    # [algebra] "Coalesce": (_2,(_1,_6)):(_1,(_6,_2)) -> _12:_1 ; by-mode with Step<_1,_1> -> (_2,_6):(_1,_2)
    a = L("(2,(1,6)):(1,(6,2))")
    assert coalesce(a) == L("12:1")
    assert coalesce(a, (1, 1)) == L("(2,6):(1,2)")
    assert coalesce(a, (1, 1)) == make_layout(coalesce(a.mode(0)), coalesce(a.mode(1)))
    # [algebra] the four binary cases
    assert coalesce(L("(4,1):(3,7)")) == L("4:3")
    assert coalesce(L("(1,4):(7,3)")) == L("4:3")
    assert coalesce(L("(4,5):(3,12)")) == L("20:3")
    assert coalesce(L("(4,5):(3,11)")) == L("(4,5):(3,11)")
    # [algebra] "(_2,_4):(_1,_2) acts identically to _8:_1"
    assert coalesce(L("(2,4):(1,2)")) == L("8:1")
    assert coalesce(L("(1,1):(3,5)")) == L("1:0")


@FAST
@given(layouts(strides=st.integers(-3, 12)))
def test_coalesce_same_function(a):
    c = coalesce(a)
    assert c.size == a.size and c.depth <= 1
    assert brute(c) == brute(a)
    if not is_int(a.shape):
        b = coalesce(a, (1,) * a.rank)
        assert b.rank == a.rank and brute(b) == brute(a)


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------


def test_composition_doc_examples():
    # [algebra] "Composition": (6,2):(8,2) o (4,3):(3,1) = ((2,2),3):((24,2),8)
    r = composition(L("(6,2):(8,2)"), L("(4,3):(3,1)"))
    assert r == L("((2,2),3):((24,2),8)")
    assert compatible(L("(4,3):(3,1)").shape, r.shape)
    assert [r(i) for i in range(12)] == [0, 24, 2, 26, 8, 32, 10, 34, 16, 40, 18, 42]
    # [algebra] Example 2: 20:2 o (5,4):(4,1) = (5,4):(8,2)
    assert composition(L("20:2"), L("(5,4):(4,1)")) == L("(5,4):(8,2)")
    # [algebra] Example 3: (10,2):(16,4) o (5,4):(1,5) = (5,(2,2)):(16,(80,4)) (static-int form)
    assert composition(L("(10,2):(16,4)"), L("(5,4):(1,5)")) == L("(5,(2,2)):(16,(80,4))")
    # [algebra] trivial case a:b o s:d = s:(b*d)
    assert composition(L("12:3"), L("4:2")) == L("4:6")
    # [algebra] "(3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z)" (size-1 mode coalesced away)
    w, x, y, z = 1, 100, 1000, 10000
    r = composition(Layout((3, 6, 2, 8), (w, x, y, z)), L("16:9"))
    assert functionally_equal(r, Layout((1, 2, 2, 4), (9 * w, 3 * x, y, z)))
    assert r == Layout((2, 2, 4), (3 * x, y, z))


def test_composition_by_mode_doc_examples():
    # [algebra] "By-mode Composition": (12,(4,8)):(59,(13,1)) o <3:4, 8:2> = (_3,(2,4)):(236,(26,1))
    a = L("(12,(4,8)):(59,(13,1))")
    r = composition(a, (L("3:4"), L("8:2")))
    assert r == L("(3,(2,4)):(236,(26,1))")
    assert r == make_layout(composition(a.mode(0), L("3:4")), composition(a.mode(1), L("8:2")))
    # [algebra] a Shape tiler (3,8) means <3:1, 8:1>: result (_3,(4,2)):(59,(13,1))
    assert composition(a, (3, 8)) == L("(3,(4,2)):(59,(13,1))")
    # None keeps a mode unchanged
    assert composition(a, (None, 8)) == L("(12,(4,2)):(59,(13,1))")


def test_composition_undefined_raises():
    with pytest.raises(LayoutError, match="not defined: stride divisibility"):
        composition(L("(3,4):(1,10)"), L("4:2"))
    with pytest.raises(LayoutError, match="not defined: shape divisibility"):
        composition(L("(4,4):(1,10)"), L("6:1"))
    with pytest.raises(LayoutError, match="negative"):
        composition(L("8:1"), L("2:-1"))
    # non-injective right operand whose modes carry inside A: A(B(3)) = A(2) = 10 but no layout fits
    with pytest.raises(LayoutError, match="overlap in mode 0"):
        composition(L("(2,4):(1,10)"), L("(2,2):(1,1)"))
    # ... while on an unbounded (1-D) A the same B composes fine
    assert composition(L("8:3"), L("(2,2):(1,1)")) == L("(2,2):(3,3)")
    with pytest.raises(LayoutError, match="exceeds rank"):
        composition(L("(4,4):(1,4)"), (2, 2, 2))


def test_composition_relaxed_when_no_wraparound():
    # (3,4):(1,10) o 2:2 is representable (2:2) although 2 does not divide 3.
    r = composition(L("(3,4):(1,10)"), L("2:2"))
    assert r == L("2:2")


def _check_composition(a, b, r):
    assert compatible(b.shape, r.shape)
    assert r.size == b.size
    for i, bi in enumerate(brute(b)):
        assert r(i) == a(bi), (str(a), str(b), str(r), i)


@FAST
@given(layouts(extents=POW2, strides=st.integers(-3, 9)), injective_layouts(extents=POW2, gaps=POW2))
def test_composition_pow2_injective_always_defined(a, b):
    # power-of-two extents/strides satisfy every divisibility condition; injective B never carries
    _check_composition(a, b, composition(a, b))


@settings(max_examples=150, deadline=None)
@given(layouts(strides=st.integers(-3, 12)), layouts(strides=st.integers(0, 6)))
def test_composition_general_defined_or_error(a, b):
    try:
        r = composition(a, b)
    except LayoutError as e:
        assert "not defined" in str(e)
        return
    _check_composition(a, b, r)


@FAST
@given(layouts(max_leaves=3), st.data())
def test_composition_by_mode_tiler(a, data):
    if is_int(a.shape):
        return
    tiler = []
    for m in a.modes():
        tiler.append(data.draw(st.sampled_from([None, m.size]) | st.integers(1, m.size)))
    try:
        r = composition(a, tuple(tiler))
    except LayoutError:
        return
    assert r.rank == a.rank
    for i, (m, t) in enumerate(zip(a.modes(), tiler, strict=True)):
        want = m if t is None else composition(m, Layout(t, 1))
        assert r.mode(i) == want
        assert brute(r.mode(i)) == brute(m)[: r.mode(i).size]


# ---------------------------------------------------------------------------------------------
# Complement
# ---------------------------------------------------------------------------------------------


def test_complement_doc_examples():
    # [algebra] "Complement Examples"
    assert complement(L("4:1"), 24) == L("6:4")
    assert complement(L("6:4"), 24) == L("4:1")
    assert complement(L("(4,6):(1,4)"), 24) == L("1:0")
    assert complement(L("4:2"), 24) == L("(2,3):(1,8)")
    assert complement(L("(2,4):(1,6)"), 24) == L("3:2")
    assert complement(L("(2,2):(1,6)"), 24) == L("(3,2):(2,12)")
    # the [algebra] "(_4,7)" shape cotarget: only its size matters
    assert complement(L("4:2"), (4, 6)) == complement(L("4:2"), 24)
    # default cotarget is cosize(layout)
    assert complement(L("4:2")) == L("2:1")


def test_complement_errors():
    with pytest.raises(LayoutError, match="not injective"):
        complement(L("(2,2):(1,1)"), 8)
    with pytest.raises(LayoutError, match="negative"):
        complement(L("4:-1"), 8)


def _check_complement(a, m, r):
    ra = brute(r)
    assert all(x < y for x, y in zip(ra, ra[1:], strict=False)), "complement must be ordered"
    img = set(brute(a))
    assert not any(v in img for v in ra[1:]), "complement images must avoid the layout's"
    joint = make_layout(a, r)
    assert joint.cosize >= m
    if joint.size == m:  # exact fit: (L, L*) is a bijection onto [0, m)
        assert sorted(brute(joint)) == list(range(m))


@FAST
@given(injective_layouts(), st.integers(1, 4), st.integers(0, 5))
def test_complement_properties_injective(a, mult, extra):
    m = a.cosize * mult + extra
    _check_complement(a, m, complement(a, m))
    # exact multiple of the covering extent: contiguous cover
    m2 = int(np.prod(flatten(make_layout(a, complement(a)).shape))) * mult
    r2 = complement(a, m2)
    assert sorted(brute(make_layout(a, r2))) == list(range(m2))


@FAST
@given(layouts(), st.integers(1, 80))
def test_complement_general_defined_or_error(a, m):
    try:
        r = complement(a, m)
    except LayoutError:
        return
    _check_complement(a, m, r)


# ---------------------------------------------------------------------------------------------
# Divide and product
# ---------------------------------------------------------------------------------------------


def test_logical_divide_doc_examples():
    # [algebra] "Logical Divide 1-D Example"
    a, b = L("(4,2,3):(2,1,8)"), L("4:2")
    assert complement(b, a.size) == L("(2,3):(1,8)")
    assert make_layout(b, complement(b, a.size)) == L("(4,(2,3)):(2,(1,8))")
    assert logical_divide(a, b) == L("((2,2),(2,3)):((4,1),(2,8))")
    # [algebra] "Logical Divide 2-D Example": tiler <3:3, (2,4):(1,8)>; first mode of each mode is
    # (3,(2,4)):(177,(13,2)).  Full result worked out by hand from the definition.
    a2 = L("(9,(4,8)):(59,(13,1))")
    tiler = (L("3:3"), L("(2,4):(1,8)"))
    r = logical_divide(a2, tiler)
    assert make_layout(r.mode(0).mode(0), r.mode(1).mode(0)) == L("(3,(2,4)):(177,(13,2))")
    assert r == L("((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))")
    # [algebra] zipped_divide: ((TileM,TileN),(RestM,RestN)) with shape ((3,8),(3,4)) and
    # layout<0>(zipped_divide(a, b)) == composition(a, b)
    z = zipped_divide(a2, tiler)
    assert tuple(m.size for m in z.mode(0).modes()) == (3, 8)
    assert tuple(m.size for m in z.mode(1).modes()) == (3, 4)
    assert z.mode(0) == composition(a2, tiler)


def test_logical_product_doc_examples():
    # [algebra] "Logical Product 1-D Example": A = (2,2):(4,1), B = 6:1
    a = L("(2,2):(4,1)")
    assert complement(a, 24) == L("(2,3):(2,8)")
    assert logical_product(a, L("6:1")) == L("((2,2),(2,3)):((4,1),(2,8))")
    # same A with B = (4,2):(2,1) (the figure in [algebra]); result worked out by hand
    assert logical_product(a, L("(4,2):(2,1)")) == L("((2,2),(4,2)):((4,1),(8,2))")


@FAST
@given(layouts(extents=POW2, strides=st.integers(0, 9)), injective_layouts(extents=POW2, gaps=POW2))
def test_logical_divide_pow2_is_permutation(a, b):
    if b.cosize > a.size:
        return
    r = logical_divide(a, b)
    assert r.rank == 2 and r.size == a.size
    assert sorted(brute(r)) == sorted(brute(a))  # same elements, regrouped into (tile, rest)
    assert functionally_equal(r.mode(0), composition(a, b))
    bb = make_layout(b, complement(b, a.size))
    assert [r(i) for i in range(r.size)] == [a(j) for j in brute(bb)]


@FAST
@given(layouts(), layouts(strides=st.integers(0, 6)))
def test_logical_divide_general(a, b):
    try:
        r = logical_divide(a, b)
    except LayoutError:
        return
    bb = make_layout(b, complement(b, a.size))
    assert [r(i) for i in range(r.size)] == [a(j) for j in brute(bb)]
    assert compatible(bb.shape, r.shape)


@FAST
@given(injective_layouts(extents=POW2, gaps=POW2), injective_layouts(extents=POW2, gaps=POW2))
def test_logical_product_pow2(a, b):
    r = logical_product(a, b)
    assert r.mode(0) == a
    rest = complement(a, a.size * b.cosize)
    assert brute(r.mode(1)) == [rest(j) for j in brute(b)]
    imgs = brute(r)
    assert len(set(imgs)) == len(imgs) == a.size * b.size  # unique replication of A


@FAST
@given(layouts(max_leaves=3), layouts(max_leaves=2))
def test_logical_product_general(a, b):
    try:
        r = logical_product(a, b)
    except LayoutError:
        return
    assert r.mode(0) == a
    rest = complement(a, a.size * b.cosize)
    assert brute(r.mode(1)) == [rest(j) for j in brute(b)]


def test_by_mode_divide_and_product():
    a = row_major((8, 16))
    r = logical_divide(a, (4, 8))
    assert r.mode(0) == logical_divide(a.mode(0), L("4:1"))
    assert r.mode(1) == logical_divide(a.mode(1), L("8:1"))
    p = logical_product(L("(2,3):(1,2)"), (L("2:1"), None))
    assert p.mode(0) == logical_product(L("2:1"), L("2:1")) and p.mode(1) == L("3:2")


# ---------------------------------------------------------------------------------------------
# Inverses
# ---------------------------------------------------------------------------------------------


def test_inverse_examples():
    assert right_inverse(row_major((4, 8))) == L("(8,4):(4,1)")
    assert right_inverse(L("(4,8):(1,4)")) == L("32:1")
    assert right_inverse(L("4:2")) == L("1:0")
    assert left_inverse(L("4:2")) == L("(2,4):(4,1)")
    with pytest.raises(LayoutError, match="not injective"):
        left_inverse(L("(4,2):(1,0)"))
    with pytest.raises(LayoutError, match="does not exist"):
        left_inverse(L("(2,2):(1,1)"))


@FAST
@given(layouts(strides=st.integers(-2, 12)))
def test_right_inverse_property(a):
    r = right_inverse(a)
    for i in range(r.size):
        assert a(r(i)) == i


@FAST
@given(bijective_layouts())
def test_inverses_of_bijections_are_full(a):
    r = right_inverse(a)
    assert r.size == a.size
    assert [a(r(i)) for i in range(a.size)] == list(range(a.size))
    assert [r(a(i)) for i in range(a.size)] == list(range(a.size))
    t = inverse_table(a)
    assert np.array_equal(a.map_all()[t], np.arange(a.size))


@FAST
@given(injective_layouts())
def test_left_inverse_property(a):
    r = left_inverse(a)
    assert [r(v) for v in brute(a)] == list(range(a.size))


def test_inverse_table_rejects_non_bijections():
    with pytest.raises(LayoutError, match="not a bijection"):
        inverse_table(L("4:2"))
    with pytest.raises(LayoutError, match="not a bijection"):
        inverse_table(L("(2,2):(1,0)"))


# ---------------------------------------------------------------------------------------------
# Swizzles and composed layouts
# ---------------------------------------------------------------------------------------------


SWIZZLES = st.builds(
    lambda b, m, extra, neg: Swizzle(b, m, -(b + extra) if neg else b + extra),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 2),
    st.booleans(),
)


def test_swizzle_basics():
    s = Swizzle(3, 3, 3)
    assert str(s) == "Swizzle(3,3,3)"
    assert s(0b111_000_101) == 0b111_111_101
    assert s(0b101_000_000) == 0b101_101_000
    assert Swizzle(2, 0, -3)(0b00_011) == 0b11_011
    assert Swizzle(0, 4, 0)(12345) == 12345
    with pytest.raises(LayoutError, match="overlap"):
        Swizzle(3, 0, 2)
    with pytest.raises(LayoutError, match="non-negative"):
        Swizzle(1, -1, 1)
    with pytest.raises(LayoutError, match="ints"):
        Swizzle(1.5, 0, 2)


@FAST
@given(SWIZZLES, st.integers(1, 4))
def test_swizzle_involution_and_bijection(s, blocks):
    n = s.period * blocks
    xs = np.arange(n, dtype=np.int64)
    ys = s(xs)
    assert np.array_equal(s(ys), xs)
    assert np.array_equal(np.sort(ys), xs)
    assert np.array_equal(s.apply(xs, NumpyOps()), ys)
    assert [s.apply(int(x), IntOps()) for x in xs[:64]] == [int(y) for y in ys[:64]]
    if s.shift > 0:  # the brief's formula
        b, m, sh = s.bits, s.base, s.shift
        assert all(s(x) == x ^ ((x & (((1 << b) - 1) << (m + sh))) >> sh) for x in range(min(n, 512)))


@FAST
@given(SWIZZLES, layouts(strides=st.integers(0, 16)))
def test_composed_layout(s, inner):
    c = ComposedLayout(s, inner)
    want = [s(v) for v in brute(inner)]
    assert [c(i) for i in range(c.size)] == want
    assert np.array_equal(c.map_all(), np.array(want, dtype=np.int64))
    got = np.broadcast_to(c.apply(np.arange(c.size), NumpyOps()), (c.size,))
    assert np.array_equal(got, np.array(want))
    assert [c.apply(i, IntOps()) for i in range(c.size)] == want
    assert c.cosize >= max(want) + 1 and c.cosize >= inner.cosize
    assert (c.size, c.shape) == (inner.size, inner.shape)


def test_composed_layout_str_and_compose():
    c = compose(Swizzle(3, 3, 3), row_major((8, 64)))
    assert isinstance(c, ComposedLayout)
    assert str(c) == "Swizzle(3,3,3) o (8,64):(64,1)"
    assert c.cosize == 512
    assert inverse_table(c)[c(100)] == 100
    assert compose(L("(6,2):(8,2)"), L("(4,3):(3,1)")) == L("((2,2),3):((24,2),8)")
    # (S o A) o B == S o (A o B); divide keeps the swizzle
    cb = compose(c, L("(8,8):(64,1)"))
    assert isinstance(cb, ComposedLayout) and all(cb(i) == c(L("(8,8):(64,1)")(i)) for i in range(64))
    d = logical_divide(c, (L("4:1"), L("16:1")))
    assert isinstance(d, ComposedLayout) and d.outer == c.outer
    with pytest.raises(LayoutError):
        compose(L("8:1"), Swizzle(1, 0, 1))
    with pytest.raises(LayoutError):
        compose(Swizzle(1, 0, 1), c)
    with pytest.raises(LayoutError, match="needs"):
        ComposedLayout(L("8:1"), Swizzle(1, 0, 1))


# ---------------------------------------------------------------------------------------------
# Helpers and speed
# ---------------------------------------------------------------------------------------------


def test_inttuple_helpers():
    assert flatten((1, (2, (3,)), 4)) == (1, 2, 3, 4)
    assert product((2, (3, 4))) == 24 and product(()) == 1
    assert congruent((1, (2, 3)), (4, (5, 6))) and not congruent((1, 2), (1, (2,)))
    assert compatible(12, (3, 4)) and compatible((4, 3), ((2, 2), 3)) and not compatible((3, 4), 12)


def test_map_all_is_fast():
    a = row_major((256, 256))
    c = ComposedLayout(Swizzle(3, 3, 3), a)
    t0 = time.perf_counter()
    for _ in range(10):
        m = a.map_all()
        mc = c.map_all()
        lay = logical_divide(row_major((256, 256)), (L("64:1"), L("64:1")))
        lay.map_all()
    per = (time.perf_counter() - t0) / 10
    assert m.shape == (65536,) and mc.shape == (65536,)
    assert m[257] == 257 and np.array_equal(np.sort(mc), np.arange(65536))
    assert per < 0.05, f"map_all too slow: {per * 1e3:.1f} ms"
