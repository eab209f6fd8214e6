"""Linear normal form of integer expressions, to prove slice extents and simple identities.

`stop - start` of a slice must be a compile-time constant (tiles have constant shapes). Both
sides are normalised to `sum(coeff * atom) + const` where atoms are the non-linear
sub-expressions (structural equality: IR nodes compare without their spans).
"""

from __future__ import annotations

from argus_verify.ir import IBin, IConst, IExpr, IUn


def linear(e: IExpr) -> tuple[dict, int]:
    """(coefficients by atom, constant) with e == sum(c * atom) + constant."""
    if isinstance(e, IConst):
        return {}, e.value
    if isinstance(e, IBin) and e.op in ("+", "-"):
        ta, ca = linear(e.a)
        tb, cb = linear(e.b)
        sign = 1 if e.op == "+" else -1
        out = dict(ta)
        for k, v in tb.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v}, ca + sign * cb
    if isinstance(e, IBin) and e.op == "*":
        ta, ca = linear(e.a)
        tb, cb = linear(e.b)
        if not ta:
            return {k: v * ca for k, v in tb.items() if v * ca}, ca * cb
        if not tb:
            return {k: v * cb for k, v in ta.items() if v * cb}, ca * cb
    if isinstance(e, IUn) and e.op == "-":
        ta, ca = linear(e.a)
        return {k: -v for k, v in ta.items()}, -ca
    return {e: 1}, 0


def constant_difference(stop: IExpr, start: IExpr) -> int | None:
    """stop - start when it is the same constant for every value of the variables, else None."""
    ts, cs = linear(stop)
    ta, ca = linear(start)
    keys = set(ts) | set(ta)
    if any(ts.get(k, 0) != ta.get(k, 0) for k in keys):
        return None
    return cs - ca
