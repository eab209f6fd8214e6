"""Symbolic execution of one thread of an audited kernel (argus_verify.thread_ir) over Z3 bit-vectors.

The thread is symbolic (its block and thread ids are variables), and so are the launch sizes and the
kernel's scalar parameters. Running the structured program once yields its *events*: memory accesses
(with the path condition under which they happen, their byte offset into the array they address,
and the barrier *phase*, the number of block-wide barriers the thread has passed), barriers, branches
that decide which barriers run, shuffles and cp.async groups. The second thread of the classic
two-thread encoding is the same events with every per-thread variable renamed.

Loops: a loop whose exit depends only on thread ids and concrete sizes is unrolled (after each
iteration the solver is asked whether any thread can go on; the unrolling stops when none can).
Any other loop is run once with a symbolic iteration number k: registers the body changes by a
loop-invariant amount are affine induction variables (init + k * step); the others get fresh
values that are marked *imprecise*: a counterexample that depends on such a value is reported as
unknown, never as a violation, and a proof is still a proof (the values over-approximate).
"""

from __future__ import annotations

import itertools
import re

import attrs
import z3

from argus_verify import thread_ir as T

UNROLL_CAP = 64
QUANTIFIED_LOOPS = False  # a ForAll over earlier iterations: exact, but Z3 times out on it
EVENT_CAP = 4000


@attrs.define
class Event:
    kind: str  # access | barrier | branch | shuffle | cpwait | unsupported
    stmt: object
    guard: object
    phase: object
    seq: int
    loops: tuple  # ((label, k var), ...) of the symbolic loops around it
    iters: tuple = ()  # ((label, iteration), ...) of the unrolled loops around it
    # accesses
    space: str = ""
    base: str | None = None
    off: object = None  # BV64 byte offset from the base
    nbytes: object = 0  # an int, or a BV64 term (cp.async with a source size in a register)
    write: bool = False
    atomic: bool = False
    read: bool = False
    # branches
    cond: object = None
    barrier_loc: object = None
    # shuffles
    lane: object = None
    clamp: object = None
    mask: object = None
    # cp.async
    group: object = None
    committed: object = None
    pending: int | None = None
    cp: bool = False


@attrs.define
class State:
    guard: object
    env: dict


class Frame:
    def __init__(self):
        self.breaks: list[State] = []
        self.conts: list[State] = []


class Launch:
    """Block and grid sizes: each dimension an int or an inclusive range (lo, hi)."""

    def __init__(self, block, grid):
        self.block = block
        self.grid = grid


def bv(v, w):
    return z3.BitVecVal(v, w)


def fit(e, w, signed=False):
    if z3.is_bool(e):
        e = z3.If(e, bv(1, w), bv(0, w))
    cur = e.size()
    if cur == w:
        return e
    if cur > w:
        return z3.Extract(w - 1, 0, e)
    return z3.SignExt(w - cur, e) if signed else z3.ZeroExt(w - cur, e)


