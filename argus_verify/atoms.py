"""Tensor-core atoms: the thread-value layouts of mma.sync and ldmatrix, written once.

Every layout here is a layout-algebra object (`ir.TVLayout`: ((lane modes), (value modes)) ->
row-major flat index of the atom's tile). The interpreter executes an atom through these layouts,
the verifier pairs products through them and the lowering emits the instruction from them; nothing
else in the project spells a fragment layout of the ISA. tests/test_atoms.py checks each one
against a per-lane table written independently from the PTX ISA's figures.

Source of the layouts: NVIDIA PTX ISA (release 8.x), sections "Matrix Fragments for mma.m16n8k16
with floating point type", "Matrix Fragments for mma.m16n8k8" (.f16/.bf16) and "Warp-level matrix
load instruction: ldmatrix". With groupID = lane >> 2 and threadID_in_group = lane % 4:

* m16n8k16 A (16 x 16, four .b32 registers = eight 16-bit values a0..a7): row groupID (+8 for
  a2, a3, a6, a7), column 2 * threadID_in_group + (i & 1) (+8 for a4..a7).
* m16n8k16 B (16 x 8, b0..b3): row (k) 2 * threadID_in_group + (i & 1) (+8 for b2, b3), column
  groupID.
* C / D in f32 (16 x 8, c0..c3): row groupID (+8 for c2, c3), column 2 * threadID_in_group + (i & 1).
* m16n8k8 A (16 x 8, a0..a3): as C. B (8 x 8, b0, b1): row 2 * threadID_in_group + i, column groupID.
* ldmatrix .m8n8 .b16: lanes 8q .. 8q + 7 give the addresses of rows 0..7 of matrix q (q < count);
  lane l receives, in register q, row l >> 2, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix q;
  with .trans it receives column l >> 2, rows 2 (l % 4) and 2 (l % 4) + 1 instead.

This module is core: it imports no stage.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.layout import Layout

WARP = 32


def _tv(thread: tuple, values: tuple, tile: tuple) -> ir.TVLayout:
    """A warp-level TV layout from (shape, stride) of its lane mode and of its value mode."""
    return ir.TVLayout(Layout((thread[0], values[0]), (thread[1], values[1])), tile)


@attrs.frozen
class MmaAtom:
    """One mma.sync shape: tiles a (M, K), b (K, N), c (M, N) and their lane/value layouts."""

    name: str
    M: int
    N: int
    K: int
    a: ir.TVLayout
    b: ir.TVLayout
    c: ir.TVLayout

    def operand(self, which: str) -> ir.TVLayout:
        return {"a": self.a, "b": self.b, "c": self.c}[which]

    def ptx(self, ab: str, cd: str) -> str:
        """The instruction, without operands (row-major A, column-major B as the ISA requires for
        16-bit inputs)."""
        return f"mma.sync.aligned.m{self.M}n{self.N}k{self.K}.row.col.{cd}.{ab}.{ab}.{cd}"


# lane = tig + 4 * groupID (colexicographic (4, 8)); flat index = row * cols + col
MMA_ATOMS = {
    "m16n8k16": MmaAtom(
        "m16n8k16", 16, 8, 16,
        a=_tv(((4, 8), (2, 16)), ((2, 2, 2), (1, 128, 8)), (16, 16)),
        b=_tv(((4, 8), (16, 1)), ((2, 2), (8, 64)), (16, 8)),
        c=_tv(((4, 8), (2, 8)), ((2, 2), (1, 64)), (16, 8)),
    ),
    "m16n8k8": MmaAtom(
        "m16n8k8", 16, 8, 8,
        a=_tv(((4, 8), (2, 8)), ((2, 2), (1, 64)), (16, 8)),
        b=_tv(((4, 8), (16, 1)), (2, 8), (8, 8)),
        c=_tv(((4, 8), (2, 8)), ((2, 2), (1, 64)), (16, 8)),
    ),
}


def ldmatrix_layout(count: int, trans: bool) -> ir.TVLayout:
    """What ldmatrix .x{count} delivers: over a (8 * count, 8) tile whose rows 8q .. 8q + 7 are
    matrix q (as stored: a row is 8 consecutive 16-bit elements), lane l value 2q + e."""
    lane = ((4, 8), (16, 1)) if trans else ((4, 8), (2, 8))
    e = 8 if trans else 1
    values = ((2, count), (e, 64)) if count > 1 else (2, e)
    return _tv(lane, values, (8 * count, 8))


def ldmatrix_addresses(count: int) -> Layout:
    """Lane -> flat index of the row start it supplies in the (8 * count, 8) tile (lanes 8 count ..
    31 supply none and are not part of the layout)."""
    return Layout(8 * count, 8)


# ---------------------------------------------------------------------------------------------
# warp-level tables derived from the layouts


@functools.lru_cache(maxsize=64)
def holder_table(tv: ir.TVLayout) -> np.ndarray:
    """[rows, cols, 2]: the (lane, value) of a warp-level layout holding each tile element."""
    out = np.full(tuple(tv.tile) + (2,), -1, dtype=np.int64)
    coords = tv.coord_table()
    for lane in range(tv.threads):
        for v in range(tv.values):
            i, j = coords[lane, v]
            out[i, j] = (lane, v)
    assert (out >= 0).all(), f"layout {tv} does not cover its tile"
    return out


# ---------------------------------------------------------------------------------------------
# how the values of block-level fragments split into atom instances


@attrs.frozen
class MmaPlan:
    """An mma over block fragments as atom instances, the same in every warp: for each group of
    c values (values 4 g .. 4 g + 3 hold instance g's accumulator), the groups of a and b values
    its k steps use, in k order. Group g of an operand is its values g * V .. g * V + V - 1, V the
    atom's values per lane."""

    atom: MmaAtom
    steps: tuple  # ((c group, ((a group, b group), ...)), ...)

    def groups(self, which: str) -> int:
        return {"a": self.atom.a, "b": self.atom.b, "c": self.atom.c}[which].values


def _origins(typ: ir.FragType, per: int, warp: int) -> list:
    """The smallest tile coordinate of each group of `per` values of one warp."""
    c = typ.coords.coord_table()[warp * WARP:(warp + 1) * WARP]
    return [tuple(int(x) for x in c[:, g * per:(g + 1) * per].reshape(-1, 2).min(axis=0))
            for g in range(typ.values // per)]


def _blocks(origins: list, axis: int) -> dict:
    """Groups by their origin on `axis` (rows of a, columns of b), each list in order of the other
    axis (k); a group repeating an origin already seen is a copy and is skipped."""
    out: dict = {}
    seen = set()
    for g, o in enumerate(origins):
        if o in seen:
            continue
        seen.add(o)
        out.setdefault(o[axis], []).append((o[1 - axis], g))
    return {key: [g for _, g in sorted(v)] for key, v in sorted(out.items())}


def mma_plan(atom_name: str, ta: ir.FragType, tb: ir.FragType, tc: ir.FragType) -> MmaPlan:
    """Split an mma over fragments a (M, K), b (K, N), c (M, N) into atom instances, or raise
    ValueError saying why it cannot be.

    Each group of c values must hold exactly the atom's C layout at some origin (m0, n0): the
    result keeps c's coordinates. The a and b groups are paired by rank, as registers: in each warp
    the r-th row block of c (in order of m0) takes the r-th row block of a (in order of the a
    groups' row origins), the r-th column block the r-th column block of b, and k step s the s-th
    a and b groups of those blocks in order of their k origins. When the fragments hold what their
    coordinates say (a[m0.., k0..] in the atom's A layout...) this is exactly c + a @ b; when they
    do not (a missing .trans, a wrong k slice, another column block), the instruction still runs on
    those registers, as the hardware would, and the verifier's contraction check reports it."""
    atom = MMA_ATOMS[atom_name]
    T = tc.threads
    if T % WARP:
        raise ValueError(f"a tensor-core mma needs whole warps; the block has {T} threads")
    for name, typ, lay in (("a", ta, atom.a), ("b", tb, atom.b), ("c", tc, atom.c)):
        if typ.values % lay.values:
            raise ValueError(f"{name} holds {typ.values} values per thread; the {atom.name} {name} "
                             f"fragment is {lay.values} per lane, so it must be a multiple of that")
        if typ.threads != T:
            raise ValueError(f"{name} is spread over {typ.threads} threads, c over {T}")
    if ta.tile[1] % atom.K:
        raise ValueError(f"the k extent {ta.tile[1]} is not a multiple of the atom's k = {atom.K}")
    nk = ta.tile[1] // atom.K
    catom = atom.c.coord_table()
    plans = []
    for w in range(T // WARP):
        cc = tc.coords.coord_table()[w * WARP:(w + 1) * WARP]
        corigins = []
        for g in range(tc.values // atom.c.values):
            blk = cc[:, g * atom.c.values:(g + 1) * atom.c.values]
            origin = blk[0, 0] - catom[0, 0]
            if not (blk - origin == catom).all():
                lane, v = (int(x[0]) for x in np.nonzero((blk - origin != catom).any(-1)))
                raise ValueError(
                    f"c values {g * 4}..{g * 4 + 3} of warp {w} are not the {atom.name} accumulator layout "
                    f"(lane {lane} value {g * 4 + v} holds c{blk[lane, v].tolist()}, the atom puts "
                    f"c{(origin + catom[lane, v]).tolist()} there)")
            corigins.append((int(origin[0]), int(origin[1])))
        crow = sorted({o[0] for o in corigins})
        ccol = sorted({o[1] for o in corigins})
        arows = _blocks(_origins(ta, atom.a.values, w), 0)
        bcols = _blocks(_origins(tb, atom.b.values, w), 1)
        for what, have, need in (("row", arows, crow), ("column", bcols, ccol)):
            name = "a" if what == "row" else "b"
            if len(have) != len(need):
                raise ValueError(f"warp {w}: c has {len(need)} {what} blocks, {name} has {len(have)}")
            for key, groups in have.items():
                if len(groups) != nk:
                    raise ValueError(f"warp {w}: the {what} block at {key} of {name} has {len(groups)} k blocks "
                                     f"of {atom.K}; the mma needs {nk}")
        arow_list, bcol_list = list(arows.values()), list(bcols.values())
        steps = []
        for g, (m0, n0) in enumerate(corigins):
            ra, rb = arow_list[crow.index(m0)], bcol_list[ccol.index(n0)]
            steps.append((g, tuple(zip(ra, rb, strict=True))))
        plans.append(tuple(steps))
    if any(p != plans[0] for p in plans):
        w = next(i for i, p in enumerate(plans) if p != plans[0])
        raise ValueError(f"warp {w} pairs its registers differently from warp 0; the instruction "
                         "sequence is the same in every warp")
    return MmaPlan(atom, plans[0])


def run_mma(plan: MmaPlan, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Execute the plan on register arrays [..., lanes (whole warps), values]: each instance builds
    the atom's A, B and C tiles from (lane, value) pairs through the atom layouts, computes
    C + A @ B with exact products summed in f64 and rounded once to f32 per instruction."""
    atom = plan.atom
    ha, hb, hc = holder_table(atom.a), holder_table(atom.b), holder_table(atom.c)
    lanes = a.shape[-2]
    out = c.astype(np.float64).copy()
    wbase = np.arange(lanes // WARP) * WARP  # first lane of each warp

    def tile(x, hold, group, per):
        ln = wbase[:, None, None] + hold[..., 0][None]  # [warps, rows, cols]
        return x[..., ln, group * per + hold[..., 1]]  # [..., warps, rows, cols]

    for g, ks in plan.steps:
        acc = tile(out, hc, g, atom.c.values)
        for ga, gb in ks:
            A = tile(a, ha, ga, atom.a.values).astype(np.float64)
            B = tile(b, hb, gb, atom.b.values).astype(np.float64)
            acc = (acc + A @ B).astype(np.float32).astype(np.float64)
        # scatter back through C's layout
        cl = atom.c.coord_table()  # [32, 4, 2]
        for lane in range(WARP):
            for v in range(atom.c.values):
                i, j = cl[lane, v]
                out[..., wbase + lane, g * atom.c.values + v] = acc[..., :, i, j]
    return out


# ---------------------------------------------------------------------------------------------
# ldmatrix over block fragments


def fit_tv(table: np.ndarray, tile: tuple) -> ir.TVLayout:
    """The TV layout whose flat table ([threads, values] row-major tile indices) is `table`, with
    one mode per factor 2 of the thread and value counts (and one for an odd rest); ValueError when
    the table is not such a layout (not additive over those modes, or not 0 at (0, 0))."""

    def modes(n: int, stride_of) -> tuple:
        shape, stride, step = [], [], 1
        while n % 2 == 0 and n > 1:
            shape.append(2)
            stride.append(stride_of(step))
            step *= 2
            n //= 2
        if n > 1:
            shape.append(n)
            stride.append(stride_of(step))
        return (tuple(shape) or (1,)), (tuple(stride) or (0,))

    T, V = table.shape
    if table[0, 0] != 0:
        raise ValueError("thread 0's first value does not hold the tile's first element")
    ts, td = modes(T, lambda k: int(table[k, 0]))
    vs, vd = modes(V, lambda k: int(table[0, k]))
    tv = ir.TVLayout(Layout((ts, vs), (td, vd)), tuple(tile))
    if not np.array_equal(tv.flat_table(), table):
        raise ValueError("the values delivered are not a thread-value layout (not additive in the thread "
                         "and value bits)")
    return tv


def ldmatrix_delivered(rows: ir.TVLayout, count: int, trans: bool) -> np.ndarray:
    """[threads, values] flat tile indices that ldmatrix .x{count}{.trans} delivers when thread t
    supplies, for instruction i, the row starting at flat index rows(t, i): value
    2 count i + 2 q + e of lane l is element ldmatrix_layout(count, trans)(l, 2 q + e) of the
    (8 count, 8) stack of the rows lanes 8q .. 8q + 7 supply, read through ldmatrix_addresses."""
    T, n = rows.threads, rows.values
    width = rows.tile[-1]
    start = rows.flat_table()  # [T, n]
    ld = ldmatrix_layout(count, trans).coord_table()  # [32, 2 count, 2]: (stack row, column)
    addr = ldmatrix_addresses(count)
    out = np.zeros((T, 2 * count * n), dtype=np.int64)
    for t in range(T):
        base = t - t % WARP
        for i in range(n):
            for v in range(2 * count):
                r, c = (int(x) for x in ld[t % WARP, v])
                src_lane = addr(r) // 8  # the lane supplying stack row r
                s = int(start[base + src_lane, i])
                if s % width + c >= width:
                    raise ValueError(f"the row that lane {src_lane} supplies for instruction {i} runs past the "
                                     "end of a tile row (an 8x8 matrix row is 8 consecutive elements)")
                out[t, 2 * count * i + v] = s + c
    return out


def ldmatrix_result(rows: ir.TVLayout, count: int, trans: bool) -> ir.TVLayout:
    """The coordinates of the fragment ldmatrix delivers (see ldmatrix_delivered)."""
    return fit_tv(ldmatrix_delivered(rows, count, trans), rows.tile)


def ldmatrix_row_elements(rows: ir.TVLayout) -> ir.TVLayout:
    """What each thread's row addresses make the warp read: value 8 i + c is element c of the row
    thread t supplies for instruction i (for bank-conflict, race and bounds checks)."""
    lay = rows.layout
    return ir.TVLayout(Layout((lay.mode(0).shape, (8, lay.mode(1).shape)),
                              (lay.mode(0).stride, (1, lay.mode(1).stride))), rows.tile)
