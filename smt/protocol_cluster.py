"""The protocol obligations of kernels with thread-block clusters (`cluster(...)`).

smt/protocol.py executes one block's protocol skeleton. A cluster's blocks meet each other's
barriers and shared memory, so here the skeletons of all the CTAs of a cluster run together:
statement by statement, each CTA with its own block id, integers, barriers, in-flight copies and
wgmma groups (`CtaSkeleton`, a protocol.Skeleton), and the cluster statements act across them:

* a multicast TMA lands in every CTA its mask names: its bytes count in the destination's phase
  (so `mbarrier-tx` compares each CTA's expect_tx with the bytes all CTAs deliver to it);
* a remote arrival counts on the peer's barrier; an arrival orders the wgmma reads its CTA retired
  before it (they are complete: the arrive is performed after them), and a wait that sees the phase
  complete observes that (per rank), as does the cluster barrier. Nothing else crosses CTAs through
  an arrival (it is a CTA-scope release: the language has no ordinary stores to a peer);
* a refill that multicasts into a peer's stage is checked against the peer's wgmma reads of that
  stage: in flight, or retired but not yet released to the issuing CTA (`stage-reuse`);

and two obligations are new:

  cluster-sync    a cluster_sync follows the mbarrier inits of a CTA before any peer multicasts to
                  or arrives on its barriers, and follows every remote arrival on a CTA that the CTA
                  does not wait for before it exits
  multicast-mask  multicast masks and remote arrivals name CTAs inside the cluster

Every size combination runs its first and last clusters (and every cluster of the several-block
combination, for output-once), with the same bounded loop counts as protocol.py (the bound is
stated in each result). Counterexamples name the CTA rank, the role, the iteration, the stage,
the barrier and the phase.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from argus_verify import hopper, ir
from argus_verify.smt import protocol as P
from argus_verify.smt.report import ObligationResult

CLUSTER_PROTOCOL = ("cluster-sync", "multicast-mask")


class CtaSkeleton(P.Skeleton):
    """One CTA of a cluster: protocol.Skeleton with a rank, and the release/acquire books."""

    # not checked per warpgroup: the releases go through mbarriers, which that rule does not follow
    CROSS_WARPGROUP = False

    def __init__(self, kernel, sizes, block, grid, rank: int, cluster: ClusterRun):
        super().__init__(kernel, sizes, block, grid)
        self.rank = rank
        self.cl = cluster
        C = cluster.C
        self.cl_published: dict = {}  # barrier -> [n] bool: init published to the cluster by a cluster_sync
        self.rel_cur: dict = {}  # barrier -> [n, C]: latest arrival of each rank in the current phase
        self.rel_done: dict = {}  # barrier -> [n, C]: the same for the phase completed last
        self.acquired = np.full(C, -1, dtype=np.int64)  # latest release of each rank this CTA observed
        self.last_read: dict = {}  # alloc -> [elems]: when a retired wgmma of this CTA last read it
        self.read_where: dict = {}  # alloc -> (span, loop) of that wgmma
        self.remote: dict = {}  # (barrier, index) -> (span, loop, rank, phase): remote arrivals not yet ordered
        self.exited = False

    # -- the books ------------------------------------------------------------------------------
    def books(self, name):
        if name not in self.cl_published:
            n = self.allocs[name].shape[0]
            self.cl_published[name] = np.zeros(n, dtype=bool)
            self.rel_cur[name] = np.full((n, self.cl.C), -1, dtype=np.int64)
            self.rel_done[name] = np.full((n, self.cl.C), -1, dtype=np.int64)
        return self.cl_published[name]

    def fail(self, obligation, span, message, explanation, **detail):
        detail.setdefault("cta", self.rank)
        try:
            super().fail(obligation, span, message, explanation, **detail)
        except P.Violation as v:
            v.explanation[0] = f"CTA rank {detail['cta']} (block {tuple(self.block)}), " + v.explanation[0]
            raise

    def mbarrier(self, s: ir.MbarrierOp, env, active):
        waiters = active
        if s.kind == "wait" and self.published and active.sum() > 1:
            # the threads waiting on one (barrier, parity) wait alike: one of each suffices (the role
            # named in a counterexample stays the statement's, self.active)
            idx = np.broadcast_to(np.asarray(self.ev(s.bar.index[0].index, env)), (self.T,))
            par = np.broadcast_to(np.asarray(self.ev(s.value, env)), (self.T,)) % 2
            on = np.nonzero(active)[0]
            _, first = np.unique((idx * 2 + par)[on], return_index=True)
            reps = np.zeros_like(active)
            reps[on[first]] = True
            b = self.bar(s.bar.base)
            if np.all(b["inited"][np.unique(idx[on])]):
                active = reps
        name = s.bar.base
        idx = np.broadcast_to(np.asarray(self.ev(s.bar.index[0].index, env)), (self.T,))[active]
        self.books(name)
        if s.kind == "init":
            self.cl_published[name][idx] = False
            self.rel_cur[name][idx] = -1
        elif s.kind in ("arrive", "expect_tx"):
            self.rel_cur[name][idx, self.rank] = self.cl.tick()
        super().mbarrier(s, env, active)
        if s.kind == "wait" and waiters is not active:  # every waiting thread acquires, not only the one run
            at = np.broadcast_to(np.asarray(self.ev(s.bar.index[0].index, env)), (self.T,))
            par = np.broadcast_to(np.asarray(self.ev(s.value, env)), (self.T,)) % 2
            for i, p in {(int(a), int(b)) for a, b in zip(at[waiters], par[waiters], strict=True)}:
                self.acquire(name, i, waiters & (at == i) & (par == p))

    def try_complete(self, name, i, span):
        b = self.bar(name)
        before = int(b["phase"][i])
        p = self.ph(name, i)
        if b["pending"][i] == 0 and p["landed"] > p["exp"]:
            self.overdelivered(name, i, span)
        super().try_complete(name, i, span)
        if int(b["phase"][i]) != before:
            self.books(name)
            self.rel_done[name][i] = self.rel_cur[name][i]
            self.rel_cur[name][i] = -1

    def overdelivered(self, name, i, span):
        b, p = self.bars[name], self.ph(name, i)
        where, loop = p["spans"][0] if p["spans"] else (span, self.where())
        sources = ", ".join(f"{n} from rank {r}" for r, n in sorted(p.get("from", {}).items()))
        self.fail("mbarrier-tx", where, f"{name}[{i}] phase {b['phase'][i]} of CTA rank {self.rank} expects "
                  f"{p['exp']} bytes but the TMA copies of the cluster deliver {p['issued']} ({sources})",
                  [f"expect_tx ({P._loop(loop)}) does not count {p['issued'] - p['exp']} byte(s) that reach this "
                   "barrier: bytes multicast by peers count in the receiving CTA's phase"],
                  barrier=name, stage=i, phase=int(b["phase"][i]))

    def wait(self, s, name, i, parity):
        b, p = self.bar(name), self.ph(name, i)
        if b["phase"][i] % 2 == parity and b["pending"][i] == 0 and p["issued"] > p["exp"]:
            self.overdelivered(name, i, s.span)
        super().wait(s, name, i, parity)
        # the waiting CTA observes what the arrivals of the completed phase released
        self.books(name)
        self.acquired = np.maximum(self.acquired, self.rel_done[name][i])
        if (name, i) in self.remote and self.remote[(name, i)][3] < b["phase"][i]:
            del self.remote[(name, i)]  # this CTA waited for the phase the remote arrival completed

    def group(self, s: ir.WgmmaGroup):
        retiring = [w for g in self.groups[:max(0, len(self.groups) - s.pending)] for w in g] \
            if s.kind == "wait" else []
        super().group(s)
        if retiring:
            now = self.cl.tick()
            for w in retiring:
                for base, m in w["reads"]:
                    if base not in self.last_read:
                        self.last_read[base] = np.full(self.allocs[base].size_elems, -1, dtype=np.int64)
                    self.last_read[base][m] = now
                    self.read_where[base] = (w["span"], w["loop"])

    def store_tags(self, s: ir.Store, env, active) -> None:
        """A CTA whose whole output tile lies past the tensor (the grid is rounded up to whole
        clusters) stores nothing: its sums have nothing to agree with."""
        rec = self.acc_rec.get(s.value, "none")
        if rec not in ("none", None) and self.gemm is not None and self.k.param(s.dst.base).output:
            starts = [self.uni(it.start, env, active) for it in s.dst.index]
            shape = [int(self.ev(d, {})) if not isinstance(d, ir.IConst) else d.value
                     for d in self.k.param(s.dst.base).shape]
            if any(st >= n for st, n in zip(starts, shape, strict=True)):
                if s.where is None and active.all():
                    self.writes.append((s, starts[0], starts[1], s.dst.tile))
                return
        super().store_tags(s, env, active)

    def tma(self, s, env, active):
        super().tma(s, env, active)
        if isinstance(s, ir.TmaLoad):  # a local copy: its bytes come from this CTA
            i = self.uni(s.bar.index[0].index, env, active)
            p = self.ph(s.bar.base, i)
            p.setdefault("from", {})
            p["from"][self.rank] = p["from"].get(self.rank, 0) + self.tmas[-1]["bytes"] * int(active.sum())


class ClusterRun:
    """The CTAs of one cluster, walked together statement by statement."""

    def __init__(self, kernel: ir.Kernel, sizes: dict, first: tuple, grid: tuple):
        self.k = kernel
        self.C = kernel.cluster_size
        self.seq = 0
        cx, cy, cz = kernel.cluster
        blocks = [(first[0] + x, first[1] + y, first[2] + z) for z in range(cz) for y in range(cy) for x in range(cx)]
        self.ctas = [CtaSkeleton(kernel, sizes, b, grid, r, self) for r, b in enumerate(blocks)]

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    # -- walking --------------------------------------------------------------------------------
    def run(self, body, envs, actives):
        for s in body:
            if not any(a.any() for a in actives):
                return
            self.step(s, envs, actives)

    def step(self, s, envs, actives):
        ctas = self.ctas
        if isinstance(s, ir.For):
            bounds = []
            for sk, env, a in zip(ctas, envs, actives, strict=True):
                sk.active = a
                lo, hi = sk.uni(s.start, env, a), sk.uni(s.stop, env, a)
                bounds.append((lo, hi) if a.any() else (0, 0))
                sk.trips.append((s.span.line if s.span else 0, max(0, -(-(hi - lo) // s.step)) if a.any() else 0))
            lo = min(b[0] for b in bounds if b[1] > b[0]) if any(b[1] > b[0] for b in bounds) else 0
            hi = max(b[1] for b in bounds)
            for i in range(lo, hi):
                inner = []
                for sk, env, a, (lc, hc) in zip(ctas, envs, actives, bounds, strict=True):
                    on = lc <= i < hc and (i - lc) % s.step == 0
                    if on:
                        env[s.var] = i
                        sk.loop[s.var] = i
                    inner.append(a if on else np.zeros_like(a))
                if any(x.any() for x in inner):
                    self.run(s.body, envs, inner)
            for sk in ctas:
                sk.loop.pop(s.var, None)
        elif isinstance(s, ir.If):
            conds = [np.broadcast_to(np.asarray(sk.ev(s.cond, env)) != 0, (sk.T,)) for sk, env in zip(ctas, envs,
                                                                                                       strict=True)]
            self.run(s.then, envs, [a & c for a, c in zip(actives, conds, strict=True)])
            self.run(s.orelse, envs, [a & ~c for a, c in zip(actives, conds, strict=True)])
        elif isinstance(s, ir.TmaLoadMulticast):
            for sk, env, a in zip(ctas, envs, actives, strict=True):
                if a.any():
                    sk.active = a
                    self.multicast(sk, s, env, a)
        elif isinstance(s, ir.MbarrierArriveCluster):
            for sk, env, a in zip(ctas, envs, actives, strict=True):
                if a.any():
                    sk.active = a
                    self.remote_arrive(sk, s, env, a)
        elif isinstance(s, ir.ClusterSync):
            self.cluster_sync(s, actives)
        else:
            for sk, env, a in zip(ctas, envs, actives, strict=True):
                if a.any():
                    sk.step(s, env, a)

    # -- the cluster statements -----------------------------------------------------------------
    def _rank(self, sk: CtaSkeleton, r: int, s, what: str) -> CtaSkeleton:
        if not 0 <= r < self.C:
            sk.fail("multicast-mask", s.span, f"{what} names CTA rank {r}, outside the cluster of {self.C} CTAs "
                    f"{tuple(self.k.cluster)}", ["ranks in a cluster are 0 .. cluster size - 1"], rank=r)
        return self.ctas[r]

    def _published(self, sk: CtaSkeleton, dst: CtaSkeleton, name: str, i: int, s, what: str) -> None:
        if dst is sk:
            return
        if not dst.books(name)[i]:
            sk.fail("cluster-sync", s.span, f"{what} reaches {name}[{i}] of CTA rank {dst.rank} before a cluster_sync "
                    f"has published that CTA's mbarrier_init", [f"rank {dst.rank} may not have initialised it yet: "
                    "a cluster_sync after the inits (and their fence) must precede the first multicast or remote "
                    "arrival"], barrier=name, stage=i, target=dst.rank,
                    phase=int(dst.bar(name)["phase"][i]))

    def multicast(self, sk: CtaSkeleton, s: ir.TmaLoadMulticast, env, active):
        name = s.bar.base
        mask = sk.uni(s.mask, env, active)
        if mask <= 0 or mask >= 1 << 16:
            sk.fail("multicast-mask", s.span, f"multicast mask {mask:#x} is not a non-empty 16-bit set of ranks", [])
        for r in range(16):
            if mask >> r & 1:
                self._rank(sk, r, s, f"multicast mask {mask:#x}")
        alloc = sk.allocs[s.dst.base]
        esize = ir.DTYPE_BYTES[alloc.dtype]
        nbytes = int(np.prod(s.dst.tile)) * esize
        i = sk.uni(s.bar.index[0].index, env, active)
        off = sk.offsets(s.dst, env, active)[0]
        tags = sk.tma_tags(s, env, active)
        for _ in sk.tids[active]:
            for r in range(self.C):
                if not mask >> r & 1:
                    continue
                dst = self.ctas[r]
                dst.bar(name)
                self._published(sk, dst, name, i, s, "a multicast")
                self.check_refill(sk, dst, s, off, i)
                if (name, i) not in dst.phase_tx:
                    sk.fail("async-proxy-fence", s.span, f"TMA completes on {name}[{i}] of CTA rank {r} before its "
                            "mbarrier_init", [])
                p = dst.ph(name, i)
                p["issued"] += nbytes
                p.setdefault("from", {})
                p["from"][sk.rank] = p["from"].get(sk.rank, 0) + nbytes
                dst.tmas.append({"bar": name, "idx": i, "alloc": s.dst.base, "mask": dst.mask(s.dst.base, off),
                                 "off": off, "tags": tags, "span": s.span, "loop": sk.where(),
                                 "phase": int(dst.bars[name]["phase"][i]), "bytes": nbytes})

    def check_refill(self, sk: CtaSkeleton, dst: CtaSkeleton, s, off, i) -> None:
        """A copy from `sk` into `dst`'s stage: no wgmma of `dst` may still read it. Its own in-flight
        reads are the protocol.Skeleton check; a peer's retired reads must have been released to
        `sk` (an arrival of the peer after them, observed by a wait of `sk`, or a cluster_sync)."""
        for w in [w for g in dst.groups for w in g] + dst.open:
            for base, m in w["reads"]:
                if base == s.dst.base and m[off].any():
                    who = "its" if dst is sk else f"CTA rank {dst.rank}'s"
                    sk.fail("stage-reuse", s.span, f"refills {s.dst.base} of CTA rank {dst.rank} while {who} wgmma "
                            f"reading it (line {w['span'].line}, {P._loop(w['loop'])}) is still in flight",
                            ["a wgmma_wait that retires that wgmma must come before the refill"],
                            barrier=s.bar.base, stage=i, target=dst.rank,
                            phase=int(dst.bar(s.bar.base)["phase"][i]))
        if dst is sk:
            return
        last = dst.last_read.get(s.dst.base)
        if last is not None and (last[off] > sk.acquired[dst.rank]).any():
            span, loop = dst.read_where[s.dst.base]
            sk.fail("stage-reuse", s.span, f"multicasts into {s.dst.base} of CTA rank {dst.rank} before rank "
                    f"{dst.rank} released it: its wgmma (line {span.line}, {P._loop(loop)}) read that stage and no "
                    f"arrival of rank {dst.rank} after that read was observed by rank {sk.rank}",
                    [f"the refill must wait for a release of every CTA it writes to: rank {dst.rank}'s consumers "
                     f"arrive on rank {sk.rank}'s empty barrier (mbarrier_arrive_cluster) and the producer waits on "
                     "it"], barrier=s.bar.base, stage=i, target=dst.rank,
                            phase=int(dst.bar(s.bar.base)["phase"][i]))

    def remote_arrive(self, sk: CtaSkeleton, s: ir.MbarrierArriveCluster, env, active):
        name = s.bar.base
        idx = np.broadcast_to(np.asarray(sk.ev(s.bar.index[0].index, env)), (sk.T,))[active]
        cta = np.broadcast_to(np.asarray(sk.ev(s.cta, env)), (sk.T,))[active]
        for i, r in zip(idx.tolist(), cta.tolist(), strict=True):
            dst = self._rank(sk, int(r), s, "mbarrier_arrive_cluster")
            b = dst.bar(name)
            if not b["inited"][i]:
                sk.fail("async-proxy-fence", s.span, f"{name}[{i}] of CTA rank {r} is used before mbarrier_init", [])
            self._published(sk, dst, name, i, s, "a remote arrival")
            dst.books(name)
            dst.rel_cur[name][i, sk.rank] = self.tick()
            if dst is not sk:
                dst.remote[(name, i)] = (s.span, sk.where(), sk.rank, int(b["phase"][i]))
            b["pending"][i] -= 1
            if b["pending"][i] < 0:
                sk.fail("mbarrier-phase", s.span, f"more arrivals on {name}[{i}] of CTA rank {r} in phase "
                        f"{b['phase'][i]} than its count {b['count'][i]}", [], barrier=name, stage=i,
                        phase=int(b["phase"][i]))
            dst.try_complete(name, i, s.span)

    def cluster_sync(self, s: ir.ClusterSync, actives):
        for sk, a in zip(self.ctas, actives, strict=True):
            if not a.all():
                sk.active = a
                sk.fail("cluster-sync", s.span, "cluster_sync is not reached by every thread of every CTA of the "
                        "cluster: the cluster barrier would hang", [])
        now = self.tick()
        for sk in self.ctas:
            for name, b in sk.bars.items():
                sk.books(name)[:] = b["inited"]
            sk.acquired[:] = now
            sk.remote.clear()
            sk.published = True  # the cluster barrier is a block barrier too
            sk.barrier_acquires()

    def finish(self):
        """The CTAs exit: nothing a peer does may still reach them."""
        for sk in self.ctas:
            sk.active = np.ones(sk.T, dtype=bool)
            for (name, i), (span, loop, r, _) in sk.remote.items():
                sk.loop = dict(loop)
                sk.fail("cluster-sync", span, f"CTA rank {r}'s arrival on {name}[{i}] of CTA rank {sk.rank} "
                        f"({P._loop(loop)}) is not ordered before rank {sk.rank} exits",
                        [f"rank {sk.rank} never waits for that phase: a cluster_sync before the exit must keep it "
                         "alive until its peers' remote arrivals are done"], barrier=name, stage=i, target=sk.rank)
            for t in sk.tmas:
                sk.fail("cluster-sync", t["span"], f"a TMA copy into CTA rank {sk.rank}'s {t['alloc']} "
                        f"({P._loop(t['loop'])}) is still in flight when it exits", [],
                        barrier=t["bar"], stage=t["idx"], phase=t["phase"])


def _cluster_first(block: tuple, shape: tuple) -> tuple:
    return tuple(b - b % c for b, c in zip(block, shape, strict=True))


def check_cluster_protocol(kernel: ir.Kernel, shapes: dict | None = None) -> list:
    """protocol.check_protocol for a kernel with clusters: the same obligations, and CLUSTER_PROTOCOL."""
    t0 = time.perf_counter()
    desc, box = P._layout_checks(kernel)
    allocs = {a.name: a for a in kernel.shared_allocs()}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.TmaLoadMulticast):
            box.append(P._check_tma(allocs[s.dst.base], s))
    found: dict = {}
    vals, depth = P._candidates(kernel)
    control = P._control_sizes(kernel)
    base = {name: min(vals, key=lambda v: (v < 64, v)) for name in kernel.sizes}
    trip_bound = 2 * depth + 2
    combos = []
    if shapes:
        combos.append(dict(shapes))
    else:
        combos.append(dict(base))
        qmax = max([v for _, v in kernel.consts if isinstance(v, int)] + [64])
        combos.append({n: 2 * qmax + 8 for n in kernel.sizes})
        for name in kernel.sizes:
            if name in control:
                combos += [{**base, name: v} for v in vals]
    shape = kernel.cluster
    seen, runs = set(), 0
    tag_state = {"stored": False, "unknown": False}
    first = P._first_spans(kernel)
    once_checked, once_scope = False, ""
    grid_ok = True
    for sizes in combos:
        if runs >= P.MAX_RUNS:
            break
        if not P._admissible(kernel, sizes):
            continue
        try:
            grid = tuple(max(1, int(ir.eval_int(g, sizes))) for g in kernel.grid) + (1, 1)
        except (KeyError, ZeroDivisionError):
            continue
        grid = grid[:3]
        if any(g % c for g, c in zip(grid, shape, strict=True)):
            grid_ok = False
            found.setdefault("cluster-sync", P.Violation(
                "cluster-sync", kernel.span, f"grid {grid} is not a multiple of the cluster shape {shape}",
                ["clusters tile the grid: every grid extent must be a multiple of the cluster's (the launch fails)"],
                {"sizes": dict(sizes), "loop": {}}))
            continue
        last = _cluster_first(tuple(g - 1 for g in grid), shape)
        starts = [(0, 0, 0), last]
        every = len(combos) > 1 and sizes is combos[1]
        if every:
            starts = list(itertools.product(range(0, grid[0], shape[0]), range(0, grid[1], shape[1]),
                                            range(0, grid[2], shape[2])))
            written = {t.name: np.zeros([int(ir.eval_int(d, sizes)) for d in t.shape], dtype=np.int64)
                       for t in kernel.outputs}
        complete = True
        for start in dict.fromkeys(starts):
            run = ClusterRun(kernel, sizes, start, grid)
            try:
                run.run(kernel.body, [{} for _ in run.ctas], [np.ones(kernel.block, dtype=bool) for _ in run.ctas])
                run.finish()
            except P.Violation as v:
                found.setdefault(v.obligation, v)
                complete = False
            except (KeyError, ZeroDivisionError, IndexError):
                tag_state["unknown"] = True
                complete = False
            for sk in run.ctas:
                tag_state["stored"] |= getattr(sk, "stored", False)
                tag_state["unknown"] |= getattr(sk, "tag_unknown", False)
            if every and complete:
                for sk in run.ctas:
                    for st, r0, c0, (rows, cols) in sk.writes:
                        w = written[st.dst.base]
                        w[max(r0, 0):r0 + rows, max(c0, 0):c0 + cols] += 1
                        if (w > 1).any():
                            i, j = (int(x[0]) for x in np.nonzero(w > 1))
                            found.setdefault("output-once", P.Violation(
                                "output-once", st.span, f"{st.dst.base}[{i}, {j}] is written twice",
                                [f"block {sk.block}"], {"sizes": dict(sizes), "loop": {}, "block": list(sk.block)}))
        if every and complete:
            for name, w in written.items():
                if (w == 0).any() and "output-once" not in found:
                    i, j = (int(x[0]) for x in np.nonzero(w == 0))
                    found["output-once"] = P.Violation("output-once", first.get("store") or kernel.span,
                                                       f"{name}[{i}, {j}] is never written", [],
                                                       {"sizes": dict(sizes), "loop": {}})
            once_checked = bool(written)
            once_scope = ", ".join(f"{k}={v}" for k, v in sizes.items()) + f", all {len(starts)} clusters"
        for sk in run.ctas:
            seen.add(tuple(sk.trips))
        runs += 1
    trips = sorted({t for sig in seen for _, t in sig})
    covered = [t for t in range(0, trip_bound + 1) if t in trips]
    scope = (f"checked on {runs} size combinations, the CTAs of each cluster together (loop trip counts "
             f"{covered[0] if covered else 0}..{covered[-1] if covered else 0}, bound 2P+2 = {trip_bound})") \
        if not shapes else "checked for " + ", ".join(f"{k}={v}" for k, v in shapes.items())
    msgs = {
        "mbarrier-tx": "expect_tx byte counts equal the bytes each phase's TMA copies deliver, multicast from "
                       "peers included",
        "mbarrier-phase": "producer and consumer agree on stage and parity; every wait's phase completes",
        "stage-reuse": "no stage is refilled before the wgmmas reading it retired, nor a peer's before the peer "
                       "released it",
        "wgmma-accumulator": "accumulators are read only after their wgmma_wait and fenced before wgmma",
        "async-proxy-fence": "generic shared writes and mbarrier inits are fenced before async-proxy use",
        "cluster-sync": "a cluster_sync publishes the mbarrier inits before any multicast or remote arrival, and "
                        "orders the last remote arrival on each CTA before it exits",
        "multicast-mask": "multicast masks and remote arrivals name CTAs inside the cluster",
    }
    spans = {**first}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.ClusterSync):
            spans.setdefault("cluster-sync", s.span)
        if isinstance(s, (ir.TmaLoadMulticast, ir.MbarrierArriveCluster)):
            spans.setdefault("multicast-mask", s.span)
    # The CTAs' warpgroups run in lockstep here (CROSS_WARPGROUP is off): a refill is not checked
    # against a release by each warpgroup that read the stage, and a wgmma_wait retires only its own
    # warpgroup's wgmmas. With one warpgroup per CTA nothing is lost; with more, a mutant whose stage is
    # released by warpgroup 0 alone passed as proved: the result is unknown instead.
    several_warpgroups = int(np.prod(kernel.block)) > hopper.WARPGROUP and any(
        isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma) for s in ir.walk_stmts(kernel.body))
    out = []
    for name, msg in msgs.items():
        if name in found:
            out.append(_violated(found[name], kernel))
        elif name == "cluster-sync" and not grid_ok:
            continue
        elif name == "stage-reuse" and several_warpgroups:
            reason = ("the cluster skeleton runs each CTA's warpgroups in lockstep, so it does not check that "
                      "every warpgroup reading a stage released it before the refill")
            out.append(ObligationResult(name, "unknown", spans.get(name) or kernel.span,
                                        f"{msg} could not be proved: {reason}", detail={"reason": reason}))
        else:
            out.append(ObligationResult(name, "proved", spans.get(name) or kernel.span, f"{msg} ({scope})"))
    out += desc + box
    gemm = P._gemm_contract(kernel)
    tags = {"tag-assertion": "wgmma products agree on k: each k step multiplies one column of "
                             f"{gemm[0] if gemm else 'A'} with the same row of {gemm[1] if gemm else 'B'}",
            "output-contract": "every stored accumulator element sums its own output row and column",
            "reduction-coverage": "every k of the contract's sum enters each output element exactly once",
            "output-once": "every output element is written exactly once"}
    for name, msg in tags.items():
        where = first.get("wgmma-accumulator") if name == "tag-assertion" else \
            (gemm[3] if gemm and name == "reduction-coverage" else first.get("store"))
        if name in found:
            out.append(_violated(found[name], kernel))
        elif gemm is not None and tag_state["stored"] and not tag_state["unknown"] and \
                (name != "output-once" or once_checked):
            how = once_scope if name == "output-once" else f"{scope}, first and last cluster"
            out.append(ObligationResult(name, "proved", where or kernel.span,
                                        f"{msg} (followed through TMA, multicast and wgmma; {how})"))
    if not shapes:
        P.mark_bounded(out, runs, trip_bound, covered, kernel)
    dt = time.perf_counter() - t0
    for r in out:
        r.seconds = dt / max(1, len(out))
    return out


def _violated(v: P.Violation, kernel) -> ObligationResult:
    return ObligationResult(v.obligation, "violated", v.span or kernel.span, v.message,
                            witness={"sizes": v.detail["sizes"], "loop": v.detail.get("loop", {}),
                                     **({"cta": v.detail["cta"]} if "cta" in v.detail else {})},
                            detail=v.detail, explanation=v.explanation)
