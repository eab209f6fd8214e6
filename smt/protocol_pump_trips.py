"""The pumping argument stated over trip counts, for kernels whose protocol depends on the block or
whose loops' trip counts depend on several sizes: a persistent grid's tile loop
`range(block_id.x, TM * TN, SMS)`, where smt/protocol_pump.py's lemmas, stated for a step of one size,
do not apply (no step of M adds exactly L tiles to every block).

A *world* is an assignment of the sizes (1..MAX_SIZE, meeting `requires`) and of the block ids (any
value >= 0: blocks past the grid are worlds too; their occurrences are the same integer functions, so
they only add cases to what is proved, and they give the tile loop's shrinking witness below). Every
block of every admissible launch is a world. Z3 proves, for all worlds and threads:

* D: two worlds whose varying loops have the same trip counts have the same occurrences at every
  iteration (the loops' own bounds aside: the skeleton reads those only through the trip count). So
  a world's skeleton run, and with it every protocol finding, is fixed by its trip-count vector.
* for each varying loop X, a *shrinking witness* (one size smaller by a constant, or one block id
  larger by a constant: `block_id.x + L * SMS` for the grid-stride loop), a head A and a tail B: for
  every world w where X runs at least A + 2L + B times, the witness w' is a world, X runs L fewer times
  in w' and every other loop as often, and w's occurrences are those of w' with X's iterations
  [A, A + L) repeated once at each execution of X.

The skeleton then runs one world for each trip-count vector of the box (every loop below
A + 2L + B) that some world has: found by search, or as a Z3 model; a vector Z3 proves no world has
is skipped, one it does not settle makes the argument unavailable. In the runs where X has at least
A + L + B trips it checks the state at iteration A + L of each execution of X against the state at A
(smt/protocol_pump.fingerprint). By induction on the trip counts beyond the box every world's run is
a box run with periods repeated that leave the state where it was: it meets the same states and
findings. A query the solver does not settle makes the argument unavailable, never a proof.
"""

from __future__ import annotations

import itertools
import math

import attrs
import z3

from argus_verify import ir
from argus_verify.smt import zops as Z
from argus_verify.smt.protocol_pump import (
    MAX_BASE_RUNS,
    Goals,
    Loop,
    Plan,
    Pump,
    World,
    _is_constant,
    _loop_vars,
    _occurrence_pairs,
    _same,
    _solver,
    _specials,
    _thread_facts,
    period_of,
)

BLOCK_IDS = ("block_id.x", "block_id.y", "block_id.z")
MAX_BLOCK = 1 << 24  # where the search for a world looks for block ids (the lemmas take every value >= 0)


def _names_of(lp: Loop, kernel) -> tuple[set, set]:
    """(sizes, block ids) a loop's bounds name."""
    sizes, blocks = set(), set()
    for e in (lp.start, lp.stop):
        for x in ir.walk_iexpr(e):
            if isinstance(x, ir.IVar) and x.name in kernel.sizes:
                sizes.add(x.name)
            elif isinstance(x, ir.ISpecial) and x.which in BLOCK_IDS:
                blocks.add(x.which)
            elif isinstance(x, ir.ISpecial) and x.which.startswith("num_blocks."):
                g = kernel.grid["xyz".index(x.which[-1])]
                sizes |= {y.name for y in ir.walk_iexpr(g) if isinstance(y, ir.IVar) and y.name in kernel.sizes}
    return sizes, blocks


def _world(kernel, tag: str, thread) -> World:
    """A world of its own sizes and block ids, sharing the thread with the others."""
    w = World(kernel, tag, {"thread_id": thread})
    for b in BLOCK_IDS:
        w.vars[b] = z3.Int(f"{b}@{tag}")
    return w


def _facts(kernel, w: World) -> list:
    return w.facts() + [w.vars[b] >= 0 for b in BLOCK_IDS]


def _shifted(kernel, w: World, witness: tuple, tag: str) -> World:
    kind, name, by = witness
    x = _world(kernel, tag, w.vars["thread_id"])
    x.sizes = dict(w.sizes)
    x.vars.update({b: w.vars[b] for b in BLOCK_IDS})
    if kind == "size":
        x.sizes[name] = w.sizes[name] + by
    else:
        x.vars[name] = w.vars[name] + by
    return x


