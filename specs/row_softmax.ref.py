"""Reference and default shapes for row_softmax.arg."""

import numpy as np

SHAPES = {"M": 37, "N": 1000}


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": e / e.sum(axis=1, keepdims=True)}

BASELINE_NAME = "torch.softmax"


def baseline(torch, inputs):
    return lambda: torch.softmax(inputs["x"], dim=1)


def work(sizes):
    return {"bytes": 8 * sizes["M"] * sizes["N"]}
