"""Reference, baseline and default shapes for gemm_bf16_mma_c16.arg: C = A @ B from bf16 inputs, in
float64; the kernel accumulates in f32 and rounds C to bf16 (relative error up to 2^-9 per element)."""

from gemm_reference import reference, work  # C = A @ B in float64, 2 M N K flops

__all__ = ["BASELINE_NAME", "SHAPES", "TOLERANCE", "baseline", "reference", "work"]

SHAPES = {"M": 100, "N": 72, "K": 88}
# bf16 output: each element rounded to 8 significant bits (relative error <= 2^-9 ~ 2e-3)
TOLERANCE = 4e-3

BASELINE_NAME = "torch.matmul bf16 (cuBLAS), bf16 output"


def baseline(torch, inputs):
    return lambda: torch.matmul(inputs["A"], inputs["B"])
