"""Reference, baseline and default shapes for gemm_bf16_wgmma.arg: C = A @ B from bf16 inputs, in
float64 (products of bf16 values are exact in f32; the kernel accumulates in f32)."""

import numpy as np

SHAPES = {"M": 150, "N": 200, "K": 328}
# f32 accumulation of K products of magnitude ~1: relative error ~ K * 2^-24 at worst
TOLERANCE = 1e-5


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}


BASELINE_NAME = "torch.matmul bf16 (cuBLAS), f32 output"


def baseline(torch, inputs):
    return lambda: torch.matmul(inputs["A"], inputs["B"])


def work(sizes):
    return {"flops": 2 * sizes["M"] * sizes["N"] * sizes["K"]}
