"""Vector grouping of memory accesses: which of a thread's values one access touches, and which
of them share one 8- or 16-byte instruction (contiguous and aligned for every thread).

`VectorPlanning` is a mixin of `argus_verify.lowering.ptx.Lowerer` (it uses the lowerer's emitter,
tensors and shared allocations); the grouping itself is plain functions over layout tables.
"""

from __future__ import annotations

from collections import defaultdict

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.layout import NumpyOps
from argus_verify.lowering.emitter import Emitter
from argus_verify.lowering.values import MEM_TYPE


@attrs.frozen
class AccessPlan:
    kept: list  # the values accessed (copies of one element: loads read the first, stores write the last)
    rep: dict  # for loads: value -> the kept value that reads its element
    groups: list  # lists of kept values, one instruction each
    align: object  # None, or a predicate: the run-time row-alignment check the vector groups need
    esize: int


class VectorPlanning:
    def plan(self, view: ir.View, starts: tuple, coords_map, values: list, dtype: str, store: bool,
             vec_cap: int | None) -> AccessPlan:
        """Which values to touch and how to group them into vectors."""
        esize = ir.DTYPE_BYTES[dtype]
        table = coords_map.coord_table()  # [T, V, rank]
        kept, rep = _distinct_elements(table, values, store)
        wmax = max(1, 16 // esize)
        if vec_cap is not None:
            wmax = min(wmax, vec_cap)
        align = None
        if wmax == 1:
            groups = [[v] for v in kept]
        elif view.space == "global":
            groups, align = self._global_groups(view, starts, coords_map, table, kept, wmax)
        else:
            groups = self._shared_groups(view, starts, coords_map, table, kept, wmax)
        return AccessPlan(kept, rep, groups, align, esize)

    def _global_groups(self, view: ir.View, starts: tuple, coords_map, table, kept: list, wmax: int):
        """Runs along the tensor's last dimension, aligned to their width; for a 2-D or higher tensor
        with a symbolic row length, under a run-time check that rows keep the alignment."""
        em = self.em
        ti = self.tensor(view.base)
        rank = len(ti.shape)
        tile = coords_map.tile
        tile_axes = view.tile_axes()
        if not (tile_axes and tile_axes[-1] == rank - 1 and len(tile) > 0):
            return [[v] for v in kept], None
        last = len(tile) - 1
        lin = ravel(table, tile)  # [T, V]
        start_mult = em.multiple(starts[-1])

        def aligned(v, w):
            if start_mult % w or np.any(table[:, v, last] % w):
                return False
            return bool(np.all(table[:, v, last] + w - 1 < tile[last]))

        groups = find_groups(kept, wmax, lambda v: lin[:, v], aligned)
        widest = max((len(g) for g in groups), default=1)
        row_len = ti.shape[-1]
        if widest == 1 or rank == 1:
            return groups, None
        if not isinstance(row_len, int):
            return groups, em.cmp("eq", em.mod(row_len, widest), 0)
        if row_len % widest:
            return [[v] for g in groups for v in g], None
        return groups, None

    def _shared_groups(self, view: ir.View, starts: tuple, coords_map, table, kept: list, wmax: int) -> list:
        """Runs of consecutive offsets in the allocation: from the offset tables when the view's
        starts are constants, else from the symbolic offsets."""
        if not all(isinstance(x, int) for x in starts):
            offs = {v: self.shared_offset(view, starts, coords_map, v) for v in kept}
            return find_groups_aff(self.em, kept, wmax, offs)
        sh = self.shared[view.base]
        coords = []
        axis = 0
        for item, st in zip(view.index, starts, strict=True):
            if isinstance(item, ir.Slice):
                coords.append(st + table[:, :, axis])
                axis += 1
            else:
                coords.append(np.full(table.shape[:2], st, dtype=np.int64))
        off = np.asarray(ir.layout_offset(sh.alloc.layout, tuple(coords), NumpyOps()), dtype=np.int64)
        off = np.broadcast_to(off, table.shape[:2])
        return find_groups(kept, wmax, lambda v: off[:, v], lambda v, w: not np.any(off[:, v] % w))

    def shared_offset(self, view: ir.View, starts: tuple, coords_map, v: int):
        sh = self.shared[view.base]
        tc = self.value_coords(coords_map, v)
        coords = self.base_coords(view, starts, tc)
        return ir.layout_offset(sh.alloc.layout, tuple(coords), self.em)


def _distinct_elements(table: np.ndarray, values: list, store: bool) -> tuple[list, dict]:
    """Copies of one element: loads read it once (the first copy; `rep` names it for the others),
    stores write the last copy (program order)."""
    cols = {v: table[:, v, :].tobytes() for v in values}
    if store:
        last = {}
        for v in values:
            last[cols[v]] = v
        return [v for v in values if last[cols[v]] == v], {}
    seen: dict = {}
    rep = {}
    kept = []
    for v in values:
        if cols[v] in seen:
            rep[v] = seen[cols[v]]
        else:
            seen[cols[v]] = v
            kept.append(v)
    return kept, rep


def ravel(table: np.ndarray, tile: tuple) -> np.ndarray:
    """Row-major flat tile index of every (thread, value) of a coordinate table."""
    if not tile:
        return np.zeros(table.shape[:2], dtype=np.int64)
    return np.ravel_multi_index(tuple(np.moveaxis(table, -1, 0)), tile)


def greedy_groups(order: list, wmax: int, aligned, member) -> list:
    """Greedy vector groups: a leader v aligned for width w, and the values member(v, i) for
    i = 1 .. w - 1 (the value i elements after v, not yet used), halving w until they all exist."""
    used: set = set()
    groups = []
    for v in order:
        if v in used:
            continue
        chosen = _group_at(v, wmax, aligned, member, used) or [v]
        used.update(chosen)
        groups.append(chosen)
    return groups


def _group_at(v, wmax: int, aligned, member, used: set) -> list | None:
    w = wmax
    while w > 1:
        if aligned(v, w):
            members = [v]
            for i in range(1, w):
                cand = member(v, i, lambda u, taken=members: u not in used and u not in taken)
                if cand is None:
                    break
                members.append(cand)
            if len(members) == w:
                return members
        w //= 2
    return None


def find_groups(kept: list, wmax: int, col, aligned) -> list:
    """Vector groups from concrete per-thread columns: members sit at col(v) + 1, + 2, ..."""
    index = defaultdict(list)
    for v in kept:
        index[int(col(v)[0])].append(v)

    def member(v, i, free):
        target = col(v) + i
        return next((u for u in index.get(int(target[0]), []) if free(u) and np.array_equal(col(u), target)),
                    None)

    order = sorted(kept, key=lambda v: (int(col(v)[0]), v))
    return greedy_groups(order, wmax, aligned, member)


def find_groups_aff(em: Emitter, kept: list, wmax: int, offs: dict) -> list:
    """Vector groups from symbolic offsets: contiguous when offsets differ by exact constants."""

    def member(v, i, free):
        return next((u for u in kept if free(u) and em.sub(offs[u], offs[v]) == i), None)

    return greedy_groups(kept, wmax, lambda v, w: em.multiple(offs[v]) % w == 0, member)


def vector_access(em: Emitter, kind: str, opname: str, dtype: str, addr: str, regs: list) -> list:
    """The instructions of one vector load or store (`kind`) of `regs` at `addr`."""
    esize = ir.DTYPE_BYTES[dtype]
    w = len(regs)
    if esize >= 4:
        mem = MEM_TYPE[dtype]
        lst = ", ".join(str(r) for r in regs)
        if kind == "load":
            return [f"{opname}.v{w}.{mem} {{{lst}}}, {addr};"]
        return [f"{opname}.v{w}.{mem} {addr}, {{{lst}}};"]
    return _packed_access(em, kind, opname, esize, addr, regs)


def _packed_access(em: Emitter, kind: str, opname: str, esize: int, addr: str, regs: list) -> list:
    """16-bit elements travel as packed 32-bit words."""
    per = 4 // esize
    words = [em.reg("b32") for _ in range(len(regs) // per)]
    packs = [f"{{{', '.join(str(r) for r in regs[i * per:(i + 1) * per])}}}" for i in range(len(words))]
    lst = ", ".join(str(r) for r in words)
    operand = f"{{{lst}}}" if len(words) > 1 else lst
    vec = f".v{len(words)}" if len(words) > 1 else ""
    if kind == "load":
        unpack = [f"mov.b32 {p}, {w};" for p, w in zip(packs, words, strict=True)]
        return [f"{opname}{vec}.b32 {operand}, {addr};", *unpack]
    pack = [f"mov.b32 {w}, {p};" for p, w in zip(packs, words, strict=True)]
    return [*pack, f"{opname}{vec}.b32 {addr}, {operand};"]
