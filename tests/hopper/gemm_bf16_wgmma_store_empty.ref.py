"""Reference, baseline and default shapes for gemm_bf16_wgmma_store_empty.arg: C = A @ B from bf16 inputs
in float64; the kernel accumulates in f32 and rounds C to bf16 (relative error up to 2^-9 per
element)."""

import numpy as np

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
