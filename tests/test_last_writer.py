"""Reads of TMA-fed and stored shared buffers resolved among candidate writes (smt.last_writer).

The final Hopper GEMM (persistent, grouped tile order, a ring that runs on across tiles, the next
tile's loads issued before the epilogue, a TMA-store epilogue) has its tag obligations proved for
all sizes: which write each wgmma operand read and the TMA store's read of sC see is settled once by
tag-free integer queries, so the tag queries choose among a few instances. Each bug below, one per
kernel, is in one of those writes (the prefetch of the next tile, the refill, the grouped order's
row count); each is violated by the solver at its line, with a witness the interpreter reproduces.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_file, compile_source
from argus_verify.replay import REPRODUCED, reproduce
from argus_verify.smt import last_writer as LW
from argus_verify.smt.analysis import Analysis

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_prefetch.arg"
TEXT = SPEC.read_text()
TAGS = ("tag-assertion", "output-contract", "reduction-coverage")


def _line(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


def test_the_final_gemms_tag_obligations_are_proved():
    rep = smt.verify(compile_file(SPEC), checks=TAGS)
    assert sorted(r.obligation for r in rep.results) == sorted(TAGS)
    assert all(r.status == "proved" for r in rep.results), [(r.obligation, r.status, r.message) for r in rep.results]


def test_each_read_is_settled_among_a_few_candidates():
    an = Analysis(compile_file(SPEC))
    an.timeout_s = 10.0
    kept = {}
    for name in ("sA", "sB", "sC"):
        (rd,) = an.sh_reads[name]
        assert LW.eligible(an, rd)
        keep = LW.plan(an, rd)
        assert keep is not None, f"completeness of the candidates of {name} not proved"
        lines = {id(W): W.node.span.line for W in an.sh_writes[name]}
        kept[name] = sorted(lines[i] for i, _ in keep)
    # sA: the first tile's prologue, the refill of the same tile, the previous tile's prefetch
    assert sorted(set(kept["sA"])) == [_line(TEXT, "tma_load(sA[(base + s)"), _line(TEXT, "tma_load(sA[(base + nk)"),
                                       _line(TEXT, "tma_load(sA[(base + KT + s)")]
    assert kept["sC"] == [_line(TEXT, "store(sC[0 : BM, 0 : BN]")]  # this tile's epilogue alone


BUGS = [
    # the next tile's A loads take the k tile after the right one
    ("prefetch_a_next_k", "A[nm0 : nm0 + BM, s * BK : s * BK + BK]",
     "A[nm0 : nm0 + BM, (s + 1) * BK : (s + 1) * BK + BK]", "tag-assertion", "acc = wgmma("),
    # the next tile's A loads take this tile's rows
    ("prefetch_this_tile", "A[nm0 : nm0 + BM, s * BK", "A[m0 : m0 + BM, s * BK", "tag-assertion", "acc = wgmma("),
    # one row too many in the last group of the grouped order: the next tile's rows are wrong there
    ("nrows_off_by_one", "nrows = max(1, min(GROUP, TM - ngrp * GROUP))",
     "nrows = max(1, min(GROUP, TM - ngrp * GROUP + 1))", "output-contract", "tma_store(C["),
]


@pytest.mark.parametrize(("name", "old", "new", "obligation", "at"), BUGS, ids=[b[0] for b in BUGS])
def test_a_wrong_write_into_the_ring_is_violated_and_replays(tmp_path, name, old, new, obligation, at):
    assert old in TEXT and "SMS=132" in TEXT
    # (2 blocks: the second tile of a block, where the prefetch's data is read, needs a few tiles, not
    # 133, so the witness's sizes stay small enough for the interpreter to replay)
    text = TEXT.replace(old, new, 1).replace("SMS=132", "SMS=2", 1)
    path = tmp_path / f"{name}.arg"
    path.write_text(text)
    k = compile_source(text, str(path))
    rep = smt.verify(k, checks=(obligation,))
    found = [r for r in rep.results if r.status == "violated" and r.location.line == _line(text, at)]
    assert found, [(r.obligation, r.status, r.location.line, r.message) for r in rep.results]
    solver = [r for r in found if "sizes" in (r.witness or {}) and "tile" in (r.witness.get("loop") or {})]
    assert solver, "no witness from the solver"
    check = reproduce(k, solver[0], str(path))
    assert check["status"] == REPRODUCED, (solver[0].witness["sizes"], solver[0].witness["loop"], check["text"])
