"""Audit the whole corpus (tests/audit/corpus) and print the table for BENCHMARKS.md: expected
against reported per kernel, precision, recall, unknown rate and the median audit time per kernel.

    python bench/audit_corpus.py            # markdown table and summary (no GPU, no nvcc needed)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "audit"))

import harness  # noqa: E402


def fmt(x) -> str:
    return "clean" if x == "clean" else ", ".join(f"{o} {ln}" for o, ln in x)


def main() -> None:
    rows = harness.run_corpus(set(sys.argv[1:]) or None)
    print("| kernel | expected | reported (violations) | verdict | seconds |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kernel']} | {fmt(r['expected'])} | {fmt(r['reported'])} | {r['verdict']} | {r['seconds']:.2f} |")
    s = harness.summary(rows)
    print()
    print(f"{s['kernels']} kernels: {s['correct']} as expected, {s['false_positive']} false positives, "
          f"{s['missed']} missed, {s['unknown']} unknown; precision {s['precision']:.2f}, recall {s['recall']:.2f}, "
          f"unknown rate {s['unknown_rate']:.2f}, median {s['median_seconds']:.2f} s per kernel")


if __name__ == "__main__":
    main()
