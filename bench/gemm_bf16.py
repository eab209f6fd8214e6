#!/usr/bin/env python3
"""The bf16 tensor-core GEMM (specs/gemm_bf16_mma.arg) against torch.matmul in bf16, one run:
`python bench/gemm_bf16.py [--out DIR]` on a machine with a GPU, pycuda and torch.

For each shape (4096^3, 8192^3, M=4096 N=14336 K=4096 by default) and each instantiation of the
spec: lower + assemble (ptxas registers / spills / shared memory), optionally verify it first,
check the result on fresh random bf16 inputs against a float64 product computed on the GPU, then
time it (CUDA events, median of --reps, inputs rotated against the L2) next to torch.matmul on the
same bf16 inputs (cuBLAS, bf16 output) timed the same way in the same run. Our kernel writes f32;
the FLOP count is 2 M N K for both. One failing variant does not stop the others.

Output: a short table on stdout and `gemm_bf16.json` + `gemm_bf16.log` in --out (default $OUT,
else bench-out); the PTX of every variant in `gemm_bf16.ptx`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "gemm_bf16_mma.arg"

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096)]

VARIANTS = [
    # (label, compile-time constants)
    ("defaults 64x64x32 4 stages", {}),
    ("128x64x32 4 stages", {"BM": 128, "BN": 64}),
    ("64x128x32 4 stages", {"BM": 64, "BN": 128}),
    ("128x128x32 3 stages", {"BM": 128, "BN": 128, "STAGES": 3}),
]


class Log:
    def __init__(self, path: Path):
        self.f = open(path, "w", encoding="utf-8")  # noqa: SIM115

    def __call__(self, *parts) -> None:
        text = " ".join(str(p) for p in parts)
        print(text, flush=True)
        self.f.write(text + "\n")
        self.f.flush()


def bf16_inputs(m: int, n: int, k: int, seed: int) -> dict:
    """Standard-normal inputs already rounded to bf16 (held in float32, the host format)."""
    from argus_verify import semantics

    rng = np.random.default_rng(seed)
    a = semantics.round_to(rng.standard_normal((m, k), dtype=np.float32), "bf16")
    b = semantics.round_to(rng.standard_normal((k, n), dtype=np.float32), "bf16")
    return {"A": np.ascontiguousarray(a, dtype=np.float32), "B": np.ascontiguousarray(b, dtype=np.float32)}


class Bench:
    def __init__(self, args, log: Log):
        import torch

        from argus_verify.runtime import cuda

        self.args, self.log, self.torch, self.cuda = args, log, torch, cuda
        self.dev = torch.device("cuda")
        torch.zeros(1, device=self.dev)  # torch's (primary) context first: our kernels share it
        cuda.ensure_context()
        self.rows: list[dict] = []
        self.ptx: list[str] = []

    def compile(self, consts: dict):
        from argus_verify.frontend import compile_file
        from argus_verify.lowering import ptxas
        from argus_verify.lowering.ptx import lower

        kernel = compile_file(SPEC, consts)
        if self.args.verify:
            from argus_verify import smt

            t0 = time.time()
            rep = smt.verify(kernel, timeout_s=self.args.verify_timeout)
            bad = [r for r in rep.results if r.status in ("violated", "unknown")]
            warn = [r for r in rep.results if r.status == "warning"]
            self.log(f"  verify: {len(rep.results) - len(bad) - len(warn)} proved, {len(bad)} violated/unknown, "
                     f"{len(warn)} warnings ({time.time() - t0:.0f} s)")
            for r in bad + warn:
                self.log(f"    {r.status} {r.obligation} line {r.location.line}: {r.message}")
            if bad:
                raise RuntimeError("not verified: " + "; ".join(f"{r.obligation} {r.status}" for r in bad))
        lk = lower(kernel)
        _, report = ptxas.assemble_cubin(lk.ptx)
        st = report[lk.entry]
        self.ptx.append(f"// ===== gemm_bf16_mma {consts}\n{lk.ptx}")
        self.log(f"  ptxas: {st.registers} registers, spills {st.spill_stores}/{st.spill_loads} bytes, "
                 f"smem {lk.shared_bytes} B")
        return kernel, lk, st

    def check(self, kernel, m, n, k) -> float:
        """Relative error (2-norm) against the float64 product of the same bf16 inputs."""
        from argus_verify.pipeline import run_cuda
        from argus_verify.runtime.measure import rel_error, tolerance

        torch = self.torch
        inputs = bf16_inputs(m, n, k, seed=int(time.time()) & 0xFFFF)
        out = run_cuda(kernel, inputs, {"M": m, "N": n, "K": k})["C"]
        a = torch.from_numpy(inputs["A"]).to(self.dev, torch.float64)
        b = torch.from_numpy(inputs["B"]).to(self.dev, torch.float64)
        ref = (a @ b).cpu().numpy()
        err = rel_error(out, ref)
        if not err <= tolerance("f32"):
            raise AssertionError(f"rel error {err:.3g} > {tolerance('f32'):g}")
        return err

    def torch_baseline(self, m, n, k) -> float:
        torch = self.torch
        sets = 2
        a = [torch.randn(m, k, device=self.dev, dtype=torch.bfloat16) for _ in range(sets)]
        b = [torch.randn(k, n, device=self.dev, dtype=torch.bfloat16) for _ in range(sets)]
        state = {"i": 0}

        def run():
            i = state["i"] % sets
            state["i"] += 1
            torch.matmul(a[i], b[i])

        t = self.cuda.torch_time(run, warmup=self.args.warmup, reps=self.args.reps)
        tf = 2 * m * n * k / (t.median_ms * 1e-3) / 1e12
        self.log(f"  torch.matmul bf16 {m}x{n}x{k}: {t.median_ms:.3f} ms (spread {t.spread:.2f}), {tf:.1f} TFLOP/s")
        self.rows.append({"kernel": "torch.matmul bf16", "shape": f"{m}x{n}x{k}", "ms": t.median_ms, "tflops": tf,
                          "spread": t.spread, "status": "ok"})
        return tf

    def ours(self, label, consts, m, n, k, base_tf) -> None:
        from argus_verify.pipeline import bench_cuda

        kernel, lk, st = self.compile(consts)
        err = self.check(kernel, m, n, k)
        self.log(f"  correct: rel error {err:.2e}")
        t = bench_cuda(kernel, {"M": m, "N": n, "K": k}, warmup=self.args.warmup, reps=self.args.reps,
                       inputs=bf16_inputs(m, n, k, 1))
        tf = 2 * m * n * k / (t.median_ms * 1e-3) / 1e12
        ratio = tf / base_tf if base_tf else None
        self.log(f"  gemm_bf16_mma {label}: {t.median_ms:.3f} ms (spread {t.spread:.2f}), {tf:.1f} TFLOP/s"
                 + (f", {ratio:.3f} of cuBLAS" if ratio else ""))
        self.rows.append({"kernel": f"gemm_bf16_mma {label}", "shape": f"{m}x{n}x{k}", "ms": t.median_ms,
                          "tflops": tf, "baseline_tflops": base_tf, "ratio": ratio, "registers": st.registers,
                          "spills": st.spill_stores + st.spill_loads, "smem": lk.shared_bytes, "rel_error": err,
                          "spread": t.spread, "consts": consts, "status": "ok"})

    def guard(self, label, fn):
        self.log(f"== {label}")
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # one variant's failure must not stop the others
            self.log(f"  FAILED: {type(e).__name__}: {e}")
            self.log(traceback.format_exc())
            self.rows.append({"kernel": label, "status": "error", "error": f"{type(e).__name__}: {e}"[:500]})
        self.log(f"  ({time.time() - t0:.1f} s)")

    def table(self) -> str:
        head = f"{'kernel':36} {'shape':18} {'median ms':>10} {'TFLOP/s':>9} {'cuBLAS':>8} {'ratio':>6} {'regs':>5}"
        out = [head, "-" * len(head)]
        for r in self.rows:
            if r.get("status") != "ok":
                out.append(f"{r['kernel'][:36]:36} ERROR {r.get('error', '')[:70]}")
                continue
            base = f"{r['baseline_tflops']:.1f}" if r.get("baseline_tflops") else ""
            ratio = f"{r['ratio']:.3f}" if r.get("ratio") else ""
            out.append(f"{r['kernel'][:36]:36} {r['shape']:18} {r['ms']:10.3f} {r['tflops']:9.1f} {base:>8} "
                       f"{ratio:>6} {r.get('registers', ''):>5}")
        return "\n".join(out)


def parse_shape(text: str) -> tuple:
    m, n, k = (int(x) for x in text.lower().split("x"))
    return m, n, k


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--shapes", nargs="*", type=parse_shape, default=SHAPES, help="MxNxK, e.g. 4096x4096x4096")
    ap.add_argument("--variants", nargs="*", type=int, default=None,
                    help="indices into VARIANTS (default: all)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                    help="verify each variant before timing it (default on)")
    ap.add_argument("--verify-timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gemm_bf16.log")
    import torch

    log(f"torch {torch.__version__}, device {torch.cuda.get_device_name(0)}, python {sys.version.split()[0]}")
    bench = Bench(args, log)
    variants = [VARIANTS[i] for i in args.variants] if args.variants is not None else VARIANTS
    for m, n, k in args.shapes:
        base: dict = {}

        def baseline(m=m, n=n, k=k, base=base):
            base["tf"] = bench.torch_baseline(m, n, k)

        bench.guard(f"torch.matmul bf16 {m}x{n}x{k}", baseline)
        for label, consts in variants:

            def ours(label=label, consts=consts, m=m, n=n, k=k, base=base):
                bench.ours(label, consts, m, n, k, base.get("tf"))

            bench.guard(f"gemm_bf16_mma {label} {m}x{n}x{k}", ours)
    (out / "gemm_bf16.json").write_text(json.dumps(bench.rows, indent=1))
    (out / "gemm_bf16.ptx").write_text("\n".join(bench.ptx))
    table = bench.table()
    log(table)
    (out / "gemm_bf16.txt").write_text(table + "\n")
    return 0 if all(r.get("status") == "ok" for r in bench.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
