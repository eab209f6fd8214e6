"""Subscripts: views of tensors and shared allocations (`A[m0 : m0 + 64, k]`), tile types
(`f32[64, 64]`, `f32[TILE]`) and the assertion components `tag(x)[k]` and `coord(x)[k]`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from argus_verify import ir
from argus_verify.frontend.arguments import CallSite, call_site
from argus_verify.frontend.linear import constant_difference
from argus_verify.frontend.values import DTYPES, DTypeVal, FragVal, IntVal, SharedVal, TupleVal, ViewVal, int_tuple
from argus_verify.instructions import BUILTINS, COMPONENT

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder


def subscript(b: KernelBuilder, n):
    base_node, subs = n.children
    if base_node.data == "call" and base_node.children[0].data == "name":
        decl = BUILTINS.get(str(base_node.children[0].children[0]))
        if decl is not None and decl.form == COMPONENT:
            return component(b, n, decl, base_node, subs)
    if base_node.data == "name":
        name = str(base_node.children[0])
        if name in DTYPES:
            return DTypeVal(name, tile_dims(b, subs))
        if name in b.tensors:
            tp = b.tensors[name]
            return view(b, n, name, "global", tp.dtype, [None] * len(tp.shape), subs)
        v = b.lookup(name)
        if isinstance(v, SharedVal):
            return view(b, n, name, "shared", v.dtype, list(v.shape), subs)
        if isinstance(v, FragVal):
            raise b.err(n, f"fragments cannot be indexed; '{name}' lives in registers across threads")
    raise b.err(n, "only tensors, shared allocations and tag(...)/coord(...) can be indexed")


def tile_dims(b: KernelBuilder, subs) -> list[int]:
    """The dimensions of a tile type: constants, or a named shape tuple."""
    dims = []
    for s in subs.children:
        if s.data != "sub_index":
            raise b.err(s, "a tile type takes dimensions, not slices")
        v = b.value(s.children[0])
        shape = int_tuple(v)
        if isinstance(shape, int):
            shape = (shape,)
        if not isinstance(v, IntVal | TupleVal) or shape is None or not all(isinstance(d, int) for d in shape):
            raise b.err(s.children[0], "a tile dimension must be a compile-time constant",
                        note=b.runtime_note(s.children[0]))
        for d in shape:
            if d <= 0:
                raise b.err(s, f"tile dimensions must be positive, got {d}")
            dims.append(d)
    return dims


def view(b: KernelBuilder, n, name: str, space: str, dtype: str, extents: list, subs) -> ViewVal:
    """A view of `name`, whose dimensions have constant `extents` (None: symbolic)."""
    items = list(subs.children)
    if len(items) < len(extents) and all(c is not None for c in extents[len(items):]):
        items += [None] * (len(extents) - len(items))  # sA[s]: the remaining dimensions whole
    if len(items) != len(extents):
        raise b.err(subs, f"'{name}' has {len(extents)} dimension{'s' if len(extents) != 1 else ''} but "
                          f"{len(items)} {'were' if len(items) != 1 else 'was'} indexed")
    index = [_index(b, name, extent, item, subs) for extent, item in zip(extents, items, strict=True)]
    return ViewVal(ir.View(name, space, tuple(index), b.sp(n)), dtype)


def _index(b: KernelBuilder, name: str, extent: int | None, item, subs):
    if item is None:
        return ir.Slice(ir.IConst(0), extent, b.sp(subs))
    if item.data == "sub_index":
        v = b.value(item.children[0])
        if not isinstance(v, IntVal):
            raise b.err(item, "an index must be an integer expression")
        return ir.Index(v.expr, b.sp(item))
    lo_node, hi_node = item.children
    lo = ir.IConst(0) if lo_node is None else b.int_of(lo_node, "a slice start")
    if hi_node is None:
        if extent is None:
            raise b.err(item, f"'{name}' has a symbolic size here; give the slice an explicit end such as "
                              "i0 : i0 + 64")
        hi = ir.IConst(extent)
    else:
        hi = b.int_of(hi_node, "a slice end")
    width = constant_difference(hi, lo)
    if width is None:
        raise b.err(item, "a slice must have a constant extent (write it as start : start + N)")
    if width <= 0:
        raise b.err(item, f"a slice must have a positive extent, got {width}")
    if extent is not None and width > extent:
        raise b.err(item, f"slice of extent {width} is larger than the dimension ({extent})")
    return ir.Slice(lo, width, b.sp(item))


def component(b: KernelBuilder, n, decl, call, subs) -> IntVal:
    """tag(x)[k] / coord(x)[k], in assertions."""
    if not b.in_assert:
        raise b.err(n, f"{decl.name}(...) can only be used in an assertion")
    site = call_site(b, decl, call, call.children[1])
    return COMPONENT_HANDLERS[decl.name](site, n, subs)


def _fragment_of(site: CallSite) -> FragVal:
    arg = site.args[0]
    if arg.data != "name":
        raise site.b.err(site.node, f"{site.name}(x) takes one fragment")
    frag = site.b.lookup(str(arg.children[0]))
    if not isinstance(frag, FragVal):
        raise site.b.err(arg, f"{site.name}(...) takes a fragment; '{arg.children[0]}' is not one")
    return frag


def _component_index(site: CallSite, subs) -> int:
    if len(subs.children) != 1 or subs.children[0].data != "sub_index":
        raise site.b.err(subs, f"{site.name}(x)[i] takes one constant component index")
    return site.b.const_int(subs.children[0].children[0], "the component index")


def tag(site: CallSite, n, subs) -> IntVal:
    frag, comp = _fragment_of(site), _component_index(site, subs)
    site.b.assert_frags.append(frag.name)
    if comp < 0:
        raise site.b.err(subs, "tag components are numbered from 0")
    return IntVal(ir.ITag(frag.name, comp, site.b.sp(n)), False)


def coord(site: CallSite, n, subs) -> IntVal:
    frag, axis = _fragment_of(site), _component_index(site, subs)
    site.b.assert_frags.append(frag.name)
    if not 0 <= axis < len(frag.type.tile):
        raise site.b.err(subs, f"coord(...)[{axis}] is out of range for a rank-{len(frag.type.tile)} tile")
    return IntVal(ir.ICoord(frag.name, axis, site.b.sp(n)), False)


COMPONENT_HANDLERS = {"tag": tag, "coord": coord}
