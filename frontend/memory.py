"""Memory builtins: load, store, zeros/full, shared allocations, async copies and their groups,
barriers."""

from __future__ import annotations

import math

import numpy as np

from argus_verify import atoms, ir
from argus_verify.frontend.arguments import CallSite
from argus_verify.frontend.layouts import check_tv, row_contiguous, tv_arg
from argus_verify.frontend.values import DTypeVal, FloatVal, FragVal, IntVal, LayoutVal, SharedVal, ViewVal
from argus_verify.layout import ComposedLayout, Layout, Swizzle, row_major

SHARED_BYTES = 227 * 1024  # what one Hopper block can use


def load(site: CallSite) -> FragVal:
    b = site.b
    src = b.value(site.args[0])
    if not isinstance(src, ViewVal):
        raise b.err(site.args[0], "load() takes a view of a tensor or shared allocation")
    if not src.view.tile:
        raise b.err(site.args[0], "load() needs a tile with at least one sliced dimension")
    tv = tv_arg(site, src.view.tile)
    mask = site.flag("mask")
    if mask and src.view.space == "shared":
        raise b.err(site.key("mask"), "mask= applies to global tensors; shared tiles have constant shapes")
    other = _constant(site, "other", "other= must be a constant")
    if mask and site.given("other"):
        _representable(site, site.arg("other"), src.dtype, other, "other=")
    vec = site.const("vec")
    if vec is not None:
        nbytes = vec * ir.DTYPE_BYTES[src.dtype]
        if nbytes not in (1, 2, 4, 8, 16) or tv.values % vec:
            raise b.err(site.arg("vec"), f"vec={vec} of {src.dtype} ({nbytes} bytes) is not a 1/2/4/8/16-byte "
                                         f"access dividing {tv.values} values")
        _check_runs(site, tv, vec)
    return b.emit(site.node, ir.Load(src.view, tv, mask, other, vec), ir.FragType(src.dtype, tv))


def _constant(site: CallSite, key: str, message: str) -> float:
    """A float or integer constant keyword, or its declared default."""
    if not site.given(key):
        return site.decl.keyword(key).default
    return _float_constant(site, site.arg(key), message)


def _float_constant(site: CallSite, node, message: str) -> float:
    v = site.b.value(node)
    if isinstance(v, FloatVal):
        return v.value
    if isinstance(v, IntVal) and v.const is not None:
        return float(v.const)
    raise site.b.err(node, message)


def _representable(site: CallSite, node, dtype: str, value: float, what: str) -> None:
    """An integer fragment holds integers of its type's range: -inf as an i32 padding would be -inf to
    the verifier and the interpreter, and some other integer in the generated code."""
    if dtype not in ir.INT_DTYPES:
        return
    info = np.iinfo(ir.numpy_dtype(dtype))
    if not (math.isfinite(value) and value == int(value) and info.min <= value <= info.max):
        raise site.b.err(node, f"{what} {value:g} is not a value of {dtype} (integers {info.min} .. {info.max}); "
                               f"for a max over {dtype} pad with {info.min}, for a min with {info.max}")


def _check_runs(site: CallSite, tv: ir.TVLayout, vec: int):
    if not row_contiguous(tv, vec):
        raise site.b.err(site.at("vec"), f"vec={vec}: the tv layout {tv.layout} does not give each thread runs of "
                                         f"{vec} consecutive elements of one tile row")


def store(site: CallSite):
    b = site.b
    dst = b.value(site.args[0])
    if not isinstance(dst, ViewVal):
        raise b.err(site.args[0], "store's first argument must be a view of a tensor or shared allocation")
    val = b.value(site.args[1])
    if not isinstance(val, FragVal):
        raise b.err(site.args[1], "store's second argument must be a fragment")
    _check_writable(site, dst)
    if val.type.dtype != dst.dtype:
        raise b.err(site.args[1], f"cannot store a {val.type.dtype} fragment into {dst.dtype} '{dst.view.base}'; "
                                  "cast it first")
    if tuple(val.type.tile) != dst.view.tile:
        raise b.err(site.args[1], f"fragment tile {list(val.type.tile)} does not match the view's tile "
                                  f"{list(dst.view.tile)}")
    mask = site.flag("mask")
    where = _condition(site, "where") if site.given("where") else None
    b.out.append(ir.Store(dst.view, val.name, mask, where, b.sp(site.node)))


