"""Run Argus kernels on an NVIDIA GPU: load, launch, copy back, time.

The runtime takes a kernel as data, a `GpuProgram` (PTX text or its cubin, the entry name, the
parameters in launch order, the block size and the dynamic shared memory), which a driver module
builds from the lowering (argus_verify/pipeline.py); it imports no other stage. Everything
GPU-specific goes through `runtime.cuda` (PyCUDA, imported lazily), so this module imports on
machines without a GPU or pycuda; only calling `load`, `run_cuda` or `bench_cuda` needs them.

* `run_cuda(kernel, program, inputs, sizes, scalars)` -> outputs as numpy arrays. Outputs are
  poisoned (0xFF bytes: NaN in every float format) before the launch, so an element the kernel
  does not write comes back NaN and fails any comparison.
* `bench_cuda(kernel, program, sizes, ...)` -> `runtime.measure.Timing` (CUDA events, median),
  rotating through `runtime.cuda.rotations_for(bytes)` copies of the buffers so that each launch
  reads its inputs from HBM rather than from the 60 MB L2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.runtime.measure import Timing

__all__ = ["GpuProgram", "LoadedProgram", "bench_cuda", "check_sizes", "grid_of", "launch_args", "load",
           "run_cuda"]

_SCALAR_NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "i64": np.int64}
_STATIC_SHARED_LIMIT = 48 * 1024


@attrs.frozen
class GpuProgram:
    """What the runtime needs to load and launch one kernel."""

    ptx: str
    entry: str
    params: tuple  # in launch order, each with .name, .kind ("tensor" | "size" | "scalar") and .dtype
    block: int
    dynamic_shared_bytes: int  # what to pass at launch (0 when the allocations are static)
    cubin: bytes | None = None  # assembled ahead of time; None: the driver JIT-compiles `ptx`
    stats: object | None = None  # the assembler's resource report of the entry, when there is one
    tmaps: tuple = ()  # lowering.hopper.TensorMapSpec of each "tmap" parameter (built at launch, runtime.tma)


@attrs.define
class LoadedProgram:
    program: GpuProgram
    module: object  # runtime.cuda.CudaModule
    function: object  # pycuda Function


_LOADED: dict[str, LoadedProgram] = {}


def load(program: GpuProgram) -> LoadedProgram:
    """Load a program into the current context (cached by PTX text)."""
    from argus_verify.runtime import cuda

    hit = _LOADED.get(program.ptx)
    if hit is not None:
        return hit
    module = cuda.CudaModule(program.cubin if program.cubin is not None else program.ptx)
    func = module.function(program.entry)
    if program.dynamic_shared_bytes > _STATIC_SHARED_LIMIT:
        cuda.CudaModule.set_max_dynamic_shared(func, program.dynamic_shared_bytes)
    loaded = _LOADED[program.ptx] = LoadedProgram(program, module, func)
    return loaded


def _int_env(sizes: Mapping[str, int], scalars: Mapping) -> dict:
    return {**{k: int(v) for k, v in sizes.items()},
            **{k: int(v) for k, v in scalars.items() if isinstance(v, (int, np.integer))}}


def check_sizes(kernel: ir.Kernel, sizes: Mapping[str, int], scalars: Mapping) -> dict:
    sizes = {k: int(v) for k, v in sizes.items()}
    for s in kernel.sizes:
        if s not in sizes:
            raise ValueError(f"no value for size {s}")
        if not 0 < sizes[s] < 2**31:
            raise ValueError(f"size {s}={sizes[s]} must be in 1 .. 2**31 - 1")
    env = _int_env(sizes, scalars)
    for req in kernel.requires:
        if not ir.eval_int(req, env):
            raise ValueError(f"sizes {sizes} violate a 'requires' precondition of {kernel.name}")
    # The PTX indexes tensors with 32-bit integers (docs/lowering.md): a tensor of 2**31 elements or
    # more would wrap its offsets (translation validation found `row * N` overflowing in reduce_sum).
    for name, shape in ir.tensor_shapes(kernel, sizes).items():
        count = math.prod(shape)
        if count >= 2**31:
            raise ValueError(f"tensor {name} has {count} elements ({' x '.join(map(str, shape))}); the generated "
                             "code indexes tensors with 32-bit integers: at most 2**31 - 1 elements each")
    grid = grid_of(kernel, sizes, scalars)
    if ir.empty_grid(grid):
        raise ValueError(ir.empty_grid(grid))
    for axis, (extent, limit) in enumerate(zip(grid, ir.GRID_MAX, strict=True)):
        if extent > limit:
            raise ValueError(f"the grid {grid} has {extent} blocks along {'xyz'[axis]}; CUDA launches at most "
                             f"{limit} (the verifier's `launch` obligation reports such sizes)")
    return sizes


def grid_of(kernel: ir.Kernel, sizes: Mapping[str, int], scalars: Mapping | None = None) -> tuple[int, int, int]:
    env = _int_env(sizes, scalars or {})
    return (tuple(int(ir.eval_int(e, env)) for e in kernel.grid) + (1, 1, 1))[:3]


def to_device_array(arr: np.ndarray, dtype: str) -> np.ndarray:
    """Host array -> the bytes the kernel sees (bf16 travels as uint16 bit patterns)."""
    if dtype == "bf16":
        x = np.ascontiguousarray(arr, dtype=np.float32)
        b = x.view(np.uint32).astype(np.uint64)
        bits = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
        bits = np.where(np.isnan(x), np.uint16(0x7FC0), bits)
        return np.ascontiguousarray(bits)
    return np.ascontiguousarray(arr, dtype=ir.numpy_dtype(dtype))


def from_device_array(arr: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def _device_dtype(dtype: str) -> np.dtype:
    return np.dtype(np.uint16) if dtype == "bf16" else ir.numpy_dtype(dtype)


def launch_args(program: GpuProgram, buffers, sizes: Mapping[str, int], scalars: Mapping) -> list:
    """Kernel arguments in `program.params` order: device pointers, np.uint32 sizes, typed scalars
    (a program that takes tensor maps is launched by `tma_launch` instead)."""
    args = []
    for p in program.params:
        if p.kind == "tmap":
            raise ValueError("this kernel takes TMA tensor maps: it is launched through runtime.tma.DriverProgram")
        if p.kind == "tensor":
            args.append(buffers[p.name])
        elif p.kind == "size":
            args.append(np.uint32(sizes[p.name]))
        else:
            if p.name not in scalars:
                raise ValueError(f"no value for scalar parameter '{p.name}'")
            if p.dtype not in _SCALAR_NP:
                raise ValueError(f"scalar parameters of type {p.dtype} cannot be passed yet")
            args.append(_SCALAR_NP[p.dtype](scalars[p.name]))
    return args


def tma_launch(program: GpuProgram, buffers, sizes: Mapping[str, int], scalars: Mapping, shapes: Mapping,
               stream: int = 0):
    """A launcher `f(grid)` of a program that takes tensor maps on `buffers` (anything `int()` turns
    into a device address, by tensor name): the maps are built once here (runtime.tma, cuda-python;
    without it a usage error), the launch goes through the driver API on `stream`."""
    from argus_verify.runtime import cuda
    from argus_verify.runtime.tma import DriverProgram, TmaError, param_buffers

    cuda.ensure_context()
    try:
        prog = DriverProgram.of(program)
        prepared = param_buffers(program, {n: int(buffers[n]) for n in buffers}, sizes, shapes, scalars)
    except TmaError as e:
        raise ValueError(str(e)) from None
    return lambda grid: prog.launch(grid, prepared, stream)


def _host_sets(kernel: ir.Kernel, inputs: Mapping[str, np.ndarray], shapes: dict) -> dict:
    host = {}
    for t in kernel.tensors:
        if t.output:
            host[t.name] = np.empty(shapes[t.name], dtype=_device_dtype(t.dtype))
        else:
            if t.name not in inputs:
                raise ValueError(f"no input array for tensor '{t.name}'")
            a = np.asarray(inputs[t.name])
            if tuple(a.shape) != shapes[t.name]:
                raise ValueError(f"tensor '{t.name}' has shape {list(a.shape)} but the sizes give "
                                 f"{list(shapes[t.name])}")
            host[t.name] = to_device_array(a, t.dtype)
    return host


def run_cuda(kernel: ir.Kernel, program: GpuProgram, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int],
             scalars: Mapping | None = None) -> dict[str, np.ndarray]:
    """Run `kernel` (compiled to `program`) once on the GPU and return its outputs (poisoned with
    NaN before the launch)."""
    from argus_verify.runtime import cuda

    scalars = dict(scalars or {})
    sizes = check_sizes(kernel, sizes, scalars)
    loaded = None if program.tmaps else load(program)  # tensor maps: runtime.tma loads it
    shapes = ir.tensor_shapes(kernel, sizes)
    host = _host_sets(kernel, inputs, shapes)
    outputs = [t.name for t in kernel.outputs]
    bufs = cuda.DeviceBuffers(host, upload=False)
    try:
        for t in kernel.inputs:
            bufs.copy_in(t.name)
        bufs.poison(*outputs)
        grid = grid_of(kernel, sizes, scalars)
        if min(grid) > 0:
            if program.tmaps:
                tma_launch(program, bufs, sizes, scalars, shapes)(grid)
            else:
                cuda.launch(loaded.function, grid, (program.block, 1, 1), launch_args(program, bufs, sizes, scalars),
                            shared_bytes=program.dynamic_shared_bytes)
        cuda._drv().Context.synchronize()
        out = {}
        for t in kernel.outputs:
            out[t.name] = from_device_array(bufs.copy_out(t.name), t.dtype)
        return out
    finally:
        bufs.free()


def bench_cuda(kernel: ir.Kernel, program: GpuProgram, sizes: Mapping[str, int], scalars: Mapping | None = None, *,
               inputs: Mapping[str, np.ndarray] | None = None, warmup: int = 10, reps: int = 50,
               rotations: int | None = None, seed: int = 0) -> Timing:
    """Median kernel time (ms) over `reps` launches, CUDA events, buffers rotated against the L2.

    Inputs default to standard-normal random data (the same values in every rotated copy: what
    matters for timing is that each copy sits at different addresses).
    """
    from argus_verify.runtime import cuda
    from argus_verify.runtime.measure import random_inputs

    scalars = dict(scalars or {})
    sizes = check_sizes(kernel, sizes, scalars)
    loaded = None if program.tmaps else load(program)  # tensor maps: runtime.tma loads it
    shapes = ir.tensor_shapes(kernel, sizes)
    if inputs is None:
        rng = np.random.default_rng(seed)
        specs = [(t.name, shapes[t.name], np.float32 if t.dtype == "bf16" else ir.numpy_dtype(t.dtype))
                 for t in kernel.inputs]
        inputs = random_inputs(specs, rng)
    host = _host_sets(kernel, inputs, shapes)
    per_set = sum(int(a.nbytes) for a in host.values())
    n = rotations if rotations is not None else cuda.rotations_for(max(per_set, 1))
    grid = grid_of(kernel, sizes, scalars)
    sets = []
    try:
        for _ in range(n):
            b = cuda.DeviceBuffers(host, upload=False)
            sets.append(b)
            for t in kernel.inputs:
                b.copy_in(t.name)
        block = (program.block, 1, 1)
        if program.tmaps:
            launches = [tma_launch(program, b, sizes, scalars, shapes) for b in sets]

            def run_once(k: int) -> None:
                launches[k](grid)
        else:
            args = [launch_args(program, b, sizes, scalars) for b in sets]

            def run_once(k: int) -> None:
                cuda.launch(loaded.function, grid, block, args[k], shared_bytes=program.dynamic_shared_bytes)

        return cuda.time_kernel(run_once, warmup=warmup, reps=reps, rotations=n)
    finally:
        for b in sets:
            b.free()
