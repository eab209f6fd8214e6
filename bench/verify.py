"""Time `smt.verify` on every spec and buggy kernel (median of a few runs).

    python bench/verify.py [--runs 5] [--timeout 10] [--jobs 2] [--json out.json] [FILES...]

Prints one row per kernel: the obligations' verdicts, the median / min / max wall time of a whole
verification (front end excluded), and the slowest single obligation. The agent loop calls the
verifier hundreds of times per run, so the target is well under a second per kernel.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from argus_verify import smt
from argus_verify.frontend import compile_file

ROOT = Path(__file__).resolve().parents[1]


def bench(path: Path, runs: int, timeout: float, jobs: int = 1) -> dict:
    kernel = compile_file(path)
    times = []
    rep = None
    for _ in range(runs):
        t0 = time.perf_counter()
        rep = smt.verify(kernel, timeout_s=timeout, jobs=jobs)
        times.append(time.perf_counter() - t0)
    c = rep.counts()
    slow = max(rep.results, key=lambda r: r.seconds, default=None)
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    return {
        "kernel": name,
        "obligations": len(rep.results),
        **c,
        "exit_code": rep.exit_code,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "slowest": f"{slow.obligation}@{slow.location.line} {slow.seconds:.2f}s" if slow else "",
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--jobs", type=int, default=1, help="forked worker processes per verification")
    args = ap.parse_args(argv)
    files = [p.resolve() for p in args.files] or (
        sorted((ROOT / "specs").glob("*.arg")) + sorted((ROOT / "specs" / "buggy").glob("*.arg"))
    )
    rows = [bench(p, args.runs, args.timeout, args.jobs) for p in files]
    head = (
        f"{'kernel':48s} {'obl':>4s} {'prov':>4s} {'viol':>4s} {'unk':>4s} {'warn':>4s} {'exit':>4s} "
        f"{'median':>8s} {'min':>7s} {'max':>7s}  slowest obligation"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['kernel']:48s} {r['obligations']:4d} {r['proved']:4d} {r['violated']:4d} "
            f"{r['unknown']:4d} {r['warning']:4d} {r['exit_code']:4d} {r['median_s']:7.3f}s "
            f"{r['min_s']:6.3f}s {r['max_s']:6.3f}s  {r['slowest']}"
        )
    med = [r["median_s"] for r in rows]
    print("-" * len(head))
    print(
        f"{len(rows)} kernels: median {statistics.median(med):.3f}s, mean {statistics.mean(med):.3f}s, "
        f"max {max(med):.3f}s, total {sum(med):.2f}s per pass ({args.runs} runs each, jobs={args.jobs})"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
