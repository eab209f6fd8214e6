"""Reference and default shapes for gemm_pad_inf_k.arg: C = A @ B (K not a multiple of BK shows the bug)."""

import numpy as np

SHAPES = {"M": 64, "N": 40, "K": 100}


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}
