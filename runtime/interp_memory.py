"""The interpreter's memory family: views and addresses, global and shared loads and stores, async
copies and their commit groups, and the two models of shared memory the schedules use.

Every index is checked: an access outside a tensor or a shared allocation by a thread that runs it
faults (a masked global access reads its padding or writes nothing instead), so a stage index 1
into a stage dimension of size 1 faults rather than reading stage 0 through the layout's modulo.
"""

from __future__ import annotations

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.layout import NumpyOps
from argus_verify.runtime.interp_warp import whole_warps
from argus_verify.semantics import round_to

NP_OPS = NumpyOps()


class SharedMemory:
    """The shared allocations of a batch of blocks as real memory: a store is visible to every
    thread that reads after it (the model of the warp schedules)."""

    def __init__(self, blocks: int):
        self.G = blocks
        self.allocs: dict[str, ir.SharedAlloc] = {}
        self.mem: dict[str, np.ndarray] = {}  # [G, elements]
        # thread of the last ordinary (generic-proxy) write not yet ordered by its fence_proxy_async
        self.generic: dict[str, np.ndarray] = {}
        # the TMA copy (runtime/interp_hopper.py's copy number) whose landing wrote each element last,
        # -1 after an ordinary write: whose mbarrier wait a reader needs
        self.landed: dict[str, np.ndarray] = {}

    def allocate(self, alloc: ir.SharedAlloc) -> None:
        if alloc.name not in self.mem:  # every unit executes the allocation; the memory is the block's
            self.allocs[alloc.name] = alloc
            self.mem[alloc.name] = self.poisoned(alloc)
            self.generic[alloc.name] = np.full((self.G, alloc.size_elems), -1, dtype=np.int32)
            self.landed[alloc.name] = np.full((self.G, alloc.size_elems), -1, dtype=np.int64)

    def poisoned(self, alloc: ir.SharedAlloc) -> np.ndarray:
        return np.full((self.G, alloc.size_elems), np.nan, dtype=ir.numpy_dtype(alloc.dtype))

    def read(self, name: str, off: np.ndarray, tids: np.ndarray) -> np.ndarray:
        return self.mem[name][np.arange(self.G)[:, None, None], off]

    def write(self, name: str, g, off, vals, t) -> None:
        self.mem[name][g, off] = vals
        self.generic[name][g, off] = t
        self.landed[name][g, off] = -1

    def barrier(self) -> None:
        """Nothing to publish: stores already landed."""


class LockstepShared(SharedMemory):
    """docs/language.md's model: a store is visible to its own thread at once and to the other
    threads after the next barrier()."""

    def __init__(self, blocks: int):
        super().__init__(blocks)
        self.pend_val: dict[str, np.ndarray] = {}
        self.pend_writer: dict[str, np.ndarray] = {}  # thread that wrote since the last barrier, -1 none

    def allocate(self, alloc):
        if alloc.name not in self.mem:
            super().allocate(alloc)
            self.pend_val[alloc.name] = self.poisoned(alloc)
            self.pend_writer[alloc.name] = np.full((self.G, alloc.size_elems), -1, dtype=np.int32)

    def read(self, name, off, tids):
        rows = np.arange(self.G)[:, None, None]
        own = self.pend_writer[name][rows, off] == tids[None, :, None]
        return np.where(own, self.pend_val[name][rows, off], self.mem[name][rows, off])

    def write(self, name, g, off, vals, t):
        self.pend_val[name][g, off] = vals
        self.pend_writer[name][g, off] = t
        self.generic[name][g, off] = t
        self.landed[name][g, off] = -1

    def barrier(self):
        for name, mem in self.mem.items():
            hit = self.pend_writer[name] >= 0
            mem[hit] = self.pend_val[name][hit]
            self.pend_writer[name][hit] = -1


@attrs.define
class InFlight:
    """Elements of async copies not landed yet, with the commit group of their issuing thread."""

    shared: str
    g: np.ndarray
    t: np.ndarray  # issuing thread
    off: np.ndarray
    vals: np.ndarray
    group: np.ndarray  # the thread's number of commits when it issued the copy

    def select(self, keep: np.ndarray) -> InFlight:
        return InFlight(self.shared, self.g[keep], self.t[keep], self.off[keep], self.vals[keep], self.group[keep])


