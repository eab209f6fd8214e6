"""A shared tile written with a constant before TMA (or any copy) fills it, e.g. zeroed at the start:
the reduction pass joined the constant's flow with the data's, lost the data's input dimensions, and
reported "the contract's sum over A's dimension 1 is not computed" on a correct kernel (an outside
probe's false alarm). A constant fill now enters like padding: 0 before a sum is proved, a constant
that could change the sum stays a padding violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

SPEC = Path(__file__).resolve().parent / "hopper" / "wgmma_generic_b.arg"
ANCHOR = "    acc = zeros(f32[BM, BN], tv=ACC)\n"


def with_fill(value: str, fence: bool = True) -> str:
    text = SPEC.read_text()
    assert ANCHOR in text
    fill = (f"    z = full(bf16[BM, BK], {value}, tv=(128, 32):(32, 1))\n    store(sA, z)\n"
            + ("    fence_proxy_async()\n" if fence else "") + "    barrier()\n")
    return text.replace(ANCHOR, fill + ANCHOR, 1)


def statuses(text: str) -> dict:
    rep = smt.verify(compile_source(text, str(SPEC)), timeout_s=10, jobs=1)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


def test_a_tile_zeroed_before_tma_fills_it_is_proved():
    got = statuses(with_fill("0.0"))
    assert all(s <= {"proved", "warning"} for s in got.values()), got


@pytest.mark.parametrize("value", ["1.0", "-inf"])
def test_a_fill_that_would_change_the_sum_is_a_padding_violation(value):
    got = statuses(with_fill(value))
    assert got["padding"] == {"violated"}


def test_ordinary_stores_under_a_tma_copy_need_the_proxy_fence():
    """Without fence_proxy_async the zeros (generic proxy) and the TMA copy (async proxy) into sA are
    not ordered: the zeros may land after the copy's data (an outside probe: it was proved)."""
    text = with_fill("0.0", fence=False)
    rep = smt.verify(compile_source(text, str(SPEC)), timeout_s=10, jobs=1)
    (bad,) = rep.violations()
    assert bad.obligation == "async-proxy-fence" and "writes sA over ordinary stores" in bad.message
    assert "tma_load(sA" in text.splitlines()[bad.location.line - 1]
