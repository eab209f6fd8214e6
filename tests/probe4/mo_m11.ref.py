import numpy as np

SHAPES = {"M": 37, "N": 100}
def reference(x):
    x = x.astype(np.float64)
    return {"s": x.sum(axis=1), "mx": x.max(axis=1), "y": x - x.max(axis=1, keepdims=True)}
