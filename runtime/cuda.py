"""Load PTX, move data and launch/time kernels on the GPU through PyCUDA.

PyCUDA is the optional ``cuda`` extra and is absent on CPU-only machines, so it is imported lazily
inside functions: importing this module never needs it, and ``cuda_available()`` answers False
instead of raising. Everything that touches the driver first makes sure a context is current
(``ensure_context``), using the device's *primary* context so that PyTorch (which also uses the
primary context) and our kernels share one address space and one default stream.

Timing method (``time_kernel`` / ``torch_time``): warm up, then bracket every call with a pair of CUDA
events recorded on the same stream, synchronize once at the end, and report the median. Callers
should rotate through several copies of the inputs so that a kernel does not read data left hot in L2
by the previous repetition: the H200 has 60 MiB of L2, so use ``rotations_for(bytes_per_set)`` copies
(their total reaches 3x L2) and pass that number as ``rotations``.
"""

from __future__ import annotations

import atexit
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from argus_verify.runtime.measure import Timing, summarize

__all__ = [
    "H200_L2_BYTES",
    "CudaError",
    "CudaModule",
    "DeviceBuffers",
    "cuda_available",
    "ensure_context",
    "launch",
    "rotations_for",
    "time_kernel",
    "torch_time",
]

# The H200's L2 cache (PyTorch reports 60 MB on the lent machines).
H200_L2_BYTES = 60 * 2**20
# Statically, a block may use 48 KB of shared memory; more needs an explicit per-function opt-in.
DEFAULT_SHARED_LIMIT = 48 * 1024
MAX_ROTATIONS = 16

# PTX kernel parameters are .u32/.s32/.f32/.u64/.s64/.f64 or pointers. Plain Python ints/floats are
# refused because their width is ambiguous: passing a 64-bit value to a .u32 param silently shifts
# every later parameter.
_SCALAR_TYPES: tuple[type, ...] = (np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64)

# Launch-time synchronization turns asynchronous faults (illegal address, trap) into an exception at
# the launch that caused them; too slow for timing, so only on request.
_DEBUG_ENV = "ARGUS_CUDA_DEBUG"

# pycuda objects have no stubs; these aliases document intent.
Function = Any
DeviceAllocation = Any
Stream = Any


class CudaError(RuntimeError):
    """A driver call failed; the message carries the failing operation and the driver's text."""


def _drv() -> Any:
    import pycuda.driver as drv  # lazy: optional dependency

    return drv


def cuda_available() -> bool:
    """True when pycuda imports, the driver initializes and at least one device exists. Never raises."""
    try:
        drv = _drv()
        drv.init()
        return int(drv.Device.count()) > 0
    except Exception:
        return False


_contexts: dict[int, Any] = {}


def _release_context(ctx: Any) -> None:
    # Pop at interpreter exit so pycuda's own shutdown does not find a dangling pushed context.
    try:
        ctx.pop()
    except Exception:
        pass


def ensure_context(device: int = 0) -> Any:
    """Make a context for ``device`` current (once per process) and return it.

    If pycuda already has a current context (e.g. the caller imported ``pycuda.autoprimaryctx``), that
    one is reused. Otherwise the device's primary context is retained and pushed, and kept alive in a
    module-level table until exit: a context that is garbage-collected would free every module and
    buffer created in it.
    """
    if device in _contexts:
        return _contexts[device]
    drv = _drv()
    drv.init()
    current = drv.Context.get_current()
    if current is not None and current.get_device() == drv.Device(device):
        _contexts[device] = current
        return current
    ctx = drv.Device(device).retain_primary_context()
    ctx.push()
    _contexts[device] = ctx
    atexit.register(_release_context, ctx)
    return ctx


class CudaModule:
    """A loaded CUDA module built from PTX text (JIT-compiled by the driver) or cubin bytes."""

    def __init__(self, image: str | bytes, device: int = 0) -> None:
        self.context = ensure_context(device)
        drv = _drv()
        # cuModuleLoadDataEx reads PTX as a NUL-terminated string and takes no length: terminate it
        # explicitly rather than rely on the bytes object's hidden trailing NUL.
        data = image.encode("utf-8") + b"\0" if isinstance(image, str) else bytes(image)
        log: dict[str, str] = {}

        def on_jit(success: bool, info: str, error: str) -> None:
            # pycuda hands over the JIT logs here; keep them for the error message and for debugging.
            log["info"] = info.rstrip("\0").strip()
            log["error"] = error.rstrip("\0").strip()

        try:
            self._module = drv.module_from_buffer(data, message_handler=on_jit)
        except drv.Error as e:
            # pycuda already appends the JIT error log to the message; add it only if it did not.
            detail = log.get("error") or ""
            msg = f"loading module failed: {e}"
            if detail and detail not in str(e):
                msg += f"\n{detail}"
            raise CudaError(msg) from e
        self.jit_log: str = log.get("info", "")
        self._functions: dict[str, Function] = {}

    def function(self, name: str) -> Function:
        """The kernel ``name`` (the ``.entry`` name in the PTX), cached."""
        if name not in self._functions:
            drv = _drv()
            try:
                self._functions[name] = self._module.get_function(name)
            except drv.Error as e:
                raise CudaError(f"no kernel {name!r} in module: {e}") from e
        return self._functions[name]

    @staticmethod
    def set_max_dynamic_shared(func: Function, nbytes: int) -> None:
        """Allow ``func`` to be launched with up to ``nbytes`` of dynamic shared memory.

        Launches asking for more than 48 KB fail unless this opt-in is raised first. The bound is the
        device's opt-in maximum (227 KB on Hopper) minus the kernel's static ``.shared`` bytes.
        """
        drv = _drv()
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("nbytes must be non-negative")
        static = int(func.get_attribute(drv.function_attribute.SHARED_SIZE_BYTES))
        optin = int(
            drv.Context.get_device().get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        )
        if static + nbytes > optin:
            raise ValueError(
                f"{nbytes} B dynamic + {static} B static shared memory exceeds the device's {optin} B"
            )
        func.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)

    def registers(self, name: str) -> int:
        """Registers per thread of kernel ``name`` as the driver JIT allocated them."""
        drv = _drv()
        return int(self.function(name).get_attribute(drv.function_attribute.NUM_REGS))


