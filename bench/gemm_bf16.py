#!/usr/bin/env python3
"""The bf16 tensor-core GEMM (specs/gemm_bf16_mma.arg) against torch.matmul in bf16, one run:
`python bench/gemm_bf16.py [--out DIR]` on a machine with a GPU, pycuda and torch.

For each shape (4096^3, 8192^3, M=4096 N=14336 K=4096 by default) and each instantiation of the
spec: lower + assemble (ptxas registers / spills / shared memory), optionally verify it first,
check the result on fresh random bf16 inputs against a float64 product computed on the GPU, then
time it (CUDA events, median of --reps, inputs rotated against the L2) next to torch.matmul on the
same bf16 inputs (cuBLAS, bf16 output) timed the same way in the same run. Our kernel writes f32;
the FLOP count is 2 M N K for both. One failing variant does not stop the others.

Verification does not depend on the sizes (M, N, K are symbolic), so each variant is proved once
on the CPU machine (`python bench/gemm_bf16.py --record-verification`, minutes for the large
tiles) and the result is kept in bench/gemm_bf16_verified.json together with the SHA-256 of the
spec text; on the GPU machine a variant is timed only when its record is present and the spec's
hash matches (else it is verified there, or skipped with --no-verify-missing). Correctness is
checked for every variant on a ragged shape (masks, scalar fallbacks) and at the first timed
shape; --budget-s stops starting new work before the queue's time limit.

Output: a short table on stdout and `gemm_bf16.json` + `gemm_bf16.log` in --out (default $OUT,
else bench-out); the PTX of every variant in `gemm_bf16.ptx`, the cubins in cubin/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from gpu_all import Log  # bench/ is the script's directory: the same printing log as the spec benchmarks

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "gemm_bf16_mma.arg"
RECORD = ROOT / "bench" / "gemm_bf16_verified.json"
RAGGED = (1000, 1064, 1000)  # masked edges in every dimension; K not a multiple of BK

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096)]

# the same spec with the ldmatrix of a k-tile ahead of the next stage's copies (A/B: slower), and
# the bf16-output spec (packed cvt.rn.bf16x2.f32 epilogue; compared with torch.matmul's bf16 output)
LDMATRIX_FIRST = ROOT / "bench" / "gemm_bf16_mma_ldmatrix_first.arg"
C16 = ROOT / "specs" / "gemm_bf16_mma_c16.arg"
MINB2 = ROOT / "bench" / "gemm_bf16_mma_minb2.arg"

VARIANTS = [
    # (label, compile-time constants[, spec]); warps = WARPS_M x WARPS_N (default 2 x 2)
    ("defaults 64x64x32 4st 2x2w", {}),
    ("128x64x32 4st 2x2w", {"BM": 128, "BN": 64}),
    ("128x128x32 4st 2x4w", {"BM": 128, "BN": 128, "WARPS_N": 4}),
    ("128x128x32 4st 4x2w", {"BM": 128, "BN": 128, "WARPS_M": 4}),
    ("128x128x64 3st 2x4w", {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "WARPS_N": 4}),
    ("128x256x32 3st 2x4w", {"BM": 128, "BN": 256, "STAGES": 3, "WARPS_N": 4}),
    ("256x128x32 3st 4x2w", {"BM": 256, "BN": 128, "STAGES": 3, "WARPS_M": 4}),
    ("128x64x64 3st 2x2w", {"BM": 128, "BN": 64, "BK": 64, "STAGES": 3}),
    ("128x128x32 4st 2x2w", {"BM": 128, "BN": 128}),
    ("128x256x32 4st 2x4w", {"BM": 128, "BN": 256, "WARPS_N": 4}),
    ("256x128x32 4st 4x2w", {"BM": 256, "BN": 128, "WARPS_M": 4}),
    ("128x128x64 4st 2x4w", {"BM": 128, "BN": 128, "BK": 64, "WARPS_N": 4}),
    ("128x256x64 4st 2x4w", {"BM": 128, "BN": 256, "BK": 64, "WARPS_N": 4}),
    # 13..: ldmatrix first (measured slower on 2026-12-01), same tiles
    ("lf 128x64x32 4st 2x2w", {"BM": 128, "BN": 64}, LDMATRIX_FIRST),
    ("lf 128x128x32 4st 2x4w", {"BM": 128, "BN": 128, "WARPS_N": 4}, LDMATRIX_FIRST),
    ("lf 128x128x32 4st 4x2w", {"BM": 128, "BN": 128, "WARPS_M": 4}, LDMATRIX_FIRST),
    ("lf 128x256x32 4st 2x4w", {"BM": 128, "BN": 256, "WARPS_N": 4}, LDMATRIX_FIRST),
    ("lf 256x128x32 4st 4x2w", {"BM": 256, "BN": 128, "WARPS_M": 4}, LDMATRIX_FIRST),
    ("lf 128x128x64 4st 2x4w", {"BM": 128, "BN": 128, "BK": 64, "WARPS_N": 4}, LDMATRIX_FIRST),
    # 19..: bf16 output, and two more tilings of the best warp grid
    ("c16 128x128x32 4st 2x4w", {"BM": 128, "BN": 128, "WARPS_N": 4}, C16),
    ("c16 128x256x32 4st 2x4w", {"BM": 128, "BN": 256, "WARPS_N": 4}, C16),
    ("128x128x32 2st 2x4w", {"BM": 128, "BN": 128, "STAGES": 2, "WARPS_N": 4}),
    ("64x256x32 4st 1x4w", {"BM": 64, "BN": 256, "WARPS_M": 1, "WARPS_N": 4}),
    ("128x128x32 3st 2x4w", {"BM": 128, "BN": 128, "STAGES": 3, "WARPS_N": 4}),
    # 24..: two blocks per SM forced (policy), BK = 64
    ("minb2 128x128x64 3st 2x4w", {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "WARPS_N": 4}, MINB2),
    ("minb2 128x128x64 2st 2x4w", {"BM": 128, "BN": 128, "BK": 64, "STAGES": 2, "WARPS_N": 4}, MINB2),
]


def variant(i: int) -> tuple:
    label, consts, *rest = VARIANTS[i]
    return label, consts, (rest[0] if rest else SPEC)


def spec_hash(spec: Path = SPEC) -> str:
    return hashlib.sha256(spec.read_bytes()).hexdigest()


def record_key(consts: dict, spec: Path = SPEC) -> str:
    return (spec.stem + " " if spec != SPEC else "") + json.dumps(dict(sorted(consts.items())))


def load_record() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def verify_variant(consts: dict, timeout_s: float, spec: Path = SPEC) -> dict:
    """Prove one instantiation; the summary kept in the record."""
    from argus_verify import smt
    from argus_verify.frontend import compile_file

    kernel = compile_file(spec, consts)
    t0 = time.time()
    rep = smt.verify(kernel, timeout_s=timeout_s)
    counts: dict = {}
    for r in rep.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {"spec": str(spec.relative_to(ROOT)), "consts": consts, "spec_sha256": spec_hash(spec),
            "obligations": len(rep.results), "counts": counts,
            "contract": any(r.obligation == "output-contract" and r.status == "proved" for r in rep.results),
            "seconds": round(time.time() - t0, 1), "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "not_proved": [f"{r.status} {r.obligation} line {r.location.line}" for r in rep.results
                           if r.status not in ("proved", "warning")],
            # performance warnings (bank conflicts, uncoalesced accesses): reported, not failures
            "warnings": [f"{r.obligation} line {r.location.line}" for r in rep.results if r.status == "warning"]}


def record_verification(indices, timeout_s: float) -> int:
    """CPU side: verify the chosen variants and merge the results into RECORD."""
    bad = 0
    for i in indices:
        label, consts, spec = variant(i)
        entry = verify_variant(consts, timeout_s, spec)
        rec = load_record()
        rec[record_key(consts, spec)] = entry
        RECORD.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
        ok = not entry["not_proved"]
        bad += not ok
        print(f"{label}: {entry['counts']} in {entry['seconds']} s{'' if ok else '  NOT PROVED'}", flush=True)
    return 1 if bad else 0


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
        self.compiled: dict = {}
        self.inputs: dict = {}
        self.refs: dict = {}
        self.checked: set = set()
        self.record = load_record()
        self.out = Path(args.out)
        self.t_start = time.time()

    def compile(self, consts: dict, spec: Path = SPEC):
        from argus_verify.frontend import compile_file
        from argus_verify.lowering import ptxas
        from argus_verify.lowering.ptx import lower

        key = record_key(consts, spec)
        if key in self.compiled:
            return self.compiled[key]
        kernel = compile_file(spec, consts)
        entry = self.record.get(key)
        if entry is not None and entry["spec_sha256"] == spec_hash(spec):
            if entry["not_proved"] or not entry["contract"]:
                raise RuntimeError("recorded verification failed: " + "; ".join(entry["not_proved"]))
            self.log(f"  verified on {entry['date']} (CPU, {entry['seconds']} s): {entry['counts']}, "
                     f"{entry['obligations']} obligations incl. the contract; spec hash matches"
                     + "".join(f"; warning: {w}" for w in entry.get("warnings", [])))
        elif self.args.verify_missing:
            entry = verify_variant(consts, self.args.verify_timeout, spec)
            self.log(f"  verify here: {entry['counts']} ({entry['seconds']} s)")
            if entry["not_proved"]:
                raise RuntimeError("not verified: " + "; ".join(entry["not_proved"]))
        else:
            raise RuntimeError("no verification record for this spec text and these constants (skipped)")
        lk = lower(kernel)
        cubin, report = ptxas.assemble_cubin(lk.ptx)
        st = report[lk.entry]
        tag = "_".join(f"{k}{v}" for k, v in sorted(consts.items())) or "defaults"
        tag = ("" if spec == SPEC else spec.stem.replace("gemm_bf16_mma_", "") + "_") + tag
        (self.out / "cubin").mkdir(exist_ok=True)
        (self.out / "cubin" / f"gemm_bf16_mma_{tag}.cubin").write_bytes(cubin)
        self.ptx.append(f"// ===== {spec.name} {consts}\n{lk.ptx}")
        self.log(f"  ptxas: {st.registers} registers, spills {st.spill_stores}/{st.spill_loads} bytes, "
                 f"smem {lk.shared_bytes} B, block {kernel.block} threads")
        err = self.check(kernel, *RAGGED)
        self.log(f"  correct at {RAGGED[0]}x{RAGGED[1]}x{RAGGED[2]} (ragged): rel error {err:.2e}")
        self.compiled[key] = (kernel, lk, st)
        return self.compiled[key]

    def check(self, kernel, m, n, k) -> float:
        """Relative error (2-norm) against the float64 product of the same bf16 inputs."""
        from argus_verify.pipeline import run_cuda
        from argus_verify.runtime.measure import rel_error, tolerance

        torch = self.torch
        if (m, n, k) not in self.refs:  # fresh inputs per run, shared by the variants of this run
            inputs = bf16_inputs(m, n, k, seed=int(time.time()) & 0xFFFF)
            a = torch.from_numpy(inputs["A"]).to(self.dev, torch.float64)
            b = torch.from_numpy(inputs["B"]).to(self.dev, torch.float64)
            self.refs[(m, n, k)] = (inputs, (a @ b).cpu().numpy())
        inputs, ref = self.refs[(m, n, k)]
        out = run_cuda(kernel, inputs, {"M": m, "N": n, "K": k})["C"]
        err = rel_error(out, ref)
        tol = tolerance("f32") if kernel.outputs[0].dtype == "f32" else 4e-3  # bf16 C: 2^-9 per element
        if not err <= tol:
            raise AssertionError(f"rel error {err:.3g} > {tol:g}")
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

    def ours(self, label, consts, spec, m, n, k, base_tf) -> None:
        from argus_verify.pipeline import bench_cuda

        kernel, lk, st = self.compile(consts, spec)
        err = None
        if (m, n, k) == self.args.shapes[0]:
            err = self.check(kernel, m, n, k)
            self.log(f"  correct: rel error {err:.2e}")
        if (m, n, k) not in self.inputs:  # one set of timing inputs per shape (generating them costs seconds)
            self.inputs.clear()
            self.inputs[(m, n, k)] = bf16_inputs(m, n, k, 1)
        t = bench_cuda(kernel, {"M": m, "N": n, "K": k}, warmup=self.args.warmup, reps=self.args.reps,
                       inputs=self.inputs[(m, n, k)])
        tf = 2 * m * n * k / (t.median_ms * 1e-3) / 1e12
        ratio = tf / base_tf if base_tf else None
        self.log(f"  gemm_bf16_mma {label}: {t.median_ms:.3f} ms (spread {t.spread:.2f}), {tf:.1f} TFLOP/s"
                 + (f", {ratio:.3f} of cuBLAS" if ratio else ""))
        self.rows.append({"kernel": f"gemm_bf16_mma {label}", "shape": f"{m}x{n}x{k}", "ms": t.median_ms,
                          "tflops": tf, "baseline_tflops": base_tf, "ratio": ratio, "registers": st.registers,
                          "spills": st.spill_stores + st.spill_loads, "smem": lk.shared_bytes, "rel_error": err,
                          "spread": t.spread, "consts": consts, "spec": spec.name, "status": "ok"})

    def guard(self, label, fn):
        if time.time() - self.t_start > self.args.budget_s:
            self.log(f"== {label}: skipped (budget of {self.args.budget_s:g} s spent)")
            self.rows.append({"kernel": label, "status": "skipped", "error": "time budget"})
            return
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
        head = (f"{'kernel':36} {'shape':18} {'median ms':>10} {'TFLOP/s':>9} {'cuBLAS':>8} {'ratio':>6} "
                f"{'regs':>5} {'spill':>5} {'smem':>6}")
        out = [head, "-" * len(head)]
        for r in self.rows:
            if r.get("status") != "ok":
                out.append(f"{r['kernel'][:36]:36} {r['status'].upper()} {r.get('error', '')[:70]}")
                continue
            base = f"{r['baseline_tflops']:.1f}" if r.get("baseline_tflops") else ""
            ratio = f"{r['ratio']:.3f}" if r.get("ratio") else ""
            out.append(f"{r['kernel'][:36]:36} {r['shape']:18} {r['ms']:10.3f} {r['tflops']:9.1f} {base:>8} "
                       f"{ratio:>6} {r.get('registers', ''):>5} {r.get('spills', ''):>5} {r.get('smem', ''):>6}")
        return "\n".join(out)


def launch_once(consts: dict, spec: Path, shape: tuple) -> int:
    from argus_verify.frontend import compile_file
    from argus_verify.pipeline import run_cuda

    m, n, k = shape
    kernel = compile_file(spec, consts)
    run_cuda(kernel, bf16_inputs(m, n, k, 0), {"M": m, "N": n, "K": k})
    return 0


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
    ap.add_argument("--verify-missing", action=argparse.BooleanOptionalAction, default=True,
                    help="verify here a variant with no (current) record in bench/gemm_bf16_verified.json "
                         "(default on; off: skip it)")
    ap.add_argument("--verify-timeout", type=float, default=300.0)
    ap.add_argument("--record-verification", action="store_true",
                    help="CPU side: verify the chosen variants, write bench/gemm_bf16_verified.json, exit")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no new measurement after this many s")
    ap.add_argument("--later-variants", nargs="*", type=int, default=None,
                    help="indices timed at the shapes after the first (default: the same as --variants)")
    ap.add_argument("--once", type=int, default=None,
                    help="launch VARIANTS[ONCE] once at the first shape and exit (for a profiler)")
    args = ap.parse_args(argv)
    if args.once is not None:
        return launch_once(*variant(args.once)[1:], args.shapes[0])
    if args.record_verification:
        return record_verification(args.variants if args.variants is not None else range(len(VARIANTS)),
                                   args.verify_timeout)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gemm_bf16.log")
    import torch

    log(f"torch {torch.__version__}, device {torch.cuda.get_device_name(0)}, python {sys.version.split()[0]}")
    bench = Bench(args, log)
    variants = [variant(i) for i in (args.variants if args.variants is not None else range(len(VARIANTS)))]
    later = [variant(i) for i in args.later_variants] if args.later_variants is not None else variants
    for m, n, k in args.shapes:
        base: dict = {}

        def baseline(m=m, n=n, k=k, base=base):
            base["tf"] = bench.torch_baseline(m, n, k)

        bench.guard(f"torch.matmul bf16 {m}x{n}x{k}", baseline)
        for label, consts, spec in (variants if (m, n, k) == args.shapes[0] else later):

            def ours(label=label, consts=consts, spec=spec, m=m, n=n, k=k, base=base):
                bench.ours(label, consts, spec, m, n, k, base.get("tf"))

            bench.guard(f"gemm_bf16_mma {label} {m}x{n}x{k}", ours)
    (out / "gemm_bf16.json").write_text(json.dumps(bench.rows, indent=1))
    (out / "gemm_bf16.ptx").write_text("\n".join(bench.ptx))
    table = bench.table()
    log(table)
    (out / "gemm_bf16.txt").write_text(table + "\n")
    return 0 if all(r.get("status") == "ok" for r in bench.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
