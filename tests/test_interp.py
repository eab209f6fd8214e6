"""The numpy interpreter against every spec's reference, over random (ragged) shapes and inputs,
and its memory model: a missing barrier or wait must give a wrong answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.frontend import compile_file, compile_source
from argus_verify.reference import compute_reference, load_reference, make_inputs
from argus_verify.runtime.interp import run
from argus_verify.runtime.measure import rel_error, tolerance
from argus_verify.semantics import round_to

SPECS = Path(__file__).resolve().parent.parent / "specs"
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_spec(name: str, sizes: dict, seed: int, consts: dict | None = None) -> None:
    path = SPECS / f"{name}.arg"
    kernel = compile_file(path, consts)
    ref = load_reference(path)
    inputs = make_inputs(kernel, sizes, np.random.default_rng(seed), ref)
    outputs = run(kernel, inputs, sizes)
    expected = compute_reference(ref, inputs)
    for out in kernel.outputs:
        assert not np.isnan(outputs[out.name]).any(), f"{name}: unwritten output elements at {sizes}"
        err = rel_error(outputs[out.name], expected[out.name])
        assert err <= tolerance(out.dtype), f"{name} {sizes}: rel error {err}"


@SETTINGS
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**31))
def test_vecadd(n, seed):
    check_spec("vecadd", {"N": n}, seed)


@SETTINGS
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**31), block=st.sampled_from([256, 512, 2048]))
def test_vecadd_other_block_sizes(n, seed, block):
    check_spec("vecadd", {"N": n}, seed, {"BLOCK": block})


@SETTINGS
@given(m=st.integers(1, 100), n=st.integers(1, 100), seed=st.integers(0, 2**31))
def test_transpose_smem(m, n, seed):
    check_spec("transpose_smem", {"M": m, "N": n}, seed)


@SETTINGS
@given(m=st.integers(1, 20), n=st.integers(1, 2500), seed=st.integers(0, 2**31))
def test_reduce_sum(m, n, seed):
    check_spec("reduce_sum", {"M": m, "N": n}, seed)


@SETTINGS
@given(m=st.integers(1, 40), n=st.integers(1, 1024), seed=st.integers(0, 2**31))
def test_row_softmax(m, n, seed):
    check_spec("row_softmax", {"M": m, "N": n}, seed)


@SETTINGS
@given(m=st.integers(1, 130), n=st.integers(1, 130), k=st.integers(1, 70), seed=st.integers(0, 2**31))
def test_gemm_simt(m, n, k, seed):
    check_spec("gemm_simt", {"M": m, "N": n, "K": k}, seed)


@SETTINGS
@given(m=st.integers(1, 130), n=st.integers(1, 130), k=st.integers(1, 70), seed=st.integers(0, 2**31))
def test_gemm_simt_double_buffered(m, n, k, seed):
    check_spec("gemm_simt_db", {"M": m, "N": n, "K": k}, seed)


def test_gemm_simt_other_tiles():
    check_spec("gemm_simt", {"M": 100, "N": 70, "K": 40}, 1, {"BM": 32, "BN": 64, "BK": 8, "TM": 2, "TN": 4})


def test_gemm_256_is_fast_enough():
    import time

    t0 = time.perf_counter()
    check_spec("gemm_simt", {"M": 256, "N": 256, "K": 256}, 3)
    assert time.perf_counter() - t0 < 20  # "a few seconds" on this 2-core machine; generous for CI


def spec_without(name: str, needle: str) -> str:
    text = (SPECS / f"{name}.arg").read_text()
    assert needle in text
    return text.replace(needle, "pass", 1)


def test_missing_barrier_gives_wrong_result():
    kernel = compile_source(spec_without("transpose_smem", "barrier()"), "t.arg")
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    out = run(kernel, {"x": x}, {"M": 64, "N": 64})["out"]
    # each thread sees only its own writes: most of the tile is stale (NaN)
    assert np.isnan(out).mean() > 0.5


def test_missing_barrier_in_gemm_gives_wrong_result():
    text = (SPECS / "gemm_simt.arg").read_text()
    first = text.index("        barrier()\n")
    text = text[:first] + "        pass\n" + text[first + len("        barrier()\n"):]
    kernel = compile_source(text, "g.arg")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    out = run(kernel, {"A": a, "B": b}, {"M": 64, "N": 64, "K": 32})["C"]
    assert rel_error(out, a.astype(np.float64) @ b) > 1e-3


ASYNC = """
kernel stage(x: f32[N]) -> y: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    base = block_id.x * 256
    s = shared(f32[256])
    copy_async(s, x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    commit()
    {wait}
    v = load(s, tv=(256, 1):(1, 0))
    store(y[base : base + 256], v, mask=True)
"""


def test_async_copy_lands_only_after_wait():
    x = np.arange(512, dtype=np.float32) + 1
    good = compile_source(ASYNC.format(wait="wait(0)"), "a.arg")
    assert np.array_equal(run(good, {"x": x}, {"N": 512})["y"], x)
    early = compile_source(ASYNC.format(wait="pass"), "b.arg")
    assert np.isnan(run(early, {"x": x}, {"N": 512})["y"]).all()
    # wait(1) leaves the one committed group in flight: still not there
    pending = compile_source(ASYNC.format(wait="wait(1)"), "c.arg")
    assert np.isnan(run(pending, {"x": x}, {"N": 512})["y"]).all()


def test_unmasked_out_of_bounds_access_is_a_fault():
    text = (SPECS / "vecadd.arg").read_text().replace(", mask=True)", ")")
    kernel = compile_source(text, "v.arg")
    x = np.ones(1000, dtype=np.float32)
    msg = r"out-of-bounds access x\[1000\] \(shape \[1000\]\) by block \(0, 0, 0\), thread 250 \(warp 7, lane 26\)"
    with pytest.raises(ArgusRuntimeError, match=msg):
        run(kernel, {"x": x, "y": x}, {"N": 1000})


def test_barrier_under_divergent_branch_is_a_fault():
    text = (SPECS / "transpose_smem.arg").read_text().replace(
        "    barrier()", "    if thread_id < 128:\n        barrier()")
    kernel = compile_source(text, "d.arg")
    x = np.ones((32, 32), dtype=np.float32)
    with pytest.raises(ArgusRuntimeError, match="barrier reached by only some threads"):
        run(kernel, {"x": x}, {"M": 32, "N": 32})


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=-2.0**127, max_value=2.0**127, width=32))
def test_bf16_rounding_is_nearest_even(x):
    # (beyond bf16's largest finite value + half an ulp, IEEE rounding overflows to inf)
    r = float(round_to(np.float32(x), "bf16"))
    bits = np.float32(r).view(np.uint32)
    assert bits & 0xFFFF == 0  # a bf16 value
    # no bf16 value is closer to x than r
    with np.errstate(over="ignore"):
        up = (np.uint32(bits) + np.uint32(0x10000)).view(np.float32)
        down = (np.uint32(bits) - np.uint32(0x10000)).view(np.float32)
    for other in (up, down):
        if np.isfinite(other):
            assert abs(float(other) - x) >= abs(r - x) - 1e-45
