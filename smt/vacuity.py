"""No vacuous proof: the sizes a kernel admits, and the `launch` obligation.

Every obligation is proved under the *admissible* launches: each size in 1..MAX_SIZE (or the
given shape), integer scalars in 32-bit range, every `requires`, and a grid of at least one block.
A proof under no admissible launch at all proves nothing, and sizes for which the grid is empty
or a size expression divides by zero are launches the proofs silently leave out. So, with Z3:

* admissibility: the preconditions are satisfiable. When the kernel's own preconditions
  contradict each other (or the size range), `launch` is violated at the requires and every other
  obligation is *vacuous*; when only the given shapes leave nothing, every result is vacuous.
* grid: every extent is at least 1 for every admissible size; when it is at least 1 for none,
  every other obligation is vacuous too.
* division by zero: every divisor (in the grid, the requires, integer lets, loop bounds,
  conditions, view starts, where=, select arms) is non-zero for every admissible size, and in the
  body for every block, thread and loop iteration at which it is evaluated: the thread and block
  ids and the loop variables are variables over their ranges, and the `if` conditions and loop
  ranges around the division constrain them. A division under a condition or loop range the check
  cannot express (a let assigned in a loop or a branch) may not run at all: a possible zero there
  is unknown, not a violation.

Integer expressions are translated through the semantics table (`INT_OPS[op].z3(Z, a, b)`) over
the analysis's size and scalar variables, so "admissible" here is what the obligations assume.
"""

from __future__ import annotations

import contextlib
import time

import attrs
import z3

from argus_verify import ir, semantics
from argus_verify.diagnostics import SOURCES, Span
from argus_verify.printer import fmt_iexpr
from argus_verify.smt import zops as Z
from argus_verify.smt.report import ObligationResult
from argus_verify.visitor import INT_EXPRS, Visitor

SMALL_SIZES = (64, 256, 1024, 8192)  # witnesses prefer sizes within these bounds (cheap to replay)


@attrs.frozen
class Premise:
    """One constraint of the admissible launches, as a message names it."""

    kind: str  # "size" (at least 1) | "range" (the verifier's upper bound) | "shape" | "requires"
    text: str
    span: Span | None = None  # a requires: where it is written
    size: str = ""  # the size it is about (not for requires)

    def describe(self) -> str:
        return f"`{self.text}` (line {self.span.line})" if self.span is not None else self.text


@attrs.define
class Admissibility:
    status: str  # "sat" | "unsat" | "unknown"
    core: list = attrs.field(factory=list)  # unsat: premises that contradict each other, none redundant
    reason: str = ""  # unknown: the solver's limit

    def describe(self) -> str:
        parts = [p.describe() for p in self.core]
        if len(parts) == 1:
            return f"{parts[0]} never holds"
        return ", ".join(parts[:-1]) + f" and {parts[-1]} contradict each other"

    def requires(self) -> list:
        return [p for p in self.core if p.kind == "requires"]

    def shapes(self) -> list:
        return [p.size for p in self.core if p.kind == "shape"]


@attrs.define
class Launch:
    results: list  # the `launch` obligation's results
    vacuous: str = ""  # why every other obligation holds only vacuously ("" when it does not)


@attrs.frozen(eq=False)
class Division:
    node: ir.IBin
    divisor: object  # its Z3 term
    path: tuple  # Z3 conditions under which it is evaluated
    guard: Span | None  # a condition above it the check cannot express (it may not run)
    # where it is evaluated: "body" (by the blocks), "grid", or the index of its requires (the
    # preconditions are evaluated in order, each under the earlier ones)
    scope: str | int
    # the execution point's variables in scope (thread, block ids, loop variables by name), for
    # the witness of a divisor or path that mentions them
    point: dict = attrs.field(factory=dict)

    @property
    def point_free(self) -> bool:
        """The divisor itself is a size expression (no thread, block or loop variable)."""
        return not _at_point(self.divisor)


def check_launch(kernel: ir.Kernel, shapes: dict, timeout_s: float) -> Launch:
    """The `launch` obligation's results, and whether every other obligation is vacuous."""
    with int_encoding():
        return _Launcher(kernel, shapes, timeout_s).check()


