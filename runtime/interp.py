"""A numpy interpreter of the Argus IR.

It executes every thread of every block, following the layouts faithfully, so a layout bug gives
a wrong answer here too. It is the backend without a GPU, the oracle for the lowering tests and
the engine that replays the verifier's counterexamples.

Blocks run in batches, vectorised over [blocks, threads, values]. The threads of a block advance
under a schedule (runtime/schedules.py). The default, `lockstep`, runs them all together with the
memory model of docs/language.md: shared memory starts as NaN, a store is visible to its own thread
at once and to the others only after `barrier()`, and an async copy lands only when a `wait`
retires its group; a missing barrier or wait therefore reads stale NaN, as it would read garbage on
a GPU. The other schedules run warps (or narrower groups of lanes) in adversarial orders over real
shared memory, which also shows write-after-read races; `run_schedules` runs a kernel under several.

The statements are split by family: runtime/interp_control.py (values, loops, branches, barriers,
integer expressions), interp_memory.py, interp_compute.py and interp_warp.py.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError, ArgusRuntimeError
from argus_verify.runtime.interp_cluster import ClusterOps, check_cluster_exit, cluster_order
from argus_verify.runtime.interp_compute import ComputeOps
from argus_verify.runtime.interp_control import ControlOps, TraceEvent
from argus_verify.runtime.interp_hopper import HopperOps, HopperState
from argus_verify.runtime.interp_memory import AsyncCopies, LockstepShared, MemoryOps, SharedMemory
from argus_verify.runtime.interp_roles import drive_roles, uses_roles
from argus_verify.runtime.interp_warp import WarpOps
from argus_verify.runtime.schedules import Schedule, drive
from argus_verify.semantics import round_to
from argus_verify.visitor import Visitor

__all__ = ["SCHEDULES", "Schedule", "TraceEvent", "run", "run_schedules"]

MAX_BATCH_ELEMS = 1 << 22  # blocks per batch so that [blocks, threads, values] stays ~4M elements

# Orders that between them show the race and wait bugs of specs/buggy (tests/test_interp_schedules.py)
SCHEDULES = ("lockstep", "warps", "reverse", "random:1", "interleave:1", "one-warp-ahead", "reverse,width=8",
             "warps,copies=early", "warps,blocks=serial", "warps,blocks=reverse")


class Launch:
    """What every thread of a run shares: the kernel, its arrays, sizes and scalars, the schedule."""

    def __init__(self, kernel: ir.Kernel, arrays: dict, sizes: dict, scalars: dict, schedule: Schedule,
                 trace: Callable[[TraceEvent], None] | None):
        self.kernel = kernel
        self.arrays = arrays
        self.sizes = sizes
        self.scalars = scalars
        self.schedule = schedule
        self.trace = trace
        self.threads = kernel.block
        self.shapes = ir.tensor_shapes(kernel, sizes)
        self.strides = {n: row_major_strides(s) for n, s in self.shapes.items()}
        self.tagfns = {f.name: f for f in kernel.tagfns}
        self.frag_types = {a.name: a.type for a in ir.walk_stmts(kernel.body) if isinstance(a, ir.Assign)}
        self.grid = tuple(max(0, v) for v in host_values(kernel.grid, sizes, scalars))
        refused = ir.empty_grid(self.grid)
        if refused:
            raise ArgusRuntimeError(refused, kernel.span)

    def run(self) -> None:
        g = self.grid
        total = g[0] * g[1] * g[2]
        vmax = max([t.values for t in self.frag_types.values()] + [1])
        # a wgmma keeps each block's operand tiles (snapshots, [rows, k] element offsets) until it
        # retires: count them as values too, or a batch of 128 blocks takes gigabytes
        for st in ir.walk_stmts(self.kernel.body):
            if isinstance(st, ir.Assign) and isinstance(st.op, ir.Wgmma):
                vmax = max(vmax, math.prod(st.op.a.tile) + math.prod(st.op.b.tile))
        batch = max(1, MAX_BATCH_ELEMS // (self.threads * vmax))
        linear = np.arange(total)
        ids = np.stack([linear % g[0], (linear // g[0]) % g[1], linear // (g[0] * g[1])], 1)
        shape = self.kernel.cluster
        if shape != (1, 1, 1):  # a cluster's blocks run in one batch, by rank
            ids = cluster_order(ids, g, shape)
            size = shape[0] * shape[1] * shape[2]
            batch = max(size, batch - batch % size)
        elif self.schedule.blocks != "batch":  # one block at a time
            ids, batch = (ids[::-1] if self.schedule.blocks == "reverse" else ids), 1
        for start in range(0, total, batch):
            self.run_batch(ids[start:start + batch])

    def run_batch(self, blocks: np.ndarray) -> None:
        schedule = self.schedule
        shared = LockstepShared(len(blocks)) if schedule.lockstep_memory else SharedMemory(len(blocks))
        batch = BlockBatch(blocks, self.threads, shared, AsyncCopies(len(blocks), self.threads),
                           schedule.copies == "early", HopperState(len(blocks), self.threads))
        if schedule.order == "warpgroups" or (schedule.lockstep and uses_roles(self.kernel)):
            # warpgroup roles (or the warpgroups schedule): one unit per warpgroup
            units = [ThreadGroup(self, batch, t0, min(128, self.threads - t0)) for t0 in range(0, self.threads, 128)]
            drive_roles(units, batch, first=schedule.arg == 1)
            return
        width = self.threads if schedule.lockstep else schedule.width
        units = [ThreadGroup(self, batch, t0, min(width, self.threads - t0)) for t0 in range(0, self.threads, width)]
        drive(units, schedule.policy(), batch)
        units[0].exit_blocks()  # TMA stores still in flight at the blocks' exit
        if ir.uses_cluster(self.kernel):
            check_cluster_exit(batch)


@attrs.define
class BlockBatch:
    """What the threads of a batch of blocks share: block ids, shared memory, async copies."""

    blocks: np.ndarray  # [G, 3]
    threads: int
    shared: SharedMemory
    copies: AsyncCopies
    early_copies: bool
    hopper: object = None  # runtime.interp_hopper.HopperState, made by the first Hopper operation

    @property
    def G(self) -> int:
        return len(self.blocks)

    def barrier(self) -> None:
        if self.hopper is not None:
            self.hopper.before_barrier(self.shared)  # TMA stores retired since the last barrier
        self.shared.barrier()


class ThreadGroup(ControlOps, MemoryOps, ClusterOps, HopperOps, ComputeOps, WarpOps, Visitor,
                  families=("statements", "fragment_ops", "int_exprs")):
    """Threads first_thread .. first_thread + count - 1 of every block of a batch: one scheduling
    unit. Values are [blocks, threads] (integers) and [blocks, threads, values] (fragments)."""

    def __init__(self, launch: Launch, batch: BlockBatch, first_thread: int, count: int):
        self.launch = launch
        self.batch = batch
        self.G = batch.G
        self.first_thread = first_thread
        self.count = count
        self.tids = np.arange(first_thread, first_thread + count, dtype=np.int64)
        self.live = np.ones((self.G, count), dtype=bool)  # the threads executing the current statement

    def run(self):
        return self.exec_body(self.launch.kernel.body, {}, np.ones((self.G, self.count), dtype=bool), {})

    def per_thread(self, v, dtype=None) -> np.ndarray:
        return np.broadcast_to(np.asarray(v, dtype=dtype), (self.G, self.count))

    def threads_of(self, table: np.ndarray) -> np.ndarray:
        return table[self.first_thread:self.first_thread + self.count]

    def coord_table(self, tv) -> np.ndarray:
        return self.threads_of(coord_table(tv))


@functools.lru_cache(maxsize=1024)
def coord_table(tv: ir.TVMap) -> np.ndarray:
    """[threads, values, rank] tile coordinates (tables are per kernel; they are worth keeping)."""
    return tv.coord_table()


def row_major_strides(shape) -> tuple:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def host_values(exprs: Iterable[ir.IExpr], sizes: Mapping[str, int], scalars: Mapping) -> list[int]:
    """Uniform integer expressions (grid extents, requires) on the host."""
    env = {**sizes, **{k: v for k, v in scalars.items() if isinstance(v, (int, np.integer))}}
    out = []
    for e in exprs:
        try:
            out.append(ir.eval_int(e, env))
        except ZeroDivisionError:
            raise ArgusRuntimeError("integer division by zero", getattr(e, "span", None)) from None
        except KeyError as err:
            raise ArgusError(f"{err.args[0]} (give it with --shape)", getattr(e, "span", None)) from None
    return out


def prepare_arrays(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], sizes: dict, poison: bool) -> dict:
    """Inputs converted to their dtypes (never modified), outputs fresh (NaN-poisoned floats)."""
    shapes = ir.tensor_shapes(kernel, sizes)
    work = {}
    for t in kernel.tensors:
        want = shapes[t.name]
        if t.output:
            if t.name in arrays:
                arr = np.array(arrays[t.name], dtype=ir.numpy_dtype(t.dtype), copy=True)
            else:
                arr = np.zeros(want, dtype=ir.numpy_dtype(t.dtype))
            if poison and ir.is_float(t.dtype):
                arr[...] = np.nan
        else:
            if t.name not in arrays:
                raise ArgusError(f"no input array for tensor '{t.name}'", t.span)
            arr = round_to(np.asarray(arrays[t.name]), t.dtype)
        if tuple(arr.shape) != want:
            raise ArgusError(f"tensor '{t.name}' has shape {list(arr.shape)} but the sizes give {list(want)}",
                             t.span)
        work[t.name] = np.ascontiguousarray(arr)
    return work


def checked_sizes(kernel: ir.Kernel, sizes: Mapping[str, int]) -> dict[str, int]:
    sizes = {k: int(v) for k, v in sizes.items()}
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise ArgusError(f"no value for size {missing[0]} (give --shape {missing[0]}=...)", kernel.span)
    for s in kernel.sizes:
        if sizes[s] <= 0:
            raise ArgusError(f"size {s} must be positive, got {sizes[s]}", kernel.span)
    return sizes


def run(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], sizes: Mapping[str, int],
        scalars: Mapping[str, float] | None = None, trace: Callable[[TraceEvent], None] | None = None,
        poison: bool = True, schedule: str | Schedule = "lockstep") -> dict[str, np.ndarray]:
    """Run `kernel` on host arrays under `schedule` (see runtime/schedules.py). Inputs are not
    modified; returns the outputs (NaN-poisoned first, so an element the kernel never writes stays
    NaN)."""
    schedule = Schedule.parse(schedule)
    sizes = checked_sizes(kernel, sizes)
    scalars = dict(scalars or {})
    work = prepare_arrays(kernel, arrays, sizes, poison)
    for req, ok in zip(kernel.requires, host_values(kernel.requires, sizes, scalars), strict=True):
        if not ok:
            raise ArgusError(f"the sizes {fmt_sizes(sizes)} violate a 'requires' precondition", req.span)
    for name, stmt in ir.tma_tensors(kernel).items():  # what the GPU's launch refuses, as its fault
        param = kernel.param(name)
        row = ir.eval_int(param.shape[-1], sizes) * ir.DTYPE_BYTES[param.dtype]
        if row % ir.TMA_ROW_BYTES:
            raise ArgusRuntimeError(f"TMA moves {name}, whose rows are {row} bytes at {fmt_sizes(sizes)}: a tensor "
                                    f"map needs a multiple of {ir.TMA_ROW_BYTES}", stmt.span)
    with np.errstate(invalid="ignore", over="ignore"):
        Launch(kernel, work, sizes, scalars, schedule, trace).run()
    return {t.name: work[t.name] for t in kernel.outputs}


def run_schedules(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray], sizes: Mapping[str, int],
                  schedules: Iterable[str | Schedule] = SCHEDULES,
                  scalars: Mapping[str, float] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The outputs of `kernel` under each schedule, by schedule name. A correct kernel gives the
    same result under every one; a race or a read before its wait shows as a difference."""
    return {str(Schedule.parse(s)): run(kernel, arrays, sizes, scalars, schedule=s) for s in schedules}


def fmt_sizes(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())
