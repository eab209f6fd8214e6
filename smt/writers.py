"""Which thread of a block executes a write of a given element: the writers of a store.

A store (global or shared) through a view whose starts are affine in block ids, loop variables,
sizes and the thread (`thread_id`, `warp_id`, `lane_id` and integers of the thread alone such as
`thread_id // T`: the "thr" atoms of `IntV.lin`), under `if` conditions and a `where=` that may
mix the thread with sizes, block ids and loop variables (`if base + thread_id < N`).

The element a thread t writes at value v is `U + R(t, v)`: U the part of the view's starts that
does not depend on the thread, R the thread's part plus the tile coordinate, tabulated over every
thread with numpy. For an element at offset r from U:

* the threads that *may* write it (their thread-only conditions hold) are found exhaustively;
* when every such element has the same number m of candidate threads (m <= MAX_HOLDERS), those
  threads are named by m auxiliary variables that the query constrains to be exactly them
  (`holders`), and the conditions that mix the thread with other values are evaluated at them.

This is exact, also under a negation: "no thread writes r" is "none of the m named threads
executes", because the m threads are determined by r. Used by output coverage (`output-once`)
and by uninitialised reads (a shared read that no guarded store wrote).
"""

from __future__ import annotations

import numpy as np

from argus_verify.smt import zops as Z
from argus_verify.smt.ints import thread_atom_lin
from argus_verify.smt.records import boxes_of
from argus_verify.smt.zops import FALSE, OPS, TRUE, bv

MAX_HOLDERS = 4


def _np_atom(atom, t):
    kind, which = atom
    if which == "t":
        return t
    if which == "warp":
        return t >> 5
    if which == "lane":
        return t & 31
    return np.broadcast_to(np.asarray(which.np_fn(t), dtype=np.int64), t.shape)


def _z3_atom(atom, S, ctx, inst, t):
    kind, which = atom
    if which == "t":
        return t
    if which == "warp":
        return Z.shr(t, bv(5))
    if which == "lane":
        return Z.band(t, bv(31))
    return which.fn(S, ctx, inst, t)


def in_box(box, coords):
    lo, hi = box
    return Z.And(*[z for a, b, y in zip(lo, hi, coords, strict=True) for z in (Z.Le(bv(a), y), Z.Lt(y, bv(b)))])


def in_boxes(boxes, coords):
    return Z.Or(*[in_box(b, coords) for b in boxes]) if boxes else FALSE


