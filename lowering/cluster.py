"""Thread-block clusters in PTX: the cluster shape as `.reqnctapercluster` on the entry (the runtime
launches with the same shape through cuLaunchKernelEx), TMA loads multicast to a set of the
cluster's CTAs, arrivals on a peer CTA's mbarrier through `mapa`, and the cluster barrier.

A mixin of `argus_verify.lowering.ptx.Lowerer`, after HopperLowering (it reuses its tensor maps,
mbarrier addresses and view bases).
"""

from __future__ import annotations

from argus_verify import hopper, ir
from argus_verify.lowering.emitter import LoweringError
from argus_verify.lowering.hopper import TensorMapSpec
from argus_verify.lowering.values import ident
from argus_verify.semantics import ASYNC_OPS


class ClusterLowering:
    def cluster_directives(self) -> list:
        if self.k.cluster == (1, 1, 1):
            return []
        return [".reqnctapercluster {}, {}, {}".format(*self.k.cluster)]

    def _need_cluster(self, s) -> None:
        """The front end accepts these only with a cluster(...) shape; cluster(1) is a cluster of one
        block (the launch's implicit cluster), where they act on the block itself."""

    def visit_TmaLoadMulticast(self, s: ir.TmaLoadMulticast) -> None:
        self._need_cluster(s)
        em = self.em
        alloc = self.shared[s.dst.base].alloc
        try:
            boxes = hopper.tma_boxes(alloc, s.dst)
        except ValueError as e:
            raise LoweringError(f"tma_load_multicast: {e}", s.span) from None
        b0 = boxes[0]
        key = (s.src.base, b0.rows, b0.cols, b0.swizzle)
        if key not in self.tmaps:
            name = f"tmap{len(self.tmaps)}_{ident(s.src.base)}"
            self.tmaps[key] = TensorMapSpec(name, s.src.base, alloc.dtype, b0.rows, b0.cols, b0.swizzle)
        spec = self.tmaps[key]
        tmap = em.input("b64", f"tmap:{spec.param}",
                        f"mov.u64 {{d}}, {self.pname(spec.param)};\n    cvta.param.u64 {{d}}, {{d}};")
        bar = self._bar_addr(s.bar)
        base = self._view_base(s.dst)
        mask_v = self.ival(s.mask)
        mask = em.reg("b16")
        if isinstance(mask_v, int):
            em.emit(f"mov.b16 {mask}, {mask_v & 0xFFFF};")
        else:
            em.emit(f"cvt.u16.u32 {mask}, {em.mat(mask_v)};")
        row = self.ival(s.src.index[0].start)
        col = self.ival(s.src.index[1].start)
        rr = str(row) if isinstance(row, int) else str(em.mat(row))
        for box in boxes:
            dst = em.mat(em.add(base, box.smem))
            c = em.add(col, box.col0)
            cr = str(c) if isinstance(c, int) else str(em.mat(c))
            em.emit(ASYNC_OPS["tma.load.multicast"].ptx.format(dst=dst, tmap=tmap, col=cr, row=rr, bar=bar,
                                                               mask=mask))
        line = s.span.line if s.span is not None else 0
        self.notes.append(f"line {line}: tma_load_multicast {s.src.base} -> {s.dst.base}: {len(boxes)} box(es) of "
                          f"{b0.rows} x {b0.cols}, swizzle {b0.swizzle or 'none'}")

    def visit_MbarrierArriveCluster(self, s: ir.MbarrierArriveCluster) -> None:
        self._need_cluster(s)
        em = self.em
        addr = self._bar_addr(s.bar)
        remote = em.reg("b32")
        em.emit(ASYNC_OPS["mapa"].ptx.format(d=remote, addr=addr, cta=self._operand(s.cta)))
        em.emit(ASYNC_OPS["mbarrier.arrive.cluster"].ptx.format(bar=remote))

    def visit_ClusterSync(self, s: ir.ClusterSync) -> None:
        self._need_cluster(s)
        self.em.emit(ASYNC_OPS["cluster.arrive"].ptx)
        self.em.emit(ASYNC_OPS["cluster.wait"].ptx)