class Machine:
    """Evaluates a kernel for thread 1 and collects its events."""

    def __init__(self, kernel: T.Kernel, launch: Launch, solver_timeout_ms: int = 5000):
        self.k = kernel
        self.launch = launch
        self.timeout = solver_timeout_ms
        self.events: list[Event] = []
        self.seq = 0
        self.fresh_id = itertools.count()
        self.imprecise: dict[str, str] = {}  # var name -> why its value is not exact
        self.per_thread: list = []  # variables renamed for thread 2
        self.loop_stack: list = []  # symbolic loops: (label, k)
        self.iter_stack: list = []  # unrolled loops: (label, i)
        self.recording = True
        self.written_bases: set[str] = set()
        self.notes: list[str] = []
        self.unsupported: list[T.Unsupported] = []
        self.symbolic_loops: list[str] = []
        self.sensitive: dict[int, bool] = {}
        self.loop_conts: dict = {}  # k name -> (k, condition to go on after iteration k, label)
        self._setup()

    # ------------------------------------------------------------ variables

    def _setup(self):
        dims = "xyz"
        self.ntid, self.nctaid, self.tid, self.ctaid = {}, {}, {}, {}
        self.assumptions = []
        for i, d in enumerate(dims):
            for table, name, spec in ((self.ntid, "ntid", self.launch.block),
                                      (self.nctaid, "nctaid", self.launch.grid)):
                v = spec[i]
                if isinstance(v, int):
                    table[d] = bv(v, 32)
                else:
                    var = z3.BitVec(f"{name}.{d}", 32)
                    table[d] = var
                    self.assumptions += [z3.UGE(var, v[0]), z3.ULE(var, v[1])]
            self.tid[d] = z3.BitVec(f"t1!tid.{d}", 32)
            self.ctaid[d] = z3.BitVec(f"t1!ctaid.{d}", 32)
            self.per_thread += [self.tid[d], self.ctaid[d]]
        self.thread_constraints = []
        for d in dims:
            self.thread_constraints += [z3.ULT(self.tid[d], self.ntid[d]), z3.ULT(self.ctaid[d], self.nctaid[d])]
        self.params = {}
        for p in self.k.params:
            w = _width(p.ptx_type)
            self.params[p.name] = z3.BitVec(f"p!{p.name}", w)
        # shared variables at concrete offsets in one shared window
        self.shared_off = {}
        off = 0
        for sv in self.k.shared:
            a = max(sv.align, 1)
            off = (off + a - 1) // a * a
            self.shared_off[sv.name] = off
            off += sv.size if sv.size else 0
        self.shared_sizes = {sv.name: (sv.size if not sv.extern else None) for sv in self.k.shared}
        self.linear_tid = self.tid["x"] + self.ntid["x"] * (self.tid["y"] + self.ntid["y"] * self.tid["z"])
        self.nthreads = self.ntid["x"] * self.ntid["y"] * self.ntid["z"]

    def fresh(self, w, why: str, loc: T.Loc | None = None, per_thread=True, prefix="h"):
        name = f"{prefix}!{next(self.fresh_id)}"
        v = z3.Bool(name) if w == 0 else z3.BitVec(name, w)
        if why:
            where = f" (PTX line {loc.ptx_line})" if loc is not None else ""
            self.imprecise[name] = why + where
        if per_thread:
            self.per_thread.append(v)
        return v

    # ------------------------------------------------------------ values

    def reg_width(self, name: str) -> int:
        t = self.k.regs.get(name, "b32")
        return 0 if t == "pred" else _width(t)

    def read(self, env, o, w, signed=False):
        """The value (z3 BV of width w, or Bool when w == 0) and base of operand o."""
        if isinstance(o, T.Reg):
            if o.name not in env:
                rw = self.reg_width(o.name)
                env[o.name] = (self.fresh(rw, f"register {o.name} read before written"), None)
            e, base = env[o.name]
            if w == 0:
                return (e if z3.is_bool(e) else e != 0), None
            if z3.is_bool(e):
                e = z3.If(e, bv(1, w), bv(0, w))
            return fit(e, w, signed), base
        if isinstance(o, T.Imm):
            if o.is_float:
                return self._float_imm(o.value, w), None
            if w == 0:
                return z3.BoolVal(o.value != 0), None
            return bv(o.value % (1 << w), w), None
        if isinstance(o, T.Special):
            name, _, d = o.name.partition(".")
            if name in ("tid", "ntid", "ctaid", "nctaid") and d in "xyz" and d:
                table = {"tid": self.tid, "ntid": self.ntid, "ctaid": self.ctaid, "nctaid": self.nctaid}[name]
                return fit(table[d], w), None
            if name == "laneid":
                return fit(z3.URem(self.linear_tid, 32), w), None
            if name == "warpid":
                return fit(z3.UDiv(self.linear_tid, 32), w), None
            return self.fresh(w, f"special register %{o.name}"), None
        if isinstance(o, T.Sym):
            if o.name in self.shared_off:
                return bv(self.shared_off[o.name], w), o.name
            if o.name in self.params:
                return fit(self.params[o.name], w), o.name
            return self.fresh(w, f"address of {o.name}"), None
        if isinstance(o, tuple) and o[0] == "not":
            v, _ = self.read(env, o[1], 0)
            return z3.Not(v), None
        return self.fresh(w, f"operand {o!r}"), None

    def _float_imm(self, text, w):
        if isinstance(text, str) and text[:2].lower() in ("0f", "0d"):
            return bv(int(text[2:], 16) % (1 << max(w, 1)), w) if w else z3.BoolVal(True)
        return self.fresh(w, "floating-point constant", None, per_thread=False) if w else z3.BoolVal(True)

    def write(self, env, reg, value, base=None):
        if not isinstance(reg, T.Reg):
            return
        rw = self.reg_width(reg.name)
        if rw == 0:
            if not z3.is_bool(value):
                value = value != 0
        elif z3.is_bool(value):
            value = z3.If(value, bv(1, rw), bv(0, rw))
        else:
            value = fit(value, rw)
        env[reg.name] = (value, base)

    # ------------------------------------------------------------ statements

    def run(self):
        env = {"!phase": (bv(0, 32), None), "!cpg": (bv(0, 32), None)}
        self._mark_barrier_after(self.k.body, False)
        st = State(z3.BoolVal(True), env)
        self.stmts(self.k.body, st, None)
        return self

    def _mark_barrier_after(self, stmts, after: bool, loop_barrier: bool = False) -> None:
        """For each If, whether its outcome decides which barriers a thread reaches: a barrier in
        one of its arms, a return with a barrier after it (later in program order or in an
        enclosing loop), or a break/continue of a loop whose body has a barrier."""
        flags = [_contains_barrier([s]) for s in stmts]
        for i, s in enumerate(stmts):
            later = after or any(flags[i + 1:])
            if isinstance(s, T.If):
                arms = s.then + s.orelse
                self.sensitive[id(s)] = bool(
                    _contains_barrier(arms) or (_contains_return(arms) and later)
                    or (_contains_loop_transfer(arms) and loop_barrier))
                self._mark_barrier_after(s.then, later, loop_barrier)
                self._mark_barrier_after(s.orelse, later, loop_barrier)
            elif isinstance(s, T.Loop):
                inner = _contains_barrier(s.body)
                self._mark_barrier_after(s.body, later or inner, inner)

    def stmts(self, stmts, st: State, frame: Frame | None):
        for s in stmts:
            if z3.is_false(st.guard):
                return st
            st = self.stmt(s, st, frame)
        return st

    def emit(self, ev: Event):
        if not self.recording:
            return
        if len(self.events) > EVENT_CAP:
            raise _TooBig()
        self.events.append(ev)

    def new_event(self, kind, stmt, st, **kw) -> Event:
        self.seq += 1
        return Event(kind, stmt, st.guard, st.env["!phase"][0], self.seq, tuple(self.loop_stack),
                     tuple(self.iter_stack), **kw)

    def stmt(self, s, st: State, frame):
        if isinstance(s, T.Op):
            self.op(s, st.env)
            return st
        if isinstance(s, T.Access):
            self.access(s, st)
            return st
        if isinstance(s, T.If):
            return self.if_(s, st, frame)
        if isinstance(s, T.Loop):
            return self.loop(s, st, frame)
        if isinstance(s, T.Barrier):
            self.barrier(s, st)
            return st
        if isinstance(s, T.Break | T.Continue):
            if frame is None:
                self.unsupported.append(T.Unsupported("break outside a loop", s.loc))
                return State(z3.BoolVal(False), st.env)
            (frame.breaks if isinstance(s, T.Break) else frame.conts).append(State(st.guard, dict(st.env)))
            return State(z3.BoolVal(False), st.env)
        if isinstance(s, T.Return):
            return State(z3.BoolVal(False), st.env)
        if isinstance(s, T.Shuffle):
            self.shuffle(s, st)
            return st
        if isinstance(s, T.CpAsync):
            self.cp_async(s, st)
            return st
        if isinstance(s, T.CpAsyncCommit):
            g, _ = st.env["!cpg"]
            st.env["!cpg"] = (g + 1, None)
            return st
        if isinstance(s, T.CpAsyncWait):
            self.emit(self.new_event("cpwait", s, st, committed=st.env["!cpg"][0], pending=s.pending))
            return st
        if isinstance(s, T.Unsupported):
            self.unsupported.append(s)
            for d in s.dsts:
                self.write(st.env, d, self.fresh(self.reg_width(d.name), s.reason, s.loc))
            return st
        raise TypeError(type(s))

    def if_(self, s: T.If, st: State, frame):
        c, _ = self.read(st.env, s.cond, 0)
        if s.negate:
            c = z3.Not(c)
        c = z3.simplify(c)
        if self.sensitive.get(id(s)):
            bl = _first_barrier(s.then) or _first_barrier(s.orelse)
            self.emit(self.new_event("branch", s, st, cond=c, barrier_loc=bl))
        g_then = z3.simplify(z3.And(st.guard, c))
        g_else = z3.simplify(z3.And(st.guard, z3.Not(c)))
        a = self.stmts(s.then, State(g_then, dict(st.env)), frame) if not z3.is_false(g_then) \
            else State(g_then, st.env)
        b = self.stmts(s.orelse, State(g_else, dict(st.env)), frame) if not z3.is_false(g_else) \
            else State(g_else, st.env)
        return merge([a, b], st.env)

    # ------------------------------------------------------------ loops

    def loop(self, s: T.Loop, st: State, frame):
        mark = (len(self.events), self.seq, len(self.per_thread), len(self.unsupported))
        if self._unrollable(s, st):
            try:
                out = self._unroll(s, st)
                if out is not None:
                    return out
            except _TooBig:
                pass
            del self.events[mark[0]:]
            del self.unsupported[mark[3]:]
        return self._symbolic(s, st)

    def _unrollable(self, s, st) -> bool:
        return True

    def _unroll(self, s: T.Loop, st: State):
        exits: list[State] = []
        cur = st
        for i in range(UNROLL_CAP):
            fr = Frame()
            self.iter_stack.append((s.label, i))
            try:
                end = self.stmts(s.body, State(cur.guard, dict(cur.env)), fr)
            finally:
                self.iter_stack.pop()
            exits.extend(fr.breaks)
            nxt = merge(fr.conts + [end], cur.env)
            if i == 0 and not self._depends_only_on_threads(nxt.guard):
                return None
            if not self._may_hold(nxt.guard):
                return merge(exits, cur.env) if exits else State(z3.BoolVal(False), cur.env)
            cur = nxt
        return None

    def _depends_only_on_threads(self, e) -> bool:
        allowed = {v.decl().name() for v in self.per_thread[:6]}
        for n in _names_of(e):
            if n not in allowed and not n.startswith(("ntid.", "nctaid.")):
                return False
        return True

    def _may_hold(self, g) -> bool:
        g = z3.simplify(g)
        if z3.is_false(g):
            return False
        if z3.is_true(g):
            return True
        s = z3.Solver()
        s.set("timeout", self.timeout)
        s.add(self.assumptions + self.thread_constraints + [g])
        return s.check() != z3.unsat

    def _symbolic(self, s: T.Loop, st: State):
        self.symbolic_loops.append(s.label)
        modified = sorted(T.assigned_regs(s.body) | {"!phase", "!cpg"})
        # pass 1: which registers move by a loop-invariant step?
        was = self.recording
        self.recording = False
        mark_fresh = next(self.fresh_id)
        holders = {}
        env1 = dict(st.env)
        for r in modified:
            w = 32 if r.startswith("!") else self.reg_width(r)
            base = st.env.get(r, (None, None))[1]
            holders[r] = z3.Bool(f"ph!{r}!{mark_fresh}") if w == 0 else z3.BitVec(f"ph!{r}!{mark_fresh}", w)
            env1[r] = (holders[r], base)
        fr1 = Frame()
        self.loop_stack.append((s.label, None))
        try:
            end1 = self.stmts(s.body, State(z3.BoolVal(True), env1), fr1)
        finally:
            self.loop_stack.pop()
        cont1 = merge(fr1.conts + [end1], env1)
        self.recording = was
        k = z3.BitVec(f"k!{mark_fresh}!{s.label}", 32)
        self.per_thread.append(k)
        steps = {}
        holder_names = {h.decl().name() for h in holders.values()}
        for r in modified:
            h = holders[r]
            if z3.is_bool(h) or r not in cont1.env or self.k.regs.get(r, "b32")[0] == "f" or h.size() < 32:
                continue  # floating-point and 8/16-bit registers (data) are not taken as induction variables
            new = cont1.env[r][0]
            if z3.is_bool(new):
                continue
            d = z3.simplify(new - h)
            if z3.is_bv_value(d):
                steps[r] = d
                continue
            names = _names_of(d)
            if names & holder_names or any(_is_fresh_after(n, mark_fresh) for n in names):
                continue
            steps[r] = d
        env2 = dict(st.env)
        for r in modified:
            w = 32 if r.startswith("!") else self.reg_width(r)
            base = st.env.get(r, (None, None))[1]
            if r in steps and r in st.env:
                init = fit(st.env[r][0], w) if not z3.is_bool(st.env[r][0]) else None
                if init is not None:
                    env2[r] = (init + fit(k, w) * steps[r], base)
                    continue
            env2[r] = (self.fresh(w, f"register {r} changes by a loop-variant amount in loop {s.label}",
                                  s.loc), base)
        if "!phase" not in steps:
            self.notes.append(f"barrier count per iteration of loop {s.label} varies")
        if "!cpg" not in steps or _contains_cp(s.body):
            if _contains_cp(s.body):
                self.unsupported.append(T.Unsupported(f"cp.async groups in a loop that is not unrolled ({s.label})",
                                                      s.loc, effects="cp-async"))
        # pass 2: the k-th iteration, reached when k == 0 or iteration k-1 went on
        R = z3.Bool(f"R!{s.label}!{mark_fresh}")
        fr2 = Frame()
        ev_mark = len(self.events)
        self.loop_stack.append((s.label, k))
        try:
            end2 = self.stmts(s.body, State(z3.And(st.guard, R), env2), fr2)
        finally:
            self.loop_stack.pop()
        cont2 = merge(fr2.conts + [end2], env2)
        prev = z3.substitute(cont2.guard, (k, k - 1), (R, z3.BoolVal(True)))
        j = z3.BitVec(f"j!{mark_fresh}", 32)
        every = z3.ForAll([j], z3.Implies(z3.ULT(j, k), z3.substitute(cont2.guard, (k, j), (R, z3.BoolVal(True)))))
        cont_k = z3.substitute(cont2.guard, (R, z3.BoolVal(True)))
        wrap = self._no_wrap_facts(s, st, steps, k, cont_k, mark_fresh)
        reached = z3.Or(k == 0, z3.And(prev, every)) if QUANTIFIED_LOOPS else z3.Or(k == 0, z3.And(prev, *wrap))
        self.loop_conts[k.decl().name()] = (k, z3.substitute(cont2.guard, (R, z3.BoolVal(True))), s.label)
        for ev in self.events[ev_mark:]:
            ev.guard = z3.substitute(ev.guard, (R, reached))
            if ev.cond is not None and z3.is_expr(ev.cond):
                ev.cond = z3.substitute(ev.cond, (R, reached))
        # after the loop: values of the changed registers are not tracked
        env_out = dict(st.env)
        for r in modified:
            w = 32 if r.startswith("!") else self.reg_width(r)
            base = st.env.get(r, (None, None))[1]
            env_out[r] = (self.fresh(w, f"value of {r} after loop {s.label} (not unrolled)", s.loc), base)
        guard = st.guard
        if _contains_return(s.body):
            guard = z3.And(st.guard, self.fresh(0, f"whether the thread returned inside loop {s.label}", s.loc))
        return State(guard, env_out)

    def _no_wrap_facts(self, s: T.Loop, st: State, steps: dict, k, cont_k, mark) -> list:
        """Facts about iteration k that follow from "every earlier iteration went on" (the exact but
        quantified condition) for each 32-bit induction register r = init + k * step: if the
        mathematical value init + k * step has left the 32-bit range, let w be the first iteration
        whose value did (unique, w <= k); iterations w - 1 and w - 2 (when they exist) went on. This
        rules out the summary's spurious iterations that are only reached after a wrap-around, the
        usual reason grid-stride and tiled loops ended unknown; a loop that truly wraps keeps its
        witness (w - 2 went on with its unwrapped value). Instances of a universally true fact, with w
        defined by constraints that determine it: sound."""
        out = []
        # the continuation condition must be a function of k alone among this iteration's values: an
        # unknown value made in the body stands for iteration k's, not for iteration w - 1's
        own = _names_of(cont_k) - {k.decl().name()}
        if any(_is_fresh_after(n, mark) or n.startswith("R!") for n in own):
            return out
        lo, hi = -(1 << 31), (1 << 31) - 1
        k64 = z3.ZeroExt(32, k)
        for r, d in steps.items():
            if r.startswith("!") or r not in st.env or self.reg_width(r) != 32 or z3.is_bool(st.env[r][0]):
                continue
            init = z3.SignExt(32, fit(st.env[r][0], 32))
            step = z3.SignExt(32, fit(d, 32))

            def val(x, init=init, step=step):
                return init + x * step  # 64-bit: exact for x < 2**32 and 32-bit init and step
            w = z3.BitVec(f"w!{mark}!{r}", 32)
            self.per_thread.append(w)
            w64 = z3.ZeroExt(32, w)
            up = z3.And(step > 0, val(k64) > hi)
            down = z3.And(step < 0, val(k64) < lo)
            first = z3.And(z3.UGE(w, 1), z3.ULE(w, k), z3.Or(
                z3.And(step > 0, val(w64 - 1) <= hi, val(w64) > hi),
                z3.And(step < 0, val(w64 - 1) >= lo, val(w64) < lo)))
            went_on = z3.And(z3.substitute(cont_k, (k, w - 1)),
                             z3.Implies(z3.UGE(w, 2), z3.substitute(cont_k, (k, w - 2))))
            out.append(z3.Implies(z3.Or(up, down), z3.And(first, went_on)))
        return out

    # ------------------------------------------------------------ memory

    def address(self, env, a: T.Addr, space: str, loc):
        """(space, base, BV64 offset from the base) of an address operand."""
        if a.base is None:
            return space, None, bv(a.offset % (1 << 64), 64)
        w = 32 if space == "shared" and isinstance(a.base, T.Reg) and self.reg_width(a.base.name) == 32 else 64
        if isinstance(a.base, T.Reg) and self.reg_width(a.base.name) == 32:
            w = 32
        e, base = self.read(env, a.base, w)
        e = fit(e, 64) + bv(a.offset % (1 << 64), 64)
        if base is None:
            return space, None, e
        if base in self.shared_off:
            if space not in ("shared", "generic"):
                return space, None, e
            return "shared", base, z3.simplify(e - bv(self.shared_off[base], 64))
        if base in self.params:
            if space == "param":
                return "param", base, z3.simplify(e - fit(self.params[base], 64))
            if space not in ("global", "generic"):
                return space, None, e
            return "global", base, z3.simplify(e - fit(self.params[base], 64))
        return space, None, e

    def access(self, s: T.Access, st: State):
        env = st.env
        space, base, off = self.address(env, s.addr, s.space, s.loc)
        nbytes = s.width * s.count
        if s.space == "param":
            # kernel parameters: their values
            pname = s.addr.base.name if isinstance(s.addr.base, T.Sym) else None
            for r in s.regs:
                if pname in self.params:
                    v = self.params[pname]
                    self.write(env, r, v, base=pname if v.size() == 64 else None)
                else:
                    self.write(env, r, self.fresh(max(self.reg_width(r.name), 1), "parameter", s.loc))
            return
        write = s.kind in ("store", "atomic")
        read = s.kind in ("load", "atomic")
        if write and base is not None and space == "global":
            self.written_bases.add(base)
        self.emit(self.new_event("access", s, st, space=space, base=base, off=off, nbytes=nbytes,
                                 write=write, atomic=s.kind == "atomic", read=read))
        if s.kind == "load":
            for i, r in enumerate(s.regs):
                if not isinstance(r, T.Reg):
                    continue
                w = self.reg_width(r.name) or 8
                if space == "global" and base is not None:
                    f = z3.Function(f"in!{base}!{w}", z3.BitVecSort(64), z3.BitVecSort(w))
                    self.write(env, r, f(off + bv(i * s.width, 64)))
                else:
                    self.write(env, r, self.fresh(w, f"value loaded from {space} memory", s.loc))
        elif s.kind == "atomic" and isinstance(s.dst, T.Reg):
            w = self.reg_width(s.dst.name) or 8
            self.write(env, s.dst, self.fresh(w, "value returned by an atomic", s.loc))

    def cp_async(self, s: T.CpAsync, st: State):
        _, dbase, doff = self.address(st.env, s.dst, "shared", s.loc)
        _, sbase, soff = self.address(st.env, s.src, "global", s.loc)
        g = st.env["!cpg"][0]
        self.emit(self.new_event("access", s, st, space="shared", base=dbase, off=doff, nbytes=s.size, write=True,
                                 cp=True, group=g))
        if isinstance(s.src_size, T.Reg):
            # a source size in a register (zero-fill of a partial copy): the read covers that many bytes,
            # and none when it is 0 (PTX: src-size at most cp-size; a larger one is read as it stands)
            n, _ = self.read(st.env, s.src_size, 32)
            n = fit(n, 64)
            rd = State(z3.simplify(z3.And(st.guard, n != 0)), st.env)
            self.emit(self.new_event("access", s, rd, space="global", base=sbase, off=soff, nbytes=n, read=True))
        elif s.src_size:
            self.emit(self.new_event("access", s, st, space="global", base=sbase, off=soff, nbytes=s.src_size,
                                     read=True))

    def barrier(self, s: T.Barrier, st: State):
        full = full_barrier(s)
        if not full:
            self.unsupported.append(T.Unsupported(
                f"named or partial barrier ({s.kind}, id {s.barrier_id}, count {s.count}) at PTX line "
                f"{s.loc.ptx_line} is not modelled", s.loc, effects="order"))
        self.emit(self.new_event("barrier", s, st))
        if full:  # a named or counted barrier (bar.arrive, bar.sync 1, 64) does not order the whole block:
            # ordering nothing is the sound reading (its races and reads stay possible, and are unknown)
            p, _ = st.env["!phase"]
            st.env["!phase"] = (z3.simplify(p + 1), None)

    def shuffle(self, s: T.Shuffle, st: State):
        env = st.env
        lane, _ = self.read(env, s.lane, 32)
        clamp, _ = self.read(env, s.clamp, 32)
        mask, _ = self.read(env, s.mask, 32)
        self.emit(self.new_event("shuffle", s, st, lane=lane, clamp=clamp, mask=mask))
        if s.dst is not None:
            self.write(env, s.dst, self.fresh(32, "value received from another lane", s.loc))
        if s.pred is not None:
            self.write(env, s.pred, self.fresh(0, "shuffle in-range predicate", s.loc))

    # ------------------------------------------------------------ operations

    def op(self, s: T.Op, env):
        parts = s.opcode.split(".")
        op = parts[0]
        if op == "nop" or not s.dsts:
            return
        typ = parts[-1]
        dst = s.dsts[0]
        dw = self.reg_width(dst.name)
        floaty = typ[0] == "f" or typ == "bf16" or typ.startswith("bf16")
        if op in ("mov", "cvta") or (op == "cvt" and not floaty and len(parts) >= 3 and parts[-2][0] in "usb"
                                     and all(p[0] != "f" for p in parts[1:])):
            if op == "cvt":
                src_t = parts[-1]
                dst_t = parts[-2]
                sw = _width(src_t)
                v, base = self.read(env, s.srcs[0], sw)
                if dst_t == "pred":
                    self.write(env, dst, v != 0)
                    return
                self.write(env, dst, fit(v, _width(dst_t), signed=src_t[0] == "s"), base)
                return
            w = dw if dw else 0
            if op == "mov" and typ[0] == "f" and isinstance(s.srcs[0], T.Imm):
                v, base = self.read(env, s.srcs[0], w)
                self.write(env, dst, v, base)
                return
            v, base = self.read(env, s.srcs[0], w)
            self.write(env, dst, v, base)
            return
        if op == "setp":
            self.setp(s, parts, env)
            return
        if floaty or op not in _INT_OPS:
            why = "floating-point value" if floaty else f"value of {s.opcode}"
            for d in s.dsts:
                self.write(env, d, self.fresh(self.reg_width(d.name), why, s.loc))
            return
        if typ == "pred":
            vals = [self.read(env, x, 0)[0] for x in s.srcs]
            r = {"and": lambda a, b: z3.And(a, b), "or": lambda a, b: z3.Or(a, b),
                 "xor": lambda a, b: z3.Xor(a, b)}.get(op)
            if op == "not":
                self.write(env, dst, z3.Not(vals[0]))
            elif op == "selp":
                self.write(env, dst, z3.If(vals[2], vals[0], vals[1]))
            elif r is not None:
                self.write(env, dst, r(vals[0], vals[1]))
            else:
                self.write(env, dst, self.fresh(0, f"value of {s.opcode}", s.loc))
            return
        signed = typ[0] == "s"
        w = _width(typ)
        wide = "wide" in parts
        ow = 2 * w if wide else w
        if op == "shl" or op == "shr":
            a, base = self.read(env, s.srcs[0], w, signed)
            b, _ = self.read(env, s.srcs[1], 32)
            b = fit(b, w)
            cap = bv(w, w)
            if op == "shl":
                r = z3.If(z3.UGE(b, cap), bv(0, w), a << b)
            elif signed:
                r = a >> z3.If(z3.UGE(b, cap), bv(w - 1, w), b)
            else:
                r = z3.If(z3.UGE(b, cap), bv(0, w), z3.LShR(a, b))
            self.write(env, dst, r)
            return
        if op == "selp":
            a, ba = self.read(env, s.srcs[0], w)
            b, bb = self.read(env, s.srcs[1], w)
            c, _ = self.read(env, s.srcs[2], 0)
            self.write(env, dst, z3.If(c, a, b), ba if ba == bb else None)
            return
        srcs = [self.read(env, x, w, signed) for x in s.srcs]
        if wide and op in ("mad", "mad24") and len(s.srcs) > 2:
            srcs[2] = self.read(env, s.srcs[2], ow, signed)  # mad.wide adds a double-width operand
        vals = [fit(v, ow, signed) for v, _ in srcs]
        bases = [b for _, b in srcs]
        base = None
        if op in ("add", "mad", "sub"):
            tagged = [b for b in bases if b is not None]
            if op == "sub" and len(tagged) == 2 and tagged[0] == tagged[1]:
                base = None
            elif op == "sub":
                base = bases[0]
            elif len(tagged) == 1:
                base = tagged[0]
            if op == "mad":
                base = bases[2]
        r = None
        a = vals[0]
        b = vals[1] if len(vals) > 1 else None
        if op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op in ("mul", "mul24"):
            if "hi" in parts:
                full = fit(srcs[0][0], 2 * w, signed) * fit(srcs[1][0], 2 * w, signed)
                r = z3.Extract(2 * w - 1, w, full)
            else:
                r = a * b
        elif op in ("mad", "mad24"):
            if "hi" in parts:
                full = fit(srcs[0][0], 2 * w, signed) * fit(srcs[1][0], 2 * w, signed)
                r = z3.Extract(2 * w - 1, w, full) + vals[2]
            else:
                r = a * b + vals[2]
        elif op == "div":
            r = (a / b) if signed else z3.UDiv(a, b)
        elif op == "rem":
            r = z3.SRem(a, b) if signed else z3.URem(a, b)
        elif op == "and":
            r = a & b
        elif op == "or":
            r = a | b
        elif op == "xor":
            r = a ^ b
        elif op == "not":
            r = ~a
        elif op == "neg":
            r = -a
        elif op == "abs":
            r = z3.If(a < 0, -a, a)
        elif op == "min":
            r = z3.If(a < b, a, b) if signed else z3.If(z3.ULT(a, b), a, b)
        elif op == "max":
            r = z3.If(a > b, a, b) if signed else z3.If(z3.UGT(a, b), a, b)
        if r is None:
            self.write(env, dst, self.fresh(dw, f"value of {s.opcode}", s.loc))
            return
        self.write(env, dst, r, base)

    def setp(self, s: T.Op, parts, env):
        typ = parts[-1]
        cmp = parts[1]
        boolop = parts[2] if len(parts) > 3 and parts[2] in ("and", "or", "xor") else None
        if typ[0] == "f" or typ.startswith("bf"):
            c = self.fresh(0, "floating-point comparison", s.loc)
        else:
            w = _width(typ)
            signed = typ[0] == "s"
            a, _ = self.read(env, s.srcs[0], w, signed)
            b, _ = self.read(env, s.srcs[1], w, signed)
            c = _compare(cmp, a, b, signed)
            if c is None:
                c = self.fresh(0, f"comparison {cmp}", s.loc)
        c_neg = z3.Not(c)
        if boolop is not None and len(s.srcs) > 2:
            p, _ = self.read(env, s.srcs[2], 0)
            f = {"and": z3.And, "or": z3.Or, "xor": z3.Xor}[boolop]
            c, c_neg = f(c, p), f(z3.Not(c_neg if False else c_neg), p)
        self.write(env, s.dsts[0], c)
        if len(s.dsts) > 1:
            self.write(env, s.dsts[1], c_neg)


