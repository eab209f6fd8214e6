"""Preconditions of an audited kernel: `requires` expressions, array sizes and alignments.

They are written next to the kernel as comments (`// argus: requires n <= grid_dim.x * block_dim.x`,
`// argus: size in = n`, `// argus: align in 16`); the CLI collects them and this module turns the
C-like expressions into Z3 terms over the kernel's parameters and launch sizes (64-bit signed
arithmetic; 32-bit parameters are sign- or zero-extended by their PTX type).
"""

from __future__ import annotations

import ast
import re

import attrs
import z3

from argus_verify.diagnostics import ArgusSyntaxError, Span


@attrs.define
class Directive:
    kind: str  # requires | size | align
    name: str  # the array for size/align
    text: str  # the expression (requires, size) or the alignment
    span: Span


@attrs.define
class Spec:
    directives: list = attrs.field(factory=list)
    names: dict = attrs.field(factory=dict)  # source name -> PTX parameter name
    elem_bytes: dict = attrs.field(factory=dict)  # PTX parameter name -> element size of the pointee


def _translate(text: str) -> str:
    t = text.replace("&&", " and ").replace("||", " or ")
    t = re.sub(r"!(?!=)", " not ", t)
    t = re.sub(r"\b(blockDim|block_dim)\.([xyz])\b", r"block_dim_\2", t)
    t = re.sub(r"\b(gridDim|grid_dim)\.([xyz])\b", r"grid_dim_\2", t)
    return t


def to_z3(text: str, env: dict, span: Span, no_overflow: list | None = None):
    """A C-like integer expression or condition as a Z3 term (BV64 or Bool). `no_overflow`, if given,
    receives the conditions under which its sums, differences and products do not wrap (signed
    64-bit): an array's size is a true count, not one taken modulo 2**64."""
    try:
        tree = ast.parse(_translate(text), mode="eval")
    except SyntaxError as e:
        raise ArgusSyntaxError(f"cannot read the expression '{text}': {e.msg}", span) from None

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return z3.BitVecVal(n.value, 64)
        if isinstance(n, ast.Name):
            if n.id not in env:
                raise ArgusSyntaxError(f"unknown name '{n.id}' in '{text}' (known: {', '.join(sorted(env))})", span)
            return env[n.id]
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            if isinstance(n.op, ast.USub):
                return -v
            if isinstance(n.op, ast.Not):
                return z3.Not(_bool(v))
            if isinstance(n.op, ast.UAdd):
                return v
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.Div: lambda: a / b, ast.FloorDiv: lambda: a / b, ast.Mod: lambda: z3.SRem(a, b),
                   ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b, ast.LShift: lambda: a << b,
                   ast.RShift: lambda: a >> b}
            f = ops.get(type(n.op))
            if f is not None:
                if no_overflow is not None:
                    if isinstance(n.op, ast.Add):
                        no_overflow.extend([z3.BVAddNoOverflow(a, b, True), z3.BVAddNoUnderflow(a, b)])
                    elif isinstance(n.op, ast.Sub):
                        no_overflow.extend([z3.BVSubNoOverflow(a, b), z3.BVSubNoUnderflow(a, b, True)])
                    elif isinstance(n.op, ast.Mult):
                        no_overflow.extend([z3.BVMulNoOverflow(a, b, True), z3.BVMulNoUnderflow(a, b)])
                return f()
        if isinstance(n, ast.BoolOp):
            vals = [_bool(ev(v)) for v in n.values]
            return z3.And(*vals) if isinstance(n.op, ast.And) else z3.Or(*vals)
        if isinstance(n, ast.Compare):
            out = []
            left = ev(n.left)
            for op, right_n in zip(n.ops, n.comparators, strict=True):
                right = ev(right_n)
                f = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
                     ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b,
                     ast.NotEq: lambda a, b: a != b}.get(type(op))
                if f is None:
                    break
                out.append(f(left, right))
                left = right
            else:
                return z3.And(*out) if len(out) > 1 else out[0]
        raise ArgusSyntaxError(f"cannot read the expression '{text}' (integers, names, + - * / %, comparisons, "
                               "&&, ||, !)", span)

    return ev(tree)


def _bool(v):
    return v if z3.is_bool(v) else v != 0
