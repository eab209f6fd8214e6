"""Reference, baseline and default shapes for gemm_bf16_mma.arg: C = A @ B from bf16 inputs, in
float64 (products of bf16 values are exact in f32; the kernel accumulates in f32)."""

from gemm_reference import reference, work  # C = A @ B in float64, 2 M N K flops

__all__ = ["BASELINE_NAME", "SHAPES", "TOLERANCE", "baseline", "reference", "work"]

SHAPES = {"M": 100, "N": 72, "K": 88}
# f32 accumulation of K products of magnitude ~1: relative error ~ K * 2^-24 at worst
TOLERANCE = 1e-5

BASELINE_NAME = "torch.matmul bf16 (cuBLAS), f32 output"


def baseline(torch, inputs):
    return lambda: torch.matmul(inputs["A"], inputs["B"])