class _TooBig(Exception):
    pass


_INT_OPS = {"add", "sub", "mul", "mad", "mul24", "mad24", "div", "rem", "and", "or", "xor", "not", "shl", "shr",
            "min", "max", "neg", "abs", "selp"}


def _compare(cmp, a, b, signed):
    return {
        "eq": lambda: a == b, "ne": lambda: a != b,
        "lt": lambda: a < b if signed else z3.ULT(a, b), "le": lambda: a <= b if signed else z3.ULE(a, b),
        "gt": lambda: a > b if signed else z3.UGT(a, b), "ge": lambda: a >= b if signed else z3.UGE(a, b),
        "lo": lambda: z3.ULT(a, b), "ls": lambda: z3.ULE(a, b), "hi": lambda: z3.UGT(a, b),
        "hs": lambda: z3.UGE(a, b),
    }.get(cmp, lambda: None)()


def _width(t: str) -> int:
    if t == "pred":
        return 0
    digits = "".join(ch for ch in t if ch.isdigit())
    return int(digits) if digits else 32


def merge(states: list[State], base_env) -> State:
    live = [s for s in states if not z3.is_false(s.guard)]
    if not live:
        return State(z3.BoolVal(False), dict(base_env))
    if len(live) == 1:
        return State(live[0].guard, live[0].env)
    guard = z3.simplify(z3.Or(*[s.guard for s in live]))
    env = {}
    keys = set().union(*(s.env.keys() for s in live))
    for key in keys:
        vals = [s.env.get(key) for s in live]
        if any(v is None for v in vals):
            continue
        first = vals[0]
        if all(v[0] is first[0] or z3.eq(v[0], first[0]) for v in vals[1:]):
            env[key] = first
            continue
        e = vals[-1][0]
        ok = True
        for s, v in zip(reversed(live[:-1]), reversed(vals[:-1]), strict=True):
            a = v[0]
            if z3.is_bool(a) != z3.is_bool(e) or (not z3.is_bool(a) and a.size() != e.size()):
                ok = False
                break
            e = z3.If(s.guard, a, e)
        if not ok:
            continue
        bases = {v[1] for v in vals}
        env[key] = (e, bases.pop() if len(bases) == 1 else None)
    return State(guard, env)


