"""Which reductions reach each output, with which operator, and what padding enters them.

A forward data-flow pass over the IR (the solver only for `dominated`): every fragment gets the
input dimension each of its tile axes walks along (its *origin*), the set of reductions it aggregates (*families*:
operator, tensor, dimension), the value that masked loads put in place of out-of-bounds elements
along each input dimension (*padding*), and, for constant fragments, their value. From that:

- `reduction-operator`: a loop accumulation or a combine of partial results that uses an operator
  other than the reduction's (`acc - reduce_sum(x)`), and an output whose reductions are not the
  contract's (max where the contract says sum, the wrong dimension, none at all);
- `padding`: a reduction fed with masked-load padding, or started from a constant, that is not
  the operator's identity (0 before a max over rows that may be all negative).

Whether every element is combined exactly once is the solver's part (smt/obligations/coverage).
"""

from __future__ import annotations

import functools
import math

import attrs
import numpy as np
import z3

from argus_verify import ir, semantics
from argus_verify.smt import contract_expr as X
from argus_verify.smt.coverage import accumulation_chain, axis_pairs, mentions, subst, z3_int, z3_truth

# stand-ins for an unknown finite operand when a padding value is pushed through an operation; the
# largest finite values of the fragment's type join them (`_samples`), so that a padding that a large
# operand would absorb (`(p + y) - p`) or overflow is not taken for a constant
_FINITE_SAMPLES = (-2.5, 0.0, 3.0)


def _samples(dtype: str | None) -> list:
    big = float(np.finfo(ir.numpy_dtype(dtype)).max) if dtype in ("f64", "f32", "f16") else \
        (3.3895313892515355e38 if dtype == "bf16" else None)
    return list(_FINITE_SAMPLES) + ([big, -big] if big is not None else [])


@attrs.frozen
class Origin:
    tensor: str
    dim: int


@attrs.frozen
class Flow:
    """What the pass knows of one fragment."""

    axes: tuple  # per tile axis: Origin | None
    families: frozenset = frozenset()  # {(op, Origin)}
    padding: tuple = ()  # ((Origin, value | (values, ...) | None), ...): a tuple = one of those, None = unknown
    const: float | None = None  # the value of a constant fragment
    expr: object = None  # what it computes (smt/contract_expr.py); None: not followed
    # per tile axis, every input dimension that runs along it (the operands of `a * b` each bring
    # theirs): a reduction along the axis combines the padding of all of them, not only `axes`'s
    aligned: tuple = ()
    # (reduce op, Origin): elements of one input dimension combined by an elementwise operator (`a + b`
    # of two shared slots: a tree over shared memory), which the pass does not count as a reduction
    combined: frozenset = frozenset()

    def along(self, axis: int) -> frozenset:
        mine = self.aligned[axis] if axis < len(self.aligned) else frozenset()
        first = self.axes[axis] if axis < len(self.axes) else None
        return mine | ({first} if first is not None else set())

    def pad(self, origin) -> tuple[bool, float | tuple | None]:
        for o, v in self.padding:
            if o == origin:
                return True, v
        return False, None


@attrs.frozen
class Finding:
    obligation: str  # "reduction-operator" | "padding"
    span: object
    message: str
    hint: str = ""
    detail: dict = attrs.field(factory=dict)
    status: str = "violated"  # "unknown": a pattern the pass does not follow, not a proof of a bug


def _same(values) -> float | None:
    vals = list(values)
    first = vals[0]
    for v in vals[1:]:
        if not (v == first or (math.isnan(v) and math.isnan(first))):
            return None
    return first


def _round(x: float, dtype: str | None) -> float:
    """x as a register of `dtype` holds it (f32 overflows to inf past 3.4e38); float64 for no type."""
    if dtype not in ir.FLOAT_DTYPES:
        return float(x)
    with np.errstate(all="ignore"):
        return float(semantics.round_to(np.float64(x), dtype))


def _apply(op: str, args: list, dtype: str | None = None) -> float:
    """`op` on `args` as the interpreter and the GPU compute it for a fragment of `dtype`: the
    operands in that type, the result rounded to it (so that a product past the type's range is inf,
    not the real number); float64 where the type is not a float's."""
    with np.errstate(all="ignore"):
        store = ir.numpy_dtype(dtype) if dtype in ir.FLOAT_DTYPES else np.float64
        vals = [np.asarray(_round(a, dtype), dtype=store) for a in args]
        if len(args) == 1:
            return _round(semantics.FLOAT_UNARY[op].ref(vals[0]), dtype)
        return _round(semantics.FLOAT_BINARY[op].ref(vals[0], vals[1]), dtype)


