"""Warp: shuffles and reductions (a tree over a thread's values, then a butterfly over lanes).

Shuffle modes and their clamps are `argus_verify.semantics.SHUFFLE_MODES`; a reduction combines
with the binary operator `semantics.REDUCE_OPS[op].binary`, lowered by `lowering.compute.arith`.
A mixin of `argus_verify.lowering.ptx.Lowerer`.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from argus_verify import ir, semantics
from argus_verify.lowering.compute import arith
from argus_verify.lowering.emitter import LoweringError, Reg
from argus_verify.lowering.values import REG_KIND, check_dtype, compute_dtype
from argus_verify.lowering.vectorise import ravel

LANE_BITS = 5  # log2 of the warp size


class WarpLowering:
    def visit_Shuffle(self, op: ir.Shuffle, s: ir.Assign) -> tuple:
        em = self.em
        src = self.frag(op.arg)
        if REG_KIND[src.type.dtype] not in ("b32", "f32"):
            raise LoweringError(f"shuffles of {src.type.dtype} are not supported yet", s.span)
        lane = self.ival(op.lane_arg)
        lane_op = lane if isinstance(lane, int) else em.mat(lane)
        mode = semantics.SHUFFLE_MODES[op.mode]
        out, cache = [], {}
        for r in src.regs:
            if r not in cache:
                d = em.reg(r.kind)
                em.emit(f"shfl.sync.{mode.ptx}.b32 {d}, {r}, {lane_op}, {mode.clamp}, -1;")
                cache[r] = d
            out.append(cache[r])
        return tuple(out)

    def visit_Reduce(self, op: ir.Reduce, s: ir.Assign) -> tuple:
        src = self.frag(op.arg)
        dt = check_dtype(src.type.dtype, s.span)
        cd = compute_dtype(dt)
        groups, partials = self._thread_reduce(op, s, src, dt, cd)
        if op.scope == "warp":
            self._butterfly(op, cd, partials, s.span)
        out = [partials[g] for g in groups]
        converted: dict = {}
        for r in out:
            if r not in converted:
                converted[r] = self.from_compute(r, dt)
        return tuple(converted[r] for r in out)

    def _thread_reduce(self, op: ir.Reduce, s: ir.Assign, src, dt: str, cd: str) -> tuple[list, dict]:
        """Each group of a thread's values (those that agree on every axis but the reduced one),
        reduced over its distinct elements (copies of one element count once). Returns each value's
        group and each group's register."""
        V = src.type.values
        groups = uniform_partition(frag_flat(s.type), s.span, "reduce: the grouping of a thread's values")
        dups = uniform_partition(frag_flat(src.type), s.span, "reduce: which values are copies of one element")
        first_of: dict = {}
        for v in range(V):
            first_of.setdefault(dups[v], v)
        members = defaultdict(list)
        for v in range(V):
            members[groups[v]].append(v)
        partials = {}
        for g, vs in members.items():
            distinct = sorted({first_of[dups[v]] for v in vs})
            regs = [self.to_compute(src.regs[v], dt) for v in distinct]
            partials[g] = self._tree(op.op, cd, regs, s.span)
        return groups, partials

    def _butterfly(self, op: ir.Reduce, cd: str, partials: dict, span) -> None:
        """One exchange with lane ^ (1 << b) and combine per set bit b of `lanes`, per group."""
        for bit in range(LANE_BITS):
            if not op.lanes >> bit & 1:
                continue
            for g in sorted(partials):
                x = partials[g]
                partials[g] = self._combine(op.op, cd, x, self._exchange(x, cd, 1 << bit), span)

    def _exchange(self, x: Reg, cd: str, mask: int) -> Reg:
        """The value `x` of lane ^ mask (an f64 travels as two 32-bit halves)."""
        em = self.em
        xor = semantics.SHUFFLE_MODES["xor"]

        def shuffle(d, a):
            em.emit(f"shfl.sync.{xor.ptx}.b32 {d}, {a}, {mask}, {xor.clamp}, -1;")

        if cd != "f64":
            t = em.reg(REG_KIND[cd])
            shuffle(t, x)
            return t
        lo, hi, t = em.reg("b32"), em.reg("b32"), em.reg("f64")
        em.emit(f"mov.b64 {{{lo}, {hi}}}, {x};")
        shuffle(lo, lo)
        shuffle(hi, hi)
        em.emit(f"mov.b64 {t}, {{{lo}, {hi}}};")
        return t

    def _combine(self, op: str, cd: str, a, b, span) -> Reg:
        d = self.em.reg(REG_KIND[cd])
        for line in arith(semantics.REDUCE_OPS[op].binary, cd, d, [a, b], span):
            self.em.emit(line)
        return d

    def _tree(self, op: str, cd: str, regs: list, span) -> Reg:
        while len(regs) > 1:
            nxt = [self._combine(op, cd, regs[i], regs[i + 1], span) for i in range(0, len(regs) - 1, 2)]
            if len(regs) % 2:
                nxt.append(regs[-1])
            regs = nxt
        return regs[0]


def frag_flat(typ: ir.FragType) -> np.ndarray:
    """Row-major flat tile index of every (thread, value) of a fragment type."""
    return ravel(typ.coords.coord_table(), typ.tile)


def uniform_partition(flat: np.ndarray, span, what: str) -> list:
    """Label each value by the first value of its thread with the same key; the labelling must be
    the same for every thread (one instruction sequence serves them all)."""
    T, V = flat.shape
    labels = None
    for t in range(T):
        first: dict = {}
        lab = [first.setdefault(int(flat[t, v]), v) for v in range(V)]
        if labels is None:
            labels = lab
        elif lab != labels:
            raise LoweringError(f"{what} differs between threads 0 and {t}; the PTX lowering needs it "
                                "to be the same for every thread", span)
    return labels or []
