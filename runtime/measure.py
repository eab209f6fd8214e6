"""Correctness and timing arithmetic shared by the GPU runner and the benchmarks (numpy only, no GPU)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
import numpy as np

from argus_verify import ir

__all__ = ["Timing", "random_inputs", "rel_error", "summarize", "tolerance"]


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative error ``||out - ref||_2 / ||ref||_2`` over all elements, computed in float64.

    * Any NaN in ``out`` gives ``inf`` (a NaN must never pass a tolerance check, and NaN compares
      false against every threshold, which would let ``err > tol`` silently succeed).
    * Any infinity in ``out`` likewise gives ``inf``.
    * If ``||ref|| == 0`` the absolute norm ``||out - ref||`` is returned instead.
    * A non-finite reference is a bug in the reference, so it raises ValueError.
    """
    o = np.asarray(out).astype(np.float64, copy=False)
    r = np.asarray(ref).astype(np.float64, copy=False)
    if o.shape != r.shape:
        raise ValueError(f"shape mismatch: out {o.shape} vs ref {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("reference contains NaN or inf")
    if not np.all(np.isfinite(o)):
        return float("inf")
    diff = float(np.linalg.norm((o - r).ravel()))
    denom = float(np.linalg.norm(r.ravel()))
    if denom == 0.0:
        return diff
    return diff / denom


# Why these numbers: the bound is on a *relative 2-norm* error of a result computed in the given
# storage/compute precision against a float64 reference, for the modest reduction lengths (<~1e4) of
# our kernels. Unit roundoff u is 6e-8 (f32), 4.9e-4 (f16), 3.9e-3 (bf16), 1.1e-16 (f64); accumulated
# rounding of a length-K dot product grows like sqrt(K)*u in practice, so a few hundred u is the budget.
# f32 is 1e-5, not the ~3e-4 TF32 tensor cores would need: our f32 kernels compute in true fp32 (no
# tf32 mma), so anything worse than 1e-5 is a bug, not rounding.
_TOLERANCES: dict[str, float] = {
    "float64": 1e-12,
    "float32": 1e-5,
    "float16": 2e-3,
    "bfloat16": 1e-2,
}
_ALIASES: dict[str, str] = {
    "f64": "float64",
    "fp64": "float64",
    "double": "float64",
    "f32": "float32",
    "fp32": "float32",
    "float": "float32",
    "f16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
}


def tolerance(dtype: str | np.dtype | type) -> float:
    """Relative-error tolerance for results computed in ``dtype`` (names like 'f32', 'bf16', 'float16')."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    try:
        return _TOLERANCES[key]
    except KeyError:
        raise ValueError(f"no tolerance defined for dtype {dtype!r}") from None


def output_tolerance(ref, dtype: str) -> float:
    """The relative error an output of `dtype` may have: 0 for integer outputs (they compare
    exactly), else the reference module's TOLERANCE or the dtype's default."""
    if not ir.is_float(dtype):
        return 0.0
    return float(getattr(ref, "TOLERANCE", None) or tolerance(dtype))


def random_inputs(
    specs: Iterable[tuple[str, Sequence[int], np.dtype | type | str]],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Standard-normal test inputs, one C-contiguous array per ``(name, shape, dtype)`` spec.

    No element is ever zero (checked *after* the cast, since tiny normals underflow in f16/bf16):
    zeros hide indexing bugs (an unread or wrongly-read zero contributes nothing to a sum) and make a
    poisoned-but-zeroed buffer look correct. Integer dtypes get ``round(4 * normal)`` with zeros moved
    to +-1 (non-negative for unsigned types). Specs are drawn in order, so the same seed gives the
    same arrays.
    """
    out: dict[str, np.ndarray] = {}
    for name, shape, dtype in specs:
        if name in out:
            raise ValueError(f"duplicate input name {name!r}")
        dt = np.dtype(dtype)
        shp = tuple(int(s) for s in shape)
        normal = rng.standard_normal(shp)
        if dt.kind == "b":
            raise ValueError(f"{name}: boolean inputs cannot be non-zero random data")
        if dt.kind in "iu":
            vals = np.rint(normal * 4.0)
            if dt.kind == "u":
                vals = np.abs(vals)
            signs = np.where(normal < 0, -1.0, 1.0) if dt.kind == "i" else 1.0
            vals = np.where(vals == 0, signs, vals)
            arr = vals.astype(dt)
        else:
            # Floating types, including ml_dtypes' bfloat16 (a numpy extension dtype).
            arr = normal.astype(dt)
            zero = arr.astype(np.float64) == 0.0
            if np.any(zero):
                arr[zero] = np.where(normal[zero] < 0, -1.0, 1.0).astype(dt)
        out[name] = np.ascontiguousarray(arr)
    return out


@attrs.frozen
class Timing:
    """Summary of repeated kernel timings, in milliseconds.

    ``spread`` is ``(max - min) / median``: a quick noise indicator (above ~0.1 the run was disturbed
    or too short to trust).
    """

    median_ms: float
    min_ms: float
    max_ms: float
    runs: int
    spread: float


def summarize(samples_ms: Iterable[float]) -> Timing:
    """Reduce raw per-run times (ms) to a Timing; the median is the reported figure (robust to outliers)."""
    s = np.asarray(list(samples_ms), dtype=np.float64)
    if s.size == 0:
        raise ValueError("no timing samples")
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("timing samples must be finite and non-negative")
    med = float(np.median(s))
    lo = float(s.min())
    hi = float(s.max())
    spread = (hi - lo) / med if med > 0 else (0.0 if hi == lo else float("inf"))
    return Timing(median_ms=med, min_ms=lo, max_ms=hi, runs=int(s.size), spread=spread)
