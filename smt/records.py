"""What the walk records: shared allocations, compiled views, and every access and implicit check.

Shared memory is not a flow state but a set of *write records* (`ShWrite`: every store and async
copy into an allocation) and read records (`ShRead`); global accesses are `GAccess`, the implicit
tag assertions of operations are `Check`. Obligations turn them into queries; a shared read
resolves to the writes that may have produced its element (`MemoryMixin.resolve`).

Overwriting and initialisation are judged with *footprints*: writes that cover a box of the
allocation (a full tile) or a set computed exhaustively over threads.
"""

from __future__ import annotations

import math

import numpy as np

from argus_verify import ir
from argus_verify.layout import NumpyOps
from argus_verify.smt import zops as Z
from argus_verify.smt.values import TagVal, Tr, element_label
from argus_verify.smt.zops import FALSE, OPS, TRUE, bv

NP = NumpyOps()


class AllocInfo:
    """A shared allocation: its layout (coordinate -> offset), element size, and whether distinct
    coordinates have distinct offsets (`injective`: then overwrites can be judged by coordinate)."""

    def __init__(self, alloc: ir.SharedAlloc, node):
        self.alloc = alloc
        self.name = alloc.name
        self.shape = tuple(alloc.shape)
        self.layout = alloc.layout
        self.bytes = ir.DTYPE_BYTES[alloc.dtype]
        self.node = node
        img = alloc.layout.map_all()
        self.injective = bool(np.unique(img).size == img.size)
        self.cosize = alloc.layout.cosize

    def offset(self, coords):
        return ir.layout_offset(self.layout, tuple(coords), OPS)

    def offset_np(self, coords):
        return ir.layout_offset(self.layout, tuple(coords), NP)


class View:
    """A compiled view: per base dimension ('slice', IntV start, extent) or ('index', IntV)."""

    def __init__(self, view: ir.View, items):
        self.view = view
        self.base = view.base
        self.space = view.space
        self.items = items  # [(kind, IntV, extent)]
        self.tile = view.tile

    def elem(self, S, ctx, inst, t, tile_coords):
        out = []
        axis = 0
        for kind, iv, _ in self.items:
            base = iv.fn(S, ctx, inst, t)
            if kind == "slice":
                out.append(Z.add(base, tile_coords[axis]))
                axis += 1
            else:
                out.append(base)
        return tuple(out)

    @property
    def uniform(self) -> bool:
        return all(iv.uniform for _, iv, _ in self.items)

    def np_starts(self, t):
        vals = []
        for _, iv, _ in self.items:
            if iv.np_fn is None:
                return None
            vals.append(np.broadcast_to(np.asarray(iv.np_fn(t), dtype=np.int64), t.shape))
        return vals