def _check_dims(what: str, dims: Sequence[int]) -> tuple[int, int, int]:
    if len(dims) != 3:
        raise ValueError(f"{what} must have 3 dimensions, got {tuple(dims)}")
    out = tuple(int(d) for d in dims)
    if any(d < 1 for d in out):
        raise ValueError(f"{what} dimensions must be >= 1, got {out}")
    return out  # type: ignore[return-value]


def _debug_enabled(debug: bool | None) -> bool:
    if debug is not None:
        return debug
    return os.environ.get(_DEBUG_ENV, "") not in ("", "0", "false", "False")


def launch(
    func: Function,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    shared_bytes: int = 0,
    stream: Stream | None = None,
    debug: bool | None = None,
) -> None:
    """Launch ``func`` with ``args`` (pycuda DeviceAllocations or numpy scalars of a fixed width).

    Launch-configuration errors (too many threads, too much shared memory, bad arguments) come back from
    cuLaunchKernel and raise here at once. Faults *inside* the kernel are asynchronous: they surface at
    the next synchronizing call unless ``debug`` (or $ARGUS_CUDA_DEBUG=1) synchronizes right after the
    launch, which pins the fault on this kernel. Such a fault (illegal address, ``trap``) is sticky: the
    context is unusable afterwards, so a checking harness should run suspect kernels in a subprocess.
    """
    drv = _drv()
    g = _check_dims("grid", grid)
    b = _check_dims("block", block)
    if b[0] * b[1] * b[2] > 1024:
        raise ValueError(f"block {b} has more than 1024 threads")
    if shared_bytes < 0:
        raise ValueError("shared_bytes must be non-negative")
    for i, a in enumerate(args):
        # Device memory: pycuda allocations, or anything exporting __cuda_array_interface__ (a torch
        # CUDA tensor), which pycuda passes as its data pointer.
        if isinstance(a, drv.DeviceAllocation) or hasattr(a, "__cuda_array_interface__"):
            continue
        if isinstance(a, _SCALAR_TYPES):
            continue
        raise TypeError(
            f"kernel argument #{i} has type {type(a).__name__}; pass a DeviceAllocation or one of "
            "np.uint32/np.int32/np.float32/np.uint64/np.int64/np.float64"
        )
    try:
        func(*args, grid=g, block=b, shared=int(shared_bytes), stream=stream)
        if _debug_enabled(debug):
            if stream is not None:
                stream.synchronize()
            else:
                drv.Context.synchronize()
    except drv.Error as e:
        raise CudaError(f"launch grid={g} block={b} shared={shared_bytes} failed: {e}") from e


