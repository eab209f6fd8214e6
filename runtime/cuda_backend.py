"""Run Argus kernels on an NVIDIA GPU: lower to PTX, assemble, load, launch, copy back, time.

Everything GPU-specific goes through `runtime.cuda` (PyCUDA, imported lazily), so this module
imports on machines without a GPU or pycuda; only calling `run_cuda` / `bench_cuda` needs them.

* `run_cuda(kernel, inputs, sizes, scalars)` -> outputs as numpy arrays. Outputs are poisoned
  (0xFF bytes: NaN in every float format) before the launch, so an element the kernel does not
  write comes back NaN and fails any comparison.
* `bench_cuda(kernel, sizes, ...)` -> `runtime.measure.Timing` (CUDA events, median), rotating
  through `runtime.cuda.rotations_for(bytes)` copies of the buffers so that each launch reads its
  inputs from HBM rather than from the 60 MB L2.

PTX is assembled to a cubin with `ptxas` when it is on the PATH (which also yields the register /
spill report); otherwise the driver JIT-compiles the PTX text.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from argus_verify import ir
from argus_verify.lowering.ptx import LoweredKernel, eval_iexpr, lower
from argus_verify.runtime.measure import Timing

__all__ = ["CompiledKernel", "bench_cuda", "compile_cuda", "launch_args", "run_cuda"]

_SCALAR_NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "i64": np.int64}
_STATIC_SHARED_LIMIT = 48 * 1024


@attrs.define
class CompiledKernel:
    lowered: LoweredKernel
    module: object  # runtime.cuda.CudaModule
    function: object  # pycuda Function
    stats: object | None  # lowering.ptxas.PtxStats of the entry, when ptxas assembled it


_CACHE: dict[str, CompiledKernel] = {}


def compile_cuda(kernel: ir.Kernel | LoweredKernel, lower_options: Mapping | None = None) -> CompiledKernel:
    """Lower (if needed, with `lowering.ptx.lower` keyword options), assemble and load a kernel;
    cached by PTX text."""
    from argus_verify.lowering import ptxas
    from argus_verify.runtime import cuda

    lk = kernel if isinstance(kernel, LoweredKernel) else lower(kernel, **dict(lower_options or {}))
    hit = _CACHE.get(lk.ptx)
    if hit is not None:
        return hit
    stats = None
    if ptxas.ptxas_available():
        cubin, report = ptxas.assemble_cubin(lk.ptx)
        stats = report.get(lk.entry)
        module = cuda.CudaModule(cubin)
    else:
        module = cuda.CudaModule(lk.ptx)
    func = module.function(lk.entry)
    if lk.dynamic_shared_bytes > _STATIC_SHARED_LIMIT:
        cuda.CudaModule.set_max_dynamic_shared(func, lk.dynamic_shared_bytes)
    ck = CompiledKernel(lk, module, func, stats)
    _CACHE[lk.ptx] = ck
    return ck


def _check_sizes(kernel: ir.Kernel, sizes: Mapping[str, int], scalars: Mapping) -> dict:
    sizes = {k: int(v) for k, v in sizes.items()}
    for s in kernel.sizes:
        if s not in sizes:
            raise ValueError(f"no value for size {s}")
        if not 0 < sizes[s] < 2**31:
            raise ValueError(f"size {s}={sizes[s]} must be in 1 .. 2**31 - 1")
    env = {**sizes, **{k: int(v) for k, v in scalars.items() if isinstance(v, (int, np.integer))}}
    for req in kernel.requires:
        if not eval_iexpr(req, env):
            raise ValueError(f"sizes {sizes} violate a 'requires' precondition of {kernel.name}")
    return sizes


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


def launch_args(lk: LoweredKernel, buffers, sizes: Mapping[str, int], scalars: Mapping) -> list:
    """Kernel arguments in `lk.params` order: device pointers, np.uint32 sizes, typed scalars."""
    args = []
    for p in lk.params:
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


def run_cuda(kernel: ir.Kernel, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int],
             scalars: Mapping | None = None, *,
             lower_options: Mapping | None = None) -> dict[str, np.ndarray]:
    """Run `kernel` once on the GPU and return its outputs (poisoned with NaN before the launch)."""
    from argus_verify.runtime import cuda

    scalars = dict(scalars or {})
    sizes = _check_sizes(kernel, sizes, scalars)
    ck = compile_cuda(kernel, lower_options)
    lk = ck.lowered
    shapes = ir.tensor_shapes(kernel, sizes)
    host = _host_sets(kernel, inputs, shapes)
    outputs = [t.name for t in kernel.outputs]
    bufs = cuda.DeviceBuffers(host, upload=False)
    try:
        for t in kernel.inputs:
            bufs.copy_in(t.name)
        bufs.poison(*outputs)
        grid = lk.grid(sizes, scalars)
        if min(grid) > 0:
            cuda.launch(ck.function, grid, (lk.block, 1, 1), launch_args(lk, bufs, sizes, scalars),
                        shared_bytes=lk.dynamic_shared_bytes)
        cuda._drv().Context.synchronize()
        out = {}
        for t in kernel.outputs:
            out[t.name] = from_device_array(bufs.copy_out(t.name), t.dtype)
        return out
    finally:
        bufs.free()


def bench_cuda(kernel: ir.Kernel, sizes: Mapping[str, int], scalars: Mapping | None = None, *,
               inputs: Mapping[str, np.ndarray] | None = None, warmup: int = 10, reps: int = 50,
               rotations: int | None = None, seed: int = 0, lower_options: Mapping | None = None) -> Timing:
    """Median kernel time (ms) over `reps` launches, CUDA events, buffers rotated against the L2.

    Inputs default to standard-normal random data (the same values in every rotated copy: what
    matters for timing is that each copy sits at different addresses).
    """
    from argus_verify.runtime import cuda
    from argus_verify.runtime.measure import random_inputs

    scalars = dict(scalars or {})
    sizes = _check_sizes(kernel, sizes, scalars)
    ck = compile_cuda(kernel, lower_options)
    lk = ck.lowered
    shapes = ir.tensor_shapes(kernel, sizes)
    if inputs is None:
        rng = np.random.default_rng(seed)
        specs = [(t.name, shapes[t.name], np.float32 if t.dtype == "bf16" else ir.numpy_dtype(t.dtype))
                 for t in kernel.inputs]
        inputs = random_inputs(specs, rng)
    host = _host_sets(kernel, inputs, shapes)
    per_set = sum(int(a.nbytes) for a in host.values())
    n = rotations if rotations is not None else cuda.rotations_for(max(per_set, 1))
    grid = lk.grid(sizes, scalars)
    sets = []
    try:
        for _ in range(n):
            b = cuda.DeviceBuffers(host, upload=False)
            sets.append(b)
            for t in kernel.inputs:
                b.copy_in(t.name)
        args = [launch_args(lk, b, sizes, scalars) for b in sets]
        block = (lk.block, 1, 1)

        def run_once(k: int) -> None:
            cuda.launch(ck.function, grid, block, args[k], shared_bytes=lk.dynamic_shared_bytes)

        return cuda.time_kernel(run_once, warmup=warmup, reps=reps, rotations=n)
    finally:
        for b in sets:
            b.free()
