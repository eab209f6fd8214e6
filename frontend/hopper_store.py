"""The TMA store and its bulk groups: `tma_store(C[m0 : m0 + BM, n0 : n0 + BN], sC)`,
`bulk_commit()`, `bulk_wait(n)`.

The box and swizzle of the store come from the shared tile's declared layout, as for loads
(argus_verify.hopper.tma_boxes); that they describe the layout is the verifier's `tma-box`
obligation. Whether the shared tile is fenced before, and kept until a bulk wait after, is its
`async-proxy-fence` and `bulk-group` obligations.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.hopper import _shared_tile
from argus_verify.frontend.values import ViewVal


def tma_store(site: CallSite):
    b = site.b
    dst = b.value(site.args[0])
    if not isinstance(dst, ViewVal) or dst.view.space != "global":
        raise b.err(site.args[0], "tma_store copies to global memory: the first argument must be a global view")
    if not b.tensors[dst.view.base].output:
        raise b.err(site.args[0], f"tma_store writes '{dst.view.base}', which is not an output of the kernel")
    if len(b.tensors[dst.view.base].shape) != 2:
        raise b.err(site.args[0], "tma_store takes 2-D tensors")
    if dst.view.tile_axes() != (0, 1):
        raise b.err(site.args[0], "tma_store's global view must slice both dimensions")
    src = _shared_tile(site, site.args[1], "tma_store's source")
    if dst.dtype != src.dtype:
        raise b.err(site.node, f"tma_store between {src.dtype} and {dst.dtype}")
    if dst.view.tile != src.view.tile:
        raise b.err(site.args[1], f"shared tile {list(src.view.tile)} and global tile {list(dst.view.tile)} differ")
    b.out.append(ir.TmaStore(dst.view, src.view, b.sp(site.node)))


def bulk_commit(site: CallSite):
    site.b.out.append(ir.BulkGroup("commit", 0, True, site.b.sp(site.node)))


def bulk_wait(site: CallSite):
    n = site.b.const_int(site.args[0], "bulk_wait's count") if site.args else 0
    if n < 0 or n > 7:
        raise site.b.err(site.args[0], "bulk_wait(n) takes a count of groups left in flight in 0..7")
    site.b.out.append(ir.BulkGroup("wait", n, not site.flag("writes"), site.b.sp(site.node)))


HANDLERS = {"tma_store": tma_store, "bulk_commit": bulk_commit, "bulk_wait": bulk_wait}
