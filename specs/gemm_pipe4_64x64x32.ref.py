"""Reference and default shapes for gemm_pipe4_64x64x32.arg: C = A @ B in float64."""

import numpy as np

SHAPES = {"M": 100, "N": 90, "K": 200}


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}
