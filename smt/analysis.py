"""Abstract interpretation of a kernel over the layout algebra.

`Analysis(kernel)` walks the IR once, flow-sensitively, and turns every integer into an `IntV`
and every fragment into a `FragV`: closures that build, for any block, loop iteration, thread and
value, the Z3 terms of the integer, or of the element's tag. Layouts are evaluated with
`Layout.apply` through `Z3Ops`, so the tag of value v of thread t is composed from exactly the
layouts, swizzles and views its data passed through.

Shared memory is not a flow state but a set of *write records* (every store and async copy into
an allocation). A read of offset o at instance r resolves to the writes W@w (any instance, any
thread, any value) that wrote o before r and were not overwritten in between (`alive`); the read
takes W's tag, and is marked `err` unless W had completed (async copies: retired by a `wait`) and
become visible to the reader (same thread, or a barrier since). Overwriting is judged with
*footprints*: writes that cover a box of the allocation (a full tile) or a set computed
exhaustively over threads.

While walking it also records the raw material of every obligation (assertions, agreement checks
of elementwise / reduce / mma operations, output stores, global and shared accesses, barriers,
waits and commits); `smt.obligations` turns them into queries.
"""

from __future__ import annotations

import math

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import SOURCES
from argus_verify.layout import NumpyOps
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.values import FragV, IntV, TagVal, Tr
from argus_verify.smt.zops import FALSE, OPS, TRUE, bv

NP = NumpyOps()
MAX_DEPTH = 60  # nested fragment evaluations before giving up (loop-carried data through smem)


def _getter(cell):
    """How to read a value's function: its tag for fragments, its integer for scalars."""
    if cell.is_frag:
        return lambda val, S, ctx, inst, t, v: val.tag(S, ctx, inst, t, v)
    return lambda val, S, ctx, inst, t, v: val.fn(S, ctx, inst, t, v)


class AnalysisError(Exception):
    """A construct beyond the encoding; the verifier reports every obligation as unknown."""


# ---------------------------------------------------------------------------------------------
# linear forms (for coverage of outputs): ({atom: coef}, const)


def lin_add(a, b, sign=1):
    if a is None or b is None:
        return None
    out = dict(a[0])
    for k, c in b[0].items():
        out[k] = out.get(k, 0) + sign * c
    return ({k: c for k, c in out.items() if c}, a[1] + sign * b[1])


def lin_mul(a, b):
    if a is None or b is None:
        return None
    if not a[0]:
        return ({k: c * a[1] for k, c in b[0].items() if c * a[1]}, a[1] * b[1])
    if not b[0]:
        return ({k: c * b[1] for k, c in a[0].items() if c * b[1]}, a[1] * b[1])
    return None


NP_BIN = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "//": np.floor_divide,
    "%": np.mod,
    "<<": np.left_shift,
    ">>": np.right_shift,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
    "min": np.minimum,
    "max": np.maximum,
    "cdiv": lambda a, b: -np.floor_divide(-np.asarray(a), b),
    "==": lambda a, b: (np.asarray(a) == b).astype(np.int64),
    "!=": lambda a, b: (np.asarray(a) != b).astype(np.int64),
    "<": lambda a, b: (np.asarray(a) < b).astype(np.int64),
    "<=": lambda a, b: (np.asarray(a) <= b).astype(np.int64),
    ">": lambda a, b: (np.asarray(a) > b).astype(np.int64),
    ">=": lambda a, b: (np.asarray(a) >= b).astype(np.int64),
    "and": lambda a, b: ((np.asarray(a) != 0) & (np.asarray(b) != 0)).astype(np.int64),
    "or": lambda a, b: ((np.asarray(a) != 0) | (np.asarray(b) != 0)).astype(np.int64),
}


def z_bin(op, a, b):
    if op == "+":
        return Z.add(a, b)
    if op == "-":
        return Z.sub(a, b)
    if op == "*":
        return Z.mul(a, b)
    if op == "//":
        return Z.floordiv(a, b)
    if op == "%":
        return Z.mod(a, b)
    if op == "<<":
        return Z.shl(a, b)
    if op == ">>":
        return Z.shr(a, b)
    if op == "&":
        return Z.band(a, b)
    if op == "|":
        return Z.bor(a, b)
    if op == "^":
        return Z.xor(a, b)
    if op == "min":
        return Z.smin(a, b)
    if op == "max":
        return Z.smax(a, b)
    if op == "cdiv":
        return Z.cdiv(a, b)
    if op == "==":
        return Z.b2i(Z.Eq(a, b))
    if op == "!=":
        return Z.b2i(Z.Ne(a, b))
    if op == "<":
        return Z.b2i(Z.Lt(a, b))
    if op == "<=":
        return Z.b2i(Z.Le(a, b))
    if op == ">":
        return Z.b2i(Z.Lt(b, a))
    if op == ">=":
        return Z.b2i(Z.Le(b, a))
    if op == "and":
        return Z.b2i(Z.And(Z.i2b(a), Z.i2b(b)))
    if op == "or":
        return Z.b2i(Z.Or(Z.i2b(a), Z.i2b(b)))
    raise AnalysisError(f"integer operator {op!r}")


def _const_of(iv):
    if iv.lin is None or iv.lin[0] or iv.loopdeps or iv.heads or not iv.uniform:
        return None
    try:
        return Z.const_value(iv.fn(None, None, None, None))
    except (AttributeError, TypeError, KeyError):
        return None


def src_text(span) -> str:
    if span is None or span.line <= 0:
        return ""
    line = SOURCES.line(span.file, span.line)
    if line is None:
        return ""
    if span.end_line == span.line and span.end_col > span.col:
        return line[span.col - 1 : span.end_col - 1].strip()
    return line.strip()


# ---------------------------------------------------------------------------------------------
# records


class AllocInfo:
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
        return tg.replace(trace=Tr(None, None, None, self.an.elem_label(self.src_tensor, len(e)), e))

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
        src = Tr(None, None, None, self.an.elem_label(self.src_tensor, len(e)), e)
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
                Z.And(
                    *[
                        z
                        for lo, hi, x in zip(b[0], b[1], e, strict=True)
                        for z in (Z.Le(bv(lo), x), Z.Lt(x, bv(hi)))
                    ]
                )
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
    def __init__(self, node, alloc, view, coords, values, label, op):
        self.node, self.alloc, self.view, self.coords = node, alloc, view, coords
        self.values, self.label, self.op = values, label, op


class GAccess:
    def __init__(self, kind, node, tensor, view, coords, values, mask, where, dtype):
        self.kind, self.node, self.tensor, self.view, self.coords = kind, node, tensor, view, coords
        self.values, self.mask, self.where, self.dtype = values, mask, where, dtype

    def executes(self, S, ctx, inst, t):
        g = self.node.guard(S, ctx, inst, t)
        if self.where is not None:
            g = Z.And(g, Z.i2b(self.where.fn(S, ctx, inst, t)))
        return g


class Check:
    """An implicit tag assertion of an operation (elementwise, reduce, mma)."""

    def __init__(self, kind, node, fn, typ, detail):
        self.kind, self.node, self.fn, self.typ, self.detail = kind, node, fn, typ, detail
        self.result = node.stmt.name if isinstance(node.stmt, ir.Assign) else kind


class Cell:
    """The value of a loop-carried variable at the head of an iteration (a hypothesis)."""

    def __init__(self, name, pre, loop, is_frag):
        self.name, self.pre, self.loop, self.is_frag = name, pre, loop, is_frag
        self.fn = pre.fn if not is_frag else (lambda S, ctx, inst, t, v, pre=pre: pre.tag(S, ctx, inst, t, v))
        self.id = id(self)
        self.mode = "pre"
        self.reason = ""
        self.cfn = None  # the coordinate form of the hypothesis (see FragV.cfn)
        self.cfn_ok = False  # until the loop is decided: the slow, always-correct path


# ---------------------------------------------------------------------------------------------


