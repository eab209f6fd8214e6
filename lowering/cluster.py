"""Thread-block clusters in PTX: the cluster shape as `.reqnctapercluster` on the entry (the runtime
launches with the same shape through cuLaunchKernelEx), TMA loads multicast to a set of the
cluster's CTAs, arrivals on a peer CTA's mbarrier through `mapa`, and the cluster barrier.

A mixin of `argus_verify.lowering.ptx.Lowerer`, after HopperLowering (it reuses its tensor maps,
mbarrier addresses, view bases and its TMA load emission, with the multicast mask).
"""

from __future__ import annotations

from argus_verify import ir
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
        self._tma_load(s, "tma_load_multicast", "tma.load.multicast", mask=s.mask)

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
