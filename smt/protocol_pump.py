"""Why the protocol skeleton's finitely many runs speak for every size: a pumping argument.

The skeleton (smt/protocol.py) executes the kernel's protocol for concrete sizes. Its behaviour is
fixed by the values of a few integer expressions, the *occurrences*: loop bounds, branch conditions,
mbarrier indices, counts, byte counts and parities, and the indices of shared views that TMA, wgmma
and stores touch (global coordinates feed only the data, which the skeleton's tag following checks
on its bounded runs). This module proves facts about those expressions with Z3, for all sizes:

* periodicity (`check_periodic`): in every loop whose trip count is not a constant, each occurrence
  takes the same value (a parity: the same value modulo 2) at iterations j and j + L, except in a head
  of A and a tail of B iterations. Where no such A and B within the enumerated trip counts exist
  (`if kt == 100`, a parity that flips every 40 iterations) the bounded runs never see the loop's
  steady state, and their results are not evidence: the protocol results are then unknown.

* the pumping lemmas (`plan`), for a kernel whose occurrences do not depend on the block and whose
  varying trip counts each depend on one size of its own (K for `range(cdiv(K, BK))`):
  - E: a step of a size by its quantum (the spacing of its admissible values) that changes no trip
    count changes no occurrence (M and N of a non-persistent GEMM change nothing at all);
  - P: growing the size z of loop X by Delta adds L iterations to X and nothing else; the occurrences of
    the grown run are those of the smaller one with the iterations [A, A + L) of X repeated once
    (at each execution of X); and the admissible sizes with trip count >= A + 2L + B shrink by Delta.

  With those, the runs for every trip count below A + 2L + B of every such loop (one size vector each,
  by E) decide all sizes, provided that in the runs with a trip count in [A + L + B, A + 2L + B) the
  skeleton's state at iteration A + L of each execution of X equals its state at iteration A
  (`fingerprint`, checked by the skeleton): by induction on the trip count, a grown run repeats a
  period that leaves the state where it was, so it meets exactly the smaller run's states and
  events. The state compared is everything the skeleton's protocol rules read; phase counters are
  compared modulo 2 (the rules read their parity only), loop positions kept for messages are not.

Each lemma is an unsatisfiable Z3 query; a query the solver does not settle (or an expression it
cannot translate) makes the argument unavailable, never a proof.
"""

from __future__ import annotations

import hashlib
import itertools
import math

import attrs
import numpy as np
import z3

from argus_verify import ir, semantics
from argus_verify.diagnostics import Span
from argus_verify.smt import zops as Z

GOAL_RLIMIT = 40_000_000  # Z3's resource count per goal (a persistent GEMM's lemma takes under 1.5M for
# all its goals): a deterministic limit, so that whether a lemma is settled does not depend on the load
GOAL_TIMEOUT_MS = 60_000  # (a safeguard only)
MAX_BASE_RUNS = 240  # the pumping argument's runs (a product over the pumped loops) beyond which it is not tried
QUANTA = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@attrs.frozen
class Loop:
    node: ir.For
    start: ir.IExpr  # with lets substituted
    stop: ir.IExpr
    outer: tuple  # enclosing Loops, outermost first

    @property
    def line(self) -> int:
        return self.node.span.line if self.node.span else 0


@attrs.frozen
class Occurrence:
    expr: ir.IExpr  # with lets substituted
    kind: str  # "exact" | "parity" | "truth"
    loops: tuple  # enclosing Loops, outermost first
    line: int
    stop_of: ir.For | None = None  # the loop whose stop this is (its trip count is compared instead)
    start_of: ir.For | None = None  # the loop whose start this is


class Unsupported(Exception):
    pass


# -- collecting the occurrences ---------------------------------------------------------------------


def _subst(e, scope: dict):
    if isinstance(e, ir.IVar):
        if e.name in scope:
            return scope[e.name]
        return e  # a size, a constant's name or a loop variable (checked when translated)
    if isinstance(e, (ir.IConst, ir.ISpecial)):
        return e
    if isinstance(e, ir.IBin):
        return ir.IBin(e.op, _subst(e.a, scope), _subst(e.b, scope))
    if isinstance(e, ir.IUn):
        return ir.IUn(e.op, _subst(e.a, scope))
    if isinstance(e, ir.ISelect):
        return ir.ISelect(_subst(e.cond, scope), _subst(e.a, scope), _subst(e.b, scope))
    raise Unsupported(f"the expression {type(e).__name__} at line {_line(e)}")


def _line(x) -> int:
    span = getattr(x, "span", None)
    return span.line if span else 0


def _view_exprs(view: ir.View) -> list:
    out = []
    for it in view.index:
        out.append(it.index if isinstance(it, ir.Index) else it.start)
    return out


