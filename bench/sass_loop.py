#!/usr/bin/env python3
"""Instruction mix of a kernel's hottest loop: `python bench/sass_loop.py FILE.sass ...` on the output
of `cuobjdump -sass` (the loop closed by the backward branch with the most HMMA), counting the
vector (fast) path only: basic blocks with 16-bit scalar loads / stores (the run-time alignment
fallback of the copies) are left out. Prints the instructions of one iteration (one k-tile) and the
non-HMMA instructions per HMMA."""

from __future__ import annotations

import collections
import re
import sys

_INS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
_BRA = re.compile(r"BRA (0x[0-9a-f]+)")


def loop_mix(text: str) -> tuple:
    ins = [(int(m.group(1), 16), m.group(2).strip()) for m in map(_INS.match, text.splitlines()) if m]
    index = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, t) in enumerate(ins):
        m = _BRA.search(t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in index:
            s = index[int(m.group(1), 16)]
            h = sum("HMMA" in x for _, x in ins[s:i + 1])
            if best is None or h > best[0]:
                best = (h, s, i)
    if best is None:
        raise SystemExit("no loop found")
    _, s, e = best
    targets = {int(x, 16) for _, t in ins for x in _BRA.findall(t)}
    blocks, cur = [], []
    for a, t in ins[s:e + 1]:
        if a in targets and cur:
            blocks.append(cur)
            cur = []
        cur.append((a, t))
        if "BRA" in t or "EXIT" in t:
            blocks.append(cur)
            cur = []
    blocks.append(cur)
    keep = [x for b in blocks if not any("LDG.E.U16" in t or "STS.U16" in t for _, t in b) for x in b]
    cnt = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for _, t in keep)
    return ins[s][0], ins[e][0], cnt


def main(argv: list) -> int:
    for path in argv:
        start, end, cnt = loop_mix(open(path).read())  # noqa: SIM115
        tot = sum(cnt.values())
        h = max(cnt["HMMA"], 1)
        print(f"{path}: loop {start:#x}-{end:#x}, {tot} instructions per iteration on the vector path: "
              f"HMMA {cnt['HMMA']}, LDSM {cnt['LDSM']}, LDGSTS {cnt['LDGSTS']}, "
              f"{(tot - cnt['HMMA']) / h:.2f} non-HMMA per HMMA")
        print("   " + ", ".join(f"{k} {v}" for k, v in cnt.most_common(14)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
