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


def test_output_once_of_the_persistent_spec_is_decided_by_the_lemma():
    from argus_verify.smt.analysis import Analysis
    from argus_verify.smt.schedule import persistent_once

    an = Analysis(compile_source(PREFETCH.read_text(), str(PREFETCH), {}, None), None)
    decl = next(d for d in an.k.tags if d.once)
    stores = [acc for acc, _ in an.out_stores if acc.tensor == decl.tensor]
    res = persistent_once(an, decl, stores)
    lines = PREFETCH.read_text().splitlines()
    store = next(n for n, t in enumerate(lines, 1) if "tma_store(C[" in t)
    once = next(n for n, t in enumerate(lines, 1) if t.strip().startswith("tag C[") and t.rstrip().endswith("once"))
    assert [(r.status, r.location.line) for r in res] == [("proved", store), ("proved", once)]
    assert all("bijection" in r.message for r in res)
    assert an._schedule_lemma.loop.var == "tile" and an._schedule_lemma.store.dst.base == "C"
    # two tiles store one box, checked on integers (as in specs/buggy/wgmma_store_tile_repeated.arg)
    an = Analysis(compile_source(PREFETCH.read_text().replace(M0, "        m0 = (grp * GROUP) * BM\n", 1),
                                 str(PREFETCH), {}, None), None)
    res = persistent_once(an, decl, [acc for acc, _ in an.out_stores if acc.tensor == decl.tensor])
    assert [r.status for r in res] == ["violated"] and len(res[0].witness["tiles"]) == 2
