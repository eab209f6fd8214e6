"""On the GPU: the tensor-core GEMM's warp-grid variants and bf16 output against float64 on ragged
shapes, and the packed f32 -> bf16x2 / f16x2 conversions bit for bit against the interpreter's
round-to-nearest-even (special values, ties; and the GEMM's own accumulators)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from argus_verify import semantics
from argus_verify.frontend import compile_file, compile_source
from argus_verify.runtime.measure import rel_error, tolerance

pytestmark = pytest.mark.cuda

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "gemm_bf16_mma.arg"
SPEC_C16 = ROOT / "specs" / "gemm_bf16_mma_c16.arg"

_spec = importlib.util.spec_from_file_location("argus_mma_perf_cpu", ROOT / "tests" / "test_mma_perf.py")
CPU = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CPU)

RAGGED = [{"M": 200, "N": 136, "K": 88}, {"M": 257, "N": 130, "K": 77}, {"M": 1, "N": 1, "K": 1}]
VARIANTS = [
    {"BM": 128, "BN": 128, "WARPS_N": 4},
    {"BM": 128, "BN": 128, "WARPS_M": 4},
    {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "WARPS_N": 4},
    {"BM": 128, "BN": 256, "STAGES": 3, "WARPS_N": 4},
    {"BM": 256, "BN": 128, "STAGES": 3, "WARPS_M": 4},
]


def bf16_inputs(sizes: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    m, n, k = sizes["M"], sizes["N"], sizes["K"]
    return {"A": semantics.round_to(rng.standard_normal((m, k), dtype=np.float32), "bf16"),
            "B": semantics.round_to(rng.standard_normal((k, n), dtype=np.float32), "bf16")}


@pytest.mark.parametrize("consts", VARIANTS, ids=lambda c: "_".join(f"{k}{v}" for k, v in c.items()))
def test_gemm_variant_matches_float64(consts):
    from argus_verify.pipeline import run_cuda

    kernel = compile_file(SPEC, consts)
    for i, sizes in enumerate(RAGGED):
        inputs = bf16_inputs(sizes, i)
        out = run_cuda(kernel, inputs, sizes)["C"]
        ref = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
        assert rel_error(out, ref) <= tolerance("f32"), (consts, sizes)


@pytest.mark.parametrize("consts", [{}, {"BM": 128, "BN": 128, "WARPS_N": 4}], ids=["defaults", "128x128_2x4w"])
def test_bf16_output_is_the_f32_output_rounded_to_nearest_even(consts):
    """Same tiling, same mma sequence: the bf16 C must be exactly RNE of the f32 C, element by element."""
    from argus_verify.pipeline import run_cuda

    k32, k16 = compile_file(SPEC, consts), compile_file(SPEC_C16, consts)
    for i, sizes in enumerate(RAGGED[:2]):
        inputs = bf16_inputs(sizes, 10 + i)
        c32 = run_cuda(k32, inputs, sizes)["C"]
        c16 = run_cuda(k16, inputs, sizes)["C"]
        np.testing.assert_array_equal(np.asarray(c16, dtype=np.float32), semantics.round_to(c32, "bf16"))
        ref = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
        assert rel_error(c16, ref) <= 4e-3


def test_packed_conversions_round_as_the_interpreter():
    from argus_verify.pipeline import run_cuda
    from argus_verify.runtime.interp import run as interp_run

    kernel = compile_source(CPU.CASTS, "packed.arg")
    n = 1000
    rng = np.random.default_rng(2)
    specials = np.array(CPU.special_values(), dtype=np.float32)
    x = (rng.standard_normal(n) * 1000).astype(np.float32)
    x[: len(specials)] = specials
    x[len(specials): len(specials) + 64] = np.float32(1.0) + np.float32(2.0 ** -8) * rng.integers(0, 16, 64)
    gpu = run_cuda(kernel, {"x": x}, {"N": n})
    cpu = interp_run(kernel, {"x": x}, {"N": n}, {})
    for name in ("h", "g", "y"):
        a, b = np.asarray(gpu[name], dtype=np.float64), np.asarray(cpu[name], dtype=np.float64)
        np.testing.assert_array_equal(a, b, err_msg=name)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=name)