class ReductionFlow:
    """Run the pass over `kernel`; `findings` lists the violations, `outputs` the flow of every
    value stored to an output tensor (with the store)."""

    def __init__(self, kernel: ir.Kernel):
        self.k = kernel
        self.findings: list[Finding] = []
        self.outputs: list[tuple[ir.Store, Flow]] = []
        self.shared: dict[str, Flow] = {}
        self.allocs: dict[str, ir.SharedAlloc] = {}
        self._seen: set = set()
        self.pad_sites: dict = {}
        self.dtypes: dict[str, str] = {}  # fragment name -> its dtype (the source of a cast)
        self._may_pad: dict = {}  # (view, dim) -> whether a masked load of it can pad along dim
        self.types: dict[str, ir.FragType] = {}  # fragment name -> its type (coordinates per thread, value)
        env: dict = {}
        self.walk(kernel.body, env, loops=())

    # -- findings --------------------------------------------------------------------------------
    def report(self, obligation, span, message, hint="", status="violated", **detail):
        key = (obligation, span.line, span.col, message)
        if key not in self._seen:
            self._seen.add(key)
            self.findings.append(Finding(obligation, span, message, hint, detail, status))

    # -- statements ------------------------------------------------------------------------------
    def walk(self, body, env, loops):
        for s in body:
            if isinstance(s, ir.Assign):
                self.types[s.name] = s.type
                env[s.name] = self.assign(s, env, loops)
                self.dtypes[s.name] = s.type.dtype
            elif isinstance(s, ir.SharedAlloc):
                self.allocs[s.name] = s
            elif isinstance(s, (ir.Store, ir.Stmatrix)):
                self.store(s.as_store() if isinstance(s, ir.Stmatrix) else s, env)
            elif isinstance(s, ir.CopyAsync):
                # cp.async zero-fills the elements its mask leaves out
                rank = len(s.src.tile)
                src = self.load(ir.Load(s.src, s.tv, s.mask, 0.0), rank, loops, s.span)
                self.store_shared(s.dst, src)
            elif isinstance(s, (ir.TmaLoad, ir.TmaLoadMulticast)):
                # the TMA unit zero-fills the elements of the box outside the tensor (a multicast copy
                # delivers the same box to every CTA it names: the same dimensions of the same tensor)
                rank = len(s.src.tile)
                src = self.load(ir.Load(s.src, None, True, 0.0), rank, loops, s.span)
                self.store_shared(s.dst, src)
            elif isinstance(s, ir.TmaStore):
                # the TMA unit copies the shared tile to the output as it is (clipped: no padding enters)
                if any(p.name == s.dst.base for p in self.k.outputs):
                    self.outputs.append((s, self.load(ir.Load(s.src, None, False, 0.0), len(s.src.tile), loops)))
            elif isinstance(s, ir.For):
                self.loop(s, env, loops)
            elif isinstance(s, ir.If):
                then, orelse = dict(env), dict(env)
                self.walk(s.then, then, loops)
                self.walk(s.orelse, orelse, loops)
                for name in set(then) | set(orelse):
                    a, b = then.get(name), orelse.get(name)
                    env[name] = a if b is None else b if a is None else _join(a, b)

    def loop(self, s: ir.For, env, loops):
        before = dict(env)
        # two passes reach the fixpoint of the finite domain for the loop-carried values that
        # matter here (families and padding only grow)
        for _ in range(2):
            body_env = dict(env)
            self.walk(s.body, body_env, loops + (s,))
            for name, flow in body_env.items():
                if name in before and isinstance(flow, Flow) and isinstance(before[name], Flow):
                    env[name] = _join(before[name], flow) if flow is not before[name] else flow
                else:
                    env[name] = flow
        self.accumulations(s, before, env)
        self.accumulated_terms(s, before, env)

    def accumulated_terms(self, s: ir.For, before, env):
        """After the loop, `acc = acc (+) e` from the reduction's identity holds the reduction of e
        over the iterations (and `acc = mma(a, b, acc)` the sum of the products); so does a chain of
        combines into acc (`acc = acc + a + b`, coverage.accumulation_chain)."""
        assigned = [st.name for st in s.body if isinstance(st, ir.Assign)]
        direct = set()
        for st in s.body:
            if not (isinstance(st, ir.Assign) and st.name in before and st.name in env):
                continue
            op, init = st.op, before[st.name]
            term = None
            if isinstance(op, ir.Elementwise) and len(op.args) == 2 and op.args.count(st.name) == 1:
                other = op.args[1] if op.args[0] == st.name else op.args[0]
                entry = semantics.FLOAT_BINARY.get(op.op)
                red = entry.combines if entry is not None else None
                body = env.get(other).expr if isinstance(other, str) and other in env else None
                if red in semantics.REDUCE_OPS and body is not None:
                    term = X.combine(op.op, init.expr, ("red", red, X.strip(body, red)))
            elif isinstance(op, (ir.Mma, ir.Wgmma)) and op.c == st.name:
                a, b = self.mma_operands(op, env)
                if a is not None and b is not None and a.expr is not None and b.expr is not None:
                    term = X.combine("+", init.expr, ("red", "sum", ("bin", "*", X.unlane(a.expr),
                                                                        X.unlane(b.expr))))
            else:
                # an ordinary assignment of a name defined before the loop (in an outer loop's second
                # pass, every name of the body is): its joined value stands
                continue
            env[st.name] = attrs.evolve(env[st.name], expr=term)
            if assigned.count(st.name) == 1:
                direct.add(st.name)
        for name, (red, addends) in self.chains(s, before, direct).items():
            if name not in env:
                continue
            term = before[name].expr
            for a in addends:
                body = env.get(a).expr if isinstance(a, str) and a in env else None
                term = X.combine(semantics.REDUCE_OPS[red].binary, term,
                                 ("red", red, X.strip(body, red)) if body is not None else None)
            env[name] = attrs.evolve(env[name], expr=term)

    def accumulations(self, s: ir.For, before, env):
        """`acc = acc (+) e` in a loop body, directly or through a chain of combines (`acc = acc + a
        + b`, coverage.accumulation_chain): (+) must be a reduction operator, acc must start at its
        identity, and each addend's padding along the dimensions the loop walks is checked."""
        direct = set()
        for st in s.body:
            if not (isinstance(st, ir.Assign) and st.name in before):
                continue
            op = st.op
            if isinstance(op, ir.Elementwise) and len(op.args) == 2 and st.name in op.args:
                other = op.args[1] if op.args[0] == st.name else op.args[0]
                self.accumulate(st, op.op, before[st.name], other, s, env)
                direct.add(st.name)
            elif isinstance(op, (ir.Mma, ir.Wgmma)) and op.c == st.name:
                self.check_init(st, "sum", before[st.name])
                direct.add(st.name)
        for name, (red, addends) in self.chains(s, before, direct).items():
            last = [st for st in s.body if isinstance(st, ir.Assign) and st.name == name][-1]
            for other in addends:
                self.accumulate(last, semantics.REDUCE_OPS[red].binary, before[name], other, s, env)

    @staticmethod
    def chains(loop: ir.For, before: dict, skip: set) -> dict:
        """name -> (reduction, addends) of the loop's accumulation chains (coverage.accumulation_chain)
        into names defined before it, but those in `skip`."""
        names = {st.name for st in loop.body if isinstance(st, ir.Assign)} & set(before)
        found = {n: accumulation_chain(loop.body, n) for n in sorted(names - skip)}
        return {n: c for n, c in found.items() if c is not None}

    def accumulate(self, st, opname, init, other, loop, env):
        """One addend `other` of `st.name = st.name (+) other` over `loop`."""
        addend = env.get(other) if isinstance(other, str) else None
        self.accumulation(st, opname, init, addend, loop)
        walked = self.walked_by(st, opname, addend, loop)
        if walked and isinstance(env.get(st.name), Flow):
            env[st.name] = attrs.evolve(env[st.name], families=env[st.name].families | walked)

    def loop_combines(self, loop: ir.For) -> set:
        """The reduction operators that operations in the loop's body combine with (reduce_*, the
        elementwise operators that combine, mma's sum): where a partial result can come from."""
        out = set()
        for st in ir.walk_stmts(loop.body):
            op = st.op if isinstance(st, ir.Assign) else None
            if isinstance(op, ir.Reduce):
                out.add(op.op)
            elif isinstance(op, (ir.Mma, ir.Wgmma)):
                out.add("sum")
            elif isinstance(op, ir.Elementwise) and len(op.args) == 2:
                entry = semantics.FLOAT_BINARY.get(op.op)
                if entry is not None and entry.combines in semantics.REDUCE_OPS:
                    out.add(entry.combines)
        return out

    def walked_by(self, st, opname, addend: Flow | None, loop: ir.For) -> frozenset:
        """The reductions `acc = acc (+) e` performs across the loop's iterations: along every input
        dimension of e that the loop walks (its loads' start along it moves with the loop variable),
        as `acc = acc + x[r, c : c + 256]` over rows r sums x along dimension 0. Padding that enters
        along such a dimension must be the operator's identity, as for reduce_*."""
        entry = semantics.FLOAT_BINARY.get(opname)
        reduce_op = entry.combines if entry is not None else None
        if addend is None or reduce_op not in semantics.REDUCE_OPS:
            return frozenset()
        held = {o for i in range(len(addend.axes)) for o in addend.along(i)}  # (along(i) includes axes[i])
        walked = held & self.loop_origins(loop)
        bad = _non_identity_padding(addend, sorted(walked, key=lambda o: (o.tensor, o.dim)), reduce_op,
                                    self.int_ranges)
        if bad is not None:
            o, value = bad
            identity = semantics.REDUCE_OPS[reduce_op].identity
            span, pads = self.padding_source(o, value, st.span)
            self.report("padding", span,
                        f"'{st.name}' accumulates over the loop at line {loop.span.line} elements of {o.tensor} "
                        f"beyond its dimension {o.dim} that {pads('a masked load')}, not the "
                        f"identity of {reduce_op} ({identity:g})",
                        f"pad with other={_literal(identity)} in the masked load", value=value, identity=identity,
                        padded=_padded_witness(o, value, f"'{st.name}' ({reduce_op} over the loop at line "
                                                         f"{loop.span.line})"))
        return frozenset((reduce_op, o) for o in walked)

    def padding_source(self, o: Origin, value, fallback) -> tuple:
        """(span, words) of the masked load whose padding along `o` reaches a reduction as `value`:
        the load, and `words(name of the load)` saying what it pads with and, where the two differ, what
        that becomes on the way (3e38 * 2 is inf in f32)."""
        if (o, value) in self.pad_sites:
            return self.pad_sites[(o, value)], lambda load: f"{load} pads with {_fmt([value])}"
        loads = [(v, sp) for (origin, v), sp in self.pad_sites.items() if origin == o]
        if not loads:
            return fallback, lambda load: f"{load} pads with {_fmt([value])}"
        shown = " or ".join(f"{v:g} (line {sp.line})" for v, sp in loads)
        verb = "pads" if len(loads) == 1 else "pad"
        return loads[0][1], lambda load: (f"{'masked loads' if len(loads) > 1 else load} {verb} with {shown}, which "
                                          f"the operations on the way turn into {_fmt([value])}")

    @functools.cached_property
    def int_ranges(self) -> dict:
        """Integer tensors -> (least, most) value of their type."""
        return {t.name: X.int_range(t.dtype) for t in self.k.tensors if t.dtype in ir.INT_DTYPES}

    @functools.cached_property
    def lets(self) -> dict:
        """Every integer name of the kernel with its definition expanded (for `loop_origins`)."""
        lets: dict = {}
        for st in ir.walk_stmts(self.k.body):
            if isinstance(st, ir.Let):
                lets[st.name] = subst(st.value, lets)
        return lets

    def may_pad(self, view: ir.View, dim: int, loops=()) -> bool:
        """Whether a masked load of `view` can pad an element of dimension `dim`: some admissible
        launch (sizes at least 1 under the kernel's `requires`; the variables of the enclosing loops
        within their ranges; block ids and integer parameters any integers, a superset) puts a
        position of the view along `dim` below 0 or past the dimension's extent. False only where
        the solver proves no launch does; an expression it cannot read, or a solver that gives up,
        leaves the padding in."""
        it = view.index[dim]
        width = it.extent if isinstance(it, ir.Slice) else 1
        key = (view, dim, tuple(id(loop) for loop in loops))
        if key not in self._may_pad:
            self._may_pad[key] = self._reaches_outside(it.start if isinstance(it, ir.Slice) else it.index, width,
                                                       self.k.param(view.base).shape[dim], loops)
        return self._may_pad[key]

    def _reaches_outside(self, start, width: int, extent, loops=()) -> bool:
        env = {n: z3.Int(n) for n in self.k.sizes}
        try:
            cons = [v >= 1 for v in env.values()]
            cons += [z3_truth(z3_int(_free(r, env), env)) for r in self.k.requires]
            for loop in loops:  # (outermost first: an inner loop's bounds may use an outer variable)
                if loop.step > 0 and loop.var not in env:
                    lo_l = z3_int(_free(subst(loop.start, self.lets), env), env)
                    hi_l = z3_int(_free(subst(loop.stop, self.lets), env), env)
                    env[loop.var] = z3.Int(f"loop.{loop.var}")
                    cons += [lo_l <= env[loop.var], env[loop.var] < hi_l]
            lo = z3_int(_free(subst(start, self.lets), env), env)
            n = z3_int(_free(extent, env), env)
        except (KeyError, TypeError, z3.Z3Exception):
            return True
        solver = z3.Solver()
        solver.set("timeout", 2000)
        solver.add(*cons, z3.Or(lo < 0, lo + width > n))
        return solver.check() != z3.unsat

    def loop_origins(self, loop: ir.For) -> set:
        """Input dimensions along which a global load in the loop's body moves with its variable."""
        out: set = set()
        for st in ir.walk_stmts(loop.body):
            view = st.op.src if isinstance(st, ir.Assign) and isinstance(st.op, ir.Load) else None
            if view is None or view.space != "global":
                continue
            for d, it in enumerate(view.index):
                start = it.start if isinstance(it, ir.Slice) else it.index
                if mentions(subst(start, self.lets), loop.var):
                    out.add(Origin(view.base, d))
        return out

    def accumulation(self, st, opname, init: Flow, addend: Flow | None, loop: ir.For):
        entry = semantics.FLOAT_BINARY.get(opname)
        reduce_op = entry.combines if entry is not None else None
        carries = addend is not None and (addend.families or addend.axes)
        if reduce_op not in semantics.REDUCE_OPS:
            if carries and opname != "*":
                self.report("reduction-operator", st.span,
                            f"'{st.name}' accumulates over the loop at line {loop.span.line} with '{opname}', "
                            "which is not a reduction operator (sum, max or min)",
                            "accumulate partial results with the contract's operator, e.g. acc = acc + part",
                            operator=opname, what=f"at every iteration of the loop at line {loop.span.line}: "
                                                  f"{st.name} = {st.name} {opname} ...")
            return
        if addend is not None:
            made_here = self.loop_combines(loop)
            for fop, origin in addend.families:
                # a family no operation of this loop makes comes complete from before it (the row max
                # in `s = s + reduce_sum(exp(xs - m))`): combining it with another operator is no error
                if fop != reduce_op and fop in made_here:
                    self.report("reduction-operator", st.span,
                                f"partial results of a {fop} over {origin.tensor}'s dimension {origin.dim} are "
                                f"combined across iterations of the loop at line {loop.span.line} with "
                                f"'{opname}' ({reduce_op})",
                                f"combine partial {fop}s with the {fop}'s own operator",
                                operator=opname, expected=fop,
                                what=f"{st.name} = {st.name} {opname} (a partial {fop} of {origin.tensor}'s "
                                     f"dimension {origin.dim}) at every iteration of the loop at line "
                                     f"{loop.span.line}")
        self.check_init(st, reduce_op, init, addend)

    def check_init(self, st, reduce_op: str, init: Flow, addend: Flow | None = None):
        """The accumulator's start must be the identity, or (max, min) a value no addend can lose to."""
        identity = semantics.REDUCE_OPS[reduce_op].identity
        if init is not None and init.const is not None and init.const != identity and \
                not (addend is not None and dominated(addend.expr, (init.const,), reduce_op, self.int_ranges)):
            self.report("padding", st.span,
                        f"'{st.name}' accumulates a {reduce_op} starting from {init.const:g}, which is not the "
                        f"identity of {reduce_op} ({identity:g})",
                        f"start the accumulator at {identity:g} (e.g. full(..., {identity:g}, tv=...))",
                        value=init.const, identity=identity,
                        what=f"'{st.name}' holds {init.const:g} before its first {reduce_op} (line {st.span.line})")

    # -- fragment operations ---------------------------------------------------------------------
    def assign(self, s: ir.Assign, env, loops) -> Flow:
        op = s.op
        rank = len(s.type.tile)
        if isinstance(op, ir.Load):
            return self.load(op, rank, loops, s.span, s.type.dtype)
        if isinstance(op, ir.Ldmatrix):  # a shared-memory load with the ISA's lane layout
            return self.load(ir.Load(op.src, op.rows, False), rank, loops, s.span)
        if isinstance(op, ir.Full):
            value = _round(float(op.value), s.type.dtype)
            return Flow((None,) * rank, const=value, expr=("const", value))
        if isinstance(op, ir.Elementwise):
            return self.elementwise(s, op, env, rank)
        if isinstance(op, ir.Reduce):
            return self.reduce(s, op, env[op.arg])
        if isinstance(op, (ir.Mma, ir.Wgmma)):
            a, b = self.mma_operands(op, env)
            return self.mma(s, a, b, env[op.c])
        if isinstance(op, ir.Relabel):
            src = env[op.arg]
            if isinstance(s.type.coords, ir.Transposed):
                return attrs.evolve(src, axes=tuple(reversed(src.axes)),
                                    aligned=tuple(reversed([src.along(i) for i in range(len(src.axes))])))
            if isinstance(s.type.coords, ir.Reshaped):
                kept = _reshaped(src, s.type.coords.base.tile, s.type.coords.new_tile)
                if kept is not None:
                    return kept
            return attrs.evolve(src, axes=(None,) * rank, aligned=())
        if isinstance(op, ir.Cast):
            src = env[op.arg]
            if src is None or src.expr is None:
                return src
            return attrs.evolve(src, expr=X.cast(op.dtype, self.dtypes.get(op.arg), src.expr))
        if isinstance(op, ir.Shuffle):
            src = env[op.arg]
            return attrs.evolve(src, expr=None if src.expr is None else ("lane", src.expr))
        return Flow((None,) * rank)

    def mma_operands(self, op, env) -> tuple:
        """The flows of an mma's a and b: fragments (mma), or the shared tiles a wgmma reads."""
        if isinstance(op, ir.Wgmma):
            return tuple(self.load(ir.Load(v, None, False), len(v.tile), ()) for v in (op.a, op.b))
        return env.get(op.a), env.get(op.b)

    def load(self, op: ir.Load, rank: int, loops, span=None, dtype: str | None = None) -> Flow:
        view = op.src
        if view.space == "shared":
            held = self.shared.get(view.base)
            if held is None:
                return Flow((None,) * rank)  # expr None: read before any write the pass saw
            dims = view.tile_axes()
            axes = tuple(held.axes[d] if d < len(held.axes) else None for d in dims)
            return attrs.evolve(held, axes=axes, aligned=tuple(held.along(d) if d < len(held.axes) else frozenset()
                                                               for d in dims))
        axes = tuple(Origin(view.base, d) for d in view.tile_axes())
        # the padding as the fragment holds it (other=1e39 in an f32 load is inf), along the
        # dimensions where the view can reach outside the tensor under the kernel's `requires`
        # (`requires N == COLS` with a view 0 : COLS: no element of dimension 1 is ever padded)
        other = _round(float(op.other), dtype)
        padded = [o for o in axes if self.may_pad(view, o.dim, loops)] if op.mask else []
        padding = tuple((o, other) for o in padded)
        for o in padded if span is not None else ():
            self.pad_sites.setdefault((o, other), span)  # where a padding value comes from
        return Flow(axes, padding=padding, expr=("elem", view.base), aligned=tuple(frozenset({o}) for o in axes))

    def elementwise(self, s, op: ir.Elementwise, env, rank) -> Flow:
        flows = [env[a] if isinstance(a, str) else None for a in op.args]
        consts = [float(a.value) if isinstance(a, ir.FConst) else None for a in op.args]
        frags = [f for f in flows if f is not None]
        axes = max((f.axes for f in frags), key=len, default=(None,) * rank)
        families = frozenset().union(*[f.families for f in frags]) if frags else frozenset()
        const = None
        dtype = s.type.dtype
        if all(f is None or f.const is not None for f in flows) and all(
                c is not None or f is not None for c, f in zip(consts, flows, strict=True)):
            const = _apply(op.op, [f.const if f is not None else c for f, c in zip(flows, consts, strict=True)],
                           dtype)
        terms = [f.expr if f is not None else (("const", c) if c is not None else self.scalar_term(a))
                 for f, c, a in zip(flows, consts, op.args, strict=True)]
        if len(terms) == 2:
            expr = X.combine(op.op, *terms)
        else:
            expr = X.unary(op.op, terms[0]) if terms else None
        aligned = [frozenset().union(*[f.along(i) for f in frags if len(f.axes) == len(axes)])
                   for i in range(len(axes))]
        for a, f in zip(op.args, flows, strict=True):  # a lower-rank operand: along the axes its values follow
            if f is not None and len(f.axes) < len(axes) and isinstance(a, str) and a in self.types:
                for mine, theirs in axis_pairs(self.types[a], s.type).items():
                    aligned[theirs] |= f.along(mine)
        aligned = tuple(aligned)
        combined = frozenset().union(*[f.combined for f in frags]) if frags else frozenset()
        monoid = {"+": "sum", "max": "max", "min": "min"}.get(op.op)
        if monoid is not None and len(frags) == 2:
            shared = frozenset().union(*[frags[0].along(i) for i in range(len(frags[0].axes))]) & \
                frozenset().union(*[frags[1].along(i) for i in range(len(frags[1].axes))])
            combined |= {(monoid, o) for o in shared}
        return Flow(axes, families, self.padding_through(op.op, flows, consts, dtype), const, expr, aligned,
                    combined)

    def scalar_term(self, arg):
        """The term of a floating-point scalar parameter (`xs * alpha`); None for any other operand
        (an integer used as a float is not followed)."""
        name = ir.float_scalar_param(self.k, arg)
        return ("scalar", name) if name is not None else None

    def padding_through(self, opname, flows, consts, dtype: str | None = None) -> tuple:
        """Padded elements pushed through an elementwise op: other operands are their own padding,
        a constant, or any finite value (the result must not depend on which), computed as a
        fragment of `dtype` computes it (rounded to the type: a product past its range is inf)."""
        keys = []
        for f in flows:
            for o, _ in (f.padding if f is not None else ()):
                if o not in keys:
                    keys.append(o)
        out = []
        for origin in keys:
            choices = []
            unknown = False
            for f, c in zip(flows, consts, strict=True):
                if f is None:
                    choices.append([c] if c is not None else _samples(dtype))
                    continue
                padded, v = f.pad(origin)
                if padded and v is None:
                    unknown = True
                    break
                choices.append(list(_values(v)) if padded else
                               ([f.const] if f.const is not None else _samples(dtype)))
            if unknown:
                out.append((origin, None))
                continue
            results = []
            for combo in _product(choices):
                results.append(_apply(opname, combo, dtype))
            out.append((origin, _same(results)))
        return tuple(out)

    def reduce(self, s, op: ir.Reduce, src: Flow) -> Flow:
        origin = src.axes[op.axis] if op.axis < len(src.axes) else None
        reduced = src.along(op.axis) if op.axis < len(src.axes) else frozenset()
        families = set(src.families)
        # a max of -x is a min of x (and a min of -x a max): the family its elements form
        family = {"max": "min", "min": "max"}.get(op.op, op.op) if X.negated(src.expr) else op.op
        if origin is not None:
            families.add((family, origin))
        # every origin the reduced axis walks in step with is reduced too (x in `A[i, j] * x[j]`)
        families |= {(family, o) for o in reduced}
        identity = semantics.REDUCE_OPS[op.op].identity
        bad = _non_identity_padding(src, sorted(reduced, key=lambda o: (o != origin, o.tensor, o.dim)), op.op,
                                    self.int_ranges)
        if bad is not None:
            o, value = bad
            span, pads = self.padding_source(o, value, s.span)
            self.report("padding", span,
                        f"reduce_{op.op} (line {s.span.line}) combines elements of {o.tensor} beyond its "
                        f"dimension {o.dim} that {pads('this masked load')}, not the identity of "
                        f"{op.op} ({identity:g})",
                        f"pad with other={_literal(identity)} in the masked load, or keep padded elements out "
                        "of the reduction", value=value, identity=identity,
                        padded=_padded_witness(o, value, f"reduce_{op.op} (line {s.span.line})"))
        padding = tuple((o, v) for o, v in src.padding if o not in reduced)
        return Flow(src.axes, frozenset(families), padding, expr=X.reduction(op.op, src.expr), aligned=src.aligned,
                    combined=src.combined)

    def mma(self, s, a: Flow, b: Flow, c: Flow) -> Flow:
        ka = a.axes[1] if len(a.axes) > 1 else None
        kb = b.axes[0] if b.axes else None
        families = set(a.families | b.families | c.families)
        for origin in (ka, kb):
            if origin is not None:
                families.add(("sum", origin))
        # Past the end of k the padded products must be the sum's identity. The pass does not know
        # that A's and B's padding fall on the same k (their extents and offsets may differ), so
        # each padded value must vanish against any finite operand: only 0 does (-inf * 0 is NaN).
        k_a = a.along(1) if len(a.axes) > 1 else frozenset()
        k_b = b.along(0) if b.axes else frozenset()
        pads_a = [x for o in k_a for p, v in [a.pad(o)] if p for x in (_values(v) or (None,))]
        pads_b = [x for o in k_b for p, v in [b.pad(o)] if p for x in (_values(v) or (None,))]
        if any(v is None or v != 0.0 for v in pads_a + pads_b):
            padded = f"past the end of k, A pads {_fmt(pads_a)} and B pads {_fmt(pads_b)}"
            self.report("padding", s.span,
                        f"mma multiplies masked-load padding along k that is not 0 ({padded}): the padded "
                        "products need not vanish from the sum", "pad both operands' masked loads with other=0.0",
                        padded=padded)
        axes = (a.axes[0] if a.axes else None, b.axes[1] if len(b.axes) > 1 else None)
        padding = tuple((o, v) for o, v in (a.padding + b.padding) if o not in k_a | k_b)
        product = None if a.expr is None or b.expr is None else ("red", "sum", ("bin", "*", X.unlane(a.expr),
                                                                               X.unlane(b.expr)))
        expr = X.combine("+", c.expr, product)
        aligned = (a.along(0) if a.axes else frozenset(), b.along(1) if len(b.axes) > 1 else frozenset())
        return Flow(axes, frozenset(families), padding, expr=expr, aligned=aligned,
                    combined=a.combined | b.combined | c.combined)

    # -- stores ----------------------------------------------------------------------------------
    def store_shared(self, dst: ir.View, flow: Flow):
        """A shared allocation holds the join of everything written to it, by dimension."""
        alloc = self.allocs.get(dst.base)
        rank = len(alloc.shape) if alloc is not None else len(dst.index)
        axes = [None] * rank
        aligned = [frozenset()] * rank
        for tile_axis, dim in enumerate(dst.tile_axes()):
            if tile_axis < len(flow.axes):
                axes[dim] = flow.axes[tile_axis]
                aligned[dim] = flow.along(tile_axis)
        new = attrs.evolve(flow, axes=tuple(axes), aligned=tuple(aligned))
        old = self.shared.get(dst.base)
        self.shared[dst.base] = new if old is None else _join_shared(old, new)

    def store(self, s: ir.Store, env):
        flow = env.get(s.value)
        if flow is None:
            return
        if s.dst.space == "shared":
            self.store_shared(s.dst, flow)
            return
        param = next((p for p in self.k.outputs if p.name == s.dst.base), None)
        if param is not None:
            self.outputs.append((s, flow))


