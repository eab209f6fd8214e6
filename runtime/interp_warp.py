"""The interpreter's warp family: shuffles, and the warp collectives' meeting point.

A scheduling unit that holds whole warps computes a collective at once. A narrower unit (lanes
drifting apart under independent thread scheduling) stops at it until every unit of its warp has
arrived; the scheduler then computes it over the warp (runtime/schedules.py)."""

from __future__ import annotations

import functools

import numpy as np

from argus_verify import ir, semantics
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.runtime.schedules import WarpSync


def shuffle(mode: str, first_thread: int, x: np.ndarray, arg: np.ndarray) -> np.ndarray:
    """Every thread's values read from its source thread; x [G, n, V] and arg [G, n] hold whole
    warps starting at `first_thread`."""
    tid = np.broadcast_to(np.arange(first_thread, first_thread + x.shape[1]), arg.shape)
    src = semantics.shuffle_source_thread(mode, tid, arg) - first_thread
    return np.take_along_axis(x, np.broadcast_to(src[:, :, None], x.shape), axis=1)


class WarpOps:
    def visit_Shuffle(self, op: ir.Shuffle, s: ir.Assign, env, active, loop):
        arg = self.per_thread(self.ieval(op.lane_arg, env), np.int64)
        warp_start = self.first_thread - self.first_thread % 32
        return self.across_lanes(s, loop, active, (env[op.arg], arg), functools.partial(shuffle, op.mode, warp_start))

    def across_lanes(self, s: ir.Assign, loop, active, payload: tuple, compute):
        """`compute(*payload)` over whole warps: now when this unit holds them, else a request the
        scheduler answers once the warp's other units have reached this statement too. Every lane
        of a warp runs the collective or none does (the `.sync.aligned` instructions' rule)."""
        whole_warps(s, active, self.first_thread, self.batch.blocks)
        if self.count % 32 == 0 or self.count == self.launch.threads:
            return compute(*payload)
        return WarpSync(s, tuple(loop.items()), payload, compute)


def whole_warps(s, active: np.ndarray, first_thread: int, blocks: np.ndarray) -> None:
    """`active` [G, n] (threads first_thread ..) holds, for each warp part, all lanes or none."""
    n = active.shape[1]
    for start in range(0, n, 32 if first_thread % 32 == 0 else n):  # (a narrower unit: its own lanes)
        part = active[:, start:start + 32]
        mixed = part.any(axis=1) & ~part.all(axis=1)
        if mixed.any():
            g = int(np.nonzero(mixed)[0][0])
            on = np.nonzero(part[g])[0] + first_thread + start
            off = np.nonzero(~part[g])[0] + first_thread + start
            raise ArgusRuntimeError(
                f"warp collective run by only some lanes of warp {int(on[0]) // 32} in block "
                f"{tuple(int(b) for b in blocks[g])} (thread {int(on[0])} runs it, thread {int(off[0])} does not): "
                "the .sync instruction would hang or misbehave", s.span)