def admissibility(kernel: ir.Kernel, shapes: dict, timeout_s: float, size_cap: bool = True) -> Admissibility:
    """Whether some launch satisfies the sizes' range (`size_cap`: also the verifier's upper
    bound), the given `shapes` and every `requires`."""
    with int_encoding():
        return _Launcher(kernel, shapes, timeout_s).admissibility(bool(shapes), size_cap)


def mark_vacuous(results: list, reason: str) -> None:
    """Results computed under no admissible launch: none of them says anything."""
    for r in results:
        r.detail = {"reason": reason, "checked": r.message}
        r.status, r.message, r.witness, r.path, r.explanation = "vacuous", reason, {}, [], []
        r.hint = "fix the launch first (the launch obligation says why)"


@contextlib.contextmanager
def int_encoding():
    """Build terms in the integer encoding, with fresh range facts; leave the mode as it was."""
    saved = Z.MODE
    Z.set_mode("int")
    Z.begin_query()
    Z.end_defs()
    try:
        yield
    finally:
        Z.set_mode(saved)


class _Launcher:
    def __init__(self, kernel, shapes, timeout_s):
        self.k = kernel
        self.shapes = {n: int(v) for n, v in (shapes or {}).items() if n in kernel.sizes}
        self.timeout_s = timeout_s
        self.sizes = {n: Z.var(n) for n in kernel.sizes}
        self.scalars = {
            p.name: Z.var(f"param.{p.name}")
            for p in kernel.params
            if isinstance(p, ir.ScalarParam) and not ir.is_float(p.dtype)
        }
        self.terms = SizeTerms(kernel)
        env = {**self.sizes, **self.scalars}
        self.grid = [self.terms.term(g, env) for g in kernel.grid]
        self.env = {**env, **{f"num_blocks.{a}": g for a, g in zip("xyz", self.grid, strict=True)}}
        self.requires = [Z.i2b(self.terms.term(r, self.env)) for r in kernel.requires]

    # -- admissible launches ---------------------------------------------------------------------
    def premises(self, with_shapes: bool, size_cap: bool) -> list:
        """(premise, constraint) pairs of the admissible launches."""
        out = []
        for n, s in self.sizes.items():
            out.append((Premise("size", f"{n} >= 1 (every size is at least 1)", size=n), s >= 1))
            if size_cap:
                text = f"{n} <= {Z.MAX_SIZE} (the verifier's size range)"
                out.append((Premise("range", text, size=n), s <= Z.MAX_SIZE))
            if with_shapes and n in self.shapes:
                text = f"{n} = {self.shapes[n]} (the given shape)"
                out.append((Premise("shape", text, size=n), s == self.shapes[n]))
        for r, term in zip(self.k.requires, self.requires, strict=True):
            line = SOURCES.line(r.span.file, r.span.line)
            text = line.strip() if line is not None else f"requires {fmt_iexpr(r)}"
            out.append((Premise("requires", text, r.span), term))
        return out

    def scalar_range(self) -> list:
        return [c for p in self.scalars.values() for c in (p >= -(1 << 31), p < (1 << 31))]

    def admitted(self, requires: int | None = None) -> list:
        """The constraints every obligation assumes, but the grid's (only the first `requires`
        preconditions when that is given)."""
        cons = [c for p, c in self.premises(True, True) if p.kind != "requires"] + self.scalar_range()
        return cons + self.requires[:requires]

    def admissibility(self, with_shapes: bool, size_cap: bool) -> Admissibility:
        s = self.solver()
        s.add(*self.scalar_range())
        labels = {}
        for i, (premise, c) in enumerate(self.premises(with_shapes, size_cap)):
            lit = z3.Bool(f"admit.{i}")
            s.add(z3.Implies(lit, c))
            labels[lit] = premise
        result = s.check(*labels)
        if result == z3.sat:
            return Admissibility("sat")
        if result != z3.unsat:
            return Admissibility("unknown", reason=self.gave_up(s))
        core = list(s.unsat_core())
        for lit in list(core):  # drop the premises the contradiction does not need
            rest = [c for c in core if not c.eq(lit)]
            if s.check(*rest) == z3.unsat:
                core = rest
        return Admissibility("unsat", [p for lit, p in labels.items() if any(lit.eq(c) for c in core)])

    # -- the obligation --------------------------------------------------------------------------
    def check(self) -> Launch:
        own = self.admissibility(False, True)
        given = self.admissibility(True, True) if self.shapes and own.status == "sat" else own
        if given.status == "unsat":
            # the kernel's own preconditions contradict: its bug; only the given shapes: no question asked
            status = "violated" if given is own else "vacuous"
            reason = f"no launch is admissible: {given.describe()}"
            return Launch([self.contradiction(given, status)], vacuous=reason)
        if given.status == "unknown":
            return Launch([self.result("unknown", self.k.span, f"admissible sizes undecided: {given.reason}")])
        divisions = _Divisions.find(self.k, self.terms, self.env, self.grid)
        # where the grid divides by zero its extents mean nothing: that division is reported instead
        defined = [Z.Ne(d.divisor, 0) for d in divisions if d.scope == "grid"]
        grid, never = self.check_grid(defined)
        if never:
            return Launch(grid, vacuous="the grid is empty for every admissible size")
        limits = self.check_grid_limits(defined) + self.check_tma_rows()
        return Launch(grid + limits + [self.check_division(d) for d in divisions])

    def contradiction(self, adm: Admissibility, status: str) -> ObligationResult:
        reqs = adm.requires()
        where = reqs[-1].span if reqs else self.k.span
        return self.result(
            status,
            where,
            f"no launch is admissible: {adm.describe()}",
            witness={"requires": [{"line": p.span.line, "source": p.text} for p in reqs]} if reqs else {},
            explanation=[p.describe() for p in adm.core],
            hint="every other obligation would hold vacuously; correct the requires (or the shape)",
        )

    def check_grid(self, defined: list) -> tuple[list, bool]:
        """The grid's result(s), and whether the grid is empty for every admissible launch (where
        `defined`: its divisors are not 0)."""
        spans = [g.span for g in self.k.grid if g.span.line > 0]
        where = spans[0] if spans else self.k.span
        t0 = time.perf_counter()
        s = self.solver()
        s.add(*self.admitted(), *defined)
        s.add(Z.Or(*[Z.Lt(g, 1) for g in self.grid]))
        found = s.check()
        if found == z3.unsat:
            return [self.result("proved", where, "every grid extent is at least 1 for every admissible size",
                                seconds=time.perf_counter() - t0)], False
        if found != z3.sat:
            return [self.result("unknown", where, f"grid extents could not be checked: {self.gave_up(s)}")], False
        empty = self.empty_grid(self.small_model(s), where)
        empty.seconds = time.perf_counter() - t0
        s = self.solver()
        s.add(*self.admitted(), *defined, *[Z.Le(1, g) for g in self.grid])
        return [empty], s.check() == z3.unsat

    def check_grid_limits(self, defined: list) -> list:
        """Each grid extent within what CUDA launches (2**31 - 1 blocks along x, 65535 along y and z):
        a larger grid fails to launch at those sizes (a warning naming the sizes)."""
        out = []
        for axis, (g, limit) in enumerate(zip(self.grid, ir.GRID_MAX, strict=True)):
            fixed = Z.const_value(g)
            if fixed is not None and fixed <= limit:
                continue
            ext = self.k.grid[axis]
            where = ext.span if ext.span.line > 0 else self.k.span
            s = self.solver()
            s.add(*self.admitted(), *defined, Z.Lt(limit, g))
            found = s.check()
            if found == z3.unsat:
                continue
            if found != z3.sat:
                out.append(self.result("unknown", where, f"grid extent {fmt_iexpr(ext)} could not be bounded by "
                                                         f"{limit}: {self.gave_up(s)}"))
                continue
            model = s.model()  # (not the smallest model: the extent is large by definition)
            value = model.eval(g, model_completion=True).as_long()
            text = fmt_iexpr(ext)
            # a warning, not a violation: such a launch fails loudly (the runtime refuses it), it never
            # computes a wrong result, and the verifier's size range (up to 2**20) is its own choice
            out.append(self.result(
                "warning", where,
                f"grid extent {text} along {'xyz'[axis]} reaches {value}, over the {limit} blocks CUDA launches: "
                "such sizes fail to launch (the runtime refuses them)",
                witness={**self.witness(model), "grid": [model.eval(x, model_completion=True).as_long()
                                                         for x in self.grid]},
                hint=f"launch the long dimension along x (up to {ir.GRID_MAX[0]} blocks), or add "
                     f"`requires {text} <= {limit}`"))
        return out

    def check_tma_rows(self) -> list:
        """The row stride of every tensor a TMA copy moves is a multiple of 16 bytes: the runtime
        cannot encode its tensor map otherwise, and the launch fails."""
        out = []
        for name, stmt in ir.tma_tensors(self.k).items():
            param = self.k.param(name)
            esize = ir.DTYPE_BYTES[param.dtype]
            cols = self.terms.term(param.shape[-1], self.env)
            s = self.solver()
            s.add(*self.admitted(), Z.Ne(Z.mod(Z.mul(cols, esize), ir.TMA_ROW_BYTES), 0))
            found = s.check()
            if found == z3.unsat:
                continue
            if found != z3.sat:
                out.append(self.result("unknown", stmt.span, f"the row stride of {name} could not be checked: "
                                                             f"{self.gave_up(s)}"))
                continue
            model = self.small_model(s)
            width = fmt_iexpr(param.shape[-1])
            rows = model.eval(cols, model_completion=True).as_long() * esize
            out.append(self.result(
                "violated", stmt.span,
                f"TMA moves {name}, whose rows of {width} {param.dtype} are {rows} bytes, not a multiple of "
                f"{ir.TMA_ROW_BYTES}: its tensor map cannot be built and the launch fails",
                witness=self.witness(model),
                hint=f"add `requires {width} % {ir.TMA_ROW_BYTES // esize} == 0`"))
        return out

    def empty_grid(self, model, where) -> ObligationResult:
        extents = [model.eval(g, model_completion=True).as_long() for g in self.grid]
        axis = next(i for i, x in enumerate(extents) if x < 1)
        ext, text = self.k.grid[axis], fmt_iexpr(self.k.grid[axis])
        if Z.const_value(self.grid[axis]) is None:
            message = f"grid extent {text} is {extents[axis]}: the launch has no blocks"
            witness = {**self.witness(model), "grid": extents}
            hint = f"add `requires {text} >= 1` if such sizes are not to be launched"
        else:
            message = f"grid extent {text} is less than 1: no launch has any block"
            witness, hint = {"grid": extents}, "a grid extent must be at least 1"
        return self.result("violated", ext.span if ext.span.line > 0 else where, message, witness=witness, hint=hint)

    def check_division(self, d: Division) -> ObligationResult:
        t0 = time.perf_counter()
        s = self.solver()
        s.add(*self.admitted(d.scope if isinstance(d.scope, int) else None), *d.path, Z.Eq(d.divisor, 0))
        if d.scope == "body":
            s.add(*[Z.Le(1, g) for g in self.grid])
        found = s.check()
        text = fmt_iexpr(d.node.b)
        if found == z3.unsat:
            return self.result("proved", d.node.span, f"the divisor {text} is never 0",
                               seconds=time.perf_counter() - t0)
        if found != z3.sat:
            return self.result("unknown", d.node.span, f"division by {text} could not be checked: {self.gave_up(s)}")
        model = self.small_model(s)
        w = self.witness(model)
        at = ", ".join(f"{n} = {v}" for n, v in {**w["sizes"], **w.get("scalars", {})}.items())
        if d.guard is not None:
            return self.result(
                "unknown",
                d.node.span,
                f"the divisor {text} is 0 for {at}, where the division may not run: it is under the "
                f"condition or loop at line {d.guard.line}, which depends on a value the check does not "
                "follow (a let assigned in a loop or a branch)",
                witness=w,
            )
        where = _point_at(d, model, w)
        if where:
            return self.result(
                "violated",
                d.node.span,
                f"division by zero: the divisor {text} is 0 for {at}, {where}",
                witness=w,
                hint=f"add `requires {text} != 0` (or `>= 1`) if such sizes are not to be launched"
                if d.point_free else f"guard the division (`if {text} != 0:`) or keep {text} non-zero at every "
                "thread, block and iteration",
                seconds=time.perf_counter() - t0,
            )
        return self.result(
            "violated",
            d.node.span,
            f"division by zero: the divisor {text} is 0",
            witness=w,
            hint=f"add `requires {text} != 0` (or `>= 1`) if such sizes are not to be launched",
            seconds=time.perf_counter() - t0,
        )

    # -- solving ---------------------------------------------------------------------------------
    def solver(self):
        s = z3.Solver()
        s.set("timeout", max(1, int(self.timeout_s * 1000)))
        return s

    def gave_up(self, s) -> str:
        return f"solver gave up after {self.timeout_s:g} s ({s.reason_unknown()})"

    def small_model(self, s):
        """The model of `s` (whose last check was sat), with sizes within the smallest of SMALL_SIZES
        that admits one. The first model is kept: a re-check may give up under load."""
        first = s.model()
        for bound in SMALL_SIZES:
            s.push()
            s.add(*[x <= bound for x in self.sizes.values()])
            if s.check() == z3.sat:
                model = s.model()
                s.pop()
                return model
            s.pop()
        return s.model() if s.check() == z3.sat else first

    def witness(self, model) -> dict:
        def values(terms):
            return {n: model.eval(x, model_completion=True).as_long() for n, x in terms.items()}

        w = {"sizes": values(self.sizes)}
        if self.scalars:
            w["scalars"] = values(self.scalars)
        return w

    def result(self, status, span, message, seconds=0.0, **fields) -> ObligationResult:
        if status == "unknown":
            fields.setdefault("detail", {"reason": message})
        return ObligationResult("launch", status, span, message, seconds=seconds, **fields)