def _stmt_exprs(s) -> list:
    """(expr, kind) of what the skeleton evaluates in statement s (loops, branches and lets aside):
    mbarrier indices and values, and the indices of the shared views of TMA, wgmma and stores. The
    statements the skeleton does not execute contribute nothing."""
    out = []
    views: list = []
    if isinstance(s, ir.MbarrierOp):
        out += [(e, "exact") for e in _view_exprs(s.bar)]
        if s.value is not None:
            out.append((s.value, "parity" if s.kind == "wait" else "exact"))
        return out
    if isinstance(s, (ir.TmaLoad, ir.TmaLoadMulticast)):
        views = [s.dst, s.bar]
        if isinstance(s, ir.TmaLoadMulticast):
            out.append((s.mask, "exact"))
    elif isinstance(s, ir.MbarrierArriveCluster):
        views = [s.bar]
        out.append((s.cta, "exact"))
    elif isinstance(s, (ir.Store, ir.Stmatrix)):
        views = [s.dst]
    elif isinstance(s, ir.TmaStore):
        views = [s.src]
    elif isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma):
        views = [s.op.a, s.op.b]
    for v in views:
        if v.space == "shared":
            out += [(e, "exact") for e in _view_exprs(v)]
    return out


def occurrences(kernel: ir.Kernel) -> tuple[list, list]:
    """(occurrences, loops) of the kernel; raises Unsupported where a let is assigned again where it
    is visible or used outside its block (the skeleton's environment would then not be a substitution)."""
    occ: list = []
    loops: list = []

    def walk(body, scope, stack):
        scope = dict(scope)
        for s in body:
            if isinstance(s, ir.Let):
                if s.name in scope:  # (the same name in sibling branches is two lets, each in its scope)
                    raise Unsupported(f"'{s.name}' is assigned again where it is visible (line {_line(s)})")
                scope[s.name] = _subst(s.value, scope)
            elif isinstance(s, ir.For):
                lp = Loop(s, _subst(s.start, scope), _subst(s.stop, scope), tuple(stack))
                loops.append(lp)
                occ.append(Occurrence(lp.start, "exact", tuple(stack), lp.line, start_of=s))
                occ.append(Occurrence(lp.stop, "exact", tuple(stack), lp.line, s))
                inner = dict(scope)
                inner.pop(s.var, None)
                walk(s.body, inner, stack + [lp])
            elif isinstance(s, ir.If):
                occ.append(Occurrence(_subst(s.cond, scope), "truth", tuple(stack), _line(s)))
                walk(s.then, scope, stack)
                walk(s.orelse, scope, stack)
            else:
                for e, kind in _stmt_exprs(s):
                    occ.append(Occurrence(_subst(e, scope), kind, tuple(stack), _line(s)))

    walk(kernel.body, {}, [])
    return occ, loops


def _specials(e) -> set:
    return {x.which for x in ir.walk_iexpr(e) if isinstance(x, ir.ISpecial)}


def _sizes_in(e, kernel) -> set:
    return {x.name for x in ir.walk_iexpr(e) if isinstance(x, ir.IVar) and x.name in kernel.sizes}


# -- translating to Z3 ------------------------------------------------------------------------------


class World:
    """One assignment of the sizes (and of each loop's iteration index) as Z3 integers."""

    def __init__(self, kernel, tag: str, shared: dict | None = None):
        self.k = kernel
        self.sizes = {n: z3.Int(f"{n}@{tag}") for n in kernel.sizes}
        self.vars = dict(shared or {})  # names fixed across worlds (thread, block ids)
        self.consts = dict(kernel.consts)

    def facts(self) -> list:
        out = [z for v in self.sizes.values() for z in (v >= 1, v <= Z.MAX_SIZE)]
        for r in self.k.requires:
            out.append(self.expr(r, {}) != 0)
        return out

    def special(self, which: str):
        if which not in self.vars:
            self.vars[which] = z3.Int(f"{which}")
        return self.vars[which]

    def expr(self, e, env: dict):
        """e as a Z3 integer; env: loop variable name -> term."""
        if isinstance(e, ir.IConst):
            return Z.bv(e.value)
        if isinstance(e, ir.IVar):
            if e.name in env:
                return env[e.name]
            if e.name in self.sizes:
                return self.sizes[e.name]
            if e.name in self.consts:
                return Z.bv(self.consts[e.name])
            raise Unsupported(f"the name '{e.name}'")
        if isinstance(e, ir.ISpecial):
            if e.which == "thread_id":
                return self.special("thread_id")
            if e.which == "warp_id":
                return Z.floordiv(self.special("thread_id"), Z.bv(32))
            if e.which == "lane_id":
                return Z.mod(self.special("thread_id"), Z.bv(32))
            if e.which.startswith("num_blocks."):  # this world's grid
                return self.expr(self.k.grid["xyz".index(e.which[-1])], {})
            return self.special(e.which)
        if isinstance(e, ir.IUn):
            return semantics.INT_UNARY[e.op].z3(Z, self.expr(e.a, env))
        if isinstance(e, ir.ISelect):
            return Z.Ite(Z.i2b(self.expr(e.cond, env)), self.expr(e.a, env),
                         self.expr(e.b, env))
        if isinstance(e, ir.IBin):
            return semantics.INT_OPS[e.op].z3(Z, self.expr(e.a, env), self.expr(e.b, env))
        raise Unsupported(type(e).__name__)

    def trips(self, lp: Loop, env: dict):
        lo, hi = self.expr(lp.start, env), self.expr(lp.stop, env)
        return Z.smax(Z.bv(0), Z.cdiv(Z.sub(hi, lo), Z.bv(lp.node.step)))

    def env_for(self, loops: tuple, index: dict) -> tuple[dict, list]:
        """The loop variables of `loops` (outermost first) at iteration indices `index` (id -> term),
        and the facts that every index is inside its loop's trip count."""
        env: dict = {}
        facts = []
        for lp in loops:
            j = index[id(lp.node)]
            lo = self.expr(lp.start, env)
            facts += [j >= 0, j < self.trips(lp, env)]
            env = {**env, lp.node.var: Z.add(lo, Z.mul(Z.bv(lp.node.step), j))}
        return env, facts


