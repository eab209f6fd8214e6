"""What a kernel computes for an output, as an expression, and whether it is the contract's.

Terms are tuples: ("elem", tensor), ("const", value), ("un", op, a), ("bin", op, a, b),
("red", op, a) (a reduction of `a` with `op`, however the kernel splits it over values, lanes,
shared-memory partials and loop iterations: smt/coverage.py proves the split takes every element
once), and ("lane", a): `a` as another lane holds it (a shuffle). None means the pass lost track.

("cast", dtype, a, how) is a conversion to an integer type that can change the value: from a float
`how` is "saturate" (round to nearest even, then clamp, as `cvt.rni` does), from an integer "wrap"
(the low bits); a conversion between float types, and a widening one, keeps `a`.

Equality is decided by Z3 over the reals: tensors are real variables (integers for integer
tensors), +, -, *, / are exact, max and min are conditionals, conversions to integers round and
saturate as `cvt.rni` does, math functions and reductions are uninterpreted functions (so equal
arguments give equal results and nothing more). "Equal" therefore means equal as real-number
expressions, up to regrouping; rounding differences between float types are outside what this
proves. Division is compared where no divisor is zero, and then the kernel may divide by zero only
where the contract does (`x / x * x` is not `x`: NaN at 0).
"""

from __future__ import annotations

import math

import numpy as np
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
    if op in ("max", "min") and a[0] == "un" and a[1] == "neg":
        # max(-x) = -min(x) (negation is exact in floating point and reverses the order)
        return ("un", "neg", reduction("min" if op == "max" else "max", a[2]))
    return ("red", op, strip(a, op))


def negated(a) -> bool:
    """Whether term `a` is a negation (`-x`): a max of it is a min of x (`reduction`)."""
    return a is not None and unlane(a)[0] == "un" and unlane(a)[1] == "neg"


def cast(dtype: str, src: str | None, a):
    """The term of converting `a` (of dtype `src`) to `dtype`: a "cast" term where the value may change."""
    if a is None or dtype not in ir.INT_DTYPES or src == dtype:
        return a
    if src in ir.INT_DTYPES and int_range(src)[0] >= int_range(dtype)[0] and \
            int_range(src)[1] <= int_range(dtype)[1]:
        return a  # a widening integer conversion
    return ("cast", dtype, unlane(a), "wrap" if src in ir.INT_DTYPES else "saturate")


