"""Reference, baseline and default shapes for gemm_bf16_wgmma_direct_prefetch.arg: the shared bf16-C GEMM reference
(gemm_bf16_c_reference.py)."""

from gemm_bf16_c_reference import BASELINE_NAME, SHAPES, TOLERANCE, baseline, reference, work

__all__ = ["BASELINE_NAME", "SHAPES", "TOLERANCE", "baseline", "reference", "work"]
