"""The persistent tile schedule's lemma (smt/schedule.py): proved on the grouped order of the final Hopper
spec, refuted (with a counterexample checked on integers) on schedules that skip or repeat tiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify.frontend import compile_source
from argus_verify.smt.schedule import schedule_lemma

ROOT = Path(__file__).resolve().parents[1]
PREFETCH = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_prefetch.arg"
M0 = "        m0 = (grp * GROUP + (tile % (GROUP * TN)) % rows) * BM\n"


def lemma(text: str):
    return schedule_lemma(compile_source(text, str(PREFETCH), {}, None))


def test_grouped_order_is_a_bijection_for_all_sizes():
    r = lemma(PREFETCH.read_text())
    assert r.status == "proved", r.message
    assert r.loop.var == "tile" and r.store.dst.base == "C"


@pytest.mark.parametrize("old, new, claim", [
    # the row within the group left out: the tiles of a group's column repeat its first row
    (M0, "        m0 = (grp * GROUP) * BM\n", "two tiles never store the same box"),
    # rows of the last group past the output
    (M0, M0.replace("% rows", "% GROUP"), "each tile's box lies on the output's tile grid"),
    # one tile fewer than the output has
    ("range(block_id.x, TM * TN, SMS)", "range(block_id.x, TM * TN - 1, SMS)", "number of output tiles"),
])
def test_schedules_that_skip_or_repeat_a_tile_are_refuted(old, new, claim):
    text = PREFETCH.read_text()
    assert old in text
    r = lemma(text.replace(old, new, 1))
    assert r.status == "violated", r.message
    assert claim in r.message and r.witness["sizes"]


def test_a_loop_step_other_than_the_grid_is_refuted_structurally():
    text = PREFETCH.read_text().replace("range(block_id.x, TM * TN, SMS)", "range(block_id.x, TM * TN, 2 * SMS)", 1)
    r = lemma(text)
    assert r.status == "violated" and "tiles are skipped" in r.message


def test_a_kernel_without_a_persistent_loop_has_no_lemma():
    spec = ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg"
    assert schedule_lemma(compile_source(spec.read_text(), str(spec), {}, None)) is None
