#!/usr/bin/env python3
"""Every milestone-3 GPU measurement in one run (for the H200): `python3 bench/gpu_all.py --out DIR`.

For each kernel: lower + assemble (ptxas registers / spills), check the result on fresh random
inputs against the float64 reference at the benchmark size, then time it (CUDA events, median,
inputs rotated against the L2) next to its baseline measured in the same run:

* vecadd, transpose_smem (256 MiB per tensor): achieved GB/s (bytes read + written) against the
  device-to-device copy bandwidth of torch `copy_` (also bytes read + written);
* row_softmax (16384 x 1024 f32) against `torch.softmax`, reduce_sum (16384 x 4096) against
  `torch.sum`;
* gemm_simt and gemm_pipelined fp32 (4096^3, several instantiations) against `torch.matmul` in fp32
  with TF32 off.

One failing kernel does not stop the others. Output: a log, `gpu_all.json`, the PTX of every kernel
(`kernels.ptx`) and, with `--sass`, its SASS (`kernels.sass`); a short table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

MiB = 1 << 20

GEMM_VARIANTS = [
    # (spec, label, compile-time constants, lowering options); the spec's own policy(...) applies
    # unless an option overrides it (min_blocks_per_sm=0 removes the directive)
    ("gemm_simt", "defaults 128x64x16 t8x4 2blk", {}, {}),
    ("gemm_simt", "128x64x16 t8x4 1blk", {}, {"min_blocks_per_sm": 0}),
    ("gemm_simt", "64x64x16 t4x4", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, {"min_blocks_per_sm": 0}),
    ("gemm_simt", "128x128x8 t8x8 2blk", {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}, {}),
    ("gemm_simt_db", "double-buffered 128x64x16 t8x4 2blk", {}, {}),
    ("gemm_simt_db", "double-buffered 128x64x16 t8x4 1blk", {}, {"min_blocks_per_sm": 0}),
    ("gemm_simt_db", "double-buffered 128x64x8 t8x4 2blk", {"BK": 8}, {}),
    ("gemm_pipelined", "defaults: 2 stages 128x64x16 t8x4 2blk", {}, {}),
    ("gemm_pipelined", "3 stages 128x64x16 t8x4 2blk", {"STAGES": 3}, {}),
    ("gemm_pipelined", "4 stages 128x64x16 t8x4 2blk", {"STAGES": 4}, {}),
    ("gemm_pipelined", "3 stages 64x64x16 t4x4 1blk", {"BM": 64, "BN": 64, "TM": 4, "TN": 4},
     {"min_blocks_per_sm": 0}),
]


class Log:
    def __init__(self, path: Path):
        self.f = open(path, "w", encoding="utf-8")  # noqa: SIM115

    def __call__(self, *parts) -> None:
        text = " ".join(str(p) for p in parts)
        print(text, flush=True)
        self.f.write(text + "\n")
        self.f.flush()


def load_ref(name: str):
    from argus_verify.reference import load_reference

    return load_reference(ROOT / "specs" / f"{name}.arg")


def rotated(fn_for, sets: int):
    """A zero-argument callable cycling through `sets` prepared baseline calls."""
    calls = [fn_for(k) for k in range(sets)]
    state = {"i": 0}

    def run():
        calls[state["i"] % sets]()
        state["i"] += 1

    return run


class Bench:
    def __init__(self, args, log: Log, out: Path):
        self.args = args
        self.log = log
        self.out = out
        self.rows: list[dict] = []
        self.ptx: list[str] = []
        self.cubins: list[tuple[str, bytes]] = []
        import torch

        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.dev = torch.device("cuda")
        torch.zeros(1, device=self.dev)  # create torch's (primary) context first
        from argus_verify.runtime import cuda

        self.cuda = cuda
        cuda.ensure_context()
        self.copy_gbs = None

    # -- helpers -----------------------------------------------------------------------------
    def compile(self, name: str, consts: dict, opts: dict):
        from argus_verify.frontend import compile_file
        from argus_verify.lowering import ptxas
        from argus_verify.lowering.ptx import lower

        kernel = compile_file(ROOT / "specs" / f"{name}.arg", consts)
        lk = lower(kernel, **opts)
        cubin, report = ptxas.assemble_cubin(lk.ptx)
        st = report[lk.entry]
        label = f"{name} {consts or ''} {opts or ''}".strip()
        self.ptx.append(f"// ===== {label}\n{lk.ptx}")
        self.cubins.append((label, cubin))
        self.log(f"  ptxas: {st.registers} registers, spills {st.spill_stores}/{st.spill_loads} bytes, "
                 f"smem {lk.shared_bytes} B; " + "; ".join(lk.notes))
        return kernel, lk, st

    def inputs(self, kernel, sizes, seed):
        from argus_verify import ir
        from argus_verify.runtime.measure import random_inputs

        rng = np.random.default_rng(seed)
        specs = []
        for t in kernel.inputs:
            shape = tuple(d.value if isinstance(d, ir.IConst) else sizes[d.name] for d in t.shape)
            specs.append((t.name, shape, np.float32))
        return random_inputs(specs, rng)

    def check(self, name, kernel, sizes, opts, reference=None) -> float:
        """Max relative error over the outputs on fresh random inputs (raises if over tolerance)."""
        from argus_verify.pipeline import run_cuda
        from argus_verify.runtime.measure import rel_error, tolerance

        inputs = self.inputs(kernel, sizes, seed=int(time.time()) & 0xFFFF)
        out = run_cuda(kernel, inputs, sizes, lower_options=opts)
        ref = reference(inputs) if reference else load_ref(name).reference(**inputs)
        worst = 0.0
        for t in kernel.outputs:
            err = rel_error(out[t.name], ref[t.name])
            worst = max(worst, err)
            if not err <= tolerance(t.dtype):
                raise AssertionError(f"{name}: {t.name} rel error {err:.3g} > {tolerance(t.dtype):g}")
        return worst

    def time_kernel(self, kernel, sizes, opts):
        from argus_verify.pipeline import bench_cuda

        return bench_cuda(kernel, sizes, warmup=self.args.warmup, reps=self.args.reps, lower_options=opts)

    def time_torch(self, fn_for, sets: int):
        return self.cuda.torch_time(rotated(fn_for, sets), warmup=self.args.warmup, reps=self.args.reps)

    def row(self, **kw) -> None:
        self.rows.append(kw)

    def guard(self, label: str, fn) -> None:
        self.log(f"== {label}")
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # one kernel's failure must not stop the others
            self.log(f"  FAILED: {type(e).__name__}: {e}")
            self.log(traceback.format_exc())
            self.row(kernel=label, shape="", status="error", error=f"{type(e).__name__}: {e}"[:500])
        self.log(f"  ({time.time() - t0:.1f} s)")

    # -- baselines ---------------------------------------------------------------------------------
    def copy_bandwidth(self) -> None:
        torch = self.torch
        n = self.args.mib * MiB // 4
        src = [torch.randn(n, device=self.dev) for _ in range(2)]
        dst = [torch.empty(n, device=self.dev) for _ in range(2)]
        t = self.time_torch(lambda k: (lambda: dst[k].copy_(src[k])), 2)
        self.copy_gbs = 2 * n * 4 / (t.median_ms * 1e-3) / 1e9
        self.log(f"  torch copy_ {self.args.mib} MiB: {t.median_ms:.4f} ms, {self.copy_gbs:.0f} GB/s "
                 "(read + write)")
        self.row(kernel="torch copy_", shape=f"{self.args.mib} MiB", ms=t.median_ms, rate=self.copy_gbs,
                 unit="GB/s", status="ok", spread=t.spread)

    # -- kernels -----------------------------------------------------------------------------------
    def memory_kernel(self, name: str, sizes: dict, nbytes: int, baseline: str, torch_fn_for, sets: int,
                      consts: dict | None = None, opts: dict | None = None) -> None:
        consts, opts = consts or {}, opts or {}
        kernel, lk, st = self.compile(name, consts, opts)
        err = self.check(name, kernel, sizes, opts)
        self.log(f"  correct: rel error {err:.2e}")
        t = self.time_kernel(kernel, sizes, opts)
        gbs = nbytes / (t.median_ms * 1e-3) / 1e9
        tb = self.time_torch(torch_fn_for, sets) if torch_fn_for else None
        if baseline == "copy":
            base_rate, ratio, base_ms = self.copy_gbs, gbs / self.copy_gbs if self.copy_gbs else None, None
        else:
            base_ms = tb.median_ms
            base_rate = nbytes / (base_ms * 1e-3) / 1e9
            ratio = base_ms / t.median_ms
        extra = f", torch {tb.median_ms:.4f} ms" if tb else ""
        self.log(f"  {name}: {t.median_ms:.4f} ms (spread {t.spread:.2f}), {gbs:.0f} GB/s; baseline "
                 f"{baseline} {base_rate:.0f} GB/s{extra}; ratio {ratio:.3f}")
        self.row(kernel=name, shape=" ".join(f"{k}={v}" for k, v in sizes.items()), ms=t.median_ms, rate=gbs,
                 unit="GB/s", baseline=baseline, baseline_rate=base_rate, baseline_ms=base_ms,
                 torch_ms=tb.median_ms if tb else None, ratio=ratio, registers=st.registers,
                 spills=st.spill_stores + st.spill_loads, rel_error=err, status="ok", spread=t.spread,
                 notes=list(lk.notes), consts=consts)

    def vecadd(self) -> None:
        torch = self.torch
        n = self.args.mib * MiB // 4
        xs = [torch.randn(n, device=self.dev) for _ in range(2)]
        ys = [torch.randn(n, device=self.dev) for _ in range(2)]
        zs = [torch.empty(n, device=self.dev) for _ in range(2)]
        self.memory_kernel("vecadd", {"N": n}, 3 * n * 4, "copy",
                           lambda k: (lambda: torch.add(xs[k], ys[k], out=zs[k])), 2)

    def transpose(self) -> None:
        torch = self.torch
        side = int((self.args.mib * MiB // 4) ** 0.5)
        xs = [torch.randn(side, side, device=self.dev) for _ in range(2)]
        outs = [torch.empty(side, side, device=self.dev) for _ in range(2)]
        self.memory_kernel("transpose_smem", {"M": side, "N": side}, 2 * side * side * 4, "copy",
                           lambda k: (lambda: outs[k].copy_(xs[k].t())), 2)

    def softmax(self) -> None:
        torch = self.torch
        m, n = self.args.softmax_rows, 1024
        xs = [torch.randn(m, n, device=self.dev) for _ in range(4)]
        self.memory_kernel("row_softmax", {"M": m, "N": n}, 2 * m * n * 4, "torch.softmax",
                           lambda k: (lambda: torch.softmax(xs[k], dim=1)), 4)

    def reduce(self) -> None:
        torch = self.torch
        m, n = self.args.softmax_rows, 4096
        xs = [torch.randn(m, n, device=self.dev) for _ in range(2)]
        self.memory_kernel("reduce_sum", {"M": m, "N": n}, m * n * 4 + m * 4, "torch.sum",
                           lambda k: (lambda: torch.sum(xs[k], dim=1)), 2)

    def gemm_baseline(self, n: int) -> float:
        torch = self.torch
        a = [torch.randn(n, n, device=self.dev) for _ in range(2)]
        b = [torch.randn(n, n, device=self.dev) for _ in range(2)]
        t = self.time_torch(lambda k: (lambda: torch.matmul(a[k], b[k])), 2)
        tf = 2 * n ** 3 / (t.median_ms * 1e-3) / 1e12
        self.log(f"  torch.matmul fp32 (TF32 off) {n}^3: {t.median_ms:.3f} ms, {tf:.2f} TFLOP/s")
        self.row(kernel="torch.matmul fp32", shape=f"{n}^3", ms=t.median_ms, rate=tf, unit="TFLOP/s",
                 status="ok", spread=t.spread)
        return tf

    def gemm(self, spec: str, label: str, consts: dict, opts: dict, n: int, cublas: float | None) -> None:
        torch = self.torch
        kernel, lk, st = self.compile(spec, consts, opts)
        sizes = {"M": n, "N": n, "K": n}

        def reference(inputs):
            a = torch.from_numpy(inputs["A"]).to(self.dev, torch.float64)
            b = torch.from_numpy(inputs["B"]).to(self.dev, torch.float64)
            return {"C": (a @ b).cpu().numpy()}

        err = self.check(spec, kernel, sizes, opts, reference)
        self.log(f"  correct: rel error {err:.2e}")
        t = self.time_kernel(kernel, sizes, opts)
        tf = 2 * n ** 3 / (t.median_ms * 1e-3) / 1e12
        ratio = tf / cublas if cublas else None
        vs = f", {ratio:.3f} of cuBLAS" if ratio else ""
        self.log(f"  {spec} {label}: {t.median_ms:.3f} ms (spread {t.spread:.2f}), {tf:.2f} TFLOP/s{vs}")
        self.row(kernel=f"{spec} {label}", shape=f"{n}^3", ms=t.median_ms, rate=tf, unit="TFLOP/s",
                 baseline="torch.matmul fp32", baseline_rate=cublas, ratio=ratio, registers=st.registers,
                 spills=st.spill_stores + st.spill_loads, rel_error=err, status="ok", spread=t.spread,
                 notes=list(lk.notes), consts=consts, options=opts)

    # -- output ----------------------------------------------------------------------------------------
    def sass(self) -> None:
        lines = []
        with tempfile.TemporaryDirectory() as tmp:
            for i, (label, cubin) in enumerate(self.cubins):
                p = Path(tmp) / f"k{i}.cubin"
                p.write_bytes(cubin)
                try:
                    r = subprocess.run(["cuobjdump", "-sass", str(p)], capture_output=True, text=True,
                                       timeout=60)
                    lines.append(f"// ===== {label}\n{r.stdout}{r.stderr}")
                except Exception as e:  # cuobjdump missing: not fatal
                    lines.append(f"// ===== {label}: cuobjdump failed: {e}")
        (self.out / "kernels.sass").write_text("\n".join(lines))

    def table(self) -> str:
        head = (f"{'kernel':34} {'shape':22} {'median ms':>10} {'rate':>14} {'baseline':>24} {'ratio':>7} "
                f"{'regs':>5}")
        out = [head, "-" * len(head)]
        for r in self.rows:
            if r.get("status") != "ok":
                out.append(f"{r['kernel']:34} {'':22} {'ERROR':>10}  {r.get('error', '')[:60]}")
                continue
            rate = f"{r['rate']:.1f} {r['unit']}"
            base = ""
            if r.get("baseline"):
                br = r.get("baseline_rate")
                base = f"{r['baseline'][:13]} {br:.1f}" if br is not None else r["baseline"][:24]
            ratio = f"{r['ratio']:.3f}" if r.get("ratio") is not None else ""
            regs = str(r.get("registers", ""))
            out.append(f"{r['kernel'][:34]:34} {r['shape'][:22]:22} {r['ms']:10.4f} {rate:>14} {base:>24} "
                       f"{ratio:>7} {regs:>5}")
        return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--mib", type=int, default=256, help="MiB per tensor for vecadd / transpose / copy")
    ap.add_argument("--gemm", type=int, default=4096, help="square GEMM size")
    ap.add_argument("--softmax-rows", type=int, default=16384)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--only", nargs="*", default=None,
                    help="subset: copy vecadd transpose softmax reduce gemm")
    ap.add_argument("--sass", action="store_true", help="also dump SASS with cuobjdump")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu_all.log")
    started = time.time()
    try:
        import torch

        log(f"torch {torch.__version__}, device {torch.cuda.get_device_name(0)}, "
            f"python {sys.version.split()[0]}")
        from argus_verify.lowering.ptxas import find_ptxas

        exe = find_ptxas()
        if exe:
            v = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
            log(f"ptxas: {exe} {v[-1] if v else ''}")
        b = Bench(args, log, out)
    except Exception as e:
        log(f"cannot start: {type(e).__name__}: {e}")
        log(traceback.format_exc())
        return 2
    want = set(args.only or ["copy", "vecadd", "transpose", "softmax", "reduce", "gemm"])
    if "copy" in want or want & {"vecadd", "transpose"}:
        b.guard("device-to-device copy", b.copy_bandwidth)
    if "vecadd" in want:
        b.guard("vecadd", b.vecadd)
    if "transpose" in want:
        b.guard("transpose_smem", b.transpose)
    if "softmax" in want:
        b.guard("row_softmax", b.softmax)
    if "reduce" in want:
        b.guard("reduce_sum", b.reduce)
    if "gemm" in want:
        cublas: dict = {}
        b.guard("torch.matmul fp32", lambda: cublas.setdefault("tf", b.gemm_baseline(args.gemm)))
        for spec, label, consts, opts in GEMM_VARIANTS:
            b.guard(f"{spec} {label}", lambda sp=spec, la=label, c=consts, o=opts: b.gemm(sp, la, c, o, args.gemm,
                                                                                          cublas.get("tf")))
    (out / "kernels.ptx").write_text("\n".join(b.ptx))
    if args.sass:
        b.guard("sass", b.sass)
    (out / "gpu_all.json").write_text(json.dumps({"rows": b.rows, "seconds": time.time() - started,
                                                  "args": vars(args)}, indent=2, default=str))
    log("")
    log(f"total {time.time() - started:.0f} s")
    log(b.table())
    return 0 if all(r.get("status") == "ok" for r in b.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
