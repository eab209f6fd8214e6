"""Which elements of a fragment are used: tag obligations only for values that reach an output.

An implicit tag assertion (operands of an elementwise operation, a reduction or an mma agree) is
raised only for the (thread, value) elements whose value can reach a store (global or shared), an
assertion or a loop-carried value. A shfl_down tree followed by a broadcast from each row's first
lane computes, in its upper lanes, maxima that mix two rows; those lanes' values are discarded
(no later operation reads them), so they are no bug.

The demand of every fragment is a boolean table over (thread, value), computed after the walk,
backwards from the sinks:

    sink                     store (under the thread-only part of its conditions and where=),
                             assertion, loop-carried value (pre-loop, body-end and head values):
                             every element it names (all of them when its conditions depend on
                             more than the thread)
    elementwise, cast,       the same (t, v) of each operand
    relabel, if-merge,
    after-loop, assume
    shuffle                  the source lane's (t, v) (the lane rule of semantics.SHUFFLE_MODES
                             over every thread); every element when the lane depends on more than
                             the thread
    reduce                   every value of the threads of the combined group (t ^ m, m within
                             `lanes`) of a demanded thread
    mma                      every value of the thread (fma) or of the warp (tensor-core atoms)

The tables over-approximate what is used (a superset is always sound: more elements are checked).
A fragment that no registered operation reads has an empty demand. Every handler that builds a
`FragV` from other fragments registers its reads here (`Analysis.flow`); tests/test_demand.py
checks the handlers.
"""

from __future__ import annotations

import numpy as np

from argus_verify import semantics
from argus_verify.smt import zops as Z
from argus_verify.smt.records import boxes_of
from argus_verify.smt.zops import TRUE, bv

MAX_BOXES = 64  # a demand mask with more boxes than this is not encoded (every element is checked)


class Demand:
    """The flows between fragments and the sinks, then the demand of each fragment."""

    def __init__(self, T: int):
        self.T = T
        self.flows: list = []  # (result FragV, operand FragV, how)
        self.sinks: list = []  # (FragV, mask [T, V] bool | None for every element)
        self.table: dict = {}  # FragV id -> [T, V] bool
        self.done = False

    def flow(self, res, op, how="same"):
        self.flows.append((res, op, how))

    def sink(self, frag, mask=None):
        self.sinks.append((frag, mask))

    def _get(self, f):
        t = self.table.get(f.id)
        if t is None:
            t = np.zeros((self.T, f.typ.values), dtype=bool)
            self.table[f.id] = t
        return t

    def compute(self):
        for f, mask in self.sinks:
            d = self._get(f)
            d |= True if mask is None else np.broadcast_to(mask, d.shape)
        by_res: dict = {}
        for res, op, how in self.flows:
            by_res.setdefault(res.id, []).append((res, op, how))
        # results are created after their operands: newest first is a topological order
        for rid in sorted(by_res, reverse=True):
            for res, op, how in by_res[rid]:
                self._propagate(self._get(res), res, op, how)
        self.done = True

    def _propagate(self, dres, res, op, how):
        dop = self._get(op)
        T = self.T
        if not dres.any():
            return
        if how == "same":
            if dop.shape == dres.shape:
                dop |= dres
            else:
                dop |= dres.any(axis=1)[:, None]
            return
        if how == "thread":
            dop |= dres.any(axis=1)[:, None]
            return
        if how == "warp":
            w = dres.any(axis=1).reshape(-1, 32).any(axis=1)
            dop |= np.repeat(w, 32)[:, None]
            return
        kind = how[0]
        if kind == "shfl":
            _, mode, lane = how
            t = np.arange(T, dtype=np.int64)
            if lane.np_fn is None:
                dop |= True
                return
            arg = np.broadcast_to(np.asarray(lane.np_fn(t), dtype=np.int64), t.shape)
            src = semantics.shuffle_source_thread(mode, t, arg)
            for tt in np.nonzero(dres.any(axis=1))[0]:
                dop[int(src[tt])] |= dres[tt]
            return
        if kind == "reduce":
            _, lanes = how
            used = dres.any(axis=1)
            out = used.copy()
            ms = [m for m in range(32) if m & ~lanes & 31 == 0]
            for t in np.nonzero(used)[0]:
                for m in ms:
                    out[int(t) ^ m] = True
            dop |= out[:, None]
            return
        raise ValueError(how)

    def of(self, f):
        """The demand table of fragment f (every element if the demand was not computed)."""
        if not self.done:
            return np.ones((self.T, f.typ.values), dtype=bool)
        return self.table.get(f.id, np.zeros((self.T, f.typ.values), dtype=bool))


def demanded(mask, t, v):
    """`mask[t, v]` as a formula over the terms t, v (TRUE for a full mask or one that takes more
    than MAX_BOXES boxes: every element is then checked)."""
    if mask is None or mask.all():
        return TRUE
    T, V = mask.shape
    # by lane when every warp demands the same lanes (the usual shape of shuffle trees)
    if T % 32 == 0 and (mask.reshape(-1, 32, V) == mask[:32][None]).all():
        pts = {(int(a), int(b)) for a, b in zip(*np.nonzero(mask[:32]), strict=True)}
        boxes = boxes_of(pts)
        key = Z.band(t, bv(31))
    else:
        pts = {(int(a), int(b)) for a, b in zip(*np.nonzero(mask), strict=True)}
        boxes = boxes_of(pts)
        key = t
    if not boxes:
        return Z.FALSE
    if len(boxes) > MAX_BOXES:
        return TRUE
    parts = []
    for lo, hi in boxes:
        parts.append(Z.And(Z.Le(bv(lo[0]), key), Z.Lt(key, bv(hi[0])), Z.Le(bv(lo[1]), v), Z.Lt(v, bv(hi[1]))))
    return Z.Or(*parts)


def check_mask(an, ck):
    """[T, V] the elements of a check's operands whose result is used (None: every element)."""
    if ck.demand is None:
        return None
    how, res, lanes = ck.demand
    d = an.demand.of(res)
    if how == "same":
        return d
    # a reduction: every value of every thread in the combined group of a used result
    used = d.any(axis=1)
    out = used.copy()
    for t in np.nonzero(used)[0]:
        for m in range(32):
            if m & ~lanes & 31 == 0:
                out[int(t) ^ m] = True
    return np.broadcast_to(out[:, None], (an.T, ck.typ.values))