def _same(kind: str, a, b):
    if kind == "parity":
        return Z.Eq(Z.mod(a, Z.bv(2)), Z.mod(b, Z.bv(2)))
    if kind == "truth":
        return Z.Eq(Z.i2b(a), Z.i2b(b))
    return Z.Eq(a, b)


def _bool(f):
    return z3.BoolVal(f) if isinstance(f, bool) else f


class _Context:
    """A Z3 context of the lemmas' own, and solvers in it that expand products over sums first.
    Its own context: Z3's arithmetic heuristics follow term ids, so the same query built in the shared
    context after other work (a long verify, a test suite) could cost a hundred times more; translated
    into a context that holds only one lemma's terms, it costs the same wherever it is built. Sums of
    monomials: a loop index remapped by the head (j - L past it) sits in products with sizes (KT * j),
    and the goals about it are linear in the monomials once the products are expanded."""

    def __init__(self):
        self.ctx = z3.Context()  # (about 10 ms: one per lemma, not one per goal)
        self.tactic = z3.Then(z3.With("simplify", som=True, push_ite_arith=True, ctx=self.ctx), "smt", ctx=self.ctx)

    def mine(self, terms) -> list:
        return [_bool(f).translate(self.ctx) for f in terms]

    def solver(self, *terms) -> z3.Solver:
        s = self.tactic.solver()
        s.set("rlimit", GOAL_RLIMIT)
        s.set("timeout", GOAL_TIMEOUT_MS)
        for part in terms:
            s.add(*part)
        return s


def _solver(facts: list) -> z3.Solver:
    """A solver holding `facts`, in a context of its own (`_Context`)."""
    c = _Context()
    return c.solver(c.mine(facts))


class Goals:
    """Facts, and goals that each follow from them, each goal checked in a solver of its own, in the
    lemma's own context (`_Context`): together, the goals of a persistent kernel take the solver past
    its limit, and in one solver reused through push and pop many do too, as Z3's incremental core
    skips the preprocessing that substitutes the fixed head."""

    def __init__(self, facts: list, goals: list):
        self.facts = facts
        self.goals = [_bool(g) for g in goals]
        self._context = None  # (made at the first check, with the facts and goals translated)

    def hold(self, *given) -> bool | None:
        """True: every goal follows from the facts and `given`; False: one is refuted; None: undecided."""
        if self._context is None:
            self._context = c = _Context()
            self._mine = (c.mine(self.facts), c.mine(z3.Not(g) for g in self.goals))
        c, (facts, negated) = self._context, self._mine
        given = c.mine(given)
        for not_g in negated:
            verdict = _verdict(c.solver(facts, given, [not_g]).check())
            if verdict is not True:  # (refuted, or undecided: either way not every goal holds)
                return verdict
        return True


def _unsat(facts: list, goal) -> bool | None:
    """True: facts imply goal (a goal or a list of goals) for every assignment; False: a
    counterexample; None: undecided."""
    return Goals(facts, goal if isinstance(goal, list) else [goal]).hold()


def _verdict(r) -> bool | None:
    """A lemma's verdict from the check of its negation (the lemmas' three values: a refuted lemma
    makes bounded results unknown, an undecided one makes the pumping argument unavailable)."""
    return True if r == z3.unsat else False if r == z3.sat else None


class _IntMode:
    """Build terms in zops' integer encoding, leaving its state as it was (the solver's queries
    share it)."""

    def __enter__(self):
        self.saved = (Z.MODE, Z._SINK, dict(Z._RANGE), dict(Z._DIVS), dict(Z.STATS))
        Z.set_mode("int")
        Z._SINK = None
        return self

    def __exit__(self, *exc):
        Z.MODE, Z._SINK = self.saved[0], self.saved[1]
        Z._RANGE.clear()
        Z._RANGE.update(self.saved[2])
        Z._DIVS.clear()
        Z._DIVS.update(self.saved[3])
        Z.STATS.update(self.saved[4])
        return False


def _thread_facts(kernel, w: World) -> list:
    t = w.special("thread_id")
    return [t >= 0, t < kernel.block]


