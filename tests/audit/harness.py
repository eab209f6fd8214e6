"""Audit the corpus (tests/audit/corpus/*.ptx, each next to its .cu) and compare every kernel's
result with the expectation in its header: `// expect: clean` or `// expect: OBLIGATION at line N`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import statistics
import time
from pathlib import Path

from argus_verify.cli import main

CORPUS = Path(__file__).resolve().parent / "corpus"


def expectations(cu: Path) -> set:
    out = set()
    for line in cu.read_text().splitlines():
        m = re.match(r"//\s*expect:\s*(.*)$", line.strip())
        if not m:
            continue
        body = m.group(1).strip()
        if body == "clean":
            continue
        m2 = re.fullmatch(r"([\w-]+) at line (\d+)", body)
        assert m2, f"{cu.name}: bad expectation '{body}'"
        out.add((m2.group(1), int(m2.group(2))))
    return out


def audit(ptx: Path) -> tuple[int, list, float]:
    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        code = main(["audit", str(ptx), "--json"])
    return code, json.loads(buf.getvalue()), time.perf_counter() - t0


def classify(expected: set, results: list) -> tuple[str, list, list]:
    violated = [r for r in results if r["status"] == "violated"]
    unknown = [r for r in results if r["status"] == "unknown"]

    def lines(r):
        return set(r.get("detail", {}).get("lines", [])) | {r["location"]["line"]}
    found = {e for e in expected if any(r["obligation"] == e[0] and e[1] in lines(r) for r in violated)}
    extra = [r for r in violated if not any(r["obligation"] == o and ln in lines(r) for o, ln in expected)]
    if extra:
        verdict = "false-positive"
    elif found == expected and (expected or not unknown):
        verdict = "correct"
    elif unknown:
        verdict = "unknown"
    else:
        verdict = "missed"
    return verdict, extra, unknown


def run_corpus(names=None):
    rows = []
    for ptx in sorted(CORPUS.glob("*.ptx")):
        if names and ptx.stem not in names:
            continue
        exp = expectations(ptx.with_suffix(".cu"))
        code, results, secs = audit(ptx)
        verdict, extra, unknown = classify(exp, results)
        got = sorted({(r["obligation"], r["location"]["line"]) for r in results if r["status"] == "violated"})
        rows.append({"kernel": ptx.stem, "expected": sorted(exp) or "clean", "reported": got or "clean",
                     "unknown": [(r["obligation"], r["location"]["line"], r["message"]) for r in unknown],
                     "verdict": verdict, "exit": code, "seconds": secs})
    return rows


def summary(rows) -> dict:
    n = len(rows)
    tp = sum(1 for r in rows if r["expected"] != "clean" and r["verdict"] == "correct")
    fp = sum(1 for r in rows if r["verdict"] == "false-positive")
    missed = sum(1 for r in rows if r["verdict"] == "missed")
    unk = sum(1 for r in rows if r["verdict"] == "unknown")
    buggy = sum(1 for r in rows if r["expected"] != "clean")
    return {"kernels": n, "correct": sum(1 for r in rows if r["verdict"] == "correct"), "false_positive": fp,
            "missed": missed, "unknown": unk,
            "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / buggy if buggy else 1.0,
            "unknown_rate": unk / n if n else 0.0,
            "median_seconds": statistics.median(r["seconds"] for r in rows) if rows else 0.0}


if __name__ == "__main__":
    import sys

    rows = run_corpus(set(sys.argv[1:]) or None)
    for r in rows:
        print(f"{r['kernel']:32s} {r['verdict']:15s} exp={r['expected']} got={r['reported']} {r['seconds']:.2f}s")
        for u in r["unknown"]:
            print("      unknown:", u)
    print(json.dumps(summary(rows), indent=1))
