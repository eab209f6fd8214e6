"""Reference, baseline and default shapes shared by the GEMM specs (C = A @ B, fp32)."""

import numpy as np

SHAPES = {"M": 128, "N": 96, "K": 64}


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}

BASELINE_NAME = "torch.matmul fp32, TF32 off (cuBLAS SGEMM)"


def baseline(torch, inputs):
    torch.backends.cuda.matmul.allow_tf32 = False
    return lambda: torch.matmul(inputs["A"], inputs["B"])


def work(sizes):
    return {"flops": 2 * sizes["M"] * sizes["N"] * sizes["K"]}
