"""Reference and default shapes for transpose_smem.arg."""

SHAPES = {"M": 200, "N": 136}


def reference(x):
    return {"out": x.T.copy()}

BASELINE_NAME = "torch transpose + contiguous"


def baseline(torch, inputs):
    return lambda: inputs["x"].t().contiguous()


def work(sizes):
    return {"bytes": 8 * sizes["M"] * sizes["N"]}
