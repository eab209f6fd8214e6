"""Hopper's hardware address functions, and the parameters the compiler derives from layouts.

Two units of the H100/H200 read or write shared memory by address functions of their own, fixed
by the ISA and parameterised by a few numbers:

* the TMA unit (`cp.async.bulk.tensor`) writes a box of R rows x Cb elements densely, rows of
  Cb * e bytes, with the swizzle mode of the tensor map applied to the shared address bits;
* wgmma reads its shared operands through a 64-bit matrix descriptor: start address, leading and
  stride byte offsets (LBO, SBO) and a swizzle mode, over the ISA's canonical layouts (K-major:
  8-row atoms of W-byte rows; MN-major: atoms of W / e elements along M or N by 8 k rows).

Argus never asks the programmer for these numbers: they are derived from the declared layout of
the shared allocation (`tma_boxes`, `wgmma_operand`), and the functions below evaluate what the
hardware does with them (`tma_byte`, `desc_byte`). The interpreter moves data through these
functions, not through the declared layout, so a layout the hardware cannot produce gives the
wrong answer there too; the verifier's `descriptor-layout` and `tma-box` obligations compare the
two element by element (`layout_mismatch`).

Swizzles: a W-byte swizzle (W = 32, 64, 128) xors address bits [4, 4 + b) with bits [7, 7 + b),
b = log2(W / 16): in units of 16-byte chunks, chunk ^= (address // 128) % (W / 16). It acts on
absolute shared addresses, so the allocations that use it are aligned to 1024 bytes.

This module is core: it imports no stage.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.layout import ComposedLayout, NumpyOps, Swizzle

NP_OPS = NumpyOps()
SWIZZLE_ALIGN = 1024  # a swizzle pattern repeats every 1024 bytes
WGMMA_M = 64
WGMMA_K = 16
WARPGROUP = 128


def swizzle(addr, width: int):
    """The shared address after a `width`-byte swizzle (0: none)."""
    if not width:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[width]
    mask = (1 << bits) - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def layout_swizzle(alloc: ir.SharedAlloc) -> int:
    """The swizzle width in bytes a shared allocation's layout declares (0: none; -1: a swizzle
    that is not one of the hardware's)."""
    lay = alloc.layout
    if not isinstance(lay, ComposedLayout) or not isinstance(lay.outer, Swizzle):
        return 0
    sw = lay.outer
    esize = ir.DTYPE_BYTES[alloc.dtype]
    base = {1: 4, 2: 3, 4: 2, 8: 1}.get(esize)
    if sw.shift != 3 or sw.base != base or sw.bits not in (1, 2, 3):
        return -1
    return 16 << sw.bits


@functools.lru_cache(maxsize=256)
def view_table(alloc: ir.SharedAlloc, axes: tuple, index: tuple) -> np.ndarray:
    """Byte offsets (from the allocation's start) of every element of a 2-D tile of `alloc`:
    `axes` are the two dimensions the tile spans, `index` the constant coordinates of the others
    (None at the tile's axes). Returns [rows, cols] int64."""
    esize = ir.DTYPE_BYTES[alloc.dtype]
    r, c = (alloc.shape[a] for a in axes)
    rr, cc = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
    coords = []
    for d in range(len(alloc.shape)):
        if d == axes[0]:
            coords.append(rr)
        elif d == axes[1]:
            coords.append(cc)
        else:
            coords.append(np.full(rr.shape, index[d], dtype=np.int64))
    off = np.asarray(ir.layout_offset(alloc.layout, tuple(coords), NP_OPS), dtype=np.int64)
    return off * esize


def tile_table(alloc: ir.SharedAlloc, view: ir.View, at: dict | None = None) -> tuple[np.ndarray, int, int]:
    """The byte offsets of a shared view's 2-D tile relative to its element (0, 0), that element's
    byte offset with the view's index coordinates at `at` (default 0) and the tile's extents
    checked. Slices must start at 0 (a view of a whole dimension)."""
    axes = view.tile_axes()
    if len(axes) != 2:
        raise ValueError(f"a 2-D tile is needed, '{view.base}' gives {len(axes)}-D")
    index = []
    for d, it in enumerate(view.index):
        if isinstance(it, ir.Slice):
            if not (isinstance(it.start, ir.IConst) and it.start.value == 0 and it.extent == alloc.shape[d]):
                raise ValueError(f"'{view.base}': TMA and wgmma take whole dimensions of a shared allocation")
            index.append(None)
        else:
            index.append(0 if at is None else at.get(d, 0))
    tab = view_table(alloc, axes, tuple(index))
    return tab - tab[0, 0], int(tab[0, 0]), alloc.shape[axes[0]]