def _point_at(d: Division, model, w: dict) -> str:
    """The block, thread and iterations of a division whose divisor or path depends on them, added
    to the witness `w`; "" for a division of sizes alone (its witness is the sizes)."""
    if not d.point:
        return ""
    val = {n: model.eval(x, model_completion=True).as_long() for n, x in d.point.items()}
    w["block"] = [val["block_id.x"], val["block_id.y"], val["block_id.z"]]
    w["thread"] = val["thread_id"]
    w["loop"] = {n: v for n, v in val.items() if n not in _POINT_SPECIALS}
    parts = [f"block {tuple(w['block'])}, thread {w['thread']}"]
    if w["loop"]:
        parts.append(", ".join(f"{n} = {v}" for n, v in w["loop"].items()))
    return " at ".join(parts)


_POINT_SPECIALS = ("thread_id", "block_id.x", "block_id.y", "block_id.z")


def _at_point(term) -> bool:
    """`term` mentions the thread, a block id or a loop variable (the `point.` variables)."""
    return any(n.startswith("point.") for n in _constants(term))


def _constants(term) -> set:
    """Names of the uninterpreted constants of a Z3 term. (z3.z3util.get_vars walks the term as a
    tree, without memo: exponential on the shared subterms of nested divisions.)"""
    seen, out, todo = set(), set(), [term]
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(e.decl().name())
        todo.extend(e.children())
    return out


