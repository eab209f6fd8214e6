"""Expressions: one function per kind of parse-tree node, dispatched by `evaluate`. Names resolve
to compile-time parameters, bound values, sizes, parameters and built-in values; operators combine
integers (folded through the semantics table), float constants and fragments."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

import numpy as np

from argus_verify import ir
from argus_verify.frontend import calls, compute, contracts, header, integers, layouts, views
from argus_verify.frontend.values import (
    DTYPES,
    DTypeVal,
    FloatVal,
    FragVal,
    IntVal,
    LayoutVal,
    ScalarVal,
    SharedVal,
    TupleVal,
    Val,
    ViewVal,
)
from argus_verify.instructions import BUILTINS, VALUE
from argus_verify.semantics import FLOAT_BINARY

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder


def evaluate(b: KernelBuilder, n) -> Val:
    kind = _KINDS.get(n.data)
    if kind is None:  # pragma: no cover - every expression rule of the grammar has an entry
        raise b.err(n, f"unsupported expression ({n.data})")
    return kind(b, n)


# -- names ---------------------------------------------------------------------------------------

def name_value(b: KernelBuilder, n) -> Val:
    name = str(n.children[0])
    if name in b.consts:
        return IntVal(ir.IConst(b.consts[name], b.sp(n)), True)
    v = b.lookup(name)
    if isinstance(v, SharedVal):
        full = tuple(ir.Slice(ir.IConst(0), d) for d in v.shape)
        return ViewVal(ir.View(name, "shared", full, b.sp(n)), v.dtype)
    if isinstance(v, IntVal) and v.const is not None:  # a compile-time integer, at its use
        return IntVal(ir.IConst(v.const, b.sp(n)), True)
    if v is not None:
        return v
    if name in b.sizes:
        return IntVal(ir.IVar(name, b.sp(n)), True)
    param = next((p for p in b.params if p.name == name), None)
    if param is not None:
        return _parameter(b, n, param)
    if name in DTYPES:
        return DTypeVal(name)
    decl = BUILTINS.get(name)
    if decl is not None and decl.form == VALUE:
        return header.VALUE_HANDLERS[name](b, n, None)
    if name in b.tagfns:
        raise b.err(n, f"tag function '{name}' must be called")
    raise b.err(n, f"unknown name '{name}'", note=_suggest_name(b, name))


def _parameter(b: KernelBuilder, n, p) -> Val:
    if isinstance(p, ir.ScalarParam):
        if ir.is_float(p.dtype):
            return ScalarVal(p.name, p.dtype)
        return IntVal(ir.IVar(p.name, b.sp(n)), True)
    if all(isinstance(d, ir.IConst) for d in p.shape):
        full = tuple(ir.Slice(ir.IConst(0), d.value) for d in p.shape)
        return ViewVal(ir.View(p.name, "global", full, b.sp(n)), p.dtype)
    raise b.err(n, f"tensor '{p.name}' must be sliced to a constant-shaped tile, e.g. {p.name}[i0 : i0 + 128]")


def _suggest_name(b: KernelBuilder, name: str) -> str | None:
    # innermost names first: among equally close names, prefer the one just assigned
    pool = [k for s in reversed(b.scopes) for k in s]
    pool += list(b.shared) + [p.name for p in b.params] + b.sizes + list(b.consts)
    pool += ["thread_id", "warp_id", "lane_id", "block_id"]
    close = difflib.get_close_matches(name, pool, n=5, cutoff=0.5)
    if not close:
        return None
    best = min(close, key=lambda c: (edit_distance(name, c), pool.index(c)))
    return f"did you mean '{best}'?"


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, to rank did-you-mean suggestions."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def attribute(b: KernelBuilder, n) -> Val:
    base, attr = n.children
    if base.data == "name":
        decl = BUILTINS.get(str(base.children[0]))
        if decl is not None and decl.form == VALUE:
            return header.VALUE_HANDLERS[decl.name](b, n, str(attr))
    raise b.err(n, f"unknown attribute '{attr}'")


# -- literals ------------------------------------------------------------------------------------

def float_literal(b: KernelBuilder, n) -> FloatVal:
    return FloatVal(float(str(n.children[0])))


def bool_literal(b: KernelBuilder, n) -> IntVal:
    return IntVal(ir.IConst(1 if n.data == "true_lit" else 0, b.sp(n)), True)


def tuple_literal(b: KernelBuilder, n) -> TupleVal:
    return TupleVal([evaluate(b, c) for c in n.children])


# -- operators -----------------------------------------------------------------------------------

def negation(b: KernelBuilder, n) -> Val:
    v = evaluate(b, n.children[0])
    if isinstance(v, IntVal):
        return integers.negate(b, n, v)
    if isinstance(v, FloatVal):
        return FloatVal(-v.value)
    if isinstance(v, FragVal):
        return compute.elementwise(b, n, "neg", [v])
    raise b.err(n, "cannot negate this value")


_BITWISE = {"binop_or": "|", "binop_xor": "^", "binop_and": "&"}


def binary_operator(b: KernelBuilder, n) -> Val:
    """a op b: `binop` carries its operator token; the bitwise ones are named by their rule."""
    if n.data == "binop":
        na, op, nb = n.children
    else:
        (na, nb), op = n.children, _BITWISE[n.data]
    return binary(b, n, str(op), evaluate(b, na), evaluate(b, nb), na, nb)


def binary(b: KernelBuilder, n, op: str, x: Val, y: Val, nx, ny) -> Val:
    if isinstance(x, IntVal) and isinstance(y, IntVal):
        if op == "/":
            raise b.err(n, "'/' is floating-point division; use '//' for integers")
        return integers.binary(b, n, op, x, y)
    if isinstance(x, FloatVal) and isinstance(y, FloatVal | IntVal) or (
            isinstance(y, FloatVal) and isinstance(x, IntVal)):
        return _float_constant(b, n, op, x, y)
    if isinstance(x, FragVal) or isinstance(y, FragVal):
        if op not in ("+", "-", "*", "/"):
            raise b.err(n, f"'{op}' is not defined on fragments")
        return compute.elementwise(b, n, op, [x, y], [nx, ny])
    if isinstance(x, LayoutVal | TupleVal) or isinstance(y, LayoutVal | TupleVal):
        raise b.err(n, f"'{op}' is not defined on layouts or tuples")
    if isinstance(x, ViewVal) or isinstance(y, ViewVal):
        raise compute.memory_operand(b, nx if isinstance(x, ViewVal) else ny, x if isinstance(x, ViewVal) else y)
    raise b.err(n, f"'{op}' cannot combine these operands")


def _float_constant(b: KernelBuilder, n, op: str, x: Val, y: Val) -> FloatVal:
    """Arithmetic on float constants, as the table's elementwise operator computes it."""
    a = x.value if isinstance(x, FloatVal) else x.const
    c = y.value if isinstance(y, FloatVal) else y.const
    if a is None or c is None:
        raise b.err(n, "cannot mix a float constant with a run-time integer here")
    if op not in ("+", "-", "*", "/"):
        raise b.err(n, f"'{op}' is not defined on floating-point constants")
    with np.errstate(divide="ignore", invalid="ignore"):
        return FloatVal(float(FLOAT_BINARY[op].ref(np.float64(a), np.float64(c))))


