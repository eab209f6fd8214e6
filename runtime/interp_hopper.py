"""The interpreter's Hopper family: mbarriers, TMA loads, wgmma, their fences and groups.

Asynchronous work completes as late as the protocol allows, so that a protocol bug shows as a
wrong answer or a reported deadlock:

* a TMA load poisons its destination (NaN) when issued and lands its data only when a thread waits
  on its mbarrier and the phase cannot complete without it; its bytes then count against the
  phase's expected transactions. A phase completes when its arrivals and its transaction bytes
  are both used up; a wait on a phase that no pending arrival or copy can complete is a deadlock.
* what a TMA load wrote may be read (by a wgmma or a TMA store) only by threads that acquired it: a
  wait that observed its phase, or a barrier() after such a wait; the read of any other thread of
  the issuing warpgroup is an error (the verifier's `mbarrier-phase`).
* a TMA's completion is lost on an mbarrier whose init was not fenced (fence_mbarrier_init) by
  the initialising thread: the async proxy need not see the init.
* wgmma reads its shared operands when a `wgmma_wait` retires its group (so a stage refilled
  before then is read poisoned), through the hardware's descriptor address function
  (argus_verify.hopper), not the declared layout; its accumulator registers are NaN until then.
  An accumulator written by an ordinary operation since the last `wgmma_fence` is read as NaN
  (unordered registers). Shared elements written by ordinary stores and not yet ordered by the
  writer's `fence_proxy_async` read as NaN through the async proxy.
* a TMA store (`tma_store`) reads its shared tile through the TMA unit's address function, at some
  time between its issue and the bulk wait that retires its group: it writes global memory when
  that `bulk_wait` runs, with NaN wherever the tile was not ready for the async proxy at the issue
  (ordinary writes not fenced, or not published by a barrier) or changed in between. A store still
  in flight when its block exits reads shared memory the block no longer owns: NaN. Another thread's
  write to the tile after the wait but before the next barrier() is not ordered after the store's
  read: the elements it writes come out NaN too.

Only the lockstep and warpgroups schedules run these operations (wgmma is warpgroup-collective).
"""

from __future__ import annotations

import attrs
import numpy as np

from argus_verify import hopper, ir
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.runtime.interp_memory import LockstepShared
from argus_verify.semantics import round_to


@attrs.frozen
class Blocked:
    """A warpgroup role stopped at an mbarrier wait: `what` it waits for, at `progress`."""

    stmt: object
    what: str
    progress: int


@attrs.define
class Barriers:
    """The mbarriers of one allocation, per block: [G, n] arrays."""

    count: np.ndarray
    pending: np.ndarray
    tx: np.ndarray
    phase: np.ndarray
    inited: np.ndarray
    fenced: np.ndarray
    initialiser: np.ndarray


@attrs.define
class Tma:
    g: np.ndarray  # blocks that issued it
    bar: str
    idx: np.ndarray  # per issuing block, the barrier index
    shared: str
    off: np.ndarray  # [len(g), elements] element offsets
    vals: np.ndarray  # [len(g), elements]
    nbytes: int
    span: object
    loop: dict = attrs.Factory(dict)  # the loop variables at the issue (for messages)


@attrs.define
class WgmmaOp:
    name: str
    a_off: np.ndarray  # [G, M, K] element offsets into a's allocation
    b_off: np.ndarray  # [G, N, K]
    a_alloc: str
    b_alloc: str
    c_val: np.ndarray  # [G, T, V] the accumulator given (where no earlier wgmma of the block chains)
    chained: np.ndarray  # [G] the in-flight op whose result is the accumulator, -1: none
    coords: np.ndarray  # [T, V, 2]
    tile: tuple
    blocks: np.ndarray  # [G] the blocks that issued it
    a_snap: np.ndarray | None = None  # the operands when issued
    b_snap: np.ndarray | None = None
    result: np.ndarray | None = None  # [G, T, V], filled as blocks retire it


