import numpy as np

SHAPES = {"M": 7, "N": 300}


def make_inputs(sizes, rng):
    x = rng.standard_normal((sizes["M"], sizes["N"])).astype(np.float32)
    x[:, 1::2] = -np.abs(x[:, 1::2]) - 1
    return {"x": x}


def reference(x):
    return {"out": x.astype(np.float64).max(axis=0)}
