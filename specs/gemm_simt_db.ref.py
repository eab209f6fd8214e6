"""Reference and default shapes for gemm_simt_db.arg: the GEMM reference of specs/gemm_reference.py."""

from gemm_reference import BASELINE_NAME, SHAPES, baseline, reference, work

__all__ = ["BASELINE_NAME", "SHAPES", "baseline", "reference", "work"]
