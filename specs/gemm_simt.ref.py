"""Reference and default shapes for gemm_simt.arg."""

import numpy as np

SHAPES = {"M": 128, "N": 96, "K": 64}


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}
