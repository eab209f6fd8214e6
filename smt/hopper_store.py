"""The tag analysis's handlers of the TMA store and its bulk groups.

    TmaStore    the async proxy reads the whole shared tile `src` through its declared layout (the
                `tma-box` obligation proves the hardware reads exactly there) and writes it to the
                global view `dst`, clipped at the tensor's edges (masked, as a masked store is);
                issued by the threads the kernel's conditions select (one, in a correct kernel:
                several issuers each write the whole tile, which output-once reports). Each global
                element gets the tag of the shared element at its tile coordinate, read as of the
                store's place in program order.
    BulkGroup   no data: its commits and waits are the bulk-group obligation's part.

What the encoding takes as established, and says so (`RELIES_ON_STORE`): the generic writes of the
tile are fenced for the async proxy before the store (async-proxy-fence; that a barrier() orders
other threads' writes before the issuing thread is checked here, as for any read), and the store
has read the tile before the tile is written again or the block exits (bulk-group, smt/protocol.py):
so the read sees the last write before it in program order.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt import program as P
from argus_verify.smt.diag import AnalysisError
from argus_verify.smt.hopper import RELIES_ON, whole_tile
from argus_verify.smt.records import GAccess, ShRead
from argus_verify.smt.values import FragV, Tr, element_label
from argus_verify.smt.zops import OPS

# a TMA store's data-flow result also relies on the store having read its tile before the tile is
# rewritten or the block exits
RELIES_ON_STORE = (*RELIES_ON, "bulk-group")
RELIANCE_STORE = ("the TMA store reads its shared tile as of its place in program order: relies on "
                  "async-proxy-fence and bulk-group")


class TmaStoreRead(ShRead):
    """The async proxy's read of a TMA store's shared tile (every thread names the whole tile; the
    store's conditions select the issuing thread)."""

    op = "tma_store"
    proxy = "async"


class HopperStoreMixin:
    def visit_TmaStore(self, s: ir.TmaStore, node, env):
        line = s.span.line
        if tuple(s.src.tile) != tuple(s.dst.tile):
            raise AnalysisError(f"tma_store at line {line}: the shared tile {list(s.src.tile)} and the global tile "
                                f"{list(s.dst.tile)} differ")
        alloc = self.allocs[s.src.base]
        tensor = self.tensors[s.dst.base]
        if alloc.alloc.dtype != tensor.dtype:
            raise AnalysisError(f"tma_store at line {line}: {s.src.base} holds {alloc.alloc.dtype}, {s.dst.base} "
                                f"{tensor.dtype} (the copy converts nothing)")
        src = self.compile_view(s.src, env)
        dst = self.compile_view(s.dst, env)
        if not src.uniform or not dst.uniform:
            raise AnalysisError(f"tma_store at line {line}: views whose starts depend on the thread")
        tv = whole_tile(self.T, s.src.tile)
        text = f"{s.src.base}[...]"
        rd = TmaStoreRead(node, alloc, src, tv, tv.values, text, "tma_store")
        self.sh_reads[alloc.name].append(rd)
        typ = ir.FragType(tensor.dtype, tv)

        def fn(S, ctx, inst, t, v):
            c = tv.coords(t, v, OPS)
            e = src.elem(S, ctx, inst, t, c)
            r_inst = P.Inst(node, {L.var: inst.cnt[L.var] for L in node.loops},
                            {L.var: inst.vals[L.var] for L in node.loops})
            tg = self.resolve(S, ctx, rd, r_inst, t, e)
            return tg.replace(trace=Tr(tg.trace, "tma_store", s.span, element_label(text, len(c)), c))

        frag = FragV("tma_store", typ, fn, text, loopdeps=frozenset(L.var for L in node.loops))
        # the box is clipped at the tensor's edges: elements outside are not written (a masked store)
        acc = GAccess("tma_store", node, s.dst.base, dst, tv, tv.values, True, None, tensor.dtype)
        self.g_accesses.append(acc)
        if tensor.output:
            self.out_stores.append((acc, frag))
            self.tma_stores.append(acc)
        self.demand.sink(frag, self.store_live(node, None))

    def visit_BulkGroup(self, s: ir.BulkGroup, node, env):
        """No data: which groups are committed and retired is the bulk-group obligation's part."""


__all__ = ["HopperStoreMixin", "RELIANCE_STORE", "RELIES_ON_STORE", "TmaStoreRead"]