class Analysis:
    def __init__(self, kernel: ir.Kernel, shapes: dict | None = None):
        self.k = kernel
        self.T = kernel.block
        self.shapes = dict(shapes or {})
        self.size_names = tuple(kernel.sizes)
        self.param_names = tuple(
            p.name for p in kernel.params if isinstance(p, ir.ScalarParam) and not ir.is_float(p.dtype)
        )
        self.tagdecls = {t.tensor: t for t in kernel.tags}
        self.tagfns = {f.name: f for f in kernel.tagfns}
        self.K = max([len(t.components) for t in kernel.tags] + [1])
        self.tensors = {t.name: t for t in kernel.tensors}
        self.blocks: dict = {}
        self.nodes: list = []
        self.loops_by_stmt: dict = {}
        self.allocs: dict = {}
        self.sh_writes: dict = {}
        self.sh_reads: dict = {}
        self.g_accesses: list = []
        self.asserts: list = []
        self.checks: list = []
        self.out_stores: list = []
        self.barriers: list = []
        self.waits: list = []
        self.commit_nodes: list = []
        self.cells: list = []
        self.notes: list = []  # approximations taken while walking (reported with unknowns)
        self.invariant_queries: list = []  # (loop, outcome) for the report
        self.timeout_s = 10.0
        self.grid = [self.cint(g, {}) for g in kernel.grid]
        self.tensor_dims = {t.name: [self.cint(d, {}) for d in t.shape] for t in kernel.tensors}
        self._bid = 0
        root = self.new_block()
        self.pending_loops: list = []
        self.proxies: dict = {}  # id(head proxy value) -> Cell
        self.passthrough: dict = {}  # id(merged value) -> (Cell, the other branch): x = new if c else x
        self.incr: dict = {}  # id(Let) -> IntV of e, for `x = x + e`
        self.env: dict = {}  # the values bound at the end of the kernel (integers and fragments)
        self.walk(kernel.body, self.env, (), (), (), root)
        self.commits = P.CommitCounter(kernel.body, self.loops_by_stmt)
        self.window = max([2] + [a.shape[0] for a in self.allocs.values() if self._indexed(a.name)])

    def finish(self, timeout_s: float) -> None:
        """Decide the head value of every loop-carried variable (inner loops first). Runs after
        the walk so that every write record exists when the invariants are checked."""
        self.timeout_s = timeout_s
        for L, cells, post, end in self.pending_loops:
            self.resolve_carried(L, cells, post, end)
        self.pending_loops = []

    @property
    def sizes(self) -> dict:
        """The symbolic sizes, as terms of the current encoding."""
        return {n: Z.var(n) for n in self.size_names}

    @property
    def params(self) -> dict:
        return {n: Z.var(f"param.{n}") for n in self.param_names}

    def _indexed(self, alloc) -> bool:
        accs = self.sh_writes.get(alloc, []) + self.sh_reads.get(alloc, [])
        return any(any(kind == "index" for kind, _, _ in a.view.items) for a in accs)

    def new_block(self) -> int:
        self._bid += 1
        return self._bid

    # ------------------------------------------------------------------------------------------
    # basic terms

    def base_constraints(self):
        cons = []
        for name, s in self.sizes.items():
            cons += [s >= 1, s <= Z.MAX_SIZE]
            if name in self.shapes:
                cons.append(s == int(self.shapes[name]))
        for p in self.params.values():
            cons += [p >= -(1 << 31), p < (1 << 31)]
        S = V.Session(self)
        for r in self.k.requires:
            cons.append(Z.i2b(self.cint(r, {}).fn(S, None, None, None)))
        for g in self.grid:
            cons.append(g.fn(S, None, None, None) >= 1)
        return cons

    def new_ctx(self, S, prefix="block") -> V.Ctx:
        ids = [S.var(f"{prefix}.{a}") for a in "xyz"]
        cons = []
        for b, g in zip(ids, self.grid, strict=True):
            cons += [b >= 0, b < g.fn(S, None, None, None)]
        return V.Ctx(ids, Z.And(*cons))

    def in_shape(self, e, shape):
        return Z.And(*[z for x, d in zip(e, shape, strict=True) for z in (Z.Le(bv(0), x), Z.Lt(x, bv(d)))])

    def in_tensor(self, tensor, e, S):
        dims = self.tensor_dims[tensor]
        return Z.And(
            *[
                z
                for x, d in zip(e, dims, strict=True)
                for z in (Z.Le(bv(0), x), Z.Lt(x, d.fn(S, None, None, None)))
            ]
        )

    def elem_label(self, base, rank) -> str:
        return f"{base}[" + ", ".join(["{}"] * rank) + "]"

    def input_tag(self, tensor, e, S) -> TagVal:
        decl = self.tagdecls.get(tensor)
        if decl is None:
            return V.untagged(self.K)
        bind = {n: x for n, x in zip(decl.index_vars, e, strict=True)}
        vals = [self.term(c, bind, S) for c in decl.components]
        return V.tagged(vals, self.K)

    def term(self, e, bind, S):
        """Evaluate an integer expression of tag declarations: index variables, sizes, tagfns."""
        if isinstance(e, ir.IConst):
            return bv(e.value)
        if isinstance(e, ir.IVar):
            if e.name in bind:
                return bind[e.name]
            if e.name in self.size_names:
                return Z.var(e.name)
            if e.name in self.param_names:
                return Z.var(f"param.{e.name}")
            raise AnalysisError(f"unknown name {e.name!r} in a tag expression")
        if isinstance(e, ir.IBin):
            return z_bin(e.op, self.term(e.a, bind, S), self.term(e.b, bind, S))
        if isinstance(e, ir.IUn):
            a = self.term(e.a, bind, S)
            return Z.neg(a) if e.op == "-" else Z.b2i(Z.Eq(a, bv(0)))
        if isinstance(e, ir.ISelect):
            return Z.Ite(Z.i2b(self.term(e.cond, bind, S)), self.term(e.a, bind, S), self.term(e.b, bind, S))
        if isinstance(e, ir.ICall):
            fn = self.tagfns[e.fn]
            sub = {p: self.term(a, bind, S) for p, a in zip(fn.params, e.args, strict=True)}
            return self.term(fn.body, sub, S)
        raise AnalysisError(f"{type(e).__name__} in a tag expression")

    # ------------------------------------------------------------------------------------------
    # integer expressions -> IntV

    def cint(self, e, env, frags=None) -> IntV:
        if isinstance(e, ir.IConst):
            return V.const_int(e.value)
        if isinstance(e, ir.IVar):
            if e.name in env and isinstance(env[e.name], IntV):
                return env[e.name]
            if e.name in self.size_names:
                n = e.name
                return IntV(lambda S, ctx, inst, t, v=None: Z.var(n), True, lin=({("size", n): 1}, 0))
            if e.name in self.param_names:
                n = f"param.{e.name}"
                return IntV(lambda S, ctx, inst, t, v=None: Z.var(n), True, lin=({("param", e.name): 1}, 0))
            raise AnalysisError(f"unknown integer {e.name!r}")
        if isinstance(e, ir.ISpecial):
            w = e.which
            if w.startswith("block_id."):
                ax = "xyz".index(w[-1])
                return IntV(lambda S, ctx, inst, t, v=None: ctx.block[ax], True, lin=({("blk", ax): 1}, 0))
            if w.startswith("num_blocks."):
                return self.grid["xyz".index(w[-1])]
            if w == "thread_id":
                return IntV(
                    lambda S, ctx, inst, t, v=None: t, False, np_fn=lambda t: t, lin=({("thr", "t"): 1}, 0)
                )
            if w == "warp_id":
                return IntV(
                    lambda S, ctx, inst, t, v=None: Z.shr(t, bv(5)),
                    False,
                    np_fn=lambda t: t >> 5,
                    lin=({("thr", "warp"): 1}, 0),
                )
            if w == "lane_id":
                return IntV(
                    lambda S, ctx, inst, t, v=None: Z.band(t, bv(31)),
                    False,
                    np_fn=lambda t: t & 31,
                    lin=({("thr", "lane"): 1}, 0),
                )
            raise AnalysisError(f"special {w}")
        if isinstance(e, ir.IBin):
            return self.combine(e.op, self.cint(e.a, env, frags), self.cint(e.b, env, frags))
        if isinstance(e, ir.IUn):
            a = self.cint(e.a, env, frags)
            if e.op == "-":
                return self.combine("-", V.const_int(0), a)
            return self.combine("==", a, V.const_int(0))
        if isinstance(e, ir.ISelect):
            c, a, b = (self.cint(x, env, frags) for x in (e.cond, e.a, e.b))
            npf = None
            if c.np_fn and a.np_fn and b.np_fn:

                def npf(t, c=c, a=a, b=b):
                    return np.where(np.asarray(c.np_fn(t)) != 0, a.np_fn(t), b.np_fn(t))

            return IntV(
                lambda S, ctx, inst, t, v=None: Z.Ite(
                    Z.i2b(c.fn(S, ctx, inst, t, v)), a.fn(S, ctx, inst, t, v), b.fn(S, ctx, inst, t, v)
                ),
                c.uniform and a.uniform and b.uniform,
                c.loopdeps | a.loopdeps | b.loopdeps,
                npf,
                heads=c.heads | a.heads | b.heads,
            )
        if isinstance(e, ir.ICall):
            fn = self.tagfns[e.fn]
            sub = dict(env)
            for p, a in zip(fn.params, e.args, strict=True):
                sub[p] = self.cint(a, env, frags)
            return self.cint(fn.body, sub, frags)
        if isinstance(e, (ir.ITag, ir.ICoord)):
            if frags is None:
                raise AnalysisError("tag(...) / coord(...) outside an assertion")
            f = env[e.frag]
            if isinstance(e, ir.ITag):
                k = e.component

                def tagfn(S, ctx, inst, t, v=None, f=f, k=k):
                    return f.tag(S, ctx, inst, t, v).comp(k)[0]

                frags.append(("tag", e.frag, k))
                return IntV(tagfn, False)
            ax = e.axis

            def coordfn(S, ctx, inst, t, v=None, f=f, ax=ax):
                return f.typ.coords.coords(t, v, OPS)[ax]

            frags.append(("coord", e.frag, ax))
            return IntV(coordfn, False)
        raise AnalysisError(f"integer expression {type(e).__name__}")

    def combine(self, op, a: IntV, b: IntV) -> IntV:
        fa, fb = a.fn, b.fn
        npf = None
        if a.np_fn is not None and b.np_fn is not None and op in NP_BIN:
            npop = NP_BIN[op]

            def npf(t, a=a, b=b):
                return npop(np.asarray(a.np_fn(t), dtype=np.int64), np.asarray(b.np_fn(t), dtype=np.int64))

        lin = None
        if op == "+":
            lin = lin_add(a.lin, b.lin)
        elif op == "-":
            lin = lin_add(a.lin, b.lin, -1)
        elif op == "*":
            lin = lin_mul(a.lin, b.lin)
        ca, cb = _const_of(a), _const_of(b)
        if ca is not None and cb is not None:
            from argus_verify.frontend.build import fold

            r = fold(op, ca, cb)
            if r is not None:
                return V.const_int(r)
        return IntV(
            lambda S, ctx, inst, t, v=None: z_bin(op, fa(S, ctx, inst, t, v), fb(S, ctx, inst, t, v)),
            a.uniform and b.uniform,
            a.loopdeps | b.loopdeps,
            npf,
            lin,
            a.heads | b.heads,
            a.inexact | b.inexact,
        )

    def named_int(self, iv: IntV, name: str) -> IntV:
        """Memoise a Let's value per session (it may be used in many places)."""
        ivid = iv.id
        loopdeps = sorted(iv.loopdeps)

        def fn(S, ctx, inst, t, v=None):
            key = (
                "int",
                ivid,
                ctx.key if ctx is not None else (),
                tuple(inst.cnt[x].get_id() for x in loopdeps if x in inst.cnt) if inst is not None else (),
                t.get_id() if (t is not None and not iv.uniform) else None,
            )
            hit = S.memo.get(key)
            if hit is None:
                hit = iv.fn(S, ctx, inst, t, v)
                S.memo[key] = hit
            return hit

        return IntV(fn, iv.uniform, iv.loopdeps, iv.np_fn, iv.lin, iv.heads, iv.inexact)

    # ------------------------------------------------------------------------------------------
    # the walk

    def walk(self, body, env, levels, loops, conds, bid):
        self.blocks[bid] = list(body)
        for idx, s in enumerate(body):
            lv = levels + ((bid, idx, s),)
            node = P.Node(s, len(self.nodes), lv, loops, conds, self.blocks)
            self.nodes.append(node)
            self.stmt(s, node, env, lv, loops, conds)

    def loopvars(self, loops):
        return tuple(L.var for L in loops)

    def stmt(self, s, node, env, lv, loops, conds):
        if isinstance(s, ir.Let):
            e = s.value
            if (
                isinstance(e, ir.IBin)
                and e.op in ("+", "-")
                and isinstance(e.a, ir.IVar)
                and e.a.name == s.name
            ):
                d = self.cint(e.b, env)
                self.incr[s.name, node.loops[-1].var if node.loops else None] = (
                    d if e.op == "+" else self.combine("-", V.const_int(0), d),
                    len(node.levels),
                )
            env[s.name] = self.named_int(self.cint(s.value, env), s.name)
        elif isinstance(s, ir.Assign):
            env[s.name] = self.assign(s, node, env, loops)
        elif isinstance(s, ir.SharedAlloc):
            self.allocs[s.name] = AllocInfo(s, node)
            self.sh_writes.setdefault(s.name, [])
            self.sh_reads.setdefault(s.name, [])
        elif isinstance(s, ir.Store):
            self.store(s, node, env)
        elif isinstance(s, ir.CopyAsync):
            self.copy_async(s, node, env)
        elif isinstance(s, ir.Commit):
            self.commit_nodes.append(node)
        elif isinstance(s, ir.Wait):
            self.waits.append(node)
        elif isinstance(s, ir.Barrier):
            self.barriers.append(node)
        elif isinstance(s, ir.For):
            self.walk_for(s, node, env, lv, loops, conds)
        elif isinstance(s, ir.If):
            self.walk_if(s, node, env, lv, loops, conds)
        elif isinstance(s, ir.Assert):
            frags: list = []
            cond = self.cint(s.cond, env, frags)
            sides = None
            if isinstance(s.cond, ir.IBin) and s.cond.op in ir.COMPARE_OPS:
                sides = (
                    self.cint(s.cond.a, env, []),
                    self.cint(s.cond.b, env, []),
                    s.cond.op,
                    src_text(s.cond.a.span),
                    src_text(s.cond.b.span),
                )
            self.asserts.append((node, s, cond, frags, {f: env[f] for f in s.frags}, sides))
            # assume after assert: where the assertion fails, later uses of these fragments are
            # already wrong (err), so a bug is reported at the assertion, not again downstream
            names = list(dict.fromkeys(f for _, f, _ in frags))
            for f in names:
                env[f] = self.assumed(env[f], cond, node, frags, {g: env[g] for g in names})
        else:
            raise AnalysisError(f"statement {type(s).__name__}")

    def assumed(self, f: FragV, cond: IntV, node, frags, fragenv) -> FragV:
        """`f` after `assert cond`: elements for which the assertion fails are marked err."""

        def fn(S, ctx, inst, t, v, f=f):
            x = f.tag(S, ctx, inst, t, v)
            tags = {g: h.tag(S, ctx, inst, t, v) for g, h in fragenv.items()}
            present = Z.And(*[tags[g].present(k) for kind, g, k in frags if kind == "tag"])
            prior = Z.Or(*[tg.err for tg in tags.values()])
            fails = Z.And(
                node.guard(S, ctx, inst, t), present, Z.Not(prior), Z.Not(Z.i2b(cond.fn(S, ctx, inst, t, v)))
            )
            return x.replace(err=Z.Or(x.err, fails))

        return FragV(f.name, f.typ, fn, f.label, f.heads | cond.heads, f.loopdeps)

    def compile_view(self, view: ir.View, env) -> View:
        items = []
        for it in view.index:
            if isinstance(it, ir.Slice):
                items.append(("slice", self.cint(it.start, env), it.extent))
            else:
                items.append(("index", self.cint(it.index, env), 1))
        return View(view, items)

    def frag_label(self, name, span) -> str:
        if not name.startswith("_t"):
            return name
        text = src_text(span)
        return f"({text})" if text else name

    # ---- loops -----------------------------------------------------------------------------
    def walk_for(self, s: ir.For, node, env, lv, loops, conds):
        start, stop = self.cint(s.start, env), self.cint(s.stop, env)
        body_bid = self.new_block()
        L = P.LoopInfo(s, start, stop, len(loops), body_bid)
        L.nlev = len(lv)
        self.loops_by_stmt[id(s)] = L
        assigned = assigned_names(s.body)
        carried = [n for n in assigned if n in env and isinstance(env[n], (IntV, FragV))]
        benv = dict(env)
        var = s.var
        benv[var] = IntV(
            lambda S, ctx, inst, t, v=None: inst.vals[var],
            True,
            frozenset({var}),
            lin=({("loop", var): 1}, 0),
        )
        cells = {}
        for n in carried:
            pre = env[n]
            cell = Cell(n, pre, L, isinstance(pre, FragV))
            cells[n] = cell
            self.cells.append(cell)
            if cell.is_frag:
                benv[n] = FragV(
                    n,
                    pre.typ,
                    lambda S, ctx, inst, t, v, c=cell: c.fn(S, ctx, inst, t, v),
                    pre.label,
                    frozenset({cell.id}),
                    pre.loopdeps | {var},
                    cfn=lambda S, ctx, inst, c, cell=cell: cell.cfn(S, ctx, inst, c),
                    cfn_ok=lambda cell=cell: cell.cfn_ok,
                )
            else:
                benv[n] = IntV(
                    lambda S, ctx, inst, t, v=None, c=cell: c.fn(S, ctx, inst, t, v),
                    pre.uniform,
                    pre.loopdeps | {var},
                    None,
                    None,
                    frozenset({cell.id}),
                )
            cell.proxy = benv[n]
            self.proxies[id(benv[n])] = cell
        inner_loops = loops + (L,)
        self.walk(s.body, benv, lv, inner_loops, conds, body_bid)
        post = {n: benv[n] for n in assigned if n in benv}
        for n, cell in cells.items():
            if cell.is_frag and post[n].typ.coords != cell.pre.typ.coords:
                raise AnalysisError(
                    f"'{n}' is reassigned in the loop at line {s.span.line} with a different thread-value "
                    "layout than before the loop; the verifier needs one layout per loop-carried fragment"
                )
        if cells:
            end = P.Node(s, -1, lv + ((body_bid, len(s.body), None),), inner_loops, conds, self.blocks)
            self.pending_loops.append((L, cells, post, end))
        for n in assigned:
            if n not in post:
                continue
            env[n] = self.after_loop(L, post[n], env.get(n))

    def after_loop(self, L, post, pre):
        """The value of a variable assigned in loop L, after the loop: its value at the last
        iteration, or its value before the loop when the loop runs zero times."""

        def last(S, ctx, inst):
            base = V.Inst(
                inst.node if inst is not None else None,
                inst.cnt if inst else {},
                inst.vals if inst else {},
                TRUE,
            )
            start, trips = L.bounds(S, ctx, base)
            n = Z.sub(trips, bv(1))
            base.cnt[L.var] = n
            base.vals[L.var] = Z.add(start, Z.mul(n, bv(L.step)))
            return base, Z.Lt(bv(0), trips)

        if isinstance(post, FragV):
            undefined = (
                f"'{post.name}' is defined only inside the loop at line {L.stmt.span.line}, "
                "which may run zero times"
            )

            def ffn(S, ctx, inst, t, v, post=post, pre=pre):
                inst2, ran = last(S, ctx, inst)
                a = post.tag(S, ctx, inst2, t, v)
                if pre is None:  # after a loop that did not run the value is undefined: any tag
                    return V.ite(ran, a, self.havoc_tag(S, post.label, undefined))
                return V.ite(ran, a, pre.tag(S, ctx, inst, t, v))

            cfn = cfn_ok = None
            if post.cfn is not None and (
                pre is None or (pre.cfn is not None and pre.typ.coords == post.typ.coords)
            ):

                def cfn(S, ctx, inst, c, post=post, pre=pre):
                    inst2, ran = last(S, ctx, inst)
                    a = post.cfn(S, ctx, inst2, c)
                    if pre is None:
                        return V.ite(ran, a, self.havoc_tag(S, post.label, undefined))
                    return V.ite(ran, a, pre.cfn(S, ctx, inst, c))

                def cfn_ok(post=post, pre=pre):
                    return post.has_cfn() and (pre is None or pre.has_cfn())

            return FragV(
                post.name,
                post.typ,
                ffn,
                post.label,
                post.heads,
                (post.loopdeps | (pre.loopdeps if pre else frozenset())) - {L.var},
                cfn,
                cfn_ok,
            )

        def ifn(S, ctx, inst, t, v=None, post=post, pre=pre):
            inst2, ran = last(S, ctx, inst)
            a = post.fn(S, ctx, inst2, t, v)
            if pre is None:
                if Z.is_true(ran):
                    return a
                S.notes.add(f"integer '{L.var}'-loop value used after a loop that may run zero times")
                return Z.Ite(ran, a, S.var("undefined"))
            return Z.Ite(ran, a, pre.fn(S, ctx, inst, t, v))

        uniform = post.uniform and (pre.uniform if pre is not None else True)
        return IntV(
            ifn,
            uniform,
            (post.loopdeps | (pre.loopdeps if pre else frozenset())) - {L.var},
            heads=post.heads | (pre.heads if pre else frozenset()),
        )

    def resolve_carried(self, L, cells, post, end_node):
        try:
            self._resolve_carried(L, cells, post, end_node)
        finally:
            self.decide_cfn(cells, post)

    def _resolve_carried(self, L, cells, post, end_node):
        ids = {c.id for c in cells.values()}
        todo = []
        for n, cell in cells.items():
            p = post[n]
            if not (p.heads & ids):
                self.set_shift(cell, p)
            else:
                todo.append(cell)
        # `x = new if c else x` (a value refreshed under a condition, e.g. a register prefetch):
        # the unrolled recurrence is exact where c holds, no invariant to look for
        rest = []
        for c in todo:
            pt = self.passthrough.get(id(post[c.name]))
            if pt is not None and pt[0] is c and not (pt[1].heads & ids):
                self.set_unroll(c, post[c.name], L)
            else:
                rest.append(c)
        todo = rest
        if not todo:
            return
        # 1. invariant from the pre-loop value
        for c in todo:
            c.mode, c.fn = "pre", self.pre_fn(c)
            c.target = c.fn
            self.set_cfn(c, post[c.name], L, "pre")
        bad = self.invariant_check(L, todo, post, end_node)
        if not bad:
            return
        # 2. invariant from the value after the first iteration
        for c in todo:
            self.set_first(c, post[c.name], L)
        bad = self.invariant_check(L, todo, post, end_node)
        if not bad:
            return
        # 3. what fails: integers may be affine induction variables; otherwise unroll the loop
        #    recurrence head(kt) = pre if kt is the first iteration else body(kt - 1) exactly, a few
        #    iterations deep, and widen beyond that depth
        for c in bad:
            if not c.is_frag and self.try_affine(c, post[c.name], L, end_node):
                continue
            self.set_unroll(c, post[c.name], L)
        rest = [c for c in todo if c not in bad]
        if rest and self.invariant_check(L, rest, post, end_node):
            for c in rest:
                self.set_unroll(c, post[c.name], L)

    UNROLL = 2

    def set_unroll(self, cell, p, L):
        pre = cell.pre
        cell.mode = "unroll"
        reason = (
            f"loop-carried '{cell.name}' (line {L.stmt.span.line}) is followed {self.UNROLL} "
            "iterations back; older values are unknown"
        )
        cell.reason = reason
        self.notes.append(reason)
        self.set_cfn(cell, p, L, "unroll")

        def fn(S, ctx, inst, t, v=None):
            n = inst.cnt[L.var]
            first = Z.Eq(n, bv(0))
            if Z.is_true(first):
                return pre.tag(S, ctx, inst, t, v) if cell.is_frag else pre.fn(S, ctx, inst, t, v)
            depth = S.udepth.get(cell.id, 0)
            if depth >= self.UNROLL:
                if cell.is_frag:
                    older = self.havoc_tag(S, cell.name, reason)
                else:
                    S.notes.add(reason)
                    older = S.var(f"havoc.{cell.name}")
            else:
                S.udepth[cell.id] = depth + 1
                try:
                    prev = self.shifted_inst(S, ctx, inst, L, Z.sub(n, bv(1)))
                    older = p.tag(S, ctx, prev, t, v) if cell.is_frag else p.fn(S, ctx, prev, t, v)
                finally:
                    S.udepth[cell.id] = depth
            if cell.is_frag:
                return V.ite(first, pre.tag(S, ctx, inst, t, v), older)
            return Z.Ite(first, pre.fn(S, ctx, inst, t, v), older)

        cell.fn = fn

    def pre_fn(self, c):
        pre = c.pre
        if c.is_frag:
            return lambda S, ctx, inst, t, v: pre.tag(S, ctx, inst, t, v)
        return pre.fn

    def set_cfn(self, cell, p, L, how):
        """The coordinate form of a loop-carried fragment for the chosen mode (see FragV.cfn)."""
        if not cell.is_frag:
            return
        pre = cell.pre
        if how == "pre":
            cell.cfn = lambda S, ctx, inst, c: pre.cfn(S, ctx, inst, c)
            return
        if how == "havoc":
            cell.cfn = lambda S, ctx, inst, c: self.havoc_tag(S, cell.name, cell.reason)
            return

        def cfn(S, ctx, inst, c):
            n = inst.cnt[L.var]
            first = Z.Eq(n, bv(0))
            if Z.is_true(first):
                return pre.cfn(S, ctx, inst, c)
            if how == "first":
                return V.ite(
                    first,
                    pre.cfn(S, ctx, inst, c),
                    p.cfn(S, ctx, self.shifted_inst(S, ctx, inst, L, bv(0)), c),
                )
            key = ("cfn", cell.id)
            depth = S.udepth.get(key, 0)
            if how == "unroll" and depth >= self.UNROLL:
                older = self.havoc_tag(S, cell.name, cell.reason)
            else:
                S.udepth[key] = depth + 1
                try:
                    older = p.cfn(S, ctx, self.shifted_inst(S, ctx, inst, L, Z.sub(n, bv(1))), c)
                finally:
                    S.udepth[key] = depth
            return V.ite(first, pre.cfn(S, ctx, inst, c), older)

        cell.cfn = cfn

    def decide_cfn(self, cells, post):
        """Which loop-carried fragments keep the coordinate form: the greatest fixpoint of
        'the pre-loop value and the body's value both have it'."""
        frag_cells = [c for c in cells.values() if c.is_frag]
        for c in frag_cells:
            c.cfn_ok = c.cfn is not None
        changed = True
        while changed:
            changed = False
            for c in frag_cells:
                if not c.cfn_ok:
                    continue
                ok = c.mode == "havoc" or (c.pre.has_cfn() and (c.mode == "pre" or post[c.name].has_cfn()))
                if not ok:
                    c.cfn_ok = False
                    changed = True

    def set_shift(self, cell, p):
        """Iteration n sees the head value `pre` at n = 0, and the body-end value `p` of
        iteration n - 1 after that."""
        L = cell.loop
        cell.mode = "shift"
        self.set_cfn(cell, p, L, "shift")
        cell.fn = self._first_or(cell, p, L, lambda n: Z.sub(n, bv(1)))

    def set_first(self, cell, p, L):
        """Iteration n sees `pre` at n = 0 and the body-end value of iteration 0 after that."""
        cell.mode = "first"
        self.set_cfn(cell, p, L, "first")
        cell.fn = self._first_or(cell, p, L, lambda n: bv(0))
        get = _getter(cell)

        def target(S, ctx, inst, t, v=None):
            return get(p, S, ctx, self.shifted_inst(S, ctx, inst, L, bv(0)), t, v)

        cell.target = target

    def _first_or(self, cell, p, L, other):
        """A carried value: `cell.pre` in the loop's first iteration, else `p` at the iteration
        `other(n)` (tags for fragments, integers for scalars)."""
        pre = cell.pre
        get = _getter(cell)
        ite = V.ite if cell.is_frag else Z.Ite

        def fn(S, ctx, inst, t, v=None):
            n = inst.cnt[L.var]
            first = Z.Eq(n, bv(0))
            if Z.is_true(first):
                return get(pre, S, ctx, inst, t, v)
            at = self.shifted_inst(S, ctx, inst, L, other(n))
            return ite(first, get(pre, S, ctx, inst, t, v), get(p, S, ctx, at, t, v))

        return fn

    def shifted_inst(self, S, ctx, inst, L, n):
        out = V.Inst(inst.node, inst.cnt, inst.vals, inst.cons)
        start, _ = L.bounds(S, ctx, inst)
        out.cnt[L.var] = n
        out.vals[L.var] = Z.add(start, Z.mul(n, bv(L.step)))
        return out

    def try_affine(self, cell, p, L, end_node) -> bool:
        """`x = x + d` as the only update of x, directly in the loop body, with d independent of
        the loop and of carried values: x = pre + d * counter at the head of each iteration."""
        inc = self.incr.get((cell.name, L.var))
        if inc is None:
            return False
        d, depth = inc
        if depth != L.nlev + 1 or d.heads or L.var in d.loopdeps:
            return False
        if (
            sum(
                1
                for st in ir.walk_stmts(L.stmt.body)
                if isinstance(st, (ir.Let, ir.Assign)) and st.name == cell.name
            )
            != 1
        ):
            return False
        pre = cell.pre
        cell.mode = "affine"

        def fn(S, ctx, inst, t, v=None):
            return Z.add(pre.fn(S, ctx, inst, t, v), Z.mul(inst.cnt[L.var], d.fn(S, ctx, inst, t, v)))

        cell.fn = fn
        # affine form for coverage: counter = (var - start) / step
        start = _const_of(L.start)
        if L.step == 1 and start is not None and pre.lin is not None and d.lin is not None and not d.lin[0]:
            cnt = ({("loop", L.var): 1}, -start)
            cell.proxy.lin = lin_add(pre.lin, lin_mul(d.lin, cnt))
        return True

    def invariant_check(self, L, cells, post, end_node) -> list:
        """The cells whose body-end value may differ from the head hypothesis of the next iteration."""
        from argus_verify.smt.query import solve

        bad = []
        for c in cells:

            def build(q, c=c):
                S = q.S
                ctx = self.new_ctx(S)
                inst = P.new_inst(S, ctx, end_node, "i")
                t = S.var("t")
                q.add(ctx.cons, inst.cons, t >= 0, t < self.T)
                p = post[c.name]
                if c.is_frag:
                    v = S.var("v")
                    q.add(v >= 0, v < p.typ.values)
                    a = p.tag(S, ctx, inst, t, v)
                    b = c.target(S, ctx, inst, t, v)
                    q.add(a.cons, b.cons, Z.Not(V.tags_equal(a, b)))
                else:
                    q.add(Z.Ne(p.fn(S, ctx, inst, t), c.target(S, ctx, inst, t)))

            res, _, _ = solve(self, self.timeout_s, build, validate=False, minimize=False)
            self.invariant_queries.append((c.name, L.stmt.span.line, c.mode, res.status))
            if res.status != "proved":
                bad.append(c)
        return bad

    # ---- branches --------------------------------------------------------------------------
    def walk_if(self, s: ir.If, node, env, lv, loops, conds):
        cond = self.cint(s.cond, env)
        then_bid = self.new_block()
        else_bid = self.new_block()
        tenv = dict(env)
        self.walk(s.then, tenv, lv, loops, conds + ((cond, True),), then_bid)
        eenv = dict(env)
        self.walk(s.orelse, eenv, lv, loops, conds + ((cond, False),), else_bid)
        names = assigned_names(s.then) | assigned_names(s.orelse)
        for n in names:
            a = tenv.get(n)
            b = eenv.get(n)
            if a is None or b is None or a is b:
                env[n] = a if a is not None else b
                continue
            for keep, other in ((a, b), (b, a)):
                if id(keep) in self.proxies:
                    self.passthrough_next = (self.proxies[id(keep)], other)
            if isinstance(a, FragV) and a.typ.coords != b.typ.coords:
                raise AnalysisError(
                    f"'{n}' gets different thread-value layouts in the branches of the if at line "
                    f"{s.span.line}"
                )
            env[n] = self.ite_value(cond, a, b)
            pt = getattr(self, "passthrough_next", None)
            if pt is not None:
                self.passthrough[id(env[n])] = pt
                self.passthrough_next = None

    def ite_value(self, cond: IntV, a, b):
        if isinstance(a, FragV):

            def ffn(S, ctx, inst, t, v, a=a, b=b):
                c = Z.i2b(cond.fn(S, ctx, inst, t))
                return V.ite(c, a.tag(S, ctx, inst, t, v), b.tag(S, ctx, inst, t, v))

            cfn = cfn_ok = None
            if cond.uniform and a.cfn is not None and b.cfn is not None and a.typ.coords == b.typ.coords:

                def cfn(S, ctx, inst, c, a=a, b=b):
                    cnd = Z.i2b(cond.fn(S, ctx, inst, None))
                    return V.ite(cnd, a.cfn(S, ctx, inst, c), b.cfn(S, ctx, inst, c))

                def cfn_ok(a=a, b=b):
                    return a.has_cfn() and b.has_cfn()

            return FragV(
                a.name,
                a.typ,
                ffn,
                a.label,
                a.heads | b.heads | cond.heads,
                a.loopdeps | b.loopdeps | cond.loopdeps,
                cfn,
                cfn_ok,
            )

        def ifn(S, ctx, inst, t, v=None, a=a, b=b):
            return Z.Ite(Z.i2b(cond.fn(S, ctx, inst, t)), a.fn(S, ctx, inst, t, v), b.fn(S, ctx, inst, t, v))

        return IntV(
            ifn,
            cond.uniform and a.uniform and b.uniform,
            cond.loopdeps | a.loopdeps | b.loopdeps,
            heads=cond.heads | a.heads | b.heads,
        )

    # ---- memory statements -----------------------------------------------------------------
    def store(self, s: ir.Store, node, env):
        frag = env[s.value]
        view = self.compile_view(s.dst, env)
        where = self.cint(s.where, env) if s.where is not None else None
        typ = frag.typ
        if s.dst.space == "shared":
            alloc = self.allocs[s.dst.base]
            self.sh_writes[alloc.name].append(
                ShWrite(
                    self,
                    "store",
                    node,
                    alloc,
                    view,
                    typ.coords,
                    typ.values,
                    where,
                    frag=frag,
                    label=frag.label,
                )
            )
            return
        acc = GAccess("store", node, s.dst.base, view, typ.coords, typ.values, s.mask, where, typ.dtype)
        self.g_accesses.append(acc)
        if self.tensors[s.dst.base].output:
            self.out_stores.append((acc, frag))

    def copy_async(self, s: ir.CopyAsync, node, env):
        dst = self.compile_view(s.dst, env)
        src = self.compile_view(s.src, env)
        alloc = self.allocs[s.dst.base]
        w = ShWrite(
            self,
            "async",
            node,
            alloc,
            dst,
            s.tv,
            s.tv.values,
            None,
            src=src,
            src_tensor=s.src.base,
            label=f"{s.src.base}",
        )
        w.vec = s.vec
        self.sh_writes[alloc.name].append(w)
        self.g_accesses.append(
            GAccess(
                "copy_async",
                node,
                s.src.base,
                src,
                s.tv,
                s.tv.values,
                s.mask,
                None,
                self.tensors[s.src.base].dtype,
            )
        )

    # ---- fragments -------------------------------------------------------------------------
    def assign(self, s: ir.Assign, node, env, loops) -> FragV:
        op = s.op
        typ = s.type
        label = self.frag_label(s.name, s.span)
        ld = frozenset(self.loopvars(loops))
        if isinstance(op, (ir.Load, ir.Ldmatrix)):
            if op.src.space == "global":
                return self.load_global(s, node, env, label, ld)
            return self.load_shared(s, node, env, label, ld)
        if isinstance(op, ir.Full):
            K = self.K
            name = "zeros" if op.value == 0 else "full"

            def fn(S, ctx, inst, t, v):
                src = Tr(None, None, None, f"constant {op.value:g}")
                return V.untagged(K, Tr(src, name, s.span, label + "[value {}] of thread {}", (v, t)))

            def cfn(S, ctx, inst, c):
                return V.untagged(K, Tr(None, None, None, f"constant {op.value:g}"))

            return FragV(s.name, typ, fn, label, loopdeps=ld, cfn=cfn)
        if isinstance(op, ir.Elementwise):
            return self.elementwise(s, node, env, label, ld)
        if isinstance(op, (ir.Cast, ir.Relabel)):
            a = env[op.arg]
            opname = (
                "cast"
                if isinstance(op, ir.Cast)
                else ("transpose" if isinstance(typ.coords, ir.Transposed) else "reshape")
            )

            def fn(S, ctx, inst, t, v, a=a):
                x = a.tag(S, ctx, inst, t, v)
                return x.replace(trace=Tr(x.trace, opname, s.span, label + "[value {}] of thread {}", (v, t)))

            cfn = None
            if a.cfn is not None and opname in ("cast", "transpose"):

                def cfn(S, ctx, inst, c, a=a, flip=opname == "transpose"):
                    x = a.cfn(S, ctx, inst, tuple(reversed(c)) if flip else c)
                    return x.replace(
                        trace=Tr(x.trace, opname, s.span, label + "[" + ", ".join(["{}"] * len(c)) + "]", c)
                    )

            return FragV(s.name, typ, fn, label, a.heads, ld, cfn, a.has_cfn)
        if isinstance(op, ir.Reduce):
            return self.reduce(s, node, env, label, ld)
        if isinstance(op, ir.Shuffle):
            return self.shuffle(s, node, env, label, ld)
        if isinstance(op, ir.Mma):
            return self.mma(s, node, env, label, ld)
        raise AnalysisError(f"operation {type(op).__name__}")

    def load_global(self, s, node, env, label, ld) -> FragV:
        op = s.op
        view = self.compile_view(op.src, env)
        tensor = op.src.base
        coords = s.type.coords
        rank = len(view.items)
        self.g_accesses.append(
            GAccess(
                "load", node, tensor, view, coords, s.type.values, op.mask, None, self.tensors[tensor].dtype
            )
        )

        def fn(S, ctx, inst, t, v):
            c = coords.coords(t, v, OPS)
            e = view.elem(S, ctx, inst, t, c)
            tg = self.input_tag(tensor, e, S)
            err = FALSE if op.mask else Z.Not(self.in_tensor(tensor, e, S))
            src = Tr(None, None, None, self.elem_label(tensor, rank), e)
            return tg.replace(
                err=err, trace=Tr(src, "load", s.span, label + "[value {}] of thread {}", (v, t))
            )

        cfn = None
        if view.uniform:

            def cfn(S, ctx, inst, c):
                e = view.elem(S, ctx, inst, None, c)
                tg = self.input_tag(tensor, e, S)
                err = FALSE if op.mask else Z.Not(self.in_tensor(tensor, e, S))
                src = Tr(None, None, None, self.elem_label(tensor, rank), e)
                return tg.replace(
                    err=err, trace=Tr(src, "load", s.span, label + "[" + ", ".join(["{}"] * len(c)) + "]", c)
                )

        return FragV(s.name, s.type, fn, label, loopdeps=ld, cfn=cfn)

    def load_shared(self, s, node, env, label, ld) -> FragV:
        op = s.op
        view = self.compile_view(op.src, env)
        alloc = self.allocs[op.src.base]
        coords = s.type.coords
        opname = "ldmatrix" if isinstance(op, ir.Ldmatrix) else "load"
        rd = ShRead(node, alloc, view, coords, s.type.values, label, opname)
        rd.name = s.name
        self.sh_reads[alloc.name].append(rd)

        def fn(S, ctx, inst, t, v):
            c = coords.coords(t, v, OPS)
            e = view.elem(S, ctx, inst, t, c)
            r_inst = V.Inst(
                node,
                {L.var: inst.cnt[L.var] for L in node.loops},
                {L.var: inst.vals[L.var] for L in node.loops},
            )
            tg = self.resolve(S, ctx, rd, r_inst, t, e)
            return tg.replace(trace=Tr(tg.trace, opname, s.span, label + "[value {}] of thread {}", (v, t)))

        return FragV(s.name, s.type, fn, label, loopdeps=ld)

    def havoc_tag(self, S, name, reason) -> TagVal:
        """Any tag at all (an over-approximation), tainted: a violation that needs it is unknown."""
        none = S.bool("havoc.none")
        comps = [(S.var("havoc.val"), S.bool("havoc.star")) for _ in range(self.K)]
        return TagVal(
            none,
            comps,
            FALSE,
            TRUE,
            Tr(None, None, None, f"{name} (unknown: widened)"),
            frozenset({reason}),
            TRUE,
        )

    def resolve(self, S, ctx, rd: ShRead, r_inst, t, e) -> TagVal:
        """The tag of shared element e read by thread t at r_inst: that of the last write."""
        S.depth = getattr(S, "depth", 0) + 1
        try:
            if S.depth > MAX_DEPTH:
                reason = (
                    "data flows through shared memory around a loop more deeply than the encoding follows"
                )
                return self.havoc_tag(S, rd.label, reason)
            alloc = rd.alloc
            off = alloc.offset(e)
            options = []
            events = []
            for W in self.sh_writes[alloc.name]:
                if W.fast and rd.alloc.injective:
                    w_inst = P.new_inst(S, ctx, W.node, "w")
                    valid = Z.And(
                        w_inst.cons,
                        W.executes_uniform(S, ctx, w_inst),
                        W.covers(S, ctx, w_inst, e),
                        P.before(w_inst, r_inst),
                        self.alive(S, ctx, W, w_inst, r_inst, e),
                    )
                    c = W.tile_coord(S, ctx, w_inst, e)
                    mine = W.holds(S, t, c)
                    if W.kind == "store":
                        ok = Z.Or(mine, self.barrier_between(S, ctx, w_inst, r_inst))
                    else:
                        ok = Z.And(
                            self.retired(S, ctx, w_inst, r_inst),
                            Z.Or(mine, self.visible_after_wait(S, ctx, w_inst, r_inst)),
                        )
                    tg = W.tag_at(S, ctx, w_inst, c)
                    where = self.iter_label(W.node, w_inst)
                    tr = Tr(
                        tg.trace,
                        W.op,
                        W.node.span,
                        self.elem_label(alloc.name, len(e)) + where,
                        tuple(e) + self.iter_terms(W.node, w_inst),
                    )
                    options.append((valid, tg.replace(err=Z.Or(tg.err, Z.Not(ok)), trace=tr)))
                    events.append((W, w_inst, None, None, valid, ok))
                    continue
                w_inst = P.new_inst(S, ctx, W.node, "w")
                tw, vw = S.var("tw"), S.var("vw")
                we, woff, winshape = W.addr(S, ctx, w_inst, tw, vw)
                valid = Z.And(
                    w_inst.cons,
                    tw >= 0,
                    tw < self.T,
                    vw >= 0,
                    vw < W.values,
                    Z.Eq(woff, off),
                    winshape,
                    W.executes(S, ctx, w_inst, tw),
                    P.before(w_inst, r_inst),
                    self.alive(S, ctx, W, w_inst, r_inst, e),
                )
                ok = self.completed_visible(S, ctx, W, w_inst, tw, r_inst, t)
                tg = W.tag(S, ctx, w_inst, tw, vw)
                where = self.iter_label(W.node, w_inst)
                tr = Tr(
                    tg.trace,
                    W.op,
                    W.node.span,
                    self.elem_label(alloc.name, len(e)) + where,
                    tuple(e) + self.iter_terms(W.node, w_inst),
                )
                options.append((valid, tg.replace(err=Z.Or(tg.err, Z.Not(ok)), trace=tr)))
                events.append((W, w_inst, tw, vw, valid, ok))
            sel = S.var("sel")
            out = V.select(sel, options, self.K)
            S.memo.setdefault("__reads__", []).append((rd, ctx, r_inst, t, e, sel, events))
            return out
        finally:
            S.depth -= 1

    def iter_label(self, node, inst) -> str:
        if not node.loops:
            return ""
        return " (written at " + ", ".join(f"{L.var}={{}}" for L in node.loops) + ")"

    def iter_terms(self, node, inst) -> tuple:
        return tuple(inst.vals[L.var] for L in node.loops)

    def alive(self, S, ctx, W, w_inst, r_inst, e):
        """W@w_inst is not overwritten at coordinate e before r_inst (by writes with footprints)."""
        if not W.alloc.injective:
            return TRUE
        parts = []
        D = self.window
        for K in self.sh_writes[W.alloc.name]:
            if K.footprint() is None:
                continue
            cands = P.recent_before(S, ctx, K.node, r_inst, D) + P.next_after(S, ctx, K.node, w_inst, D)
            for k_inst, ex in cands:
                hit = Z.And(
                    ex,
                    K.executes_uniform(S, ctx, k_inst),
                    P.before(w_inst, k_inst),
                    P.before(k_inst, r_inst),
                    K.covers(S, ctx, k_inst, e),
                )
                parts.append(Z.Not(hit))
        return Z.And(*parts)

    # ---- synchronisation -----------------------------------------------------------------
    def definite_barriers(self):
        # a barrier under a thread-dependent condition is a barrier-divergence violation of its
        # own; for ordering, the condition is taken for thread 0 (see Node.guard)
        return list(self.barriers)

    def barrier_between(self, S, ctx, x_inst, y_inst):
        """A barrier executes after x_inst and before y_inst (under-approximation)."""
        parts = []
        for b in self.definite_barriers():
            for b_inst, ex in P.recent_before(S, ctx, b, y_inst, 1):
                parts.append(Z.And(ex, b.guard(S, ctx, b_inst, None), P.before(x_inst, b_inst)))
        return Z.Or(*parts)

    def group_of(self, S, ctx, inst):
        return self.commits.before(S, ctx, inst)

    def retired(self, S, ctx, x_inst, y_inst):
        """The async copy x_inst was retired by a wait executed before y_inst."""
        if not self.commits.exact:
            S.notes.add(f"async-copy groups cannot be counted exactly ({self.commits.reason})")
            return FALSE
        g = self.group_of(S, ctx, x_inst)
        parts = []
        for w in self.waits:
            if not w.uniform_guard:
                continue
            for w_inst, ex in P.recent_before(S, ctx, w, y_inst, 1):
                parts.append(
                    Z.And(
                        ex,
                        w.guard(S, ctx, w_inst, None),
                        P.before(x_inst, w_inst),
                        Z.Lt(g, Z.sub(self.group_of(S, ctx, w_inst), bv(w.stmt.pending))),
                    )
                )
        return Z.Or(*parts)

    def visible_after_wait(self, S, ctx, x_inst, y_inst):
        """The async copy x_inst was retired by a wait, then a barrier, before y_inst."""
        if not self.commits.exact:
            S.notes.add(f"async-copy groups cannot be counted exactly ({self.commits.reason})")
            return FALSE
        g = self.group_of(S, ctx, x_inst)
        parts = []
        for b in self.definite_barriers():
            for b_inst, exb in P.recent_before(S, ctx, b, y_inst, 1):
                for w in self.waits:
                    if not w.uniform_guard:
                        continue
                    for w_inst, exw in P.recent_before(S, ctx, w, b_inst, 1):
                        parts.append(
                            Z.And(
                                exb,
                                b.guard(S, ctx, b_inst, None),
                                exw,
                                w.guard(S, ctx, w_inst, None),
                                P.before(x_inst, w_inst),
                                Z.Lt(g, Z.sub(self.group_of(S, ctx, w_inst), bv(w.stmt.pending))),
                            )
                        )
        return Z.Or(*parts)

    def completed_visible(self, S, ctx, W, w_inst, tw, r_inst, t):
        if W.kind == "store":
            return Z.Or(Z.Eq(tw, t), self.barrier_between(S, ctx, w_inst, r_inst))
        return Z.And(
            self.retired(S, ctx, w_inst, r_inst),
            Z.Or(Z.Eq(tw, t), self.visible_after_wait(S, ctx, w_inst, r_inst)),
        )

    # ---- compute ---------------------------------------------------------------------------
    def check_warp_holders(self, node, A, B, ctype):
        """Tensor-core mma: every product's operands must be held in the warp of its c element
        (else the product cannot be formed and the mma check would be vacuous)."""
        ca, cb, cc = A.typ.coords.coord_table(), B.typ.coords.coord_table(), ctype.coords.coord_table()
        Kt = A.typ.tile[1]
        for w in range(self.T // 32):
            lanes = slice(32 * w, 32 * w + 32)
            ka, kb = {}, {}
            for i, k in ca[lanes].reshape(-1, 2).tolist():
                ka.setdefault(i, set()).add(k)
            for k, j in cb[lanes].reshape(-1, 2).tolist():
                kb.setdefault(j, set()).add(k)
            rows = {i for i, ks in ka.items() if len(ks & set(range(Kt))) == Kt}
            cols = {j for j, ks in kb.items() if len(ks & set(range(Kt))) == Kt}
            for i, j in cc[lanes].reshape(-1, 2).tolist():
                if i not in rows or j not in cols:
                    what = f"row {i} of a" if i not in rows else f"column {j} of b"
                    raise AnalysisError(
                        f"mma at line {node.span.line}: warp {w} holds c[{i}, {j}] but not all of {what}: "
                        "the operands are not the atom's fragments"
                    )

    def elementwise(self, s, node, env, label, ld) -> FragV:
        op = s.op
        frags = {a: env[a] for a in op.args if isinstance(a, str)}
        names = [a for a in op.args if isinstance(a, str)]
        K = self.K
        opname = {"+": "+", "-": "-", "*": "*", "/": "/"}.get(op.op, op.op)
        if op.op == "+" and len(op.args) == 2 and isinstance(op.args[1], ir.FConst) and op.args[1].value == 0:
            opname = "copy"  # `b = a`: the front end renames through a + 0.0

        def tags(S, ctx, inst, t, v):
            return [(frags[n].label, frags[n].tag(S, ctx, inst, t, v)) for n in names]

        def fn(S, ctx, inst, t, v):
            ts = tags(S, ctx, inst, t, v)
            if not ts:
                return V.untagged(K, Tr(None, opname, s.span, label))
            res = ts[0][1]
            ok = TRUE
            for _, x in ts[1:]:
                ok = Z.And(ok, V.agree(res, x))
                res = V.merge(res, x)
            prim = next((x for _, x in ts if not Z.is_true(x.none)), ts[0][1])
            return res.replace(
                err=Z.Or(res.err, Z.Not(ok)),
                trace=Tr(prim.trace, opname, s.span, label + "[value {}] of thread {}", (v, t)),
            )

        if len(names) >= 2:

            def check(S, ctx, inst, t, v):
                ts = tags(S, ctx, inst, t, v)
                bad, cons = [], []
                for i in range(len(ts)):
                    cons.append(ts[i][1].cons)
                    for j in range(i + 1, len(ts)):
                        x, y = ts[i][1], ts[j][1]
                        bad.append(Z.And(Z.Not(x.err), Z.Not(y.err), Z.Not(V.agree(x, y))))
                return {"bad": Z.Or(*bad), "cons": Z.And(*cons), "tags": ts}

            self.checks.append(
                Check("elementwise", node, check, s.type, f"operands of {label} must carry agreeing tags")
            )
        heads = frozenset().union(*[f.heads for f in frags.values()]) if frags else frozenset()
        cfn = None
        if names and all(frags[n].cfn is not None and frags[n].typ.coords == s.type.coords for n in names):
            cfn_ok = lambda: all(frags[n].has_cfn() for n in names)  # noqa: E731

            def cfn(S, ctx, inst, c):
                ts = [frags[n].cfn(S, ctx, inst, c) for n in names]
                res = ts[0]
                ok = TRUE
                for x in ts[1:]:
                    ok = Z.And(ok, V.agree(res, x))
                    res = V.merge(res, x)
                prim = next((x for x in ts if not Z.is_true(x.none)), ts[0])
                return res.replace(
                    err=Z.Or(res.err, Z.Not(ok)),
                    trace=Tr(prim.trace, opname, s.span, label + "[" + ", ".join(["{}"] * len(c)) + "]", c),
                )

        return FragV(s.name, s.type, fn, label, heads, ld, cfn, cfn_ok if cfn is not None else None)

    def reduce(self, s, node, env, label, ld) -> FragV:
        op = s.op
        a = env[op.arg]
        axis = op.axis
        low = (op.lanes & -op.lanes) if op.scope == "warp" else 0
        opname = f"reduce_{op.op}"

        def star(x: TagVal) -> TagVal:
            comps = list(x.comps)
            if axis < len(comps):
                comps[axis] = (comps[axis][0], TRUE)
            return x.replace(comps=comps)

        def fn(S, ctx, inst, t, v):
            x = a.tag(S, ctx, inst, t, v)
            err = x.err
            if low:
                y = a.tag(S, ctx, inst, Z.xor(t, bv(low)), v)
                err = Z.Or(err, Z.Not(V.agree(x, y, skip={axis})))
            return star(x).replace(
                err=err, trace=Tr(x.trace, opname, s.span, label + "[value {}] of thread {}", (v, t))
            )

        src_coords = a.typ.coords
        V_in = a.typ.values

        def check(S, ctx, inst, t, v):
            x = a.tag(S, ctx, inst, t, v)
            # a partner: a value of lane t ^ m (m = 0 for a thread-scope reduction) in the group that
            # is combined with value v: same coordinates as (t ^ m, v) on every axis but `axis`
            v2 = S.var("v2")
            if op.scope == "warp":
                m = Z.set_range(S.var("m"), 0, 31)
                lane_ok = Z.And(m >= 0, m < 32, Z.Eq(Z.band(m, bv(~op.lanes & 31)), bv(0)))
            else:
                m, lane_ok = bv(0), TRUE
            t2 = Z.xor(t, m)
            c1 = src_coords.coords(t2, v, OPS)
            c2 = src_coords.coords(t2, v2, OPS)
            same_group = Z.And(
                v2 >= 0,
                v2 < V_in,
                *[Z.Eq(p, q) for k, (p, q) in enumerate(zip(c1, c2, strict=True)) if k != axis],
            )
            z = a.tag(S, ctx, inst, t2, v2)
            partner_ok = Z.And(same_group, lane_ok)
            live = Z.And(partner_ok, Z.Not(x.err), Z.Not(z.err))
            return {
                "bad": Z.And(
                    live, Z.Or(Z.Not(V.agree(x, z, skip={axis})), Z.Not(V.same_pattern(x, z, skip={axis})))
                ),
                "approx": Z.And(V.agree(x, z, skip={axis}), Z.Not(V.same_pattern(x, z, skip={axis}))),
                "cons": Z.And(x.cons, z.cons, partner_ok),
                "tags": [(a.label, x), (f"{a.label} (partner)", z)],
                "extra": {"partner_thread": t2, "partner_value": v2},
            }

        self.checks.append(
            Check(
                "reduce",
                node,
                check,
                a.typ,
                f"the elements {opname} combines must agree on every tag component but {axis}",
            )
        )
        return FragV(s.name, s.type, fn, label, a.heads, ld)

    def shuffle(self, s, node, env, label, ld) -> FragV:
        op = s.op
        a = env[op.arg]
        lane_arg = self.cint(op.lane_arg, env)

        def src_of(S, ctx, inst, t):
            lane = Z.band(t, bv(31))
            base = Z.sub(t, lane)
            arg = lane_arg.fn(S, ctx, inst, t)
            if op.mode == "xor":
                return Z.add(base, Z.band(Z.xor(lane, arg), bv(31)))
            if op.mode == "idx":
                return Z.add(base, Z.band(arg, bv(31)))
            if op.mode == "up":
                return Z.Ite(Z.Le(bv(0), Z.sub(lane, arg)), Z.sub(t, arg), t)
            return Z.Ite(Z.Lt(Z.add(lane, arg), bv(32)), Z.add(t, arg), t)

        def fn(S, ctx, inst, t, v):
            src = src_of(S, ctx, inst, t)
            x = a.tag(S, ctx, inst, src, v)
            return x.replace(
                trace=Tr(x.trace, f"shfl_{op.mode}", s.span, label + "[value {}] of thread {}", (v, t))
            )

        return FragV(s.name, s.type, fn, label, a.heads | lane_arg.heads, ld)

    def mma(self, s, node, env, label, ld) -> FragV:
        op = s.op
        A, B, C = env[op.a], env[op.b], env[op.c]
        Kt = A.typ.tile[1]
        K = self.K
        warp_level = op.atom != "fma"
        if warp_level:
            self.check_warp_holders(node, A, B, s.type)

        def holder(S, ctx, inst, t, frag, want, tag):
            """A (thread, value) of `frag` holding tile coordinate `want` (aux variables)."""
            th = t
            cons = []
            if warp_level:
                th = S.var(f"{tag}.t")
                cons.append(Z.Eq(Z.shr(th, bv(5)), Z.shr(t, bv(5))))
                cons += [th >= 0, th < self.T]
            vv = S.var(f"{tag}.v")
            c = frag.typ.coords.coords(th, vv, OPS)
            cons += [vv >= 0, vv < frag.typ.values] + [Z.Eq(x, y) for x, y in zip(c, want, strict=True)]
            x = frag.tag(S, ctx, inst, th, vv)
            return x.replace(cons=Z.And(x.cons, *cons)), th, vv

        def product(S, ctx, inst, t, v, k):
            i, j = s.type.coords.coords(t, v, OPS)
            ta, tha, va = holder(S, ctx, inst, t, A, (i, k), "a")
            tb, thb, vb = holder(S, ctx, inst, t, B, (k, j), "b")
            a0, sa0 = ta.comp(0)
            a1, sa1 = ta.comp(1)
            b0, sb0 = tb.comp(0)
            b1, sb1 = tb.comp(1)
            comps = [(a0, Z.Or(ta.none, sa0)), (b1, Z.Or(tb.none, sb1))] + [(bv(0), TRUE)] * (K - 2)
            prod = TagVal(
                Z.And(ta.none, tb.none),
                comps[:K],
                Z.Or(ta.err, tb.err),
                Z.And(ta.cons, tb.cons),
                ta.trace,
                ta.inexact | tb.inexact,
                Z.Or(ta.taint, tb.taint),
            )
            kagree = Z.Or(ta.none, tb.none, sa1, sb0, Z.Eq(a1, b0))
            return prod, kagree, ta, tb

        def fn(S, ctx, inst, t, v):
            c = C.tag(S, ctx, inst, t, v)
            prod, kagree, ta, tb = product(S, ctx, inst, t, v, bv(0))
            ok = Z.And(kagree, V.agree(prod, c))
            res = V.merge(c, prod)
            return res.replace(
                err=Z.Or(res.err, Z.Not(ok)),
                trace=Tr(ta.trace, "mma", s.span, label + "[value {}] of thread {}", (v, t)),
            )

        def check(S, ctx, inst, t, v, part):
            """One of four sub-queries (smaller formulas solve much faster than their conjunction):
            k-agreement of a product, rows of a constant along k, columns of b constant along k,
            products agreeing with the accumulator."""
            k1 = S.var("k")
            dom = [k1 >= 0, k1 < Kt]
            i, j = s.type.coords.coords(t, v, OPS)
            if part == "k":
                p1, ag1, ta, tb = product(S, ctx, inst, t, v, k1)
                bad = Z.And(Z.Not(p1.err), Z.Not(ag1))
                return {
                    "bad": bad,
                    "cons": Z.And(p1.cons, *dom),
                    "tags": [(A.label, ta), (B.label, tb)],
                    "extra": {"k": k1},
                }
            if part in ("rows", "cols"):
                k2 = S.var("k2")
                dom += [k2 >= 0, k2 < Kt]
                frag, comp = (A, 0) if part == "rows" else (B, 1)
                want1 = (i, k1) if part == "rows" else (k1, j)
                want2 = (i, k2) if part == "rows" else (k2, j)
                x, _, _ = holder(S, ctx, inst, t, frag, want1, "x")
                y, _, _ = holder(S, ctx, inst, t, frag, want2, "y")
                (vx, sx), (vy, sy) = x.comp(comp), y.comp(comp)
                live = Z.And(Z.Not(x.err), Z.Not(y.err))
                agree_c = Z.Or(x.none, y.none, sx, sy, Z.Eq(vx, vy))
                pattern = Z.And(Z.Eq(Z.b2i(x.none), Z.b2i(y.none)), Z.Or(x.none, Z.Eq(Z.b2i(sx), Z.b2i(sy))))
                return {
                    "bad": Z.And(live, Z.Not(Z.And(agree_c, pattern))),
                    "approx": Z.And(agree_c, Z.Not(pattern)),
                    "cons": Z.And(x.cons, y.cons, *dom),
                    "tags": [(f"{frag.label} (k = k1)", x), (f"{frag.label} (k = k2)", y)],
                    "extra": {"k": k1, "k2": k2},
                }
            c = C.tag(S, ctx, inst, t, v)
            p1, _, ta, tb = product(S, ctx, inst, t, v, k1)
            bad = Z.And(Z.Not(p1.err), Z.Not(c.err), Z.Not(V.agree(p1, c)))
            return {
                "bad": bad,
                "cons": Z.And(c.cons, p1.cons, *dom),
                "tags": [(A.label, ta), (B.label, tb), (C.label, c)],
                "extra": {"k": k1},
            }

        check.parts = ("k", "rows", "cols", "acc")
        self.checks.append(
            Check(
                "mma",
                node,
                check,
                s.type,
                f"mma: tag({op.a})[1] == tag({op.b})[0] for every product, and the result "
                f"(tag({op.a})[0], tag({op.b})[1]) agrees with tag({op.c})",
            )
        )
        return FragV(s.name, s.type, fn, label, A.heads | B.heads | C.heads, ld)


def assigned_names(body) -> set:
    out = set()
    for s in body:
        if isinstance(s, (ir.Let, ir.Assign)):
            out.add(s.name)
        elif isinstance(s, ir.For):
            out |= assigned_names(s.body)
        elif isinstance(s, ir.If):
            out |= assigned_names(s.then) | assigned_names(s.orelse)
    return out
