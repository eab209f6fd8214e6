#!/usr/bin/env python3
"""The Hopper bf16 GEMM (specs/hopper/gemm_bf16_wgmma.arg: TMA + mbarrier ring + wgmma) on the GPU:
`python bench/gemm_wgmma.py [--out DIR] [--check-only] [--shapes ...] [--consts BM=..,BN=..]`.

1. verify the spec (the protocol obligations and the others; wall time reported);
2. correctness: ragged shapes against a float64 product on the GPU (relative 2-norm error, NaNs);
3. timing: runtime.cuda.torch_time (CUDA events around back-to-back launches, median of --reps),
   next to torch.matmul on the same bf16 inputs (cuBLAS, bf16 output) in the same run, at 2048^3,
   4096^3, 8192^3 and 4096 x 14336 x 4096 by default.
Prints a table last; writes gemm_wgmma.json and gemm_wgmma.ptx under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg"
RAGGED = [(150, 200, 328), (64, 136, 64), (130, 8, 8), (257, 264, 200), (1000, 1000, 1000)]
TIMED = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096)]
TOL = 1e-5  # f32 C: the f32 accumulation's error
TOL_BF16 = 2.0 ** -9 + 1e-5  # bf16 C: rounding to bf16 (relative error at most 2^-9 per element) on top


def parse_consts(text: str) -> dict:
    out = {}
    for part in filter(None, (text or "").split(",")):
        k, v = part.split("=")
        out[k.strip()] = int(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--consts", default="")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--timed", default="")
    ap.add_argument("--ragged", default="", help="check shapes MxNxK,... instead of the default ragged set")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--spec", default=str(SPEC))
    ap.add_argument("--budget", type=float, default=0.0, help="seconds: time no further shape after this")
    args = ap.parse_args()
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    from argus_verify import smt
    from argus_verify.frontend import compile_file
    from argus_verify.lowering.ptx import lower
    from argus_verify.runtime.cuda import torch_time
    from argus_verify.runtime.tma import TmaKernel

    consts = parse_consts(args.consts)
    kernel = compile_file(args.spec, consts or None)
    t0 = time.perf_counter()
    counts: dict = {}
    if not args.no_verify:
        for r in smt.verify(kernel).results:
            counts[r.status] = counts.get(r.status, 0) + 1
    vt = time.perf_counter() - t0
    print(f"verify: {vt:.2f} s, {counts}", flush=True)
    lk = lower(kernel)
    (out / "gemm_wgmma.ptx").write_text(lk.ptx)
    kern = TmaKernel(lk)
    c_dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[kernel.param("C").dtype]
    tol = TOL_BF16 if c_dtype == torch.bfloat16 else TOL
    print(f"C: {kernel.param('C').dtype}, tolerance {tol:.2e}", flush=True)
    print(f"loaded: {kern.registers()} registers, {lk.dynamic_shared_bytes} bytes shared", flush=True)
    rows = []
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    ragged = RAGGED if not args.ragged else [tuple(int(x) for x in s.split("x")) for s in args.ragged.split(",")]
    for (m, n, k) in ragged:
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
        c = torch.full((m, n), float("nan"), device=dev, dtype=c_dtype)
        sizes = {"M": m, "N": n, "K": k}
        try:
            kern({"A": a, "B": b, "C": c}, sizes)
            torch.cuda.synchronize()
            ref = a.double() @ b.double()
            err = float((c.double() - ref).norm() / ref.norm())
            nans = int(torch.isnan(c).sum())
            ok = err < tol and nans == 0
            rows.append({"shape": [m, n, k], "rel_err": err, "nans": nans, "ok": ok})
            print(f"check {m}x{n}x{k}: rel err {err:.2e}, NaN {nans} -> {'OK' if ok else 'WRONG'}", flush=True)
        except Exception as e:  # noqa: BLE001
            rows.append({"shape": [m, n, k], "error": f"{type(e).__name__}: {e}", "ok": False})
            print(f"check {m}x{n}x{k}: ERROR {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            break
    timings = []
    if not args.check_only and all(r.get("ok") for r in rows):
        timed = TIMED if not args.timed else [tuple(int(x) for x in s.split("x")) for s in args.timed.split(",")]
        for (m, n, k) in timed:
            if args.budget and time.perf_counter() - started > args.budget:
                print(f"time {m}x{n}x{k}: skipped (budget of {args.budget:.0f} s used)", flush=True)
                continue
            a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
            b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
            c = torch.empty((m, n), device=dev, dtype=c_dtype)
            sizes = {"M": m, "N": n, "K": k}
            prep = kern.prepare({"A": a, "B": b, "C": c}, sizes)

            def ours(prep=prep, sizes=sizes):
                kern.launch(prep, sizes)

            def cublas(a=a, b=b):
                torch.matmul(a, b)

            t_ours, t_cub = torch_time(ours, reps=args.reps).median_ms, torch_time(cublas, reps=args.reps).median_ms
            fl = 2 * m * n * k
            ref = a.float() @ b.float()
            err = float((c.float() - ref).norm() / ref.norm())
            row = {"shape": [m, n, k], "ours_ms": t_ours, "cublas_ms": t_cub, "ours_tflops": fl / t_ours / 1e9,
                   "cublas_tflops": fl / t_cub / 1e9, "ratio": t_cub / t_ours, "rel_err_vs_f32": err}
            timings.append(row)
            print(f"time {m}x{n}x{k}: ours {t_ours:.3f} ms ({row['ours_tflops']:.0f} TFLOP/s), cuBLAS "
                  f"{t_cub:.3f} ms ({row['cublas_tflops']:.0f}), ratio {row['ratio']:.3f}, err {err:.1e}",
                  flush=True)
    (out / "gemm_wgmma.json").write_text(json.dumps({"spec": args.spec, "c_dtype": str(c_dtype),
                                                     "consts": consts, "verify_s": vt, "verify": counts,
                                                     "checks": rows, "timings": timings}, indent=1))
    print("\n| shape | ours ms | TFLOP/s | cuBLAS ms | TFLOP/s | ours/cuBLAS speed |")
    print("|---|---|---|---|---|---|")
    for r in timings:
        m, n, k = r["shape"]
        print(f"| {m}x{n}x{k} | {r['ours_ms']:.3f} | {r['ours_tflops']:.0f} | {r['cublas_ms']:.3f} | "
              f"{r['cublas_tflops']:.0f} | {r['ratio']:.3f} |")
    print(f"checks: {sum(bool(r.get('ok')) for r in rows)}/{len(rows)} OK")
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
