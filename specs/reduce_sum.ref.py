"""Reference and default shapes for reduce_sum.arg."""

import numpy as np

SHAPES = {"M": 64, "N": 3000}


def reference(x):
    return {"out": np.sum(x.astype(np.float64), axis=1)}

BASELINE_NAME = "torch.sum"


def baseline(torch, inputs):
    return lambda: torch.sum(inputs["x"], dim=1)


def work(sizes):
    return {"bytes": 4 * sizes["M"] * sizes["N"]}
