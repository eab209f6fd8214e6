import numpy as np

SHAPES = {"M": 37, "N": 128}
def reference(x):
    x = x.astype(np.float64)
    mean = x.sum(axis=1, keepdims=True) / 128
    d = x - mean
    return {"out": d / np.sqrt((d*d).sum(axis=1, keepdims=True) / 128 + 1e-5)}
