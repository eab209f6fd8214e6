"""A numpy interpreter of the Argus IR.

It executes every thread of every block, following the layouts faithfully, so a layout bug gives
a wrong answer here too. It is the backend without a GPU, the oracle for the lowering tests and
the engine that replays the verifier's counterexamples.

Blocks run in batches, vectorised over [blocks, threads, values]. Shared memory follows the
memory model of docs/language.md: it starts as NaN, a store is visible to its own thread at once
and to the others only after `barrier()`, and an async copy lands only when a `wait` retires its
group. A missing barrier or wait therefore reads stale NaN, as it would read garbage on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError, ArgusRuntimeError
from argus_verify.layout import NumpyOps

NP_OPS = NumpyOps()
MAX_BATCH_ELEMS = 1 << 22  # blocks per batch so that [blocks, threads, values] stays ~4M elements


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest even), kept in float32."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    return np.where(np.isnan(x), x, out)


def to_dtype(x, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return round_bf16(np.asarray(x, dtype=np.float32))
    return np.asarray(x).astype(ir.numpy_dtype(dtype), copy=False)


@attrs.define
class SharedState:
    alloc: ir.SharedAlloc
    mem: np.ndarray  # [G, S] committed contents
    pend_val: np.ndarray  # [G, S] written since the last barrier
    pend_writer: np.ndarray  # [G, S] thread that wrote it, -1 for none


@attrs.define
class AsyncCopy:
    shared: str
    rows: np.ndarray  # block-batch index of each element
    offs: np.ndarray
    vals: np.ndarray
    threads: np.ndarray


@attrs.frozen
class TraceEvent:
    """One executed fragment assignment, for replaying witnesses."""

    stmt: ir.Assign
    value: np.ndarray  # [G, T, V]
    blocks: np.ndarray  # [G, 3] block ids of the batch
    loop: dict


class Interpreter:
    def __init__(self, kernel: ir.Kernel, arrays: dict, sizes: dict, scalars: dict,
                 trace: Callable[[TraceEvent], None] | None = None):
        self.k = kernel
        self.arrays = arrays
        self.sizes = sizes
        self.scalars = scalars
        self.trace = trace
        self.T = kernel.block
        self.shapes = {t.name: tuple(int(self.const_eval(d)) for d in t.shape) for t in kernel.tensors}
        self.strides = {n: row_major_strides(s) for n, s in self.shapes.items()}
        self.tagfns = {f.name: f for f in kernel.tagfns}

    # -- setup -----------------------------------------------------------------------------
    def const_eval(self, e: ir.IExpr) -> int:
        v = self.ieval(e, {}, None)
        return int(np.asarray(v).reshape(-1)[0])

    def run(self) -> None:
        grid = tuple(max(0, self.const_eval(g)) for g in self.k.grid)
        total = grid[0] * grid[1] * grid[2]
        if total == 0:
            return
        vmax = max([s.type.values for s in ir.walk_stmts(self.k.body) if isinstance(s, ir.Assign)] + [1])
        batch = max(1, MAX_BATCH_ELEMS // (self.T * vmax))
        linear = np.arange(total)
        ids = np.stack([linear % grid[0], (linear // grid[0]) % grid[1], linear // (grid[0] * grid[1])], 1)
        self.grid = grid
        for start in range(0, total, batch):
            self.run_batch(ids[start:start + batch])

    def run_batch(self, blocks: np.ndarray) -> None:
        self.blocks = blocks
        self.G = len(blocks)
        self.shared: dict[str, SharedState] = {}
        self.inflight: list[AsyncCopy] = []  # issued, not yet committed
        self.groups: list[list[AsyncCopy]] = []  # committed, not yet retired
        env: dict = {}
        active = np.ones((self.G, self.T), dtype=bool)
        self.exec_body(self.k.body, env, active, {})

    # -- statements ------------------------------------------------------------------------
    def exec_body(self, body, env, active, loop):
        for s in body:
            self.exec_stmt(s, env, active, loop)

    def exec_stmt(self, s, env, active, loop):
        if isinstance(s, ir.Let):
            v = np.broadcast_to(np.asarray(self.ieval(s.value, env, loop)), (self.G, self.T))
            env[s.name] = merge(env.get(s.name), v, active)
        elif isinstance(s, ir.Assign):
            v = self.exec_op(s, env, active, loop)
            env[s.name] = merge(env.get(s.name), v, active[:, :, None])
            if self.trace is not None:
                self.trace(TraceEvent(s, env[s.name], self.blocks, dict(loop)))
        elif isinstance(s, ir.SharedAlloc):
            size = s.layout.cosize
            self.shared[s.name] = SharedState(
                s, np.full((self.G, size), np.nan, dtype=ir.numpy_dtype(s.dtype)),
                np.full((self.G, size), np.nan, dtype=ir.numpy_dtype(s.dtype)),
                np.full((self.G, size), -1, dtype=np.int32))
        elif isinstance(s, ir.Store):
            self.exec_store(s, env, active, loop)
        elif isinstance(s, ir.CopyAsync):
            self.exec_copy_async(s, env, active, loop)
        elif isinstance(s, ir.Commit):
            if self.inflight:
                self.groups.append(self.inflight)
            else:
                self.groups.append([])
            self.inflight = []
        elif isinstance(s, ir.Wait):
            keep = s.pending
            retire = self.groups[: max(0, len(self.groups) - keep)]
            self.groups = self.groups[len(retire):]
            for group in retire:
                for c in group:
                    st = self.shared[c.shared]
                    st.pend_val[c.rows, c.offs] = c.vals
                    st.pend_writer[c.rows, c.offs] = c.threads
        elif isinstance(s, ir.Barrier):
            arrived = active.any(axis=1)
            partial = arrived & ~active.all(axis=1)
            if partial.any():
                g = int(np.nonzero(partial)[0][0])
                t = int(np.nonzero(~active[g])[0][0])
                raise ArgusRuntimeError(
                    f"barrier reached by only some threads of block {tuple(self.blocks[g])} "
                    f"(thread {t} does not arrive): the kernel would hang or misbehave", s.span)
            for st in self.shared.values():
                hit = st.pend_writer >= 0
                st.mem[hit] = st.pend_val[hit]
                st.pend_writer[hit] = -1
        elif isinstance(s, ir.For):
            self.exec_for(s, env, active, loop)
        elif isinstance(s, ir.If):
            cond = np.broadcast_to(np.asarray(self.ieval(s.cond, env, loop)) != 0, (self.G, self.T))
            if (active & cond).any():
                self.exec_body(s.then, env, active & cond, loop)
            if s.orelse and (active & ~cond).any():
                self.exec_body(s.orelse, env, active & ~cond, loop)
        elif isinstance(s, ir.Assert):
            pass  # tag assertions are proved statically by smt/, they generate no code
        else:  # pragma: no cover
            raise ArgusRuntimeError(f"interpreter: unsupported statement {type(s).__name__}", s.span)

    def exec_for(self, s: ir.For, env, active, loop):
        start = self.block_uniform(self.ieval(s.start, env, loop))
        stop = self.block_uniform(self.ieval(s.stop, env, loop))
        if start.size == 0:
            return
        lo, hi = int(start.min()), int(stop.max())
        for i in range(lo, hi, s.step):
            on = (i >= start) & (i < stop) & ((i - start) % s.step == 0)
            if not on.any():
                continue
            inner = active & on[:, None]
            if not inner.any():
                continue
            loop2 = dict(loop)
            loop2[s.var] = i
            env[s.var] = i
            self.exec_body(s.body, env, inner, loop2)
        env.pop(s.var, None)

    def block_uniform(self, v) -> np.ndarray:
        a = np.broadcast_to(np.asarray(v, dtype=np.int64), (self.G, self.T))
        return a[:, 0].copy()

    # -- integer expressions ---------------------------------------------------------------
    def ieval(self, e: ir.IExpr, env, loop):
        if isinstance(e, ir.IConst):
            return e.value
        if isinstance(e, ir.IVar):
            if e.name in env:
                return env[e.name]
            if e.name in self.sizes:
                return int(self.sizes[e.name])
            if e.name in self.scalars:
                return self.scalars[e.name]
            raise ArgusError(f"no value for '{e.name}' (give it with --shape {e.name}=...)", e.span)
        if isinstance(e, ir.ISpecial):
            w = e.which
            if w.startswith("block_id."):
                axis = "xyz".index(w[-1])
                return self.blocks[:, axis][:, None].astype(np.int64)
            if w.startswith("num_blocks."):
                return self.grid["xyz".index(w[-1])]
            tid = np.arange(self.T, dtype=np.int64)[None, :]
            return {"thread_id": tid, "warp_id": tid // 32, "lane_id": tid % 32}[w]
        if isinstance(e, ir.IBin):
            return int_binop(e.op, self.ieval(e.a, env, loop), self.ieval(e.b, env, loop))
        if isinstance(e, ir.IUn):
            a = self.ieval(e.a, env, loop)
            return -np.asarray(a) if e.op == "-" else (np.asarray(a) == 0).astype(np.int64)
        if isinstance(e, ir.ISelect):
            c = self.ieval(e.cond, env, loop)
            return np.where(np.asarray(c) != 0, self.ieval(e.a, env, loop), self.ieval(e.b, env, loop))
        if isinstance(e, ir.ICall):
            fn = self.tagfns[e.fn]
            sub = {p: self.ieval(a, env, loop) for p, a in zip(fn.params, e.args, strict=True)}
            return self.ieval(fn.body, sub, loop)
        raise ArgusRuntimeError(f"interpreter: cannot evaluate {type(e).__name__} here", getattr(e, "span", None))

    def fval(self, op, env, loop, dtype):
        if isinstance(op, str):
            return env[op]
        if isinstance(op, ir.FConst):
            return np.asarray(op.value, dtype=ir.numpy_dtype(dtype))
        v = self.ieval(op.expr, env, loop)
        arr = np.asarray(v, dtype=ir.numpy_dtype(dtype))
        return arr[..., None] if arr.ndim == 2 else arr

    # -- addressing ------------------------------------------------------------------------
    def view_coords(self, view: ir.View, tile_coords: np.ndarray, env, loop) -> list:
        """Per base dimension, the coordinate of each (block, thread, value): arrays [G, T, V]."""
        out = []
        axis = 0
        for item in view.index:
            if isinstance(item, ir.Slice):
                start = np.asarray(self.ieval(item.start, env, loop), dtype=np.int64)
                start = np.broadcast_to(start, (self.G, self.T))[:, :, None]
                out.append(start + tile_coords[None, :, :, axis])
                axis += 1
            else:
                idx = np.asarray(self.ieval(item.index, env, loop), dtype=np.int64)
                out.append(np.broadcast_to(idx, (self.G, self.T))[:, :, None] + 0 * tile_coords[None, :, :, 0])
        return [np.broadcast_to(c, (self.G, self.T, tile_coords.shape[1])) for c in out]

    def global_address(self, view, coords, mask_ok: bool, active, stmt, env, loop):
        shape = self.shapes[view.base]
        inb = np.ones(coords[0].shape, dtype=bool)
        for c, extent in zip(coords, shape, strict=True):
            inb &= (c >= 0) & (c < extent)
        live = np.broadcast_to(active[:, :, None], inb.shape)
        if not mask_ok:
            bad = live & ~inb
            if bad.any():
                g, t, v = (int(x[0]) for x in np.nonzero(bad))
                coord = tuple(int(c[g, t, v]) for c in coords)
                raise ArgusRuntimeError(
                    f"out-of-bounds access {view.base}{list(coord)} (shape {list(shape)}) by block "
                    f"{tuple(int(b) for b in self.blocks[g])}, thread {t} (warp {t // 32}, lane {t % 32}), "
                    f"value {v}", stmt.span, note="add mask=True, or fix the tile offsets")
        addr = np.zeros(coords[0].shape, dtype=np.int64)
        for c, stride in zip(coords, self.strides[view.base], strict=True):
            addr += c * stride
        return addr, inb & live

    def shared_offsets(self, view, coords, stmt):
        st = self.shared[view.base]
        off = ir.layout_offset(st.alloc.layout, tuple(coords), NP_OPS)
        off = np.asarray(off, dtype=np.int64)
        size = st.mem.shape[1]
        bad = (off < 0) | (off >= size)
        if bad.any():
            g, t, v = (int(x[0]) for x in np.nonzero(bad))
            raise ArgusRuntimeError(
                f"shared access outside '{view.base}' (offset {int(off[g, t, v])}, size {size}) by "
                f"thread {t}, value {v}", stmt.span)
        return st, off

    # -- fragment operations ---------------------------------------------------------------
    def exec_op(self, s: ir.Assign, env, active, loop) -> np.ndarray:
        op = s.op
        dt = s.type.dtype
        V = s.type.values
        if isinstance(op, ir.Load | ir.Ldmatrix):
            tv = op.tv
            coords = self.view_coords(op.src, tv.coord_table(), env, loop)
            if op.src.space == "global":
                addr, ok = self.global_address(op.src, coords, op.mask, active, s, env, loop)
                flat = self.arrays[op.src.base].reshape(-1)
                vals = np.where(ok, flat[np.where(ok, addr, 0)], getattr(op, "other", 0.0))
                return to_dtype(vals, dt)
            st, off = self.shared_offsets(op.src, coords, s)
            rows = np.arange(self.G)[:, None, None]
            tids = np.arange(self.T)[None, :, None]
            own = st.pend_writer[rows, off] == tids
            return np.where(own, st.pend_val[rows, off], st.mem[rows, off]).astype(ir.numpy_dtype(dt))
        if isinstance(op, ir.Full):
            return np.full((self.G, self.T, V), op.value, dtype=ir.numpy_dtype(dt))
        if isinstance(op, ir.Elementwise):
            args = [self.fval(a, env, loop, dt) for a in op.args]
            with np.errstate(all="ignore"):
                r = elementwise(op.op, args)
            return to_dtype(np.broadcast_to(r, (self.G, self.T, V)), dt)
        if isinstance(op, ir.Cast):
            with np.errstate(all="ignore"):
                return to_dtype(env[op.arg], dt)
        if isinstance(op, ir.Relabel):
            return env[op.arg].copy()
        if isinstance(op, ir.Reduce):
            return self.reduce(op, env[op.arg], s.type)
        if isinstance(op, ir.Shuffle):
            return self.shuffle(op, env[op.arg], env, loop)
        if isinstance(op, ir.Mma):
            return self.mma(s, op, env)
        raise ArgusRuntimeError(f"interpreter: unsupported operation {type(op).__name__}", s.span)

    def reduce(self, op: ir.Reduce, x: np.ndarray, typ: ir.FragType) -> np.ndarray:
        # Values of one thread that share a coordinate of the argument are copies of one element
        # and count once; values whose coordinates differ only on `axis` form a group.
        src = self.frag_type(op.arg)
        src_flat = flat_coords(src)
        first = np.ones(src_flat.shape, dtype=bool)
        for t in range(src_flat.shape[0]):
            _, idx = np.unique(src_flat[t], return_index=True)
            first[t] = False
            first[t, idx] = True
        flat = flat_coords(typ)
        same = (flat[:, :, None] == flat[:, None, :]) & first[:, None, :]  # [T, V, V]
        ident = {"sum": 0.0, "max": -np.inf, "min": np.inf}[op.op]
        fn = {"sum": np.sum, "max": np.max, "min": np.min}[op.op]
        with np.errstate(all="ignore"):
            r = fn(np.where(same[None], x[:, :, None, :], ident), axis=-1).astype(x.dtype)
            lanes = np.arange(self.T)
            for bit in range(5):
                if op.scope == "warp" and op.lanes >> bit & 1:
                    partner = lanes ^ (1 << bit)
                    r = combine(op.op, r, r[:, partner, :])
        return r

    def shuffle(self, op: ir.Shuffle, x, env, loop):
        tid = np.arange(self.T)
        lane = tid % 32
        base = tid - lane
        arg = np.broadcast_to(np.asarray(self.ieval(op.lane_arg, env, loop), dtype=np.int64), (self.G, self.T))
        if op.mode == "xor":
            src = base + ((lane ^ arg) & 31)
        elif op.mode == "idx":
            src = base + (arg & 31)
        elif op.mode == "up":
            src = np.where(lane - arg >= 0, tid - arg, tid)
        else:
            src = np.where(lane + arg < 32, tid + arg, tid)
        return np.take_along_axis(x, np.broadcast_to(src[:, :, None], x.shape), axis=1)

    def mma(self, s, op: ir.Mma, env):
        if op.atom != "fma":
            raise ArgusRuntimeError(f"the interpreter does not run mma atom {op.atom} yet", s.span)
        a, b, c = env[op.a], env[op.b], env[op.c]
        key = (op, s.span)
        cache = self.__dict__.setdefault("_pairings", {})
        if key not in cache:
            cache[key] = ir.fma_pairing(self.frag_type(op.a), self.frag_type(op.b), s.type)
        ia, ib = cache[key]
        t = np.arange(self.T)[:, None, None]
        prod = a[:, t, ia].astype(np.float64) * b[:, t, ib].astype(np.float64)
        # products are exact in f64 and summed in order, then rounded once per k-step is not what
        # hardware does; round each partial sum to the accumulator type to stay faithful to FMA chains
        acc = c.astype(np.float64)
        cdt = ir.numpy_dtype(s.type.dtype)
        for k in range(ia.shape[-1]):
            acc = (acc + prod[..., k]).astype(cdt).astype(np.float64)
        return to_dtype(acc, s.type.dtype)

    # -- memory statements -----------------------------------------------------------------
    def exec_store(self, s: ir.Store, env, active, loop):
        val = env[s.value]
        typ = self.frag_type(s.value)
        live = active
        if s.where is not None:
            live = live & (np.broadcast_to(np.asarray(self.ieval(s.where, env, loop)), (self.G, self.T)) != 0)
        coords = self.view_coords(s.dst, typ.coords.coord_table(), env, loop)
        if s.dst.space == "global":
            addr, ok = self.global_address(s.dst, coords, s.mask, live, s, env, loop)
            flat = self.arrays[s.dst.base].reshape(-1)
            flat[addr[ok]] = val[ok]
            return
        st, off = self.shared_offsets(s.dst, coords, s)
        sel = np.broadcast_to(live[:, :, None], off.shape)
        g, t, v = np.nonzero(sel)
        st.pend_val[g, off[g, t, v]] = val[g, t, v]
        st.pend_writer[g, off[g, t, v]] = t

    def exec_copy_async(self, s: ir.CopyAsync, env, active, loop):
        tile = s.tv.coord_table()
        src = self.view_coords(s.src, tile, env, loop)
        addr, ok = self.global_address(s.src, src, s.mask, active, s, env, loop)
        flat = self.arrays[s.src.base].reshape(-1)
        vals = np.where(ok, flat[np.where(ok, addr, 0)], 0)  # masked elements are zero-filled
        dst = self.view_coords(s.dst, tile, env, loop)
        st, off = self.shared_offsets(s.dst, dst, s)
        sel = np.broadcast_to(active[:, :, None], off.shape)
        g, t, v = np.nonzero(sel)
        self.inflight.append(AsyncCopy(s.dst.base, g, off[g, t, v], vals[g, t, v].astype(st.mem.dtype), t))

    def frag_type(self, name: str) -> ir.FragType:
        types = getattr(self, "_types", None)
        if types is None:
            types = self._types = {a.name: a.type for a in ir.walk_stmts(self.k.body) if isinstance(a, ir.Assign)}
        return types[name]


def flat_coords(typ: ir.FragType) -> np.ndarray:
    """[T, V] row-major flat tile index of each value's coordinate."""
    c = typ.coords.coord_table()
    if not c.shape[-1]:
        return np.zeros(c.shape[:2], dtype=np.int64)
    return np.ravel_multi_index(tuple(np.moveaxis(c, -1, 0)), typ.tile)