class AsyncCopies:
    """cp.async groups, per thread as on the GPU: `commit` closes a thread's group, `wait n` retires
    all but its n most recent committed groups; a copy lands when the wait retires it."""

    def __init__(self, blocks: int, threads: int):
        self.commits = np.zeros((blocks, threads), dtype=np.int64)
        self.inflight: list[InFlight] = []

    def issue(self, copy: InFlight) -> None:
        self.inflight.append(copy)

    def group_of(self, g, t) -> np.ndarray:
        return self.commits[g, t]

    def commit(self, active: np.ndarray, first_thread: int) -> None:
        self.commits[:, first_thread:first_thread + active.shape[1]] += active

    def retire(self, active: np.ndarray, first_thread: int, keep: int) -> list[InFlight]:
        """The copies of the waiting threads (`active`) that a `wait(keep)` completes, in issue order."""
        waiting = np.zeros(self.commits.shape, dtype=bool)
        waiting[:, first_thread:first_thread + active.shape[1]] = active
        done = [waiting[c.g, c.t] & (c.group < self.commits[c.g, c.t] - keep) for c in self.inflight]
        landed = [c.select(d) for c, d in zip(self.inflight, done, strict=True) if d.any()]
        self.inflight = [c.select(~d) for c, d in zip(self.inflight, done, strict=True) if not d.all()]
        return landed