def _compared(occ, varying: list) -> list:
    """The occurrences the lemmas compare: all but the bounds of the varying loops (their trip counts
    are compared instead; the skeleton reads a loop variable only through other occurrences)."""
    nodes = {id(lp.node) for lp in varying}
    out = []
    for o in occ:
        own = o.stop_of if o.stop_of is not None else o.start_of
        if own is not None and id(own) in nodes:
            continue
        out.append(o)
    return out


def _pairs(occ, w1: World, w2: World, remap=None) -> list:
    """Per occurrence: (its loop indices valid in both worlds) -> (its value in w2 at the indices
    equals w1's at remap(indices))."""
    return [Z.Implies(Z.And(*f), _same(o.kind, a, b)) for f, o, a, b in _occurrence_pairs(occ, w1, w2, remap)]


def _determined(kernel, occ, varying) -> bool | None:
    """Lemma D: the same trip counts, the same occurrences (None: undecided)."""
    t = z3.Int("thread_id")
    w1, w2 = _world(kernel, "d1", t), _world(kernel, "d2", t)
    facts = _facts(kernel, w1) + _facts(kernel, w2) + _thread_facts(kernel, w1)
    facts += [w1.trips(lp, {}) == w2.trips(lp, {}) for lp in varying]
    return Goals(facts, _pairs(_compared(occ, varying), w1, w2)).hold()


def _witnesses(kernel, lp: Loop, L: int, steps: dict) -> list:
    """Candidate shrinking witnesses of loop lp: a block id of its bounds larger by L loop steps (the
    grid-stride loop), and each size of its bounds smaller by the growth that takes L trips off at
    the base sizes (read off concrete values, proved for all worlds by the lemmas)."""
    sizes, blocks = _names_of(lp, kernel)
    out = [("block", b, L * abs(lp.node.step)) for b in sorted(blocks)]
    for z in sorted(sizes):
        q = steps[z].q if z in steps else None
        if q is None:
            continue
        least = steps[z].least
        base = {n: max(steps[n].least, 1) if n in steps else 1 for n in kernel.sizes}
        try:
            n0 = _trips(lp, base, {}, kernel)
        except (KeyError, ZeroDivisionError):
            continue
        for c in range(1, 1 << 12):
            try:
                n = _trips(lp, {**base, z: least + c * q}, {}, kernel)
            except (KeyError, ZeroDivisionError):
                break
            if n - n0 >= L:
                if n - n0 == L:
                    out.append(("size", z, -c * q))
                break
    return out


def _checker(kernel, occ, varying, lp: Loop, witness: tuple, L: int):
    """(A, B) -> whether the shrinking witness works for loop lp with head A and tail B: for every
    world w2 where lp runs at least A + 2L + B times, w1 = the witness of w2 is a world, lp runs L
    fewer times in it and every other loop as often (shrink), and w2's occurrences are w1's with
    lp's iterations [A, A + L) repeated once (dup). The terms are built once; two checks per (A, B)."""
    head, tail = z3.Int("head!"), z3.Int("tail!")
    t = z3.Int("thread_id")
    w2 = _world(kernel, "g2", t)
    w1 = _shifted(kernel, w2, witness, "g1")
    n2 = w2.trips(lp, {})
    base = _facts(kernel, w2) + _thread_facts(kernel, w2) + [n2 >= head + 2 * L + tail]
    same = [w1.trips(y, {}) == w2.trips(y, {}) for y in varying if y.node is not lp.node]
    shrink = Goals(base, [Z.And(*_facts(kernel, w1), w1.trips(lp, {}) == n2 - L, *same)])
    key = id(lp.node)

    def remap(o, i2):
        i1 = dict(i2)
        if key in i2:
            j2 = i2[key]
            i1[key] = Z.Ite(j2 < head + L, j2, j2 - L)
        return i1

    dup = Goals(base + _facts(kernel, w1) + [w1.trips(lp, {}) == n2 - L] + same,
                _pairs(_compared(occ, varying), w1, w2, remap))

    def holds(A: int, B: int) -> bool | None:
        verdict = shrink.hold(head == A, tail == B)
        return dup.hold(head == A, tail == B) if verdict else verdict

    return holds