def _block_facts(kernel, w: World, occ) -> list:
    """Block ids inside the grid of world w's sizes, where an occurrence names them (worlds share
    the block ids: a lemma compares one block's protocol under two sizes)."""
    out = []
    names = set().union(*(_specials(o.expr) for o in occ)) if occ else set()
    for axis, g in zip("xyz", kernel.grid, strict=False):
        if f"block_id.{axis}" in names:
            b = w.special(f"block_id.{axis}")
            out += [b >= 0, b < w.expr(g, {})]
    return out


# -- periodicity ------------------------------------------------------------------------------------


def period_of(kernel) -> int:
    depth = max([a.shape[0] for a in kernel.shared_allocs() if a.dtype == "i64" and len(a.shape) == 1] + [1])
    return 2 * depth


def _is_constant(lp: Loop, kernel) -> bool:
    """Whether a loop's bounds name no size, special or enclosing loop variable."""
    return not any(_sizes_in(e, kernel) or _specials(e) for e in (lp.start, lp.stop)) and not _loop_vars(lp, kernel)


def _periodic_checker(kernel, occ, lp: Loop, L: int):
    """A function (A, B) -> whether every occurrence inside loop lp is the same at iterations j and
    j + L for A <= j and j + L + B < trip count (the rest of the world fixed): the terms are built
    once, each (A, B) is one check of the same solver."""
    mine = [o for o in occ if any(x.node is lp.node for x in o.loops)]
    if not mine:
        return lambda A, B: True
    w = World(kernel, "p")
    head, tail = z3.Int("head!"), z3.Int("tail!")
    goals = []
    for o in mine:
        i1 = {id(x.node): z3.Int(f"j{n}@{o.line}") for n, x in enumerate(o.loops)}
        i2 = dict(i1)
        i2[id(lp.node)] = i1[id(lp.node)] + L
        env1, f1 = w.env_for(o.loops, i1)
        env2, f2 = w.env_for(o.loops, i2)
        outer_env, _ = w.env_for(lp.outer, i1)
        n = w.trips(lp, outer_env)
        j = i1[id(lp.node)]
        pre = Z.And(*f1, *f2, j >= head, j + L + tail < n)
        goals.append(Z.Implies(pre, _same(o.kind, w.expr(o.expr, env1), w.expr(o.expr, env2))))
    lemma = Goals([*w.facts(), *_thread_facts(kernel, w), *_block_facts(kernel, w, occ)], goals)
    return lambda A, B: lemma.hold(head == A, tail == B)


@attrs.frozen
class Periodic:
    """What `check_periodic` established, which `plan` builds on (not computed twice)."""

    heads: dict  # id(For) -> (A, B): the loop repeats outside its first A and last B iterations
    steps: dict  # size -> SizeStep (`_size_steps`)
    occ: list = attrs.field(eq=False, repr=False)  # the occurrences and loops (`occurrences`)
    loops: list = attrs.field(eq=False, repr=False)


def check_periodic(kernel, trip_bound: int) -> tuple[bool, str, Periodic | None]:
    """(True, "", Periodic) when every loop with a varying trip count is periodic outside a head of A
    and a tail of B iterations that the enumerated trip counts reach, and no size step that keeps the
    trip counts changes the protocol (lemma E, `_size_steps`); else (False, why, None)."""
    heads: dict = {}
    with _IntMode():
        try:
            occ, loops = occurrences(kernel)
        except Unsupported as e:
            return False, f"the protocol's integers are beyond the periodicity check ({e})", None
        L = period_of(kernel)
        for lp in loops:
            if _is_constant(lp, kernel):
                continue
            try:
                holds = _periodic_checker(kernel, occ, lp, L)
            except Unsupported as e:
                return False, f"the protocol's integers are beyond the periodicity check ({e})", None
            undecided = False
            for total in range(0, trip_bound + 1):
                verdicts = ((A, holds(A, total - A)) for A in range(0, total + 1))
                found = None
                for A, v in verdicts:
                    undecided |= v is None
                    if v:
                        found = (A, total - A)
                        break
                if found:
                    heads[id(lp.node)] = found
                    break
            else:
                if undecided:
                    return False, (f"the solver did not decide whether the loop at line {lp.line} repeats with "
                                   f"period {L} outside its first and last {trip_bound} iterations"), None
                return False, (f"the loop at line {lp.line} does not repeat with period {L} outside its first and "
                               f"last {trip_bound} iterations (the protocol depends on the iteration in a way the "
                               f"runs up to {trip_bound} trips do not show)"), None
        steps = _size_steps(kernel, occ, loops)
    why = _refuted_step(steps)
    if why:
        return False, why + ": the runs of bounded sizes are no evidence for the rest", None
    return True, "", Periodic(heads, steps, occ, loops)


# -- the pumping argument ---------------------------------------------------------------------------