# ---------------------------------------------------------------------------------------------
# TMA


@attrs.frozen
class TmaBox:
    """One cp.async.bulk.tensor of a TmaLoad: the box of `rows` x `cols` elements whose tile column
    starts at `col0`, written at byte `smem` from the view's element (0, 0) with `swizzle`."""

    col0: int
    rows: int
    cols: int
    smem: int
    swizzle: int


def tma_boxes(alloc: ir.SharedAlloc, view: ir.View) -> list[TmaBox]:
    """The boxes the compiler issues for a TMA load into shared view `view`: the swizzle mode of
    the allocation's layout, boxes as wide as the swizzle span (or the whole row without one),
    each box at the offset the layout gives its first element. ValueError when none fits."""
    width = layout_swizzle(alloc)
    if width < 0:
        raise ValueError(f"the swizzle of '{alloc.name}' is not one of TMA's (32, 64 or 128 bytes on "
                         "16-byte chunks)")
    tab, _, _ = tile_table(alloc, view)
    esize = ir.DTYPE_BYTES[alloc.dtype]
    rows, cols = tab.shape
    cb = min(cols, width // esize) if width else cols
    if cols % cb or (cb * esize) % 16 or rows > 256 or cb > 256:
        raise ValueError(f"a {rows} x {cols} tile of {alloc.dtype} does not split into TMA boxes "
                         f"(rows <= 256, box rows of a multiple of 16 bytes within the swizzle span)")
    return [TmaBox(j * cb, rows, cb, int(tab[0, j * cb]), width) for j in range(cols // cb)]


def tma_byte(box: TmaBox, r, c, esize: int):
    """Where the TMA unit writes box element (r, c), in bytes from the view's element (0, 0)
    (the view's start is 1024-byte aligned where a swizzle is used)."""
    return swizzle(box.smem + r * box.cols * esize + c * esize, box.swizzle)


def tma_table(alloc: ir.SharedAlloc, view: ir.View, boxes: list[TmaBox]) -> np.ndarray:
    """[rows, cols] byte offsets the TMA unit writes the tile's elements to."""
    tab, _, _ = tile_table(alloc, view)
    esize = ir.DTYPE_BYTES[alloc.dtype]
    out = np.zeros(tab.shape, dtype=np.int64)
    for b in boxes:
        rr, cc = np.meshgrid(np.arange(b.rows), np.arange(b.cols), indexing="ij")
        out[:, b.col0:b.col0 + b.cols] = tma_byte(b, rr, cc, esize)
    return out


# ---------------------------------------------------------------------------------------------
# wgmma


@attrs.frozen
class Descriptor:
    """A wgmma shared-memory matrix descriptor's fields (bytes) for one instruction, relative to
    the view's element (0, 0). `major` is "K" or "MN"; `trans` the instruction's imm-trans bit."""

    start: int
    lbo: int
    sbo: int
    swizzle: int
    major: str

    @property
    def trans(self) -> int:
        return 1 if self.major == "MN" else 0

    def encode(self, base: int = 0) -> int:
        mode = {0: 0, 128: 1, 64: 2, 32: 3}[self.swizzle]
        enc = lambda x: (x & 0x3FFFF) >> 4  # noqa: E731
        return enc(base + self.start) | (enc(self.lbo) << 16) | (enc(self.sbo) << 32) | (mode << 62)


def desc_byte(d: Descriptor, mn, k, esize: int):
    """Where wgmma reads operand element (mn, k) of its instruction (mn along M for A, N for B),
    in bytes from the view's element (0, 0) (1024-byte aligned, so relative and absolute addresses
    swizzle alike)."""
    w = d.swizzle
    if d.major == "K":
        pre = (mn // 8) * d.sbo + (mn % 8) * w + k * esize
    else:
        per = w // esize
        pre = (mn // per) * d.lbo + (mn % per) * esize + (k // 8) * d.sbo + (k % 8) * w
    return swizzle(d.start + pre, w)  # the unit swizzles the whole address


@attrs.frozen
class WgmmaOperand:
    """What the compiler derived for one operand of a Wgmma: per (row block, k step) descriptor."""

    which: str  # "a" or "b"
    descs: dict  # (mb, kk) -> Descriptor (B: mb is 0)
    major: str


def wgmma_operand(alloc: ir.SharedAlloc, view: ir.View, which: str) -> WgmmaOperand:
    """Descriptors for operand `which` ("a": a [M, K] tile; "b": a [K, N] tile): the major-ness
    from which of the tile's axes is contiguous, the swizzle from the layout, the start of each
    instruction's sub-tile and the atom strides read off the layout. ValueError when the layout
    is not one the descriptor can express at all (the verifier checks the rest, element by
    element)."""
    esize = ir.DTYPE_BYTES[alloc.dtype]
    width = layout_swizzle(alloc)
    if width <= 0:
        base = {1: 4, 2: 3, 4: 2}.get(esize, 3)
        raise ValueError(f"wgmma reads '{alloc.name}' through a swizzled canonical layout: declare it "
                         f"with Swizzle(3, {base}, 3) o ... (128-byte swizzle)")
    tab, _, _ = tile_table(alloc, view)
    if which == "a":
        mn_axis, rows = 0, tab  # [M, K]
    else:
        mn_axis, rows = 1, tab.T  # [N, K]
    t = rows  # [MN, K]
    mn_ext, k_ext = t.shape
    if k_ext > 1 and t[0, 1] == esize:
        major = "K"
    elif mn_ext > 1 and t[1, 0] == esize:
        major = "MN"
    else:
        raise ValueError(f"neither axis of '{alloc.name}' is contiguous: wgmma needs a K-major or "
                         f"{'M' if which == 'a' else 'N'}-major tile")
    del mn_axis
    step_mn = WGMMA_M if which == "a" else mn_ext
    descs = {}
    per = width // esize
    for mb in range(mn_ext // step_mn):
        for kk in range(k_ext // WGMMA_K):
            m0, k0 = mb * step_mn, kk * WGMMA_K
            start = int(t[m0, k0])
            if major == "K":
                sbo = int(t[m0 + 8, k0] - t[m0, k0]) if step_mn > 8 else 1024
                lbo = 16
            else:
                sbo = int(t[m0, k0 + 8] - t[m0, k0]) if WGMMA_K > 8 else 1024
                lbo = int(t[m0 + per, k0] - t[m0, k0]) if step_mn > per else 16
            descs[(mb, kk)] = Descriptor(start, lbo, sbo, width, major)
    return WgmmaOperand(which, descs, major)


def wgmma_table(op: WgmmaOperand, shape: tuple, esize: int) -> np.ndarray:
    """[MN, K] byte offsets wgmma reads the operand's elements from (A: [M, K]; B given as [N, K])."""
    mn_ext, k_ext = shape
    out = np.full(shape, -1, dtype=np.int64)
    step_mn = WGMMA_M if op.which == "a" else mn_ext
    for (mb, kk), d in op.descs.items():
        mm, kq = np.meshgrid(np.arange(step_mn), np.arange(WGMMA_K), indexing="ij")
        out[mb * step_mn:(mb + 1) * step_mn, kk * WGMMA_K:(kk + 1) * WGMMA_K] = desc_byte(d, mm, kq, esize)
    return out


def layout_mismatch(declared: np.ndarray, hardware: np.ndarray):
    """The first element (row, col) where the hardware's address differs from the declared
    layout's, with both addresses; None when they agree everywhere."""
    bad = np.argwhere(declared != hardware)
    if not len(bad):
        return None
    r, c = (int(x) for x in bad[0])
    return (r, c), int(declared[r, c]), int(hardware[r, c])


def acc_layout(bm: int, bn: int, wgs: int = 1) -> ir.TVLayout:
    """The accumulator fragment of `wgs` warpgroups' wgmma m64nNk16 over a [bm, bn] f32 tile
    (warpgroup w takes rows w * bm / wgs .. (w + 1) * bm / wgs, a multiple of 64 each): thread
    t = 128 w + 32 q + l holds rows 16 q + l // 4 (+ 8) and columns 8 j + 2 (l % 4) (+ 1) of each
    of its 64-row blocks; value v = c + 2 i + 4 j + 4 (bn / 8) mb."""
    from argus_verify.layout import Layout

    rows = bm // wgs
    lay = Layout(((4, 8, 4, wgs), (2, 2, bn // 8, rows // WGMMA_M)),
                 ((2, bn, 16 * bn, rows * bn), (1, 8 * bn, 8, WGMMA_M * bn)))
    return ir.TVLayout(lay, (bm, bn))
