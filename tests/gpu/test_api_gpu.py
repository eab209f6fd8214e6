"""The Python API on the GPU (issue 11): NumPy arrays through the GPU, torch CUDA tensors
zero-copy on the current stream, PyCUDA GPUArrays, argument checks on devices, and a PyTorch
module calling an Argus kernel that matches torch on ragged shapes. Skipped without a GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import argus_verify
from argus_verify.api import CallError

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[2]
VECADD = ROOT / "specs" / "vecadd.arg"
SOFTMAX = ROOT / "specs" / "row_softmax.arg"
REDUCE = ROOT / "specs" / "reduce_sum.arg"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))


def test_numpy_runs_on_the_gpu():
    k = argus_verify.load(VECADD)
    x, y = (np.random.default_rng(i).standard_normal(100_003).astype(np.float32) for i in range(2))
    out = k(x, y, backend="cuda")
    assert isinstance(out, np.ndarray) and np.array_equal(out, x + y)
    assert np.array_equal(k(x, y), x + y)  # auto picks the GPU here


def test_torch_tensors_zero_copy():
    torch = pytest.importorskip("torch")
    k = argus_verify.load(VECADD)
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    out = k(x, y)
    assert out.is_cuda and out.dtype == torch.float32 and torch.equal(out, x + y)
    given = torch.empty(5000, device="cuda")
    ptr = given.data_ptr()
    assert k(x, y, out=given) is given and given.data_ptr() == ptr and torch.equal(given, x + y)


def test_torch_on_a_side_stream():
    torch = pytest.importorskip("torch")
    k = argus_verify.load(VECADD)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(1 << 20, device="cuda")
        y = x * 2  # queued on s before the kernel, which must see it
        out = k(x, y)
        z = out + 1  # queued after the kernel
    torch.cuda.synchronize()
    assert torch.equal(z, x * 3 + 1)


@pytest.mark.parametrize("make, message", [
    (lambda t: (t.randn(100), t.randn(100, device="cuda")), "'x' is on cpu"),
    (lambda t: (t.randn(100, device="cuda", dtype=t.float16), t.randn(100, device="cuda")),
     "'x' is f32: expected torch.float32, got torch.float16"),
    (lambda t: (t.randn(200, device="cuda")[::2], t.randn(100, device="cuda")), "'x' is not contiguous"),
    (lambda t: (np.zeros(100, np.float32), t.randn(100, device="cuda")), "arrays of different kinds"),
])
def test_torch_argument_errors(make, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(CallError, match=message.replace("(", r"\(").replace(")", r"\)")):
        argus_verify.load(VECADD)(*make(torch))


def test_pycuda_gpuarrays():
    gpuarray = pytest.importorskip("pycuda.gpuarray")
    from argus_verify.runtime.cuda import ensure_context

    ensure_context()
    k = argus_verify.load(VECADD)
    x, y = (np.random.default_rng(i).standard_normal(3000).astype(np.float32) for i in range(2))
    out = k(gpuarray.to_gpu(x), gpuarray.to_gpu(y))
    assert np.array_equal(out.get(), x + y)


def test_pytorch_module_matches_torch_on_ragged_shapes():
    torch = pytest.importorskip("torch")
    from argus_verify.torch import ArgusModule

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 1000)
            self.softmax = ArgusModule(SOFTMAX)

        def forward(self, h):
            return self.softmax(self.proj(h).contiguous())

    model = Head().cuda()
    with torch.no_grad():
        for rows in (1, 7, 8, 9, 37, 1001):
            h = torch.randn(rows, 64, device="cuda")
            got = model(h)
            want = torch.softmax(model.proj(h), dim=1)
            assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-6), rows


def test_pytorch_module_refuses_autograd():
    torch = pytest.importorskip("torch")
    from argus_verify.torch import ArgusModule

    m = ArgusModule(REDUCE)
    x = torch.randn(5, 333, device="cuda", requires_grad=True)
    with pytest.raises(CallError, match="no autograd"):
        m(x)
    with torch.no_grad():
        assert torch.allclose(m(x), x.sum(dim=1), rtol=1e-5, atol=1e-4)


def test_argus_test_compares_the_gpu(tmp_path):
    """On a GPU machine `argus test` runs every case on the GPU too and compares it with the
    interpreter, the simulator and the reference."""
    from argus_verify.reference import load_reference
    from argus_verify.testing import KernelFamily, run_case, search
    from argus_verify.testing.check import Case

    family, ref = KernelFamily(str(SOFTMAX)), load_reference(SOFTMAX)
    assert run_case(family, Case(consts={}, sizes={"M": 37, "N": 1000}, ptxsim=True), ref, gpu=True) == []
    result = search(family, ref, max_examples=20, gpu=True)
    assert result.failure is None and result.ran["GPU"] == result.examples
