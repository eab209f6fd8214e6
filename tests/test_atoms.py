"""The tensor-core atom layouts of argus_verify/atoms.py against per-lane tables written here
independently, by hand, from the PTX ISA figures ("Matrix Fragments for mma.m16n8k16 with
floating point type", "Matrix Fragments for mma.m16n8k8", "Warp-level matrix load instruction:
ldmatrix"; docs.nvidia.com/cuda/parallel-thread-execution). These tables use the ISA's own
formulas (groupID, threadID_in_group), not the layout algebra; a wrong stride or mode order in
atoms.py fails here."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import atoms, ir
from argus_verify.layout import Layout


def isa_m16n8k16_a(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if i in (0, 1, 4, 5) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def isa_m16n8k16_b(lane, i):
    g, t = lane >> 2, lane % 4
    row = t * 2 + (i & 1) + (8 if i >= 2 else 0)
    return row, g


def isa_c_f32(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if i < 2 else g + 8
    return row, t * 2 + (i & 1)


def isa_m16n8k8_a(lane, i):
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def isa_m16n8k8_b(lane, i):
    g, t = lane >> 2, lane % 4
    return t * 2 + i, g


def isa_ldmatrix(lane, q, e, trans):
    """Matrix q, element e of the pair lane `lane` receives, as (row, col) of the stacked tile."""
    r, c = lane >> 2, 2 * (lane % 4) + e
    if trans:
        r, c = c, r
    return 8 * q + r, c


CASES = [
    ("m16n8k16", "a", 8, isa_m16n8k16_a),
    ("m16n8k16", "b", 4, isa_m16n8k16_b),
    ("m16n8k16", "c", 4, isa_c_f32),
    ("m16n8k8", "a", 4, isa_m16n8k8_a),
    ("m16n8k8", "b", 2, isa_m16n8k8_b),
    ("m16n8k8", "c", 4, isa_c_f32),
]


@pytest.mark.parametrize("atom,which,nvals,isa", CASES, ids=[f"{a}-{w}" for a, w, _, _ in CASES])
def test_mma_fragment_layouts_match_the_isa(atom, which, nvals, isa):
    tv = atoms.MMA_ATOMS[atom].operand(which)
    assert tv.threads == 32 and tv.values == nvals
    table = tv.coord_table()
    for lane in range(32):
        for i in range(nvals):
            assert tuple(table[lane, i]) == isa(lane, i), (atom, which, lane, i)
    # every element of the tile is held exactly once
    flat = tv.flat_table().ravel()
    assert sorted(flat.tolist()) == list(range(int(np.prod(tv.tile))))


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_layouts_match_the_isa(count, trans):
    tv = atoms.ldmatrix_layout(count, trans)
    table = tv.coord_table()
    assert table.shape == (32, 2 * count, 2)
    for lane in range(32):
        for q in range(count):
            for e in range(2):
                assert tuple(table[lane, 2 * q + e]) == isa_ldmatrix(lane, q, e, trans)
    addr = atoms.ldmatrix_addresses(count)
    for lane in range(8 * count):  # lanes 8q..8q+7 give rows 0..7 of matrix q
        assert addr(lane) == (8 * (lane // 8) + lane % 8) * 8


def test_ldmatrix_x4_is_the_m16n8k16_a_fragment():
    """x4 over the four 8x8 quadrants taken in the order (top-left, bottom-left, top-right,
    bottom-right) delivers exactly the A fragment: the reason ldmatrix feeds mma without shuffles."""
    ld = atoms.ldmatrix_layout(4, False).coord_table()
    a = atoms.MMA_ATOMS["m16n8k16"].a.coord_table()
    quadrant = [(0, 0), (8, 0), (0, 8), (8, 8)]
    for lane in range(32):
        for v in range(8):
            r, c = ld[lane, v]
            q = r // 8
            assert (quadrant[q][0] + r % 8, quadrant[q][1] + c) == tuple(a[lane, v])
    # and x2.trans over the two k halves of a row-major [k, n] tile is the B fragment
    ldt = atoms.ldmatrix_layout(2, True).coord_table()
    b = atoms.MMA_ATOMS["m16n8k16"].b.coord_table()
    assert (ldt == b).all()


def _frag(tv: ir.TVLayout, warps_m: int, warps_n: int, mi: int, ni: int, which: str) -> ir.FragType:
    """A block fragment: warps (warps_m x warps_n, warp index m fastest), each holding mi x ni atom
    instances (rows of a, columns of b) of the atom layout `tv`."""
    R, C = tv.tile
    lane_s, val_s = tv.layout.mode(0), tv.layout.mode(1)
    if which == "a":
        tile = (warps_m * mi * R, C)
        W = tile[1]
        resc = lambda d: (d // C) * W + d % C  # noqa: E731
        thr = Layout((lane_s.shape, warps_m, warps_n), (tuple(resc(s) for s in lane_s.stride), mi * R * W, 0))
        val = Layout((val_s.shape, mi), (tuple(resc(s) for s in val_s.stride) if isinstance(val_s.stride, tuple)
                                         else resc(val_s.stride), R * W))
    elif which == "b":
        tile = (R, warps_n * ni * C)
        W = tile[1]
        resc = lambda d: (d // C) * W + d % C  # noqa: E731
        thr = Layout((lane_s.shape, warps_m, warps_n), (tuple(resc(s) for s in lane_s.stride), 0, ni * C))
        val = Layout((val_s.shape, ni), (tuple(resc(s) for s in val_s.stride) if isinstance(val_s.stride, tuple)
                                         else resc(val_s.stride), C))
    else:
        tile = (warps_m * mi * R, warps_n * ni * C)
        W = tile[1]
        resc = lambda d: (d // C) * W + d % C  # noqa: E731
        thr = Layout((lane_s.shape, warps_m, warps_n), (tuple(resc(s) for s in lane_s.stride), mi * R * W, ni * C))
        val = Layout((val_s.shape, mi, ni), (tuple(resc(s) for s in val_s.stride), R * W, C))
    return ir.FragType("bf16" if which != "c" else "f32", ir.TVLayout(Layout((thr.shape, val.shape),
                                                                            (thr.stride, val.stride)), tile))


def test_run_mma_computes_the_product_through_the_layouts():
    atom = atoms.MMA_ATOMS["m16n8k16"]
    ta = _frag(atom.a, 2, 2, 2, 1, "a")
    tb = _frag(atom.b, 2, 2, 1, 2, "b")
    tc = _frag(atom.c, 2, 2, 2, 2, "c")
    plan = atoms.mma_plan("m16n8k16", ta, tb, tc)
    assert len(plan.steps) == 4
    rng = np.random.default_rng(0)
    A = rng.integers(-4, 5, ta.tile).astype(np.float32)
    B = rng.integers(-4, 5, tb.tile).astype(np.float32)
    C = rng.integers(-4, 5, tc.tile).astype(np.float32)

    def regs(typ, X):
        ct = typ.coords.coord_table()
        return X[ct[..., 0], ct[..., 1]]

    d = atoms.run_mma(plan, regs(ta, A), regs(tb, B), regs(tc, C))
    want = C + A @ B
    ct = tc.coords.coord_table()
    assert np.array_equal(d, want[ct[..., 0], ct[..., 1]])
    # a B fragment with each lane's k pair swapped (the register pair order reversed) is still
    # planned (it covers the same block) and then computes something else
    bad = regs(tb, B).copy()
    bad[:, 0::2], bad[:, 1::2] = regs(tb, B)[:, 1::2], regs(tb, B)[:, 0::2]
    assert not np.array_equal(atoms.run_mma(plan, regs(ta, A), bad, regs(tc, C)), d)


def test_mma_plan_refuses_a_foreign_accumulator_layout():
    atom = atoms.MMA_ATOMS["m16n8k16"]
    ta = _frag(atom.a, 1, 1, 1, 1, "a")
    tb = _frag(atom.b, 1, 1, 1, 1, "b")
    tc = ir.FragType("f32", ir.TVLayout(Layout((32, 4), (4, 1)), (16, 8)))
    with pytest.raises(ValueError, match="accumulator layout"):
        atoms.mma_plan("m16n8k16", ta, tb, tc)