def _free(e, env: dict):
    """`e` with every name that is not a size (a block id, a loop variable, an integer parameter,
    a thread's id) an unconstrained integer of `env` (added to it)."""
    if isinstance(e, ir.ISpecial):
        name = f"%{e.which}"
        env.setdefault(name, z3.FreshInt(e.which))
        return ir.IVar(name)
    if isinstance(e, ir.IVar):
        env.setdefault(e.name, z3.FreshInt(e.name))
        return e
    if isinstance(e, (ir.IBin, ir.IUn, ir.ISelect)):
        return attrs.evolve(e, **{f.name: _free(getattr(e, f.name), env) for f in attrs.fields(type(e))
                                  if f.name != "span" and not isinstance(getattr(e, f.name), str)})
    return e


def _reshaped(src: Flow, before: tuple, after: tuple) -> Flow | None:
    """A reshape that only inserts or drops axes of extent 1 (`reshape(v, 1, 256)` of a [256] tile):
    element k of every other axis stays element k, so those axes keep their origins (a bias or a
    vector broadcast into a row, x[j] in `A[i, j] * x[j]`). None for any other reshape."""
    def kept(tile):
        return [i for i, n in enumerate(tile) if n != 1]

    src_axes, dst_axes = kept(before), kept(after)
    if [before[i] for i in src_axes] != [after[i] for i in dst_axes]:
        return None
    axes, aligned = [None] * len(after), [frozenset()] * len(after)
    units = ([i for i, n in enumerate(before) if n == 1], [i for i, n in enumerate(after) if n == 1])
    pairs = list(zip(src_axes, dst_axes, strict=True))
    if len(units[0]) == len(units[1]):
        pairs += list(zip(*units, strict=True))
    for i, j in pairs:
        if i < len(src.axes):
            axes[j], aligned[j] = src.axes[i], src.along(i)
    return attrs.evolve(src, axes=tuple(axes), aligned=tuple(aligned))


