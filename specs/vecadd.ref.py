"""Reference and default shapes for vecadd.arg."""

SHAPES = {"N": 100_000}


def reference(x, y):
    return {"out": x + y}

BASELINE_NAME = "torch add"


def baseline(torch, inputs):
    return lambda: torch.add(inputs["x"], inputs["y"])


def work(sizes):
    return {"bytes": 12 * sizes["N"]}
