"""Integer expressions: operators with constant folding through the semantics table, and the
integer builtins (cdiv, and min/max of integers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from argus_verify import ir
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.values import IntVal
from argus_verify.semantics import INT_OPS, INT_UNARY, fold

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder

INT64 = range(-2**63, 2**63)


def literal(b: KernelBuilder, n) -> IntVal:
    text = str(n.children[0])
    try:
        value = int(text.replace("_", ""), 0)
    except ValueError:
        zeros = " (leading zeros are not allowed)" if text[1:2].isdigit() else ""
        raise b.err(n, f"invalid integer literal '{text}'{zeros}") from None
    if value not in INT64:
        shown = text if len(text) <= 24 else text[:24] + "..."
        raise b.err(n, f"integer literal {shown} does not fit in 64 bits")
    return IntVal(ir.IConst(value, b.sp(n)), True)


def binary(b: KernelBuilder, n, op: str, x: IntVal, y: IntVal) -> IntVal:
    """x op y, folded when both are constants."""
    if x.const is not None and y.const is not None:
        return IntVal(ir.IConst(_fold(b, n, op, x.const, y.const), b.sp(n)), True)
    return IntVal(ir.IBin(op, x.expr, y.expr, b.sp(n)), x.uniform and y.uniform)


def _fold(b: KernelBuilder, n, op: str, x: int, y: int) -> int:
    value = fold(op, x, y)
    if value is None:
        if INT_OPS[op].divides:
            raise b.err(n, f"division by zero in a constant expression ({x} {op} {y})")
        if y >= 0:
            raise b.err(n, f"shift by {y} in a constant expression overflows 64 bits")
        raise b.err(n, f"shift by a negative amount in a constant expression ({x} {op} {y})")
    if value not in INT64:
        raise b.err(n, f"constant expression ({x} {op} {y}) overflows 64 bits")
    return value


def negate(b: KernelBuilder, n, x: IntVal) -> IntVal:
    return binary(b, n, "-", IntVal(ir.IConst(0), True), x)


def logical_not(b: KernelBuilder, n, x: IntVal) -> IntVal:
    if x.const is not None:
        return IntVal(ir.IConst(int(INT_UNARY["not"].ref(x.const))), True)
    return IntVal(ir.IUn("not", x.expr, b.sp(n)), x.uniform)


def cdiv(site: CallSite) -> IntVal:
    return pair(site, [site.b.value(a) for a in site.args])


def pair(site: CallSite, vals: list) -> IntVal:
    """cdiv(a, b), min(a, b), max(a, b) of integers: the operator of the same name."""
    x, y = vals
    if not isinstance(x, IntVal) or not isinstance(y, IntVal):
        raise site.b.err(site.node, f"{site.name}() takes integers here")
    return binary(site.b, site.node, site.name, x, y)


HANDLERS = {"cdiv": cdiv}
