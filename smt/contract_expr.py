"""What a kernel computes for an output, as an expression, and whether it is the contract's.

Terms are tuples: ("elem", tensor), ("const", value), ("un", op, a), ("bin", op, a, b),
("red", op, a) (a reduction of `a` with `op`, however the kernel splits it over values, lanes,
shared-memory partials and loop iterations: smt/coverage.py proves the split takes every element
once), and ("lane", a): `a` as another lane holds it (a shuffle). None means the pass lost track.

Equality is decided by Z3 over the reals: tensors are real variables, +, -, *, / are exact, max
and min are conditionals, math functions and reductions are uninterpreted functions (so equal
arguments give equal results and nothing more). "Equal" therefore means equal as real-number
expressions, up to regrouping; rounding differences are outside what this proves.
"""

from __future__ import annotations

import math

import z3

from argus_verify import ir, semantics

LOG2_E = 1.0 / math.log(2.0)


def combine(op: str, a, b):
    """The term of `a op b` where `op` combines a reduction (sum, max, min) or not."""
    if a is None or b is None:
        return None
    entry = semantics.FLOAT_BINARY.get(op)
    red = entry.combines if entry is not None and entry.combines in semantics.REDUCE_OPS else None
    if red is not None:
        identity = semantics.REDUCE_OPS[red].identity
        for x, y in ((a, b), (b, a)):
            if x[0] == "const" and x[1] == identity:
                return y
        sa, sb = strip(a, red), strip(b, red)
        partial = any(t[0] in ("red", "lane") for t in (a, b))
        if sa == sb and partial:
            return reduction(red, sa)
    return ("bin", op, unlane(a), unlane(b))


def unary(op: str, a):
    return None if a is None else ("un", op, unlane(a))


def reduction(op: str, a):
    """The term of reducing `a` with `op`. A sum takes out the factors that are the same for every
    element it adds (constants and scalar parameters: sum(x * c) = sum(x) * c over the reals), a max
    or min the terms added or subtracted (max(x - c) = max(x) - c), so that scaling or shifting
    before or after the reduction, or between its levels, gives one term. Only those: an element of
    another tensor may vary along the reduced dimension (the terms do not say)."""
    if a is None:
        return None
    a = unlane(a)
    if op == "sum" and a[0] == "bin" and a[1] == "*":
        for inner, factor in ((a[2], a[3]), (a[3], a[2])):
            if uniform(factor) and not uniform(inner):
                return ("bin", "*", reduction(op, inner), factor)
    if op in ("max", "min") and a[0] == "bin" and a[1] in ("+", "-"):
        # max(x + c) = max(x) + c (rounding is monotone, so also in floating point); not c - x
        sides = ((a[2], a[3]),) if a[1] == "-" else ((a[2], a[3]), (a[3], a[2]))
        for inner, shift in sides:
            if uniform(shift) and not uniform(inner):
                return ("bin", a[1], reduction(op, inner), shift)
    return ("red", op, strip(a, op))


def uniform(t) -> bool:
    """Whether term t is the same for every element of any reduction: built of constants and scalar
    parameters alone."""
    if t is None:
        return False
    if t[0] in ("const", "scalar"):
        return True
    if t[0] == "un":
        return uniform(t[2])
    if t[0] == "bin":
        return uniform(t[2]) and uniform(t[3])
    return False


def strip(t, op: str):
    """`t` without the partial reductions (and lane moves) of `op` around it."""
    while t is not None and (t[0] == "lane" or (t[0] == "red" and t[1] == op)):
        t = t[-1]
    return t


def unlane(t):
    while t is not None and t[0] == "lane":
        t = t[1]
    return t


def of_contract(e) -> tuple:
    if isinstance(e, ir.CElem):
        return ("elem", e.tensor)
    if isinstance(e, ir.CConst):
        return ("const", float(e.value))
    if isinstance(e, ir.CScalar):
        return ("scalar", e.name)
    if isinstance(e, ir.CUn):
        return ("un", e.op, of_contract(e.a))
    if isinstance(e, ir.CBin):
        return ("bin", e.op, of_contract(e.a), of_contract(e.b))
    if isinstance(e, ir.CReduce):
        return reduction(e.op, of_contract(e.body))
    raise TypeError(e)


