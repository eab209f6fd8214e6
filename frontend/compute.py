"""Compute builtins on fragments: elementwise operators and math functions (from the semantics
table), min/max, cast, reductions, mma, transpose and reshape."""

from __future__ import annotations

import difflib
import math
from typing import TYPE_CHECKING

from argus_verify import atoms, ir
from argus_verify.frontend import integers
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.values import DTYPES, DTypeVal, FloatVal, FragVal, IntVal, ScalarVal, ViewVal
from argus_verify.instructions import BUILTINS, reduce_op, unary_op

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder


def elementwise(b: KernelBuilder, n, op: str, vals: list, nodes=None) -> FragVal:
    """`op` per (thread, value) over fragments of one dtype and shape; scalars broadcast. The result
    takes the coordinates of the highest-rank fragment operand (of equal rank, the largest tile)."""
    frags = [v for v in vals if isinstance(v, FragVal)]
    ref = frags[0].type
    for f in frags[1:]:
        if f.type.dtype != ref.dtype:
            raise b.err(n, f"operands have different dtypes ({ref.dtype} and {f.type.dtype}); cast one with "
                           f"cast(x, {ref.dtype})")
        if (f.type.threads, f.type.values) != (ref.threads, ref.values):
            raise b.err(n, f"fragments have different shapes: {ref.values} and {f.type.values} values per thread")
    operands = [_operand(b, v, nodes[i] if nodes else n, ref.dtype) for i, v in enumerate(vals)]
    # (of equal rank, the larger tile: `m - xs` with m a row's max [16, 1] broadcast over xs [16, 256])
    result_type = max((f.type for f in frags), key=lambda t: (len(t.tile), math.prod(t.tile)))
    return b.emit(n, ir.Elementwise(op, tuple(operands)), result_type)


def _operand(b: KernelBuilder, v, node, dtype: str) -> ir.Operand:
    if isinstance(v, FragVal):
        return v.name
    if isinstance(v, FloatVal):
        return ir.FConst(v.value)
    if isinstance(v, ScalarVal):
        if v.dtype != dtype:
            raise b.err(node, f"scalar '{v.name}' is {v.dtype} but the fragment is {dtype}")
        return ir.FScalar(ir.IVar(v.name))
    if isinstance(v, IntVal):
        return ir.FConst(float(v.const)) if v.const is not None else ir.FScalar(v.expr)
    if isinstance(v, ViewVal):
        raise memory_operand(b, node, v)
    raise b.err(node, "this operand cannot be used in arithmetic on fragments")


def memory_operand(b: KernelBuilder, node, v: ViewVal):
    """The error for `x[i] * 2.0`: an indexed tensor names memory, not the values in it."""
    return b.err(node, f"'{v.view.base}[...]' is memory, not a value: load it into a fragment first "
                       f"(load({v.view.base}[...], tv=...))")


def math_function(site: CallSite) -> FragVal:
    """exp(x), sqrt(x), ...: every unary entry of the semantics table but `neg` (written -x)."""
    v = site.b.value(site.args[0])
    if not isinstance(v, FragVal):
        raise site.b.err(site.args[0], f"{site.name}() applies to fragments")
    if not ir.is_float(v.type.dtype):
        raise site.b.err(site.args[0], f"{site.name}() needs a floating-point fragment, got {v.type.dtype}")
    return elementwise(site.b, site.node, unary_op(site.name), [v])


def minmax(site: CallSite):
    """min/max: elementwise when an operand is a fragment, else of integers."""
    vals = [site.b.value(a) for a in site.args]
    if any(isinstance(v, FragVal) for v in vals):
        return elementwise(site.b, site.node, site.name, vals, site.args)
    return integers.pair(site, vals)


def cast(site: CallSite) -> FragVal:
    b, (x, dtype) = site.b, site.args
    if dtype.data == "name" and str(dtype.children[0]) not in DTYPES:
        bad = str(dtype.children[0])
        close = difflib.get_close_matches(bad, DTYPES, n=1)
        raise b.err(dtype, f"cast()'s second argument must be a dtype ({', '.join(DTYPES)}), got '{bad}'",
                    note=f"did you mean '{close[0]}'?" if close else None)
    v, d = b.value(x), b.value(dtype)
    if not isinstance(v, FragVal):
        raise b.err(x, "cast() takes a fragment")
    if not isinstance(d, DTypeVal) or d.dims is not None:
        raise b.err(dtype, "cast()'s second argument is a dtype such as bf16")
    return b.emit(site.node, ir.Cast(v.name, d.dtype), ir.FragType(d.dtype, v.type.coords))


def reduce(site: CallSite) -> FragVal:
    """reduce_<op>(x, axis=k, scope=thread|warp, lanes=mask)"""
    b = site.b
    v = b.value(site.args[0])
    if not isinstance(v, FragVal):
        raise b.err(site.args[0], f"{site.name}() takes a fragment")
    rank = len(v.type.tile)
    axis = site.const("axis")
    if not 0 <= axis < rank:
        raise b.err(site.arg("axis"), f"axis {axis} is out of range for a rank-{rank} tile")
    scope = site.word("scope", lambda _: "scope= is thread or warp (block reductions go through shared memory)")
    lanes = 0
    if scope == "warp":
        if not site.given("lanes"):
            raise b.err(site.node, "a warp reduction needs lanes=: the lane bits to combine, e.g. 0b11111")
        lanes = site.const("lanes")
        if not 0 < lanes < 32:
            raise b.err(site.arg("lanes"), f"lanes= is a mask of lane bits in 1..31, got {lanes}")
    elif site.given("lanes"):
        raise b.err(site.key("lanes"), "lanes= applies to scope=warp")
    typ = ir.FragType(v.type.dtype, ir.Projected(v.type.coords, axis))
    return b.emit(site.node, ir.Reduce(reduce_op(site.name), v.name, axis, scope, lanes), typ)