class SizeTerms(Visitor, families=("int_exprs",)):
    """The Z3 term of an integer expression of sizes, scalars, constants and the execution point's
    variables in `env` (in the body: the thread and block ids, the loop variables), or None for one
    that depends on anything else (a let the check does not follow, a tag)."""

    def __init__(self, kernel):
        self.tagfns = {f.name: f for f in kernel.tagfns}

    def term(self, e, env):
        return self.visit(e, env)

    def visit_IConst(self, e, env):
        return Z.bv(e.value)

    def visit_IVar(self, e, env):
        return env.get(e.name)

    def visit_ISpecial(self, e, env):
        if e.which in ("warp_id", "lane_id") and "thread_id" in env:
            t = env["thread_id"]
            return Z.floordiv(t, Z.bv(32)) if e.which == "warp_id" else Z.mod(t, Z.bv(32))
        return env.get(e.which)  # num_blocks.*; in the body also the thread and block ids

    def visit_IBin(self, e, env):
        a, b = self.visit(e.a, env), self.visit(e.b, env)
        return None if a is None or b is None else semantics.INT_OPS[e.op].z3(Z, a, b)

    def visit_IUn(self, e, env):
        a = self.visit(e.a, env)
        return None if a is None else semantics.INT_UNARY[e.op].z3(Z, a)

    def visit_ISelect(self, e, env):
        c, a, b = self.visit(e.cond, env), self.visit(e.a, env), self.visit(e.b, env)
        return None if c is None or a is None or b is None else Z.Ite(Z.i2b(c), a, b)

    def visit_ICall(self, e, env):
        fn = self.tagfns[e.fn]
        args = [self.visit(a, env) for a in e.args]
        if any(a is None for a in args):
            return None
        return self.visit(fn.body, {**env, **dict(zip(fn.params, args, strict=True))})

    def visit_ITag(self, e, env):
        return None

    visit_ICoord = visit_ITag


