"""A tag assertion that anchors coverage on `a = transpose(at)`, where `at = ldmatrix(..., trans=True)`
reads A given transposed in global memory: coverage starts from `a` (the assertion names its
elements), so the ldmatrix that only feeds it is not followed. It was unknown ("Ldmatrix is beyond
the coverage analysis"); the probe's mutants stay violated."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

SPEC = Path(__file__).resolve().parent / "mma_trans" / "gemm_at_trans.arg"
TEXT = SPEC.read_text()


def _statuses(text: str) -> dict:
    rep = smt.verify(compile_source(text, str(SPEC)), timeout_s=30, jobs=1)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


def test_the_transposed_operand_gemm_is_proved():
    st = _statuses(TEXT)
    assert all(v == {"proved"} for v in st.values()), st


@pytest.mark.parametrize("old, new", [
    ("at = ldmatrix(sA[kt % STAGES], x4, rows=A_ROWS, trans=True)", "at = ldmatrix(sA[kt % STAGES], x4, rows=A_ROWS)"),
    ("(BM, 8, 8 * BM, WM, 0), (16, 16 * BM)", "(BM, 8 * BM, 8, WM, 0), (16, 16 * BM)"),  # quadrants swapped
    ("AT[nk * BK : nk * BK + BK, m0 : m0 + BM]", "AT[m0 : m0 + BM, nk * BK : nk * BK + BK]"),  # refill indices swapped
])
def test_its_mutants_are_violated(old, new):
    assert old in TEXT
    st = _statuses(TEXT.replace(old, new))
    assert "violated" in set().union(*st.values()), st