def merge(old, new, active):
    if old is None or np.ndim(old) == 0:
        return np.array(new, copy=True)
    if active.all():
        return np.array(new, copy=True)
    return np.where(active, new, old)


def combine(op: str, a, b):
    return {"sum": np.add, "max": np.maximum, "min": np.minimum}[op](a, b)


def elementwise(op: str, args):
    if len(args) == 2:
        a, b = args
        return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
                "max": np.maximum, "min": np.minimum}[op](a, b)
    (a,) = args
    return {"neg": np.negative, "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
            "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "abs": np.abs,
            "recip": lambda x: 1 / x}[op](a)


def int_binop(op: str, a, b):
    a = np.asarray(a, dtype=np.int64) if not isinstance(a, int) else a
    b = np.asarray(b, dtype=np.int64) if not isinstance(b, int) else b
    if op in ("//", "%", "cdiv"):
        zero = np.asarray(b) == 0
        if np.any(zero):
            raise ArgusRuntimeError("integer division by zero")
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "cdiv":
        return -(-a // b)
    if op == "<<":
        return a << b
    if op == ">>":
        return a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    cmp = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
           ">=": np.greater_equal}
    if op in cmp:
        return cmp[op](a, b).astype(np.int64)
    if op == "and":
        return ((np.asarray(a) != 0) & (np.asarray(b) != 0)).astype(np.int64)
    if op == "or":
        return ((np.asarray(a) != 0) | (np.asarray(b) != 0)).astype(np.int64)
    raise ArgusRuntimeError(f"unknown integer operator {op}")


