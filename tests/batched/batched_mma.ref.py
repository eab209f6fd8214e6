import numpy as np

SHAPES = {"L": 3, "M": 40, "N": 36, "K": 40}
TOLERANCE = 1e-5
def reference(A, B):
    return {"C": np.matmul(A.astype(np.float64), B.astype(np.float64))}