def _padded_witness(o: Origin, value, where: str) -> str:
    """The witness text of a padding finding: which elements are padded and what they enter with."""
    return (f"the padded elements of {o.tensor} past the extent of its dimension {o.dim} enter {where} as "
            f"{_fmt([value])}")


def _values(v) -> tuple | None:
    """The padding values an entry allows (None: unknown)."""
    return None if v is None else v if isinstance(v, tuple) else (v,)


def _fmt(values) -> str:
    if not values:
        return "nothing"
    out = []
    for v in values:
        vs = _values(v)
        out.append("an unknown value" if vs is None else " or ".join(f"{x:g}" for x in vs))
    return ", ".join(out)


def _non_identity_padding(flow: Flow, origins, reduce_op: str, ranges=None):
    """(origin, value) of the first of `origins` along which `flow` carries masked-load padding that
    is not `reduce_op`'s identity (or is unknown), and that no element can lose to (`dominated`),
    else None."""
    identity = semantics.REDUCE_OPS[reduce_op].identity
    for o in origins:
        padded, value = flow.pad(o)
        if padded and (value is None or any(x != identity for x in _values(value))) and \
                not (value is not None and dominated(flow.expr, _values(value), reduce_op, ranges)):
            return o, value
    return None


def dominated(expr, values, reduce_op: str, ranges=None) -> bool:
    """Whether a max (min) is unchanged by elements holding `values` for every input: the values are
    finite and no element's value `expr` can be below (above) them, as 0 before a max of abs(x). The
    contract's reductions are never empty (sizes are at least 1, and coverage proves every element
    enters), so such elements never decide the result. Proved with Z3 over the reals
    (smt/contract_expr.py: abs, max and the arithmetic are exact; any other function is unknown and
    proves nothing). The sum has no such slack: its padding must be 0."""
    if reduce_op not in ("max", "min") or expr is None or not values or \
            not all(math.isfinite(v) for v in values):
        return False
    bare = X.unlane(expr)
    if ranges and bare[0] == "elem" and bare[1] in ranges:
        # an element of an integer tensor itself (no arithmetic on it, which could wrap): its type's
        # range bounds it, so the type's least value is a max's identity in effect (and the most, a min's)
        lo, hi = ranges[bare[1]]
        return all((v <= lo) if reduce_op == "max" else (v >= hi) for v in values)
    try:
        return X.Equivalence(timeout_s=2.0).never_past(X.unlane(expr), values, reduce_op)
    except TypeError:  # (a term the encoding does not know)
        return False


