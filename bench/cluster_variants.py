#!/usr/bin/env python3
"""Where the multicast GEMM's time goes: variants of a cluster spec timed next to cuBLAS in one run.
`python bench/cluster_variants.py [--out DIR] [--spec S] [--shapes 4096x4096x4096,...]`.

Each variant is the spec with some constants, optionally with a change to its source or to the
PTX, so that one protocol cost is measured at a time. Variants marked UNSAFE drop a synchronisation
the protocol needs (the verifier rejects them): they measure what it costs, nothing else, and are
never kernels to use. Every variant is also checked on one ragged shape (an unsafe one may pass by
luck). Prints a table last; writes cluster_variants.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_cluster_persistent.arg"
ARRIVE = "mbarrier.arrive.shared::cluster.b64"


def _drop_empty_waits(src: str) -> str:
    return "\n".join(line for line in src.splitlines() if "mbarrier_wait(empty" not in line) + "\n"


CLUSTER_RELEASE = "mbarrier.arrive.release.cluster.shared::cluster.b64"


def _cluster_scope(ptx: str) -> str:
    return ptx.replace(ARRIVE, CLUSTER_RELEASE)


VARIANTS = [  # name, constants, source change, PTX change, safe
    ("as specified, CL=2", {}, None, None, True),
    ("CL=1 (each block its own cluster)", {"CL": 1}, None, None, True),
    ("CL=2, LAG=1", {"LAG": 1}, None, None, True),
    ("CL=2, remote arrive .release.cluster", {}, None, _cluster_scope, True),
    ("CL=1, remote arrive .release.cluster", {"CL": 1}, None, _cluster_scope, True),
    ("UNSAFE CL=2, no empty waits", {}, _drop_empty_waits, None, False),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--spec", default=str(SPEC))
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import torch

    from argus_verify.frontend import compile_source
    from argus_verify.lowering.ptx import lower
    from argus_verify.runtime.cuda import torch_time
    from argus_verify.runtime.tma import TmaKernel

    text = Path(args.spec).read_text()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    inputs = {}
    for (m, n, k) in shapes:
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
        inputs[(m, n, k)] = (a, b, torch.empty((m, n), device=dev, dtype=torch.float32))
    rows = []
    for name, consts, src_change, ptx_change, safe in VARIANTS:
        try:
            kernel = compile_source(src_change(text) if src_change else text, args.spec, consts or None)
            lk = lower(kernel)
            ptx = ptx_change(lk.ptx) if ptx_change else lk.ptx
            if ptx_change and ptx == lk.ptx:
                raise RuntimeError("the PTX change changed nothing")
            kern = TmaKernel(lk, image=ptx.encode() + b"\0")
            m, n, k = 300, 1096, 520
            a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
            b = torch.randn(k, n, device=dev, generator=g).to(torch.bfloat16)
            c = torch.full((m, n), float("nan"), device=dev)
            kern({"A": a, "B": b, "C": c}, {"M": m, "N": n, "K": k})
            torch.cuda.synchronize()
            ref = a.double() @ b.double()
            err = float((c.double() - ref).norm() / ref.norm())
            row = {"variant": name, "safe": safe, "check_rel_err": err, "times": []}
            for shape, (a, b, c) in inputs.items():
                sizes = dict(zip("MNK", shape, strict=True))
                prep = kern.prepare({"A": a, "B": b, "C": c}, sizes)
                ours = torch_time(lambda prep=prep, sizes=sizes, kern=kern: kern.launch(prep, sizes), reps=args.reps)
                t = ours.median_ms
                tc = torch_time(lambda a=a, b=b: torch.matmul(a, b), reps=args.reps).median_ms
                fl = 2 * shape[0] * shape[1] * shape[2]
                row["times"].append({"shape": list(shape), "ms": t, "tflops": fl / t / 1e9, "cublas_ms": tc,
                                     "ratio": tc / t})
            print(name, json.dumps(row), flush=True)
        except Exception as e:  # noqa: BLE001
            row = {"variant": name, "error": f"{type(e).__name__}: {e}"}
            print(name, "ERROR", row["error"], flush=True)
        rows.append(row)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cluster_variants.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{Path(args.spec).name}\n| variant | check | " + " | ".join(args.shapes.split(",")) + " |")
    print("|---|---|" + "---|" * len(shapes))
    for r in rows:
        if "error" in r:
            print(f"| {r['variant']} | {r['error']} |")
            continue
        cells = " | ".join(f"{t['tflops']:.0f} TF/s, {t['ratio']:.3f}x" for t in r["times"])
        print(f"| {r['variant']} | {r['check_rel_err']:.1e} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
