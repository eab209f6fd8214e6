"""Named and counted barriers (`bar.arrive`, `bar.sync 1, 64`) in the audit: they do not order the
whole block, so the audit never proves a race-freedom that rests on them, and never reports a
divergence at them as a violation (producer and consumer warps meet at them by design). The racy
kernels were "proved" race-free before (an outside probe's, tests/audit/partial_barriers/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_verify.cli import main

HERE = Path(__file__).resolve().parent / "audit" / "partial_barriers"
RACY = ["p_bar_arrive128_racy", "p_bar_count64_racy", "warpspec_arrive_racy"]
RIGHT = ["p_bar_counted_ok", "p_bar_named1_ok", "warpspec_ok"]


def _statuses(name: str, capsys) -> dict:
    main(["audit", str(HERE / f"{name}.ptx"), "--json"])
    out: dict = {}
    for r in json.loads(capsys.readouterr().out):
        out.setdefault(r["obligation"], set()).add(r["status"])
    return out


@pytest.mark.parametrize("name", RACY)
def test_a_race_across_a_partial_barrier_is_never_proved(name, capsys):
    st = _statuses(name, capsys)
    assert st["race"] == {"unknown"} and st["uninitialised-read"] == {"unknown"}, st


@pytest.mark.parametrize("name", RIGHT)
def test_a_correct_partial_barrier_is_not_a_violation(name, capsys):
    st = _statuses(name, capsys)
    assert "violated" not in set().union(*st.values()), st
    assert st["barrier-divergence"] == {"unknown"}