def _join_shared(a: Flow, b: Flow) -> Flow:
    """What a shared allocation holds after writes a and b (in either order)."""
    for fill, data in ((a, b), (b, a)):
        if _constant_fill(fill) and not _constant_fill(data):
            # a constant written before (or besides) the data, e.g. a tile zeroed before TMA fills it:
            # where it is read instead of data it enters like padding, so the padding check sees it
            pads = dict(data.padding)
            for origin in {o for o in data.axes if o is not None} | {o for _, o in data.families}:
                if origin not in pads:
                    pads[origin] = fill.const
                elif pads[origin] is not None and pads[origin] != fill.const:
                    pads[origin] = tuple(sorted(set(_values(pads[origin]) + (fill.const,))))
            return attrs.evolve(data, padding=tuple(pads.items()))
    return _join(a, b)


def _join(a: Flow, b: Flow) -> Flow:
    axes = tuple(x if x == y else None for x, y in zip(a.axes, b.axes, strict=False)) if a.axes != b.axes else a.axes
    pads = dict(a.padding)
    for o, v in b.padding:
        if o in pads and pads[o] != v:
            # writers padding differently: one of their values (a single value stays a float)
            both = None if pads[o] is None or v is None else sorted(set(_values(pads[o]) + _values(v)))
            pads[o] = None if both is None else tuple(both)
        else:
            pads.setdefault(o, v)
    const = a.const if a.const == b.const else None
    expr = a.expr if a.expr == b.expr else None
    aligned = tuple(a.along(i) | b.along(i) for i in range(len(axes)))
    return Flow(axes, a.families | b.families, tuple(pads.items()), const, expr, aligned, a.combined | b.combined)