class _Divisions(Visitor, families=("statements",)):
    """Every division whose divisor is a size expression, with the conditions under which it runs.

    Integer lets of size expressions are followed (`nk = cdiv(K, BK)` then `range(0, nk)`); a let
    assigned in a loop or a branch is no size expression after it, nor inside the loop."""

    def __init__(self, terms):
        self.terms = terms
        self.found: list = []
        self.point: dict = {}  # the execution point's variables in scope (see Division.point)
        self.ranges: set = set()  # ids of the path's range constraints of those variables
        self.loops = 0

    @classmethod
    def find(cls, kernel, terms, env, grid) -> list:
        walker = cls(terms)
        for e in kernel.grid:
            walker.scan(e, env, (), None, "grid")
        for i, e in enumerate(kernel.requires):
            walker.scan(e, env, (), None, i)
        # the body runs in every block and thread: their ids are variables over the launch's ranges
        t = Z.var("point.thread")
        walker.point = {"thread_id": t}
        ranges = [Z.Le(Z.bv(0), t), Z.Lt(t, Z.bv(kernel.block))]
        for axis, extent in zip("xyz", grid, strict=True):
            b = Z.var(f"point.block.{axis}")
            walker.point[f"block_id.{axis}"] = b
            ranges += [Z.Le(Z.bv(0), b), Z.Lt(b, extent) if extent is not None else Z.Eq(b, Z.bv(0))]
        walker.ranges = {c.get_id() for c in ranges}
        walker.body(kernel.body, {**env, **walker.point}, tuple(ranges), None)
        return walker.found

    def scan(self, e, env, path, guard, scope="body"):
        for sub, live, hidden in _divisions_of(e, env, self.terms, ()):
            divisor = self.terms.term(sub.b, env)
            if divisor is not None and Z.const_value(divisor) in (None, 0):  # constants != 0 are fine
                # the witness names the point when the divisor or a condition (not a range) depends on it
                conds = [c for c in path + live if c.get_id() not in self.ranges]
                named = scope == "body" and any(_at_point(c) for c in (divisor, *conds))
                point = dict(self.point) if named else {}
                self.found.append(Division(sub, divisor, path + live, guard or hidden, scope, point))

    def body(self, stmts, env, path, guard):
        for s in stmts:
            self.visit(s, env, path, guard)

    def visit_Let(self, s, env, path, guard):
        self.scan(s.value, env, path, guard)
        value = self.terms.term(s.value, env)
        if value is None:
            env.pop(s.name, None)
        else:
            env[s.name] = value

    def visit_If(self, s, env, path, guard):
        self.scan(s.cond, env, path, guard)
        c = self.terms.term(s.cond, env)
        if c is None:
            self.body(s.then, dict(env), path, guard or s.span)
            self.body(s.orelse, dict(env), path, guard or s.span)
        else:
            self.body(s.then, dict(env), path + (Z.i2b(c),), guard)
            self.body(s.orelse, dict(env), path + (Z.Not(Z.i2b(c)),), guard)
        _forget_assigned(env, s.then + s.orelse)

    def visit_For(self, s, env, path, guard):
        self.scan(s.start, env, path, guard)
        self.scan(s.stop, env, path, guard)
        _forget_assigned(env, s.body)  # their values differ from one iteration to the next
        lo, hi = self.terms.term(s.start, env), self.terms.term(s.stop, env)
        inner = dict(env)
        inner.pop(s.var, None)
        if lo is None or hi is None:
            self.body(s.body, inner, path, guard or s.span)
            return
        # the loop variable over the iterations: lo + step * m below hi (above it for a negative step)
        self.loops += 1
        m = Z.var(f"point.loop{self.loops}.{s.var}.m")
        v = Z.add(lo, Z.mul(m, Z.bv(s.step)))
        runs = (Z.Le(Z.bv(0), m), Z.Lt(v, hi) if s.step > 0 else Z.Lt(hi, v))
        inner[s.var] = v
        self.ranges |= {c.get_id() for c in runs}
        saved = self.point
        self.point = {**saved, s.var: v}
        try:
            self.body(s.body, inner, path + runs, guard)
        finally:
            self.point = saved

    def visit_expressions(self, s, env, path, guard):
        for e in _expressions(s):
            self.scan(e, env, path, guard)

    visit_Assign = visit_Store = visit_Stmatrix = visit_CopyAsync = visit_Assert = visit_expressions
    visit_MbarrierOp = visit_TmaLoad = visit_TmaStore = visit_expressions
    visit_TmaLoadMulticast = visit_MbarrierArriveCluster = visit_expressions

    def visit_nothing(self, s, env, path, guard):
        pass

    visit_SharedAlloc = visit_Commit = visit_Wait = visit_Barrier = visit_nothing
    visit_Fence = visit_WgmmaGroup = visit_BulkGroup = visit_SetMaxNReg = visit_nothing
    visit_ClusterSync = visit_nothing