def mma(site: CallSite) -> FragVal:
    """mma(a, b, c, atom=fma): c + a @ b."""
    b = site.b
    vals = [b.value(x) for x in site.args]
    for v, node in zip(vals, site.args, strict=True):
        if not isinstance(v, FragVal):
            raise b.err(node, "mma() operands must be fragments")
    known = ", ".join(BUILTINS["mma"].keyword("atom").choices)
    atom = site.word("atom", lambda w: f"unknown mma atom{f' {w!r}' if w else ''}; known: {known}")
    ta, tb, tc = (v.type for v in vals)
    _check_operands(site, atom, ta, tb, tc)
    if atom == "fma":
        _check_thread_local(b, site.node, ta, tb, tc)
    else:
        try:
            atoms.mma_plan(atom, ta, tb, tc)
        except ValueError as e:
            raise b.err(site.node, f"mma atom {atom}: {e}") from None
    a, bb, c = vals
    return b.emit(site.node, ir.Mma(a.name, bb.name, c.name, atom), tc)


def _check_operands(site: CallSite, atom: str, ta: ir.FragType, tb: ir.FragType, tc: ir.FragType):
    """The dtypes the atom takes, and tiles a [M, K], b [K, N], c [M, N]."""
    b = site.b
    if ta.dtype != tb.dtype:
        raise b.err(site.node, f"mma operands a and b differ in dtype ({ta.dtype}, {tb.dtype})")
    pairs = ir.MMA_ATOMS[atom][3]
    if (ta.dtype, tc.dtype) not in pairs:
        ok = ", ".join(f"{x}->{y}" for x, y in pairs)
        raise b.err(site.at("atom"), f"mma atom {atom} does not take {ta.dtype} operands with a {tc.dtype} "
                                     f"accumulator (it takes {ok})")
    if len(ta.tile) != 2 or len(tb.tile) != 2 or len(tc.tile) != 2:
        raise b.err(site.node, "mma() operands must be 2-D tiles")
    if ta.tile[1] != tb.tile[0] or ta.tile[0] != tc.tile[0] or tb.tile[1] != tc.tile[1]:
        raise b.err(site.node, f"mma shapes do not match: a {list(ta.tile)}, b {list(tb.tile)}, c {list(tc.tile)} "
                               "(need a [M, K], b [K, N], c [M, N])")


def _check_thread_local(b: KernelBuilder, n, ta: ir.FragType, tb: ir.FragType, tc: ir.FragType):
    """SIMT mma: each thread needs every a[i, :] and b[:, j] for the c[i, j] it holds."""
    K = ta.tile[1]
    ca, cb, cc = ta.coords.coord_table(), tb.coords.coord_table(), tc.coords.coord_table()
    for t in range(tc.threads):
        rows: dict = {}
        for i, k in ca[t]:
            rows.setdefault(int(i), set()).add(int(k))
        cols: dict = {}
        for k, j in cb[t]:
            cols.setdefault(int(j), set()).add(int(k))
        for i, j in cc[t]:
            have_a, have_b = rows.get(int(i), set()), cols.get(int(j), set())
            if len(have_a) != K or len(have_b) != K:
                missing = sorted(set(range(K)) - (have_a if len(have_a) != K else have_b))
                which = f"a[{i}, {missing[0]}]" if len(have_a) != K else f"b[{missing[0]}, {j}]"
                raise b.err(n, f"thread {t} holds c[{i}, {j}] but not {which}: with atom=fma every thread must hold "
                               "the rows of a and columns of b its c values need")


def transpose(site: CallSite) -> FragVal:
    v = site.b.value(site.args[0])
    if not isinstance(v, FragVal) or len(v.type.tile) != 2:
        raise site.b.err(site.args[0], "transpose() takes a 2-D fragment")
    return site.b.emit(site.node, ir.Relabel(v.name), ir.FragType(v.type.dtype, ir.Transposed(v.type.coords)))


def reshape(site: CallSite) -> FragVal:
    b = site.b
    v = b.value(site.args[0])
    if not isinstance(v, FragVal):
        raise b.err(site.args[0], "reshape() takes a fragment")
    dims = tuple(b.const_int(a, "a tile dimension") for a in site.args[1:])
    if math.prod(dims) != math.prod(v.type.tile) or min(dims) <= 0:
        raise b.err(site.node, f"cannot reshape a {list(v.type.tile)} tile to {list(dims)}")
    return b.emit(site.node, ir.Relabel(v.name), ir.FragType(v.type.dtype, ir.Reshaped(v.type.coords, dims)))


HANDLERS = {
    **{name: math_function for name in BUILTINS if unary_op(name)},
    **{name: reduce for name in BUILTINS if reduce_op(name)},
    "min": minmax, "max": minmax, "cast": cast, "mma": mma, "transpose": transpose, "reshape": reshape,
}