def _condition(site: CallSite, key: str) -> ir.IExpr:
    v = site.b.value(site.arg(key))
    if not isinstance(v, IntVal):
        raise site.b.err(site.arg(key), f"{key}= takes a condition")
    return v.expr


def _check_writable(site: CallSite, dst: ViewVal):
    if dst.view.space == "global":
        tp = site.b.tensors[dst.view.base]
        if not tp.output:
            raise site.b.err(site.args[0], f"cannot write to input tensor '{tp.name}'",
                             note="outputs are declared after '->' in the kernel signature")


def zeros(site: CallSite) -> FragVal:
    return _full(site, 0.0)


def full(site: CallSite) -> FragVal:
    return _full(site, _float_constant(site, site.args[1], "full()'s value must be a constant"), site.args[1])


def _full(site: CallSite, value: float, value_node=None) -> FragVal:
    t = tile_type(site, site.args[0])
    if value_node is not None:
        _representable(site, value_node, t.dtype, value, "full()'s value")
    tv = tv_arg(site, tuple(t.dims))
    return site.b.emit(site.node, ir.Full(t.dtype, tv, value), ir.FragType(t.dtype, tv))


def tile_type(site: CallSite, node) -> DTypeVal:
    v = site.b.value(node)
    if not isinstance(v, DTypeVal) or v.dims is None:
        raise site.b.err(node, f"{site.name}() takes a tile type such as f32[64, 64]")
    return v


def shared(site: CallSite) -> SharedVal:
    b = site.b
    t = tile_type(site, site.args[0])
    shape = tuple(t.dims)
    layout = _shared_layout(site, shape) if site.given("layout") else row_major(shape)
    nbytes = layout.cosize * ir.DTYPE_BYTES[t.dtype]
    if nbytes > SHARED_BYTES:
        raise b.err(site.node, f"shared allocation of {nbytes} bytes exceeds the 227 KB a Hopper block can use")
    return SharedVal(t.dtype, shape, layout)


def _shared_layout(site: CallSite, shape: tuple):
    """layout=: a layout (optionally composed with a Swizzle) over the allocation's shape, with
    non-negative offsets."""
    b, node = site.b, site.arg("layout")
    lv = b.value(node)
    if not isinstance(lv, LayoutVal) or isinstance(lv.layout, Swizzle):
        raise b.err(node, "layout= takes a layout (optionally composed with a Swizzle)")
    layout = lv.layout
    inner = layout.inner if isinstance(layout, ComposedLayout) else layout
    modes = tuple(inner.mode(i).size for i in range(inner.rank)) if inner.rank > 1 else (inner.size,)
    if modes != shape:
        shown = "(" + ", ".join(str(x) for x in modes) + ")"
        raise b.err(node, f"layout {layout} has shape {shown} but the allocation is {list(shape)}")
    if any(d < 0 and e > 1 for e, d in inner.flat_modes()):
        raise b.err(node, f"layout {layout} has a negative stride: shared offsets must be non-negative")
    return layout


def copy_async(site: CallSite):
    b = site.b
    dst, src = b.value(site.args[0]), b.value(site.args[1])
    if not isinstance(dst, ViewVal) or dst.view.space != "shared":
        raise b.err(site.args[0], "copy_async copies into shared memory: the first argument must be a shared view")
    if not isinstance(src, ViewVal) or src.view.space != "global":
        raise b.err(site.args[1], "copy_async copies from global memory: the second argument must be a global view")
    if dst.dtype != src.dtype:
        raise b.err(site.node, f"copy_async between {src.dtype} and {dst.dtype}")
    if dst.view.tile != src.view.tile:
        raise b.err(site.args[0], f"shared tile {list(dst.view.tile)} and global tile {list(src.view.tile)} differ")
    tv = tv_arg(site, src.view.tile)
    nbytes = ir.DTYPE_BYTES[src.dtype]
    vec = site.const("vec")
    if vec is None:  # the widest copy the layout allows
        vec = max(v for v in (1, 2, 4, 8, 16) if tv.values % v == 0 and v * nbytes <= 16 and row_contiguous(tv, v))
    if vec * nbytes not in (4, 8, 16):
        raise b.err(site.at("vec"), f"cp.async copies 4, 8 or 16 bytes; vec={vec} of {src.dtype} is "
                                    f"{vec * nbytes} bytes")
    if tv.values % vec:
        raise b.err(site.at("vec"), f"vec={vec} does not divide the {tv.values} values per thread")
    _check_runs(site, tv, vec)
    b.out.append(ir.CopyAsync(dst.view, src.view, tv, site.flag("mask"), vec, b.sp(site.node)))


