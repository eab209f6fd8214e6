"""Every element exactly once: how many times each input element enters each reduction.

For every reduction a contract names (`out[i] = sum(x[i, j] for j)`: a sum along x's dimension
1), this pass follows the block's threads concretely (the block size, layouts, shuffles and
shared-memory addresses are compile-time values) and counts, for every value every thread holds,
how often each position of one *window* of the reduced dimension has been combined into it. A
window is what one iteration of the loop that walks the dimension covers (or the whole tile when
no loop does). Because every iteration combines the same pattern of window positions, the counts
of one iteration are those of every iteration; the loop's range is then checked with the solver,
for every size the `requires` allow, to tile the dimension from 0 without a gap. Reads outside that
loop (a peeled tail, a prologue chunk) are pieces of the window with positions of their own; the
solver then checks that the loop's windows and the pieces cover every element once together.

Tags (smt/obligations) already prove that a reduction only combines elements of the right row;
this pass proves the multiplicity: 1 for every element for a sum, at least 1 for max and min. It
follows only what reaches an output: a lane whose incomplete partial is discarded is no error.

Anything outside this model (a reduction split across blocks, data carried between iterations in
registers or shared memory, guards that depend on sizes, tensor-core atoms) makes the obligation
unknown with the construct and its line: never proved.
"""

from __future__ import annotations

import attrs
import numpy as np
import z3

from argus_verify import ir, semantics
from argus_verify.diagnostics import Span
from argus_verify.layout import Layout

COUNT = np.float32  # how often a window position entered a value: small integers, exact in float32


class Unsupported(Exception):
    def __init__(self, reason: str, span: Span | None):
        super().__init__(reason)
        self.reason, self.span = reason, span


class WindowsDoNotTile(Unsupported):
    """The windows of a reduced dimension read inside and outside the loop that walks it miss or
    repeat an element at the sizes `sizes`: a counterexample, reported as a violation with them."""

    def __init__(self, reason: str, span: Span | None, key: Key, sizes: dict, element: int | None = None,
                 count: int | None = None):
        super().__init__(reason, span)
        self.key, self.sizes, self.element, self.count = key, sizes, element, count


@attrs.frozen
class Key:
    tensor: str
    dim: int


@attrs.frozen
class Problem:
    """An incomplete reduction: at `span` (where the chain of combines ended), thread `thread`'s
    value `value` combined window position `offset` of `key` `count` times."""

    key: Key
    op: str
    span: Span
    thread: int
    value: int
    offset: int
    count: int


@attrs.frozen
class Entry:
    op: str | None  # None: an element not yet combined; else the reduction combining it
    counts: np.ndarray  # [threads, values, window] int32


@attrs.frozen
class Prov:
    entries: dict  # Key -> Entry
    axes: tuple  # per tile axis: frozenset of Keys (the input dimensions it walks; several after a product)
    bad: np.ndarray  # [threads, values] int: -1, or the index of a Problem this value depends on


@attrs.frozen
class Anchor:
    """`assert tag(f)[c] == coef * kt + coord(f)[axis] + rest`, proved by the tag-assertion
    obligation: f holds, at every iteration of loop kt, the elements coef * kt + coordinate + rest
    of the reduced dimension; coverage starts from f instead of following the data through the
    pipeline's stages."""

    key: Key
    frag: str
    axis: int
    coef: int
    loop: ir.For
    rest: ir.IExpr


@attrs.frozen
class Piece:
    """A window read outside the loop that walks the dimension (a peeled tail, a prologue chunk):
    elements base .. base + size - 1, counted at window positions offset .. offset + size - 1."""

    base: ir.IExpr  # over sizes, the same for every thread
    size: int
    offset: int
    line: int


@attrs.frozen
class Window:
    size: int
    loop: ir.For | None
    coef: int  # the dimension's start advances by coef * (loop variable)
    extras: tuple = ()  # Pieces, after the loop's window positions (only with a loop)

    @property
    def width(self) -> int:
        """Window positions counted: the loop's window, then each extra piece's."""
        return self.size + sum(p.size for p in self.extras)


@attrs.frozen
class WgmmaWindow:
    """The k window a wgmma operand holds at each iteration of its loop: `tag(operand)[component] ==
    coef * loop.var + coord(operand)[axis]` for every element. Guessed from the tile and the loop
    (`wgmma_windows`); the solver proves it (smt/hopper.py, as an implicit tag assertion) before
    coverage uses it as an anchor."""

    line: int
    which: str  # "a" | "b"
    key: Key
    component: int
    axis: int
    coef: int
    loop: ir.For
    label: str

    @property
    def source(self) -> str:
        return (f"wgmma operand window (line {self.line}, {self.which}): tag({self.label})[{self.component}] == "
                f"{self.coef} * {self.loop.var} + coord({self.label})[{self.axis}]")


def wgmma_windows(kernel: ir.Kernel) -> list:
    """The k window of every wgmma operand that holds a contract's reduced dimension."""
    keys = _contract_keys(kernel)
    if not keys:
        return []
    srcs = _sources(kernel.body)
    out = []

    def walk(body, loops):
        for s in body:
            if isinstance(s, ir.Assign) and isinstance(s.op, ir.Wgmma) and loops:
                loop = loops[-1]
                for which, view, kaxis in (("a", s.op.a, 1), ("b", s.op.b, 0)):
                    held = srcs.get(view.base, set())
                    extent = view.tile[kaxis]
                    for key in keys:
                        decl = kernel.tag_of(key.tensor)
                        if held != {key.tensor} or decl is None or extent % loop.step:
                            continue
                        want = ir.IVar(decl.index_vars[key.dim])
                        comps = [c for c, x in enumerate(decl.components) if x == want]
                        if comps:
                            out.append(WgmmaWindow(s.span.line, which, key, comps[0], kaxis, extent // loop.step,
                                                   loop, f"{view.base}[...]"))
            elif isinstance(s, ir.For):
                walk(s.body, loops + (s,))
            elif isinstance(s, ir.If):
                walk(s.then, loops)
                walk(s.orelse, loops)

    walk(kernel.body, ())
    return out


