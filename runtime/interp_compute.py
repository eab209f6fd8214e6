"""The interpreter's compute family: constants, elementwise math, casts, relabelling, the SIMT mma
and the thread-scope part of reductions. Operator meaning comes from argus_verify.semantics."""

from __future__ import annotations

import functools

import numpy as np

from argus_verify import atoms, ir, semantics


@functools.lru_cache(maxsize=256)
def fma_pairing(ta: ir.FragType, tb: ir.FragType, tc: ir.FragType) -> tuple[np.ndarray, np.ndarray]:
    return ir.fma_pairing(ta, tb, tc)


@functools.lru_cache(maxsize=256)
def mma_plan(atom: str, ta: ir.FragType, tb: ir.FragType, tc: ir.FragType) -> atoms.MmaPlan:
    return atoms.mma_plan(atom, ta, tb, tc)


@functools.lru_cache(maxsize=256)
def reduction_groups(src: ir.FragType, result: ir.FragType) -> np.ndarray:
    return ir.reduction_groups(src, result)


class ComputeOps:
    def operand(self, op, env, dtype: str):
        if isinstance(op, str):
            return env[op]
        if isinstance(op, ir.FConst):
            return np.asarray(op.value, dtype=ir.numpy_dtype(dtype))
        arr = np.asarray(self.ieval(op.expr, env), dtype=ir.numpy_dtype(dtype))
        return arr[..., None] if arr.ndim == 2 else arr

    def visit_Full(self, op: ir.Full, s: ir.Assign, env, active, loop):
        return np.full((self.G, self.count, s.type.values), op.value, dtype=ir.numpy_dtype(s.type.dtype))

    def visit_Elementwise(self, op: ir.Elementwise, s: ir.Assign, env, active, loop):
        args = [self.operand(a, env, s.type.dtype) for a in op.args]
        table = semantics.FLOAT_BINARY if len(args) == 2 else semantics.FLOAT_UNARY
        with np.errstate(all="ignore"):
            r = table[op.op].ref(*args)
        return semantics.round_to(np.broadcast_to(r, (self.G, self.count, s.type.values)), s.type.dtype)

    def visit_Cast(self, op: ir.Cast, s: ir.Assign, env, active, loop):
        with np.errstate(all="ignore"):
            return semantics.round_to(env[op.arg], s.type.dtype)

    def visit_Relabel(self, op: ir.Relabel, s: ir.Assign, env, active, loop):
        return env[op.arg].copy()

    def visit_Mma(self, op: ir.Mma, s: ir.Assign, env, active, loop):
        a, b, c = env[op.a], env[op.b], env[op.c]
        types = self.launch.frag_types
        if op.atom != "fma":  # mma.sync on whole warps, through the atom's layouts
            plan = mma_plan(op.atom, types[op.a], types[op.b], s.type)
            return self.across_lanes(s, loop, active, (a, b, c), lambda a, b, c: semantics.round_to(
                atoms.run_mma(plan, a, b, c), s.type.dtype))
        ia, ib = (self.threads_of(p) for p in fma_pairing(types[op.a], types[op.b], s.type))
        t = np.arange(self.count)[:, None, None]
        prod = a[:, t, ia].astype(np.float64) * b[:, t, ib].astype(np.float64)
        # each product is exact in f64; rounding every partial sum to the accumulator type follows
        # the GPU's chain of FMAs in k order
        acc = c.astype(np.float64)
        cdt = ir.numpy_dtype(s.type.dtype)
        for k in range(ia.shape[-1]):
            acc = (acc + prod[..., k]).astype(cdt).astype(np.float64)
        return semantics.round_to(acc, s.type.dtype)

    def visit_Reduce(self, op: ir.Reduce, s: ir.Assign, env, active, loop):
        x = env[op.arg]
        groups = self.threads_of(reduction_groups(self.launch.frag_types[op.arg], s.type))
        red = semantics.REDUCE_OPS[op.op]
        with np.errstate(all="ignore"):
            r = red.ref(np.where(groups[None], x[:, :, None, :], red.identity), axis=-1).astype(x.dtype)
        if op.scope == "warp" and op.lanes:
            return self.across_lanes(s, loop, active, (r,), lambda part: butterfly(op.op, op.lanes, part))
        return r


def butterfly(op: str, lanes: int, r: np.ndarray) -> np.ndarray:
    """Combine value v of lane l with value v of lane l ^ (1 << b) for each set bit b of `lanes`
    (shfl.xor steps); `r` holds whole warps on axis 1."""
    local = np.arange(r.shape[1])
    with np.errstate(all="ignore"):
        for bit in range(5):
            if lanes >> bit & 1:
                r = semantics.combine(op, r, r[:, local ^ (1 << bit), :])
    return r
