"""The contract's values at a witness's sizes (argus_verify.reference.evaluate_contract), computed
slice by slice of the first output index so that a large witness (a persistent GEMM's, thousands
wide) is still checked: every slicing gives the values of the whole evaluation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_verify import reference
from argus_verify.frontend import compile_file

ROOT = Path(__file__).resolve().parents[1]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["gemm_simt", "vecadd"]), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40),
       st.integers(1, 5000))
def test_slices_of_the_first_index_give_the_whole_contract(name, m, n, k, cells):
    kernel = compile_file(ROOT / "specs" / f"{name}.arg")
    sizes = dict(zip(kernel.sizes, (m, n, k), strict=False))
    inputs = reference.make_inputs(kernel, sizes, np.random.default_rng(1))
    (contract,) = kernel.contracts
    whole = reference.evaluate_contract(kernel, contract, inputs, sizes)
    saved = reference.CONTRACT_CELLS
    reference.CONTRACT_CELLS = cells  # a slice of a few rows (or one) at a time
    try:
        sliced = reference.evaluate_contract(kernel, contract, inputs, sizes)
    finally:
        reference.CONTRACT_CELLS = saved
    assert whole is not None and sliced is not None
    np.testing.assert_array_equal(sliced, whole)
    if name == "gemm_simt":
        a, b = (np.asarray(inputs[t], dtype=np.float64) for t in ("A", "B"))
        np.testing.assert_allclose(whole, a @ b, rtol=1e-12, atol=1e-12)
