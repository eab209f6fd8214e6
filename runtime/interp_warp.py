"""The interpreter's warp family: shuffles, and the warp collectives' meeting point.

A scheduling unit that holds whole warps computes a collective at once. A narrower unit (lanes
drifting apart under independent thread scheduling) stops at it until every unit of its warp has
arrived; the scheduler then computes it over the warp (runtime/schedules.py)."""

from __future__ import annotations

import functools

import numpy as np

from argus_verify import ir, semantics
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
        return self.across_lanes(s, loop, (env[op.arg], arg), functools.partial(shuffle, op.mode, warp_start))

    def across_lanes(self, s: ir.Assign, loop, payload: tuple, compute):
        """`compute(*payload)` over whole warps: now when this unit holds them, else a request the
        scheduler answers once the warp's other units have reached this statement too."""
        if self.count % 32 == 0 or self.count == self.launch.threads:
            return compute(*payload)
        return WarpSync(s, tuple(loop.items()), payload, compute)
