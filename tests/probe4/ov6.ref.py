import numpy as np

SHAPES = {"M": 37, "N": 100}
def reference(x):
    return {"out": x.astype(np.float64).sum(axis=1)}
