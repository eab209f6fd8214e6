"""The interpreter's thread-block clusters: the CTAs of a cluster run together in one batch (ordered
by rank, so rank r of block g's cluster is row `base[g] + r`), and each one's shared memory is the
others' distributed shared memory.

What a cluster adds, with asynchronous effects as late as the protocol allows:

* `tma_load_multicast` poisons and later lands the tile in every CTA its mask names, completing the
  bytes on each one's own mbarrier (landed when that CTA waits, like a tma_load). A mask bit outside
  the cluster is an error (the hardware's behaviour is undefined).
* A peer may lag arbitrarily behind: its wgmma reads of a stage count as still in progress for a
  CTA until that CTA has observed (through an mbarrier wait or the cluster barrier) an arrival the
  peer made after those reads retired. A multicast that overwrites a peer's stage before then makes
  the peer's accumulator undefined (NaN): the refill raced with the peer's wgmma.
* An arrival, a multicast or a remote arrival on a peer's mbarrier before a `cluster_sync` has
  published the peer's `mbarrier_init` is an error (the peer may not have initialised it yet), and
  so is a remote arrival on a CTA that no later `cluster_sync` or wait of that CTA orders before the
  CTA exits (the access would reach an exited CTA's shared memory).

The bookkeeping hooks into the Hopper family (interp_hopper.HopperOps) through its `_complete`,
`_wait` and `_retire` steps.
"""

from __future__ import annotations

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.runtime.interp_hopper import Tma
from argus_verify.runtime.schedules import Arrival


def cluster_rank(blocks: np.ndarray, shape: tuple) -> np.ndarray:
    """[n] rank of each block (rows of [n, 3] block ids) in its cluster (clusters tile the grid)."""
    cx, cy, cz = shape
    return blocks[:, 0] % cx + cx * (blocks[:, 1] % cy) + cx * cy * (blocks[:, 2] % cz)


def cluster_order(ids: np.ndarray, grid: tuple, shape: tuple) -> np.ndarray:
    """The block ids [n, 3] reordered cluster by cluster, each cluster's blocks by rank. Refuses a
    grid that the cluster shape does not tile (the launch fails on the GPU too)."""
    if any(g % c for g, c in zip(grid, shape, strict=True)):
        raise ArgusRuntimeError(f"grid {tuple(grid)} is not a multiple of the cluster shape {tuple(shape)}: "
                                "the launch fails")
    cx, cy, cz = shape
    nx, ny = grid[0] // cx, grid[1] // cy
    cid = ids[:, 0] // cx + nx * (ids[:, 1] // cy + ny * (ids[:, 2] // cz))
    order = np.lexsort((cluster_rank(ids, shape), cid))
    return ids[order]


class ClusterState:
    def __init__(self, blocks: np.ndarray, shape: tuple):
        self.G = len(blocks)
        self.C = shape[0] * shape[1] * shape[2]
        self.rank = cluster_rank(blocks, shape).astype(np.int64)
        self.base = np.arange(self.G) - self.rank
        self.seq = 0
        self.published: dict = {}  # barrier allocation -> [G, n]: init published to the cluster
        self.last_read: dict = {}  # shared allocation -> [G, elems]: when a wgmma of the block last read it
        self.read_acc: dict = {}  # (block, allocation) -> the accumulator name of that read
        self.rel_cur: dict = {}  # barrier allocation -> [G, n, C]: latest arrival of each rank, this phase
        self.rel_done: dict = {}  # the same for the phase completed last
        self.acquired = np.full((self.G, self.C), -1, dtype=np.int64)  # what each block has observed of each rank
        self.remote: dict = {}  # (block, barrier, index) -> (span, arriving block): not yet ordered before exit
        self.tainted = np.zeros(self.G, dtype=bool)

    def tick(self) -> int:
        self.seq += 1
        return self.seq


