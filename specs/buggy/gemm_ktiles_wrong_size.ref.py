"""Reference and default shapes for gemm_ktiles_wrong_size.arg: C = A @ B (K > N shows the bug)."""

import numpy as np

SHAPES = {"M": 64, "N": 40, "K": 100}


def reference(A, B):
    return {"C": A.astype(np.float64) @ B.astype(np.float64)}
