#!/usr/bin/env python3
"""The mma.sync throughput ceiling of this GPU: `python bench/mma_peak.py [--out DIR]` (pycuda).

The PTX is written here: every warp runs a loop of ILP independent
`mma.sync.aligned.{shape}.row.col.f32.{ab}.{ab}.f32` per iteration (distinct accumulators, so the
instructions do not wait for each other), operands held in registers (no memory traffic in the
loop), and stores the accumulators' sum at the end so that nothing is dead. Each configuration
(shape m16n8k16 / m16n8k8, bf16 / f16, warps per block, blocks per SM, ILP) is timed with CUDA
events (median of --reps launches); TFLOP/s = 2 M N K per instruction x instructions / time. The
best configuration is the ceiling the GEMM is compared with (bench/gemm_bf16.py, BENCHMARKS.md).

Output: a table on stdout, `mma_peak.json` + `mma_peak.log` (and the PTX) in --out (default $OUT,
else bench-out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

SHAPES = {"m16n8k16": (16, 8, 16, 4, 2), "m16n8k8": (16, 8, 8, 2, 1)}  # M, N, K, a regs, b regs


def ptx_source(shape: str, ab: str, ilp: int) -> str:
    """A kernel `mma_peak(out, iters)`: ILP independent accumulator chains per warp."""
    _, _, _, na, nb = SHAPES[shape]
    instr = f"mma.sync.aligned.{shape}.row.col.f32.{ab}.{ab}.f32"
    a = ", ".join(f"%a{i}" for i in range(na))
    b = ", ".join(f"%b{i}" for i in range(nb))
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry mma_peak(", "    .param .u64 mma_peak_param_out,", "    .param .u32 mma_peak_param_iters",
        ")", "{",
        "    .reg .pred %p;",
        f"    .reg .b32 %a<{na}>;", f"    .reg .b32 %b<{nb}>;",
        "    .reg .b32 %i, %n, %rt, %rc, %rn, %gid;",
        f"    .reg .f32 %c<{4 * ilp}>;",
        "    .reg .f32 %s;",
        "    .reg .b64 %rd<4>;",
        "    ld.param.u64 %rd1, [mma_peak_param_out];",
        "    ld.param.u32 %n, [mma_peak_param_iters];",
        "    cvta.to.global.u64 %rd1, %rd1;",
        "    mov.u32 %rt, %tid.x;", "    mov.u32 %rc, %ctaid.x;", "    mov.u32 %rn, %ntid.x;",
        "    mad.lo.u32 %gid, %rc, %rn, %rt;",
    ]
    # operands from the thread id (not constants, so nothing folds): small normal 16-bit values
    for i in range(na):
        lines.append(f"    and.b32 %a{i}, %rt, {0x00070007 + i:#x};")
        lines.append(f"    or.b32 %a{i}, %a{i}, 0x3C003C00;")
    for i in range(nb):
        lines.append(f"    and.b32 %b{i}, %rt, {0x00030003 + i:#x};")
        lines.append(f"    or.b32 %b{i}, %b{i}, 0x3C003C00;")
    for j in range(4 * ilp):
        lines.append(f"    mov.f32 %c{j}, 0f00000000;")
    lines += ["    mov.u32 %i, 0;", "LOOP:"]
    for j in range(ilp):
        c = ", ".join(f"%c{4 * j + r}" for r in range(4))
        lines.append(f"    {instr} {{{c}}}, {{{a}}}, {{{b}}}, {{{c}}};")
    lines += ["    add.u32 %i, %i, 1;", "    setp.lt.u32 %p, %i, %n;", "    @%p bra LOOP;",
              "    mov.f32 %s, %c0;"]
    for j in range(1, 4 * ilp):
        lines.append(f"    add.f32 %s, %s, %c{j};")
    lines += ["    mul.wide.u32 %rd2, %gid, 4;", "    add.s64 %rd3, %rd1, %rd2;", "    st.global.f32 [%rd3], %s;",
              "    ret;", "}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--iters", type=int, default=4096, help="loop iterations per launch")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ilp", nargs="*", type=int, default=[4, 8])
    ap.add_argument("--warps", nargs="*", type=int, default=[4, 8, 16], help="warps per block")
    ap.add_argument("--blocks-per-sm", nargs="*", type=int, default=[1, 2, 4])
    ap.add_argument("--shapes", nargs="*", default=["m16n8k16", "m16n8k8"])
    ap.add_argument("--types", nargs="*", default=["bf16", "f16"])
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "mma_peak.log", "w", encoding="utf-8")  # noqa: SIM115

    def log(*parts):
        text = " ".join(str(p) for p in parts)
        print(text, flush=True)
        logf.write(text + "\n")

    from argus_verify.lowering import ptxas
    from argus_verify.runtime import cuda

    cuda.ensure_context()
    drv = cuda._drv()
    dev = drv.Context.get_device()
    sms = int(dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT))
    log(f"device {dev.name()}, {sms} SMs, clock {dev.get_attribute(drv.device_attribute.CLOCK_RATE) / 1e3:.0f} MHz")
    rows, sources = [], []
    for shape in args.shapes:
        M, N, K = SHAPES[shape][:3]
        for ab in args.types:
            for ilp in args.ilp:
                src = ptx_source(shape, ab, ilp)
                sources.append(f"// ===== {shape} {ab} ilp {ilp}\n{src}")
                image = src
                if ptxas.ptxas_available():
                    image, report = ptxas.assemble_cubin(src)
                    st = report["mma_peak"]
                    log(f"{shape} {ab} ilp {ilp}: ptxas {st.registers} registers, spills "
                        f"{st.spill_stores}/{st.spill_loads}")
                mod = cuda.CudaModule(image)
                fn = mod.function("mma_peak")
                for warps in args.warps:
                    for bps in args.blocks_per_sm:
                        blocks = sms * bps
                        threads = 32 * warps
                        buf = cuda.DeviceBuffers({"out": np.zeros(blocks * threads, dtype=np.float32)})
                        try:
                            def run_once(_k, buf=buf, blocks=blocks, threads=threads, fn=fn):
                                cuda.launch(fn, (blocks, 1, 1), (threads, 1, 1),
                                            [buf["out"], np.uint32(args.iters)])

                            t = cuda.time_kernel(run_once, warmup=args.warmup, reps=args.reps)
                        finally:
                            buf.free()
                        n_mma = blocks * warps * args.iters * ilp
                        tf = 2 * M * N * K * n_mma / (t.median_ms * 1e-3) / 1e12
                        log(f"  {shape} {ab} ilp {ilp} warps/block {warps} blocks/SM {bps}: "
                            f"{t.median_ms:.3f} ms (spread {t.spread:.2f}), {tf:.1f} TFLOP/s")
                        rows.append({"shape": shape, "type": ab, "ilp": ilp, "warps_per_block": warps,
                                     "blocks_per_sm": bps, "blocks": blocks, "iters": args.iters,
                                     "ms": t.median_ms, "spread": t.spread, "tflops": tf})
    best = {}
    for r in rows:
        key = (r["shape"], r["type"])
        if key not in best or r["tflops"] > best[key]["tflops"]:
            best[key] = r
    head = f"{'instruction':34} {'best TFLOP/s':>12}  configuration"
    table = [head, "-" * len(head)]
    for (shape, ab), r in best.items():
        table.append(f"{'mma.sync ' + shape + ' ' + ab + '->f32':34} {r['tflops']:12.1f}  ilp {r['ilp']}, "
                     f"{r['warps_per_block']} warps/block, {r['blocks_per_sm']} blocks/SM")
    log("\n".join(table))
    (out / "mma_peak.json").write_text(json.dumps({"sms": sms, "rows": rows,
                                                   "best": [best[k] for k in best]}, indent=1))
    (out / "mma_peak.ptx").write_text("\n".join(sources))
    (out / "mma_peak.txt").write_text("\n".join(table) + "\n")
    logf.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
