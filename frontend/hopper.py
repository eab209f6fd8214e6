"""Hopper builtins: mbarriers, TMA loads, wgmma and their fences and groups.

An `mbarrier(n)` is an i64 shared allocation of n barriers; the operations take one element of it
(`full[s]`). The front end checks shapes and types here; the hardware parameters (TMA boxes,
wgmma descriptors) are derived from the layouts by argus_verify.hopper, and whether the declared
layouts are ones the hardware produces is a verifier obligation (`descriptor-layout`, `tma-box`),
so that a mismatch is reported at its line with the element it gets wrong.
"""

from __future__ import annotations

import numpy as np

from argus_verify import hopper, ir, roles
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.values import FragVal, IntVal, SharedVal, ViewVal
from argus_verify.layout import row_major

MBARRIER_DTYPE = "i64"


def mbarrier(site: CallSite) -> SharedVal:
    n = site.b.const_int(site.args[0], "mbarrier's count")
    if n < 1:
        raise site.b.err(site.args[0], "mbarrier(n) takes a positive count")
    return SharedVal(MBARRIER_DTYPE, (n,), row_major((n,)))


def _bar(site: CallSite, node) -> ir.View:
    b = site.b
    v = b.value(node)
    if (not isinstance(v, ViewVal) or v.view.space != "shared" or v.dtype != MBARRIER_DTYPE
            or v.view.tile or len(v.view.index) != 1):
        raise b.err(node, f"{site.name}() takes one mbarrier, an element of an mbarrier(n) allocation "
                          "such as full[s]")
    return v.view


def _int(site: CallSite, node, what: str) -> ir.IExpr:
    v = site.b.value(node)
    if not isinstance(v, IntVal):
        raise site.b.err(node, f"{what} must be an integer")
    return v.expr


def mbarrier_init(site: CallSite):
    bar = _bar(site, site.args[0])
    count = _int(site, site.args[1], "the arrival count")
    if isinstance(count, ir.IConst) and count.value < 1:
        raise site.b.err(site.args[1], "an mbarrier expects at least one arrival per phase")
    site.b.out.append(ir.MbarrierOp("init", bar, count, site.b.sp(site.node)))


def mbarrier_arrive(site: CallSite):
    site.b.out.append(ir.MbarrierOp("arrive", _bar(site, site.args[0]), None, site.b.sp(site.node)))


def mbarrier_expect_tx(site: CallSite):
    bar = _bar(site, site.args[0])
    nbytes = _int(site, site.args[1], "the transaction byte count")
    site.b.out.append(ir.MbarrierOp("expect_tx", bar, nbytes, site.b.sp(site.node)))


def mbarrier_wait(site: CallSite):
    bar = _bar(site, site.args[0])
    parity = _int(site, site.args[1], "the parity")
    if isinstance(parity, ir.IConst) and parity.value not in (0, 1):
        raise site.b.err(site.args[1], "a phase parity is 0 or 1")
    site.b.out.append(ir.MbarrierOp("wait", bar, parity, site.b.sp(site.node)))


def fence_mbarrier_init(site: CallSite):
    site.b.out.append(ir.Fence("mbarrier_init", site.b.sp(site.node)))


def fence_proxy_async(site: CallSite):
    site.b.out.append(ir.Fence("proxy_async", site.b.sp(site.node)))


def wgmma_fence(site: CallSite):
    site.b.out.append(ir.Fence("wgmma", site.b.sp(site.node)))


def wgmma_commit(site: CallSite):
    site.b.out.append(ir.WgmmaGroup("commit", 0, site.b.sp(site.node)))


def wgmma_wait(site: CallSite):
    n = site.b.const_int(site.args[0], "wgmma_wait's count") if site.args else 0
    if n < 0 or n > 7:
        raise site.b.err(site.node, "wgmma_wait(n) takes a count of groups left in flight in 0..7")
    site.b.out.append(ir.WgmmaGroup("wait", n, site.b.sp(site.node)))


def _shared_tile(site: CallSite, node, what: str) -> ViewVal:
    b = site.b
    v = b.value(node)
    if not isinstance(v, ViewVal) or v.view.space != "shared" or v.dtype == MBARRIER_DTYPE:
        raise b.err(node, f"{what} must be a view of a shared allocation")
    if len(v.view.tile) != 2:
        raise b.err(node, f"{what} must be a 2-D tile")
    for d, it in enumerate(v.view.index):
        if isinstance(it, ir.Slice) and not (isinstance(it.start, ir.IConst) and it.start.value == 0
                                             and it.extent == b.shared[v.view.base].shape[d]):
            raise b.err(node, f"{what} must take whole dimensions of '{v.view.base}' (index the others)")
    return v


