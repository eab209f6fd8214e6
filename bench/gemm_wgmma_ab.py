#!/usr/bin/env python3
"""Interleaved timing of several Hopper GEMM specs and cuBLAS in one process:
`python bench/gemm_wgmma_ab.py --variant NAME=SPEC[:CONSTS] ... [--shapes MxNxK,...] [--rounds R]`.

Run-to-run drift on the GPU (cuBLAS itself moved by 10 % between invocations of bench/gemm_wgmma.py
in one batch) hides differences of a few percent between variants timed in separate processes. Here
every round times each variant and `torch.matmul` (bf16, cuBLAS) back to back on the same inputs
(CUDA events, median of --reps), and the table reports per variant the median over rounds of its
TFLOP/s and of cuBLAS time / its time within the same round. Each variant is checked against a float64
product on a ragged shape first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from gemm_wgmma import parse_consts  # noqa: E402

from argus_verify.runtime.cuda import torch_time  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True, help="NAME=SPEC[:K=V,K=V]")
    ap.add_argument("--shapes", default="2048x2048x2048,4096x4096x4096,8192x8192x8192,4096x14336x4096")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    import torch

    from argus_verify.frontend import compile_file
    from argus_verify.lowering.ptx import lower
    from argus_verify.runtime.tma import TmaKernel

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    kerns = {}
    for v in args.variant:
        name, _, rest = v.partition("=")
        spec, _, consts = rest.partition(":")
        kern = TmaKernel(lower(compile_file(spec, parse_consts(consts) or None)))
        a = torch.randn(257, 600, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(600, 264, device=dev, generator=g).to(torch.bfloat16)
        c = torch.full((257, 264), float("nan"), device=dev)
        kern({"A": a, "B": b, "C": c}, {"M": 257, "N": 264, "K": 600})
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = float((c.double() - ref).norm() / ref.norm())
        ok = err < 1e-5 and not torch.isnan(c).any()
        verdict = "OK" if ok else "WRONG"
        print(f"{name}: {spec} {consts or '(defaults)'}: check 257x264x600 rel err {err:.1e} -> {verdict}", flush=True)
        if not ok:
            return 1
        kerns[name] = kern
    rows = []
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
        c = torch.empty((m, n), device=dev, dtype=torch.float32)
        sizes = {"M": m, "N": n, "K": k}
        preps = {name: kern.prepare({"A": a, "B": b, "C": c}, sizes) for name, kern in kerns.items()}
        fl = 2 * m * n * k
        tf = {name: [] for name in kerns}
        ratio = {name: [] for name in kerns}
        cub = []
        for _ in range(args.rounds):
            t_cub = torch_time(lambda a=a, b=b: torch.matmul(a, b), reps=args.reps).median_ms
            cub.append(fl / t_cub / 1e9)
            for name, kern in kerns.items():
                t = torch_time(lambda kern=kern, p=preps[name], s=sizes: kern.launch(p, s), reps=args.reps).median_ms
                tf[name].append(fl / t / 1e9)
                ratio[name].append(t_cub / t)
        row = {"shape": [m, n, k], "cublas_tflops": statistics.median(cub),
               "variants": {name: {"tflops": statistics.median(tf[name]), "ratio": statistics.median(ratio[name]),
                                   "tflops_all": tf[name]} for name in kerns}}
        rows.append(row)
        print(f"{shape}: cuBLAS {row['cublas_tflops']:.0f} | " + " | ".join(
            f"{name} {r['tflops']:.0f} ({r['ratio']:.3f}x)" for name, r in row["variants"].items()), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gemm_wgmma_ab.json").write_text(json.dumps(rows, indent=1))
    names = list(kerns)
    print("\n| shape | cuBLAS TFLOP/s | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for r in rows:
        m, n, k = r["shape"]
        print(f"| {m}x{n}x{k} | {r['cublas_tflops']:.0f} | " + " | ".join(
            f"{r['variants'][x]['tflops']:.0f}, {r['variants'][x]['ratio']:.3f}x" for x in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