class ClusterOps:
    """Handlers of TmaLoadMulticast, MbarrierArriveCluster and ClusterSync, and the cluster's hooks
    into the Hopper family, for one ThreadGroup."""

    def cluster(self) -> ClusterState:
        st = self.hopper()
        if getattr(st, "cluster", None) is None:
            st.cluster = ClusterState(self.batch.blocks, self.launch.kernel.cluster)
        return st.cluster

    def _clustered(self) -> bool:
        if not hasattr(self.launch, "clustered"):
            self.launch.clustered = ir.uses_cluster(self.launch.kernel)
        return self.launch.clustered

    def _bar_state(self, cs: ClusterState, name: str):
        if name not in cs.published:
            n = self.batch.shared.allocs[name].shape[0]
            cs.published[name] = np.zeros((self.G, n), dtype=bool)
            cs.rel_cur[name] = np.full((self.G, n, cs.C), -1, dtype=np.int64)
            cs.rel_done[name] = np.full((self.G, n, cs.C), -1, dtype=np.int64)
        return cs.published[name], cs.rel_cur[name]

    def _target(self, cs: ClusterState, s, g: np.ndarray, ranks: np.ndarray, what: str) -> np.ndarray:
        bad = (ranks < 0) | (ranks >= cs.C)
        if bad.any():
            k = int(np.argmax(bad))
            raise ArgusRuntimeError(f"{what} names rank {int(ranks[k])}, outside the cluster of {cs.C} blocks "
                                    f"(block {self._block(g[k])})", s.span)
        return cs.base[g] + ranks

    def _check_published(self, cs: ClusterState, s, bar: str, g, gd, i, what: str) -> None:
        published, _ = self._bar_state(cs, bar)
        bad = (gd != g) & ~published[gd, i]
        if bad.any():
            k = int(np.argmax(bad))
            raise ArgusRuntimeError(
                f"{what} reaches {bar}[{int(i[k])}] of block {self._block(gd[k])} (rank {int(cs.rank[gd[k]])}) "
                f"from block {self._block(g[k])} before a cluster_sync published that block's mbarrier_init: the "
                "peer may not have initialised it yet", s.span)

    # -- hooks into the Hopper family ----------------------------------------------------------
    def visit_MbarrierOp(self, s: ir.MbarrierOp, env, active, loop):
        if self._clustered() and s.kind != "wait":
            cs = self.cluster()
            g, t, i = self._bar_index(s, s.bar, env, active)
            published, rel = self._bar_state(cs, s.bar.base)
            if s.kind == "init":
                published[g, i] = False
                rel[g, i] = -1
            else:  # a local arrival releases what its block did so far
                rel[g, i, cs.rank[g]] = cs.tick()
        return super().visit_MbarrierOp(s, env, active, loop)

    def _complete(self, bars) -> None:
        if self._clustered():
            cs = self.cluster()
            done = bars.inited & (bars.pending == 0) & (bars.tx == 0)
            name = next(n for n, b in self.hopper().bars.items() if b is bars)
            self._bar_state(cs, name)
            cs.rel_done[name][done] = cs.rel_cur[name][done]
            cs.rel_cur[name][done] = -1
        super()._complete(bars)

    def _wait(self, s, bars, g, t, i, env) -> None:
        super()._wait(s, bars, g, t, i, env)
        if self._clustered():  # the waiting block observes what the arrivals of the completed phase released
            cs = self.cluster()
            self._bar_state(cs, s.bar.base)
            seen = cs.rel_done[s.bar.base][g, i]  # [n, C]
            np.maximum.at(cs.acquired, g, seen)
            for gb, ib in set(zip(g.tolist(), i.tolist(), strict=True)):
                cs.remote.pop((gb, s.bar.base, ib), None)

    def _retire(self, st, k: int, g: int, env) -> None:
        super()._retire(st, k, g, env)
        if not self._clustered():
            return
        cs = self.cluster()
        w = st.ops[k]
        now = cs.tick()
        for name, off in ((w.a_alloc, w.a_off), (w.b_alloc, w.b_off)):
            if name not in cs.last_read:
                cs.last_read[name] = np.full((self.G, self.batch.shared.mem[name].shape[1]), -1, dtype=np.int64)
            o = off[g].reshape(-1)
            o = o[(o >= 0) & (o < cs.last_read[name].shape[1])]
            cs.last_read[name][g, o] = now
            cs.read_acc[(g, name)] = w.name
        if cs.tainted[g]:  # a peer overwrote a stage this block's wgmma may still have been reading
            w.result[g] = np.nan
            latest = st.latest.get(w.name)
            if latest is None or latest[g] in (-1, k):
                env[w.name][g] = np.nan

    # -- cluster statements --------------------------------------------------------------------
    def visit_TmaLoadMulticast(self, s: ir.TmaLoadMulticast, env, active, loop):
        st = self.hopper()
        cs = self.cluster()
        g, t, i, off, vals, nbytes = self._tma_tile(s, env, active, "tma_load_multicast")
        mask = self.per_thread(self.ieval(s.mask, env), np.int64)[g, t]
        outside = (mask < 0) | (mask >= (1 << 16)) | ((mask >> cs.C) != 0)
        if outside.any():
            k = int(np.argmax(outside))
            raise ArgusRuntimeError(f"multicast mask {int(mask[k]):#x} names CTAs outside the cluster of {cs.C} "
                                    f"blocks (block {self._block(g[k])})", s.span)
        for r in range(cs.C):
            on = (mask >> r) & 1 == 1
            if not on.any():
                continue
            src_g, di, doff, dvals = g[on], i[on], off[on], vals[on]
            gd = self._target(cs, s, src_g, np.full(len(src_g), r), "tma_load_multicast")
            self._check_published(cs, s, s.bar.base, src_g, gd, di, "a multicast")
            self._race_with_peer_reads(cs, s, src_g, gd, r, doff, env)
            self._write_async(s.dst.base, gd, doff, np.full(doff.shape, np.nan, dtype=dvals.dtype))
            st.tmas.append(Tma(gd, s.bar.base, di, s.dst.base, doff, dvals, nbytes, s.span))

    def _race_with_peer_reads(self, cs: ClusterState, s, src_g, gd, r: int, doff, env) -> None:
        """A multicast overwriting elements a peer's wgmma read after the last release the issuer
        observed from that peer: the peer may still be reading them, so its result is undefined."""
        last = cs.last_read.get(s.dst.base)
        if last is None:
            return
        for j in range(len(src_g)):
            a, d = int(src_g[j]), int(gd[j])
            if a == d:
                continue
            o = doff[j][(doff[j] >= 0) & (doff[j] < last.shape[1])]
            if (last[d, o] > cs.acquired[a, r]).any():
                cs.tainted[d] = True
                name = cs.read_acc.get((d, s.dst.base))
                if name is not None and name in env:
                    env[name][d] = np.nan

    def visit_MbarrierArriveCluster(self, s: ir.MbarrierArriveCluster, env, active, loop):
        cs = self.cluster()
        bars = self._bars(s.bar.base)
        g, t, i = self._bar_index(s, s.bar, env, active)
        cta = self.per_thread(self.ieval(s.cta, env), np.int64)[g, t]
        gd = self._target(cs, s, g, cta, "mbarrier_arrive_cluster")
        bad = ~bars.inited[gd, i]
        if bad.any():
            k = int(np.argmax(bad))
            raise ArgusRuntimeError(f"mbarrier {s.bar.base}[{int(i[k])}] of block {self._block(gd[k])} used before "
                                    "mbarrier_init", s.span)
        self._check_published(cs, s, s.bar.base, g, gd, i, "a remote arrival")
        _, rel = self._bar_state(cs, s.bar.base)
        now = cs.tick()
        for a, d, ib in zip(g.tolist(), gd.tolist(), i.tolist(), strict=True):
            rel[d, ib, cs.rank[a]] = now
            if a != d:
                cs.remote[(d, s.bar.base, ib)] = (s.span, a)
        np.add.at(bars.pending, (gd, i), -1)
        if (bars.pending < 0).any():
            gg, ii = (int(x[0]) for x in np.nonzero(bars.pending < 0))
            raise ArgusRuntimeError(f"more arrivals on {s.bar.base}[{ii}] of block {self._block(gg)} than its count "
                                    "in one phase", s.span)
        self._complete(bars)

    def visit_ClusterSync(self, s: ir.ClusterSync, env, active, loop):
        cs = self.cluster()
        part = active.any(1) & ~active.all(1)
        if part.any():
            g = int(np.argmax(part))
            raise ArgusRuntimeError(f"cluster_sync reached by only some threads of block {self._block(g)}: the "
                                    "cluster would hang", s.span)
        on = active.any(1)
        for g in np.nonzero(on)[0]:
            peers = cs.base[g] + np.arange(cs.C)
            if not on[peers].all():
                raise ArgusRuntimeError(f"cluster_sync reached by block {self._block(g)} but not by every block of "
                                        "its cluster: the cluster would hang", s.span)
        # arrive.release + wait.acquire: everything before is visible to every block of the cluster after
        for name, bars in self.hopper().bars.items():
            published, _ = self._bar_state(cs, name)
            published[on] = bars.inited[on]
        now = cs.tick()
        cs.acquired[on] = now
        cs.remote = {k: v for k, v in cs.remote.items() if not on[k[0]]}
        yield Arrival(s, tuple(loop.items()), active)


def check_cluster_exit(batch) -> None:
    """At the end of a batch: no remote arrival on a block is left unordered before its exit."""
    cs = getattr(batch.hopper, "cluster", None)
    if cs is None or not cs.remote:
        return
    (g, bar, i), (span, a) = next(iter(cs.remote.items()))
    blk = tuple(int(x) for x in batch.blocks[g])
    src = tuple(int(x) for x in batch.blocks[a])
    raise ArgusRuntimeError(f"block {blk} may exit while block {src} of its cluster still arrives on its {bar}[{i}]: "
                            "no cluster_sync (or wait of that block) orders the remote arrival before the exit, so "
                            "it can reach an exited block's shared memory", span)