@attrs.frozen
class Pump:
    loop: Loop
    size: str
    delta: int  # the size's growth that adds L iterations
    quantum: int
    heads: tuple  # candidate heads A (the fixed point is looked for at one of them; lemma P holds for the
    # first, `head_holds` proves it for the one the runs choose)
    B: int
    L: int
    lemmas: object = attrs.field(eq=False, repr=False, default=None)  # (A, B) -> shrinking and lemma P hold
    witness: str = ""  # by trip counts (smt/protocol_pump_trips.py): the shrinking witness, e.g. "block_id.x + 792"

    @property
    def trips_run(self) -> int:
        """Every trip count below this one is run: each head's base range [A + L + B, A + 2L + B)."""
        return max(self.heads) + 2 * self.L + self.B


@attrs.frozen
class Plan:
    pumps: tuple
    combos: tuple  # size vectors to run; the trip counts each pumped loop gets in them
    fixpoints: tuple  # per combo: {id(For): (first, last)}: the iterations whose states are recorded
    blocks: tuple = ()  # per combo: {block id: value} (by trip counts; else block 0)
    prefix: tuple = ()  # (Loop, tail): runs that differ in its trip count alone share its iterations
    # below their trip count less the tail (protocol_pump_trips.prefix_tail)


def trip_value(lp: Loop, sizes: dict, consts: dict) -> int:
    env = {**consts, **sizes}
    lo, hi = ir.eval_int(lp.start, env), ir.eval_int(lp.stop, env)
    return max(0, -(-(hi - lo) // lp.node.step))


def plan(kernel: ir.Kernel, base: dict, periodic: Periodic, probe=None) -> tuple[Plan | None, str, bool]:
    """(the pumping argument's runs for `kernel`, "", False), or (None, why it does not apply, whether
    a lemma was refuted: a longer loop changes the protocol, which bounded runs do not show).
    `periodic`: what `check_periodic` established (each varying loop's head and tail, where lemma P
    is looked for; each size's step and lemma E). `probe`: see protocol_pump_trips.plan_by_trips."""
    with _IntMode():
        try:
            return _plan(kernel, base, periodic, probe)
        except Unsupported as e:
            return None, f"the protocol's integers are beyond the pumping argument ({e})", False
        except (KeyError, ZeroDivisionError) as e:
            return None, f"the pumping argument could not evaluate a trip count ({e})", False


def _plan(kernel, base, periodic: Periodic, probe=None):
    occ, loops = periodic.occ, periodic.loops
    consts = dict(kernel.consts)
    blocky = sorted({w for o in occ for w in _specials(o.expr)} - set(ir.PER_THREAD_SPECIALS))
    if blocky:
        return _by_trips(kernel, base, periodic, probe, f"the protocol depends on the block ({blocky[0]})")
    L = period_of(kernel)
    varying = [lp for lp in loops if not _is_constant(lp, kernel)]
    owner: dict = {}
    for lp in varying:
        names = _sizes_in(lp.start, kernel) | _sizes_in(lp.stop, kernel)
        if _loop_vars(lp, kernel) or len(names) != 1:
            return _by_trips(kernel, base, periodic, probe,
                             f"the trip count of the loop at line {lp.line} depends on more than one size")
        (z,) = names
        if z in owner:
            return _by_trips(kernel, base, periodic, probe, f"'{z}' sets the trip counts of two loops")
        owner[z] = lp
    quanta = {}
    for z in kernel.sizes:
        step = periodic.steps[z]
        if step.q is None or not _in_one_class(kernel, z, step.q, base):
            return None, f"the admissible values of '{z}' are not one arithmetic progression", False
        quanta[z] = step.q
        if not step.invisible:  # (undecided: a refuted step fails check_periodic, before any plan)
            return None, f"the solver did not decide whether a step of '{z}' changes the protocol", False
    pumps = []
    for z, lp in owner.items():
        p, undecided = _pump(kernel, occ, loops, lp, z, quanta[z], L, base, periodic.heads.get(id(lp.node), (0, 0)))
        if p is None:
            if undecided:
                return None, f"the solver did not decide whether the loop at line {lp.line} repeats as '{z}' grows", \
                    False
            return None, f"the loop at line {lp.line} does not repeat with period {L} as '{z}' grows", True
        pumps.append(p)
    # the base runs: every trip count below A + 2L + B of each pumped loop, one size vector each
    per = []
    for p in pumps:
        vals = _values_by_trips(kernel, p, base, consts, periodic.steps[p.size].least)
        if vals is None:
            return None, f"no admissible '{p.size}' gives some trip count below {p.trips_run}", False
        per.append(vals)
    total = math.prod(len(v) for v in per) if per else 1
    if total > MAX_BASE_RUNS:
        return None, f"the pumping argument would need {total} runs (at most {MAX_BASE_RUNS})", False
    combos, fixpoints = [], []
    for pick in itertools.product(*per):  # (one empty pick where nothing is pumped)
        sizes = dict(base)
        fp = {}
        for p, (value, trips) in zip(pumps, pick, strict=True):
            sizes[p.size] = value
            if trips > min(p.heads) + p.L:
                fp[id(p.loop.node)] = (min(p.heads), max(p.heads) + p.L, p.L)
        combos.append(sizes)
        fixpoints.append(fp)
    return Plan(tuple(pumps), tuple(combos), tuple(fixpoints)), "", False


def _by_trips(kernel, base, periodic: Periodic, probe, why: str):
    """Where the lemmas for steps of one size do not apply, the argument stated over trip counts
    (smt/protocol_pump_trips.py)."""
    from argus_verify.smt.protocol_pump_trips import plan_by_trips

    if probe is None:
        return None, f"{why}; the argument over trip counts is not tried where a run found a violation", False
    pl, why_not, refuted = plan_by_trips(kernel, base, periodic, probe)
    if pl is None:
        return None, f"{why}; by trip counts: {why_not}", refuted
    return pl, "", False


def _loop_vars(lp: Loop, kernel) -> set:
    """The loop variables (of enclosing loops) that a loop's bounds name."""
    consts = dict(kernel.consts)
    return {x.name for e in (lp.start, lp.stop) for x in ir.walk_iexpr(e)
            if isinstance(x, ir.IVar) and x.name not in kernel.sizes and x.name not in consts}


def _step_of(kernel, z: str, least: int) -> int | None:
    """The smallest q such that z +- q is admissible whenever z is, whatever the other sizes (the step
    down where it stays at or above `least`, z's least admissible value: `requires K >= 256` keeps
    K's step)."""
    w = World(kernel, "q")
    v = w.sizes[z]
    facts = w.facts()
    for q in QUANTA:
        up_w = World(kernel, f"u{q}")
        up_w.sizes = {**w.sizes, z: v + q}
        down_w = World(kernel, f"d{q}")
        down_w.sizes = {**w.sizes, z: v - q}
        closed = Z.And(Z.Implies(v + q <= Z.MAX_SIZE, Z.And(*up_w.facts())),
                       Z.Implies(v - q >= least, Z.And(*down_w.facts())))
        if _unsat(facts, closed):
            return q
    return None


def _least(kernel, z: str) -> int:
    """The least value of z that `requires` admits for some sizes, proved a lower bound for all of
    them (1 where the solver does not settle it: the step down is then checked from 1, as without a
    bound)."""
    w = World(kernel, "lb")
    v = w.sizes[z]
    opt = z3.Optimize()
    opt.set("rlimit", GOAL_RLIMIT)
    opt.add(*w.facts())
    opt.minimize(v)
    if opt.check() != z3.sat:
        return 1
    least = opt.model().eval(v, model_completion=True).as_long()
    return least if least > 1 and _unsat(w.facts(), v >= least) else 1


def _in_one_class(kernel, z: str, q: int, base: dict) -> bool:
    """Every admissible z is congruent to base[z] modulo q (with `_step_of`'s q: the spacing of z's
    admissible values, so that steps connect any two admissible size vectors, one size at a time)."""
    v = World(kernel, "q")
    return bool(_unsat(v.facts(), Z.Eq(Z.mod(v.sizes[z], Z.bv(q)), Z.bv(base[z] % q))))


def _shifted(kernel, w: World, z: str, delta, tag: str) -> World:
    x = World(kernel, tag, w.vars)
    x.sizes = {**w.sizes, z: w.sizes[z] + delta}
    return x


def _occurrence_pairs(occ, w1: World, w2: World, remap=None):
    """For every occurrence: (facts that its loop indices are valid in both worlds, value in w1,
    value in w2). `remap(o, index2) -> index1` maps w2's loop indices to w1's (default: the same)."""
    out = []
    for n, o in enumerate(occ):
        i2 = {id(x.node): z3.Int(f"j{k}.{n}") for k, x in enumerate(o.loops)}
        i1 = remap(o, i2) if remap else dict(i2)
        env1, f1 = w1.env_for(o.loops, i1)
        env2, f2 = w2.env_for(o.loops, i2)
        out.append((f1 + f2, o, w1.expr(o.expr, env1), w2.expr(o.expr, env2)))
    return out


def _invisible(kernel, occ, loops, z: str, q: int) -> bool | None:
    """Lemma E: z -> z + q with every trip count unchanged changes no occurrence (None: undecided)."""
    w1 = World(kernel, "e1")
    w2 = _shifted(kernel, w1, z, q, "e2")
    facts = w1.facts() + w2.facts() + _thread_facts(kernel, w1) + _block_facts(kernel, w1, occ) + \
        _block_facts(kernel, w2, occ)
    same_trips = [lp for lp in loops if not _loop_vars(lp, kernel)]  # (the others' bounds: compared below)
    facts += [w1.trips(lp, {}) == w2.trips(lp, {}) for lp in same_trips]
    # (the stop of such a loop matters through its trip count alone)
    skip = {id(lp.node) for lp in same_trips}
    goals = [Z.Implies(Z.And(*f), _same(o.kind, a, b)) for f, o, a, b in _occurrence_pairs(occ, w1, w2)
             if o.stop_of is None or id(o.stop_of) not in skip]
    return _unsat(facts, goals)


@attrs.frozen
class SizeStep:
    """A size's admissible values as `requires` spaces them, and lemma E for its step."""

    least: int  # the least admissible value (`_least`)
    q: int | None  # the step (`_step_of`); None: not evenly spaced
    invisible: bool | None  # lemma E's verdict for the step; None: undecided, or no step


def _size_steps(kernel, occ, loops) -> dict:
    """size -> SizeStep, lemma E with the block ids quantified."""
    out = {}
    for z in kernel.sizes:
        least = _least(kernel, z)
        q = _step_of(kernel, z, least)
        try:
            invisible = None if q is None else _invisible(kernel, occ, loops, z, q)
        except Unsupported:
            invisible = None  # an occurrence the lemma cannot translate: undecided
        out[z] = SizeStep(least, q, invisible)
    return out


def _refuted_step(steps: dict) -> str:
    """Why the bounded runs are no evidence, where lemma E is refuted for a size whose admissible values
    are spaced evenly (a threshold on the sizes that runs of small sizes miss); "" where none is (an
    undecided lemma, or a size without a step, is left to the runs)."""
    for z, step in steps.items():
        if step.invisible is False:
            return f"a step of '{z}' that leaves every trip count changes the protocol"
    return ""


def _pump(kernel, occ, loops, lp: Loop, z: str, q: int, L: int, base: dict,
          periodic: tuple) -> tuple[Pump | None, bool]:
    """(lemmas P and shrinking for loop lp and size z, proved for a head and tail near `periodic`, or
    None; whether a lemma was left undecided)."""
    undecided = False
    consts = dict(kernel.consts)
    # the growth of z that adds L iterations: candidates read off concrete values, then proved for all
    sizes = dict(base)
    n0 = trip_value(lp, sizes, consts)
    w1 = World(kernel, "s1")
    facts = w1.facts() + _thread_facts(kernel, w1)
    n1 = w1.trips(lp, {})
    delta = None
    for c in range(1, 1 << 14):
        sizes[z] = base[z] + c * q
        n = trip_value(lp, sizes, consts)
        if n - n0 > L:
            break
        if n - n0 < L:
            continue
        w2 = _shifted(kernel, w1, z, c * q, "s2")
        grows = _unsat(facts, Z.Implies(Z.And(*w2.facts()), w2.trips(lp, {}) == n1 + L))
        undecided |= grows is None
        if grows:
            delta = c * q
            break
    if delta is None:
        return None, undecided
    w2 = _shifted(kernel, w1, z, delta, "s2")
    mono = _shifted(kernel, w1, z, q, "m")
    monotone = _unsat(facts + mono.facts(), mono.trips(lp, {}) >= n1)
    if not monotone:
        return None, monotone is None
    a0, b0 = periodic  # the duplication needs at least the periodic head and tail; a little more at most
    b0 = max(b0, 1)  # (the base runs then reach iteration A + L, where the fixed point is compared)
    lemmas = _lemma_checker(kernel, occ, lp, z, delta, L, w1, w2)
    for A, B in sorted(((a0 + i, b0 + j) for i in range(3) for j in range(3)), key=sum):
        verdict = lemmas(A, B)
        undecided |= verdict is None
        if verdict:
            # later heads are candidates too (proved once the runs show where the state settles)
            return Pump(lp, z, delta, q, tuple(range(A, A + L + 1)), B, L, lemmas), False
    return None, undecided


def head_holds(kernel, p: Pump, head: int) -> bool:
    """Lemmas P and shrinking for head `head` of pump p (the first head is proved by `plan`)."""
    return head == p.heads[0] or bool(p.lemmas(head, p.B))


def _lemma_checker(kernel, occ, lp: Loop, z: str, delta: int, L: int, w1: World, w2: World):
    """A function (A, B) -> whether, for head A and tail B of loop lp (the terms built once, two
    checks for each (A, B)):
    * shrinking: every admissible size vector whose loop lp runs at least A + 2L + B times has an
      admissible one with z smaller by delta and L fewer trips;
    * lemma P: where lp runs at least A + L + B times in w1, w2 (z grown by delta: L more trips) is
      w1 with lp's iterations [A, A + L) repeated once."""
    head, tail = z3.Int("head!"), z3.Int("tail!")
    key = id(lp.node)
    n1 = w1.trips(lp, {})
    base = w1.facts() + _thread_facts(kernel, w1)
    w3 = _shifted(kernel, w1, z, -delta, "s3")
    shrink = Goals([*base, n1 >= head + 2 * L + tail], [Z.And(*w3.facts(), w3.trips(lp, {}) == n1 - L)])

    def remap(o, i2):
        i1 = dict(i2)
        if any(x.node is lp.node for x in o.loops):
            j2 = i2[key]
            i1[key] = Z.Ite(j2 < head + L, j2, j2 - L)
        return i1

    # (lp's stop differs: its trip count grows by L, which `_pump` proved)
    goals = [Z.Implies(Z.And(*f), _same(o.kind, a, b)) for f, o, a, b in _occurrence_pairs(occ, w1, w2, remap)
             if o.stop_of is not lp.node]
    dup = Goals([*base, *w2.facts(), n1 >= head + L + tail], goals)

    def holds(A: int, B: int) -> bool | None:
        verdict = shrink.hold(head == A, tail == B)
        return dup.hold(head == A, tail == B) if verdict else verdict

    return holds


def _values_by_trips(kernel, p: Pump, base: dict, consts: dict, least: int):
    """[(value of p.size, trip count)] with one admissible value per trip count below p.trips_run
    (every reachable one: the trip count does not decrease as the size grows by its quantum), from
    `least`, p.size's least admissible value."""
    from argus_verify.smt.protocol import _admissible

    want = p.trips_run
    out: dict = {}
    v = next((x for x in range(least, least + p.quantum) if _admissible(kernel, {**base, p.size: x})), None)
    if v is None:
        return None
    while True:
        sizes = {**base, p.size: v}
        n = trip_value(p.loop, sizes, consts)
        if n >= want:
            break
        out.setdefault(n, v)
        v += p.quantum
        if v > Z.MAX_SIZE:
            return None
    return [(value, n) for n, value in sorted(out.items())]


# -- the state the fixed point compares -------------------------------------------------------------

# Skeleton attributes, by what they are. A new attribute must be classified here (a test checks).
STATE = ("bars", "tmas", "phase_tx", "inflight_reads", "open", "groups", "pending_acc", "unfenced", "generic",
         "published", "retired_unpublished", "releases_open", "releases_done", "bulk", "unacquired")
CONSTANT = ("k", "T", "sizes", "tids", "allocs", "names", "gemm", "block", "grid", "pump_checks", "snap_loop")
MESSAGES_OR_DATA = ("trips", "loop", "tag", "acc_rec", "writes", "stored", "tag_unknown", "active",
                    "pump_seen", "snapshots")
# keys of the records in flight that only name where something happened (messages) or carry data
_DROP = frozenset({"loop", "wait_loop", "tags", "phase", "off", "issuer"})


def _digest(x, h) -> None:
    """Feed a canonical form of x to the hash h: dictionaries in key order (keys in _DROP left out),
    arrays by shape, type and content (booleans packed; integers as their one value, or narrowed to a
    byte where every value fits), spans by line and column."""
    if isinstance(x, dict):
        h.update(b"{")
        for k in sorted(x, key=str):
            if k not in _DROP:
                _digest(k, h)
                _digest(x[k], h)
        h.update(b"}")
    elif isinstance(x, (list, tuple)):
        h.update(b"[%d" % len(x))
        for v in x:
            _digest(v, h)
        h.update(b"]")
    elif isinstance(x, (set, frozenset)):
        h.update(b"(")
        for v in sorted(x, key=repr):
            _digest(v, h)
        h.update(b")")
    elif isinstance(x, np.ndarray):
        h.update(f"a{x.shape}{x.dtype}".encode())
        if x.dtype == bool:
            h.update(np.packbits(x).tobytes())
        elif x.dtype.kind in "iu" and x.size > 64:
            # (the shared-memory books are large and mostly one value: hashing them whole dominated)
            lo, hi = int(x.min()), int(x.max())
            if lo == hi:
                h.update(b"c%d;" % lo)
            elif -128 <= lo and hi <= 127:
                h.update(b"b" + x.astype(np.int8).tobytes())
            else:
                h.update(b"w" + np.ascontiguousarray(x).tobytes())
        else:
            h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, Span):
        h.update(f"s{x.line}:{x.col}".encode())
    elif isinstance(x, (bool, np.bool_)):
        h.update(b"T" if x else b"F")
    elif isinstance(x, (int, np.integer)):
        h.update(b"i%d;" % int(x))
    elif isinstance(x, str):
        h.update(b"t%d:" % len(x) + x.encode())
    elif x is None:
        h.update(b"N")
    else:
        raise TypeError(f"fingerprint: {type(x).__name__}")


def fingerprint(sk) -> bytes:
    """Everything the skeleton's protocol rules read later, as a digest (SHA-256 of its canonical form)."""
    # (renamed: "phase" in the records in flight is a message, which _digest leaves out)
    bars = {name: {("parity" if k == "phase" else k): (v % 2 if k == "phase" else v) for k, v in b.items()}
            for name, b in sk.bars.items()}
    phase_tx = {k: (v["exp"], v["issued"], v["landed"], tuple(s for s, _ in v["spans"]))
                for k, v in sk.phase_tx.items()}
    pending = {k: span for k, (span, _) in sk.pending_acc.items()}
    bulk = None
    if sk.bulk is not None:
        bulk = (sk.bulk.open, sk.bulk.groups, sk.bulk.released, sk.bulk.unpublished)
    # (an empty list of releases reads as no entry: the rules look them up with .get(key, ()))
    releases = [{k: v for k, v in d.items() if v} for d in (sk.releases_open, sk.releases_done)]
    parts = [bars, sk.tmas, phase_tx, sk.inflight_reads, sk.open, sk.groups, pending, sk.unfenced, sk.generic,
             sk.published, sk.retired_unpublished, *releases, bulk, sk.unacquired]
    h = hashlib.sha256()
    _digest(parts, h)
    return h.digest()