def prefix_tail(kernel, occ, varying, lp: Loop, tails) -> int | None:
    """The prefix lemma for loop lp, a statement of the kernel's body: the first tail B in `tails` such
    that, for all worlds w1 and w2 whose other loops run as often and where lp runs n1 <= n2 times,
    the occurrences before lp, and those of lp's iterations below n1 - B, are the same in both. A run
    of w1 then meets the states of w2's run up to the start of lp's iteration n1 - B, and may start
    from there (`Skeleton.resume`). None: no tail proved."""
    if lp.outer or not any(x is lp.node for x in kernel.body):
        return None
    at = next(n for n, o in enumerate(occ) if o.start_of is lp.node)
    mine = [o for n, o in enumerate(_compared(occ, varying))
            if any(x.node is lp.node for x in o.loops) or occ.index(o) < at]
    t = z3.Int("thread_id")
    w1, w2 = _world(kernel, "p1", t), _world(kernel, "p2", t)
    n1, n2 = w1.trips(lp, {}), w2.trips(lp, {})
    facts = _facts(kernel, w1) + _facts(kernel, w2) + _thread_facts(kernel, w1) + [n1 <= n2]
    facts += [w1.trips(y, {}) == w2.trips(y, {}) for y in varying if y.node is not lp.node]
    key = id(lp.node)
    tail = z3.Int("tail!")
    goals = []
    for n, o in enumerate(mine):
        i = {id(x.node): z3.Int(f"j{k}.{n}") for k, x in enumerate(o.loops)}
        env1, f1 = w1.env_for(o.loops, i)
        env2, f2 = w2.env_for(o.loops, i)
        pre = f1 + f2 + ([i[key] < n1 - tail] if key in i else [])
        goals.append(Z.Implies(Z.And(*pre), _same(o.kind, w1.expr(o.expr, env1), w2.expr(o.expr, env2))))
    lemma = Goals(facts, goals)
    return next((B for B in tails if lemma.hold(tail == B)), None)