def tma_load(site: CallSite):
    b = site.b
    dst = _shared_tile(site, site.args[0], "tma_load's destination")
    src = b.value(site.args[1])
    if not isinstance(src, ViewVal) or src.view.space != "global":
        raise b.err(site.args[1], "tma_load copies from global memory: the second argument must be a global view")
    if len(b.tensors[src.view.base].shape) != 2:
        raise b.err(site.args[1], "tma_load takes 2-D tensors")
    if src.view.tile_axes() != (0, 1):
        raise b.err(site.args[1], "tma_load's global view must slice both dimensions")
    if dst.dtype != src.dtype:
        raise b.err(site.node, f"tma_load between {src.dtype} and {dst.dtype}")
    if dst.view.tile != src.view.tile:
        raise b.err(site.args[0], f"shared tile {list(dst.view.tile)} and global tile {list(src.view.tile)} differ")
    bar = _bar(site, site.args[2])
    b.out.append(ir.TmaLoad(dst.view, src.view, bar, b.sp(site.node)))


def wgmma(site: CallSite) -> FragVal:
    b = site.b
    a = _shared_tile(site, site.args[0], "wgmma's a")
    bb = _shared_tile(site, site.args[1], "wgmma's b")
    c = b.value(site.args[2])
    if not isinstance(c, FragVal):
        raise b.err(site.args[2], "wgmma's c must be an f32 fragment (the accumulator)")
    if a.dtype != bb.dtype or a.dtype not in ("bf16", "f16"):
        raise b.err(site.node, f"wgmma takes bf16 or f16 operands of one dtype, got {a.dtype} and {bb.dtype}")
    if c.type.dtype != "f32":
        raise b.err(site.args[2], f"wgmma accumulates in f32, not {c.type.dtype}")
    (m, k), (k2, n) = a.view.tile, bb.view.tile
    if k != k2 or tuple(c.type.tile) != (m, n):
        raise b.err(site.node, f"wgmma shapes do not match: a {[m, k]}, b {[k2, n]}, c {list(c.type.tile)}")
    if b.fragment_threads() % hopper.WARPGROUP:
        raise b.err(site.node, f"wgmma is issued by whole warpgroups: the block must be a multiple of "
                               f"{hopper.WARPGROUP} threads (got {b.block})")
    wgs = b.fragment_threads() // hopper.WARPGROUP
    if m % (hopper.WGMMA_M * wgs) or k % hopper.WGMMA_K or n % 8 or not 8 <= n <= 256:
        raise b.err(site.node, f"wgmma needs M a multiple of 64 per warpgroup ({wgs}), K of 16 and N in 8..256 "
                               f"a multiple of 8; got {m} x {n} x {k}")
    want = hopper.acc_layout(m, n, wgs)
    have, need = c.type.coords.coord_table(), want.coord_table()
    if have.shape != need.shape or not np.array_equal(have, need):
        raise b.err(site.args[2], f"wgmma's accumulator must have the m64nNk16 accumulator layout {want.layout} "
                                  f"over f32[{m}, {n}]")
    return b.emit(site.node, ir.Wgmma(a.view, bb.view, c.name), c.type)


def setmaxnreg(site: CallSite):
    b = site.b
    n = b.const_int(site.args[0], "setmaxnreg's register count")
    lo, hi = roles.SETMAXNREG_RANGE
    if n % roles.REG_GRANULE or not lo <= n <= hi:
        raise b.err(site.args[0], f"setmaxnreg takes a multiple of {roles.REG_GRANULE} in {lo}..{hi}, got {n}")
    if b.role is None or b.out or len(b.scopes) != b.role_scope_depth:
        raise b.err(site.node, "setmaxnreg must be the first statement of a warpgroup role (a branch of an if "
                               "on warpgroup_id)")
    node = site.args[0]
    named = str(node.children[0]) if getattr(node, "data", None) == "name" and node.children else None
    b.out.append(ir.SetMaxNReg(n, named if named in b.consts else None, b.sp(site.node)))


HANDLERS = {"mbarrier": mbarrier, "mbarrier_init": mbarrier_init, "mbarrier_arrive": mbarrier_arrive,
            "mbarrier_expect_tx": mbarrier_expect_tx, "mbarrier_wait": mbarrier_wait,
            "fence_mbarrier_init": fence_mbarrier_init, "fence_proxy_async": fence_proxy_async,
            "tma_load": tma_load, "wgmma": wgmma, "wgmma_fence": wgmma_fence, "wgmma_commit": wgmma_commit,
            "wgmma_wait": wgmma_wait, "setmaxnreg": setmaxnreg}
