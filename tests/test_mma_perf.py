"""The tensor-core GEMM's performance options and packed conversions, on the CPU:

* f32 -> bf16 / f16 rounding of the interpreter (`semantics.round_to`) against an independent
  round-to-nearest-even written here from the formats' definitions (exact arithmetic on Python
  floats), on ties, subnormals, overflow and random bit patterns;
* the lowering's packed `cvt.rn.{bf16x2,f16x2}.f32` (two values per instruction, the first
  source in the upper half) run by the PTX simulator bit for bit against the interpreter, an odd
  value left over included;
* specs/gemm_bf16_mma.arg with an 8-warp grid (WARPS_M x WARPS_N) and specs/gemm_bf16_mma_c16.arg
  (bf16 output) lowered, assembled and simulated against the interpreter on ragged shapes;
* bench/gemm_bf16_verified.json (the bench's per-variant verification record) is current.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from argus_verify import semantics
from argus_verify.frontend import compile_file, compile_source
from argus_verify.lowering.ptx import lower
from argus_verify.lowering.ptxas import assemble, ptxas_available
from argus_verify.reference import make_inputs
from argus_verify.runtime.interp import run as interp_run
from argus_verify.testing.ptxsim import run_lowered

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "gemm_bf16_mma.arg"
SPEC_C16 = ROOT / "specs" / "gemm_bf16_mma_c16.arg"

# significand bits (with the implicit one), frexp exponent of the smallest normal, overflow bound
FORMATS = {"bf16": (8, -125, 2.0 ** 128), "f16": (11, -13, 2.0 ** 16)}


def rne(x: float, dtype: str) -> float:
    """x rounded to the nearest `dtype` value, ties to even; beyond the largest finite -> inf."""
    if math.isnan(x) or math.isinf(x) or x == 0.0:
        return x
    bits, emin, limit = FORMATS[dtype]
    _, e = math.frexp(x)  # |x| = m 2^e, 0.5 <= m < 1
    ulp = 2.0 ** (max(e, emin) - bits)
    r = round(x / ulp) * ulp  # x / ulp is exact (a power-of-two scaling); round() ties to even
    if abs(r) >= limit:
        return math.copysign(math.inf, x)
    return math.copysign(r, x)  # -0.0 stays negative


def f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def special_values() -> list:
    one = 1.0
    vals = [0.0, -0.0, math.inf, -math.inf, one, -one, 3.0e38, 3.4028234e38, -3.4028234e38, 65504.0, 65519.0,
            65520.0, 65536.0, 1e-40, -1e-40, f32(1), f32(0x00800000), f32(0x007FFFFF), 6.0e-8, 3.0e-8, 5.9604645e-08,
            2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14, 2.0 ** -15 * 1.0009765625]
    for k in (7, 8, 10, 11):  # exact ties and their neighbours for both formats
        for m in (1, 3, 5):
            t = one + m * 2.0 ** -(k + 1)
            vals += [t, -t, np.nextafter(np.float32(t), np.float32(2)), np.nextafter(np.float32(t), np.float32(0))]
    # bf16 ties between the two largest finite values and at the overflow threshold
    vals += [f32(0x7F7F8000), f32(0x7F7F7FFF), f32(0x7F7E8000), f32(0x7F7F0000)]
    return [float(np.float32(v)) for v in vals]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_interpreter_rounding_is_round_to_nearest_even(dtype):
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, size=4000, dtype=np.uint64).astype(np.uint32)
    xs = bits.view(np.float32)
    xs = np.concatenate([xs[np.isfinite(xs)], np.array(special_values(), dtype=np.float32)])
    got = np.asarray(semantics.round_to(xs, dtype)).astype(np.float64)
    want = np.array([rne(float(x), dtype) for x in xs], dtype=np.float64)
    bad = [(float(x), g, w) for x, g, w in zip(xs, got, want, strict=True)
           if not (g == w and math.copysign(1, g) == math.copysign(1, w))]
    assert not bad, bad[:5]
    assert np.isnan(semantics.round_to(np.array([np.nan], dtype=np.float32), dtype)).all()


def test_independent_rounding_knows_the_ties():
    """The reference itself: 1 + 2^-8 is halfway between two bf16 values and goes to the even one."""
    assert rne(1.0 + 2.0 ** -8, "bf16") == 1.0
    assert rne(1.0 + 3 * 2.0 ** -8, "bf16") == 1.0 + 2.0 ** -6
    assert rne(65520.0, "f16") == math.inf and rne(65519.0, "f16") == 65504.0
    assert rne(2.0 ** -25, "f16") == 0.0 and rne(1.5 * 2.0 ** -25, "f16") == 2.0 ** -24


CASTS = """
kernel packed(x: f32[N]) -> (h: bf16[N], g: f16[N], y: f32[N]):
    grid(cdiv(N, 384))
    block(128)
    base = block_id.x * 384
    v = load(x[base : base + 384], tv=(128, 3):(3, 1), mask=True)
    hb = cast(v, bf16)
    store(h[base : base + 384], hb, mask=True)
    store(g[base : base + 384], cast(v, f16), mask=True)
    store(y[base : base + 384], cast(hb, f32), mask=True)