def _trips(lp: Loop, sizes: dict, block: dict, kernel) -> int:
    """lp's trip count in the world (sizes, block ids) on the host."""
    env = {**dict(kernel.consts), **sizes}
    lo, hi = (ir.eval_int(_fix(e, block, kernel, env), env) for e in (lp.start, lp.stop))
    return max(0, -(-(hi - lo) // lp.node.step))


def _fix(e, block: dict, kernel, env):
    """e with the block ids and grid extents replaced by their values."""
    if isinstance(e, ir.ISpecial):
        if e.which in BLOCK_IDS:
            return ir.IConst(int(block.get(e.which, 0)))
        if e.which.startswith("num_blocks."):
            return ir.IConst(max(1, ir.eval_int(kernel.grid["xyz".index(e.which[-1])], env)))
        raise KeyError(e.which)
    if isinstance(e, ir.IBin):
        return ir.IBin(e.op, _fix(e.a, block, kernel, env), _fix(e.b, block, kernel, env))
    if isinstance(e, ir.IUn):
        return ir.IUn(e.op, _fix(e.a, block, kernel, env))
    if isinstance(e, ir.ISelect):
        return ir.ISelect(*(_fix(x, block, kernel, env) for x in (e.cond, e.a, e.b)))
    return e


def trips_of(loops, sizes: dict, block: dict, kernel) -> tuple:
    return tuple(_trips(lp, sizes, block, kernel) for lp in loops)


def _admissible(kernel, sizes: dict) -> bool:
    try:
        return all(1 <= v <= Z.MAX_SIZE for v in sizes.values()) and \
            all(ir.eval_int(r, {**dict(kernel.consts), **sizes}) for r in kernel.requires)
    except (KeyError, ZeroDivisionError):
        return False


def _search(kernel, varying, box: list, base: dict, steps: dict) -> dict:
    """Worlds for trip-count vectors of the box, found on the host. The loops fall into groups that
    share no variable of their bounds; within a group, from the base sizes and block 0, each variable
    is moved alone (a binary search for each wanted trip count, where the count grows or falls with
    the variable); the groups' findings are then combined, and each combination is checked by
    evaluation. {vector: (sizes, block)}."""
    names = []
    for lp in varying:
        s, b = _names_of(lp, kernel)
        names.append({("size", z) for z in s} | {("block", x) for x in b})
    groups: list = []  # [(loop indices, variables)]
    for k, mine in enumerate(names):
        joined = [g for g in groups if g[1] & mine]
        for g in joined:
            groups.remove(g)
        groups.append(({k, *(i for g in joined for i in g[0])}, mine.union(*(g[1] for g in joined))))
    per_group = []
    for loop_ids, variables in groups:
        ids = sorted(loop_ids)
        found: dict = {}  # sub-vector -> {variable: value}

        def visit(assign, ids=ids, found=found):
            sizes, block = _apply(base, assign)
            if not _admissible(kernel, sizes):
                return None
            try:
                v = trips_of(varying, sizes, block, kernel)
            except (KeyError, ZeroDivisionError):
                return None
            found.setdefault(tuple(v[i] for i in ids), dict(assign))
            return v

        visit({})
        for var in sorted(variables):
            kind, name = var
            if kind == "size":
                q = steps[name].q or 1
                lo = next((x for x in range(steps[name].least, steps[name].least + q)
                           if _admissible(kernel, {**base, name: x})), None)
                if lo is None:
                    continue
                count = (Z.MAX_SIZE - lo) // q

                def at(i, var=var, lo=lo, q=q):
                    return {var: lo + i * q}
            else:
                count = MAX_BLOCK

                def at(i, var=var):
                    return {var: i}
            for k in ids:
                for target in range(box[k]):
                    _bisect(lambda i, at=at: visit(at(i)), k, target, count)
        per_group.append((ids, found))
    out: dict = {}
    for vector in itertools.product(*(range(n) for n in box)):
        assign: dict = {}
        for ids, found in per_group:
            part = found.get(tuple(vector[i] for i in ids))
            if part is None:
                break
            assign.update(part)
        else:
            sizes, block = _apply(base, assign)
            try:
                if _admissible(kernel, sizes) and trips_of(varying, sizes, block, kernel) == vector:
                    out[vector] = (sizes, block)
            except (KeyError, ZeroDivisionError):
                pass
    return out


def _apply(base: dict, assign: dict) -> tuple[dict, dict]:
    sizes, block = dict(base), {}
    for (kind, name), v in assign.items():
        (sizes if kind == "size" else block)[name] = v
    return sizes, block


def _bisect(probe, k: int, target: int, count: int) -> None:
    """Look for an index in [0, count] whose world gives loop k `target` trips, assuming its trip count
    is monotone in the index (a wrong assumption only makes the search miss)."""
    lo_v, hi_v = probe(0), probe(count)
    if lo_v is None or hi_v is None:
        return
    rising = hi_v[k] >= lo_v[k]
    lo, hi = 0, count
    while lo <= hi:
        mid = (lo + hi) // 2
        v = probe(mid)
        if v is None:
            return
        if v[k] == target:
            return
        if (v[k] < target) == rising:
            lo = mid + 1
        else:
            hi = mid - 1


def _model_world(kernel, varying, vector: tuple) -> tuple | None | bool:
    """A world with the given trip counts from Z3 ((sizes, block)), False where Z3 proves there is
    none, None where it does not settle it."""
    w = _world(kernel, "r", z3.Int("thread_id"))
    trips = [w.trips(lp, {}) == n for lp, n in zip(varying, vector, strict=True)]
    s = _solver([*_facts(kernel, w), *[w.vars[b] <= MAX_BLOCK for b in BLOCK_IDS], *trips])
    r = s.check()
    if r == z3.unsat:
        # (the block ids' search bound is not a fact of the worlds: without it)
        return False if _solver([*_facts(kernel, w), *trips]).check() == z3.unsat else None
    if r != z3.sat:
        return None
    m = s.model()

    def value(v) -> int:
        return m.eval(v.translate(s.ctx), model_completion=True).as_long()

    sizes = {n: value(v) for n, v in w.sizes.items()}
    block = {b: value(w.vars[b]) for b in BLOCK_IDS}
    try:  # the model, checked on the host
        if _admissible(kernel, sizes) and trips_of(varying, sizes, block, kernel) == tuple(vector):
            return sizes, block
    except (KeyError, ZeroDivisionError):
        pass
    return None


def plan_by_trips(kernel, base: dict, periodic, probe=None):
    """(Plan, "", False) for the argument by trip counts, or (None, why not, whether a lemma was refuted: the
    protocol depends on the block or the sizes beyond the trip counts, which bounded runs do not show). `periodic`: what
    protocol_pump.check_periodic established. `probe(sizes, block, checks)`: a skeleton run's state
    digests (`Skeleton.pump_seen`, None where the run stopped), which picks each loop's head where
    several loops are pumped."""
    occ, loops = periodic.occ, periodic.loops
    L = period_of(kernel)
    varying = [lp for lp in loops if not _is_constant(lp, kernel)]
    for lp in varying:
        if _loop_vars(lp, kernel):
            return None, f"the trip count of the loop at line {lp.line} depends on an enclosing loop's variable", \
                False
    for name in sorted(set().union(*(_specials(o.expr) for o in occ)) if occ else ()):
        if name.startswith("cluster") or name.startswith("warpgroup"):
            return None, f"the protocol depends on {name}", False
    determined = _determined(kernel, occ, varying)
    if determined is None:
        return None, "the solver did not decide whether the trip counts fix the protocol", False
    if determined is False:  # (like a refuted lemma E: runs of some blocks and sizes say nothing of the rest)
        return None, "two blocks or sizes with the same loop trip counts differ in the protocol", True
    pumps = []
    for lp in varying:
        pump = None
        for witness in _witnesses(kernel, lp, L, periodic.steps):
            holds = _checker(kernel, occ, varying, lp, witness, L)
            a0, b0 = periodic.heads.get(id(lp.node), (0, 0))
            b0 = max(b0, 1)
            for A, B in sorted(((a0 + i, b0 + j) for i in range(3) for j in range(3)), key=sum):
                if holds(A, B):
                    pump = Pump(lp, witness[1], witness[2], 1, tuple(range(A, A + L + 1)), B, L, holds,
                                witness=_describe(witness))
                    break
            if pump:
                break
        if pump is None:
            return None, f"no shrinking witness for the loop at line {lp.line} was proved", False
        pumps.append(pump)
    if len(pumps) > 1:
        # the product of every candidate head's runs would be too many: one head per loop, where a
        # probe's state settles (the box runs then check it; a state that settles later in some of
        # them leaves the argument unavailable)
        pumps, why = _probe_heads(kernel, varying, pumps, base, periodic.steps, probe)
        if pumps is None:
            return None, why, False
    box = [p.trips_run for p in pumps]
    prefix = ()
    outer = next((p for p in pumps if not p.loop.outer), None)
    if outer is not None and outer.trips_run > 1:
        tail = prefix_tail(kernel, occ, varying, outer.loop, range(1, outer.B + 3))
        if tail is not None:
            prefix = (outer.loop, tail)
    # (runs that share a prefix cost about a run each per trip count of the other loops, and a step of
    # the prefix loop each for the rest)
    most = MAX_BASE_RUNS * (2 if prefix else 1)
    if math.prod(box) > most:
        return None, f"the pumping argument would need {math.prod(box)} runs (at most {most})", False
    found = _search(kernel, varying, box, base, periodic.steps)
    combos, blocks, fixpoints = [], [], []
    for vector in itertools.product(*(range(n) for n in box)):
        world = found.get(vector)
        if world is None:
            world = _model_world(kernel, varying, vector)
            if world is False:
                continue  # no world has these trip counts
            if world is None:
                return None, f"the solver did not decide whether some world has the trip counts {vector}", False
        sizes, block = world
        fp = {}
        for p, n in zip(pumps, vector, strict=True):
            if n > min(p.heads) + p.L:
                fp[id(p.loop.node)] = (min(p.heads), max(p.heads) + p.L, p.L)
        combos.append(sizes)
        blocks.append(block)
        fixpoints.append(fp)
    return Plan(tuple(pumps), tuple(combos), tuple(fixpoints), tuple(blocks), prefix), "", False


def _probe_heads(kernel, varying, pumps: list, base: dict, steps: dict, probe):
    """(pumps with one head each, "") or (None, why not): the first candidate head of each loop where
    a run with every loop at A + 2L + B trips (each candidate head's base range reached) repeats its
    state after a period, and whose lemmas hold."""
    want = tuple(max(p.heads) + p.L + p.B for p in pumps)
    if probe is None:
        return None, "no run to choose the loops' heads"
    world = _search(kernel, varying, [n + 1 for n in want], base, steps).get(want) or \
        _model_world(kernel, varying, want)
    if not world:
        return None, f"no world with the trip counts {want} was found"
    checks = {id(p.loop.node): (min(p.heads), max(p.heads) + p.L, p.L) for p in pumps}
    seen = probe(*world, checks)
    if seen is None:
        return None, f"the run with the trip counts {want} stopped"
    out = []
    for p in pumps:
        execs = seen.get(id(p.loop.node), [])
        head = next((a for a in p.heads if execs and all(e[a] == e[a + p.L] for e in execs)
                     and (a == p.heads[0] or p.lemmas(a, p.B))), None)
        if head is None:
            return None, (f"the protocol state of the loop at line {p.loop.line} is not the same after {p.L} "
                          f"iterations, from any iteration up to {max(p.heads)}")
        out.append(attrs.evolve(p, heads=(head,)))
    return out, ""


def _describe(witness: tuple) -> str:
    kind, name, by = witness
    return f"{name} {'+' if by > 0 else '-'} {abs(by)}"
