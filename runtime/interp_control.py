"""The interpreter's control family: integer values, assignments, loops, branches, barriers, and the
integer expressions (operators from argus_verify.semantics).

Statements run as generators: every statement ends in a scheduling point (runtime/schedules.py),
and `barrier()` and warp collectives stop the unit until the others have caught up."""

from __future__ import annotations

import attrs
import numpy as np

from argus_verify import ir, semantics
from argus_verify.diagnostics import ArgusError, ArgusRuntimeError
from argus_verify.runtime.schedules import Arrival, WarpSync


@attrs.frozen
class TraceEvent:
    """One executed fragment assignment, for replaying witnesses."""

    stmt: ir.Assign
    value: np.ndarray  # [G, n, V] for the threads first_thread .. first_thread + n - 1
    blocks: np.ndarray  # [G, 3] block ids of the batch
    loop: dict
    first_thread: int = 0


def merge(old, new, active):
    if old is None or np.ndim(old) == 0 or active.all():
        return np.array(new, copy=True)
    return np.where(active, new, old)


class ControlOps:
    # -- statements ------------------------------------------------------------------------
    def exec_body(self, body, env, active, loop):
        for s in body:
            self.live = active  # the threads executing s: only their divisors must not be zero
            nested = self.visit(s, env, active, loop)
            if nested is not None:  # compound statements and synchronisation points
                yield from nested
            yield s

    def visit_Let(self, s: ir.Let, env, active, loop):
        env[s.name] = merge(env.get(s.name), self.per_thread(self.ieval(s.value, env)), active)

    def visit_Assign(self, s: ir.Assign, env, active, loop):
        value = self.visit(s.op, s, env, active, loop)
        if isinstance(value, WarpSync):
            return self.bind_after(value, s, env, active, loop)
        self.bind(s, value, env, active, loop)

    def bind_after(self, request: WarpSync, s: ir.Assign, env, active, loop):
        value = yield request
        self.bind(s, value, env, active, loop)

    def bind(self, s: ir.Assign, value, env, active, loop):
        env[s.name] = merge(env.get(s.name), value, active[:, :, None])
        if not isinstance(s.op, ir.Wgmma):
            self.wg().unfenced.add(s.name)  # ordinary register writes: wgmma_fence orders them
        if self.launch.trace is not None:
            self.launch.trace(TraceEvent(s, env[s.name], self.batch.blocks, dict(loop), self.first_thread))

    def visit_Barrier(self, s: ir.Barrier, env, active, loop):
        yield Arrival(s, tuple(loop.items()), active)

    def visit_For(self, s: ir.For, env, active, loop):
        start = self.block_uniform(self.ieval(s.start, env))
        stop = self.block_uniform(self.ieval(s.stop, env))
        # blocks whose starts differ (`range(block_id.x, T, SMS)`) may not share one residue of the step
        step = s.step if (start == start[0]).all() else 1
        for i in range(int(start.min()), int(stop.max()), step):
            on = (i >= start) & (i < stop) & ((i - start) % s.step == 0)
            inner = active & on[:, None]
            if not inner.any():
                continue
            env[s.var] = i
            yield from self.exec_body(s.body, env, inner, {**loop, s.var: i})
        env.pop(s.var, None)

    def block_uniform(self, v) -> np.ndarray:
        """Per block, the value of the unit's first thread (loop bounds are uniform over the block)."""
        return self.per_thread(v, np.int64)[:, 0].copy()

    def visit_If(self, s: ir.If, env, active, loop):
        cond = self.per_thread(self.ieval(s.cond, env)) != 0
        if (active & cond).any():
            yield from self.exec_body(s.then, env, active & cond, loop)
        if s.orelse and (active & ~cond).any():
            yield from self.exec_body(s.orelse, env, active & ~cond, loop)

    def visit_Assert(self, s: ir.Assert, env, active, loop):
        """Tag assertions are proved statically by the verifier; they generate no code."""

    # -- integer expressions ---------------------------------------------------------------
    def ieval(self, e: ir.IExpr, env):
        return self.visit(e, env)

    def visit_IConst(self, e: ir.IConst, env):
        return e.value

    def visit_IVar(self, e: ir.IVar, env):
        for scope in (env, self.launch.sizes, self.launch.scalars):
            if e.name in scope:
                return scope[e.name]
        raise ArgusError(f"no value for '{e.name}' (give it with --shape {e.name}=...)", e.span)

    def visit_ISpecial(self, e: ir.ISpecial, env):
        kind, _, axis = e.which.partition(".")
        if kind == "block_id":
            return self.batch.blocks[:, "xyz".index(axis)][:, None].astype(np.int64)
        if kind == "num_blocks":
            return self.launch.grid["xyz".index(axis)]
        tid = self.tids[None, :]
        return {"thread_id": tid, "warp_id": tid // 32, "lane_id": tid % 32}[e.which]

    def visit_IBin(self, e: ir.IBin, env):
        a, b = int_operand(self.ieval(e.a, env)), int_operand(self.ieval(e.b, env))
        if semantics.INT_OPS[e.op].divides:
            zero = np.asarray(b) == 0
            if zero.any():
                if (zero & self.live).any():
                    raise ArgusRuntimeError("integer division by zero", e.span)
                b = np.where(zero, 1, b)  # threads that do not execute it (masked, or the other select arm)
        return semantics.int_eval(e.op, a, b)

    def visit_IUn(self, e: ir.IUn, env):
        return semantics.INT_UNARY[e.op].ref(np.asarray(self.ieval(e.a, env)))

    def visit_ISelect(self, e: ir.ISelect, env):
        cond = np.asarray(self.ieval(e.cond, env)) != 0
        live = self.live
        try:  # each arm is executed only where it is selected (a division there by zero elsewhere is fine)
            self.live = live & cond
            a = self.ieval(e.a, env)
            self.live = live & ~cond
            b = self.ieval(e.b, env)
        finally:
            self.live = live
        return np.where(cond, a, b)

    def visit_ICall(self, e: ir.ICall, env):
        fn = self.launch.tagfns[e.fn]
        return self.ieval(fn.body, {p: self.ieval(a, env) for p, a in zip(fn.params, e.args, strict=True)})

    def visit_ITag(self, e: ir.ITag, env):
        raise ArgusRuntimeError("tag(...) exists only in assertions; the interpreter does not evaluate it", e.span)

    def visit_ICoord(self, e: ir.ICoord, env):
        raise ArgusRuntimeError("coord(...) exists only in assertions; the interpreter does not evaluate it", e.span)


def int_operand(v):
    """Python ints stay ints (exact); everything else computes in int64, as the GPU's indices."""
    return v if isinstance(v, int) else np.asarray(v, dtype=np.int64)
