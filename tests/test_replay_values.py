"""The witness check names an input element by its value only when that value is unique."""

import numpy as np

from argus_verify.replay import find_unique_in_inputs


def test_a_unique_value_names_its_element():
    a = np.array([[1.5, 2.5], [3.5, 4.5]], dtype=np.float32)
    assert find_unique_in_inputs(3.5, {"A": a}) == "A[1, 0]"


def test_a_repeated_value_names_nothing():
    # bf16-rounded inputs repeat values: the element behind a value is then unknown
    a = np.array([1.0, 2.0], dtype=np.float32)
    b = np.array([2.0, 3.0], dtype=np.float32)
    assert find_unique_in_inputs(2.0, {"A": a, "B": b}) is None
    assert find_unique_in_inputs(1.0, {"A": np.array([1.0, 1.0], dtype=np.float32)}) is None
    assert find_unique_in_inputs(np.nan, {"A": a}) is None
