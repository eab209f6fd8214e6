"""Kernel references: `NAME.ref.py` beside `NAME.arg` gives `SHAPES` and `reference(**inputs)`.

A reference file may also define `make_inputs(sizes, rng) -> dict` for inputs that are not plain
standard-normal floats, and `TOLERANCE` to tighten the dtype's default.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError
from argus_verify.semantics import round_to


def reference_path(kernel_path: str | Path) -> Path:
    p = Path(kernel_path)
    return p.with_name(p.name[: -len(p.suffix)] + ".ref.py") if p.suffix else p.with_name(p.name + ".ref.py")


def load_reference(kernel_path: str | Path) -> ModuleType | None:
    path = reference_path(kernel_path)
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"argus_ref_{path.stem.replace('.', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    # a reference may import helper modules that sit beside it (specs/gemm_reference.py)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # a broken reference file is bad input, not a crash
        raise ArgusError(f"cannot load reference {path}: {type(e).__name__}: {e}") from None
    finally:
        sys.path.remove(str(path.parent))
    if not hasattr(mod, "reference"):
        raise ArgusError(f"reference file {path} defines no reference(...) function")
    return mod


def default_sizes(kernel: ir.Kernel, ref: ModuleType | None) -> dict[str, int]:
    shapes = dict(getattr(ref, "SHAPES", {}) or {})
    return {s: int(shapes[s]) for s in kernel.sizes if s in shapes}


def make_inputs(kernel: ir.Kernel, sizes: dict, rng: np.random.Generator, ref: ModuleType | None = None) -> dict:
    """Fresh random inputs (standard normal; never zeros), or the reference's own generator."""
    if ref is not None and hasattr(ref, "make_inputs"):
        return dict(ref.make_inputs(dict(sizes), rng))
    shapes = ir.tensor_shapes(kernel, sizes)
    out: dict = {}
    for t in kernel.inputs:
        if ir.is_float(t.dtype):
            out[t.name] = round_to(rng.standard_normal(shapes[t.name]), t.dtype)
        else:
            out[t.name] = rng.integers(0, 100, size=shapes[t.name]).astype(ir.numpy_dtype(t.dtype))
    for p in kernel.params:
        if isinstance(p, ir.ScalarParam):
            out[p.name] = float(rng.standard_normal()) if ir.is_float(p.dtype) else int(rng.integers(1, 8))
    return out


def compute_reference(ref: ModuleType, inputs: dict) -> dict:
    try:
        result = ref.reference(**inputs)
    except Exception as e:
        raise ArgusError(f"the reference raised {type(e).__name__}: {e}") from None
    if not isinstance(result, dict):
        raise ArgusError("reference(...) must return a dict of output arrays by name")
    return {k: np.asarray(v, dtype=np.float64) for k, v in result.items()}