class HopperState:
    def __init__(self, G: int, threads: int = 0):
        self.G = G
        # per landed TMA copy (its number: SharedMemory.landed), the threads of its block that may read
        # what it wrote: those whose mbarrier wait observed its phase, and all after a barrier() since
        self.acquired = np.zeros((0, threads), dtype=bool)
        self.copy_span: list = []  # per landed copy, the tma_load
        self.phase_copies: dict = {}  # (barrier, block, index, phase) -> the copies that phase completed
        self.bars: dict[str, Barriers] = {}
        self.tmas: list[Tma] = []
        self.ops: list[WgmmaOp] = []
        self.open: list[list[int]] = [[] for _ in range(G)]  # per block: issued, not committed
        self.groups: list[list[list[int]]] = [[] for _ in range(G)]  # per block: committed groups
        self.latest: dict[str, np.ndarray] = {}  # per name, per block: the in-flight op it will hold
        self.unfenced: set = set()  # fragments written by ordinary operations since wgmma_fence
        self.bulk_open: dict = {}  # (block, thread) -> TMA stores issued, not committed
        self.bulk_groups: dict = {}  # (block, thread) -> committed groups (lists of stores), oldest first
        self.bulk_released: list = []  # (store, block, waiting thread, output array) retired since the last barrier
        self.progress = 0  # arrivals and landed copies so far: a stopped role retries after a change

    def before_barrier(self, shared) -> None:
        """A barrier() publishes the threads' shared writes: a retired store's tile written since its
        wait by a thread other than the waiting one may have been read with those values. It also
        orders every thread after the waits before it: a copy one thread acquired, all now have."""
        live = self.acquired[:len(self.copy_span)]
        live[live.any(axis=1)] = True
        for store, g, tid, arr in self.bulk_released:
            if isinstance(shared, LockstepShared):
                writer = shared.pend_writer[store.shared][g, store.off]
                late = (writer >= 0) & (writer != tid)
                if late.any():
                    _write_global(arr, store, np.where(late, np.nan, _global_values(arr, store)))
        self.bulk_released = []

    def new_copy(self, span, threads: int) -> int:
        """Number a landed TMA copy; no thread of its block has acquired it yet."""
        cid = len(self.copy_span)
        if cid == len(self.acquired):  # (grown by doubling: a long run lands thousands of copies)
            grown = np.zeros((max(16, 2 * cid), threads), dtype=bool)
            grown[:cid] = self.acquired
            self.acquired = grown
        self.copy_span.append(span)
        return cid


def _thread_ranges(tids: np.ndarray) -> str:
    """`0..127, 130` for a sorted array of thread ids."""
    parts, start = [], None
    ids = sorted(int(x) for x in tids)
    for k, x in enumerate(ids):
        if start is None:
            start = x
        if k + 1 == len(ids) or ids[k + 1] != x + 1:
            parts.append(f"{start}" if start == x else f"{start}..{x}")
            start = None
    return ", ".join(parts)


def _global_values(arr: np.ndarray, store) -> np.ndarray:
    """[R, C] the global values at a store's tile (NaN outside the tensor)."""
    rr, cc = np.meshgrid(store.rows, store.cols, indexing="ij")
    inside = (rr >= 0) & (rr < arr.shape[0]) & (cc >= 0) & (cc < arr.shape[1])
    return np.where(inside, arr[np.where(inside, rr, 0), np.where(inside, cc, 0)], np.nan)


def _write_global(arr: np.ndarray, store, vals: np.ndarray) -> None:
    """A TMA store's global writes: box elements outside the tensor are not written."""
    rr, cc = np.meshgrid(store.rows, store.cols, indexing="ij")
    inside = (rr >= 0) & (rr < arr.shape[0]) & (cc >= 0) & (cc < arr.shape[1])
    arr[rr[inside], cc[inside]] = vals[inside].astype(arr.dtype)


@attrs.define
class BulkStore:
    """One block's TMA store in flight: the global tile it writes and what it will read."""

    tensor: str
    rows: np.ndarray  # [R] global row of each tile row
    cols: np.ndarray  # [C] global column of each tile column
    shared: str
    off: np.ndarray  # [R, C] element offsets the TMA unit reads
    snap: np.ndarray  # [R, C] what it would read at the issue (NaN: not ready for the async proxy)
    span: object