def int_range(dtype: str) -> tuple[int, int]:
    """(least, most) value of integer `dtype`."""
    bits = 8 * ir.DTYPE_BYTES[dtype]
    return (0, 2 ** bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def subterms(t):
    """Term t and every term inside it."""
    if t is None:
        return
    yield t
    for x in t[1:]:
        if isinstance(x, tuple):
            yield from subterms(x)


def names(t) -> set:
    """The tensors and scalars term t reads."""
    return {u[1] for u in subterms(t) if u[0] in ("elem", "scalar")}


def divides(t) -> bool:
    """Whether term t holds a `/`."""
    return any(u[:2] == ("bin", "/") for u in subterms(t))


def uniform(t) -> bool:
    """Whether term t is the same for every element of any reduction: built of constants and scalar
    parameters alone."""
    if t is None:
        return False
    if t[0] in ("const", "scalar"):
        return True
    if t[0] in ("un", "cast"):
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
    if kind == "cast":
        return f"cast({render(t[2])}, {t[1]})"
    if kind == "lane":
        return render(t[1])
    return str(t)


class Equivalence:
    """Decides kernel term == contract term; `witness` holds tensor values where they differ."""

    def __init__(self, timeout_s: float = 5.0, integers: frozenset = frozenset()):
        self.vars: dict = {}
        self.funs: dict = {}
        self.timeout_s = timeout_s
        self.integers = integers  # the names of integer tensors and scalars
        self.witness: dict = {}
        self.reason = ""
        self.divisors: list = []  # of the term being built

    def term(self, t):
        kind = t[0]
        if kind in ("elem", "scalar"):  # a tensor's element or a scalar parameter (their names differ)
            if t[1] not in self.vars:
                self.vars[t[1]] = z3.ToReal(z3.Int(t[1])) if t[1] in self.integers else z3.Real(t[1])
            return self.vars[t[1]]
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
                self.divisors.append(a)
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
                self.divisors.append(b)
                return a / b
            if op == "max":
                return z3.If(a >= b, a, b)
            if op == "min":
                return z3.If(a <= b, a, b)
            return self.fun("bin", op, 2)(a, b)
        if kind == "red":
            return self.fun("red", t[1])(self.term(t[2]))
        if kind == "cast":
            return _to_integer(self.term(t[2]), t[1], t[3])
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
        """True: equal for all inputs; False: differ (see `witness` and `reason`); None: not decided
        (`reason` says why)."""
        self.divisors = []
        k = self.term(kernel_term)
        kernel_divisors, self.divisors = self.divisors, []
        c = self.term(contract_term)
        contract_divisors = self.divisors
        nonzero = [d != 0 for d in kernel_divisors + contract_divisors]
        s = z3.Solver()
        s.set("timeout", int(self.timeout_s * 1000))
        s.add(k != c, *nonzero)
        res = s.check()
        if res == z3.unknown:
            self.reason = f"the solver gave up ({s.reason_unknown()})"
            return None
        if res == z3.sat:
            self.witness = self._values(s.model())
            if _opaque(kernel_term) or _opaque(contract_term):
                # Z3 may have told apart two reductions (or math functions) only because they are
                # uninterpreted: a violation needs rows on which the two really differ
                return self._differ_on_rows(kernel_term, contract_term)
            return False
        if not kernel_divisors:
            return True
        # equal wherever nothing divides by zero: the kernel may divide by zero only where the contract does
        z = z3.Solver()
        z.set("timeout", int(self.timeout_s * 1000))
        z.add(z3.Or([d == 0 for d in kernel_divisors]), *[d != 0 for d in contract_divisors])
        res = z.check()
        if res == z3.unsat:
            return True
        if res == z3.unknown:
            self.reason = f"the solver gave up on the kernel's divisions by zero ({z.reason_unknown()})"
            return None
        m = z.model()
        values = {n: float(m.eval(v, model_completion=True).as_fraction()) for n, v in self.vars.items()}
        got, want = evaluate(kernel_term, values), evaluate(contract_term, values)
        self.witness = self._values(m)
        where = ", ".join(f"{n} = {v}" for n, v in self.witness.items())
        if got is not None and want is not None and not (got == want or (math.isnan(got) and math.isnan(want))):
            self.reason = (f"the kernel divides by zero at {where}, where the contract does not: {got:g} "
                           f"against {want:g}")
            return False
        self.reason = (f"the kernel divides by zero at {where}, where the contract does not; what that gives "
                       "in floating point is not decided here")
        return None

    def _differ_on_rows(self, kernel_term, contract_term) -> bool | None:
        """Both terms on random rows (an element of each tensor and scalar per reduced position, the
        output's own at position 0), in float64: False (a witness) where they differ beyond rounding
        on rows of every length tried, or where rows cannot give a term's value (Z3's difference then
        stands), None where some length agrees. The lengths: 5, and n for each
        constant 1/n (a mean's factor: E[x^2] - E[x]^2 is the variance only over n elements)."""
        rng = np.random.default_rng(0)
        read = sorted(names(kernel_term) | names(contract_term))
        lengths = [5] + sorted({round(1 / v) for v in constants(kernel_term) | constants(contract_term)
                                if 0 < v < 1 and 2 <= round(1 / v) <= 4096 and abs(round(1 / v) * v - 1) < 1e-12})
        found = None
        for n in lengths:
            differ = None
            for _ in range(16):
                rows = {x: (rng.integers(-4, 5, n).astype(np.float64) if x in self.integers
                            else rng.normal(0.0, 2.0, n)) for x in read}
                got, want = evaluate_row(kernel_term, rows, 0, n), evaluate_row(contract_term, rows, 0, n)
                if got is None or want is None:  # rows cannot judge it: Z3's difference stands, as before
                    self.reason = ""
                    return False
                if not (np.isnan(got) and np.isnan(want)) and not np.isclose(got, want, rtol=1e-9, atol=1e-12):
                    differ = (rows, got, want)
                    break
            if differ is None:
                self.reason = (f"the two differ only where reductions or math functions are left uninterpreted, "
                               f"and agree on random rows of {n} elements: not decided")
                return None
            found = found or differ
        rows, got, want = found
        shown = {x: "[" + ", ".join(f"{v:.4g}" for v in r[:8]) + (", ...]" if len(r) > 8 else "]")
                 for x, r in rows.items()}
        self.witness = shown
        self.reason = (f"on the rows {', '.join(f'{x} = {v}' for x, v in shown.items())} (the output's own element "
                       f"first) the kernel gives {got:.6g}, the contract {want:.6g}")
        return False

    def _values(self, m) -> dict:
        return {n: str(m.eval(v, model_completion=True)) for n, v in self.vars.items()}


def _to_integer(a, dtype: str, how: str):
    """To an integer type: from a float, `cvt.rni` (round to the nearest integer, ties to even, then
    saturate); from an integer, its low bits."""
    lo, hi = int_range(dtype)
    f = z3.ToInt(a)  # floor
    if how == "wrap":
        return z3.ToReal((f - lo) % (hi - lo + 1) + lo)
    frac = a - z3.ToReal(f)
    half = z3.RealVal("1/2")
    r = z3.If(frac > half, f + 1, z3.If(frac < half, f, z3.If(f % 2 == 0, f, f + 1)))
    return z3.ToReal(z3.If(r < lo, lo, z3.If(r > hi, hi, r)))


_INTERPRETED = ("neg", "abs", "recip")  # unary operators Z3 computes exactly (the others are uninterpreted)


def _opaque(t) -> bool:
    """Whether term t holds a reduction or a function Z3 leaves uninterpreted."""
    return any(u[0] == "red" or (u[0] == "un" and u[1] not in _INTERPRETED) or
               (u[0] == "bin" and u[1] not in ("+", "-", "*", "/", "max", "min")) for u in subterms(t))


def _varies(t) -> bool:
    """Whether term t changes along the reduced dimension outside the reductions inside it."""
    if t[0] == "elem":
        return True
    if t[0] == "red":
        return False
    return any(_varies(x) for x in t[1:] if isinstance(x, tuple))


def constants(t) -> set:
    return {u[1] for u in subterms(t) if u[0] == "const"}


def evaluate_row(t, rows: dict, j: int, n: int) -> float | None:
    """Term t in float64 where each tensor (and scalar) holds `rows[name]` (n elements) along the
    reduced dimension, the output's element being position j: a reduction runs over every position."""
    kind = t[0]
    if kind == "red":
        if not _varies(t[2]):  # a reduction of partial reductions (max over partial sums): not a row's value
            return None
        vals = [evaluate_row(t[2], rows, k, n) for k in range(n)]
        if any(v is None for v in vals):
            return None
        op = {"sum": np.sum, "max": np.max, "min": np.min}.get(t[1])
        return None if op is None else float(op(np.array(vals)))
    if kind in ("elem", "scalar"):
        return float(rows[t[1]][j if kind == "elem" else 0])
    if kind in ("const", "lane"):
        return evaluate(t, {}) if kind == "const" else evaluate_row(t[1], rows, j, n)
    if kind == "cast":
        a = evaluate_row(t[2], rows, j, n)
        return None if a is None else evaluate(("cast", t[1], ("const", a), t[3]), {})
    if kind == "un":
        a = evaluate_row(t[2], rows, j, n)
        return None if a is None else evaluate(("un", t[1], ("const", a)), {})
    if kind == "bin":
        a, b = evaluate_row(t[2], rows, j, n), evaluate_row(t[3], rows, j, n)
        return None if a is None or b is None else evaluate(("bin", t[1], ("const", a), ("const", b)), {})
    return None


def evaluate(t, values: dict) -> float | None:
    """Term `t` in float64 at the given tensor values (None where it needs a reduction or an
    operator this does not evaluate)."""
    kind = t[0]
    with np.errstate(all="ignore"):
        if kind in ("elem", "scalar"):
            return values.get(t[1])
        if kind == "const":
            return float(t[1])
        if kind == "lane":
            return evaluate(t[1], values)
        if kind == "cast":
            a = evaluate(t[2], values)
            if a is None or not math.isfinite(a):
                return None
            return float(semantics.round_to(np.int64(a) if t[3] == "wrap" else np.float64(a), t[1]))
        if kind == "un" and t[1] in semantics.FLOAT_UNARY:
            a = evaluate(t[2], values)
            return None if a is None else float(semantics.FLOAT_UNARY[t[1]].ref(np.float64(a)))
        if kind == "bin" and t[1] in semantics.FLOAT_BINARY:
            a, b = evaluate(t[2], values), evaluate(t[3], values)
            return None if a is None or b is None else float(semantics.FLOAT_BINARY[t[1]].ref(np.float64(a),
                                                                                                np.float64(b)))
    return None
