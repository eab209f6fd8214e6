"""The values the builder passes around while it walks a kernel's parse tree."""

from __future__ import annotations

from lark import Token

from argus_verify import ir
from argus_verify.diagnostics import ArgusTypeError, Span
from argus_verify.instructions import BUILTINS

DTYPES = tuple(ir.DTYPE_BYTES)
RESERVED = frozenset(BUILTINS) | frozenset(DTYPES)  # names a kernel cannot bind


class NotARoleError(ArgusTypeError):
    """What a warpgroup role cannot hold (a fragment spanning the whole block, an elif) inside a
    warpgroup split taken for a role: unless the condition names warpgroup_id, the split is then
    built as an ordinary per-thread branch instead (frontend/control.py)."""


def span_of(filename: str, node) -> Span:
    if isinstance(node, Token):
        return Span(filename, node.line, node.column, node.end_line or node.line,
                    node.end_column or node.column + len(str(node)))
    m = node.meta
    if getattr(m, "empty", True):
        return Span(filename, 1, 1)
    return Span(filename, m.line, m.column, m.end_line, m.end_column)


class Val:
    pass


class IntVal(Val):
    """An integer expression; `uniform`: the same for every thread of a block."""

    def __init__(self, expr: ir.IExpr, uniform: bool):
        self.expr, self.uniform = expr, uniform

    @property
    def const(self) -> int | None:
        return self.expr.value if isinstance(self.expr, ir.IConst) else None


class FloatVal(Val):
    """A floating-point constant."""

    def __init__(self, value: float):
        self.value = value


class ScalarVal(Val):
    """A floating-point scalar kernel parameter."""

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, dtype


class FragVal(Val):
    def __init__(self, name: str, type: ir.FragType):
        self.name, self.type = name, type


class LayoutVal(Val):
    """A compile-time layout, swizzle or swizzle-composed layout."""

    def __init__(self, layout):
        self.layout = layout


class TupleVal(Val):
    def __init__(self, items: list):
        self.items = items


class DTypeVal(Val):
    """A dtype (`bf16`) or, with dimensions, a tile type (`f32[64, 64]`)."""

    def __init__(self, dtype: str, dims: list | None = None):
        self.dtype, self.dims = dtype, dims


class ViewVal(Val):
    def __init__(self, view: ir.View, dtype: str):
        self.view, self.dtype = view, dtype


class SharedVal(Val):
    def __init__(self, dtype, shape, layout):
        self.dtype, self.shape, self.layout = dtype, shape, layout


def int_tuple(v: Val):
    """The nested tuple of ints a value stands for, or None when it is not made of constants."""
    if isinstance(v, IntVal):
        return v.const
    if isinstance(v, TupleVal):
        items = [int_tuple(x) for x in v.items]
        return None if any(x is None for x in items) else tuple(items)
    return None


def describe(v: Val) -> str:
    """A compile-time value as the user would write it."""
    if isinstance(v, LayoutVal):
        return str(v.layout)
    t = int_tuple(v)
    return str(t) if t is not None else "?"