class ShWrite:
    """A write into shared memory: a store of fragment `frag`, or an async copy from `src` of
    global tensor `src_tensor` (`vec` elements per instruction), through `view`."""

    def __init__(
        self,
        an,
        kind,
        node,
        alloc,
        view,
        coords,
        values,
        where,
        frag=None,
        src=None,
        src_tensor=None,
        label="",
        vec=None,
    ):
        self.an = an
        self.kind = kind  # "store" | "async"
        self.node = node
        self.alloc = alloc
        self.view = view
        self.coords = coords  # TVMap of the written fragment / copy
        self.values = values
        self.where = where  # IntV | None
        self.frag = frag
        self.src = src  # View (async)
        self.src_tensor = src_tensor
        self.label = label
        self.vec = vec
        self._fp = "unset"

    @property
    def op(self):
        return "store" if self.kind == "store" else "copy_async"

    def addr(self, S, ctx, inst, t, v):
        c = self.coords.coords(t, v, OPS)
        e = self.view.elem(S, ctx, inst, t, c)
        return e, self.alloc.offset(e), self.an.in_shape(e, self.alloc.shape)

    def executes(self, S, ctx, inst, t):
        g = self.node.guard(S, ctx, inst, t)
        if self.where is not None:
            g = Z.And(g, Z.i2b(self.where.fn(S, ctx, inst, t)))
        return g

    @property
    def fast(self) -> bool:
        """The written element is determined by its coordinate: the reader's coordinate gives it
        without solving for the writer's thread and value."""
        if not self.alloc.injective or self.footprint() is None or self.footprint()[0] != "box":
            return False
        if self.kind == "async":
            return self.src.uniform
        return self.frag.has_cfn()

    def tile_coord(self, S, ctx, inst, e):
        out = []
        for (kind, iv, _), x in zip(self.view.items, e, strict=True):
            if kind == "slice":
                out.append(Z.sub(x, iv.fn(S, ctx, inst, None)))
        return tuple(out)

    def tag_at(self, S, ctx, inst, c) -> TagVal:
        if self.kind == "store":
            return self.frag.cfn(S, ctx, inst, c)
        e = self.src.elem(S, ctx, inst, None, c)
        tg = self.an.input_tag(self.src_tensor, e, S)
        return tg.replace(trace=Tr(None, None, None, element_label(self.src_tensor, len(e)), e))

    def holds(self, S, t, c):
        """Thread t writes tile coordinate c (for some value: an auxiliary variable)."""
        vw = S.var("vw")
        cw = self.coords.coords(t, vw, OPS)
        return Z.And(vw >= 0, vw < self.values, *[Z.Eq(x, y) for x, y in zip(cw, c, strict=True)])

    def tag(self, S, ctx, inst, t, v) -> TagVal:
        if self.kind == "store":
            return self.frag.tag(S, ctx, inst, t, v)
        c = self.coords.coords(t, v, OPS)
        e = self.src.elem(S, ctx, inst, t, c)
        tg = self.an.input_tag(self.src_tensor, e, S)
        src = Tr(None, None, None, element_label(self.src_tensor, len(e)), e)
        return tg.replace(trace=src)

    # footprints: what this write certainly covers, for overwrites and initialisation
    def footprint(self):
        if self._fp == "unset":
            self._fp = self._footprint()
        return self._fp

    def _footprint(self):
        table = self.coords.coord_table()
        tile = self.view.tile
        covered = len({tuple(x) for x in table.reshape(-1, table.shape[-1])}) if table.size else 0
        full = covered == math.prod(tile)
        if self.where is None and self.node.uniform_guard and self.view.uniform and full:
            return ("box",)
        # exhaustive over threads when addresses and predicates depend on the thread only
        t = np.arange(self.an.T, dtype=np.int64)
        starts = self.view.np_starts(t)
        if starts is None:
            return None
        live = np.ones(self.an.T, dtype=bool)
        for c, pos in self.node.conds:
            if c.np_fn is None:
                return None
            x = np.broadcast_to(np.asarray(c.np_fn(t)) != 0, t.shape)
            live &= x if pos else ~x
        if self.where is not None:
            if self.where.np_fn is None:
                return None
            live &= np.broadcast_to(np.asarray(self.where.np_fn(t)) != 0, t.shape)
        pts = set()
        for tt in np.nonzero(live)[0]:
            for v in range(table.shape[1]):
                e = []
                axis = 0
                for (kind, _, _), s in zip(self.view.items, starts, strict=True):
                    if kind == "slice":
                        e.append(int(s[tt] + table[tt, v, axis]))
                        axis += 1
                    else:
                        e.append(int(s[tt]))
                pts.add(tuple(e))
        return ("set", boxes_of(pts))

    def covers(self, S, ctx, inst, e):
        """This write (at instance `inst`, which must execute) covers allocation coordinate e."""
        fp = self.footprint()
        if fp is None:
            return FALSE
        if fp[0] == "box":
            parts = []
            for (kind, iv, extent), x in zip(self.view.items, e, strict=True):
                s = iv.fn(S, ctx, inst, None)
                if kind == "slice":
                    parts += [Z.Le(s, x), Z.Lt(x, Z.add(s, bv(extent)))]
                else:
                    parts.append(Z.Eq(s, x))
            return Z.And(*parts)
        return Z.Or(
            *[
                Z.And(*[z for lo, hi, x in zip(b[0], b[1], e, strict=True) for z in (Z.Le(bv(lo), x), Z.Lt(x, bv(hi)))])
                for b in fp[1]
            ]
        )

    def executes_uniform(self, S, ctx, inst):
        """The write happens at `inst` (its predicates are uniform, or folded into the set)."""
        fp = self.footprint()
        if fp is None:
            return FALSE
        if fp[0] == "box":
            return self.node.guard(S, ctx, inst, None)
        return TRUE


def boxes_of(points: set) -> list:
    """A list of half-open boxes ((lo...), (hi...)) whose union is exactly `points`."""
    if not points:
        return []
    rank = len(next(iter(points)))
    if rank == 1:
        xs = sorted(p[0] for p in points)
        out = []
        lo = prev = xs[0]
        for x in xs[1:]:
            if x != prev + 1:
                out.append(((lo,), (prev + 1,)))
                lo = x
            prev = x
        out.append(((lo,), (prev + 1,)))
        return out
    by_first: dict = {}
    for p in points:
        by_first.setdefault(p[0], set()).add(p[1:])
    rows = sorted((x, tuple(sorted(boxes_of(rest)))) for x, rest in by_first.items())
    out = []
    i = 0
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1][0] == rows[j][0] + 1 and rows[j + 1][1] == rows[i][1]:
            j += 1
        for lo, hi in rows[i][1]:
            out.append(((rows[i][0],) + lo, (rows[j][0] + 1,) + hi))
        i = j + 1
    return out


class ShRead:
    """A load from shared memory into fragment `name`."""

    op = "load"

    def __init__(self, node, alloc, view, coords, values, label, name):
        self.node, self.alloc, self.view, self.coords = node, alloc, view, coords
        self.values, self.label, self.name = values, label, name


class GAccess:
    """A global access (load, store or the source of an async copy) of `tensor` through `view`."""

    def __init__(self, kind, node, tensor, view, coords, values, mask, where, dtype):
        self.kind, self.node, self.tensor, self.view, self.coords = kind, node, tensor, view, coords
        self.values, self.mask, self.where, self.dtype = values, mask, where, dtype

    def executes(self, S, ctx, inst, t):
        g = self.node.guard(S, ctx, inst, t)
        if self.where is not None:
            g = Z.And(g, Z.i2b(self.where.fn(S, ctx, inst, t)))
        return g


class Check:
    """An implicit tag assertion of an operation (elementwise, reduce, mma).

    `fn(S, ctx, inst, t, v)` (or `fn(..., part)` for each of `parts`, each its own query) ->
    {"bad", "cons", "tags": [(label, TagVal)], optional "approx" and "extra"}."""

    def __init__(self, kind, node, fn, typ, detail, parts=(None,)):
        self.kind, self.node, self.fn, self.typ, self.detail = kind, node, fn, typ, detail
        self.parts = parts
        self.demand = None  # (how, result FragV, lanes): which elements are used (smt.demand)
        self.result = node.stmt.name if isinstance(node.stmt, ir.Assign) else kind
