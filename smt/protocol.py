"""The Hopper protocol obligations: mbarriers, TMA, wgmma and their fences.

For a kernel that uses them, `check_protocol(kernel)` returns one result per obligation:

  mbarrier-tx        expect_tx bytes of a phase == the bytes the TMA copies of that phase deliver
                     (more: the phase never completes, a hang; fewer: it completes before the data)
  mbarrier-phase     every wait targets the phase the producer fills for it (stage and parity agree),
                     no wait targets a phase that never completes, no async read of a stage whose
                     copy is still in flight
  stage-reuse        a stage is refilled (TMA) only after every wgmma reading it was retired by a
                     wgmma_wait
  wgmma-accumulator  accumulators are read only after the wgmma_wait that retires their wgmma, and
                     registers written by ordinary code are fenced (wgmma_fence) before a wgmma
  async-proxy-fence  ordinary shared writes are fenced (fence_proxy_async) before an async-proxy
                     read (wgmma); an mbarrier init is fenced (fence_mbarrier_init) before a TMA
                     completes on it
  descriptor-layout  every wgmma descriptor the compiler derives reads exactly the elements the
                     declared layout places (argus_verify.hopper, compared element by element)
  tma-box            every TMA box writes (loads) or reads (stores) exactly where the declared layout
                     places the tile
  bulk-group         the shared tile of a TMA store is not written again, by any thread, before a
                     bulk_wait of the issuing thread retired the store (and a barrier() published that
                     wait to the other writers), and the block does not exit before it

The last two are exhaustive comparisons over the (constant) tiles: proofs. The protocol ones are
checked by executing the kernel's protocol skeleton (integers, control flow, barrier states, copy
footprints, register states; no data) for one block and every thread, with asynchronous work
completing as late as allowed, for every combination of sizes that gives each loop every trip
count from 0 to 2 P + 2 (P: the deepest mbarrier array, so every stage and parity residue and the
prologue and drain edges meet). That bound is stated in each result: it is a bounded check of the
loop counts, not an induction over them. Threads run in lockstep (one warpgroup: thread 0 produces,
every thread consumes), except in a kernel with warpgroup roles (argus_verify/roles.py): there each
warpgroup runs on its own and they meet at mbarriers (smt/protocol_roles.py, with the obligations of
the producer/consumer form).
"""

from __future__ import annotations

import copy
import itertools
import math
import time

import attrs
import numpy as np

from argus_verify import hopper, ir, roles
from argus_verify.diagnostics import Span
from argus_verify.smt.report import ObligationResult

PROTOCOL = ("mbarrier-tx", "mbarrier-phase", "stage-reuse", "wgmma-accumulator", "async-proxy-fence",
            "descriptor-layout", "tma-box", "bulk-group")

MAX_RUNS = 400
_OFFSETS: dict = {}  # (id(view), index values, slice starts) -> (view, element offsets): layouts are constant
_MASKS: dict = {}  # (allocation, id(offsets)) -> (offsets, their mask)
_EV: dict = {}  # id(integer expression) -> (the expression, its evaluator)
_TMA_TAGS: dict = {}  # (tensor's index, box, start, tensor shape) -> the tags a TMA tile receives


class Violation(Exception):
    def __init__(self, obligation: str, span, message: str, explanation: list, detail: dict):
        super().__init__(message)
        self.obligation, self.span, self.message = obligation, span, message
        self.explanation, self.detail = explanation, detail

    def __reduce__(self):  # (a run's findings come back from a forked child)
        return Violation, (self.obligation, self.span, self.message, self.explanation, self.detail)


class _Deadlock(Exception):
    pass


def _evaluator(e: ir.IExpr):
    """The function (skeleton, env) -> value of integer expression e, built once per expression
    (the skeleton evaluates the same loop bounds and indices millions of times)."""
    hit = _EV.get(id(e))
    if hit is None or hit[0] is not e:
        hit = _EV[id(e)] = (e, _compile_int(e))
    return hit[1]


