"""`argus bench`: time a kernel on the GPU next to its library baseline, measured in the same run.

A kernel's reference file may declare what to compare with and how much work one launch does:

    def baseline(torch, inputs):     # inputs: torch tensors on the GPU, by name
        return lambda: torch.softmax(inputs["x"], dim=1)
    def work(sizes):                 # for rates: {"flops": ..., "bytes": ...}
        return {"bytes": 8 * sizes["M"] * sizes["N"]}

Without `baseline` the report gives our time alone; ratios are what count (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

import numpy as np

from argus_verify import ir
from argus_verify.reference import compute_reference, make_inputs
from argus_verify.runtime.cuda_backend import GpuProgram, bench_cuda, run_cuda
from argus_verify.runtime.measure import output_tolerance, rel_error


def bench_report(kernel: ir.Kernel, program: GpuProgram, sizes: Mapping[str, int], ref: ModuleType | None,
                 reps: int = 50) -> dict:
    """Check `kernel` (compiled to `program`) on fresh inputs against its reference, then time it."""
    from argus_verify.runtime.cuda import torch_time

    sizes = dict(sizes)
    rng = np.random.default_rng()
    inputs = make_inputs(kernel, sizes, rng, ref)
    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}
    result: dict = {"kernel": kernel.name, "sizes": sizes, "pass": True}
    lines = [f"{kernel.name} {', '.join(f'{k}={v}' for k, v in sizes.items())}"]
    if ref is not None:  # correctness first, on fresh inputs, at the benchmark size
        outputs = run_cuda(kernel, program, arrays, sizes, scalars)
        expected = compute_reference(ref, inputs)
        for t in kernel.outputs:
            err = rel_error(outputs[t.name], expected[t.name])
            ok = err <= output_tolerance(ref, t.dtype)
            result["pass"] &= ok
            result.setdefault("rel_error", {})[t.name] = err
            lines.append(f"  check {t.name}: rel error {err:.2e} {'PASS' if ok else 'FAIL'}")
        if not result["pass"]:
            result["text"] = "\n".join(lines + ["FAIL: wrong result, not timed"])
            return result
    ours = bench_cuda(kernel, program, sizes, scalars, inputs=arrays, reps=reps)
    result["median_ms"] = ours.median_ms
    result["spread"] = ours.spread
    work = ref.work(sizes) if ref is not None and hasattr(ref, "work") else {}
    lines.append(f"  argus    {ours.median_ms:9.4f} ms{rate(work, ours.median_ms)}")
    if ref is not None and hasattr(ref, "baseline"):
        import torch

        dev = {n: torch.from_numpy(np.ascontiguousarray(v)).cuda() for n, v in arrays.items()}
        fn = ref.baseline(torch, dev)
        base = torch_time(fn, reps=reps)
        result["baseline_ms"] = base.median_ms
        result["ratio"] = base.median_ms / ours.median_ms
        lines.append(f"  baseline {base.median_ms:9.4f} ms{rate(work, base.median_ms)}"
                     f"  ({getattr(ref, 'BASELINE_NAME', 'library')})")
        lines.append(f"  ratio (baseline time / argus time): {result['ratio']:.3f}")
    result["text"] = "\n".join(lines)
    return result


def rate(work: dict, ms: float) -> str:
    if "flops" in work:
        return f"  {work['flops'] / ms / 1e9:8.1f} TFLOP/s"
    if "bytes" in work:
        return f"  {work['bytes'] / ms / 1e6:8.1f} GB/s"
    return ""