def _matrix_access(site: CallSite, name: str, view_node, count_node):
    """The shared view, count, rows layout, trans flag and delivered coordinates of an
    ldmatrix / stmatrix call."""
    b = site.b
    src = b.value(view_node)
    if not isinstance(src, ViewVal) or src.view.space != "shared":
        raise b.err(view_node, f"{name}() takes a view of a shared allocation")
    if ir.DTYPE_BYTES[src.dtype] != 2:
        raise b.err(view_node, f"{name} moves 16-bit elements; '{src.view.base}' holds {src.dtype}")
    if len(src.view.tile) != 2:
        raise b.err(view_node, f"{name}() needs a 2-D tile")
    word = str(count_node.children[0]) if getattr(count_node, "data", None) == "name" else None
    if word not in ("x1", "x2", "x4"):
        raise b.err(count_node, f"{name}'s count is x1, x2 or x4 (matrices per instruction)")
    count = int(word[1])
    if b.block % 32:
        raise b.err(site.node, f"{name} is a warp instruction: the block must be whole warps")
    rnode = site.arg("rows")
    v = b.value(rnode)
    if not isinstance(v, LayoutVal) or not isinstance(v.layout, Layout):
        raise b.err(rnode, "rows= takes a layout (threads, instructions) -> tile element, such as "
                           "((8, 4), 2):((16, 128), 8)")
    rows = check_tv(b, v.layout, src.view.tile, rnode)
    trans = site.flag("trans")
    try:
        typ = atoms.ldmatrix_result(rows, count, trans)
    except ValueError as e:
        raise b.err(rnode, f"{name}: {e}") from None
    return src, count, rows, trans, typ


def ldmatrix(site: CallSite) -> FragVal:
    """ldmatrix(view, x4, rows=L, trans=False): what the lanes receive, by the ISA's layouts."""
    src, count, rows, trans, typ = _matrix_access(site, "ldmatrix", site.args[0], site.args[1])
    return site.b.emit(site.node, ir.Ldmatrix(src.view, rows, count, trans), ir.FragType(src.dtype, typ))


def stmatrix(site: CallSite):
    """stmatrix(view, frag, x4, rows=L, trans=False): each value to its own coordinate."""
    b = site.b
    dst, count, rows, trans, typ = _matrix_access(site, "stmatrix", site.args[0], site.args[2])
    val = b.value(site.args[1])
    if not isinstance(val, FragVal):
        raise b.err(site.args[1], "stmatrix's second argument must be a fragment")
    if val.type.dtype != dst.dtype:
        raise b.err(site.args[1], f"cannot store a {val.type.dtype} fragment into {dst.dtype} '{dst.view.base}'")
    if tuple(val.type.tile) != dst.view.tile:
        raise b.err(site.args[1], f"fragment tile {list(val.type.tile)} does not match the view's tile "
                                  f"{list(dst.view.tile)}")
    have, put = val.type.coords.coord_table(), typ.coord_table()
    if have.shape != put.shape or not (have == put).all():
        if have.shape != put.shape:
            raise b.err(site.args[1], f"the fragment holds {val.type.values} values per thread; these rows move "
                                      f"{typ.values}")
        t, v = (int(x[0]) for x in np.nonzero((have != put).any(-1)))
        raise b.err(site.args[1], f"stmatrix puts value {v} of thread {t} at {put[t, v].tolist()}, but it holds "
                                  f"element {have[t, v].tolist()} (trans={trans} and these rows do not match the "
                                  "fragment's layout)")
    b.out.append(ir.Stmatrix(dst.view, val.name, rows, count, trans, b.sp(site.node)))


def commit(site: CallSite):
    site.b.out.append(ir.Commit(site.b.sp(site.node)))


def wait(site: CallSite):
    n = site.b.const_int(site.args[0], "wait's count") if site.args else 0
    if n < 0:
        raise site.b.err(site.node, "wait(n) takes one non-negative count of groups left in flight")
    site.b.out.append(ir.Wait(n, site.b.sp(site.node)))


def barrier(site: CallSite):
    site.b.out.append(ir.Barrier(site.b.sp(site.node)))


HANDLERS = {"load": load, "store": store, "zeros": zeros, "full": full, "shared": shared, "copy_async": copy_async,
            "commit": commit, "wait": wait, "barrier": barrier, "ldmatrix": ldmatrix,
            "stmatrix": stmatrix}