_DECL = re.compile(r"^\(declare-fun (\|[^|]*\||\S+) ", re.M)


def _names_of(e) -> set[str]:
    """The names of the uninterpreted constants and functions in `e`. Z3 prints the term (with its
    shared subterms once) in C; walking a large DAG through the Python API was the audit's hot spot."""
    s = z3.Solver()
    s.add(e if z3.is_bool(e) else e == e)
    return {n[1:-1] if n.startswith("|") else n for n in _DECL.findall(s.sexpr())}


def free_names(exprs) -> set[str]:
    es = [e for e in exprs if e is not None and z3.is_expr(e)]
    if not es:
        return set()
    return _names_of(z3.And(*[e if z3.is_bool(e) else e == e for e in es]))


def _is_fresh_after(name: str, mark: int) -> bool:
    if name.startswith(("h!", "k!")):
        try:
            return int(name.split("!")[1]) >= mark
        except ValueError:
            return True
    return False


def _contains_barrier(stmts) -> bool:
    return any(isinstance(s, T.Barrier) for s in T.walk(stmts))


def _first_barrier(stmts):
    for s in T.walk(stmts):
        if isinstance(s, T.Barrier):
            return s.loc
    return None


def _contains_transfer(stmts) -> bool:
    return any(isinstance(s, T.Return | T.Break | T.Continue) for s in T.walk(stmts))


def _contains_loop_transfer(stmts) -> bool:
    """A break or continue of the loop around `stmts` (not of a loop inside them)."""
    for s in stmts:
        if isinstance(s, T.Break | T.Continue):
            return True
        if isinstance(s, T.If) and (_contains_loop_transfer(s.then) or _contains_loop_transfer(s.orelse)):
            return True
    return False


def _contains_return(stmts) -> bool:
    return any(isinstance(s, T.Return) for s in T.walk(stmts))


def _contains_cp(stmts) -> bool:
    return any(isinstance(s, T.CpAsync | T.CpAsyncWait) for s in T.walk(stmts))


def full_barrier(s: T.Barrier) -> bool:
    """`bar.sync 0` (`__syncthreads()`): every thread of the block waits, and memory is ordered."""
    return s.kind == "sync" and isinstance(s.barrier_id, T.Imm) and s.barrier_id.value == 0 and s.count is None