def row_major_strides(shape) -> tuple:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def run(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], sizes: Mapping[str, int],
        scalars: Mapping[str, float] | None = None, trace: Callable[[TraceEvent], None] | None = None,
        poison: bool = True) -> dict[str, np.ndarray]:
    """Run `kernel` on host arrays. Inputs are not modified; returns the outputs (NaN-poisoned
    first, so an element the kernel never writes stays NaN)."""
    sizes = {k: int(v) for k, v in sizes.items()}
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise ArgusError(f"no value for size {missing[0]} (give --shape {missing[0]}=...)", kernel.span)
    for s in kernel.sizes:
        if sizes[s] <= 0:
            raise ArgusError(f"size {s} must be positive, got {sizes[s]}", kernel.span)
    shapes = ir.tensor_shapes(kernel, sizes)
    work = {}
    for t in kernel.tensors:
        want = shapes[t.name]
        if t.output:
            if t.name in arrays:
                arr = np.array(arrays[t.name], dtype=ir.numpy_dtype(t.dtype), copy=True)
            else:
                arr = np.zeros(want, dtype=ir.numpy_dtype(t.dtype))
            if poison and ir.is_float(t.dtype):
                arr[...] = np.nan
        else:
            if t.name not in arrays:
                raise ArgusError(f"no input array for tensor '{t.name}'", t.span)
            arr = to_dtype(np.asarray(arrays[t.name]), t.dtype)
        if tuple(arr.shape) != want:
            raise ArgusError(f"tensor '{t.name}' has shape {list(arr.shape)} but the sizes give {list(want)}",
                             t.span)
        work[t.name] = np.ascontiguousarray(arr)
    for req in kernel.requires:
        ok = Interpreter(kernel, work, sizes, dict(scalars or {})).const_eval(req)
        if not ok:
            raise ArgusError(f"the sizes {fmt_sizes(sizes)} violate a 'requires' precondition", req.span)
    interp = Interpreter(kernel, work, sizes, dict(scalars or {}), trace)
    with np.errstate(invalid="ignore", over="ignore"):
        interp.run()
    return {t.name: work[t.name] for t in kernel.outputs}


def fmt_sizes(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())

