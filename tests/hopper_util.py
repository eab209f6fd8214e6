"""What the Hopper GEMM tests share: bf16 inputs with their float64 product, the relative error,
ptxas for sm_90a, and one GEMM run on the GPU (skipped cleanly without torch, cuda-python or a GPU)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from argus_verify.frontend import compile_file
from argus_verify.lowering.ptx import lower
from argus_verify.semantics import round_to


def bf16_inputs(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (m x k) and B (k x n) holding bf16 values (as f32), and their product in float64."""
    rng = np.random.default_rng(seed)
    a = round_to(rng.standard_normal((m, k)).astype(np.float32), "bf16")
    b = round_to(rng.standard_normal((k, n)).astype(np.float32), "bf16")
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative 2-norm error; a NaN (an element never written) counts as a huge error, never as a pass."""
    return float(np.linalg.norm(np.nan_to_num(out, nan=1e30) - ref) / np.linalg.norm(ref))


def ptxas_sm90a(ptx: str, *flags: str) -> subprocess.CompletedProcess:
    """Assemble `ptx` for sm_90a (skips the test where ptxas is not installed); asserts it succeeded."""
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not installed")
    done = subprocess.run(["ptxas", "-arch=sm_90a", *flags, "-o", "/dev/null", "-"], input=ptx, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def gpu_gemm_error(spec: Path, m: int, n: int, k: int) -> float:
    """Run the GEMM `spec` (f32 C) on the GPU on random bf16 inputs, C poisoned with NaN first; its
    relative error against a float64 product (inf where an element stayed NaN)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("cuda.bindings")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from argus_verify.runtime.tma import TmaKernel

    kern = TmaKernel(lower(compile_file(str(spec))))
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda")
    kern({"A": a, "B": b, "C": c}, {"M": m, "N": n, "K": k})
    torch.cuda.synchronize()
    if torch.isnan(c).any():
        return float("inf")
    ref = a.double() @ b.double()
    return float((c.double() - ref).norm() / ref.norm())
