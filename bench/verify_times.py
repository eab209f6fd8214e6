"""Wall time of `python -m argus_verify verify SPEC` per spec, the whole process, in both modes.

    python bench/verify_times.py [--runs 3] [--modes 1,default] [--save DIR] [--json out.json] [FILES...]

Each spec (default: specs/*.arg, specs/buggy/*.arg, specs/incoming/*/*.arg) is verified in a fresh
process, `--runs` times per mode, rounds interleaved (every spec once, then again) so that a burst
of load on a shared machine spreads over all specs. Modes: `1` is `--jobs 1` (everything in one
process), `default` leaves `--jobs` out (forked workers, one per core, at most 2). The table shows
the median wall time per spec and mode, and the process's own CPU time (user + system, children
included) for the `--jobs 1` mode, which a loaded machine disturbs less than wall time.

`--save DIR` writes each spec's report text (times stripped) from the first `--jobs 1` run to
DIR/<spec>.txt, so that two versions of the verifier can be compared byte for byte (`diff -r`).
Target (issue 8 item 10): median at most ~0.55 s, none over 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_files() -> list[Path]:
    return (
        sorted((ROOT / "specs").glob("*.arg"))
        + sorted((ROOT / "specs" / "buggy").glob("*.arg"))
        + sorted((ROOT / "specs" / "incoming").glob("*/*.arg"))
    )


def run_once(path: Path, mode: str, timeout: float) -> tuple[float, float, int, str]:
    """(wall s, cpu s of the process and its children, exit code, stdout) of one verification."""
    argv = [sys.executable, "-m", "argus_verify", "verify", str(path), "--timeout", f"{timeout:g}"]
    if mode != "default":
        argv += ["--jobs", mode]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"{path}: exit {proc.returncode}\n{proc.stderr}")
    return wall, cpu, proc.returncode, proc.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="1,default", help="comma-separated: 1 (--jobs 1), default, or a job count")
    ap.add_argument("--timeout", type=float, default=10.0, help="the solver limit per query (verify --timeout)")
    ap.add_argument("--save", type=Path, help="write each report (times stripped) to DIR/<spec>.txt")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    files = [p.resolve() for p in args.files] or default_files()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    walls = {(f, m): [] for f in files for m in modes}
    cpus = {(f, m): [] for f in files for m in modes}
    exits = {}
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    for rnd in range(args.runs):
        for f in files:
            for m in modes:
                wall, cpu, rc, out = run_once(f, m, args.timeout)
                walls[f, m].append(wall)
                cpus[f, m].append(cpu)
                exits[f] = rc
                if args.save and rnd == 0 and m == modes[0]:
                    name = str(f.relative_to(ROOT)).replace(os.sep, "__")
                    (args.save / f"{name}.txt").write_text(re.sub(r"\(\d+\.\d+ s\)", "(T s)", out))
        print(f"round {rnd + 1}/{args.runs} done", file=sys.stderr, flush=True)
    cols = "".join(f" {'jobs=' + m:>12s}" for m in modes)
    head = f"{'spec':56s} {'exit':>4s}{cols} {'cpu(j=' + modes[0] + ')':>11s}"
    print(head)
    print("-" * len(head))
    rows = []
    for f in files:
        name = str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f)
        med = {m: statistics.median(walls[f, m]) for m in modes}
        cpu = statistics.median(cpus[f, modes[0]])
        rows.append({"spec": name, "exit": exits[f], "median_s": med, "cpu_s": cpu,
                     "runs": {m: walls[f, m] for m in modes}})
        print(f"{name:56s} {exits[f]:4d}" + "".join(f" {med[m]:11.3f}s" for m in modes) + f" {cpu:10.3f}s")
    print("-" * len(head))
    for m in modes:
        meds = [r["median_s"][m] for r in rows]
        over = [r["spec"] for r in rows if r["median_s"][m] > 2.0]
        shown = ", ".join(over[:8]) + (", ..." if len(over) > 8 else "")
        print(f"jobs={m}: {len(rows)} specs, median {statistics.median(meds):.3f}s, mean {statistics.mean(meds):.3f}s, "
              f"max {max(meds):.3f}s, over 2 s: {len(over)}{' (' + shown + ')' if over else ''}")
    cpus_ = [r["cpu_s"] for r in rows]
    print(f"cpu (jobs={modes[0]}): median {statistics.median(cpus_):.3f}s, max {max(cpus_):.3f}s, "
          f"over 2 s: {sum(c > 2.0 for c in cpus_)} ({args.runs} runs each)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