def _divisions_of(e, env, terms, live):
    """(division, the select conditions under which it is evaluated, the span of a select whose
    condition the check cannot express, or None) for every division in `e`: an arm of a select
    is evaluated only where it is selected."""
    if isinstance(e, ir.IBin):
        if semantics.INT_OPS[e.op].divides:
            yield e, live[0] if live else (), live[1] if live else None
        yield from _divisions_of(e.a, env, terms, live)
        yield from _divisions_of(e.b, env, terms, live)
    elif isinstance(e, ir.IUn):
        yield from _divisions_of(e.a, env, terms, live)
    elif isinstance(e, ir.ISelect):
        yield from _divisions_of(e.cond, env, terms, live)
        conds, hidden = live if live else ((), None)
        c = terms.term(e.cond, env)
        if c is None:
            yield from _divisions_of(e.a, env, terms, (conds, hidden or e.span))
            yield from _divisions_of(e.b, env, terms, (conds, hidden or e.span))
        else:
            yield from _divisions_of(e.a, env, terms, (conds + (Z.i2b(c),), hidden))
            yield from _divisions_of(e.b, env, terms, (conds + (Z.Not(Z.i2b(c)),), hidden))
    elif isinstance(e, ir.ICall):
        for a in e.args:
            yield from _divisions_of(a, env, terms, live)


def _forget_assigned(env, stmts) -> None:
    for s in ir.walk_stmts(stmts):
        if isinstance(s, ir.Let):
            env.pop(s.name, None)


def _expressions(node):
    """The integer expressions an IR node holds (view starts, where=, shuffle lanes...), through
    its fields: new fields of the IR are covered without a change here."""
    if isinstance(node, INT_EXPRS):
        yield node
    elif isinstance(node, tuple):
        for x in node:
            yield from _expressions(x)
    elif attrs.has(type(node)) and type(node).__module__ == ir.__name__:
        for field in attrs.fields(type(node)):
            yield from _expressions(getattr(node, field.name))
