"""Reference, baseline and default shapes shared by the bf16-C Hopper GEMM specs of this folder:
C = A @ B from bf16 inputs in float64; the kernels accumulate in f32 and round C to bf16 (relative
error up to 2^-9 per element). Each spec's .ref.py imports it (the loader puts this folder on
sys.path, as specs/gemm_reference.py is for specs/)."""

import numpy as np

__all__ = ["BASELINE_NAME", "SHAPES", "TOLERANCE", "baseline", "reference", "work"]

SHAPES = {"M": 150, "N": 200, "K": 328}
# bf16 output: each element rounded to 8 significant bits (relative error <= 2^-9 ~ 2e-3)
TOLERANCE = 4e-3

BASELINE_NAME = "torch.matmul bf16 (cuBLAS), bf16 output"


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}


def baseline(torch, inputs):
    # the inputs arrive as float32 tensors (bf16 values): cuBLAS's bf16 GEMM takes bf16 ones
    a, b = inputs["A"].to(torch.bfloat16), inputs["B"].to(torch.bfloat16)
    return lambda: torch.matmul(a, b)


def work(sizes):
    return {"flops": 2 * sizes["M"] * sizes["N"] * sizes["K"]}
