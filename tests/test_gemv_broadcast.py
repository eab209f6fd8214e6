"""A rank-1 operand beside a rank-2 tile (`a * xv` with `xv` a chunk of x every thread holds whole):
the elementwise op pairs the two per (thread, value), so x's dimension runs along the axis of `a`
whose coordinate equals xv's at every (thread, value). The reduction passes took a lower-rank
operand's axes for nothing, and two correct GEMVs from an outside probe were violated ("the
contract's sum over x's dimension 0 is not computed"). Each stays beside buggy neighbours."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

HERE = Path(__file__).resolve().parent / "gemv"
BF16 = (HERE / "gemv_bf16.arg").read_text()
MUL = "acc = acc + reduce_sum(cast(a, f32) * cast(xv, f32), axis=1)"


def _not_proved(text: str) -> list:
    rep = smt.verify(compile_source(text, "gemv.arg"), timeout_s=20, jobs=1)
    return [(r.obligation, r.status) for r in rep.results if r.status != "proved"]


@pytest.mark.parametrize("name", ["gemv_bf16", "gemv_warp"])
def test_the_gemvs_are_proved(name):
    assert _not_proved((HERE / f"{name}.arg").read_text()) == []


@pytest.mark.parametrize("old, new", [
    ("xv = load(x[c * CH : c * CH + CH]", "xv = load(x[c * CH + 1 : c * CH + CH + 1]"),  # x shifted by one
    ("tv=(BLOCK, CH):(0, 1), mask=True)", "tv=(BLOCK, CH):(0, 0), mask=True)"),  # one x element for every column
    ("for c in range(cdiv(N, CH)):", "for c in range(cdiv(N, CH) - 1):"),  # the last chunk skipped
    (MUL, MUL.replace("cast(xv, f32)", "cast(xv, f32) * cast(xv, f32)")),  # x squared
    (MUL, MUL.replace(" * cast(xv", " + cast(xv")),  # added, not multiplied
])
def test_each_buggy_neighbour_is_not_proved(old, new):
    assert old in BF16
    found = _not_proved(BF16.replace(old, new))
    assert any(s in ("violated", "unknown") for _, s in found), found
