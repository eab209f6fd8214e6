"""GPU tests: every test here needs an NVIDIA GPU and pycuda, and is skipped cleanly without them."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _cuda() -> bool:
    from argus_verify.runtime.cuda import cuda_available

    return cuda_available()


@pytest.fixture(autouse=True)
def _needs_cuda():
    if not _cuda():
        pytest.skip("no CUDA device (or pycuda is not installed)")
