import numpy as np

SHAPES = {"M": 37, "N": 128}
def reference(x):
    return {"out": (x.astype(np.float64) + 1.0).sum(axis=1)}
