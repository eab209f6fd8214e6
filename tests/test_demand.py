"""Implicit tag assertions only where values are used (smt/demand.py, issue 8 item 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_file, compile_source
from argus_verify.smt.analysis import Analysis

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "shfl_down_broadcast.arg"


def test_shfl_down_tree_uses_the_lower_half_of_each_row():
    an = Analysis(compile_file(SPEC))
    # the fragments m of the four tree steps, in program order, and the broadcast
    ms = [an.demand.of(f) for f in _frags(an, "m")]
    lanes = [sorted({int(t) % 32 for t in np.nonzero(d.any(axis=1))[0]}) for d in ms]
    row = list(range(16))
    assert lanes[0] == row + [16 + x for x in row]  # the reduce_max result: every lane
    assert lanes[1] == list(range(8)) + list(range(16, 24))  # after the distance-8 step
    assert lanes[2] == list(range(4)) + list(range(16, 20))
    assert lanes[3] == [0, 1, 16, 17]
    assert lanes[4] == [0, 16]  # what the broadcast reads
    assert ms[5].all()  # the broadcast value is stored by every thread


def _frags(an, name):
    """The FragVs that the walk bound to `name`, in creation order."""
    seen = {}
    for res, op, _ in an.demand.flows:
        for f in (res, op):
            if f.name == name:
                seen[f.id] = f
    return [seen[k] for k in sorted(seen)]


def _variant(old, new):
    text = SPEC.read_text()
    assert old in text
    return compile_source(text.replace(old, new), "variant.arg")


@pytest.mark.parametrize("old,new", [
    ("m = shfl_idx(m, lane_id - lane_id % 16)", "m = shfl_idx(m, lane_id - lane_id % 16 + 8)"),
    ("    m = max(m, shfl_down(m, 8))", "    m = max(m, shfl_down(m, 16))"),
])
def test_mixed_rows_that_are_used_are_reported(old, new):
    rep = smt.verify(_variant(old, new), timeout_s=10.0, checks=("tag-assertion",))
    bad = [r for r in rep.violations() if r.obligation == "tag-assertion"]
    assert bad and bad[0].location.line == 19, rep.render_text()


@pytest.mark.parametrize("spec", sorted((ROOT / "specs").glob("*.arg")), ids=lambda p: p.stem)
def test_every_stored_fragment_is_used(spec):
    """Every value a store writes (shared or global) is demanded by the threads that store it."""
    an = Analysis(compile_file(spec))
    frags = [frag for _, frag in an.out_stores]
    frags += [w.frag for ws in an.sh_writes.values() for w in ws if w.frag is not None]
    assert frags
    for f in frags:
        assert an.demand.of(f).any(), f.name