class DeviceBuffers:
    """Device copies of named host arrays.

    The host arrays given at construction fix each buffer's shape and dtype; ``copy_in`` uploads them
    (or a replacement of the same shape/dtype), ``copy_out`` downloads into a fresh array, and
    ``poison`` fills a buffer with 0xFF bytes. 0xFF..FF is a NaN in every IEEE float format (f16, bf16,
    f32, f64) and -1 in signed integers, so an output element the kernel forgot to write cannot pass a
    comparison against the reference: poison outputs before every checked run.
    """

    def __init__(self, host: Mapping[str, np.ndarray], upload: bool = True, device: int = 0) -> None:
        ensure_context(device)
        drv = _drv()
        self._host: dict[str, np.ndarray] = {k: np.ascontiguousarray(v) for k, v in host.items()}
        self._dev: dict[str, DeviceAllocation] = {}
        for name, arr in self._host.items():
            # cuMemAlloc rejects a size of 0; an empty tensor still gets a valid (unused) pointer.
            self._dev[name] = drv.mem_alloc(max(int(arr.nbytes), 1))
        if upload:
            for name in self._host:
                self.copy_in(name)

    def __getitem__(self, name: str) -> DeviceAllocation:
        return self._dev[name]

    def __contains__(self, name: object) -> bool:
        return name in self._dev

    def __iter__(self) -> Iterator[str]:
        return iter(self._dev)

    def __len__(self) -> int:
        return len(self._dev)

    def nbytes(self, name: str) -> int:
        return int(self._host[name].nbytes)

    @property
    def total_bytes(self) -> int:
        return sum(int(a.nbytes) for a in self._host.values())

    def copy_in(self, name: str, array: np.ndarray | None = None) -> None:
        """Upload ``array`` (default: the array given at construction) into buffer ``name``."""
        ref = self._host[name]
        src = ref if array is None else np.ascontiguousarray(array)
        if src.shape != ref.shape or src.dtype != ref.dtype:
            raise ValueError(f"{name}: expected {ref.shape} {ref.dtype}, got {src.shape} {src.dtype}")
        if src.nbytes == 0:
            return
        # A uint8 view: the copy only needs bytes, and extension dtypes (bfloat16) may not export a
        # buffer-protocol format that pycuda accepts.
        _drv().memcpy_htod(self._dev[name], src.reshape(-1).view(np.uint8))

    def copy_in_all(self) -> None:
        for name in self._host:
            self.copy_in(name)

    def copy_out(self, name: str) -> np.ndarray:
        """Download buffer ``name`` into a new host array of its shape and dtype (synchronous)."""
        ref = self._host[name]
        out = np.empty_like(ref)
        if out.nbytes:
            _drv().memcpy_dtoh(out.reshape(-1).view(np.uint8), self._dev[name])
        return out

    def poison(self, *names: str) -> None:
        """Fill each named buffer with 0xFF bytes (NaN for floats) so unwritten elements show up."""
        if not names:
            raise ValueError("name at least one buffer to poison")
        drv = _drv()
        for name in names:
            n = self.nbytes(name)
            if n:
                drv.memset_d8(self._dev[name], 0xFF, n)

    def free(self) -> None:
        """Release the device memory now rather than at garbage collection."""
        for alloc in self._dev.values():
            alloc.free()
        self._dev.clear()

    def __enter__(self) -> DeviceBuffers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


def rotations_for(bytes_per_set: int, l2_bytes: int = H200_L2_BYTES) -> int:
    """How many input sets to rotate through so their total is at least 3x the L2 (clamped to 1..16).

    With that many sets, by the time a set comes round again the L2 has been overwritten about three
    times, so each timed call reads its inputs from HBM as it would in a real model. The cap of 16 keeps
    memory bounded for tiny kernels, whose inputs then stay partly cached (the timing is optimistic).
    """
    if bytes_per_set <= 0:
        raise ValueError("bytes_per_set must be positive")
    if l2_bytes <= 0:
        raise ValueError("l2_bytes must be positive")
    n = math.ceil(3 * l2_bytes / bytes_per_set)
    return max(1, min(MAX_ROTATIONS, n))


def _check_counts(warmup: int, reps: int) -> None:
    if warmup < 0:
        raise ValueError("warmup must be >= 0")
    if reps < 1:
        raise ValueError("reps must be >= 1")


def time_kernel(
    run_once: Callable[[int], None],
    warmup: int = 10,
    reps: int = 50,
    rotations: int = 1,
    stream: Stream | None = None,
) -> Timing:
    """Time ``run_once`` with CUDA events; returns the summary of ``reps`` per-call times.

    ``run_once(k)`` must enqueue one run on ``stream`` (default stream if None) using input set
    ``k`` in ``0..rotations-1``; it must not synchronize or poison (that would be timed too). The
    set index keeps advancing from the warm-up into the timed loop, so consecutive calls never reuse
    the set the previous call just pulled into L2 (when ``rotations > 1``). Size ``rotations`` with
    ``rotations_for``.

    All events are recorded first and read after one final synchronize, so the host does not stall
    the GPU between repetitions.
    """
    _check_counts(warmup, reps)
    if rotations < 1:
        raise ValueError("rotations must be >= 1")
    ensure_context()
    drv = _drv()
    for i in range(warmup):
        run_once(i % rotations)
    # Warm-up work must finish before the first start event, or it would be timed.
    if stream is not None:
        stream.synchronize()
    else:
        drv.Context.synchronize()
    starts = [drv.Event() for _ in range(reps)]
    ends = [drv.Event() for _ in range(reps)]
    for i in range(reps):
        starts[i].record(stream)
        run_once((warmup + i) % rotations)
        ends[i].record(stream)
    ends[-1].synchronize()
    # time_since returns milliseconds between the two recorded events.
    return summarize(ends[i].time_since(starts[i]) for i in range(reps))


def torch_time(fn: Callable[[], None], warmup: int = 10, reps: int = 50) -> Timing:
    """Time a PyTorch baseline the same way (events on torch's current stream, median of ``reps``)."""
    _check_counts(warmup, reps)
    import torch  # lazy: only the benchmark machine has it

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return summarize(starts[i].elapsed_time(ends[i]) for i in range(reps))
