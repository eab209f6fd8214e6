"""The protocol skeleton of a warp-specialised kernel: warpgroup roles (argus_verify/roles.py) that
meet only at mbarriers, executed independently.

Each warpgroup runs the kernel as its own coroutine (its threads together, as wgmma and setmaxnreg
require), with its own wgmma groups, in-flight accumulators and tags; shared memory, mbarriers and
TMA copies are the block's. A warpgroup runs until it stops: at `barrier()` (all come), at an mbarrier
wait whose phase no copy in flight can complete (it retries once another warpgroup arrived or issued
a copy), or at its end. After every arrival, of the ready warpgroups the last runs first: the
producer (the last warpgroup by the roles' convention) refills a stage as early as the barriers let
it and the consumers lag as far as they may, the order in which a stage released too early is
overwritten first. When every warpgroup is stopped the kernel hangs: a deadlock. This is one order,
not every interleaving (the results say so); the release and refill rules below do not depend on it.

On top of the lockstep skeleton's checks (smt/protocol.py), the obligations of the ws form:

  stage-reuse     a consumer warpgroup releases stage s (arrives on an mbarrier that the producer waits
                  on before refilling, index s) only after the wgmma_wait retiring its wgmmas that read
                  stage s; the producer refills stage s for the f-th time only after every consumer
                  warpgroup released its (f-1)-th fill. Where a release barrier's phase completed with
                  arrivals from fewer consumer warpgroups than there are, the init's count is named.
  mbarrier-phase  no deadlock: a wait that never completes names every stopped warpgroup's role,
                  barrier, stage and phase; an arrival count larger than the arrivals the roles make
                  per phase is named at its init.

Every consumer warpgroup is taken to read every fill of every stage (the rows of A and all of B, as
in the GEMMs); a kernel whose consumers split the stages would be reported, never wrongly proved.
"""

from __future__ import annotations

import numpy as np

from argus_verify import ir, roles
from argus_verify.smt.protocol import Skeleton, Violation, _loop

BLOCKED, BARRIER, READY, DONE = "blocked", "barrier", "ready", "done"

# what each warpgroup has of its own; swapped in when it runs
_OWN = ("open", "groups", "pending_acc", "unfenced", "acc_rec", "loop", "retired", "unit", "last_release")


_PLAN: dict = {}  # the roles of the kernel being checked (the same for every size and block)


def _role_plan(kernel: ir.Kernel) -> tuple:
    rs = roles.roles(kernel)
    role_of = {w: r for r in rs for w in r.warpgroups}
    kinds = {}
    for r in rs:
        body = list(ir.walk_stmts(r.body))
        kinds[r] = "producer" if any(isinstance(s, ir.TmaLoad) for s in body) else \
            "consumer" if any(isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma) for s in body) else "other"
    kind = {w: kinds[r] for w, r in role_of.items()}
    consumers = sorted(w for w, k in kind.items() if k == "consumer")
    # release barriers: arrived on (plain arrive) by consumers, waited on by the producer
    arrived = {s.bar.base for r in rs if kinds[r] == "consumer" for s in ir.walk_stmts(r.body)
               if isinstance(s, ir.MbarrierOp) and s.kind == "arrive"}
    waited = {s.bar.base for r in rs if kinds[r] == "producer" for s in ir.walk_stmts(r.body)
              if isinstance(s, ir.MbarrierOp) and s.kind == "wait"}
    frags = {a.name: a.type.coords for a in ir.walk_stmts(kernel.body) if isinstance(a, ir.Assign)}
    return rs, role_of, kind, consumers, arrived & waited, frags