class HopperOps:
    """Handlers of MbarrierOp, Fence, TmaLoad, WgmmaGroup and Wgmma for one ThreadGroup."""

    def hopper(self) -> HopperState:
        if not self.launch.schedule.lockstep_memory:
            raise ArgusRuntimeError("mbarriers, TMA and wgmma run under the lockstep and warpgroups schedules only")
        return self.batch.hopper

    def wg(self) -> HopperState:
        """The unit's wgmma groups, in-flight accumulators and unfenced registers: a warpgroup's own
        when warpgroup roles run as separate units (runtime/interp_roles.py), else the batch's."""
        own = getattr(self, "unit_hopper", None)
        return own if own is not None else self.batch.hopper

    # -- mbarriers -------------------------------------------------------------------------------
    def _bars(self, name: str) -> Barriers:
        st = self.hopper()
        if name not in st.bars:
            n = self.batch.shared.allocs[name].shape[0]
            z = lambda dt=np.int64: np.zeros((self.G, n), dtype=dt)  # noqa: E731
            st.bars[name] = Barriers(z(), z(), z(), z(), z(bool), z(bool), np.full((self.G, n), -1, np.int64))
        return st.bars[name]

    def _bar_index(self, s, view: ir.View, env, active) -> tuple[np.ndarray, np.ndarray]:
        """(blocks, barrier index) of the active threads, one entry per (block, thread)."""
        idx = self.per_thread(self.ieval(view.index[0].index, env), np.int64)
        n = self.batch.shared.allocs[view.base].shape[0]
        g, t = np.nonzero(active)
        i = idx[g, t]
        if ((i < 0) | (i >= n)).any():
            k = int(np.argmax((i < 0) | (i >= n)))
            raise ArgusRuntimeError(f"mbarrier index {view.base}[{int(i[k])}] outside its {n} barriers "
                                    f"(thread {self.first_thread + int(t[k])})", s.span)
        return g, t, i

    def _complete(self, bars: Barriers) -> None:
        done = bars.inited & (bars.pending == 0) & (bars.tx == 0)
        bars.phase[done] += 1
        bars.pending[done] = bars.count[done]

    def visit_MbarrierOp(self, s: ir.MbarrierOp, env, active, loop):
        bars = self._bars(s.bar.base)
        g, t, i = self._bar_index(s, s.bar, env, active)
        if s.kind == "init":
            val = self.per_thread(self.ieval(s.value, env), np.int64)[g, t]
            bars.count[g, i] = val
            bars.pending[g, i] = val
            bars.tx[g, i] = 0
            bars.phase[g, i] = 0
            bars.inited[g, i] = True
            bars.fenced[g, i] = False
            bars.initialiser[g, i] = self.tids[t]
            return
        bad = ~bars.inited[g, i]
        if bad.any():
            k = int(np.argmax(bad))
            raise ArgusRuntimeError(f"mbarrier {s.bar.base}[{int(i[k])}] used before mbarrier_init "
                                    f"(block {self._block(g[k])}, thread {self.first_thread + int(t[k])})", s.span)
        if s.kind in ("arrive", "expect_tx"):
            if s.kind == "expect_tx":
                nb = self.per_thread(self.ieval(s.value, env), np.int64)[g, t]
                np.add.at(bars.tx, (g, i), nb)
            np.add.at(bars.pending, (g, i), -1)
            self.hopper().progress += 1
            if (bars.pending < 0).any():
                gg, ii = (int(x[0]) for x in np.nonzero(bars.pending < 0))
                raise ArgusRuntimeError(f"more arrivals on {s.bar.base}[{ii}] than its count in one phase "
                                        f"(block {self._block(gg)})", s.span)
            self._complete(bars)
            return
        if getattr(self, "unit_hopper", None) is not None:
            return self._wait_blocking(s, bars, g, t, i, env)
        self._wait(s, bars, g, t, i, env)

    def _wait_blocking(self, s, bars: Barriers, g, t, i, env):
        """A wait of a warpgroup role: land what is in flight to the phase, else stop the unit until
        another role arrives (runtime/interp_roles.py reports a deadlock when every unit is stopped)."""
        parity = self.per_thread(self.ieval(s.value, env), np.int64)[g, t] % 2
        st = self.hopper()
        while True:
            missing = []
            for gb in np.unique(g):
                sel = g == gb
                for ib, pb in set(zip(i[sel].tolist(), parity[sel].tolist(), strict=True)):
                    while bars.phase[gb, ib] % 2 == pb and self._deliver_one(st, s.bar.base, gb, ib):
                        st.progress += 1
                    if bars.phase[gb, ib] % 2 == pb:
                        missing.append((int(gb), ib, pb))
            if not missing:
                self._acquire(s.bar.base, bars, g, t, i, parity)
                return
            gb, ib, pb = missing[0]
            yield Blocked(s, f"{s.bar.base}[{ib}] for the phase of parity {pb} (phase {int(bars.phase[gb, ib])}, "
                             f"{int(bars.pending[gb, ib])} arrival(s) and {int(bars.tx[gb, ib])} transaction "
                             f"byte(s) outstanding) in block {self._block(gb)}", st.progress)

    def _wait(self, s, bars: Barriers, g, t, i, env) -> None:
        parity = self.per_thread(self.ieval(s.value, env), np.int64)[g, t] % 2
        st = self.hopper()
        for gb in np.unique(g):
            sel = g == gb
            for ib, pb in set(zip(i[sel].tolist(), parity[sel].tolist(), strict=True)):
                while bars.phase[gb, ib] % 2 == pb:  # the phase of this parity has not completed
                    if not self._deliver_one(st, s.bar.base, gb, ib):
                        raise ArgusRuntimeError(
                            f"deadlock: wait on {s.bar.base}[{ib}] for the phase of parity {pb} (phase "
                            f"{int(bars.phase[gb, ib])}) in block {self._block(gb)}: it never completes "
                            f"({int(bars.pending[gb, ib])} arrival(s) and {int(bars.tx[gb, ib])} transaction "
                            f"byte(s) outstanding, no TMA in flight to it)", s.span)
        self._acquire(s.bar.base, bars, g, t, i, parity)

    def _acquire(self, bar: str, bars: Barriers, g, t, i, parity) -> None:
        """What the phase a wait observed completed (its TMA copies) is now visible to the waiting
        threads, and to them only (until a barrier())."""
        st = self.hopper()
        for gb, tb, ib, pb in zip(g.tolist(), self.tids[t].tolist(), i.tolist(), parity.tolist(), strict=True):
            done = int(bars.phase[gb, ib]) - 1  # the last completed phase: its parity is pb's
            if done >= 0 and done % 2 == pb:
                for cid in st.phase_copies.get((bar, gb, ib, done), ()):
                    st.acquired[cid, tb] = True

    def _check_acquired(self, name: str, g: int, off: np.ndarray, threads: np.ndarray, what: str, span) -> None:
        """Fault where `threads` of block g read elements of `name` at `off` that a TMA copy wrote and
        that not every one of them acquired (an mbarrier wait on its phase, or a barrier() after one)."""
        st = self.hopper()
        landed = self.batch.shared.landed[name][g]
        inside = (off >= 0) & (off < len(landed))
        cids = np.unique(landed[np.where(inside, off, 0)][inside])
        for cid in cids[cids >= 0].tolist():
            lacking = threads[~st.acquired[cid, threads]]
            if len(lacking):
                raise ArgusRuntimeError(
                    f"{what} reads {name} for threads {_thread_ranges(lacking)} of block {self._block(g)}, which did "
                    f"not wait for the TMA copy (line {st.copy_span[cid].line}) that wrote it: no mbarrier wait of "
                    "theirs on its phase, and no barrier() since a thread's that did", span)

    def _deliver_one(self, st: HopperState, bar: str, gb: int, ib: int) -> bool:
        """Land the oldest TMA in flight to barrier (bar, ib) of block gb; False if there is none."""
        for k, tma in enumerate(st.tmas):
            if tma.bar != bar:
                continue
            hit = np.nonzero((tma.g == gb) & (tma.idx == ib))[0]
            if not len(hit):
                continue
            j = int(hit[0])
            bars = st.bars[bar]
            cid = st.new_copy(tma.span, self.batch.threads)
            st.phase_copies.setdefault((bar, gb, ib, int(bars.phase[gb, ib])), []).append(cid)
            self._write_async(tma.shared, np.array([gb]), tma.off[j][None, :], tma.vals[j][None, :], cid)
            if bars.fenced[gb, ib]:
                bars.tx[gb, ib] -= tma.nbytes
                self._complete(bars)
            keep = np.ones(len(tma.g), dtype=bool)
            keep[j] = False
            if keep.any():
                st.tmas[k] = Tma(tma.g[keep], tma.bar, tma.idx[keep], tma.shared, tma.off[keep], tma.vals[keep],
                                 tma.nbytes, tma.span, tma.loop)
            else:
                del st.tmas[k]
            return True
        return False

    def _write_async(self, name: str, g: np.ndarray, off: np.ndarray, vals: np.ndarray, cid: int = -1) -> None:
        """An async-proxy write: visible to the threads that observe its completion (`cid`: the landed
        copy's number, whose acquirers may read it; -1: no such bookkeeping)."""
        sh = self.batch.shared
        keep = (off >= 0) & (off < sh.mem[name].shape[1])  # a box that does not fit writes elsewhere
        gg = np.broadcast_to(g[:, None], off.shape)[keep]
        off = off[keep]
        vals = np.broadcast_to(vals, keep.shape)[keep]
        sh.mem[name][gg, off] = vals
        sh.landed[name][gg, off] = cid
        if isinstance(sh, LockstepShared):
            sh.pend_writer[name][gg, off] = -1
        sh.generic[name][gg, off] = -1

    def _block(self, g) -> tuple:
        return tuple(int(x) for x in self.batch.blocks[int(g)])

    # -- fences ----------------------------------------------------------------------------------
    def visit_Fence(self, s: ir.Fence, env, active, loop):
        st = self.hopper()
        if s.kind == "mbarrier_init":
            for bars in st.bars.values():
                mine = np.isin(bars.initialiser, self.tids[active.any(0)]) & active.any(1)[:, None]
                bars.fenced |= mine & bars.inited
        elif s.kind == "proxy_async":
            gen = self.batch.shared.generic
            for name, w in gen.items():
                g, t = np.nonzero(active)
                for gb in np.unique(g):
                    mine = np.isin(w[gb], self.tids[t[g == gb]])
                    w[gb][mine] = -1
                del name
        else:  # wgmma.fence: registers written so far are ordered before the next wgmma
            self.wg().unfenced.clear()

    def visit_SetMaxNReg(self, s: ir.SetMaxNReg, env, active, loop):
        """A register-count policy: nothing the program's values can observe."""

    # -- TMA -------------------------------------------------------------------------------------
    def visit_TmaLoad(self, s: ir.TmaLoad, env, active, loop):
        st = self.hopper()
        g, t, i, off, vals, nbytes = self._tma_tile(s, env, active, "tma_load")
        self._write_async(s.dst.base, g, off, np.full(off.shape, np.nan, dtype=vals.dtype))  # undefined until it lands
        st.progress += 1
        st.tmas.append(Tma(g, s.bar.base, i, s.dst.base, off, vals, nbytes, s.span, dict(loop)))

    def _tma_tile(self, s: ir.TmaLoad | ir.TmaLoadMulticast, env, active, what: str) -> tuple:
        """What one TMA load of the active threads moves: (blocks, threads, barrier index, [n, elements]
        shared element offsets, [n, elements] values in the shared dtype, bytes per copy), one row per
        issuing (block, thread). Where it lands (the issuer or, multicast, the CTAs of a mask) is the
        caller's."""
        alloc = self.batch.shared.allocs[s.dst.base]
        esize = ir.DTYPE_BYTES[alloc.dtype]
        try:
            boxes = hopper.tma_boxes(alloc, s.dst)
        except ValueError as e:
            raise ArgusRuntimeError(f"{what}: {e}", s.span) from None
        self._check_in_allocation(s.dst, env, active, s)
        hw = hopper.tma_table(alloc, s.dst, boxes)  # bytes from the view's element (0, 0)
        rows, cols = hw.shape
        g, t, i = self._bar_index(s, s.bar, env, active)
        # source: the tile of the global view, zero outside the tensor
        shape = self.launch.shapes[s.src.base]
        r0 = self.per_thread(self.ieval(s.src.index[0].start, env), np.int64)[g, t]
        c0 = self.per_thread(self.ieval(s.src.index[1].start, env), np.int64)[g, t]
        rr = r0[:, None, None] + np.arange(rows)[None, :, None]
        cc = c0[:, None, None] + np.arange(cols)[None, None, :]
        inb = (rr >= 0) & (rr < shape[0]) & (cc >= 0) & (cc < shape[1])
        flat = self.launch.arrays[s.src.base].reshape(-1)
        vals = np.where(inb, flat[np.where(inb, rr * shape[1] + cc, 0)], 0).reshape(len(g), -1)
        # destination: the view's element (0, 0) by the declared layout, then the TMA's own function
        base = self._view_base(s.dst, env)[g, t]
        off = base[:, None] + (hw.reshape(-1) // esize)[None, :]
        dtype = self.batch.shared.mem[s.dst.base].dtype
        return g, t, i, off, vals.astype(dtype), rows * cols * esize

    def _check_in_allocation(self, view: ir.View, env, active, stmt) -> None:
        """Fault, as an ordinary shared access does, when the tile's first or last element lies
        outside the allocation (a stage index past its extent)."""
        corners = np.zeros((self.count, 2, len(view.tile)), dtype=np.int64)
        corners[:, 1, :] = np.asarray(view.tile) - 1
        self.shared_offsets(view, self.view_coords(view, corners, env), active, stmt)
    def visit_TmaStore(self, s: ir.TmaStore, env, active, loop):
        st = self.hopper()
        alloc = self.batch.shared.allocs[s.src.base]
        esize = ir.DTYPE_BYTES[alloc.dtype]
        try:
            boxes = hopper.tma_boxes(alloc, s.src)
        except ValueError as e:
            raise ArgusRuntimeError(f"tma_store: {e}", s.span) from None
        hw = hopper.tma_table(alloc, s.src, boxes) // esize  # elements from the view's element (0, 0)
        rows, cols = hw.shape
        g, t = np.nonzero(active)
        base = self._view_base(s.src, env)[g, t]
        r0 = self.per_thread(self.ieval(s.dst.index[0].start, env), np.int64)[g, t]
        c0 = self.per_thread(self.ieval(s.dst.index[1].start, env), np.int64)[g, t]
        for j in range(len(g)):
            gb, tid = int(g[j]), int(self.tids[t[j]])
            off = base[j] + hw
            self._check_acquired(s.src.base, gb, off, np.array([tid]), "tma_store", s.span)
            store = BulkStore(s.dst.base, r0[j] + np.arange(rows), c0[j] + np.arange(cols), s.src.base, off,
                              self._async_read(s.src.base, gb, off), s.span)
            st.bulk_open.setdefault((gb, tid), []).append(store)

    def _async_read(self, name: str, g: int, off: np.ndarray) -> np.ndarray:
        """What the async proxy reads from block g's shared `off` now: NaN where an ordinary write is
        not fenced (fence_proxy_async) or not yet published to the block (barrier)."""
        sh = self.batch.shared
        n = sh.mem[name].shape[1]
        inside = (off >= 0) & (off < n)
        safe = np.where(inside, off, 0)
        v = sh.mem[name][g, safe].astype(np.float64)
        bad = (sh.generic[name][g, safe] >= 0) | ~inside
        if isinstance(sh, LockstepShared):
            bad |= sh.pend_writer[name][g, safe] >= 0
        v[bad] = np.nan
        return v

    def visit_BulkGroup(self, s: ir.BulkGroup, env, active, loop):
        st = self.hopper()
        g, t = np.nonzero(active)
        for gb, tid in zip(g.tolist(), self.tids[t].tolist(), strict=True):
            key = (gb, tid)
            if s.kind == "commit":  # (an empty group too: cp.async.bulk.wait_group counts it, PTX ISA)
                st.bulk_groups.setdefault(key, []).append(st.bulk_open.pop(key, []))
                continue
            groups = st.bulk_groups.get(key, [])
            while len(groups) > s.pending:
                for store in groups.pop(0):
                    now = self._async_read(store.shared, gb, store.off)
                    same = (now == store.snap) | (np.isnan(now) & np.isnan(store.snap))
                    self._bulk_write(store, np.where(same, store.snap, np.nan))
                    st.bulk_released.append((store, gb, tid, self.launch.arrays[store.tensor]))

    def _bulk_write(self, store: BulkStore, vals: np.ndarray) -> None:
        _write_global(self.launch.arrays[store.tensor], store, vals)

    def exit_blocks(self) -> None:
        """The blocks of the batch exit: TMA stores not retired by a bulk_wait read shared memory
        that is no longer theirs (their elements come out NaN); a TMA load still in flight (copies
        land only when a wait needs their phase: no thread waited for it) would write shared memory
        and complete on an mbarrier that are no longer theirs: an error."""
        st = self.batch.hopper
        if st is None:
            return
        for key in set(st.bulk_open) | set(st.bulk_groups):
            for store in [*st.bulk_open.get(key, []), *[x for grp in st.bulk_groups.get(key, []) for x in grp]]:
                self._bulk_write(store, np.full(store.off.shape, np.nan))
        st.bulk_open.clear()
        st.bulk_groups.clear()
        if st.tmas and not ir.uses_cluster(self.launch.kernel):  # (a cluster's exit: runtime/interp_cluster.py)
            tma = st.tmas[0]
            gb, ib = int(tma.g[0]), int(tma.idx[0])
            bars = st.bars[tma.bar]
            where = ", ".join(f"{k} = {v}" for k, v in tma.loop.items()) or "outside loops"
            raise ArgusRuntimeError(
                f"block {self._block(gb)} exits while the TMA copy into {tma.shared} ({where}) is still in flight: "
                f"no mbarrier wait on {tma.bar}[{ib}] for its phase (phase {int(bars.phase[gb, ib])}, parity "
                f"{int(bars.phase[gb, ib]) % 2}) completes it, so it may land in shared memory the block no longer "
                "owns", tma.span)

    def _view_base(self, view: ir.View, env) -> np.ndarray:
        """[G, T] element offset of the view's element (0, 0) under the declared layout."""
        alloc = self.batch.shared.allocs[view.base]
        coords = []
        for it in view.index:
            if isinstance(it, ir.Slice):
                coords.append(self.per_thread(self.ieval(it.start, env), np.int64))
            else:
                coords.append(self.per_thread(self.ieval(it.index, env), np.int64))
        from argus_verify.runtime.interp_memory import NP_OPS

        return np.asarray(ir.layout_offset(alloc.layout, tuple(coords), NP_OPS), dtype=np.int64)

    # -- wgmma -----------------------------------------------------------------------------------
    def visit_Wgmma(self, op: ir.Wgmma, s: ir.Assign, env, active, loop):
        st = self.hopper()
        blocks = active.any(1)
        if (blocks & ~active.all(1)).any():
            raise ArgusRuntimeError("wgmma is issued by the whole warpgroup: every thread must run it", s.span)
        offs = []
        for which, view in (("a", op.a), ("b", op.b)):
            self._check_in_allocation(view, env, active, s)
            alloc = self.batch.shared.allocs[view.base]
            try:
                operand = hopper.wgmma_operand(alloc, view, which)
            except ValueError as e:
                raise ArgusRuntimeError(f"wgmma: {e}", s.span) from None
            tab, _, _ = hopper.tile_table(alloc, view)
            shape = tab.shape if which == "a" else tab.T.shape
            hw = hopper.wgmma_table(operand, shape, ir.DTYPE_BYTES[alloc.dtype]) // ir.DTYPE_BYTES[alloc.dtype]
            base = self._view_base(view, env)[:, 0]
            offs.append(base[:, None, None] + hw[None])
        for gb in np.nonzero(blocks)[0]:  # the whole warpgroup reads the operands
            for (which, view), off in zip((("A", op.a), ("B", op.b)), offs, strict=True):
                self._check_acquired(view.base, int(gb), off[gb], self.tids[active[gb]],
                                     f"wgmma (operand {which})", s.span)
        prev = self.wg().latest.get(op.c, np.full(self.G, -1))
        c_val = np.array(env[op.c], copy=True, dtype=np.float32)
        if op.c in self.wg().unfenced:
            c_val[:] = np.nan  # registers written by ordinary code, not ordered by wgmma.fence
        w = WgmmaOp(s.name, offs[0], offs[1], op.a.base, op.b.base, c_val, prev.copy(),
                    self.coord_table(s.type.coords), tuple(s.type.tile), blocks)
        w.a_snap, w.b_snap = self._operand(op.a.base, offs[0]), self._operand(op.b.base, offs[1])
        w.result = np.full(c_val.shape, np.nan, dtype=np.float32)
        st.ops.append(w)
        k = len(st.ops) - 1
        latest = self.wg().latest.setdefault(s.name, np.full(self.G, -1))
        for g in np.nonzero(blocks)[0]:
            self.wg().open[g].append(k)
            latest[g] = k
        self.wg().unfenced.discard(s.name)
        return np.full((self.G, self.count, s.type.values), np.nan, dtype=np.float32)

    def visit_WgmmaGroup(self, s: ir.WgmmaGroup, env, active, loop):
        st = self.hopper()
        for g in np.nonzero(active.any(1))[0]:
            if s.kind == "commit":  # (an empty group too: wgmma.wait_group counts it, PTX ISA)
                self.wg().groups[g].append(self.wg().open[g])
                self.wg().open[g] = []
                continue
            while len(self.wg().groups[g]) > s.pending:
                for k in self.wg().groups[g].pop(0):
                    self._retire(st, k, int(g), env)

    def _operand(self, name: str, off: np.ndarray) -> np.ndarray:
        """What the async proxy reads at `off` now: ordinary writes not yet fenced read as NaN."""
        sh = self.batch.shared
        rows = np.arange(self.G)[:, None, None]
        n = sh.mem[name].shape[1]
        inside = (off >= 0) & (off < n)  # a descriptor that does not fit the layout may read past it
        safe = np.where(inside, off, 0)
        v = sh.mem[name][rows, safe].astype(np.float64)
        v[(sh.generic[name][rows, safe] >= 0) | ~inside] = np.nan
        return v

    def _retire(self, st: HopperState, k: int, g: int, env) -> None:
        """Block g's part of wgmma k completes: its operands are read (undefined where they changed
        since the issue) and its accumulators written."""
        w = st.ops[k]
        sh = self.batch.shared
        rows = np.array([g])[:, None, None]

        def read(name, off, snap):
            # the unit reads its operands at some time between issue and completion: operands that
            # changed in between are undefined
            o = off[g][None]
            n = sh.mem[name].shape[1]
            inside = (o >= 0) & (o < n)
            safe = np.where(inside, o, 0)
            v = sh.mem[name][rows, safe].astype(np.float64)
            v[(sh.generic[name][rows, safe] >= 0) | ~inside] = np.nan
            sn = snap[g][None]
            same = (v == sn) | (np.isnan(v) & np.isnan(sn))
            return np.where(same, v, np.nan)

        a = read(w.a_alloc, w.a_off, w.a_snap)[0]  # [M, K]
        b = read(w.b_alloc, w.b_off, w.b_snap)[0]  # [N, K]
        M, N = w.tile
        tt, vv = w.coords[..., 0], w.coords[..., 1]
        prev = int(w.chained[g])
        c_in = st.ops[prev].result[g] if prev >= 0 else w.c_val[g]  # earlier groups retire first
        acc = np.zeros((M, N), dtype=np.float64)
        acc[tt, vv] = c_in
        for k0 in range(0, a.shape[1], hopper.WGMMA_K):
            part = a[:, k0:k0 + hopper.WGMMA_K] @ b[:, k0:k0 + hopper.WGMMA_K].T
            acc = round_to(acc + part, "f32").astype(np.float64)
        w.result[g] = acc[tt, vv].astype(np.float32)
        latest = self.wg().latest.get(w.name)
        if latest is not None and latest[g] == k:
            env[w.name][g] = w.result[g]
            latest[g] = -1