def comparison(b: KernelBuilder, n) -> IntVal:
    na, op, nb = n.children
    x, y = evaluate(b, na), evaluate(b, nb)
    if not isinstance(x, IntVal) or not isinstance(y, IntVal):
        raise b.err(n, "comparisons are between integer expressions")
    return integers.binary(b, n, str(op), x, y)


def logical(b: KernelBuilder, n) -> IntVal:
    x, y = evaluate(b, n.children[0]), evaluate(b, n.children[1])
    for v, c in ((x, n.children[0]), (y, n.children[1])):
        if not isinstance(v, IntVal):
            raise b.err(c, "'and'/'or' combine conditions")
    return integers.binary(b, n, "and" if n.data == "and_op" else "or", x, y)


def logical_not(b: KernelBuilder, n) -> IntVal:
    v = evaluate(b, n.children[0])
    if not isinstance(v, IntVal):
        raise b.err(n, "'not' takes a condition")
    return integers.logical_not(b, n, v)


def conditional(b: KernelBuilder, n) -> IntVal:
    """a if c else b"""
    a, c, e = (evaluate(b, x) for x in n.children)
    if not all(isinstance(v, IntVal) for v in (a, c, e)):
        raise b.err(n, "conditional expressions are for integers")
    return IntVal(ir.ISelect(c.expr, a.expr, e.expr, b.sp(n)), a.uniform and e.uniform and c.uniform)


def _star_outside_tag(b: KernelBuilder, n):
    raise b.err(n, "'*' stands only for a component of an input's tag that matches any value "
                   "(tag b[j] = (*, j): a vector broadcast along the rows)")


_KINDS = {
    "int_lit": integers.literal, "float_lit": float_literal, "true_lit": bool_literal, "false_lit": bool_literal,
    "name": name_value, "attribute": attribute, "tuple": tuple_literal, "tuple1": tuple_literal,
    "empty_tuple": tuple_literal, "layout": layouts.layout_literal, "compose": layouts.composition,
    "call": calls.call, "subscript": views.subscript, "neg": negation, "binop": binary_operator,
    "binop_or": binary_operator, "binop_xor": binary_operator, "binop_and": binary_operator, "compare": comparison,
    "and_op": logical, "or_op": logical, "not_op": logical_not, "ternary": conditional,
    "generator_call": contracts.outside_contract, "star": _star_outside_tag,
}

