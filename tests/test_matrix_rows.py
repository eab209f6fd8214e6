"""ldmatrix / stmatrix rows are 16 contiguous, 16-byte-aligned bytes (smt/obligations/matrix_rows.py,
reported under `bounds`).

`ldmatrix.sync.aligned.m8n8` and `stmatrix` move each 8x8 matrix row as 16 contiguous bytes at a
16-byte-aligned address. Before this check, a GEMM whose sA rows were padded by 4 bf16 (rows start
8-byte aligned) or whose swizzle moved elements inside a 16-byte chunk was proved, and faulted in
the PTX simulator (`misaligned ldmatrix row address`)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from argus_verify import atoms, smt
from argus_verify.frontend import compile_source

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "specs" / "gemm_bf16_mma.arg").read_text()
SA_LAYOUT = "layout=Swizzle(min(3, BK // 16), 3, 3) o row_major(STAGES, BM, BK)"
LDM_A = "a = ldmatrix(sA[kt % STAGES], x4, rows=A_ROWS)"
LDM_B = "b = ldmatrix(sB[kt % STAGES], x4, rows=B_ROWS, trans=True)"


def gemm(sa_layout: str | None = None) -> str:
    assert SA_LAYOUT in GEMM
    return GEMM if sa_layout is None else GEMM.replace(SA_LAYOUT, f"layout={sa_layout}")


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


@functools.cache
def verified(text: str):
    return smt.verify(compile_source(text, "k.arg"), timeout_s=10, jobs=1)


def row_results(report, opname: str = "ldmatrix") -> list:
    return [r for r in report.results if r.obligation == "bounds" and r.message.startswith(f"{opname} row")]


def at_line(report, line: int, opname: str = "ldmatrix"):
    rs = [r for r in row_results(report, opname) if r.location.line == line]
    assert len(rs) == 1, [(r.location.line, r.message) for r in row_results(report, opname)]
    return rs[0]


CASES = {
    # rows padded by 4 bf16: row r starts at byte 72 r (8-byte aligned)
    "pad4": "(STAGES, BM, BK):(BM * (BK + 4), BK + 4, 1)",
    # bits 2.. of the offset swizzled: the two halves of a 16-byte chunk swap
    "chunk_swizzle": "Swizzle(2, 2, 3) o row_major(STAGES, BM, BK)",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ldmatrix_rows_not_16_aligned_bytes_are_violated(case):
    text = gemm(CASES[case])
    rep = verified(text)
    r = at_line(rep, line_of(text, LDM_A))
    assert r.status == "violated"
    assert r.message == "ldmatrix row of sA is not 16 contiguous, 16-byte-aligned bytes"
    w = r.witness
    assert {"block", "thread", "lane", "instruction", "row"} <= set(w)
    assert w["row"]["tile"] == "sA" and w["row"]["byte_offset"] == 2 * w["row"]["offset"]
    offs = r.detail["offsets"]
    assert offs[0] % 8 != 0 or offs != list(range(offs[0], offs[0] + 8))
    assert "Swizzle(b, 3, s)" in r.hint and "multiple of 8" in r.hint
    # sB is untouched: its rows are still proved, and nothing else turns violated
    assert at_line(rep, line_of(text, LDM_B)).status == "proved"
    assert [x for x in rep.violations() if x is not r] == []


def test_chunk_swizzle_witness_shows_the_scattered_row():
    rep = verified(gemm(CASES["chunk_swizzle"]))
    r = next(x for x in row_results(rep) if x.status == "violated")
    offs = r.detail["offsets"]
    assert sorted(offs) != offs or offs[0] % 8 != 0
    assert any("not contiguous" in e or "misaligned" in e for e in r.explanation)


@pytest.mark.parametrize("layout", [None, "(STAGES, BM, BK):(BM * (BK + 8), BK + 8, 1)"], ids=["spec", "pad8"])
def test_whole_chunks_and_16_byte_padding_are_proved(layout):
    text = gemm(layout)
    rep = verified(text)
    for needle, alloc in ((LDM_A, "sA"), (LDM_B, "sB")):
        r = at_line(rep, line_of(text, needle))
        assert r.status == "proved", r.message
        assert r.message == f"ldmatrix rows of {alloc} are 16 contiguous, aligned bytes"
    assert rep.violations() == []


STM = """
kernel k(A: bf16[16, 16]) -> C: bf16[16, 16]:
    grid(1)
    block(32)
    s = shared(bf16[16, 16]{layout})
    x = load(A[0:16, 0:16], tv={tv})
    stmatrix(s, x, x4, rows=((8, 2, 2), 1):((16, 128, 8), 0))
    barrier()
    y = load(s, tv=(32, 8):(8, 1))
    store(C[0:16, 0:16], y)
"""


@pytest.mark.parametrize("layout,status", [("", "proved"), (", layout=(16, 16):(20, 1)", "violated"),
                                           (", layout=(16, 16):(24, 1)", "proved")])
def test_stmatrix_rows(layout, status):
    rows = atoms.ir.TVLayout(atoms.Layout(((8, 2, 2), 1), ((16, 128, 8), 0)), (16, 16))
    tv = atoms.ldmatrix_result(rows, 4, False).layout
    text = STM.format(layout=layout, tv=tv)
    rep = verified(text)
    r = at_line(rep, line_of(text, "stmatrix("), "stmatrix")
    assert r.status == status, r.message
    if status == "violated":
        assert r.message == "stmatrix row of s is not 16 contiguous, 16-byte-aligned bytes"
        assert r.detail["byte_offset"] % 16 != 0
    else:
        assert r.message == "stmatrix rows of s are 16 contiguous, aligned bytes"
