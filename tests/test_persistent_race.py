"""A persistent SIMT GEMM: specs/gemm_simt.arg with its tiles walked by a grid-stride loop
(`for tile in range(block_id.x, TILES, 7)` on `grid(7)`), the k loop inside. The barrier at the end
of a tile's last k step orders the next tile's first stores into sA and sB; the race check only
looked for barriers in the previous iteration of the innermost common loop, so those stores were
"race unknown". Each barrier dropped is still a race."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

SPEC = Path(__file__).resolve().parents[1] / "specs" / "gemm_simt.arg"


def persistent_text() -> str:
    lines = [ln for ln in SPEC.read_text().splitlines() if not ln.lstrip().startswith("#")]
    text = "\n".join(lines) + "\n"
    text = text.replace("    grid(cdiv(N, BN), cdiv(M, BM))", "    grid(7)")
    head, body = text.split("    m0 = block_id.y * BM\n    n0 = block_id.x * BN\n")
    allocs = "    sA = shared(f32[BM, BK])\n    sB = shared(f32[BK, BN])\n"
    assert allocs in body
    body = body.replace(allocs, "")
    loop = ("    TNN = cdiv(N, BN)\n    for tile in range(block_id.x, cdiv(M, BM) * TNN, 7):\n"
            "        m0 = (tile // TNN) * BM\n        n0 = (tile % TNN) * BN\n")
    return head + allocs + loop + "".join("    " + ln + "\n" if ln.strip() else "\n" for ln in body.splitlines())


def races(text: str) -> dict:
    rep = smt.verify(compile_source(text, "gemm_simt_persistent.arg"), timeout_s=30.0, checks=("race",))
    return {r.location.line: r.status for r in rep.results if r.obligation == "race"}, rep


def test_a_persistent_gemm_is_race_free():
    found, rep = races(persistent_text())
    assert found and all(s == "proved" for s in found.values()), rep.render_text()


@pytest.mark.parametrize("which", ["first", "last"])
def test_dropping_either_barrier_is_a_race(which):
    text = persistent_text()
    at = text.index("barrier()") if which == "first" else text.rindex("barrier()")
    found, rep = races(text[:at] + "pass" + text[at + len("barrier()"):])
    assert "violated" in found.values(), rep.render_text()
