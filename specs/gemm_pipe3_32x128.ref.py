"""Reference and default shapes for gemm_pipe3_32x128.arg: C = A @ B in float64."""

import numpy as np

SHAPES = {"M": 80, "N": 200, "K": 72}


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}