class MemoryOps:
    """Loads, stores, copies and the synchronisation of memory, for one ThreadGroup."""

    # -- addressing ------------------------------------------------------------------------
    def view_coords(self, view: ir.View, tile_coords: np.ndarray, env) -> list:
        """Per base dimension, the coordinate of each (block, thread, value): arrays [G, n, V]."""
        shape = (self.G, self.count, tile_coords.shape[1])
        out = []
        axis = 0
        for item in view.index:
            if isinstance(item, ir.Slice):
                start = self.per_thread(self.ieval(item.start, env), np.int64)[:, :, None]
                out.append(np.broadcast_to(start + tile_coords[None, :, :, axis], shape))
                axis += 1
            else:
                index = self.per_thread(self.ieval(item.index, env), np.int64)[:, :, None]
                out.append(np.broadcast_to(index, shape))
        return out

    def in_bounds(self, coords: list, shape: tuple) -> np.ndarray:
        inb = np.ones(coords[0].shape, dtype=bool)
        for c, extent in zip(coords, shape, strict=True):
            inb &= (c >= 0) & (c < extent)
        return inb

    def fault(self, view: ir.View, coords: list, shape: tuple, bad: np.ndarray, stmt, note: str | None = None):
        g, t, v = (int(x[0]) for x in np.nonzero(bad))
        coord = [int(c[g, t, v]) for c in coords]
        thread = self.first_thread + t
        raise ArgusRuntimeError(
            f"out-of-bounds access {view.base}{coord} ({'shared, ' if view.space == 'shared' else ''}"
            f"shape {list(shape)}) by block {tuple(int(b) for b in self.batch.blocks[g])}, thread {thread} "
            f"(warp {thread // 32}, lane {thread % 32}), value {v}", stmt.span, note=note)

    def global_address(self, view: ir.View, coords: list, masked: bool, live: np.ndarray, stmt):
        """Flat element addresses, and which of them the threads in `live` really access."""
        shape = self.launch.shapes[view.base]
        inb = self.in_bounds(coords, shape)
        live = np.broadcast_to(live[:, :, None], inb.shape)
        if not masked and (live & ~inb).any():
            self.fault(view, coords, shape, live & ~inb, stmt, "add mask=True, or fix the tile offsets")
        addr = np.zeros(coords[0].shape, dtype=np.int64)
        for c, stride in zip(coords, self.launch.strides[view.base], strict=True):
            addr += c * stride
        return addr, inb & live

    def shared_offsets(self, view: ir.View, coords: list, live: np.ndarray, stmt) -> np.ndarray:
        """Element offsets in the allocation; faults on an index outside its dimension."""
        alloc = self.batch.shared.allocs[view.base]
        inb = self.in_bounds(coords, alloc.shape)
        bad = np.broadcast_to(live[:, :, None], inb.shape) & ~inb
        if bad.any():
            self.fault(view, coords, alloc.shape, bad, stmt)
        off = np.asarray(ir.layout_offset(alloc.layout, tuple(coords), NP_OPS), dtype=np.int64)
        return np.where(inb, off, 0)  # threads that do not run the access touch a harmless offset

    # -- statements and operations ---------------------------------------------------------
    def visit_SharedAlloc(self, s: ir.SharedAlloc, env, active, loop):
        self.batch.shared.allocate(s)

    def visit_Load(self, op: ir.Load, s: ir.Assign, env, active, loop):
        coords = self.view_coords(op.src, self.coord_table(op.tv), env)
        if op.src.space == "global":
            addr, ok = self.global_address(op.src, coords, op.mask, active, s)
            flat = self.launch.arrays[op.src.base].reshape(-1)
            return round_to(np.where(ok, flat[np.where(ok, addr, 0)], op.other), s.type.dtype)
        off = self.shared_offsets(op.src, coords, active, s)
        return self.batch.shared.read(op.src.base, off, self.tids).astype(ir.numpy_dtype(s.type.dtype))

    def visit_Ldmatrix(self, op: ir.Ldmatrix, s: ir.Assign, env, active, loop):
        """Each lane receives the elements its type's coordinates name (the ISA's ldmatrix layout
        over the rows the warp supplies, computed by the front end): a shared read of those."""
        whole_warps(s, active, self.first_thread, self.batch.blocks)
        coords = self.view_coords(op.src, self.coord_table(s.type.coords), env)
        off = self.shared_offsets(op.src, coords, active, s)
        return self.batch.shared.read(op.src.base, off, self.tids).astype(ir.numpy_dtype(s.type.dtype))

    def visit_Stmatrix(self, s: ir.Stmatrix, env, active, loop):
        """Every value lands at its own coordinate (the front end checked it): a store."""
        whole_warps(s, active, self.first_thread, self.batch.blocks)
        return self.visit_Store(s.as_store(), env, active, loop)

    def visit_Store(self, s: ir.Store, env, active, loop):
        val = env[s.value]
        live = active
        if s.where is not None:
            live = live & (self.per_thread(self.ieval(s.where, env)) != 0)
        coords = self.view_coords(s.dst, self.coord_table(self.launch.frag_types[s.value].coords), env)
        if s.dst.space == "global":
            addr, ok = self.global_address(s.dst, coords, s.mask, live, s)
            self.launch.arrays[s.dst.base].reshape(-1)[addr[ok]] = val[ok]
            return
        off = self.shared_offsets(s.dst, coords, live, s)
        g, t, v = np.nonzero(np.broadcast_to(live[:, :, None], off.shape))
        self.batch.shared.write(s.dst.base, g, off[g, t, v], val[g, t, v], self.tids[t])

    def visit_CopyAsync(self, s: ir.CopyAsync, env, active, loop):
        tile = self.coord_table(s.tv)
        addr, ok = self.global_address(s.src, self.view_coords(s.src, tile, env), s.mask, active, s)
        flat = self.launch.arrays[s.src.base].reshape(-1)
        vals = np.where(ok, flat[np.where(ok, addr, 0)], 0)  # masked elements are zero-filled
        off = self.shared_offsets(s.dst, self.view_coords(s.dst, tile, env), active, s)
        g, t, v = np.nonzero(np.broadcast_to(active[:, :, None], off.shape))
        dtype = self.batch.shared.mem[s.dst.base].dtype
        copy = InFlight(s.dst.base, g, self.tids[t], off[g, t, v], vals[g, t, v].astype(dtype),
                        self.batch.copies.group_of(g, self.tids[t]))
        if self.batch.early_copies:
            self.land([copy])
        else:
            self.batch.copies.issue(copy)

    def visit_Commit(self, s: ir.Commit, env, active, loop):
        self.batch.copies.commit(active, self.first_thread)

    def visit_Wait(self, s: ir.Wait, env, active, loop):
        self.land(self.batch.copies.retire(active, self.first_thread, s.pending))

    def land(self, copies: list[InFlight]) -> None:
        for c in copies:
            self.batch.shared.write(c.shared, c.g, c.off, c.vals, c.t)