class RoleSkeleton(Skeleton):
    CROSS_WARPGROUP = False  # each warpgroup runs as its own unit here; the release rules order them

    def __init__(self, kernel: ir.Kernel, sizes: dict, block=(0, 0, 0), grid=(1, 1, 1)):
        super().__init__(kernel, sizes, block, grid)
        if _PLAN.get("kernel") is not kernel:
            _PLAN.clear()
            _PLAN.update(kernel=kernel, plan=_role_plan(kernel), rects={})
        self.roles, self.role_of, self.kind, self.consumers, self.release_bars, self.frag_tables = _PLAN["plan"]
        self.fills: dict = {}  # (alloc, stage) -> how many TMA fills it had
        self.released: dict = {}  # (warpgroup, alloc, stage) -> the last fill that warpgroup released
        self.arrivals: dict = {}  # (barrier, index, phase) -> warpgroups that arrived in that phase
        self.init_at: dict = {}  # barrier -> (span, count) of its init
        self.progress = 0
        self.retired: list = []
        self.unit = 0
        self.last_release = None

    # -- the driver ------------------------------------------------------------------------------
    def run_roles(self) -> None:
        nwg = self.T // roles.WARPGROUP
        units = []
        for w in range(nwg):
            mask = (self.tids // roles.WARPGROUP) == w
            ctx = {"open": [], "groups": [], "pending_acc": {}, "unfenced": {}, "acc_rec": {}, "loop": {},
                   "retired": [], "unit": w, "last_release": None}
            units.append({"w": w, "gen": None, "ctx": ctx, "state": READY, "event": None, "mask": mask})
        for u in units:
            self._enter(u)
            u["gen"] = self.run_gen(self.k.body, {}, u["mask"])
            self._leave(u)
        while True:
            for u in units:  # a stopped warpgroup retries once another arrived or issued a copy
                if u["state"] == BLOCKED and u["event"][-1] != self.progress:
                    u["state"] = READY
            ready = [u for u in units if u["state"] == READY]
            if not ready:
                live = [u for u in units if u["state"] != DONE]
                if not live:
                    return
                if all(u["state"] == BARRIER for u in live):
                    self.published = True
                    self.barrier_acquires()
                    for u in live:
                        u["state"] = READY
                    continue
                self._deadlock(units)
            u = ready[-1]
            self._enter(u)
            try:
                ev = next(u["gen"])
                u["state"], u["event"] = ev[0], ev
            except StopIteration:
                u["state"] = DONE
            finally:
                self._leave(u)

    def _enter(self, u) -> None:
        for k in _OWN:
            setattr(self, k, u["ctx"][k])

    def _leave(self, u) -> None:
        for k in _OWN:
            u["ctx"][k] = getattr(self, k)

    def role(self) -> str:
        w = self.unit
        r = self.role_of.get(w)
        if r is None:
            return f"warpgroup {w} (before the roles split)"
        return f"{self.kind[w]} warpgroup {w} (role of warpgroups {', '.join(map(str, r.warpgroups))})"

    # -- statements as a coroutine -----------------------------------------------------------------
    def run_gen(self, body, env, active):
        for s in body:
            if not active.any():
                return
            yield from self.step_gen(s, env, active)

    def step_gen(self, s, env, active):
        self.active = active
        if isinstance(s, ir.For):
            lo, hi = self.uni(s.start, env, active), self.uni(s.stop, env, active)
            self.trips.append((s.span.line if s.span else 0, max(0, -(-(hi - lo) // s.step))))
            for i in range(lo, hi, s.step):
                env[s.var] = i
                self.loop[s.var] = i
                yield from self.run_gen(s.body, env, active)
                self.active = active
            self.loop.pop(s.var, None)
        elif isinstance(s, ir.If):
            c = np.broadcast_to(np.asarray(self.ev(s.cond, env)) != 0, (self.T,))
            yield from self.run_gen(s.then, env, active & c)
            yield from self.run_gen(s.orelse, env, active & ~c)
        elif isinstance(s, ir.Barrier):
            yield (BARRIER, s, self.progress)
        elif isinstance(s, ir.MbarrierOp) and s.kind == "wait":
            yield from self.wait_gen(s, env, active)
        elif isinstance(s, ir.MbarrierOp):
            self.mbarrier_role(s, env, active)
            if s.kind != "init":
                yield (READY, s, self.progress)  # an arrival: a warpgroup waiting for it may go first
        elif isinstance(s, ir.TmaLoad):
            self.refill_check(s, env, active)
            self.tma(s, env, active)
            self.progress += 1
        elif isinstance(s, ir.WgmmaGroup):
            if s.kind == "wait" and len(self.groups) > s.pending:
                for grp in self.groups[:len(self.groups) - s.pending]:
                    for w in grp:
                        self.retired += w.get("stages", [])
            self.group(s)
        elif isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma):
            self.assign(s, env, active)
            self.open[-1]["stages"] = [(v.base, self._stage(v, env, active),
                                        self.fills.get((v.base, self._stage(v, env, active)), 0), s.span,
                                        dict(self.loop)) for v in (s.op.a, s.op.b)]
        else:
            self.step(s, env, active)

    def _stage(self, view: ir.View, env, active) -> int:
        first = view.index[0]
        return self.uni(first.index, env, active) if isinstance(first, ir.Index) else 0

    # -- mbarriers ---------------------------------------------------------------------------------
    def mbarrier_role(self, s: ir.MbarrierOp, env, active) -> None:
        name = s.bar.base
        if s.kind == "init":
            self.init_at[name] = (s.span, self.uni(s.value, env, active))
            self.mbarrier(s, env, active)
            return
        i = self.uni(s.bar.index[0].index, env, active)
        b = self.bar(name)
        if s.kind == "arrive" and name in self.release_bars and self.kind.get(self.unit) == "consumer":
            for w in self.open + [x for g in self.groups for x in g]:
                for alloc, stage, _fill, span, loop in w.get("stages", []):
                    if stage == i:
                        self.fail("stage-reuse", s.span,
                                  f"releases stage {i} (arrive on {name}[{i}]) while the wgmma reading {alloc}[{i}] "
                                  f"(line {span.line}, {_loop(loop)}) is still in flight",
                                  ["no wgmma_wait retires that wgmma before this arrival: the producer may refill "
                                   "the stage while the tensor cores read it"],
                                  barrier=name, stage=i, phase=int(b["phase"][i]))
            keep = []
            for rec in self.retired:
                alloc, stage, fill = rec[:3]
                if stage == i:
                    key = (self.unit, alloc, stage)
                    self.released[key] = max(self.released.get(key, 0), fill)
                else:
                    keep.append(rec)
            self.retired = keep
        if s.kind in ("arrive", "expect_tx"):
            self.arrivals.setdefault((name, i, int(b["phase"][i])), set()).add(self.unit)
            self.progress += 1
        self.mbarrier(s, env, active)

    def wait_gen(self, s: ir.MbarrierOp, env, active):
        name = s.bar.base
        b = self.bar(name)
        idx = np.broadcast_to(np.asarray(self.ev(s.bar.index[0].index, env)), (self.T,))[active]
        val = np.broadcast_to(np.asarray(self.ev(s.value, env)), (self.T,))[active]
        for i, p in dict.fromkeys(zip(idx.tolist(), (val % 2).tolist(), strict=True)):
            if not b["inited"][i] or not self.published:
                self.mbarrier(s, env, active)  # the lockstep checks name the init problem
            while True:
                self.active = active
                while b["phase"][i] % 2 == p:  # land what is in flight to this phase, oldest first
                    mine = [t for t in self.tmas if t["bar"] == name and t["idx"] == i]
                    if not mine:
                        break
                    self._land(mine[0], name, i, s.span)
                if b["phase"][i] % 2 != p:
                    break
                yield (BLOCKED, s, (name, i, p, env.copy(), active, dict(self.loop)), self.progress)
            self.active = active
            Skeleton.wait(self, s, name, i, p)  # passes: the lockstep checks of a wait that passes
            who = active.copy()
            who[active] = (idx == i) & (val % 2 == p)
            self.acquire(name, i, who)  # (what landed is visible to the threads that waited)
            if name in self.release_bars:
                self.last_release = (name, i, int(b["phase"][i]) - 1, s.span)

    def _land(self, t, name, i, span) -> None:
        self.tmas.remove(t)
        self.landed(t)
        self.tag[t["alloc"]][t["off"]] = t["tags"]
        self.progress += 1
        if self.bars[name]["fenced"][i]:
            self.ph(name, i)["landed"] += t["bytes"]
            self.try_complete(name, i, span)

    # -- refills -----------------------------------------------------------------------------------
    def refill_check(self, s: ir.TmaLoad, env, active) -> None:
        alloc = s.dst.base
        stage = self._stage(s.dst, env, active)
        fill = self.fills.get((alloc, stage), 0) + 1
        self.fills[(alloc, stage)] = fill
        if fill < 2:
            return
        for w in self.consumers:
            if self.released.get((w, alloc, stage), 0) >= fill - 1:
                continue
            lr = self.last_release
            if lr is not None:
                bar, idx, phase, _ = lr
                came = sorted(self.arrivals.get((bar, idx, phase), set()))
                if idx == stage and bar in self.init_at and set(self.consumers) - set(came):
                    span, count = self.init_at[bar]
                    self.fail("stage-reuse", span,
                              f"{bar}[{idx}] completes a phase with arrivals from {len(came)} consumer "
                              f"warpgroup(s) but {len(self.consumers)} release each stage: its count {count} is "
                              "too small", [f"phase {phase} of {bar}[{idx}] completed with the arrival(s) of "
                                            f"warpgroup(s) {came}; the producer then refills {alloc}[{stage}] "
                                            f"(fill {fill}, line {s.span.line}) while consumer warpgroup {w} has "
                                            f"not released fill {fill - 1}"],
                              barrier=bar, stage=idx, phase=phase)
            self.fail("stage-reuse", s.span,
                      f"refills {alloc}[{stage}] (its fill {fill}) before consumer warpgroup {w} released fill "
                      f"{fill - 1}", [f"the producer's last wait on a release barrier: "
                                      f"{'none' if lr is None else f'{lr[0]}[{lr[1]}] phase {lr[2]}'}; its stage or "
                                      "parity does not cover this stage's last consumers"],
                      barrier=lr[0] if lr else "?", stage=stage, phase=lr[2] if lr else -1)

    # -- stores of a consumer warpgroup: its rows of the tile ------------------------------------------
    def store_tags(self, s: ir.Store, env, active) -> None:
        rec = self.acc_rec.get(s.value, "none")
        if rec == "none" or rec is None or getattr(rec, "rows", None) is None or self.gemm is None \
                or not self.k.param(s.dst.base).output or active.all():
            super().store_tags(s, env, active)
            return
        before = getattr(self, "tag_unknown", False)
        super().store_tags(s, env, active)  # the rows, columns and k coverage of the stored sums
        self.tag_unknown = before  # the lockstep rule (every thread stores the whole tile) does not apply
        tids = self.tids[active]
        key = (s.value, int(tids[0]), int(tids[-1]), len(tids))
        rects = _PLAN["rects"]  # (fragment, threads) -> the tile rectangle those threads hold
        if key not in rects:
            rects[key] = _rectangle(self.frag_tables.get(s.value), tids)
        rect = rects[key]
        if rect is None or s.where is not None:
            self.tag_unknown = True  # not a rectangle of the tile, or masked: not followed
            return
        (r, c), shape = rect
        r0 = self.uni(s.dst.index[0].start, env, active)
        c0 = self.uni(s.dst.index[1].start, env, active)
        self.writes.append((s, r0 + r, c0 + c, shape))

    # -- deadlock ----------------------------------------------------------------------------------
    def _deadlock(self, units) -> None:
        stopped = [u for u in units if u["state"] == BLOCKED]
        lines = []
        for u in units:
            self._enter(u)
            if u["state"] == BLOCKED:
                _, s, (name, i, p, _env, _act, loop), _ = u["event"]
                b = self.bars[name]
                lines.append(f"{self.role()} waits at line {s.span.line} on {name}[{i}] for parity {p} (phase "
                             f"{int(b['phase'][i])}, {int(b['pending'][i])} of {int(b['count'][i])} arrivals "
                             f"missing; {_loop(loop)})")
            elif u["state"] == BARRIER:
                lines.append(f"{self.role()} waits at barrier()")
            self._leave(u)
        # an arrival count larger than what the roles give per phase: named at the init
        for u in stopped:
            _, s, (name, i, p, _env, _act, loop), _ = u["event"]
            b = self.bars[name]
            came = self.arrivals.get((name, i, int(b["phase"][i])), set())
            givers = set(self.consumers) if name in self.release_bars else set()
            if givers and givers <= came and b["pending"][i] > 0 and name in self.init_at:
                self._enter(u)
                span, count = self.init_at[name]
                raise Violation("mbarrier-phase", span,
                                f"deadlock: {name}[{i}] expects {count} arrivals per phase but the "
                                f"{len(givers)} consumer warpgroups that arrive on it give {len(came)}: phase "
                                f"{int(b['phase'][i])} never completes",
                                [f"role: {self.role()}, barrier {name}[{i}], phase {int(b['phase'][i])}, "
                                 f"{_loop(loop)}", *lines],
                                {"sizes": dict(self.sizes), "loop": loop, "role": self.role(), "barrier": name,
                                 "stage": i, "phase": int(b["phase"][i])})
        # otherwise the producer's wait (the pipeline's head), else the first stopped warpgroup's
        u = max(stopped, key=lambda x: (self.kind.get(x["w"]) == "producer", -x["w"])) if stopped else units[0]
        self._enter(u)
        if u["state"] != BLOCKED:
            raise Violation("mbarrier-phase", self.k.span, "deadlock: the warpgroups wait at different barriers",
                            lines, {"sizes": dict(self.sizes), "loop": {}, "role": self.role()})
        _, s, (name, i, p, env, active, loop), _ = u["event"]
        self.loop = loop
        self.active = active
        try:
            Skeleton.wait(self, s, name, i, p)  # the lockstep diagnosis: tx over-count, unfenced init, ...
        except Violation as v:
            v.explanation = [*v.explanation, "every warpgroup is stopped:", *lines]
            raise
        raise Violation("mbarrier-phase", s.span, f"deadlock at {name}[{i}]", lines,
                        {"sizes": dict(self.sizes), "loop": loop, "role": self.role()})


def _rectangle(coords, tids) -> tuple | None:
    """((row, column), (rows, columns)) of the tile elements threads `tids` hold, when those make a
    rectangle; None otherwise."""
    if coords is None:
        return None
    table = coords.coord_table()  # [threads of the role, values, 2]
    if tids.max() >= len(table):
        return None
    rc = table[tids].reshape(-1, 2).astype(np.int64)
    lo, hi = rc.min(0), rc.max(0)
    n = len(np.unique((rc[:, 0] - lo[0]) * (hi[1] - lo[1] + 1) + rc[:, 1] - lo[1]))
    if n != int(np.prod(hi - lo + 1)):
        return None
    return (int(lo[0]), int(lo[1])), (int(hi[0] - lo[0] + 1), int(hi[1] - lo[1] + 1))