def _constant_fill(f: Flow) -> bool:
    """A constant fragment with no input in it (zeros(...), full(..., c))."""
    return f.const is not None and not f.families and all(o is None for o in f.axes)


def _product(choices):
    if not choices:
        yield []
        return
    for head in choices[0]:
        for rest in _product(choices[1:]):
            yield [head, *rest]


def _literal(x: float) -> str:
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return f"{x:g}"


def contract_families(kernel: ir.Kernel, contract: ir.Contract) -> set:
    """The (operator, Origin) reductions a contract names (`ir.Contract.reduced_dims`)."""
    return {(op, Origin(t, d)) for op, t, d in contract.reduced_dims()}


def check_expressions(kernel: ir.Kernel, flow: ReductionFlow, timeout_s: float) -> list:
    """Every value stored to an output with a contract is the contract's expression (Z3 over the
    reals). Returns [(store, status, message, witness)] for the stores that are not proved."""
    out = []
    for store, f in flow.outputs:
        contract = kernel.contract_of(store.dst.base)
        if contract is None:
            continue
        want = X.of_contract(contract.expr)
        if f.expr is None:
            out.append((store, "unknown", f"the value stored to {store.dst.base} could not be followed back to the "
                                          "inputs (a loop-carried value other than an accumulator, or shared "
                                          "memory read before the pass saw a write)", {}))
            continue
        have = X.unlane(f.expr)
        integers = frozenset(p.name for p in kernel.params if p.dtype in ir.INT_DTYPES)
        if have[0] == "cast" and have[1] == kernel.param(store.dst.base).dtype:
            # the contract's value, converted to the output's dtype: its low bits where it is an integer
            integral = X.names(want) <= integers and not X.divides(want)
            want = ("cast", have[1], want, "wrap" if integral else "saturate")
        eq = X.Equivalence(timeout_s, integers=integers)
        res = eq.equal(have, want)
        if res is None:
            out.append((store, "unknown", f"{store.dst.base} could not be compared with its contract: "
                                          f"{eq.reason}", {}))
        elif res is False:
            why = f" ({eq.reason})" if eq.reason else ""
            out.append((store, "violated", f"{store.dst.base} receives {X.render(f.expr)}, but the contract says "
                                           f"{X.render(want)}{why}", eq.witness))
    return out


