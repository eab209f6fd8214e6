"""`argus compile --validate` on every spec: per kernel, the obligations on which the PTX audit
agrees with the source proof, those it leaves unknown (and why), and the time.

    python bench/validate_specs.py [--timeout S] [--budget S]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from argus_verify import smt
from argus_verify.frontend import compile_file
from argus_verify.lowering.ptx import lower
from argus_verify.validate import SOURCE_SIDE, validate

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--budget", type=float, default=60.0)
    a = ap.parse_args()
    checks = tuple(sorted({o for obs in SOURCE_SIDE.values() for o in obs}))
    print("| spec | agree | unknown at the PTX level (first reason) | disagreements | seconds (audit) |")
    print("|---|---|---|---|---|")
    totals = {"agree": 0, "unknown": 0, "disagree": 0, "seconds": 0.0}
    for path in sorted((ROOT / "specs").glob("*.arg")):
        k = compile_file(str(path))
        rep = smt.verify(k, timeout_s=10.0, checks=checks)
        t0 = time.perf_counter()
        v = validate(k, rep, lower(k), timeout_s=a.timeout, budget_s=a.budget)
        dt = time.perf_counter() - t0
        agree = sorted({f.obligation for f in v.findings if f.kind == "agree"})
        unk = {}
        for f in v.unknowns():
            unk.setdefault(f.obligation, f.text)
        why = "; ".join(f"{ob}: {text.split(': ', 1)[-1][:90]}" for ob, text in sorted(unk.items()))
        print(f"| {path.stem} | {', '.join(agree) or '-'} | {why or '-'} | {len(v.disagreements())} | {dt:.1f} |")
        totals["agree"] += len(agree)
        totals["unknown"] += len(unk)
        totals["disagree"] += len(v.disagreements())
        totals["seconds"] += dt
    print()
    print(f"obligation results: {totals['agree']} agree, {totals['unknown']} unknown, {totals['disagree']} "
          f"disagreements; audit time {totals['seconds']:.0f} s in all (--timeout {a.timeout}, --budget {a.budget})")


if __name__ == "__main__":
    main()
