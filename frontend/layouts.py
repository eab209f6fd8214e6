"""Compile-time layouts: literals (`(4, 8):(8, 1)`), composition with `o`, the layout builtins
(Swizzle, row_major, col_major), and the checks of thread-value layouts against a tile and block."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from argus_verify import ir
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.values import LayoutVal, NotARoleError
from argus_verify.layout import Layout, LayoutError, Swizzle, col_major, compose, row_major

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder

MAX_VALUES_PER_THREAD = 4096  # far beyond the 255 registers of a thread; keeps the checks' tables small


def layout_literal(b: KernelBuilder, n) -> LayoutVal:
    """shape:stride"""
    shape = b.const_tuple(n.children[0], "a layout's shape")
    stride = b.const_tuple(n.children[1], "a layout's stride")
    try:
        return LayoutVal(Layout(shape, stride))
    except (LayoutError, ValueError, TypeError) as e:
        raise b.err(n, f"bad layout: {e}") from None


def composition(b: KernelBuilder, n) -> LayoutVal:
    """f o g: g first, then f (typically a Swizzle after a layout)."""
    a, _, c = n.children
    la, lc = b.value(a), b.value(c)
    if not isinstance(la, LayoutVal) or not isinstance(lc, LayoutVal):
        raise b.err(n, "'o' composes layouts and swizzles")
    try:
        return LayoutVal(compose(la.layout, lc.layout))
    except (LayoutError, ValueError, TypeError) as e:
        raise b.err(n, f"cannot compose {la.layout} with {lc.layout}: {e}") from None


def swizzle(site: CallSite) -> LayoutVal:
    bits, base, shift = (site.b.const_int(a, "a swizzle parameter") for a in site.args)
    if bits < 0 or base < 0:
        raise site.b.err(site.node, f"Swizzle({bits}, {base}, {shift}) needs non-negative B and M")
    if abs(shift) < bits:
        raise site.b.err(site.node, f"Swizzle({bits}, {base}, {shift}) needs |S| >= B, or the xor reads the bits "
                                    "it writes")
    return LayoutVal(Swizzle(bits, base, shift))


def major(site: CallSite) -> LayoutVal:
    """row_major(d0, d1, ...) / col_major(...)."""
    shape = tuple(site.b.const_int(a, "a shape") for a in site.args)
    return LayoutVal(row_major(shape) if site.name == "row_major" else col_major(shape))


def tv_arg(site: CallSite, tile: tuple) -> ir.TVLayout:
    """The thread-value layout given as tv=, checked against `tile` and the block."""
    node = site.arg("tv")
    v = site.b.value(node)
    if not isinstance(v, LayoutVal) or not isinstance(v.layout, Layout):
        raise site.b.err(node, "tv= takes a layout such as (256, 4):(4, 1)")
    return check_tv(site.b, v.layout, tile, node)


def check_tv(b: KernelBuilder, layout: Layout, tile: tuple, node) -> ir.TVLayout:
    if layout.rank != 2:
        raise b.err(node, f"a thread-value layout has two modes (threads, values); {layout} has {layout.rank}")
    tv = ir.TVLayout(layout, tuple(tile))
    if b.role is not None and tv.threads == b.fragment_threads() and b.role[0] != 0:
        raise b.err(node, f"fragments of a warpgroup role are spread over its warpgroups from warpgroup 0 on; "
                          f"this role runs warpgroups {list(b.role)}: put it first (warpgroups 0..)")
    if tv.threads != b.fragment_threads():
        where = f"the role (warpgroups {list(b.role)}) has" if b.role is not None else "the block has"
        why = ("; an `if` on warpgroup_id makes a warpgroup role, and a fragment inside it spans the role's "
               "threads") if b.role is not None else ""
        msg = f"tv layout {layout} spans {tv.threads} threads but {where} {b.fragment_threads()}{why}"
        if b.role is not None and tv.threads == b.block:
            raise NotARoleError(msg, b.sp(node), b.binding_note(node))
        raise b.err(node, msg)
    if tv.values > MAX_VALUES_PER_THREAD:
        raise b.err(node, f"tv layout {layout} gives each thread {tv.values} values; a fragment holds at most "
                          f"{MAX_VALUES_PER_THREAD} per thread")
    flat = tv.flat_table()
    n = math.prod(tile)
    if flat.min() < 0 or flat.max() >= n:
        bad = int(flat.max() if flat.max() >= n else flat.min())
        t, v = (int(x[0]) for x in np.nonzero(flat == bad))
        raise b.err(node, f"tv layout {layout} maps thread {t}, value {v} to tile element {bad}, outside the "
                          f"{list(tile)} tile ({n} elements)")
    return tv


def row_contiguous(tv: ir.TVLayout, width: int) -> bool:
    """Whether every thread's values come in runs of `width` consecutive elements of one tile row
    (what one vector access of `width` elements can move)."""
    if width == 1:
        return True
    flat = tv.flat_table()
    if flat.shape[1] % width:
        return False
    runs = flat.reshape(flat.shape[0], -1, width)
    row = tv.tile[-1] if tv.tile else 1
    steps_ok = bool(np.all(np.diff(runs, axis=-1) == 1))
    same_row = bool(np.all(runs[..., 0] // row == runs[..., -1] // row))
    return steps_ok and same_row


HANDLERS = {"Swizzle": swizzle, "row_major": major, "col_major": major}
