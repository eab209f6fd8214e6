#!/usr/bin/env python3
"""The Hopper bf16 GEMM's steps timed in one process, next to cuBLAS, for BENCHMARKS.md's step table.

    python bench/hopper_steps.py [--out DIR] [--rounds 5] [--reps 20] [--shapes 2048x2048x2048,...] \
        STEP=SPEC[:CONST=V,...] ...

Each STEP is one spec (or a compile-time option of one). Every step is first checked on a ragged
shape against a float64 product (a wrong kernel is never timed). Then, per shape, the steps and
torch.matmul (cuBLAS, bf16 in, bf16 out) are timed in rounds: each round times every one of them
(runtime.cuda.torch_time: CUDA events around back-to-back launches, median of --reps after 10
warm-up launches), and a step's figure is the median over the rounds. Interleaving the rounds keeps
the GPU's clock and thermal drift out of the ratios: cuBLAS alone varied by 10% between calls of the
same session. Ratio = cuBLAS time / step time.
Prints the table last; writes hopper_steps.json under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096)]
CHECK_SHAPE = (257, 264, 200)
TOL = {"f32": 1e-5, "bf16": 8e-3}  # bf16 C: one rounding of each output (2**-8 relative at most)


def parse_step(text: str) -> tuple[str, str, dict]:
    name, _, rest = text.partition("=")
    spec, _, consts = rest.partition(":")
    out = {}
    for part in filter(None, consts.split(",")):
        k, v = part.split("=")
        out[k.strip()] = int(v)
    return name, spec, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("steps", nargs="+", help="NAME=SPEC[:CONST=V,...]")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--shapes", default="")
    ap.add_argument("--budget", type=float, default=0.0, help="stop starting new shapes after this many seconds")
    args = ap.parse_args()
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    from argus_verify.frontend import compile_file
    from argus_verify.lowering.ptx import lower
    from argus_verify.runtime.cuda import torch_time
    from argus_verify.runtime.tma import TmaKernel

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    steps, record = [], {"steps": [], "shapes": []}
    for text in args.steps:
        name, spec, consts = parse_step(text)
        kernel = compile_file(str(ROOT / spec), consts or None)
        kern = TmaKernel(lower(kernel))
        c_dtype = kernel.param("C").dtype
        m, n, k = CHECK_SHAPE
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
        torch_dtype = torch.float32 if c_dtype == "f32" else torch.bfloat16
        c = torch.full((m, n), float("nan"), device=dev, dtype=torch_dtype)
        kern({"A": a, "B": b, "C": c}, {"M": m, "N": n, "K": k})
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = float((c.double() - ref).norm() / ref.norm())
        ok = err < TOL[c_dtype] and not bool(torch.isnan(c).any())
        print(f"{name}: {spec} {consts or ''} C {c_dtype}, {kern.registers()} registers; check {m}x{n}x{k}: "
              f"rel err {err:.2e} -> {'OK' if ok else 'WRONG'}", flush=True)
        record["steps"].append({"name": name, "spec": spec, "consts": consts, "c_dtype": c_dtype,
                                "check_rel_err": err, "ok": ok})
        if ok:
            steps.append((name, kern, c_dtype))
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    table = []
    for (m, n, k) in shapes:
        if args.budget and time.perf_counter() - started > args.budget:
            print(f"{m}x{n}x{k}: skipped (budget used)", flush=True)
            continue
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
        runs = {}
        for name, kern, c_dtype in steps:
            c = torch.empty((m, n), device=dev, dtype=torch.float32 if c_dtype == "f32" else torch.bfloat16)
            prep = kern.prepare({"A": a, "B": b, "C": c}, {"M": m, "N": n, "K": k})
            runs[name] = (lambda kern=kern, prep=prep, m=m, n=n, k=k: kern.launch(prep, {"M": m, "N": n, "K": k}))
        runs["cuBLAS"] = lambda a=a, b=b: torch.matmul(a, b)
        per = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                per[name].append(torch_time(fn, reps=args.reps).median_ms)
        med = {name: statistics.median(v) for name, v in per.items()}
        flops = 2 * m * n * k
        row = {"shape": [m, n, k], "ms": med, "rounds": per,
               "tflops": {name: flops / t / 1e9 for name, t in med.items()},
               "ratio": {name: med["cuBLAS"] / t for name, t in med.items() if name != "cuBLAS"}}
        table.append(row)
        record["shapes"].append(row)
        print(f"{m}x{n}x{k}: " + ", ".join(f"{name} {t:.3f} ms" for name, t in med.items()), flush=True)
    (out / "hopper_steps.json").write_text(json.dumps(record, indent=1))
    names = [s[0] for s in steps]
    print("\n| step | " + " | ".join(f"{m}x{n}x{k}" for m, n, k in (r["shape"] for r in table)) + " |")
    print("|---|" + "---|" * len(table))
    for name in names + ["cuBLAS"]:
        cells = []
        for r in table:
            tf = r["tflops"][name]
            cells.append(f"{tf:.0f} TF/s" + (f", {r['ratio'][name]:.3f}x" if name != "cuBLAS" else ""))
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0 if all(s["ok"] for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
