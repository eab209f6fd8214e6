"""runtime.measure (pure numpy) and the GPU-free surface of runtime.cuda."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from argus_verify.runtime.measure import Timing, random_inputs, rel_error, summarize, tolerance

# ---------------------------------------------------------------- rel_error


def test_rel_error_identical_is_zero() -> None:
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    assert rel_error(a, a.copy()) == 0.0


def test_rel_error_value() -> None:
    ref = np.array([3.0, 4.0])  # norm 5
    out = np.array([3.0, 5.0])  # diff norm 1
    assert rel_error(out, ref) == pytest.approx(0.2)


def test_rel_error_nan_and_inf_are_inf() -> None:
    ref = np.ones(8, dtype=np.float32)
    out = ref.copy()
    out[3] = np.nan
    assert rel_error(out, ref) == math.inf
    out[3] = np.inf
    assert rel_error(out, ref) == math.inf
    # The point of inf: a NaN result must fail every tolerance check.
    assert not rel_error(np.full(8, np.nan, np.float32), ref) <= tolerance("f32")


def test_rel_error_zero_reference_uses_absolute_norm() -> None:
    ref = np.zeros(4)
    assert rel_error(np.zeros(4), ref) == 0.0
    assert rel_error(np.array([0.0, 3.0, 4.0, 0.0]), ref) == pytest.approx(5.0)


def test_rel_error_computes_in_float64() -> None:
    # In float16 the difference 2049 - 2048 is not even representable; float64 sees it.
    ref = np.array([2048.0], dtype=np.float64)
    out = np.array([2049.0], dtype=np.float64)
    assert rel_error(out, ref) == pytest.approx(1 / 2048)
    # float16 inputs are upcast before subtracting, so no overflow in the norm either.
    big = np.full(1000, 60000.0, dtype=np.float16)
    assert rel_error(big, big.astype(np.float64)) == 0.0


def test_rel_error_shape_mismatch_and_bad_ref() -> None:
    with pytest.raises(ValueError):
        rel_error(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        rel_error(np.zeros(2), np.array([1.0, np.nan]))


# ---------------------------------------------------------------- tolerance


def test_tolerance_values_and_ordering() -> None:
    assert tolerance("f64") == 1e-12
    assert tolerance("f32") == 1e-5
    assert tolerance("f16") == 2e-3
    assert tolerance("bf16") == 1e-2
    assert tolerance("f64") < tolerance("f32") < tolerance("f16") < tolerance("bf16")


def test_tolerance_aliases() -> None:
    assert tolerance("float32") == tolerance(np.float32) == tolerance(np.dtype("float32"))
    assert tolerance("half") == tolerance("float16") == tolerance(np.float16)
    assert tolerance("bfloat16") == tolerance("BF16")
    with pytest.raises(ValueError):
        tolerance("int8")


# ---------------------------------------------------------------- random_inputs


def test_random_inputs_shapes_dtypes_nonzero() -> None:
    specs = [
        ("a", (64, 32), np.float32),
        ("b", (4096,), np.float16),
        ("c", (3, 5, 7), np.float64),
        ("idx", (100,), np.int32),
        ("u", (100,), np.uint32),
    ]
    ins = random_inputs(specs, np.random.default_rng(0))
    assert list(ins) == ["a", "b", "c", "idx", "u"]
    for name, shape, dtype in specs:
        arr = ins[name]
        assert arr.shape == shape
        assert arr.dtype == np.dtype(dtype)
        assert arr.flags.c_contiguous
        assert np.all(arr != 0), name
    assert np.all(ins["u"] > 0)
    # Standard normal: roughly zero mean, unit spread.
    assert abs(float(ins["a"].mean())) < 0.1
    assert 0.9 < float(ins["a"].std()) < 1.1


def test_random_inputs_never_zero_even_when_underflowing() -> None:
    # 1e6 standard normals contain values below float16's smallest subnormal (~6e-8) only rarely,
    # so force the case: a generator whose normals are all tiny.
    class TinyRng:
        def standard_normal(self, shape):
            return np.full(shape, 1e-30) * np.where(np.arange(np.prod(shape)) % 2, 1, -1).reshape(shape)

    ins = random_inputs([("h", (10,), np.float16)], TinyRng())  # type: ignore[arg-type]
    assert np.all(ins["h"] != 0)
    assert set(np.sign(ins["h"].astype(np.float64)).tolist()) == {-1.0, 1.0}


def test_random_inputs_deterministic_and_rejects_duplicates() -> None:
    specs = [("x", (16,), np.float32), ("y", (16,), np.float32)]
    a = random_inputs(specs, np.random.default_rng(7))
    b = random_inputs(specs, np.random.default_rng(7))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], a["y"])
    with pytest.raises(ValueError):
        random_inputs([("x", (1,), np.float32), ("x", (1,), np.float32)], np.random.default_rng(0))


# ---------------------------------------------------------------- summarize


def test_summarize() -> None:
    t = summarize([2.0, 1.0, 3.0, 10.0, 2.5])
    assert isinstance(t, Timing)
    assert t.median_ms == 2.5
    assert (t.min_ms, t.max_ms, t.runs) == (1.0, 10.0, 5)
    assert t.spread == pytest.approx((10.0 - 1.0) / 2.5)


def test_summarize_single_and_errors() -> None:
    t = summarize([0.5])
    assert (t.median_ms, t.runs, t.spread) == (0.5, 1, 0.0)
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])


# ---------------------------------------------------------------- runtime.cuda without a GPU


def test_cuda_module_imports_without_pycuda() -> None:
    from argus_verify.runtime import cuda as rc
    if importlib.util.find_spec("pycuda") is None:
        assert rc.cuda_available() is False
    else:
        assert isinstance(rc.cuda_available(), bool)  # never raises, whatever the machine


def test_rotations_for() -> None:
    from argus_verify.runtime.cuda import H200_L2_BYTES, rotations_for

    assert H200_L2_BYTES == 60 * 2**20
    # Big sets: one already exceeds 3x L2.
    assert rotations_for(1 << 30) == 1
    assert rotations_for(3 * H200_L2_BYTES) == 1
    # Just under 3x L2 needs two sets.
    assert rotations_for(3 * H200_L2_BYTES - 1) == 2
    # Medium: ceil(3 * 60 MiB / 16 MiB) = 12.
    assert rotations_for(16 * 2**20) == 12
    # Tiny sets are capped at 16 (cannot beat the cache, but do not allocate without bound).
    assert rotations_for(4096) == 16
    # Total of the chosen sets reaches 3x L2 whenever the cap allows.
    for size in (1 << 20, 5 << 20, 7 << 20, 50 << 20, 200 << 20):
        n = rotations_for(size)
        assert 1 <= n <= 16
        assert n * size >= 3 * H200_L2_BYTES or n == 16
    assert rotations_for(8 << 20, l2_bytes=1 << 20) == 1
    with pytest.raises(ValueError):
        rotations_for(0)