def check_outputs(kernel: ir.Kernel, flow: ReductionFlow) -> None:
    """Every value stored to an output with a contract aggregates exactly the contract's
    reductions (operator and dimension)."""
    for store, f in flow.outputs:
        contract = kernel.contract_of(store.dst.base)
        if contract is None:
            continue
        want = contract_families(kernel, contract)
        have = set(f.families)
        if have == want:
            continue
        missing = sorted(want - have, key=str)
        extra = sorted(have - want, key=str)
        parts = []
        if missing:
            parts.append("the contract's " + ", ".join(_fam(x) for x in missing) + " is not computed")
        if extra:
            parts.append("the kernel computes " + ", ".join(_fam(x) for x in extra) + ", which the contract "
                         "does not name")
        if missing and all(x in f.combined for x in missing):
            # combined elementwise (`s[t] + s[t + h]` in a loop): maybe the very reduction, uncounted
            flow.report("reduction-operator", store.span,
                        f"{store.dst.base} combines elements of " + ", ".join(
                            f"{o.tensor}'s dimension {o.dim}" for _, o in missing) +
                        " with elementwise operators (a tree over shared memory?), which the pass does not count "
                        "as a reduction", status="unknown")
            continue
        flow.report("reduction-operator", store.span,
                    f"{store.dst.base} does not receive the contract's reductions: " + "; ".join(parts),
                    f"the contract (line {contract.span.line}) says {store.dst.base} = ...; reduce along the "
                    "dimensions it names, with its operators",
                    want=[_fam(x) for x in sorted(want, key=str)], have=[_fam(x) for x in sorted(have, key=str)],
                    what=f"the value stored at line {store.span.line} aggregates "
                         f"{', '.join(_fam(x) for x in sorted(have, key=str)) or 'no reduction'}; the contract: "
                         f"{', '.join(_fam(x) for x in sorted(want, key=str)) or 'no reduction'}")


def _fam(f) -> str:
    op, origin = f
    return f"{op} over {origin.tensor}'s dimension {origin.dim}"
