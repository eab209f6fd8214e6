"""Thread-block clusters: TMA multicast, remote mbarrier arrivals and the cluster barrier.

The cluster's shape is a launch statement (`cluster(2, 1)`, frontend/header.py) and a block's rank in
it is `cluster_rank`. Whether a multicast mask names CTAs inside the cluster, whether every CTA's
expect_tx counts the bytes its peers multicast to it and whether the cluster barrier orders the
mbarrier inits before the first multicast and the last remote access before any CTA exits are
verifier obligations (smt/protocol_cluster.py), reported at their lines.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.frontend import hopper
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.values import IntVal


def _need_cluster(site: CallSite) -> None:
    if site.b.cluster is None:
        raise site.b.err(site.node, f"{site.name}() needs a cluster(...) shape in the kernel's header")


def _int(site: CallSite, node, what: str) -> ir.IExpr:
    v = site.b.value(node)
    if not isinstance(v, IntVal):
        raise site.b.err(node, f"{what} must be an integer")
    return v.expr


def tma_load_multicast(site: CallSite):
    _need_cluster(site)
    mask = _int(site, site.args[3], "the multicast mask")
    if isinstance(mask, ir.IConst) and not 0 < mask.value < (1 << 16):
        raise site.b.err(site.args[3], "a multicast mask is a non-zero 16-bit set of cluster ranks")
    hopper.tma_load(site)  # the checks of a tma_load: its views, tile, dtype and mbarrier
    load = site.b.out.pop()
    site.b.out.append(ir.TmaLoadMulticast(load.dst, load.src, load.bar, mask, load.span))


def mbarrier_arrive_cluster(site: CallSite):
    _need_cluster(site)
    bar = hopper._bar(site, site.args[0])
    cta = _int(site, site.args[1], "the CTA rank")
    if isinstance(cta, ir.IConst) and cta.value < 0:
        raise site.b.err(site.args[1], "a CTA rank is not negative")
    site.b.out.append(ir.MbarrierArriveCluster(bar, cta, site.b.sp(site.node)))


def cluster_sync(site: CallSite):
    _need_cluster(site)
    if site.b.divergent:
        raise site.b.err(site.node, "cluster_sync() is met by every thread: it cannot be inside a condition that "
                                    "differs between threads")
    site.b.out.append(ir.ClusterSync(site.b.sp(site.node)))


HANDLERS = {"tma_load_multicast": tma_load_multicast, "mbarrier_arrive_cluster": mbarrier_arrive_cluster,
            "cluster_sync": cluster_sync}