def _compile_int(e):
    from argus_verify import semantics

    if isinstance(e, ir.IConst):
        v = e.value
        return lambda sk, env: v
    if isinstance(e, ir.IVar):
        n = e.name
        return lambda sk, env: env[n] if n in env else sk.sizes[n]
    if isinstance(e, ir.ISpecial):
        kind, _, axis = e.which.partition(".")
        i = "xyz".find(axis)
        if kind in ("block_id", "num_blocks") and i >= 0:
            return (lambda sk, env: sk.block[i]) if kind == "block_id" else (lambda sk, env: sk.grid[i])
        per_thread = {"thread_id": lambda t: t, "warp_id": lambda t: t // 32, "lane_id": lambda t: t % 32}
        f = per_thread.get(e.which)
        if f is None:
            def unknown(sk, env):
                raise KeyError(e.which)
            return unknown
        return lambda sk, env: f(sk.tids)
    if isinstance(e, ir.IUn) and e.op in semantics.INT_UNARY:
        ref, a = semantics.INT_UNARY[e.op].ref, _evaluator(e.a)
        return lambda sk, env: ref(a(sk, env))
    if isinstance(e, ir.ISelect):
        c, a, b = _evaluator(e.cond), _evaluator(e.a), _evaluator(e.b)
        return lambda sk, env: np.where(c(sk, env), a(sk, env), b(sk, env))
    if isinstance(e, ir.IBin) and e.op in semantics.INT_OPS:
        entry, a, b = semantics.INT_OPS[e.op], _evaluator(e.a), _evaluator(e.b)
        ref = entry.ref
        if not entry.divides:
            return lambda sk, env: ref(a(sk, env), b(sk, env))

        def divides(sk, env):
            x, y = a(sk, env), b(sk, env)
            if y == 0 if type(y) is int else np.any(np.asarray(y) == 0):  # (a guard keeps those lanes off it)
                return np.zeros_like(np.asarray(x))
            return ref(x, y)
        return divides

    def unknown(sk, env):
        raise KeyError(e.op if isinstance(e, (ir.IUn, ir.IBin)) else type(e).__name__)
    return unknown


class BulkState:
    """The TMA stores of one block and what their shared sources may still be read for."""

    def __init__(self, sizes: dict):
        self.open: dict = {}  # issuing thread -> stores not committed
        self.groups: dict = {}  # issuing thread -> committed groups, oldest first
        self.released: list = []  # stores retired by a bulk_wait not yet published by a barrier()
        self.sums: list = []  # the accumulator records (_Rec) stored into shared memory
        self.sum_id = {a: np.full(n, -1) for a, n in sizes.items()}  # element -> its sum
        self.unpublished = {a: np.full(n, -1) for a, n in sizes.items()}  # writer, -2 several

    def in_flight(self) -> list:
        return [st for v in self.open.values() for st in v] + \
            [st for v in self.groups.values() for grp in v for st in grp]


_BULK_KINDS = (ir.TmaStore, ir.BulkGroup, ir.Barrier, ir.Store, ir.Stmatrix, ir.TmaLoad)
_STORES: dict = {}  # id(kernel) -> whether it issues TMA stores


def _has_tma_store(kernel) -> bool:
    if id(kernel) not in _STORES:
        _STORES.clear()  # one kernel at a time: ids of freed kernels may be reused
        _STORES[id(kernel)] = any(isinstance(s, ir.TmaStore) for s in ir.walk_stmts(kernel.body))
    return _STORES[id(kernel)]


class BulkSteps:
    """The Skeleton's handlers of TMA stores and bulk groups (mixed into Skeleton)."""

    def bulk_step(self, s, env, active) -> bool:
        """Handle `s` where it concerns TMA stores; True when nothing is left for `step` to do."""
        kind = type(s)
        if kind is ir.Assign:
            if type(s.op) is ir.Cast and isinstance(self.acc_rec.get(s.op.arg), _Rec):
                # a rounded accumulator holds the same sums: follow it (as `assign` does for the rest)
                self.read_frag(s.op.arg, s)
                self.acc_rec[s.name] = self.acc_rec[s.op.arg].copy()
                self.unfenced[s.name] = s.span
                self.pending_acc.pop(s.name, None)
                return True
            return False
        if self.bulk is None or kind not in _BULK_KINDS:  # a kernel without TMA stores
            return False
        if kind is ir.TmaStore:
            self.tma_store(s, env, active)
            return True
        if kind is ir.BulkGroup:
            self.bulk_group(s, active)
            return True
        if kind is ir.Barrier:
            self.bulk.released = []
            for w in self.bulk.unpublished.values():
                w[:] = -1
            return False
        dst = s.dst
        if dst.space != "shared":
            return False
        off = self.offsets(dst, env, active)[0]
        self.bulk_write(dst.base, off, s.span, active)
        if not isinstance(s, ir.TmaLoad):  # an ordinary write: other threads see it after a barrier()
            writers = self.tids[active]
            self.bulk.unpublished[dst.base][off] = int(writers[0]) if len(writers) == 1 else -2
        rec = self.acc_rec.get(s.value) if isinstance(s, ir.Store) else None
        self.bulk.sum_id[dst.base][off] = -1
        if not isinstance(rec, _Rec) or rec.rows is None or s.where is not None or not active.all():
            return False
        # a stored accumulator: each shared element holds the sum of its output row and column
        self.read_frag(s.value, s)
        self.generic[dst.base][off] = 0
        rows, cols = dst.tile
        self.bulk.sums.append(rec.copy())
        self.bulk.sum_id[dst.base][off] = len(self.bulk.sums) - 1
        self.tag[dst.base][off] = np.stack([np.full(rows * cols, -4), np.repeat(rec.rows, cols),
                                            np.tile(rec.cols, rows)], -1)
        return True

    def bulk_write(self, base: str, off, span, active) -> None:
        """An ordinary or TMA write of shared elements `off` of `base`: no TMA store may still read them."""
        flying = self.bulk.in_flight()
        if not flying and not self.bulk.released:
            return
        hit = np.zeros(len(self.bulk.sum_id[base]), dtype=bool)
        hit[off] = True
        for st in flying:
            if st["alloc"] == base and st["mask"][hit].any():
                self.fail("bulk-group", span, f"{base} is written while the TMA store at line {st['span'].line} "
                          f"({_loop(st['loop'])}) may still read it",
                          ["a bulk_wait of the storing thread must retire the store before its source is written "
                           "again (then a barrier() for the other threads)"], store_line=st["span"].line)
        for st in self.bulk.released:
            others = self.tids[active][self.tids[active] != st["tid"]]
            if st["alloc"] == base and st["mask"][hit].any() and len(others):
                self.fail("bulk-group", span, f"threads {int(others[0])}.. write {base} after thread {st['tid']}'s "
                          f"bulk_wait with no barrier() between: the TMA store at line {st['span'].line} may still "
                          "read it for them", ["a barrier() after the bulk_wait orders it before the other threads' "
                                               "writes"], store_line=st["span"].line)

    def tma_store(self, s: ir.TmaStore, env, active) -> None:
        off = self.offsets(s.src, env, active)[0]
        if (self.generic[s.src.base][off] >= 0).any():
            self.fail("async-proxy-fence", s.span, f"the TMA store (async proxy) reads {s.src.base} written by "
                      "ordinary stores not ordered by fence_proxy_async",
                      ["each writing thread needs fence_proxy_async() after its stores, then a barrier() before "
                       "the store"])
        writers = self.bulk.unpublished[s.src.base][off]
        for t in self.tids[active]:
            if ((writers >= 0) & (writers != t) | (writers == -2)).any():
                self.fail("async-proxy-fence", s.span, f"the TMA store of thread {int(t)} reads {s.src.base} written "
                          "by other threads with no barrier() since", ["fence_proxy_async(), then barrier(), then "
                                                                       "the store"])
        if self.unacquired:
            self.check_acquired(s.src.base, off, s.span, "the TMA store", active)
        self.bulk_store_tags(s, env, active, off)
        mask = np.zeros(len(self.bulk.sum_id[s.src.base]), dtype=bool)
        mask[off] = True
        for t in self.tids[active]:
            self.bulk.open.setdefault(int(t), []).append({"alloc": s.src.base, "mask": mask, "span": s.span,
                                                          "loop": self.where(), "tid": int(t)})

    def bulk_group(self, s: ir.BulkGroup, active) -> None:
        for t in (int(x) for x in self.tids[active]):
            if s.kind == "commit":  # (an empty group too: cp.async.bulk.wait_group counts it, PTX ISA)
                self.bulk.groups.setdefault(t, []).append(self.bulk.open.pop(t, []))
                continue
            groups = self.bulk.groups.get(t, [])
            while len(groups) > s.pending:
                self.bulk.released += groups.pop(0)

    def bulk_exit(self) -> None:
        """The block's end: no TMA store may still read its shared memory (and, `load_exit`, no TMA
        load still write it)."""
        left = self.bulk.in_flight() if self.bulk is not None else []
        if left:
            st = left[0]
            self.active = np.isin(self.tids, [st["tid"]])
            self.fail("bulk-group", st["span"], f"the block exits while the TMA store ({_loop(st['loop'])}) may "
                      f"still read {st['alloc']}: no bulk_wait of thread {st['tid']} retires it",
                      ["bulk_commit() then bulk_wait(0) before the end of the kernel"], store_line=st["span"].line)
        self.load_exit()

    def load_exit(self) -> None:
        """The block's end: no TMA load may still write its shared memory (nor complete on its
        mbarrier). Copies land only when a wait needs their phase, so a copy left in flight is one
        whose phase no thread waited for: it may land after the block exited, in shared memory that
        belongs to the next block on the SM (undefined behaviour)."""
        if not self.tmas:
            return
        t = self.tmas[0]
        b = self.bars.get(t["bar"])
        self.active = self.tids == t.get("issuer", self.tids[0])
        if hasattr(self, "unit"):  # (a role skeleton names the issuing warpgroup's role)
            self.unit = int(t.get("issuer", 0)) // hopper.WARPGROUP
        self.loop = dict(t["loop"])
        waited = f"no wait on {t['bar']}[{t['idx']}] for phase {t['phase']} (parity {t['phase'] % 2})"
        self.fail("mbarrier-phase", t["span"],
                  f"the block exits while the TMA copy into {t['alloc']} ({_loop(t['loop'])}) may still be in "
                  f"flight: {waited} completes it",
                  [f"{len(self.tmas)} TMA copy(ies) in flight at the exit; {t['bar']}[{t['idx']}] is at phase "
                   f"{int(b['phase'][t['idx']]) if b is not None else '?'}",
                   "every TMA load must be waited for (mbarrier_wait on its phase) before the block exits, or not "
                   "issued: a copy landing after the exit writes shared memory the block no longer owns"],
                  barrier=t["bar"], stage=int(t["idx"]), phase=int(t["phase"]))

    def bulk_store_tags(self, s: ir.TmaStore, env, active, off) -> None:
        """A TMA store of stored accumulators: every element inside the tensor is the sum of its own
        output row and column, and every k of the contract entered that sum exactly once."""
        if self.gemm is None or not self.k.param(s.dst.base).output:
            return
        tags, ids = self.tag[s.src.base][off], self.bulk.sum_id[s.src.base][off]
        if (tags[:, 0] != -4).any() or (ids < 0).any():
            self.tag_unknown = True
            return
        self.stored = True
        r0 = self.uni(s.dst.index[0].start, env, active)
        c0 = self.uni(s.dst.index[1].start, env, active)
        rows, cols = s.dst.tile
        self.writes.append((s, r0, c0, s.dst.tile))
        shape = [int(self.ev(d, {})) if not isinstance(d, ir.IConst) else d.value
                 for d in self.k.param(s.dst.base).shape]
        rr, cc = np.repeat(r0 + np.arange(rows), cols), np.tile(c0 + np.arange(cols), rows)
        inside = (rr < shape[0]) & (cc < shape[1])
        bad = inside & ((tags[:, 1] != rr) | (tags[:, 2] != cc))
        if bad.any():
            j = int(np.argmax(bad))
            self.fail("output-contract", s.span, f"{s.dst.base}[{int(rr[j])}, {int(cc[j])}] receives the sum of row "
                      f"{int(tags[j, 1])}, column {int(tags[j, 2])}", [f"block {self.block}"], block=list(self.block))
        K = int(self.sizes[self.gemm[2]])
        for i in np.unique(ids[inside]):
            rec = self.bulk.sums[int(i)]
            counts = np.array([rec.k.get(k, 0) for k in range(K)])
            extra = sorted(set(rec.k) - set(range(K)))
            if (counts != 1).any() or extra:
                k = int(np.argmax(counts != 1)) if (counts != 1).any() else extra[0]
                n = int(counts[k]) if k < K else rec.k[k]
                self.fail("reduction-coverage", self.gemm[3], f"k = {k} enters {s.dst.base}'s sum {n} times, not "
                          "once", [f"block {self.block}, stored at line {s.span.line}"], block=list(self.block))


class Skeleton(BulkSteps):
    """One block's protocol state, executed statement by statement for every thread."""

    # Threads run in lockstep here, but warpgroups do not on the hardware: a wgmma_wait retires only
    # the executing warpgroup's wgmmas, and another thread learns of it through a barrier() after
    # that wait, or through an mbarrier: an arrival of that warpgroup after the wait, on a phase the
    # other thread's wait saw complete. A refill must not rely on the lockstep order (the role and
    # cluster skeletons order warpgroups through their own release rules).
    CROSS_WARPGROUP = True

    def __init__(self, kernel: ir.Kernel, sizes: dict, block: tuple = (0, 0, 0), grid: tuple = (1, 1, 1)):
        self.k = kernel
        self.T = kernel.block
        self.retired_unpublished: list = []  # wgmmas of several warpgroups, retired by some, not yet published
        # releases through an mbarrier: (bar, idx) -> [(entry of retired_unpublished, warpgroup that arrived
        # after retiring it)], of the phase being filled and of the phases completed so far
        self.releases_open: dict = {}
        self.releases_done: dict = {}
        self.sizes = sizes
        self.tids = np.arange(self.T)
        self.allocs = {a.name: a for a in kernel.shared_allocs()}
        self.bars: dict = {}
        self.tmas: list = []  # in flight: dict(bar, idx, alloc, mask, bytes, span, loop, phase)
        # landed copies some threads have not acquired: dict(bar, idx, alloc, mask, span, loop, phase, acq)
        # with acq the threads whose mbarrier wait (or a barrier() after another's wait) orders them after it
        self.unacquired: list = []
        self.phase_tx: dict = {}  # (bar, idx) -> [expected bytes, issued bytes, expect spans]
        self.inflight_reads: dict = {}  # alloc -> [G] count of in-flight wgmma reads per element
        self.open: list = []
        self.groups: list = []
        self.pending_acc: dict = {}  # fragment name -> (span, loop) of the in-flight wgmma writing it
        self.unfenced: dict = {}  # fragment name -> span of the ordinary write not yet wgmma-fenced
        self.generic: dict = {a: np.full(al.size_elems, -1) for a, al in self.allocs.items()}
        self.trips: list = []
        self.loop: dict = {}
        self.published = True
        self.block, self.grid = block, grid
        # tags: per shared element, (tensor index, row, column); -1 nothing landed, -2 zero fill, -3 unknown
        self.names = [t.name for t in kernel.tensors]
        self.tag: dict = {a: np.full((al.size_elems, 3), -1) for a, al in self.allocs.items()}
        self.acc_rec: dict = {}  # accumulator name -> what its wgmmas summed (see wgmma_tags)
        self.gemm = _gemm_contract(kernel)
        self.writes: list = []  # (store, row start, column start, tile) of each stored accumulator
        self.bulk = BulkState({a: len(g) for a, g in self.generic.items()}) if _has_tma_store(kernel) else None
        # the pumping argument's fixed points (smt/protocol_pump.py): id(For) -> (first, last), the
        # iterations of each execution whose states are recorded
        self.pump_checks: dict = {}
        self.pump_seen: dict = {}  # id(For) -> per execution, {iteration: state digest}
        self.snap_loop: ir.For | None = None  # a loop of the kernel's body whose iterations are saved
        self.snapshots: dict = {}  # iteration of snap_loop -> the state at its start (`save`)

    # -- integers -------------------------------------------------------------------------------
    def ev(self, e: ir.IExpr, env):
        return _evaluator(e)(self, env)

    def uni(self, e, env, active) -> int:
        v = _evaluator(e)(self, env)
        if type(v) is int:  # (a value every thread shares: the usual case)
            return v
        v = np.broadcast_to(np.asarray(v), (self.T,))
        return int(v[active][0]) if active.any() else int(v[0])

    # -- walking --------------------------------------------------------------------------------
    def run(self, body, env, active):
        for s in body:
            if not active.any():
                return
            self.step(s, env, active)

    def step(self, s, env, active):
        self.active = active
        if self.bulk_step(s, env, active):
            return
        if isinstance(s, ir.Let):
            env[s.name] = np.where(active, self.ev(s.value, env), env.get(s.name, 0)) \
                if np.ndim(self.ev(s.value, env)) or s.name in env else self.ev(s.value, env)
        elif isinstance(s, ir.For):
            self.iterate(s, env, active)
        elif isinstance(s, ir.If):
            c = np.broadcast_to(np.asarray(self.ev(s.cond, env)) != 0, (self.T,))
            self.run(s.then, env, active & c)
            self.run(s.orelse, env, active & ~c)
        elif isinstance(s, ir.Assign):
            self.assign(s, env, active)
        elif isinstance(s, ir.MbarrierOp):
            self.mbarrier(s, env, active)
        elif isinstance(s, ir.TmaLoad):
            self.tma(s, env, active)
        elif isinstance(s, ir.Fence):
            self.fence(s, env, active)
        elif isinstance(s, ir.WgmmaGroup):
            self.group(s)
        elif isinstance(s, ir.Store):
            self.read_frag(s.value, s)
            if s.dst.space == "shared":
                for off in self.offsets(s.dst, env, active):
                    self.generic[s.dst.base][off] = 0
                    self.tag[s.dst.base][off] = -3
            else:
                self.store_tags(s, env, active)
        elif isinstance(s, ir.Stmatrix):
            self.read_frag(s.value, s)
            for off in self.offsets(s.dst, env, active):
                self.generic[s.dst.base][off] = 0
        elif isinstance(s, ir.Barrier):
            self.published = True
            self.retired_unpublished = []  # every warpgroup's retirements are now known to all threads
            self.releases_open, self.releases_done = {}, {}
            self.barrier_acquires()

    def barrier_acquires(self) -> None:
        """A barrier() after a thread's mbarrier wait orders the other threads after what that wait
        acquired (bar.sync: the waiter's earlier acquire happens before everyone's later reads)."""
        if self.unacquired:
            self.unacquired = [r for r in self.unacquired if not r["acq"].any()]

    def iterate(self, s: ir.For, env, active, first: int = 0) -> None:
        """Loop s, from its iteration `first` on (a run resumed from a snapshot starts later)."""
        lo, hi = self.uni(s.start, env, active), self.uni(s.stop, env, active)
        trips = max(0, -(-(hi - lo) // s.step))
        if not first:
            self.trips.append((s.span.line if s.span else 0, trips))
        check = self.pump_checks.get(id(s))
        for i in range(lo + first * s.step, hi, s.step):
            j = (i - lo) // s.step
            if s is self.snap_loop:
                self.snapshots[j] = self.save()
            if check is not None:
                self.pump_fixpoint(s, j, trips, *check)
            env[s.var] = i
            self.loop[s.var] = i
            self.run(s.body, env, active)
        self.loop.pop(s.var, None)

    # -- snapshots: runs that share a prefix (smt/protocol_pump_trips.py, the prefix lemma) ---------
    def save(self) -> dict:
        """A copy of everything the run changes (the constants and the snapshots aside; the tags too
        where they are not followed)."""
        keep = set(_pump_classes()[1]) | {"snapshots", "snap_loop"} | (set() if self.gemm else {"tag"})
        return copy.deepcopy({k: v for k, v in vars(self).items() if k not in keep})

    def resume(self, saved: dict, loop: ir.For, j: int) -> None:
        """Run this skeleton's world from iteration j of `loop` (a statement of the kernel's body), the
        state taken from `saved`, a snapshot at that iteration of a world whose occurrences agree
        with this one's up to there (the lets before the loop are evaluated in this world)."""
        for k, v in saved.items():  # (the caller's copy: it is changed)
            setattr(self, k, v)
        body = self.k.body
        at = next(n for n, x in enumerate(body) if x is loop)
        env: dict = {}
        active = np.ones(self.T, dtype=bool)
        for x in body[:at]:
            if isinstance(x, ir.Let):
                self.step(x, env, active)
        check = self.pump_checks.get(id(loop))
        if check is not None and self.pump_seen.get(id(loop)) and j > check[0]:
            # this execution's record was begun in the snapshot's world: it runs this world's trips
            self.pump_seen[id(loop)][-1]["trips"] = max(0, -(-(self.uni(loop.stop, env, active) -
                                                               self.uni(loop.start, env, active)) // loop.step))
        self.iterate(loop, env, active, first=j)
        self.run(body[at + 1:], env, active)

    def pump_fixpoint(self, loop: ir.For, j: int, trips: int, first: int, last: int, period: int) -> None:
        """Record the state at iteration j of an execution of a pumped loop that runs `trips` times
        (its fixed point is looked for at the heads first..last - period, each state compared with
        the one a period later; smt/protocol_pump.py)."""
        from argus_verify.smt.protocol_pump import fingerprint

        if first <= j <= last and (j <= last - period or j >= first + period):
            execs = self.pump_seen.setdefault(id(loop), [])
            if j == first:
                execs.append({"trips": trips})
            execs[-1][j] = fingerprint(self)

    def where(self) -> dict:
        return dict(self.loop)

    def role(self) -> str:
        t = self.tids[self.active]
        if len(t) == self.T:
            return f"consumers (all {self.T} threads)"
        if len(t) == 1:
            return f"producer (thread {int(t[0])})"
        return f"threads {int(t[0])}..{int(t[-1])} ({len(t)})"

    def fail(self, obligation, span, message, explanation, **detail):
        detail = {"sizes": dict(self.sizes), "loop": self.where(), "role": self.role(), **detail}
        where = [f"role: {detail['role']}"]
        if "barrier" in detail:
            where.append(f"barrier {detail['barrier']}[{detail.get('stage', '?')}]")
        if "phase" in detail:
            where.append(f"phase {detail['phase']}")
        where.append(_loop(self.where()))
        raise Violation(obligation, span, message, [", ".join(where), *explanation], detail)

    def offsets(self, view: ir.View, env, active) -> list:
        """Element offsets of a shared view's whole tile (by the declared layout)."""
        at = {d: self.uni(it.index, env, active) for d, it in enumerate(view.index) if isinstance(it, ir.Index)}
        starts = tuple(self.uni(it.start, env, active) for it in view.index if isinstance(it, ir.Slice))
        key = (id(view), tuple(sorted(at.items())), starts)
        hit = _OFFSETS.get(key)
        if hit is None or hit[0] is not view:
            hit = _OFFSETS[key] = (view, self._offsets(view, at, env, active))
        return hit[1]

    def mask(self, base: str, off) -> np.ndarray:
        """The elements `off` of `base` as a mask (read only: shared between the records that hold it)."""
        key = (base, id(off))
        hit = _MASKS.get(key)
        if hit is None or hit[0] is not off or len(hit[1]) != self.allocs[base].size_elems:
            m = np.zeros(self.allocs[base].size_elems, dtype=bool)
            m[off] = True
            m.flags.writeable = False
            hit = _MASKS[key] = (off, m)
        return hit[1]

    def _offsets(self, view, at, env, active) -> list:
        alloc = self.allocs[view.base]
        if not view.tile:
            return [np.array([int(ir.layout_offset(alloc.layout, tuple(at[d] for d in range(len(alloc.shape))),
                                                   hopper.NP_OPS))])]
        grids = np.meshgrid(*[np.arange(e) for e in view.tile], indexing="ij")
        coords, axis = [], 0
        for d, it in enumerate(view.index):
            if isinstance(it, ir.Slice):
                coords.append(grids[axis] + self.uni(it.start, env, active))
                axis += 1
            else:
                coords.append(np.full(grids[0].shape, at[d]))
        return [np.asarray(ir.layout_offset(alloc.layout, tuple(coords), hopper.NP_OPS)).reshape(-1)]

    # -- registers ------------------------------------------------------------------------------
    def read_frag(self, name: str, s) -> None:
        if name in self.pending_acc:
            span, loop = self.pending_acc[name]
            self.fail("wgmma-accumulator", s.span, f"'{name}' is read while the wgmma writing it is in flight",
                      [f"the wgmma at line {span.line} ({_loop(loop)}) is not retired by a wgmma_wait before "
                       f"this read ({_loop(self.loop)})"], fragment=name)

    def assign(self, s: ir.Assign, env, active):
        op = s.op
        if isinstance(op, ir.Wgmma):
            self.wgmma(s, env, active)
            return
        for name in _frag_reads(op):
            self.read_frag(name, s)
        # constants start a sum afresh; anything else computed from a wgmma result is not followed
        self.acc_rec[s.name] = _Rec() if isinstance(op, ir.Full) else None
        self.unfenced[s.name] = s.span
        self.pending_acc.pop(s.name, None)

    def wgmma(self, s: ir.Assign, env, active):
        op = s.op
        if op.c in self.unfenced and op.c not in self.pending_acc:
            self.fail("wgmma-accumulator", s.span, f"the accumulator '{op.c}' was written at line "
                      f"{self.unfenced[op.c].line} and no wgmma_fence orders that write before this wgmma",
                      ["wgmma.fence must separate ordinary register writes from the wgmma that reads them"],
                      fragment=op.c)
        reads = []
        for view in (op.a, op.b):
            for off in self.offsets(view, env, active):
                reads.append((view.base, self.mask(view.base, off)))
                for tma in self.tmas:
                    if tma["alloc"] == view.base and tma["mask"][off].any():
                        self.fail("mbarrier-phase", s.span,
                                  f"wgmma reads {view.base} while the TMA copy into it (line {tma['span'].line}, "
                                  f"{_loop(tma['loop'])}) is still in flight",
                                  [f"no completed wait on {tma['bar']}[{tma['idx']}] phase {tma['phase']} covers "
                                   f"this read ({_loop(self.loop)}): the wait's stage or parity disagrees with the "
                                   "producer's"], barrier=tma["bar"], stage=tma["idx"], phase=tma["phase"])
                if self.unacquired:
                    self.check_acquired(view.base, off, s.span, "wgmma", active)
                if (self.generic[view.base][off] >= 0).any():
                    self.fail("async-proxy-fence", s.span, f"wgmma (async proxy) reads {view.base} written by "
                              "ordinary stores not ordered by fence_proxy_async",
                              ["each writing thread needs fence_proxy_async() after its stores, before the "
                               "barrier that precedes the wgmma"])
        self.wgmma_tags(s, env, active)
        self.open.append({"reads": reads, "span": s.span, "loop": self.where(), "name": s.name,
                          "warpgroups": set((self.tids[active] // hopper.WARPGROUP).tolist())})
        self.pending_acc[s.name] = (s.span, self.where())
        self.unfenced.pop(s.name, None)

    def group(self, s: ir.WgmmaGroup):
        if s.kind == "commit":
            # (PTX ISA, wgmma.commit_group: with no uncommitted wgmma it makes an empty group, which
            # wgmma.wait_group counts like any other)
            self.groups.append(self.open)
            self.open = []
            return
        while len(self.groups) > s.pending:
            for w in self.groups.pop(0):
                if self.pending_acc.get(w["name"], (None,))[0] is w["span"]:
                    self.pending_acc.pop(w["name"], None)
                if self.CROSS_WARPGROUP and len(w.get("warpgroups", ())) > 1:
                    retired_by = set((self.tids[self.active] // hopper.WARPGROUP).tolist())
                    self.retired_unpublished.append({**w, "retired_by": retired_by, "wait": s.span,
                                                     "wait_loop": self.where()})
        # wgmmas never committed stay in flight too (their results are not waited for)

    def fence(self, s: ir.Fence, env, active):
        if s.kind == "wgmma":
            self.unfenced.clear()
        elif s.kind == "proxy_async":
            for g in self.generic.values():
                g[:] = -1
        else:
            for b in self.bars.values():
                b["fenced"] |= b["inited"] & np.isin(b["by"], self.tids[active])

    # -- mbarriers and TMA ----------------------------------------------------------------------
    def bar(self, name):
        if name not in self.bars:
            n = self.allocs[name].shape[0]
            self.bars[name] = {k: np.zeros(n, dtype=np.int64) for k in ("count", "pending", "tx", "phase")}
            self.bars[name].update(inited=np.zeros(n, bool), fenced=np.zeros(n, bool), by=np.full(n, -1))
        return self.bars[name]

    def mbarrier(self, s: ir.MbarrierOp, env, active):
        b = self.bar(s.bar.base)
        idx = np.broadcast_to(np.asarray(self.ev(s.bar.index[0].index, env)), (self.T,))[active]
        val = np.broadcast_to(np.asarray(self.ev(s.value, env)), (self.T,))[active] if s.value is not None else None
        name = s.bar.base
        if s.kind == "init":
            for j, i in enumerate(idx):
                b["count"][i] = b["pending"][i] = val[j]
                b["tx"][i] = b["phase"][i] = 0
                b["inited"][i], b["fenced"][i], b["by"][i] = True, False, self.tids[active][j]
                self.phase_tx[(name, int(i))] = {"exp": 0, "issued": 0, "landed": 0, "spans": []}
            self.published = False
            return
        for i in np.unique(idx):
            if not b["inited"][i]:
                self.fail("async-proxy-fence", s.span, f"{name}[{i}] is used before mbarrier_init", [])
        if not self.published and not np.all(np.isin(self.tids[active], b["by"][np.unique(idx)])):
            self.fail("async-proxy-fence", s.span, f"{name} is used by threads that have not seen its init",
                      ["a barrier() after the init (and its fence_mbarrier_init) publishes it to the block"])
        if s.kind in ("arrive", "expect_tx"):
            for j, i in enumerate(idx):
                i = int(i)
                if s.kind == "arrive":  # a warpgroup's arrival after its wgmma_wait releases what it retired
                    wg = int(self.tids[active][j]) // hopper.WARPGROUP
                    self.releases_open.setdefault((name, i), []).extend(
                        (e, wg) for e in self.retired_unpublished if wg in e["retired_by"])
                if s.kind == "expect_tx":
                    self.ph(name, i)["exp"] += int(val[j])
                    self.ph(name, i)["spans"].append((s.span, self.where()))
                b["pending"][i] -= 1
                if b["pending"][i] < 0:
                    self.fail("mbarrier-phase", s.span, f"more arrivals on {name}[{i}] in phase {b['phase'][i]} "
                              f"than its count {b['count'][i]}", [], barrier=name, stage=i, phase=int(b["phase"][i]))
                self.try_complete(name, i, s.span)
            return
        # wait
        if len(idx) and (idx == idx[0]).all() and (val % 2 == val[0] % 2).all():  # (the usual case, at once)
            self.wait(s, name, int(idx[0]), int(val[0]) % 2)
            self.acquire(name, int(idx[0]), active)
        else:
            for j, i in enumerate(idx):
                i, p = int(i), int(val[j]) % 2
                if j and (i, p) == (int(idx[j - 1]), int(val[j - 1]) % 2):
                    continue
                self.wait(s, name, i, p)
                who = active.copy()
                who[active] = (idx == i) & (val % 2 == p)
                self.acquire(name, i, who)
        # A passed wait has seen its barrier's last completed phase, so every release completed on it
        # (phases complete in order): the waiting warpgroups know those retirements.
        waiters = set((self.tids[active] // hopper.WARPGROUP).tolist())
        for i in np.unique(idx).tolist():
            for e, wg in self.releases_done.get((name, i), ()):
                for w in waiters:
                    e.setdefault("released_to", {}).setdefault(w, set()).add(wg)

    def landed(self, t: dict) -> None:
        """TMA copy t lands (a wait needs its phase): it is visible to the threads whose wait
        observes its phase (`acquire`), to the others only through a barrier() after such a wait."""
        self.unacquired.append({"bar": t["bar"], "idx": t["idx"], "alloc": t["alloc"], "mask": t["mask"],
                                "span": t["span"], "loop": t["loop"], "phase": t["phase"],
                                "acq": np.zeros(self.T, dtype=bool)})

    def acquire(self, name: str, i: int, who) -> None:
        """Threads `who` passed a wait on barrier (name, i): they observed its last completed phase,
        so every copy landed on it (in that phase or an earlier one) is visible to them."""
        if not self.unacquired:
            return
        keep = []
        for r in self.unacquired:
            if r["bar"] == name and r["idx"] == i:
                r["acq"] = r["acq"] | who
                if r["acq"].all():
                    continue
            keep.append(r)
        self.unacquired = keep

    def check_acquired(self, base: str, off, span, what: str, active) -> None:
        """An async-proxy read of `base` elements `off` by threads `active`: each reading thread must
        have acquired the TMA copies that wrote them (an mbarrier wait acquires only for the threads
        that run it; a wgmma's operand reads are its whole warpgroup's)."""
        for r in self.unacquired:
            if r["alloc"] != base or not r["mask"][off].any():
                continue
            missing = active & ~r["acq"]
            if not missing.any():
                continue
            wg = int(self.tids[missing][0]) // hopper.WARPGROUP  # (the first warpgroup with such threads)
            mine = (self.tids // hopper.WARPGROUP) == wg
            miss = self.tids[missing & mine]
            waited = self.tids[active & mine & r["acq"]]
            self.fail("mbarrier-phase", span,
                      f"{what} of warpgroup {wg} reads {base} for threads {_threads(miss)}, which did not wait: "
                      f"the TMA copy (line {r['span'].line}, {_loop(r['loop'])}) that wrote it is not ordered "
                      f"before their read: no wait of theirs on {r['bar']}[{r['idx']}] for phase {r['phase']}, "
                      "and no barrier() since after a thread's that did",
                      [f"an mbarrier wait acquires the copy's data only for the threads that run it (in warpgroup "
                       f"{wg}: {'threads ' + _threads(waited) if len(waited) else 'none'}); "
                       f"{what} reads its operands for every thread of the warpgroup: let every thread wait, or put "
                       "a barrier() between the wait and the read"],
                      barrier=r["bar"], stage=int(r["idx"]), phase=int(r["phase"]),
                      threads=[int(miss[0]), int(miss[-1]), len(miss)])

    def ph(self, name, i) -> dict:
        """The current phase's transaction books of barrier (name, i)."""
        return self.phase_tx.setdefault((name, i), {"exp": 0, "issued": 0, "landed": 0, "spans": []})

    def try_complete(self, name, i, span):
        b, p = self.bars[name], self.ph(name, i)
        if b["pending"][i] != 0 or p["landed"] != p["exp"]:
            return
        if p["issued"] > p["landed"]:
            where, loop = p["spans"][0] if p["spans"] else (span, self.where())
            self.fail("mbarrier-tx", where, f"{name}[{i}] phase {b['phase'][i]} expects {p['exp']} bytes but its "
                      f"TMA copies deliver {p['issued']}",
                      [f"the phase completes before {p['issued'] - p['exp']} byte(s) land ({_loop(loop)}): the "
                       "consumer reads the stage early"], barrier=name, stage=i, phase=int(b["phase"][i]))
        b["phase"][i] += 1
        b["pending"][i] = b["count"][i]
        self.releases_done.setdefault((name, i), []).extend(self.releases_open.pop((name, i), []))
        self.phase_tx[(name, i)] = {"exp": 0, "issued": 0, "landed": 0, "spans": []}

    def wait(self, s, name, i, parity):
        b = self.bars[name]
        p = self.ph(name, i)
        if b["phase"][i] % 2 != parity:  # the phase of that parity has completed: the wait passes
            if b["pending"][i] < b["count"][i] or p["issued"]:
                ph = int(b["phase"][i])
                earlier = f"phase {ph - 1}, completed earlier" if ph else "the phase before phase 0, which counts " \
                    "as completed"
                self.fail("mbarrier-phase", s.span,
                          f"the wait on {name}[{i}] for parity {parity} passes on {earlier}, while phase {ph} is "
                          "being filled",
                          ["the consumer's parity is one phase behind the producer's: it reads the stage before "
                           "the new copy lands"], barrier=name, stage=i, phase=int(b["phase"][i]))
            return
        # land the copies of this phase, oldest first, until it completes (as late as allowed)
        while b["phase"][i] % 2 == parity:
            mine = [t for t in self.tmas if t["bar"] == name and t["idx"] == i]
            if not mine:
                if p["issued"] and not b["fenced"][i]:
                    self.fail("async-proxy-fence", s.span, f"the TMA copies to {name}[{i}] complete on a barrier "
                              "whose init was not fenced: the wait never completes",
                              ["fence_mbarrier_init() after mbarrier_init makes the init visible to the async "
                               "proxy"], barrier=name, stage=i)
                if b["pending"][i] == 0 and p["exp"] > p["landed"] and p["spans"]:
                    where, loop = p["spans"][0]
                    self.fail("mbarrier-tx", where, f"{name}[{i}] phase {b['phase'][i]} expects {p['exp']} bytes "
                              f"but its TMA copies deliver {p['landed']}: the wait at line {s.span.line} hangs",
                              [f"expect_tx ({_loop(loop)}) over-counts by {p['exp'] - p['landed']} byte(s)"],
                              barrier=name, stage=i, phase=int(b["phase"][i]))
                self.fail("mbarrier-phase", s.span,
                          f"deadlock: the wait on {name}[{i}] for parity {parity} (phase {int(b['phase'][i])}) never "
                          f"completes: {int(b['pending'][i])} arrival(s) missing, no TMA in flight to it",
                          ["no producer fills this stage for this phase before the wait: stage or parity of "
                           "producer and consumer disagree"], barrier=name, stage=i, phase=int(b["phase"][i]))
            t = mine[0]
            self.tmas.remove(t)
            self.landed(t)
            if t["tags"] is not None:  # (None: tags not followed, see _pump_runs)
                self.tag[t["alloc"]][t["off"]] = t["tags"]
            if b["fenced"][i]:
                p["landed"] += t["bytes"]
                self.try_complete(name, i, s.span)

    # -- tags: what each element of a sum is, followed through TMA and wgmma (bounded, like the rest)
    def tma_tags(self, s: ir.TmaLoad, env, active) -> np.ndarray:
        """[elements of the tile, 3]: (tensor, row, column) of the global element each tile element
        receives, in the tile's row-major order (-2: zero fill outside the tensor)."""
        rows, cols = s.src.tile
        r0 = self.uni(s.src.index[0].start, env, active)
        c0 = self.uni(s.src.index[1].start, env, active)
        shape = tuple(int(self.ev(d, {})) if not isinstance(d, ir.IConst) else d.value
                      for d in self.k.param(s.src.base).shape)
        key = (self.names.index(s.src.base), rows, cols, r0, c0, shape)  # (what _tma_tags reads, no more)
        if key not in _TMA_TAGS:
            _TMA_TAGS[key] = self._tma_tags(s, rows, cols, r0, c0, shape)
        return _TMA_TAGS[key]

    def _tma_tags(self, s, rows, cols, r0, c0, shape) -> np.ndarray:
        rr, cc = np.meshgrid(np.arange(rows) + r0, np.arange(cols) + c0, indexing="ij")
        inside = (rr < int(shape[0])) & (cc < int(shape[1]))
        out = np.stack([np.full(rr.shape, self.names.index(s.src.base)), rr, cc], -1).reshape(-1, 3)
        out[~inside.reshape(-1)] = -2
        return out

    def view_tags(self, view: ir.View, env, active) -> np.ndarray:
        off = self.offsets(view, env, active)[0]
        return self.tag[view.base][off].reshape(*view.tile, 3)

    def wgmma_tags(self, s: ir.Assign, env, active) -> None:
        """Follow what `acc = wgmma(a, b, acc)` adds: for each k step, a's column and b's row must be
        one k of the contract's A and B (the products agree on k); a's rows and b's columns are the
        tile's output rows and columns; every k entering is counted."""
        op = s.op
        prev = self.acc_rec.get(op.c)
        rec = prev.copy() if prev is not None else None
        self.acc_rec[s.name] = rec
        if rec is None or self.gemm is None:
            return
        at, bt = self.view_tags(op.a, env, active), self.view_tags(op.b, env, active)  # [M, K, 3], [K, N, 3]
        ta, tb = self.names.index(self.gemm[0]), self.names.index(self.gemm[1])
        if rec.rows is None:
            rec.rows, rec.cols = np.full(at.shape[0], -1), np.full(bt.shape[1], -1)
        if (at[..., 0] == -1).any() or (bt[..., 0] == -1).any() or (at[..., 0] < -2).any() or (bt[..., 0] < -2).any():
            self.acc_rec[s.name] = None  # not landed, or not followed: nothing to say here
            return
        va, vb = at[..., 0] == ta, bt[..., 0] == tb  # [M, K], [K, N]; the rest is zero fill
        if ((at[..., 0] >= 0) & ~va).any() or ((bt[..., 0] >= 0) & ~vb).any():
            self.fail("tag-assertion", s.span, f"wgmma multiplies elements of other tensors than the contract's "
                      f"{self.gemm[0]} and {self.gemm[1]}", [])
        big = 1 << 40

        def span_of(tags, valid, axis):
            lo = np.where(valid, tags, big).min(axis)
            hi = np.where(valid, tags, -big).max(axis)
            return lo, hi, valid.any(axis)

        ka, ka_hi, has_a = span_of(at[..., 2], va, 0)  # the k of each of a's columns
        kb, kb_hi, has_b = span_of(bt[..., 1], vb, 1)  # the k of each of b's rows
        both = has_a & has_b
        bad = (has_a & (ka != ka_hi)) | (has_b & (kb != kb_hi)) | (both & (ka != kb))
        if bad.any():
            kk = int(np.argmax(bad))
            self.fail("tag-assertion", s.span, f"wgmma k step {kk}: {self.gemm[0]}'s column k in "
                      f"{int(ka[kk])}..{int(ka_hi[kk])} meets {self.gemm[1]}'s row k in "
                      f"{int(kb[kk])}..{int(kb_hi[kk])}: the products do not agree on k",
                      [f"k step {kk} ({_loop(self.where())})"], k_step=kk)
        for which, tags, valid, axis in (("row", at[..., 1], va, 1), ("column", bt[..., 2], vb, 0)):
            lo, hi, has = span_of(tags, valid, axis)
            cur = rec.rows if which == "row" else rec.cols
            clash = has & ((lo != hi) | ((cur >= 0) & (cur != lo)))
            if clash.any():
                j = int(np.argmax(clash))
                self.fail("tag-assertion", s.span, f"wgmma adds to the accumulator's {which} {j} elements of "
                          f"{which}s {int(lo[j])}..{int(hi[j])} (before: {int(cur[j])})", [])
            cur[has] = lo[has]
        for k in ka[both].tolist():
            rec.k[k] = rec.k.get(k, 0) + 1

    def store_tags(self, s: ir.Store, env, active) -> None:
        """A stored accumulator: its rows and columns are the output elements', and every k of the
        contract's sum entered it exactly once."""
        rec = self.acc_rec.get(s.value, "none")
        if rec == "none" or self.gemm is None or not self.k.param(s.dst.base).output:
            return
        if rec is None or rec.rows is None:
            self.tag_unknown = True
            return
        self.stored = True
        r0 = self.uni(s.dst.index[0].start, env, active)
        c0 = self.uni(s.dst.index[1].start, env, active)
        if s.where is None and active.all():  # every thread stores its values: the whole tile
            self.writes.append((s, r0, c0, s.dst.tile))
        else:
            self.tag_unknown = True
        shape = [int(self.ev(d, {})) if not isinstance(d, ir.IConst) else d.value
                 for d in self.k.param(s.dst.base).shape]
        for which, start, cur, extent in (("row", r0, rec.rows, shape[0]), ("column", c0, rec.cols, shape[1])):
            want = start + np.arange(len(cur))
            bad = (want < extent) & (cur != want)
            if bad.any():
                j = int(np.argmax(bad))
                self.fail("output-contract", s.span, f"{s.dst.base}'s {which} {int(want[j])} receives the sum of "
                          f"{which} {int(cur[j])}", [f"block {self.block}"], block=list(self.block))
        K = int(self.sizes[self.gemm[2]])
        counts = np.array([rec.k.get(k, 0) for k in range(K)])
        extra = sorted(set(rec.k) - set(range(K)))
        if (counts != 1).any() or extra:
            k = int(np.argmax(counts != 1)) if (counts != 1).any() else extra[0]
            n = int(counts[k]) if k < K else rec.k[k]
            self.fail("reduction-coverage", self.gemm[3], f"k = {k} enters {s.dst.base}'s sum {n} times, not once",
                      [f"block {self.block}, stored at line {s.span.line}"], block=list(self.block))

    def tma(self, s: ir.TmaLoad, env, active):
        name = s.bar.base
        self.bar(name)
        alloc = self.allocs[s.dst.base]
        esize = ir.DTYPE_BYTES[alloc.dtype]
        for t in self.tids[active]:
            i = self.uni(s.bar.index[0].index, env, active)
            off = self.offsets(s.dst, env, active)[0]
            for w in [w for g in self.groups for w in g] + self.open:
                for base, roff in w["reads"]:
                    if base == s.dst.base and roff[off].any():
                        self.fail("stage-reuse", s.span,
                                  f"refills {s.dst.base} while the wgmma reading it (line {w['span'].line}, "
                                  f"{_loop(w['loop'])}) is still in flight",
                                  ["a wgmma_wait that retires that wgmma must come before the refill"],
                                  barrier=name, stage=i)
            mine = set((self.tids[active] // hopper.WARPGROUP).tolist())
            for w in self.retired_unpublished:
                known = (mine & w["retired_by"]) | set().union(*(w.get("released_to", {}).get(m, set()) for m in mine))
                others = sorted(w["warpgroups"] - known)
                if others and any(base == s.dst.base and roff[off].any() for base, roff in w["reads"]):
                    self.fail("stage-reuse", s.span,
                              f"refills {s.dst.base} while warpgroup {others[0]} may still be reading it: its "
                              f"wgmma (line {w['span'].line}, {_loop(w['loop'])}) is retired by its own wgmma_wait "
                              f"(line {w['wait'].line}), and no barrier() orders that wait before this refill",
                              [f"the refilling thread is in warpgroup {sorted(mine)[0]}; a wgmma_wait retires only "
                               "the executing warpgroup's wgmmas (the warpgroups do not run in lockstep): put a "
                               "barrier() between the waits and the refill, or release the stage through an "
                               "mbarrier the producer waits on"], barrier=name, stage=i)
            if (self.generic[s.dst.base][off] >= 0).any():  # generic then async writes: a cross-proxy WAW
                self.fail("async-proxy-fence", s.span, f"the TMA copy (async proxy) writes {s.dst.base} over "
                          "ordinary stores not ordered by fence_proxy_async: they may land after the copy's data",
                          ["each writing thread needs fence_proxy_async() after its stores, then a barrier(), "
                           "before the TMA copy is issued"], barrier=name, stage=i)
            b = self.bars[name]
            if (name, i) not in self.phase_tx:
                self.fail("async-proxy-fence", s.span, f"TMA completes on {name}[{i}] before its mbarrier_init", [])
            self.ph(name, i)["issued"] += int(np.prod(s.dst.tile)) * esize
            self.tmas.append({"bar": name, "idx": i, "alloc": s.dst.base, "mask": self.mask(s.dst.base, off),
                              "off": off, "tags": self.tma_tags(s, env, active) if self.gemm else None,
                              "span": s.span,
                              "loop": self.where(), "phase": int(b["phase"][i]), "issuer": int(t),
                              "bytes": int(np.prod(s.dst.tile)) * esize})


class _Rec:
    """What an accumulator holds: the output row of each tile row, column of each tile column (-1
    none yet) and how often each k entered."""

    def __init__(self):
        self.rows = None
        self.cols = None
        self.k: dict = {}

    def copy(self):
        r = _Rec()
        r.rows = None if self.rows is None else self.rows.copy()
        r.cols = None if self.cols is None else self.cols.copy()
        r.k = dict(self.k)
        return r


def _gemm_contract(kernel) -> tuple | None:
    """(A, B, size of k, span) when the kernel's contract is C[i, j] = sum(A[i, k] * B[k, j] for k)."""
    for c in kernel.contracts:
        e = c.expr
        if isinstance(e, ir.CReduce) and e.op == "sum" and isinstance(e.body, ir.CBin) and e.body.op == "*":
            a, b = e.body.a, e.body.b
            i, j = c.index_vars
            if (isinstance(a, ir.CElem) and isinstance(b, ir.CElem) and a.indices == (i, e.var)
                    and b.indices == (e.var, j)):
                kdim = kernel.param(a.tensor).shape[1]
                if isinstance(kdim, ir.IVar):
                    return a.tensor, b.tensor, kdim.name, c.span
    return None


def _frag_reads(op) -> list:
    if isinstance(op, ir.Elementwise):
        return [a for a in op.args if isinstance(a, str)]
    if isinstance(op, ir.Mma):
        return [op.a, op.b, op.c]
    if isinstance(op, (ir.Cast, ir.Reduce, ir.Shuffle, ir.Relabel)):
        return [op.arg]
    return []


def _threads(t) -> str:
    """A set of thread ids, as a range where it is one."""
    t = [int(x) for x in t]
    if len(t) == 1:
        return str(t[0])
    if t[-1] - t[0] + 1 == len(t):
        return f"{t[0]}..{t[-1]}"
    return f"{t[0]}, {t[1]}{', ...' if len(t) > 2 else ''} ({len(t)} threads)"


def _loop(loop: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in loop.items()) or "outside loops"


# ---------------------------------------------------------------------------------------------
# layouts: the compiler's derived parameters against the declared layouts (exhaustive)


def _layout_checks(kernel: ir.Kernel) -> tuple[list, list]:
    allocs = {a.name: a for a in kernel.shared_allocs()}
    desc, box = [], []
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.TmaLoad):
            box.append(_check_tma(allocs[s.dst.base], s))
        elif isinstance(s, ir.TmaStore):
            box.append(_check_tma_store(allocs[s.src.base], s))
        elif isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma):
            for which, view in (("a", s.op.a), ("b", s.op.b)):
                desc.append(_check_desc(allocs[view.base], view, which, s))
    return desc, box


def _stage_bases(alloc, view) -> list:
    """Byte offset of the view's element (0, 0) for every value of its indexed dimensions."""
    dims = [d for d, it in enumerate(view.index) if isinstance(it, ir.Index)]
    out = []
    for vals in itertools.product(*[range(alloc.shape[d]) for d in dims]):
        _, base, _ = hopper.tile_table(alloc, view, dict(zip(dims, vals, strict=True)))
        out.append((dict(zip(dims, vals, strict=True)), base * 1))
    return out


def _check_tma(alloc, s) -> ObligationResult:
    try:
        boxes = hopper.tma_boxes(alloc, s.dst)
    except ValueError as e:
        return ObligationResult("tma-box", "violated", s.span, f"no TMA box fits: {e}",
                                witness={"tile": list(s.dst.tile)})
    tab, _, _ = hopper.tile_table(alloc, s.dst)
    bad = hopper.layout_mismatch(tab, hopper.tma_table(alloc, s.dst, boxes))
    b0 = boxes[0]
    if bad is not None:
        (r, c), want, got = bad
        return ObligationResult("tma-box", "violated", s.span,
                                f"the TMA box ({b0.rows} x {b0.cols}, swizzle {b0.swizzle or 'none'}) writes "
                                f"{s.dst.base} element ({r}, {c}) at byte {got}; the layout places it at {want}",
                                witness={"element": [r, c]},
                                detail={"element": [r, c], "layout_byte": want, "tma_byte": got})
    for at, base in _stage_bases(alloc, s.dst):
        if b0.swizzle and base % hopper.SWIZZLE_ALIGN:
            return ObligationResult("tma-box", "violated", s.span,
                                    f"{s.dst.base} at index {at} starts at byte {base}, not on the 1024-byte "
                                    "boundary the swizzle pattern needs", witness={"index": at})
    return ObligationResult("tma-box", "proved", s.span,
                            f"{len(boxes)} TMA box(es) of {b0.rows} x {b0.cols} (swizzle {b0.swizzle or 'none'}) "
                            f"write {s.dst.base} exactly as its layout places it")


@attrs.frozen
class _StoreBox:
    """A TMA store's shared tile, in the shape `_check_tma` takes (the boxes are the loads')."""

    dst: ir.View
    span: object


def _check_tma_store(alloc, s: ir.TmaStore) -> ObligationResult:
    """`tma-box` of a store: the boxes read the tile where the layout places it (the same address
    function as a load's)."""
    r = _check_tma(alloc, _StoreBox(s.src, s.span))
    r.message = r.message.replace(" write ", " read ").replace(" writes ", " reads ")
    return r


def _check_desc(alloc, view, which, s) -> ObligationResult:
    try:
        op = hopper.wgmma_operand(alloc, view, which)
    except ValueError as e:
        return ObligationResult("descriptor-layout", "violated", s.span, f"wgmma {which}: {e}",
                                witness={"operand": which})
    tab, _, _ = hopper.tile_table(alloc, view)
    t = tab if which == "a" else tab.T
    bad = hopper.layout_mismatch(t, hopper.wgmma_table(op, t.shape, ir.DTYPE_BYTES[alloc.dtype]))
    d0 = op.descs[(0, 0)]
    if bad is not None:
        (mn, k), want, got = bad
        el = f"({mn}, {k})" if which == "a" else f"({k}, {mn})"
        return ObligationResult("descriptor-layout", "violated", s.span,
                                f"wgmma {which}'s descriptor ({d0.major}-major, swizzle {d0.swizzle} B, LBO "
                                f"{d0.lbo}, SBO {d0.sbo}) reads {view.base} element {el} from byte {got}; the layout "
                                f"places it at {want}", witness={"element": [int(x) for x in el[1:-1].split(", ")]},
                                detail={"operand": which, "layout_byte": want, "descriptor_byte": got})
    for at, base in _stage_bases(alloc, view):
        if base % hopper.SWIZZLE_ALIGN:
            return ObligationResult("descriptor-layout", "violated", s.span,
                                    f"{view.base} at index {at} starts at byte {base}, not on a 1024-byte boundary",
                                    witness={"index": at})
    return ObligationResult("descriptor-layout", "proved", s.span,
                            f"wgmma {which}: {len(op.descs)} descriptor(s) ({d0.major}-major, swizzle "
                            f"{d0.swizzle} B, LBO {d0.lbo}, SBO {d0.sbo}) read {view.base} exactly as its layout "
                            "places it")


# ---------------------------------------------------------------------------------------------
# the driver


def _candidates(kernel: ir.Kernel) -> tuple[dict, int]:
    depth = max([a.shape[0] for a in kernel.shared_allocs() if a.dtype == "i64" and len(a.shape) == 1] + [1])
    quanta = sorted({v for _, v in kernel.consts if isinstance(v, int) and v > 1} - roles.register_only_values(kernel)
                    | {1})
    vals = set()
    for q in quanta:
        for j in range(0, 2 * depth + 3):
            for r in (0, 1, 8, q - 1):
                if q * j + r >= 1:
                    vals.add(q * j + r)
    return sorted(vals), depth


@attrs.define
class _ComboRun:
    """What the skeleton's runs of one size combination found (its blocks in order)."""

    ran: bool = False  # admissible, with a grid: it counts among the runs
    findings: list = attrs.Factory(list)  # (obligation, Violation), in the order found
    never: object = None  # for the combination with every block: "an element is never written"
    clean: bool = False  # block 0 ran to its end without a finding
    seen: list = attrs.Factory(list)  # the trip counts each block ran
    stored: bool = False
    tag_unknown: bool = False
    once: str | None = None  # every block ran to its end: the scope of the output-once check


def _run_combo(kernel, sizes: dict, every: bool, role_skeleton) -> _ComboRun:
    """Run the skeleton for one size combination: its first and last block, or (`every`) all of
    them, recording which output elements each writes (output-once)."""
    out = _ComboRun()
    if not _admissible(kernel, sizes):
        return out
    try:
        grid = tuple(max(1, int(ir.eval_int(g, sizes))) for g in kernel.grid) + (1, 1)
    except (KeyError, ZeroDivisionError):
        return out
    out.ran = True
    last = tuple(g - 1 for g in grid[:3])
    blocks = [(0, 0, 0), last]  # the first and the (ragged) last block
    if every:  # the combination with several blocks: all of them, for output-once
        blocks = list(itertools.product(range(grid[0]), range(grid[1]), range(grid[2])))
        written = {t.name: np.zeros([int(ir.eval_int(d, sizes)) for d in t.shape], dtype=np.int64)
                   for t in kernel.outputs}
    complete = True  # every block ran to its end (else what it wrote says nothing)
    twice = False
    for block in dict.fromkeys(blocks):
        sk = (role_skeleton or Skeleton)(kernel, sizes, block, grid[:3])
        try:
            if role_skeleton:
                sk.run_roles()  # warpgroup roles run independently (smt/protocol_roles.py)
            else:
                sk.run(kernel.body, {}, np.ones(kernel.block, dtype=bool))
            sk.bulk_exit()
            if block == (0, 0, 0):
                out.clean = True  # the protocol ran to its end without a finding
        except Violation as v:
            out.findings.append((v.obligation, v))
            complete = False
        except (KeyError, ZeroDivisionError, IndexError):
            out.tag_unknown = True
            complete = False
        out.stored |= getattr(sk, "stored", False)
        out.seen.append(tuple(sk.trips))  # the trip counts every block ran, in every size combination
        out.tag_unknown |= getattr(sk, "tag_unknown", False)
        if getattr(sk, "tag_unknown", False):
            complete = False  # stores it could not follow are not in sk.writes: no "never written"
        if every and complete and not twice:
            for st, r0, c0, (rows, cols) in sk.writes:
                w = written[st.dst.base]
                w[max(r0, 0):r0 + rows, max(c0, 0):c0 + cols] += 1
                if (w > 1).any():
                    i, j = (int(x[0]) for x in np.nonzero(w > 1))
                    out.findings.append(("output-once", Violation(
                        "output-once", st.span, f"{st.dst.base}[{i}, {j}] is written twice", [f"block {block}"],
                        {"sizes": dict(sizes), "loop": {}, "block": list(block)})))
                    twice = True  # (only the first counts)
                    break
    if every and complete:
        for name, w in written.items():
            if (w == 0).any():
                i, j = (int(x[0]) for x in np.nonzero(w == 0))
                out.never = Violation("output-once", _first_spans(kernel).get("store") or kernel.span,
                                      f"{name}[{i}, {j}] is never written", [], {"sizes": dict(sizes), "loop": {}})
                break
        out.once = (", ".join(f"{k}={v}" for k, v in sizes.items()) + f", all {len(blocks)} blocks") \
            if written else None
    return out


def check_protocol(kernel: ir.Kernel, shapes: dict | None = None, jobs: int = 1) -> list:
    """The protocol obligations' results (and the tags followed through TMA and wgmma). `jobs` > 1:
    the first size combinations run in a forked child while this process proves the pumping
    argument's lemmas, which do not depend on them (the same results, sooner)."""
    t0 = time.perf_counter()
    role_skeleton = None
    if roles.has_roles(kernel):
        from argus_verify.smt.protocol_roles import RoleSkeleton as role_skeleton
    desc, box = _layout_checks(kernel)
    found: dict = {}
    vals, depth = _candidates(kernel)
    control = _control_sizes(kernel)
    base = {}
    for name in kernel.sizes:
        base[name] = min(vals, key=lambda v: (v < 64, v))  # a size a little above the tiles
    trip_bound = 2 * depth + 2
    combos = []
    sweep: set = set()  # the combinations that vary one size over the candidate values
    if shapes:
        combos.append(dict(shapes))
    else:
        combos.append(dict(base))
        # several blocks with a ragged last one: every size a little over twice its largest tile
        qmax = max([v for _, v in kernel.consts if isinstance(v, int)] + [64])
        combos.append({n: 2 * qmax + 8 for n in kernel.sizes})
        for name in kernel.sizes:
            if name in control:
                sweep.update(range(len(combos), len(combos) + len(vals)))
                combos += [{**base, name: v} for v in vals]
        combos += _persistent_combos(kernel, qmax, base, control)
    done: dict = {}  # combination index -> its _ComboRun

    def counted(indices) -> list:
        """The combinations run (each once), in order, up to MAX_RUNS of them."""
        out = []
        for n in indices:
            if len(out) >= MAX_RUNS:
                break
            if n not in done:
                done[n] = _run_combo(kernel, combos[n], n == 1 and len(combos) > 1, role_skeleton)
            if done[n].ran:
                out.append(n)
        return out

    periodic, pumped, pump = None, None, {}
    first_try, first_found = None, {}  # why the pumping argument failed before the sweep, what its runs found
    # The pumping argument first, on the combinations that follow tags over several blocks and tiles:
    # where it proves the protocol for every size, the sweep of single sizes over the candidate values
    # (a search for small counterexamples) has nothing left to find in the protocol, and the tags it
    # would follow are the solver's obligations for all sizes.
    early_combos = [n for n in range(len(combos)) if n not in sweep]
    lemmas = None  # the pumping argument's lemmas and plan, made beside the first runs (jobs > 1)
    if jobs > 1 and not shapes and role_skeleton is None:
        from argus_verify.smt.forked import in_child

        first_runs = in_child(lambda: (counted(early_combos), done))
        try:
            lemmas = _lemmas(kernel, base, trip_bound)
        finally:
            early, ran = first_runs()
        done.update(ran)
    else:
        early = counted(early_combos)
    if not shapes and role_skeleton is None and not any(done[n].findings or done[n].never for n in early):
        periodic, planned = lemmas or _lemmas(kernel, base, trip_bound)
        if periodic[0]:
            pumped, pump = _pump_runs(kernel, base, first_found, periodic[2],
                                      [combos[n] for n in early if done[n].clean], planned)
            if pumped is None:
                first_try = pump
    elif lemmas is not None:
        periodic = lemmas[0]  # (what the later check_periodic would find; the plan is for clean runs only)
    if pumped is not None:
        used = early
    else:
        used = counted(range(len(combos)))
    seen = set()
    tag_state = {"stored": False, "unknown": False}
    once_checked, once_scope = False, ""
    for n in used:
        r = done[n]
        for name, v in r.findings:
            found.setdefault(name, v)
        if r.never is not None and "output-once" not in found:
            found["output-once"] = r.never
        if r.once is not None:
            once_checked, once_scope = True, r.once
        seen.update(r.seen)
        tag_state["stored"] |= r.stored
        tag_state["unknown"] |= r.tag_unknown
    runs = len(used)
    clean = [combos[n] for n in used if done[n].clean]
    if not shapes and pumped is None:
        from argus_verify.smt.protocol_pump import check_periodic

        periodic = periodic or check_periodic(kernel, trip_bound)
        if periodic[0] and role_skeleton is not None:
            pump = {"reason": "warpgroup roles run as coroutines: the pumping argument is for lockstep kernels"}
        elif periodic[0]:
            if not found and first_try is not None:  # the sweep found nothing: the first try's verdict stands
                pump = first_try
                for name, v in first_found.items():
                    found.setdefault(name, v)
            else:
                pumped, pump = _pump_runs(kernel, base, found, periodic[2], clean)
            if pump.get("refuted"):  # a threshold in the sizes the bounded runs need not reach
                periodic = (False, pump["reason"] + ": the runs of bounded sizes are no evidence for the rest",
                            None)
    trips = sorted({t for sig in seen for _, t in sig})
    covered = [t for t in range(0, trip_bound + 1) if t in trips]
    scope = (f"checked on {runs} size combinations (loop trip counts {covered[0] if covered else 0}.."
             f"{covered[-1] if covered else 0}, bound 2P+2 = {trip_bound})") if not shapes else \
        "checked for " + ", ".join(f"{k}={v}" for k, v in shapes.items())
    if role_skeleton:
        scope += "; warpgroup roles in one order: the producer ahead, the consumers lagging"
    first = _first_spans(kernel)
    out = []
    msgs = {
        "mbarrier-tx": "expect_tx byte counts equal the bytes each phase's TMA copies deliver",
        "mbarrier-phase": "producer and consumer agree on stage and parity; every wait's phase completes",
        "stage-reuse": "no stage is refilled before the wgmma_wait retiring the wgmmas that read it",
        "wgmma-accumulator": "accumulators are read only after their wgmma_wait and fenced before wgmma",
        "async-proxy-fence": "generic shared writes and mbarrier inits are fenced before async-proxy use",
    }
    for name, msg in msgs.items():
        if name in found:
            v = found[name]
            out.append(ObligationResult(name, "violated", v.span or kernel.span, v.message,
                                        witness={"sizes": v.detail["sizes"], "loop": v.detail.get("loop", {})},
                                        detail=v.detail, explanation=v.explanation))
        else:
            out.append(ObligationResult(name, "proved", first.get(name) or kernel.span, f"{msg} ({pumped or scope})"))
    if any(isinstance(s, ir.TmaStore) for s in ir.walk_stmts(kernel.body)):
        out.append(_result("bulk-group", found, first.get("bulk-group") or kernel.span,
                           "no TMA store's shared tile is written again before a bulk_wait retired it, nor does "
                           f"the block exit before ({pumped or scope})"))
    for r in out:
        if pumped and r.status == "proved" and r.obligation in PROTOCOL and r.obligation not in EXHAUSTIVE:
            r.detail["pumped"] = pump
    out += desc + box
    gemm = _gemm_contract(kernel)
    tags = {"tag-assertion": "wgmma products agree on k: each k step multiplies one column of "
                             f"{gemm[0] if gemm else 'A'} with the same row of {gemm[1] if gemm else 'B'}",
            "output-contract": "every stored accumulator element sums its own output row and column",
            "reduction-coverage": "every k of the contract's sum enters each output element exactly once",
            "output-once": "every output element is written exactly once"}
    for name, msg in tags.items():
        where = first.get("wgmma-accumulator") if name == "tag-assertion" else \
            first.get("store") if name == "output-once" else \
            (gemm[3] if gemm and name == "reduction-coverage" else first.get("store"))
        if name in found:
            v = found[name]
            out.append(ObligationResult(name, "violated", v.span or kernel.span, v.message,
                                        witness={"sizes": v.detail["sizes"], "loop": v.detail.get("loop", {})},
                                        detail=v.detail, explanation=v.explanation))
        elif gemm is not None and tag_state["stored"] and not tag_state["unknown"] and \
                (name != "output-once" or once_checked):
            how = f"{once_scope}" if name == "output-once" else f"{scope}, first and last block"
            out.append(ObligationResult(name, "proved", where or kernel.span,
                                        f"{msg} (followed through TMA and wgmma; {how})"))
    if not shapes:
        mark_bounded(out, runs, trip_bound, covered, kernel, periodic)
        for r in out:  # why the pumping argument did not cover them
            if "bounded" in r.detail and pump.get("reason"):
                r.detail["bounded"]["not_for_all_sizes"] = pump["reason"]
    dt = time.perf_counter() - t0
    for r in out:
        r.seconds = dt / max(1, len(out))
    return out


EXHAUSTIVE = ("descriptor-layout", "tma-box")  # comparisons over the whole (constant) tiles: proofs


def mark_bounded(results: list, runs: int, trip_bound: int, covered: list, kernel: ir.Kernel,
                 periodic: tuple | None = None) -> None:
    """The skeleton's proofs hold for the loop trip counts it ran, not by induction over all of them
    (those the pumping argument proved for all sizes aside, `detail.pumped`): every such result says
    so in its detail (`bounded`), and the report's summary counts them. Where a loop does not repeat
    within the trip counts run (smt/protocol_pump.check_periodic: `if kt == 100`), the runs are no
    evidence for longer loops: those results are unknown."""
    from argus_verify.smt.protocol_pump import check_periodic

    todo = [r for r in results if r.status == "proved" and r.obligation not in EXHAUSTIVE and "pumped" not in r.detail]
    if not todo:
        return
    ok, why, _ = periodic or check_periodic(kernel, trip_bound)
    for r in todo:
        if ok:
            r.detail["bounded"] = {"runs": runs, "trip_bound": trip_bound, "trip_counts": list(covered)}
        else:
            r.status = "unknown"
            r.message += f" — not established beyond the sizes run: {why}"
            r.detail["reason"] = why


def _lemmas(kernel, base: dict, trip_bound: int) -> tuple:
    """(check_periodic's verdict, the pumping argument's plan for a kernel no run found violated,
    or None where the loops are not periodic). Neither depends on the bounded runs."""
    from argus_verify.smt.protocol_pump import check_periodic

    periodic = check_periodic(kernel, trip_bound)
    return periodic, (_plan(kernel, base, periodic[2], {}) if periodic[0] else None)


def _plan(kernel, base: dict, periodic, found: dict) -> tuple:
    """The pumping argument's plan (smt/protocol_pump.plan): (plan or None, why not, refuted)."""
    from argus_verify.smt.protocol_pump import plan

    def probe(sizes, block, checks):
        sk = Skeleton(kernel, sizes, tuple(block.get(f"block_id.{a}", 0) for a in "xyz"),
                      tuple(max(1, int(ir.eval_int(g, sizes))) for g in kernel.grid))
        sk.gemm, sk.pump_checks = None, checks
        try:
            sk.run(kernel.body, {}, np.ones(kernel.block, dtype=bool))
            sk.bulk_exit()
        except (Violation, KeyError, ZeroDivisionError, IndexError):
            return None
        return sk.pump_seen

    # (the argument over trip counts costs seconds of lemmas and hundreds of runs: not for a kernel
    # whose protocol the bounded runs already found violated)
    return plan(kernel, base, periodic, None if found else probe)


def _pump_runs(kernel, base: dict, found: dict, periodic, clean: list, planned=None) -> tuple[str | None, dict]:
    """The runs of the pumping argument (smt/protocol_pump.py) for a kernel whose warpgroups run in
    lockstep: (the scope of a proof for all sizes, its detail), or (None, {"reason": why not}).
    `clean`: size combinations the bounded runs took to the end without a finding; a pump run whose
    trip counts one of them has, and that records no state, is not repeated (lemma E: the same trip
    counts, the same protocol). `planned`: the plan `_plan` made for this `periodic` with no finding."""
    from argus_verify.smt.protocol_pump_trips import trips_of

    pl, why, refuted = planned if planned is not None and not found else _plan(kernel, base, periodic, found)
    if pl is None:
        return None, {"reason": why, "refuted": refuted}
    seen: dict = {}  # id(For) -> every execution's {iteration: state digest}, over all runs
    single = len(pl.pumps) == 1
    heads: dict = {}
    runs = 0
    pumped = [p.loop for p in pl.pumps]
    blocks = pl.blocks or ({},) * len(pl.combos)
    done = set()
    for c in clean:  # (run for block 0)
        try:
            done.add(trips_of(pumped, c, {}, kernel))
        except (KeyError, ZeroDivisionError):
            pass
    order = list(range(len(pl.combos)))
    prefix = pl.prefix[0].node if pl.prefix else None
    if prefix is not None:
        # runs that differ only in the prefix loop's trip count share its iterations up to their tail
        # (the prefix lemma): each group's longest run saves its state at every iteration, and the
        # others resume from it
        xi = pumped.index(pl.prefix[0])
        trips_by = [trips_of(pumped, c, b, kernel) for c, b in zip(pl.combos, blocks, strict=True)]
        order.sort(key=lambda n: (trips_by[n][:xi] + trips_by[n][xi + 1:], -trips_by[n][xi]))
        single = False
    longest: dict = {}  # the other loops' trip counts -> (the group's snapshots, its checks)
    for n in order:
        sizes, block, checks = pl.combos[n], blocks[n], pl.fixpoints[n]
        try:
            grid = tuple(max(1, int(ir.eval_int(g, sizes))) for g in kernel.grid) + (1, 1)
        except (KeyError, ZeroDivisionError):
            return None, {"reason": f"no grid for {sizes}"}
        trips = trips_of(pumped, sizes, block, kernel)
        if prefix is None and not checks and trips in done:
            runs += 1
            continue
        group = trips[:xi] + trips[xi + 1:] if prefix is not None else None
        runs += 1

        def world(sizes=sizes, block=block, grid=grid, checks=checks):
            # (a block past the grid is a world of the argument by trip counts: protocol_pump_trips.py)
            sk = Skeleton(kernel, sizes, tuple(block.get(f"block_id.{a}", 0) for a in "xyz"), grid[:3])
            sk.gemm = None  # the protocol alone (the tags are followed on the other runs)
            sk.pump_checks = checks
            return sk

        sk = world()
        try:
            if group is not None and group in longest:
                snaps, sk.pump_checks = longest[group]
                at = max(0, trips[xi] - pl.prefix[1])
                later = at == 0 and trips[xi] > 0  # (trip counts 0 .. tail all start at iteration 0)
                sk.resume(copy.deepcopy(snaps[at]) if later else snaps.pop(at), prefix, at)
            else:
                if group is not None:
                    sk.snap_loop = prefix
                sk.run(kernel.body, {}, np.ones(kernel.block, dtype=bool))
                if group is not None:
                    longest[group] = (sk.snapshots, checks)
                    sk.snapshots, sk.snap_loop = {}, None
            sk.bulk_exit()
        except Violation as v:
            finding = v
            if group is not None and group in longest:  # the finding again, from the start: its messages
                finding = _from_start(world(), kernel)  # (loop positions) come from this world's run alone
                if finding is None:
                    return None, {"reason": "a run resumed from a snapshot found what the run from the start does not"}
            found.setdefault(finding.obligation, finding)
            return None, {"reason": f"a run found {finding.obligation} violated"}
        except (KeyError, ZeroDivisionError, IndexError) as e:
            return None, {"reason": f"a run stopped ({type(e).__name__}: {e})"}
        for key, execs in sk.pump_seen.items():
            seen.setdefault(key, []).extend(execs)
        if single:  # the combinations come in the order of the trip count: stop once a head is settled
            (p,) = pl.pumps
            (upto,) = trips
            head = _pump_head(kernel, p, seen.get(id(p.loop.node), []), upto)
            if head is not None:
                heads[id(p.loop.node)] = (head, upto)
                break
    for p in pl.pumps:
        if id(p.loop.node) not in heads:
            head = _pump_head(kernel, p, seen.get(id(p.loop.node), []), p.trips_run - 1)
            if head is None:
                return None, {"reason": f"the protocol state of the loop at line {p.loop.line} is not the same "
                                        f"after {p.L} iterations, from any iteration up to {max(p.heads)}"}
            heads[id(p.loop.node)] = (head, p.trips_run - 1)
    run_trips = [trips_of(pumped, c, b, kernel) for c, b in zip(pl.combos, blocks, strict=True)]
    first = {id(p.loop.node): min(t[n] for t in run_trips) for n, p in enumerate(pl.pumps)}
    loops = [{"line": p.loop.line, "size": p.size, "period": p.L, "head": heads[id(p.loop.node)][0], "tail": p.B,
              "growth": p.delta, "trip_counts_run": [first[id(p.loop.node)], heads[id(p.loop.node)][1]],
              **({"witness": p.witness} if p.witness else {})}
             for p in pl.pumps]
    what = "; ".join(f"the loop at line {x['line']} every trip count from {x['trip_counts_run'][0]} to "
                     f"{x['trip_counts_run'][1]}"
                     for x in loops) or "one run"
    lemmas = "pumping lemmas over trip counts proved with Z3 cover every other size and block" if pl.blocks \
        else "pumping lemmas proved with Z3 cover every other size"
    scope = f"for all sizes: {runs} runs ({what}), and {lemmas}"
    return scope, {"runs": runs, "loops": loops}


def _from_start(sk, kernel) -> Violation | None:
    """The violation a skeleton's run from the start finds, if any."""
    try:
        sk.run(kernel.body, {}, np.ones(kernel.block, dtype=bool))
        sk.bulk_exit()
    except Violation as v:
        return v
    return None


def _pump_classes() -> tuple:
    from argus_verify.smt.protocol_pump import CONSTANT, STATE

    return STATE, CONSTANT


def _pump_head(kernel, p, execs: list, upto: int) -> int | None:
    """The first head A of pump p whose base runs (trip counts A + L + B .. A + 2L + B - 1) are among
    the runs of trip counts up to `upto`, and where the state after one period, from iteration A, is
    the state at A in every execution with at least A + L + B trips; None if there is none yet."""
    from argus_verify.smt.protocol_pump import head_holds

    for a in p.heads:
        if a + 2 * p.L + p.B - 1 > upto:
            return None
        mine = [e for e in execs if e["trips"] >= a + p.L + p.B]
        if mine and all(a in e and a + p.L in e and e[a] == e[a + p.L] for e in mine) and head_holds(kernel, p, a):
            return a
    return None


def _result(name, found, where, msg) -> ObligationResult:
    if name in found:
        v = found[name]
        return ObligationResult(name, "violated", v.span or where, v.message,
                                witness={"sizes": v.detail["sizes"], "loop": v.detail.get("loop", {})},
                                detail=v.detail, explanation=v.explanation)
    return ObligationResult(name, "proved", where, msg)


def _persistent_combos(kernel, qmax: int, base: dict, control: set) -> list:
    """For a grid that does not grow with the sizes (a persistent kernel), sizes that give at least
    twice as many tiles as blocks, so that blocks run their tile loop more than once (the ring and the
    shared tiles carried across tiles). Every tile is at most qmax wide: (big / qmax)^2 >= 2 blocks."""
    try:
        blocks = math.prod(int(ir.eval_int(g, {})) for g in kernel.grid)
    except (KeyError, ZeroDivisionError):
        return []
    if blocks <= 1:
        return []
    big = qmax * math.ceil(math.sqrt(2 * blocks)) + 8
    many = {n: big for n in kernel.sizes}
    return [many] + [{**many, n: base[n]} for n in kernel.sizes if n in control]


def _control_sizes(kernel) -> set:
    """The sizes the control flow depends on: in loop bounds and branch conditions, through lets."""
    lets: dict = {}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Let):
            lets.setdefault(s.name, set()).update(_names(s.value))
    out: set = set()
    todo = []
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.For):
            todo += list(_names(s.start) | _names(s.stop))
        elif isinstance(s, ir.If):
            todo += list(_names(s.cond))
    seen: set = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in kernel.sizes:
            out.add(n)
        todo += list(lets.get(n, ()))
    return out


def _names(e) -> set:
    return {x.name for x in ir.walk_iexpr(e) if isinstance(x, ir.IVar)}


def _admissible(kernel, sizes) -> bool:
    try:
        return all(ir.eval_int(r, sizes) for r in kernel.requires)
    except (KeyError, ZeroDivisionError):
        return False


def _first_spans(kernel) -> dict:
    out: dict = {}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.MbarrierOp) and s.kind == "expect_tx":
            out.setdefault("mbarrier-tx", s.span)
        if isinstance(s, ir.MbarrierOp) and s.kind == "wait":
            out.setdefault("mbarrier-phase", s.span)
        if isinstance(s, ir.TmaLoad):
            out.setdefault("stage-reuse", s.span)
        if isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma):
            out.setdefault("wgmma-accumulator", s.span)
        if isinstance(s, ir.Fence) and s.kind in ("mbarrier_init", "proxy_async"):
            out.setdefault("async-proxy-fence", s.span)
        if isinstance(s, ir.Store) and s.dst.space == "global":
            out.setdefault("store", s.span)
        if isinstance(s, ir.TmaStore):
            out.setdefault("store", s.span)
            out.setdefault("bulk-group", s.span)
    return out


__all__ = ["PROTOCOL", "check_protocol", "Span"]