class Coverage:
    """Run over `kernel` for the reductions of its contracts; `problems` lists the incomplete
    ones that reach an output, `loop_checks` the windows whose loops the solver must check.
    `proved_windows`: the sources of the wgmma operand windows the solver proved (the others
    make a wgmma unsupported)."""

    def __init__(self, kernel: ir.Kernel, proved_windows: frozenset = frozenset(), timeout_s: float = 10.0):
        self.k = kernel
        self.B = kernel.block
        self.tid = np.arange(self.B)
        self.keys = _contract_keys(kernel)
        self.windows: dict[Key, Window] = {}
        self.problems: list[Problem] = []
        self.reported: list[int] = []  # problems that reach an output
        self.reported_at: dict[int, set] = {}  # problem -> the outputs whose stores it reaches
        self.shared: dict[str, dict] = {}
        self.allocs: dict[str, ir.SharedAlloc] = {}
        self.frag_types: dict[str, ir.FragType] = {}
        self.scope = object()  # which pass over a loop body wrote a shared cell
        self.lets: dict[str, ir.IExpr] = {}  # integer names, expanded where they are used
        self.rest: list = []  # the statements after the one being walked, at each enclosing level
        self.last_only: dict = {}  # Key -> (loop, name): only the loop's last iteration reaches `name`'s readers
        self.repeated: dict = {}  # Key -> (loop, name): `name` adds the same window at every iteration of loop
        if not self.keys:
            return
        self.anchors: dict[str, Anchor] = {}
        self.find_anchors(kernel.body, ())
        self.lets = {}
        self.find_windows(kernel.body, ())
        self.wgmma_windows = {}
        for w in wgmma_windows(kernel):
            if w.source in proved_windows:
                self.wgmma_windows[(w.line, w.which)] = w
                self.anchors[f"wgmma.{w.which}@{w.line}"] = Anchor(w.key, f"wgmma.{w.which}@{w.line}", w.axis,
                                                                   w.coef, w.loop, ir.IConst(0))
        for a in self.anchors.values():
            self.windows[a.key] = Window(a.coef * a.loop.step, a.loop, a.coef)
        self.lets = {}
        env: dict = {}
        self.walk(kernel.body, env, None, np.ones(self.B, bool))
        for key, w in list(self.windows.items()):
            if w.extras:
                # (a reported problem decides its output's obligation; with several outputs, only
                # when every output with a contract has one is the check of the pieces not needed)
                if not all(self.reported_for(c.tensor) for c in kernel.contracts) or not kernel.contracts:
                    self.check_pieces(key, w, timeout_s)
                self.windows[key] = self.whole_walk(key, w)

    # -- windows read outside the loop that walks the dimension: the solver's part -------------
    def check_pieces(self, key: Key, w: Window, timeout_s: float):
        """Z3: for every size the `requires` allow, each element of the dimension lies in exactly
        one (sum; at least one for max and min) of the loop's windows and the pieces read outside
        it. The counts per window position are exact already (1 or at least 1 each): so the
        reduction combines each element once. Out-of-range positions are masked (bounds, padding).
        A counterexample is reported as `WindowsDoNotTile`, anything undecided as Unsupported."""
        loop = w.loop
        span = next((c.span for c in self.k.contracts if any(t == key.tensor and d == key.dim
                                                             for _, t, d in c.reduced_dims())), loop.span)
        env = {n: z3.Int(n) for n in self.k.sizes}
        try:
            cons = [v >= 1 for v in env.values()] + [z3_truth(z3_int(r, env)) for r in self.k.requires]
            extent = z3_int(self.k.param(key.tensor).shape[key.dim], env)
            start = z3_int(subst(loop.start, self.lets), env)
            stop = z3_int(subst(loop.stop, self.lets), env)
            bases = [z3_int(p.base, env) for p in w.extras]
        except KeyError as e:
            raise Unsupported(f"the range of the loop at line {loop.span.line} or the start of a window of "
                              f"{key.tensor} read outside it uses {e.args[0]}", loop.span) from None
        trips = z3.If(stop > start, (stop - start + loop.step - 1) / loop.step, 0)
        lo = w.coef * start
        j = z3.FreshInt("element")
        inside = [z3.And(trips >= 1, lo <= j, j < lo + trips * w.size)]
        inside += [z3.And(b <= j, j < b + p.size) for b, p in zip(bases, w.extras, strict=True)]
        count = z3.Sum([z3.If(x, 1, 0) for x in inside])
        ops = {op for c in self.k.contracts for op, t, d in c.reduced_dims() if (t, d) == (key.tensor, key.dim)}
        exact = bool(ops - {"max", "min"})
        bad = z3.And(0 <= j, j < extent, count != 1 if exact else count == 0)
        last = self.last_only.get(key)
        twice = trips >= 2 if last is not None and last[0] is loop else z3.BoolVal(False)
        solver = z3.Solver()
        solver.set("timeout", int(timeout_s * 1000))
        solver.add(*cons, z3.Or(bad, twice))
        res = solver.check()
        if res == z3.unknown:
            raise Unsupported(f"the solver gave up on the windows of {key.tensor}'s dimension {key.dim} read inside "
                              f"and outside the loop at line {loop.span.line} ({solver.reason_unknown()})", span)
        if res == z3.unsat:
            return
        m = solver.model()

        def val(x):
            return m.eval(x, model_completion=True).as_long()

        sizes = {n: val(v) for n, v in env.items()}
        at = ", ".join(f"{n} = {v}" for n, v in sizes.items())
        n_trips = val(trips)
        if z3.is_true(m.eval(twice, model_completion=True)):
            raise WindowsDoNotTile(
                f"at {at} only the last of the {n_trips} iterations of the loop at line {loop.span.line} reaches the "
                f"output ('{last[1]}' is assigned in the loop, not accumulated)", span, key, sizes)
        elem = val(j)
        seen = [f"the loop at line {loop.span.line} (elements {val(lo)} .. {val(lo) + n_trips * w.size - 1})"
                if n_trips else f"the loop at line {loop.span.line} (no iteration)"]
        seen += [f"the window read at line {p.line} (elements {val(b)} .. {val(b) + p.size - 1})"
                 for b, p in zip(bases, w.extras, strict=True)]
        raise WindowsDoNotTile(
            f"at {at} element {elem} of {key.tensor}'s dimension {key.dim} (extent {val(extent)}) is combined "
            f"{val(count)} times, not {'exactly' if exact else 'at least'} once, by the windows of "
            f"{'; '.join(seen)}", span, key, sizes, elem, val(count))

    def whole_walk(self, key: Key, w: Window) -> Window:
        """The window the loop range check (smt/obligations/reductions.py) sees once the pieces are
        proved to tile the dimension with the loop (or a problem decides the obligation): one walk
        over the whole extent in steps of the loop's window, which that check proves trivially."""
        loop = ir.For(w.loop.var, ir.IConst(0), self.k.param(key.tensor).shape[key.dim], w.size, (),
                      span=w.loop.span)
        return Window(w.size, loop, 1, w.extras)

    # -- anchors: fragments whose elements a proved tag assertion names ------------------------
    def find_anchors(self, body, loops):
        for s in body:
            if isinstance(s, ir.Let):
                self.lets[s.name] = subst(s.value, self.lets)
            elif isinstance(s, ir.Assert) and loops:
                a = self.anchor_of(s, loops[-1])
                if a is not None:
                    self.anchors[a.frag] = a
            elif isinstance(s, ir.For):
                self.find_anchors(s.body, loops + (s,))
            elif isinstance(s, ir.If):
                self.find_anchors(s.then, loops)
                self.find_anchors(s.orelse, loops)

    def anchor_of(self, s: ir.Assert, loop: ir.For) -> Anchor | None:
        c = s.cond
        if not (isinstance(c, ir.IBin) and c.op == "=="):
            return None
        for lhs, rhs in ((c.a, c.b), (c.b, c.a)):
            if not isinstance(lhs, ir.ITag):
                continue
            coord = _single_coord(rhs, lhs.frag)
            if coord is None:
                continue
            rest = subst(_drop_coord(rhs), self.lets)
            try:
                coef, rest = _affine_in(rest, loop.var, s.span)
            except Unsupported:
                return None
            for key in self.keys:
                decl = self.k.tag_of(key.tensor)
                if (decl is not None and lhs.component < len(decl.components)
                        and decl.components[lhs.component] == ir.IVar(decl.index_vars[key.dim])
                        and self.holds(lhs.frag, key.tensor)):
                    return Anchor(key, lhs.frag, coord.axis, coef, loop, rest) if coef > 0 else None
        return None

    def holds(self, frag: str, tensor: str) -> bool:
        """Whether fragment `frag` can hold elements of `tensor` (and of no other input): by the
        tensors whose data reaches the shared buffer or global view it is loaded from."""
        srcs = _sources(self.k.body)
        return srcs.get(frag) == {tensor}

    # -- windows: which loop walks each reduced dimension ----------------------------------------
    def find_windows(self, body, loops, reads=None):
        top = reads is None
        reads = {} if top else reads  # Key -> [(start, extent, enclosing loops, span)]
        for s in body:
            if isinstance(s, ir.Let):
                self.lets[s.name] = subst(s.value, self.lets)
            src = None
            if isinstance(s, ir.Assign) and isinstance(s.op, ir.Load) and s.op.src.space == "global":
                src = s.op.src
            elif isinstance(s, ir.CopyAsync) and s.src.space == "global":
                src = s.src
            if src is not None:
                for key in self.keys:
                    if key.tensor == src.base and not self.anchored(key):
                        sl = src.index[key.dim]
                        start = subst(sl.start if isinstance(sl, ir.Slice) else sl.index, self.lets)
                        extent = sl.extent if isinstance(sl, ir.Slice) else 1
                        reads.setdefault(key, []).append((start, extent, loops, s.span))
            if isinstance(s, ir.For):
                self.find_windows(s.body, loops + (s,), reads)
            elif isinstance(s, ir.If):
                self.find_windows(s.then, loops, reads)
                self.find_windows(s.orelse, loops, reads)
        if top:
            for key, found in reads.items():
                self.note_window(key, found)

    def anchored(self, key: Key) -> bool:
        return any(a.key == key for a in self.anchors.values())

    def note_window(self, key: Key, reads: list):
        """The window of `key` from every global read of its tensor: one loop walks the dimension
        (its reads advance with the loop variable) and the other reads lie outside that loop, in the
        loops around it (each a Piece: a peeled tail, a prologue chunk); or no loop walks it and
        the window is the widest tile read."""
        walks, others = [], []
        for start, extent, loops, span in reads:
            found = None
            for i, loop in enumerate(loops):
                coef, _ = _affine_in(start, loop.var, span)
                if coef:
                    if found is not None:
                        raise Unsupported(f"{key.tensor}'s dimension {key.dim} is walked by two nested loops", span)
                    found = (loop, coef, loops[:i])
            if found is None:
                others.append((start, extent, loops, span))
            else:
                walks.append((*found, span))
        if not walks:
            self.windows[key] = Window(max(r[1] for r in reads), None, 0)
            return
        loop, coef, outside, _ = walks[0]
        for other_loop, other_coef, _, span in walks[1:]:
            if other_loop is not loop or other_coef != coef:
                raise Unsupported(f"{key.tensor}'s dimension {key.dim} is walked by two loops (lines {loop.span.line} "
                                  f"and {other_loop.span.line}) or with two strides", span)
        pieces: dict = {}
        offset = coef * loop.step
        for start, extent, loops, span in others:
            if any(x is loop for x in loops):
                raise Unsupported(f"{key.tensor}'s dimension {key.dim} is read inside the loop that walks it at a "
                                  "start that does not move with the loop (a prefetched tile)", span)
            same_loops = len(loops) == len(outside) and all(a is b for a, b in zip(loops, outside, strict=True))
            if not same_loops or coef <= 0:
                raise Unsupported(f"{key.tensor}'s dimension {key.dim} is read outside the loop that walks it (line "
                                  f"{loop.span.line}) and in other loops than those around it", span)
            base, _ = _split_thread_part(start)
            if (base, extent) not in pieces:
                pieces[(base, extent)] = Piece(base, extent, offset, span.line)
                offset += extent
        self.windows[key] = Window(coef * loop.step, loop, coef, tuple(pieces.values()))

    # -- statements ----------------------------------------------------------------------------
    def walk(self, body, env, loop, active):
        for i, s in enumerate(body):
            self.rest.append(body[i + 1:])  # what runs after `s` at this level (for `loop`)
            try:
                self.step(s, env, loop, active)
            finally:
                self.rest.pop()

    def step(self, s, env, loop, active):
        if isinstance(s, ir.Let):
            self.lets[s.name] = subst(s.value, self.lets)
        elif isinstance(s, ir.Assign):
            self.frag_types[s.name] = s.type
            env[s.name] = self.assign(s, env, loop)
        elif isinstance(s, ir.SharedAlloc):
            self.allocs[s.name] = s
            self.shared[s.name] = {}
        elif isinstance(s, (ir.Store, ir.Stmatrix)):
            self.store(s.as_store() if isinstance(s, ir.Stmatrix) else s, env, loop, active)
        elif isinstance(s, ir.TmaStore):
            self.tma_store(s)
        elif isinstance(s, ir.CopyAsync):
            prov = self.load_global(s.src, s.tv, s.span, loop)
            typ = ir.FragType("f32", s.tv)
            self.write_shared(s.dst, prov, typ, np.broadcast_to(active, (self.B,)), s.span)
        elif isinstance(s, ir.For):
            self.loop(s, env, active)
        elif isinstance(s, ir.If):
            self.branch(s, env, loop, active)

    def loop(self, s: ir.For, env, active):
        before = dict(env)
        # a name the body overwrites before reading it is not carried: after the loop it holds the
        # last iteration's value (`acc = mma(a, b, zeros(...))` in the k loop), as if first assigned there
        fresh = {n for n in _assigned(s.body) if n in before and _overwritten_first(s.body, n)}
        carried = [n for n in _assigned(s.body) if n in before and n not in fresh]
        for name in carried:
            if any(self.holds_loop_data(key, e, s) for key, e in before[name].entries.items()):
                raise Unsupported(f"'{name}' enters the loop at line {s.span.line} already holding part of a "
                                  "reduction", s.span)
        outer, self.scope = self.scope, object()  # shared data written before this iteration is stale
        body_env = dict(env)
        self.walk(s.body, body_env, s, active)
        self.scope = outer
        for name in carried:
            self.check_accumulator(s, name, body_env[name])
            self.check_pieces_unchanged(s, name, before[name], body_env[name])
            for key, e in body_env[name].entries.items():
                # every iteration adds the same window again where the loop does not walk the dimension:
                # a sum then counts each element once per iteration (max and min do not mind)
                w = self.windows.get(key)
                if e.op == "sum" and e.counts.any() and w is not None and w.loop is not s:
                    self.repeated.setdefault(key, (s, name))
        self.note_last_iteration(s, {n: v for n, v in before.items() if n not in fresh}, body_env)
        env.update(body_env)

    def holds_loop_data(self, key: Key, e: Entry, s: ir.For) -> bool:
        """Whether `e` holds elements of `key` that loop `s` may combine again: any, except the
        pieces read outside `s` where `s` walks the dimension (window positions of their own)."""
        w = self.windows.get(key)
        if w is not None and w.loop is s and w.extras:
            return bool(e.counts[..., :w.size].any())
        return e.op is not None or bool(e.counts.any())

    def check_pieces_unchanged(self, s: ir.For, name: str, before: Prov, after: Prov):
        """The body's counts are those of one iteration: a piece read outside the loop that the body
        combines into a carried value would enter once per iteration, not once."""
        for key in set(before.entries) | set(after.entries):
            w = self.windows.get(key)
            if w is None or w.loop is not s or not w.extras:
                continue
            old, new = (p.entries[key].counts[..., w.size:] if key in p.entries else None for p in (before, after))
            same = np.array_equal(old, new) if old is not None and new is not None else \
                not (old if old is not None else new).any()
            if not same:
                raise Unsupported(f"'{name}' combines {key.tensor}'s elements read outside the loop at line "
                                  f"{s.span.line} at every iteration of it", s.span)

    def note_last_iteration(self, s: ir.For, before: dict, body_env: dict):
        """A value assigned in the loop's body, not before it, and read after it holds what the last
        iteration computed: of a dimension the loop walks, one window (`acc = reduce_sum(xs)` in the
        loop instead of `acc = acc + reduce_sum(xs)`). The counts of one iteration are complete, so
        the window check must also rule out a second iteration (`last_only`)."""
        after = {n for rest in self.rest for st in _walk_stmts(rest) for n in _reads(st)}
        for name, prov in body_env.items():
            if name in before or name not in after:
                continue
            for key, e in prov.entries.items():
                w = self.windows.get(key)
                if w is not None and w.loop is s and self.holds_loop_data(key, e, s):
                    self.last_only.setdefault(key, (s, name))

    def check_accumulator(self, loop: ir.For, name: str, prov: Prov):
        """A value carried around the loop may hold reduction data only as an accumulator:
        `acc = acc (+) e` or `acc = mma(a, b, acc)`, its one assignment in the body, or a chain of
        combines that takes the old value once (`accumulation_chain`: `acc = acc + a + b`)."""
        if not any(e.op is not None or e.counts.any() for e in prov.entries.values()):
            return
        if accumulation_chain(loop.body, name) is not None:  # (`acc = acc (+) e` is a chain of one)
            return
        assigns = [st for st in _walk_stmts(loop.body) if isinstance(st, ir.Assign) and st.name == name]
        ok = len(assigns) == 1 and assigns[0] in loop.body
        if ok:
            op = assigns[0].op
            ok = (isinstance(op, ir.Mma) and op.c == name and name not in (op.a, op.b)) or \
                (isinstance(op, ir.Wgmma) and op.c == name)
        if ok:
            reads = [st for st in _walk_stmts(loop.body) if st is not assigns[0] and name in _reads(st)]
            ok = not reads
        if not ok:
            raise Unsupported(f"'{name}' carries part of a reduction from one iteration of the loop at line "
                              f"{loop.span.line} to the next other than as an accumulator (acc = acc + e)",
                              assigns[0].span if assigns else loop.span)

    def branch(self, s: ir.If, env, loop, active):
        try:
            cond = self.per_thread(s.cond, loop, s.span, "the condition")
        except Unsupported:
            return self.opaque_branch(s, env, loop, active)
        then_env, else_env = dict(env), dict(env)
        self.walk(s.then, then_env, loop, active & cond)
        self.walk(s.orelse, else_env, loop, active & ~cond)
        for name in set(then_env) | set(else_env):
            a, b = then_env.get(name), else_env.get(name)
            if a is b or b is None or a is None:
                env[name] = a if b is None else b
                continue
            env[name] = _select(cond, a, b)

    def opaque_branch(self, s: ir.If, env, loop, active):
        """A branch on sizes or loop counters: allowed only where neither side moves reduction data."""
        before = {buf: dict(cells) for buf, cells in self.shared.items()}
        for side in (s.then, s.orelse):
            side_env = dict(env)
            self.walk(side, side_env, loop, active)
            moved = [n for n, p in side_env.items() if env.get(n) is not p and p.entries]
            moved += [buf for buf, cells in self.shared.items()
                      if any(c[0] for k, c in cells.items() if before.get(buf, {}).get(k) is not c)]
            if moved:
                raise Unsupported(f"reduction data ({moved[0]}) moves under a condition on sizes or loop counters",
                                  s.span)
            for n, p in side_env.items():
                env.setdefault(n, p)

    # -- integer values: per thread, or unsupported --------------------------------------------
    def per_thread(self, e: ir.IExpr, loop, span, what) -> np.ndarray:
        try:
            return np.broadcast_to(np.asarray(_eval_threads(subst(e, self.lets), self.B, self.k)), (self.B,))
        except KeyError as err:
            raise Unsupported(f"{what} depends on {err.args[0]}, not only on the thread", span) from None

    # -- fragments -----------------------------------------------------------------------------
    def empty(self, typ: ir.FragType) -> Prov:
        return Prov({}, (frozenset(),) * len(typ.tile), np.full((self.B, typ.values), -1))

    def assign(self, s: ir.Assign, env, loop) -> Prov:
        op, typ = s.op, s.type
        anchor = self.anchors.get(s.name)
        if anchor is not None:
            return self.anchored_leaf(s, anchor, loop)
        if isinstance(op, ir.Load):
            if op.src.space == "global":
                return self.load_global(op.src, op.tv, s.span, loop)
            return self.read_shared(op.src, typ, s.span)
        if isinstance(op, ir.Full):
            return self.empty(typ)
        if isinstance(op, ir.Elementwise):
            return self.elementwise(s, op, env)
        if isinstance(op, ir.Cast):
            return env[op.arg]
        if isinstance(op, ir.Relabel):
            src = env[op.arg]
            return attrs.evolve(src, axes=_relabelled_axes(src.axes, self.frag_types[op.arg].tile, typ))
        if isinstance(op, ir.Reduce):
            return self.reduce(s, op, env[op.arg])
        if isinstance(op, ir.Shuffle):
            return self.shuffle(s, op, env[op.arg], loop)
        if isinstance(op, ir.Mma):
            return self.mma(s, op, env)
        if isinstance(op, ir.Wgmma):
            return self.wgmma(s, op, env, loop)
        if self.only_feeds_anchors(s.name):  # (`at = ldmatrix(..., trans=True); a = transpose(at)`, `a` anchored)
            return self.empty(typ)
        raise Unsupported(f"{type(op).__name__} is beyond the coverage analysis", s.span)

    def only_feeds_anchors(self, name: str) -> bool:
        """Whether every use of fragment `name` is a transpose, reshape or cast whose result a tag
        assertion anchors: coverage starts from that result (`anchored_leaf` reads its elements off the
        proved assertion), so what `name` holds is never counted."""
        uses = [st for st in ir.walk_stmts(self.k.body)
                if name in _operands(st.op if isinstance(st, ir.Assign) else st)]
        return bool(uses) and all(isinstance(st, ir.Assign) and isinstance(st.op, (ir.Relabel, ir.Cast))
                                  and st.name in self.anchors for st in uses)

    def wgmma(self, s: ir.Assign, op: ir.Wgmma, env, loop) -> Prov:
        """c(i, j) += sum_k a(i, k) b(k, j) over the shared tiles, each k of the tile once (the
        instruction's definition); which k of the input each tile k is, is the operand's window
        (proved by the solver, else unsupported). The operands are counted as fragments that
        spread the tile over the block's threads (the count is per coordinate)."""
        names = {}
        for which, view in (("a", op.a), ("b", op.b)):
            w = self.wgmma_windows.get((s.span.line, which))
            if w is None:
                raise Unsupported(f"the k window of the wgmma's {which} operand ({view.base}) is not proved (the "
                                  "solver checks tag == tile k extent * loop variable + coordinate)", s.span)
            n = int(np.prod(view.tile))
            if n % self.B:
                raise Unsupported(f"the wgmma's {which} tile does not spread over {self.B} threads", s.span)
            name = f"wgmma.{which}@{w.line}"
            typ = ir.FragType("bf16", ir.TVLayout(Layout((self.B, n // self.B), (n // self.B, 1)), tuple(view.tile)))
            self.frag_types[name] = typ
            env[name] = self.anchored_leaf(ir.Assign(name, op, typ, s.span), self.anchors[name], loop)
            names[which] = name
        mma = ir.Mma(names["a"], names["b"], op.c, "wgmma")
        return self.mma_by_coordinate(s, mma, env[names["a"]], env[names["b"]], env[op.c])

    def anchored_leaf(self, s: ir.Assign, a: Anchor, loop) -> Prov:
        if loop is not a.loop:
            raise Unsupported(f"'{s.name}' is assigned outside the loop of its tag assertion", s.span)
        coords = s.type.coords.coord_table()
        base = self.per_thread(a.rest, loop, s.span, "the tag assertion's offset")
        offs = base[:, None] + coords[:, :, a.axis]
        w = self.windows[a.key]
        if offs.min() < 0 or offs.max() >= w.size:
            raise Unsupported(f"the tag assertion on '{s.name}' names elements outside one step of the loop", s.span)
        counts = np.zeros((self.B, s.type.values, w.width), COUNT)
        np.put_along_axis(counts, offs[..., None].astype(np.int64), 1, axis=-1)
        axes = [frozenset()] * len(s.type.tile)
        axes[a.axis] = frozenset({a.key})
        return Prov({a.key: Entry(None, counts)}, tuple(axes), np.full((self.B, s.type.values), -1))

    def load_global(self, view: ir.View, tv, span, loop) -> Prov:
        typ = ir.FragType("f32", tv)
        self.whole_block(typ, span)
        axes_dims = view.tile_axes()
        coords = tv.coord_table()  # [T, V, rank]
        entries = {}
        for key in self.keys:
            if key.tensor != view.base or self.anchored(key):
                continue
            w = self.windows[key]
            sl = view.index[key.dim]
            start = subst(sl.start if isinstance(sl, ir.Slice) else sl.index, self.lets)
            rest, first, size = start, 0, w.size
            if w.loop is not None:
                coef, rest = _affine_in(start, w.loop.var, span)
                if not coef:  # a read outside the loop: its own piece of the window (note_window)
                    base, rest = _split_thread_part(start)
                    extent = sl.extent if isinstance(sl, ir.Slice) else 1
                    piece = next((p for p in w.extras if p.base == base and p.size == extent), None)
                    if piece is None:
                        raise Unsupported(f"a load of {key.tensor} outside the loop that walks its dimension {key.dim} "
                                          "has no window of its own", span)
                    first, size = piece.offset, piece.size
            base = self.per_thread(rest, loop, span, f"the start of {key.tensor}'s dimension {key.dim}")
            if key.dim in axes_dims:
                offs = base[:, None] + coords[:, :, axes_dims.index(key.dim)]
            else:
                offs = np.broadcast_to(base[:, None], coords.shape[:2])
            if offs.min() < 0 or offs.max() >= size:
                raise Unsupported(f"a load of {key.tensor} reaches outside the {size} elements one step of the "
                                  f"reduction covers along dimension {key.dim}", span)
            counts = np.zeros((self.B, typ.values, w.width), COUNT)
            np.put_along_axis(counts, (first + offs[..., None]).astype(np.int64), 1, axis=-1)
            entries[key] = Entry(None, counts)
        axes = tuple(frozenset({Key(view.base, d)}) for d in axes_dims)
        return Prov(entries, axes, np.full((self.B, typ.values), -1))

    def elementwise(self, s: ir.Assign, op: ir.Elementwise, env) -> Prov:
        provs = [env[a] for a in op.args if isinstance(a, str)]
        if not provs:
            return self.empty(s.type)
        bad = _first_bad([p.bad for p in provs])
        axes = list(_merge_axes([p.axes for p in provs]))
        names = [a for a in op.args if isinstance(a, str)]
        for a, p in zip(names, provs, strict=True):  # a lower-rank operand: along the axes its values follow
            if len(p.axes) < len(axes) and a in self.frag_types:
                for mine, theirs in axis_pairs(self.frag_types[a], s.type).items():
                    axes[theirs] |= p.axes[mine]
        axes = tuple(axes)
        entry = semantics.FLOAT_BINARY.get(op.op) if len(op.args) == 2 else None
        combines = entry.combines if entry is not None and entry.combines in semantics.REDUCE_OPS else None
        entries: dict = {}
        if combines is not None and len(provs) == 2:
            for key in set(provs[0].entries) | set(provs[1].entries):
                parts = [p.entries.get(key) for p in provs]
                if all(e is not None and e.op is None for e in parts) and \
                        np.array_equal(parts[0].counts, parts[1].counts):
                    # both operands hold the same element at every value of every thread (`b + a` of
                    # two loads of one view): an elementwise function of it, as `b - a` is, not two
                    # elements combined; what the function is, the contract's expression decides
                    # (smt/reduction_flow.check_expressions: `sum(x + x)` is not `sum(x)`)
                    entries[key] = parts[0]
                    continue
                if all(e is None or e.op in (None, combines) for e in parts):
                    counts = sum(e.counts for e in parts if e is not None)
                    entries[key] = Entry(combines, counts)
                else:
                    for e in parts:
                        if e is not None and e.op:
                            bad = self.finish_all(s.span, {key: e}, bad)
            return Prov(entries, axes, bad)
        factors = [a for a in op.args if not isinstance(a, str)]
        if op.op == "*" and len(provs) == 1 and len(factors) == 1 and \
                (isinstance(factors[0], ir.FConst) or ir.float_scalar_param(self.k, factors[0])) and \
                all(e.op in (None, "sum") for e in provs[0].entries.values()):
            # a partial sum scaled by a value the same in every thread (a constant, a scalar parameter)
            # goes on as a partial sum: sum(c * p) = c * sum(p) (the contract's term takes c out too)
            return Prov(dict(provs[0].entries), axes, bad)
        for p in provs:
            finished = {k: e for k, e in p.entries.items() if e.op is not None}
            bad = self.finish_all(s.span, finished, bad)
            for key, e in p.entries.items():
                if e.op is None:
                    if key in entries and not np.array_equal(entries[key].counts, e.counts):
                        raise Unsupported(f"'{op.op}' combines different elements of {key.tensor} outside a "
                                          "reduction", s.span)
                    entries[key] = e
        return Prov(entries, axes, bad)

    def reduce(self, s: ir.Assign, op: ir.Reduce, src: Prov) -> Prov:
        groups = ir.reduction_groups(self.frag_types[op.arg], s.type)  # [T, V, V]
        axis_keys = src.axes[op.axis] if op.axis < len(src.axes) else frozenset()
        bad = src.bad
        entries = {}
        for key, e in src.entries.items():
            if e.op not in (None, op.op):
                bad = self.finish_all(s.span, {key: e}, bad)
                continue
            if axis_keys and key not in axis_keys and e.op is None:
                # elements of another dimension ride along (a row index); they must not be summed
                entries[key] = e
                continue
            if axis_keys and key not in axis_keys:
                raise Unsupported(f"reduce_{op.op} along axis {op.axis} combines partial {op.op}s of "
                                  f"{key.tensor}'s dimension {key.dim} across another dimension", s.span)
            counts = np.einsum("tvw,two->tvo", groups.astype(COUNT), e.counts)  # exact: small integers
            if op.scope == "warp":
                counts = _butterfly(counts, op.lanes)
            entries[key] = Entry(op.op, counts)
        gbad = np.where(groups, bad[:, None, :], -1).max(axis=-1)
        if op.scope == "warp":
            gbad = _butterfly_bad(gbad, op.lanes)
        return Prov(entries, src.axes, gbad)

    def shuffle(self, s: ir.Assign, op: ir.Shuffle, src: Prov, loop) -> Prov:
        arg = self.per_thread(op.lane_arg, loop, s.span, "the shuffle's lane")
        srct = semantics.shuffle_source_thread(op.mode, self.tid, arg)
        entries = {k: Entry(e.op, e.counts[srct]) for k, e in src.entries.items()}
        return Prov(entries, src.axes, src.bad[srct])

    def mma(self, s: ir.Assign, op: ir.Mma, env) -> Prov:
        a, b, c = env[op.a], env[op.b], env[op.c]
        if op.atom != "fma":
            return self.mma_by_coordinate(s, op, a, b, c)
        ia, ib = ir.fma_pairing(self.frag_types[op.a], self.frag_types[op.b], s.type)  # [T, Vc, K]
        t = self.tid[:, None, None]
        entries = {}
        bad = _first_bad([c.bad, a.bad[t, ia].max(axis=-1), b.bad[t, ib].max(axis=-1)])
        for key, e in c.entries.items():
            if e.op not in (None, "sum"):
                bad = self.finish_all(s.span, {key: e}, bad)
            else:
                entries[key] = Entry("sum", e.counts)
        for src, idx, kaxis in ((a, ia, 1), (b, ib, 0)):
            kkeys = src.axes[kaxis] if kaxis < len(src.axes) else frozenset()
            for key, e in src.entries.items():
                if e.op is not None:
                    bad = self.finish_all(s.span, {key: e}, bad)
                    continue
                if key not in kkeys:
                    continue  # the row (column) of a (b): tags check it
                add = e.counts[t, idx].sum(axis=2)  # [T, Vc, W]
                prev = entries.get(key)
                entries[key] = Entry("sum", add if prev is None else prev.counts + add)
        axes = (a.axes[0] if a.axes else frozenset(), b.axes[1] if len(b.axes) > 1 else frozenset())
        return Prov(entries, axes, bad)

    def mma_by_coordinate(self, s: ir.Assign, op: ir.Mma, a: Prov, b: Prov, c: Prov) -> Prov:
        """A tensor-core mma computes c(i, j) += sum_k a(i, k) b(k, j) over the tiles, whichever
        lanes hold the registers (the mma obligation proves the pairing). Counts are taken per
        tile coordinate, which requires every holder of an operand element to agree on them."""
        ta, tb = self.frag_types[op.a], self.frag_types[op.b]
        cc = s.type.coords.coord_table()  # [T, Vc, 2]
        entries = {key: Entry("sum", e.counts) for key, e in c.entries.items() if e.op in (None, "sum")}
        bad = c.bad
        for src in (a, b):  # an operand already wrong makes every product wrong (conservative)
            if (src.bad >= 0).any():
                bad = np.where(bad >= 0, bad, int(src.bad.max()))
        for src, typ, kaxis in ((a, ta, 1), (b, tb, 0)):
            coords = typ.coords.coord_table()
            kkeys = src.axes[kaxis] if kaxis < len(src.axes) else frozenset()
            for key, e in src.entries.items():
                if e.op is not None or key not in kkeys:
                    if e.op is not None:
                        bad = self.finish_all(s.span, {key: e}, bad)
                    continue
                K = typ.tile[kaxis]
                other = typ.tile[1 - kaxis]
                table = np.full((other, K, e.counts.shape[-1]), -1, COUNT)
                rk = coords[..., ::-1] if kaxis == 0 else coords  # [T, V, (row, k)]
                flat = (rk[..., 0] * K + rk[..., 1]).reshape(-1)
                if np.unique(flat).size == flat.size:  # one holder per element: nothing to compare
                    table.reshape(other * K, -1)[flat] = e.counts.reshape(flat.size, -1)
                    coords = coords[:0]  # (the loop below has nothing left to do)
                for t in range(coords.shape[0]):
                    for v in range(coords.shape[1]):
                        r, k = (coords[t, v, 0], coords[t, v, 1]) if kaxis == 1 else (coords[t, v, 1], coords[t, v, 0])
                        if table[r, k, 0] >= 0 and not np.array_equal(table[r, k], e.counts[t, v]):
                            raise Unsupported(f"holders of one element of {op.a if kaxis == 1 else op.b} disagree on "
                                              "what it holds", s.span)
                        table[r, k] = e.counts[t, v]
                if (table < 0).any():
                    raise Unsupported("an element of an mma operand is held by no lane", s.span)
                rows = cc[:, :, 0] if kaxis == 1 else cc[:, :, 1]
                add = table.sum(axis=1)[rows]  # [T, Vc, W]: the sum over k of each row (column)
                prev = entries.get(key)
                entries[key] = Entry("sum", add if prev is None else prev.counts + add)
        axes = (a.axes[0] if a.axes else frozenset(), b.axes[1] if len(b.axes) > 1 else frozenset())
        return Prov(entries, axes, bad)

    # -- shared memory: logical element -> what was written there in this pass ---------------
    def write_shared(self, dst: ir.View, prov: Prov, typ: ir.FragType, active, span):
        cells = self.shared.setdefault(dst.base, {})
        if not prov.entries and (prov.bad < 0).all():
            return  # nothing a reduction counts (an anchored operand's stages, other tensors)
        flat = self.shared_cells(dst, typ, span)  # [T, V] flat element of the buffer
        for t in np.nonzero(active)[0]:
            for v in range(flat.shape[1]):
                cells[int(flat[t, v])] = ({k: (e.op, e.counts[t, v]) for k, e in prov.entries.items()},
                                          int(prov.bad[t, v]), self.scope)

    def whole_block(self, typ: ir.FragType, span) -> None:
        if typ.coords.threads != self.B:
            raise Unsupported(f"a fragment of a warpgroup role ({typ.coords.threads} of the block's {self.B} "
                              "threads) moves reduction data; the analysis follows fragments of the whole block", span)

    def shared_cells(self, view: ir.View, typ: ir.FragType, span) -> np.ndarray:
        self.whole_block(typ, span)
        alloc = self.allocs[view.base]
        starts = []
        for sl in view.index:
            e = sl.start if isinstance(sl, ir.Slice) else sl.index
            starts.append(self.per_thread(e, None, span, f"the index into {view.base}"))
        coords = typ.coords.coord_table()
        axes = view.tile_axes()
        full = []
        for d, st in enumerate(starts):
            c = st[:, None] + (coords[:, :, axes.index(d)] if d in axes else 0)
            full.append(np.broadcast_to(c, coords.shape[:2]))
        return np.ravel_multi_index(tuple(full), alloc.shape, mode="clip")

    def read_shared(self, view: ir.View, typ: ir.FragType, span) -> Prov:
        cells = self.shared.get(view.base, {})
        if not any(c[0] or c[1] >= 0 for c in cells.values()):
            return self.empty(typ)
        flat = self.shared_cells(view, typ, span)
        entries: dict = {}
        bad = np.full((self.B, typ.values), -1)
        for t in range(self.B):
            for v in range(typ.values):
                cell = cells.get(int(flat[t, v]))
                if cell is None:
                    continue
                data, b, when = cell
                if data and when is not self.scope:
                    raise Unsupported(f"{view.base} is read in another iteration than the one that wrote it "
                                      "(a pipelined stage)", span)
                bad[t, v] = b
                for key, (op, vec) in data.items():
                    if key not in entries:
                        entries[key] = (op, np.zeros((self.B, typ.values, vec.shape[-1]), COUNT))
                    elif entries[key][0] != op:
                        raise Unsupported(f"{view.base} mixes different stages of a reduction", span)
                    entries[key][1][t, v] = vec
        return Prov({k: Entry(op, c) for k, (op, c) in entries.items()},
                    (frozenset(),) * len(typ.tile), bad)

    # -- stores and completed reductions -------------------------------------------------------
    def store(self, s: ir.Store, env, loop, active):
        prov = env[s.value]
        typ = self.frag_types[s.value]
        act = active.copy()
        guessed = None  # a guard on sizes or blocks: every thread is checked, a superset
        if s.where is not None:
            try:
                act &= self.per_thread(s.where, loop, s.span, "where=").astype(bool)
            except Unsupported as e:
                guessed = e
        if s.dst.space == "shared":
            if guessed is not None and (prov.entries or (prov.bad >= 0).any()):
                raise guessed
            self.write_shared(s.dst, prov, typ, act, s.span)
            return
        bad = self.finish_all(s.span, {k: e for k, e in prov.entries.items() if e.op is not None}, prov.bad)
        for t in np.nonzero(act)[0]:
            for v in range(bad.shape[1]):
                if bad[t, v] >= 0:
                    if guessed is not None:
                        raise Unsupported(f"thread {t} stores an incomplete reduction unless {guessed.reason}; "
                                          "which threads store is beyond the analysis", s.span)
                    self.report(int(bad[t, v]), s.dst.base)
                    return

    def tma_store(self, s: ir.TmaStore):
        """The TMA unit stores every element of the shared tile once, whichever thread issues it: counted
        as the store of a fragment that spreads the tile over the block's threads. (Several issuers
        would store it several times: output-once's part.)"""
        n = int(np.prod(s.src.tile))
        if n % self.B:
            raise Unsupported(f"the TMA store's tile does not spread over {self.B} threads", s.span)
        tv = ir.TVLayout(Layout((self.B, n // self.B), (n // self.B, 1)), tuple(s.src.tile))
        prov = self.read_shared(s.src, ir.FragType(self.allocs[s.src.base].dtype, tv), s.span)
        bad = self.finish_all(s.span, {k: e for k, e in prov.entries.items() if e.op is not None}, prov.bad)
        if (bad >= 0).any():
            self.report(int(bad[bad >= 0][0]), s.dst.base)

    def report(self, problem: int, output: str):
        """Problem `problem` reaches a store to `output`."""
        self.reported.append(problem)
        self.reported_at.setdefault(problem, set()).add(output)

    def reported_for(self, output: str) -> list:
        """The problems that reach a store to `output`, first reported first; a problem that reaches
        only outputs without a contract counts for every output (as before: nothing says whose it is)."""
        contracted = {c.tensor for c in self.k.contracts}
        return [i for i in dict.fromkeys(self.reported)
                if output in self.reported_at.get(i, ()) or not (self.reported_at.get(i, set()) & contracted)]

    def finish_all(self, span, entries: dict, bad: np.ndarray) -> np.ndarray:
        """Reductions that end here: values whose counts are not complete become bad."""
        bad = bad.copy()
        for key, e in entries.items():
            w = self.windows.get(key)
            for piece in (w.extras if w is not None else ()):
                if not e.counts[..., piece.offset:piece.offset + piece.size].any():
                    # read outside the loop but never combined here: maybe read for another purpose,
                    # so its missing count is no evidence of a lost element
                    raise Unsupported(f"the window of {key.tensor} read at line {piece.line} outside the loop that "
                                      "walks the dimension does not enter the reduction", span)
            want_once = e.op == "sum"
            wrong = (e.counts != 1) if want_once else (e.counts == 0)  # [T, V, W]
            tv = wrong.any(axis=-1) & (bad < 0)
            for t, v in zip(*np.nonzero(tv), strict=True):
                o = int(np.argmax(wrong[t, v]))
                self.problems.append(Problem(key, e.op, span, int(t), int(v), o, int(e.counts[t, v, o])))
                bad[t, v] = len(self.problems) - 1
        return bad


# -- helpers ----------------------------------------------------------------------------------


def _contract_keys(kernel: ir.Kernel) -> list:
    keys = [Key(t, d) for c in kernel.contracts for _, t, d in c.reduced_dims()]
    return list(dict.fromkeys(keys))


def _affine_in(e: ir.IExpr, var: str, span) -> tuple[int, ir.IExpr]:
    """e = coef * var + rest, with rest free of var; Unsupported when e is not affine in var."""
    if not mentions(e, var):
        return 0, e
    if isinstance(e, ir.IVar) and e.name == var:
        return 1, ir.IConst(0)
    if isinstance(e, ir.IBin) and e.op in ("+", "-"):
        ca, ra = _affine_in(e.a, var, span)
        cb, rb = _affine_in(e.b, var, span)
        return (ca + cb if e.op == "+" else ca - cb), ir.IBin(e.op, ra, rb)
    if isinstance(e, ir.IBin) and e.op == "*":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, ir.IConst) and not mentions(y, var):
                c, r = _affine_in(x, var, span)
                return c * y.value, ir.IBin("*", r, y)
    raise Unsupported(f"an index is not affine in the loop variable '{var}'", span)


def _split_thread_part(e: ir.IExpr) -> tuple[ir.IExpr, ir.IExpr]:
    """e = base + part: the terms of e's sum that name a thread id (part) and the others (base,
    its constants folded), so that reads of one window at the same base share a Piece."""
    terms = []

    def flatten(x, sign):
        if isinstance(x, ir.IBin) and x.op in ("+", "-"):
            flatten(x.a, sign)
            flatten(x.b, sign if x.op == "+" else -sign)
        elif isinstance(x, ir.IUn) and x.op == "-":
            flatten(x.a, -sign)
        else:
            terms.append((x, sign))

    flatten(e, 1)
    const = sum(sign * x.value for x, sign in terms if isinstance(x, ir.IConst))
    base, part = ir.IConst(const), ir.IConst(0)
    for x, sign in terms:
        if isinstance(x, ir.IConst):
            continue
        op = "+" if sign > 0 else "-"
        if _names_thread(x):
            part = ir.IBin(op, part, x)
        else:
            base = ir.IBin(op, base, x)
    return base, part


def _names_thread(e) -> bool:
    if isinstance(e, ir.ISpecial):
        return e.which in ir.PER_THREAD_SPECIALS
    return any(_names_thread(getattr(e, f.name)) for f in attrs.fields(type(e))
               if isinstance(getattr(e, f.name), (ir.ISpecial, ir.IBin, ir.IUn, ir.ISelect)))


def _single_coord(e, frag: str):
    """The one ICoord(frag, .) added into `e` (coefficient 1), else None."""
    found = []

    def walk(x, sign):
        if isinstance(x, ir.ICoord):
            found.append((x, sign))
        elif isinstance(x, ir.IBin) and x.op in ("+", "-"):
            walk(x.a, sign)
            walk(x.b, sign if x.op == "+" else -sign)
        elif isinstance(x, (ir.IBin, ir.IUn, ir.ISelect)) and _has_coord(x):
            found.append((None, 0))

    walk(e, 1)
    if len(found) == 1 and found[0][0] is not None and found[0][1] == 1 and found[0][0].frag == frag:
        return found[0][0]
    return None


def _has_coord(e) -> bool:
    if isinstance(e, ir.ICoord):
        return True
    return any(_has_coord(getattr(e, f.name)) for f in attrs.fields(type(e))
               if isinstance(getattr(e, f.name), (ir.ICoord, ir.IBin, ir.IUn, ir.ISelect)))


def _drop_coord(e):
    if isinstance(e, ir.ICoord):
        return ir.IConst(0)
    if isinstance(e, ir.IBin) and e.op in ("+", "-"):
        return ir.IBin(e.op, _drop_coord(e.a), _drop_coord(e.b))
    return e


def _sources(body) -> dict:
    """Fragment or shared buffer -> the input tensors whose elements may reach it."""
    src: dict[str, set] = {}
    changed = True
    stmts = list(_walk_stmts(body))
    while changed:
        changed = False
        for s in stmts:
            new = None
            if isinstance(s, ir.Assign):
                op = s.op
                if isinstance(op, (ir.Load, ir.Ldmatrix)):
                    new = (s.name, {op.src.base} if op.src.space == "global" else set(src.get(op.src.base, ())))
                else:
                    new = (s.name, set().union(*[src.get(n, set()) for n in _reads(s)]) if _reads(s) else set())
            elif isinstance(s, (ir.Store, ir.Stmatrix)) and s.dst.space == "shared":
                new = (s.dst.base, set(src.get(s.dst.base, set())) | src.get(s.value, set()))
            elif isinstance(s, (ir.CopyAsync, ir.TmaLoad, ir.TmaLoadMulticast)):
                new = (s.dst.base, set(src.get(s.dst.base, set())) | {s.src.base})
            if new is not None and src.get(new[0]) != new[1] | src.get(new[0], set()):
                src[new[0]] = new[1] | src.get(new[0], set())
                changed = True
    return src


def subst(e, lets: dict):
    """`e` with every let-bound integer name replaced by its definition."""
    if isinstance(e, ir.IVar):
        return lets.get(e.name, e)
    if isinstance(e, (ir.IBin, ir.IUn, ir.ISelect)):
        changes = {f.name: subst(getattr(e, f.name), lets) for f in attrs.fields(type(e))
                   if isinstance(getattr(e, f.name), (ir.IConst, ir.IVar, ir.ISpecial, ir.IBin, ir.IUn, ir.ISelect))}
        return attrs.evolve(e, **changes)
    return e


def mentions(e, var: str) -> bool:
    if isinstance(e, ir.IVar):
        return e.name == var
    return any(mentions(getattr(e, f.name), var) for f in attrs.fields(type(e))
               if isinstance(getattr(e, f.name), (ir.IConst, ir.IVar, ir.ISpecial, ir.IBin, ir.IUn, ir.ISelect)))


def _eval_threads(e: ir.IExpr, block: int, kernel: ir.Kernel):
    t = np.arange(block)
    if isinstance(e, ir.IConst):
        return np.int64(e.value)
    if isinstance(e, ir.ISpecial):
        table = {"thread_id": t, "lane_id": t % 32, "warp_id": t // 32}
        if e.which not in table:
            raise KeyError(e.which)
        return table[e.which]
    if isinstance(e, ir.IVar):
        raise KeyError(f"'{e.name}'")
    if isinstance(e, ir.IBin):
        return semantics.int_eval(e.op, _eval_threads(e.a, block, kernel), _eval_threads(e.b, block, kernel))
    if isinstance(e, ir.IUn):
        return semantics.INT_UNARY[e.op].ref(_eval_threads(e.a, block, kernel))
    if isinstance(e, ir.ISelect):
        c = _eval_threads(e.cond, block, kernel)
        return np.where(c != 0, _eval_threads(e.a, block, kernel), _eval_threads(e.b, block, kernel))
    raise KeyError(type(e).__name__)


def _butterfly(counts: np.ndarray, lanes: int) -> np.ndarray:
    """counts[t] + counts[t ^ m] over the lane bits m of `lanes` (threads on axis 0)."""
    for bit in range(5):
        if lanes >> bit & 1:
            h = 1 << bit
            pairs = counts.reshape(counts.shape[0] // (2 * h), 2, h, *counts.shape[1:])
            counts = (pairs + pairs[:, ::-1]).reshape(counts.shape)
    return counts


def _butterfly_bad(bad: np.ndarray, lanes: int) -> np.ndarray:
    tid = np.arange(bad.shape[0])
    for bit in range(5):
        if lanes >> bit & 1:
            bad = np.maximum(bad, bad[tid ^ (1 << bit)])
    return bad


def _merge_axes(all_axes: list) -> tuple:
    """The axes of an elementwise result: operands of its rank pair values by coordinate, so an axis
    walks every dimension an operand's same axis walks (A's columns and x's elements in `a * x`).
    An operand of lower rank pairs by (thread, value), not by coordinate: its axes name nothing here
    (`Coverage.elementwise` adds those whose coordinates equal one of the result's: `axis_pairs`)."""
    rank = max(len(a) for a in all_axes)
    return tuple(frozenset().union(*(a[i] for a in all_axes if len(a) == rank)) for i in range(rank))


def axis_pairs(low: ir.FragType, high: ir.FragType) -> dict:
    """Axis of `low` -> axis of `high` whose coordinate it equals at every (thread, value): an
    elementwise op combines the two per (thread, value), so `xv[j]` broadcast to every thread beside
    `a[i, j]` runs along a's axis 1. Only exact matches count (an axis that matches none is left out)."""
    from argus_verify.hopper import NP_OPS

    if low.threads != high.threads or low.values != high.values:
        return {}
    t = np.arange(high.threads)[:, None]
    v = np.arange(high.values)[None, :]
    shape = (high.threads, high.values)
    lc = [np.broadcast_to(np.asarray(c), shape) for c in low.coords.coords(t, v, NP_OPS)]
    hc = [np.broadcast_to(np.asarray(c), shape) for c in high.coords.coords(t, v, NP_OPS)]
    out = {}
    for i, c in enumerate(lc):
        match = [j for j, d in enumerate(hc) if np.array_equal(c, d)]
        if len(match) == 1:
            out[i] = match[0]
    return out


def _operands(node) -> set:
    """The fragment names an operation or statement reads (its string-valued fields, and strings
    inside tuple fields)."""
    out = set()
    if not attrs.has(type(node)):
        return out
    for f in attrs.fields(type(node)):
        v = getattr(node, f.name)
        if isinstance(v, str) and f.name not in ("name", "op", "atom", "kind", "dtype"):
            out.add(v)
        elif isinstance(v, tuple):
            out |= {x for x in v if isinstance(x, str)}
    return out


def _relabelled_axes(axes: tuple, old_tile: tuple, typ: ir.FragType) -> tuple:
    """A transpose swaps the axes; a reshape that only adds or drops axes of extent 1 keeps each
    longer axis's dimensions; any other reshape mixes axes, and they name nothing."""
    if isinstance(typ.coords, ir.Transposed):
        return tuple(reversed(axes))
    new_tile = tuple(typ.tile)
    long_old = [i for i, n in enumerate(old_tile) if n != 1]
    long_new = [i for i, n in enumerate(new_tile) if n != 1]
    out = [frozenset()] * len(new_tile)
    if [old_tile[i] for i in long_old] == [new_tile[i] for i in long_new]:
        for i, j in zip(long_old, long_new, strict=True):
            out[j] = axes[i] if i < len(axes) else frozenset()
    return tuple(out)


def _first_bad(bads: list) -> np.ndarray:
    out = bads[0].copy()
    for b in bads[1:]:
        out = np.where(out >= 0, out, np.broadcast_to(b, out.shape))
    return out


def _select(cond: np.ndarray, a: Prov, b: Prov) -> Prov:
    c3 = cond[:, None, None]
    entries = {}
    for key in set(a.entries) | set(b.entries):
        ea, eb = a.entries.get(key), b.entries.get(key)
        ref = ea if ea is not None else eb
        ca = ea.counts if ea is not None else np.zeros_like(ref.counts)
        cb = eb.counts if eb is not None else np.zeros_like(ref.counts)
        op = ea.op if ea is not None and ea.op is not None else (eb.op if eb is not None else None)
        entries[key] = Entry(op, np.where(c3, ca, cb))
    return Prov(entries, _merge_axes([a.axes, b.axes]), np.where(cond[:, None], a.bad, b.bad))


def _walk_stmts(body):
    for s in body:
        yield s
        if isinstance(s, ir.For):
            yield from _walk_stmts(s.body)
        elif isinstance(s, ir.If):
            yield from _walk_stmts(s.then)
            yield from _walk_stmts(s.orelse)


def accumulation_chain(body: list, name: str) -> tuple[str, list] | None:
    """(the reduction, the addends in order) where a loop body updates `name` as an accumulator:
    its value at the top of the body is read once, as an operand of a combining operator, whose
    result is read once the same way, and so on into the last assignment of `name` (the front end
    spells `acc = acc + a + b` as `_t = acc + a; acc = _t + b`; `acc = acc + a; acc = acc + b` is one
    too), every combine with the same reduction's operator. Then the value after the body is the old
    one combined with the addends, in the body's order. None otherwise (any other read of the old
    value, a combine under a branch or an inner loop, two reductions)."""
    carries = {name: True}  # names whose value holds the old one, once, under combines only
    read: set = set()  # of those, the ones already read
    red, addends = None, []
    for st in body:
        nested = [x for x in _walk_stmts([st]) if x is not st]
        if any(carries.get(n) for x in nested for n in _reads(x)) or \
                any(isinstance(x, ir.Assign) and carries.get(x.name) is not None for x in nested):
            return None  # (under a branch or an inner loop)
        hit = [n for n in _reads(st) if carries.get(n)]
        if not isinstance(st, ir.Assign):
            if hit:
                return None
            continue
        if not hit:
            carries[st.name] = False
            read.discard(st.name)
            continue
        op = st.op
        entry = semantics.FLOAT_BINARY.get(op.op) if isinstance(op, ir.Elementwise) else None
        combines = entry.combines if entry is not None else None
        if combines not in semantics.REDUCE_OPS or len(hit) != 1 or hit[0] in read or len(op.args) != 2 or \
                op.args.count(hit[0]) != 1 or (red is not None and combines != red):
            return None
        red = combines
        read.add(hit[0])
        addends.append(op.args[1] if op.args[0] == hit[0] else op.args[0])
        carries[st.name] = True
        read.discard(st.name)
    if not carries.get(name) or name in read or red is None:
        return None
    return red, addends


def _overwritten_first(body, name: str) -> bool:
    """Whether every iteration of `body` assigns `name`, at its top level, before anything reads it."""
    for st in body:
        if any(name in _reads(x) for x in _walk_stmts([st])):
            return False
        if isinstance(st, ir.Assign) and st.name == name:
            return True
        if any(isinstance(x, ir.Assign) and x.name == name for x in _walk_stmts([st])):
            return False  # assigned under a condition or in an inner loop first
    return False


def _assigned(body) -> list:
    return list(dict.fromkeys(s.name for s in _walk_stmts(body) if isinstance(s, ir.Assign)))


def _reads(s) -> set:
    if isinstance(s, ir.Assign):
        op = s.op
        names = set()
        for f in attrs.fields(type(op)):
            val = getattr(op, f.name)
            if isinstance(val, str) and f.name in ("arg", "a", "b", "c"):
                names.add(val)
            elif isinstance(val, tuple):
                names |= {x for x in val if isinstance(x, str)}
        return names
    if isinstance(s, (ir.Store, ir.Stmatrix)):
        return {s.value}
    if isinstance(s, ir.Assert):
        return set(s.frags)
    return set()


# -- the loop over windows, for every size: the solver's part -----------------------------------


def z3_int(e: ir.IExpr, env: dict):
    """An integer expression over sizes as a Z3 integer term (sizes are non-negative)."""
    if isinstance(e, ir.IConst):
        return z3.IntVal(e.value)
    if isinstance(e, ir.IVar):
        if e.name not in env:
            raise KeyError(e.name)
        return env[e.name]
    if isinstance(e, ir.IBin):
        a, b = z3_int(e.a, env), z3_int(e.b, env)
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a / b,
               "%": lambda: a % b, "cdiv": lambda: (a + b - 1) / b,
               "min": lambda: z3.If(a < b, a, b), "max": lambda: z3.If(a > b, a, b),
               "==": lambda: _b2i(a == b), "!=": lambda: _b2i(a != b), "<": lambda: _b2i(a < b),
               "<=": lambda: _b2i(a <= b), ">": lambda: _b2i(a > b), ">=": lambda: _b2i(a >= b),
               "and": lambda: _b2i(z3.And(a != 0, b != 0)), "or": lambda: _b2i(z3.Or(a != 0, b != 0))}
        if e.op not in ops:
            raise KeyError(f"operator {e.op}")
        return ops[e.op]()
    if isinstance(e, ir.IUn) and e.op == "-":
        return -z3_int(e.a, env)
    if isinstance(e, ir.IUn) and e.op == "not":
        return _b2i(z3_int(e.a, env) == 0)
    raise KeyError(type(e).__name__)


def _b2i(c):
    return z3.If(c, z3.IntVal(1), z3.IntVal(0))


def z3_truth(x):
    """An integer condition as a Z3 Bool (nonzero is true)."""
    return x != 0 if not z3.is_bool(x) else x
