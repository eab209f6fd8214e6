#!/usr/bin/env python3
"""The Python API on the GPU: `python3 bench/api_overhead.py` (needs a GPU, pycuda and torch).

Measures, for vecadd and row_softmax on torch CUDA tensors:

* the first call in a fresh process with an empty cache (verification, lowering, ptxas) and with a
  warm disk cache (a second process: module and verdict read from disk);
* the per-call host overhead of `kernel(x, y, out=out)` against `torch.add` / `torch.softmax` on
  small tensors (where launch overhead dominates), median of many calls, synchronised;
* correctness against torch on ragged shapes.

Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_CALL = """
import time, torch, argus_verify
x = torch.randn(100_000, device="cuda"); y = torch.randn(100_000, device="cuda"); torch.cuda.synchronize()
t = time.perf_counter()
k = argus_verify.load({path!r})
out = k(x, y); torch.cuda.synchronize()
print(time.perf_counter() - t, k.cache_hit)
"""


def first_calls(cache: str) -> list:
    env = {**os.environ, "ARGUS_CACHE_DIR": cache}
    out = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", FIRST_CALL.format(path=str(ROOT / "specs" / "vecadd.arg"))],
                              capture_output=True, text=True, env=env, timeout=600, check=True)
        seconds, hit = proc.stdout.split()
        out.append({"seconds": float(seconds), "cache_hit": hit == "True"})
    return out


def per_call(fn, reps: int = 2000) -> float:
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def main() -> None:
    import torch

    import argus_verify

    result: dict = {}
    with tempfile.TemporaryDirectory() as cache:
        result["first_call_vecadd"] = first_calls(cache)
    vecadd = argus_verify.load(ROOT / "specs" / "vecadd.arg")
    softmax = argus_verify.load(ROOT / "specs" / "row_softmax.arg")
    x, y, out = (torch.randn(4096, device="cuda") for _ in range(3))
    xs, outs = torch.randn(8, 1000, device="cuda"), torch.empty(8, 1000, device="cuda")
    vecadd(x, y, out=out)
    softmax(xs, out=outs)
    result["host_us_per_call"] = {
        "argus vecadd": per_call(lambda: vecadd(x, y, out=out)),
        "torch.add": per_call(lambda: torch.add(x, y, out=out)),
        "argus row_softmax": per_call(lambda: softmax(xs, out=outs)),
        "torch.softmax": per_call(lambda: torch.softmax(xs, dim=1)),
    }
    worst = 0.0
    for rows, cols in ((1, 1), (7, 33), (37, 1000), (1001, 999)):
        a = torch.randn(rows, cols, device="cuda")
        worst = max(worst, float((softmax(a) - torch.softmax(a, dim=1)).abs().max()))
    result["row_softmax_max_abs_error_vs_torch"] = worst
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
