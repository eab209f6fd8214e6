"""The compositions of stages that run a kernel on the GPU: lower, assemble, load, launch.

A driver module (like cli.py): it sits above the stages and may import any of them, so that the
runtime takes a compiled kernel as data (`runtime.cuda_backend.GpuProgram`) and never imports the
lowering.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

import numpy as np

from argus_verify import ir
from argus_verify.runtime import bench, cuda_backend
from argus_verify.runtime.measure import Timing

__all__ = ["bench_cuda", "bench_report", "gpu_program", "run_cuda"]

_PROGRAMS: dict[str, cuda_backend.GpuProgram] = {}  # by PTX text: assemble each kernel once


def gpu_program(kernel: ir.Kernel, lower_options: Mapping | None = None) -> cuda_backend.GpuProgram:
    """Lower `kernel` (with `lowering.ptx.lower` keyword options) and assemble it with ptxas when
    ptxas is on the PATH (which also yields the register / spill report); otherwise the driver will
    JIT-compile the PTX text."""
    from argus_verify.lowering import ptxas
    from argus_verify.lowering.ptx import lower

    lk = lower(kernel, **dict(lower_options or {}))
    if lk.ptx not in _PROGRAMS:
        cubin = stats = None
        if ptxas.ptxas_available():
            cubin, report = ptxas.assemble_cubin(lk.ptx)
            stats = report.get(lk.entry)
        _PROGRAMS[lk.ptx] = cuda_backend.GpuProgram(lk.ptx, lk.entry, lk.params, lk.block, lk.dynamic_shared_bytes,
                                                    cubin, stats, tuple(lk.tmaps))
    return _PROGRAMS[lk.ptx]


def run_cuda(kernel: ir.Kernel, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int],
             scalars: Mapping | None = None, *, lower_options: Mapping | None = None) -> dict[str, np.ndarray]:
    """Run `kernel` once on the GPU and return its outputs (poisoned with NaN before the launch)."""
    cuda_backend.check_sizes(kernel, sizes, dict(scalars or {}))
    return cuda_backend.run_cuda(kernel, gpu_program(kernel, lower_options), inputs, sizes, scalars)


def bench_cuda(kernel: ir.Kernel, sizes: Mapping[str, int], scalars: Mapping | None = None, *,
               lower_options: Mapping | None = None, **timing) -> Timing:
    """Median kernel time; `timing`: inputs, warmup, reps, rotations, seed (runtime.cuda_backend)."""
    cuda_backend.check_sizes(kernel, sizes, dict(scalars or {}))
    return cuda_backend.bench_cuda(kernel, gpu_program(kernel, lower_options), sizes, scalars, **timing)


def bench_report(kernel: ir.Kernel, sizes: Mapping[str, int], ref: ModuleType | None, reps: int = 50) -> dict:
    """`argus bench`: correctness on fresh inputs, then our time next to the library baseline."""
    return bench.bench_report(kernel, gpu_program(kernel), sizes, ref, reps)
