"""Every spec on the GPU against its float64 reference (several shapes, ragged ones included), and
against the numpy interpreter where the arithmetic is the same."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from argus_verify import ir, reference
from argus_verify.frontend import compile_file, compile_source
from argus_verify.runtime.measure import random_inputs, rel_error, tolerance

_kspec = importlib.util.spec_from_file_location("argus_gpu_kernels", Path(__file__).with_name("kernels.py"))
KERNELS = importlib.util.module_from_spec(_kspec)
_kspec.loader.exec_module(KERNELS)

pytestmark = pytest.mark.cuda

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"

# (spec, compile-time constants, shapes). Ragged shapes exercise masks, the scalar paths taken when
# a row length is not a multiple of the vector width, and partial tiles.
CASES = [
    ("vecadd", {}, [{"N": 100_000}, {"N": 1}, {"N": 1023}, {"N": 1024 * 300 + 5}]),
    ("vecadd", {"BLOCK": 512}, [{"N": 4097}, {"N": 2048}]),
    ("transpose_smem", {}, [{"M": 200, "N": 136}, {"M": 1, "N": 1}, {"M": 33, "N": 65},
                            {"M": 1024, "N": 2048}, {"M": 37, "N": 1001}]),
    ("row_softmax", {}, [{"M": 37, "N": 1000}, {"M": 1, "N": 1}, {"M": 64, "N": 1024}, {"M": 100, "N": 999},
                         {"M": 3, "N": 7}]),
    ("row_softmax", {"COLS": 256, "ROWS": 4}, [{"M": 50, "N": 256}, {"M": 9, "N": 130}]),
    ("reduce_sum", {}, [{"M": 64, "N": 3000}, {"M": 1, "N": 1}, {"M": 7, "N": 1025}, {"M": 128, "N": 4096}]),
    ("gemm_simt", {}, [{"M": 128, "N": 96, "K": 64}, {"M": 1, "N": 1, "K": 1}, {"M": 65, "N": 33, "K": 17},
                       {"M": 256, "N": 256, "K": 256}, {"M": 100, "N": 200, "K": 300}]),
    ("gemm_simt", {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
     [{"M": 256, "N": 384, "K": 128}, {"M": 130, "N": 129, "K": 37}]),
    ("gemm_pipelined", {}, [{"M": 128, "N": 96, "K": 80}, {"M": 1, "N": 1, "K": 1}, {"M": 65, "N": 33, "K": 17},
                            {"M": 256, "N": 256, "K": 256}, {"M": 100, "N": 200, "K": 300}]),
    ("gemm_pipelined", {"STAGES": 3}, [{"M": 130, "N": 70, "K": 50}]),
    ("gemm_simt_db", {}, [{"M": 128, "N": 96, "K": 64}, {"M": 1, "N": 1, "K": 1}, {"M": 65, "N": 33, "K": 17},
                          {"M": 256, "N": 256, "K": 256}, {"M": 100, "N": 200, "K": 300}]),
    ("gemm_pipelined", {"STAGES": 4}, [{"M": 64, "N": 64, "K": 33}]),
]

# kernels whose GPU arithmetic is exactly the interpreter's (data movement and one IEEE add)
EXACT = {"vecadd", "transpose_smem"}


def load_reference(name: str):
    return reference.load_reference(SPECS / f"{name}.arg")


def make_inputs(kernel: ir.Kernel, sizes: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    specs = []
    for t in kernel.inputs:
        shape = tuple(d.value if isinstance(d, ir.IConst) else sizes[d.name] for d in t.shape)
        specs.append((t.name, shape, np.float32 if t.dtype == "bf16" else ir.numpy_dtype(t.dtype)))
    return random_inputs(specs, rng)


def params():
    out = []
    for name, consts, shapes in CASES:
        for sizes in shapes:
            tag = ",".join(f"{k}={v}" for k, v in {**consts, **sizes}.items())
            out.append(pytest.param(name, consts, sizes, id=f"{name}[{tag}]"))
    return out


@pytest.mark.parametrize("name,consts,sizes", params())
def test_spec_matches_reference(name, consts, sizes):
    from argus_verify.pipeline import run_cuda

    kernel = compile_file(SPECS / f"{name}.arg", consts)
    if not all(ir.eval_int(r, sizes) for r in kernel.requires):
        pytest.skip("shape violates the kernel's requires")
    ref_mod = load_reference(name)
    for seed in (0, 1):  # fresh inputs each time: a lucky layout bug should not survive two draws
        inputs = make_inputs(kernel, sizes, seed)
        out = run_cuda(kernel, inputs, sizes)
        ref = ref_mod.reference(**inputs)
        for t in kernel.outputs:
            err = rel_error(out[t.name], ref[t.name])
            tol = getattr(ref_mod, "TOLERANCE", tolerance(t.dtype))
            assert err <= tol, f"{name} {sizes}: {t.name} rel error {err:.3g} > {tol:g}"


@pytest.mark.parametrize("name", ["vecadd", "transpose_smem", "row_softmax", "reduce_sum", "gemm_simt",
                                  "gemm_pipelined", "gemm_simt_db"])
def test_gpu_agrees_with_interpreter(name):
    from argus_verify.pipeline import run_cuda
    from argus_verify.runtime.interp import run as interp_run

    kernel = compile_file(SPECS / f"{name}.arg")
    sizes = dict(load_reference(name).SHAPES)
    inputs = make_inputs(kernel, sizes, 7)
    gpu = run_cuda(kernel, inputs, sizes)
    cpu = interp_run(kernel, inputs, sizes)
    for t in kernel.outputs:
        if name in EXACT:
            np.testing.assert_array_equal(gpu[t.name], cpu[t.name])
        else:
            # same formula, different rounding: ex2.approx, fma vs rounded adds, summation order
            assert rel_error(gpu[t.name], cpu[t.name].astype(np.float64)) <= 1e-6


def test_poisoned_outputs_are_overwritten():
    """A masked store that covers exactly the tensor leaves no NaN behind (poison is 0xFF bytes)."""
    from argus_verify.pipeline import run_cuda

    kernel = compile_file(SPECS / "vecadd.arg")
    sizes = {"N": 1029}
    inputs = make_inputs(kernel, sizes, 3)
    out = run_cuda(kernel, inputs, sizes)["out"]
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out, inputs["x"] + inputs["y"])


@pytest.mark.parametrize("name", sorted(KERNELS.KERNELS))
def test_feature_kernels_agree_with_interpreter(name):
    """Branches, shuffles, casts, unrolling, async copies, dynamic shared memory... on the GPU."""
    from argus_verify.pipeline import run_cuda
    from argus_verify.reference import make_inputs as ref_inputs
    from argus_verify.runtime.interp import run as interp_run

    src, consts, shapes = KERNELS.KERNELS[name]
    kernel = compile_source(src, f"{name}.arg", consts)
    for i, sizes in enumerate(shapes):
        inputs = ref_inputs(kernel, sizes, np.random.default_rng(i))
        scalars = {p.name: inputs.pop(p.name) for p in kernel.params if isinstance(p, ir.ScalarParam)}
        gpu = run_cuda(kernel, inputs, sizes, scalars)
        cpu = interp_run(kernel, inputs, sizes, scalars)
        for t in kernel.outputs:
            a, b = gpu[t.name].astype(np.float64), cpu[t.name].astype(np.float64)
            assert np.array_equal(np.isnan(a), np.isnan(b)), f"{name} {sizes}: {t.name} written differently"
            m = ~np.isnan(b)
            assert rel_error(a[m], b[m]) <= 1e-6, f"{name} {sizes}: {t.name}"