"""


def test_packed_conversion_lowers_to_cvt_x2_and_runs_bit_for_bit():
    kernel = compile_source(CASTS, "packed.arg")
    lk = lower(kernel)
    # three values per thread: one packed pair and one scalar conversion per destination type
    assert lk.ptx.count("cvt.rn.bf16x2.f32") == 1 and lk.ptx.count("cvt.rn.f16x2.f32") == 1
    assert lk.ptx.count("cvt.rn.bf16.f32") == 1 and lk.ptx.count("cvt.rn.f16.f32") == 1
    if ptxas_available():
        assemble(lk.ptx)
    n = 700
    rng = np.random.default_rng(1)
    specials = np.array(special_values(), dtype=np.float32)
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    x[: len(specials)] = specials
    x[len(specials): len(specials) + 40] = np.float32(1.0) + np.float32(2.0 ** -8) * rng.integers(0, 8, 40)
    got = run_lowered(lk, {"x": x}, {"N": n}, {}, None)
    want = interp_run(kernel, {"x": x}, {"N": n}, {})
    for name in ("h", "g", "y"):
        a, b = np.asarray(got[name], dtype=np.float64), np.asarray(want[name], dtype=np.float64)
        np.testing.assert_array_equal(a, b, err_msg=name)  # a swapped pair moves values: caught here
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=name)
    np.testing.assert_array_equal(np.asarray(want["h"], dtype=np.float64),
                                  np.array([rne(float(v), "bf16") for v in x]))


def simulate_against_interpreter(spec: Path, consts: dict, sizes: dict):
    kernel = compile_file(spec, consts)
    lk = lower(kernel)
    if ptxas_available():
        assemble(lk.ptx)
    inputs = make_inputs(kernel, sizes, np.random.default_rng(3))
    got = run_lowered(lk, dict(inputs), sizes, {}, None)["C"]
    want = interp_run(kernel, dict(inputs), sizes, {})["C"]
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64))
    ref = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
    return kernel, lk, np.asarray(want, dtype=np.float64), ref


@pytest.mark.parametrize("consts", [{"BM": 64, "BN": 128, "WARPS_N": 4}, {"BM": 128, "BN": 64, "WARPS_M": 4}],
                         ids=["64x128_2x4w", "128x64_4x2w"])
def test_eight_warp_gemm_runs_as_the_interpreter(consts):
    kernel, lk, c, ref = simulate_against_interpreter(SPEC, consts, {"M": 50, "N": 60, "K": 40})
    assert kernel.block == 256 and lk.block == 256
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


def test_bf16_output_gemm_packs_the_epilogue_and_runs_as_the_interpreter():
    kernel, lk, c, ref = simulate_against_interpreter(SPEC_C16, {}, {"M": 40, "N": 36, "K": 40})
    assert "cvt.rn.bf16x2.f32" in lk.ptx and "cvt.rn.bf16.f32" not in lk.ptx
    assert np.array_equal(c, np.asarray(semantics.round_to(c, "bf16"), dtype=np.float64))  # C holds bf16 values
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 4e-3


def test_bench_verification_record_is_current():
    """Every variant bench/gemm_bf16.py times was proved on the CPU for today's spec text."""
    record = json.loads((ROOT / "bench" / "gemm_bf16_verified.json").read_text())
    assert record, "empty record"
    assert any(entry["spec"] == "specs/gemm_bf16_mma.arg" for entry in record.values())
    for key, entry in record.items():
        sha = hashlib.sha256((ROOT / entry["spec"]).read_bytes()).hexdigest()
        assert entry["spec_sha256"] == sha, (f"{key}: recorded for another spec text; rerun "
                                             "`python bench/gemm_bf16.py --record-verification`")
        assert not entry["not_proved"] and entry["contract"], (key, entry["counts"])
        proved, warned = entry["counts"].get("proved", 0), entry["counts"].get("warning", 0)
        assert proved + warned == entry["obligations"] >= 37, (key, entry["counts"])
        assert warned == len(entry.get("warnings", [])), key