def render(t) -> str:
    if t is None:
        return "?"
    kind = t[0]
    if kind == "elem":
        return t[1]
    if kind == "const":
        return f"{t[1]:g}"
    if kind == "scalar":
        return t[1]
    if kind == "un":
        return f"{t[1]}({render(t[2])})"
    if kind == "bin":
        if t[1].isalpha():
            return f"{t[1]}({render(t[2])}, {render(t[3])})"
        return f"({render(t[2])} {t[1]} {render(t[3])})"
    if kind == "red":
        return f"{t[1]}({render(t[2])})"
    if kind == "lane":
        return render(t[1])
    return str(t)


class Equivalence:
    """Decides kernel term == contract term; `witness` holds tensor values where they differ."""

    def __init__(self, timeout_s: float = 5.0):
        self.vars: dict = {}
        self.funs: dict = {}
        self.timeout_s = timeout_s
        self.witness: dict = {}
        self.reason = ""

    def term(self, t):
        kind = t[0]
        if kind in ("elem", "scalar"):  # a tensor's element or a scalar parameter (their names differ)
            return self.vars.setdefault(t[1], z3.Real(t[1]))
        if kind == "const":
            v = t[1]
            if math.isinf(v) or math.isnan(v):
                return self.fun("const", str(v))()
            return z3.RealVal(repr(float(v)))
        if kind == "lane":
            return self.term(t[1])
        if kind == "un":
            a = self.term(t[2])
            op = t[1]
            if op == "neg":
                return -a
            if op == "abs":
                return z3.If(a >= 0, a, -a)
            if op == "recip":
                return 1 / a
            if op == "exp":  # exp(x) = exp2(x log2 e): the lowering's and the kernels' own spelling
                return self.fun("un", "exp2")(a * z3.RealVal(repr(LOG2_E)))
            if op == "log":
                return self.fun("un", "log2")(a) * z3.RealVal(repr(math.log(2.0)))
            return self.fun("un", op)(a)
        if kind == "bin":
            a, b = self.term(t[2]), self.term(t[3])
            op = t[1]
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                return a / b
            if op == "max":
                return z3.If(a >= b, a, b)
            if op == "min":
                return z3.If(a <= b, a, b)
            return self.fun("bin", op, 2)(a, b)
        if kind == "red":
            return self.fun("red", t[1])(self.term(t[2]))
        raise TypeError(t)

    def never_past(self, t, values, op: str) -> bool:
        """Whether term t is at least (op "max") or at most ("min") each of `values` for every input:
        True only where the solver proves it."""
        s = z3.Solver()
        s.set("timeout", int(self.timeout_s * 1000))
        e = self.term(t)
        for v in values:
            bound = z3.RealVal(repr(float(v)))
            s.push()
            s.add(e < bound if op == "max" else e > bound)  # an element below (above) the value
            verdict = s.check()
            s.pop()
            if verdict != z3.unsat:
                return False
        return True

    def fun(self, kind, name, arity=1):
        key = (kind, name, arity)
        if key not in self.funs:
            self.funs[key] = z3.Function(f"{kind}_{name}", *([z3.RealSort()] * arity), z3.RealSort())
        return self.funs[key]

    def equal(self, kernel_term, contract_term) -> bool | None:
        """True: equal for all inputs; False: differ (see `witness`); None: the solver gave up."""
        s = z3.Solver()
        s.set("timeout", int(self.timeout_s * 1000))
        s.add(self.term(kernel_term) != self.term(contract_term))
        res = s.check()
        if res == z3.unsat:
            return True
        if res == z3.unknown:
            self.reason = s.reason_unknown()
            return None
        m = s.model()
        self.witness = {n: str(m.eval(v, model_completion=True)) for n, v in self.vars.items()}
        return False