class Writers:
    """The writers of one store statement (see the module's docstring). Build with `Writers.of`."""

    def __init__(self, an, node, view, coords, values, where):
        self.an, self.node, self.view, self.coords, self.values, self.where = an, node, view, coords, values, where

    @classmethod
    def of(cls, an, node, view, coords, values, where):
        """(Writers, "") or (None, the reason it is beyond the encoding)."""
        w = cls(an, node, view, coords, values, where)
        why = w._build()
        return (None, why) if why else (w, "")

    def _build(self) -> str:
        an = self.an
        T = an.T
        tt = np.arange(T, dtype=np.int64)
        # the starts: uniform affine part and thread part
        self.dims = []
        for d, (kind, iv, ext) in enumerate(self.view.items):
            lin = thread_atom_lin(iv)  # (a start of the thread alone, `r = thread_id // T`, is one atom)
            if lin is None:
                if iv.uniform:
                    self.dims.append((kind, None, {}, ext, iv))
                    continue
                return f"the start of dimension {d} of the store is not affine"
            thr = {a: c for a, c in lin[0].items() if a[0] == "thr"}
            rest = ({a: c for a, c in lin[0].items() if a[0] != "thr"}, lin[1])
            self.dims.append((kind, rest, thr, ext, iv))
        # conditions: uniform, of the thread alone (exhaustive), or mixed (at the holders)
        live = np.ones(T, dtype=bool)
        self.uniform_conds, self.mixed = [], []
        conds = list(self.node.conds)
        if self.where is not None:
            conds.append((self.where, True))
        for c, pos in conds:
            if c.uniform:
                self.uniform_conds.append((c, pos))
            elif c.np_fn is not None:
                x = np.broadcast_to(np.asarray(c.np_fn(tt)) != 0, tt.shape)
                live &= x if pos else ~x
            else:
                self.mixed.append((c, pos))
        # R(t, v): the thread's part of the starts plus its tile coordinates
        threads = self.coords.threads
        if threads < T:
            # a fragment of some warpgroups (warp specialisation): the block's other threads must not
            # execute the store, as their values have no coordinates
            if live[threads:].any():
                return "threads outside the stored fragment's layout may execute the store"
            live = live[:threads]
        self.live = live
        # (only the threads that may execute the store: a tile every thread holds whole, stored by one)
        mine = np.nonzero(live)[0]
        table = self.coords.coord_table(mine)  # [live threads, V, tile rank]
        cols = []
        axis = 0
        for kind, _rest, thr, _ext, _iv in self.dims:
            part = np.zeros(len(mine), dtype=np.int64)
            for a, c in thr.items():
                part = part + c * _np_atom(a, mine)
            col = np.broadcast_to(part[:, None], table.shape[:2]).copy()
            if kind == "slice":
                col = col + table[:, :, axis]
                axis += 1
            cols.append(col)
        R = np.stack(cols, axis=-1).reshape(-1, len(self.dims))  # [live threads x V, rank]
        # the distinct points, and how many distinct threads hold each
        held = np.unique(np.column_stack([R, np.repeat(mine, table.shape[1])]), axis=0)
        pts, holders = np.unique(held[:, :-1], axis=0, return_counts=True)
        self.points = set(map(tuple, pts.tolist()))
        self.boxes = boxes_of(self.points)
        self.m = int(holders.max()) if len(holders) else 0
        if self.mixed and len(holders) and (holders.min() != self.m or self.m > MAX_HOLDERS):
            return "the store's condition mixes the thread with other values and several threads hold an element"
        self.live_boxes = boxes_of({(int(t),) for t in mine})
        if len(pts):
            self.lo, self.hi = pts.min(axis=0), pts.max(axis=0) + 1
        else:
            self.lo = self.hi = np.zeros(len(self.dims), dtype=np.int64)
        return ""

    @property
    def thread_dependent(self) -> bool:
        return bool(self.mixed) or any(thr for _, _, thr, _, _ in self.dims)

    # ---- terms ----------------------------------------------------------------------------
    def uniform_start(self, S, ctx, inst, d):
        """The part of dimension d's start that does not depend on the thread."""
        _kind, rest, _thr, _ext, iv = self.dims[d]
        if rest is None:
            return iv.fn(S, ctx, inst, None)
        total = bv(rest[1])
        for a, c in rest[0].items():
            if a[0] == "size":
                x = self.an.sizes[a[1]]
            elif a[0] == "param":
                x = self.an.params[a[1]]
            elif a[0] == "blk":
                x = ctx.block[a[1]]
            elif a[0] == "loop":
                x = inst.vals[a[1]]
            else:
                raise KeyError(a)
            total = Z.add(total, Z.mul(x, bv(c)))
        return total

    def rel(self, S, ctx, inst, t, v):
        """R(t, v) as terms."""
        c = self.coords.coords(t, v, OPS)
        out = []
        axis = 0
        for kind, _rest, thr, _ext, _iv in self.dims:
            x = bv(0)
            for a, k in thr.items():
                x = Z.add(x, Z.mul(_z3_atom(a, S, ctx, inst, t), bv(k)))
            if kind == "slice":
                x = Z.add(x, c[axis])
                axis += 1
            out.append(x)
        return out

    def executes(self, S, ctx, inst, r):
        """(some thread writes relative element r at instance inst, constraints on the auxiliary
        holder variables to assert alongside the query). The constraints only name the holders."""
        ok = [in_boxes(self.boxes, r)]
        for c, pos in self.uniform_conds:
            y = Z.i2b(c.fn(S, ctx, inst, None))
            ok.append(y if pos else Z.Not(y))
        if not self.mixed:
            return Z.And(*ok), TRUE
        ths = [S.var("holder.t") for _ in range(self.m)]
        named = []
        for j, th in enumerate(ths):
            v = S.var("holder.v")
            named += [th >= 0, th < self.an.T, v >= 0, v < self.values, in_boxes(self.live_boxes, (th,))]
            named += [Z.Eq(x, y) for x, y in zip(self.rel(S, ctx, inst, th, v), r, strict=True)]
            if j:
                named.append(Z.Lt(ths[j - 1], th))
        runs = []
        for th in ths:
            parts = []
            for c, pos in self.mixed:
                y = Z.i2b(c.fn(S, ctx, inst, th))
                parts.append(y if pos else Z.Not(y))
            runs.append(Z.And(*parts))
        ok.append(Z.Or(*runs))
        return Z.And(*ok), Z.Implies(ok[0], Z.And(*named))


def of_shared_write(an, W):
    """The `Writers` of a shared write record (memoised on the analysis), or None."""
    cache = an.__dict__.setdefault("_writers", {})
    if id(W) not in cache:
        cache[id(W)] = Writers.of(an, W.node, W.view, W.coords, W.values, W.where)[0]
    return cache[id(W)]
