"""Warp-synchronous statements under conditions (barrier-divergence, smt/obligations/divergence.py).

The lowering emits shuffles, warp reductions, mma, ldmatrix and stmatrix as `.sync.aligned`
instructions for the whole warp (`shfl.sync ... 0xffffffff`): run by only some lanes of a warp they
hang or read undefined registers. Before, a shuffle under `if lane_id < 16` was proved, and the
interpreter ran it, reading the other lanes' values as if they had joined. Now the verifier reports
it with two lanes of one warp, and the interpreter stops at it (the witness reproduces); a condition
that selects whole warps stays proved."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.frontend import compile_source
from argus_verify.replay import REPRODUCED, reproduce
from argus_verify.runtime import interp

SHUFFLE = """
kernel shuffled(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 64))
    block(64)
    tag x[i] = (i,)
    i0 = block_id.x * 64
    a = load(x[i0 : i0 + 64], tv=(64, 1):(1, 0), mask=True)
    b = a
    if {cond}:
        b = shfl_xor(a, 0)
    store(out[i0 : i0 + 64], b, mask=True)
"""

# one warp per row of 32; the warp's total, computed only where the row exists
ROW_TOTAL = """
kernel rowtotal(x: f32[M, 32]) -> out: f32[M]:
    grid(cdiv(M, 4))
    block(128)
    row = block_id.x * 4 + warp_id
    if {cond}:
        xs = load(x[row : row + 1, 0 : 32], tv=((32, 4), 1):((1, 0), 0))
        s = reduce_sum(xs, axis=1, scope=warp, lanes=0b11111)
        store(out[row : row + 1], reshape(s, 1), where=lane_id == 0)
"""


def _divergence(text: str):
    kernel = compile_source(text, "k.arg")
    rep = smt.verify(kernel, timeout_s=10, jobs=1)
    return kernel, [r for r in rep.results if r.obligation == "barrier-divergence"]


@pytest.mark.parametrize(("cond", "want"), [
    ("lane_id < 16", "violated"),
    ("thread_id % 2 == 0", "violated"),
    ("i0 + thread_id < N", "violated"),  # the last warp of a ragged tail
    ("warp_id == 1", "proved"),
    ("thread_id < 32", "proved"),
    ("i0 < N", "proved"),  # the same for the whole block
])
def test_a_shuffle_runs_in_whole_warps(cond, want):
    kernel, results = _divergence(SHUFFLE.format(cond=cond))
    statuses = {r.status for r in results}
    assert ("violated" in statuses) == (want == "violated"), results
    if want == "proved":
        assert statuses == {"proved"}
        return
    (bad,) = [r for r in results if r.status == "violated"]
    assert bad.location.line == 10 and "shfl_xor" in bad.message
    w = bad.witness
    assert w["lanes"][0] != w["lanes"][1]
    check = reproduce(kernel, bad)
    assert check["status"] == REPRODUCED and "only some lanes" in check["text"], check


def test_a_warp_reduction_of_rows_that_exist():
    """`row < M` is the same for a warp's lanes (one warp per row): proved. `row * 32 + lane_id < M
    * 32 - 5` cuts the last row's warp: violated, and the interpreter stops at it."""
    _, ok = _divergence(ROW_TOTAL.format(cond="row < M"))
    assert ok and {r.status for r in ok} == {"proved"}
    kernel, bad = _divergence(ROW_TOTAL.format(cond="row * 32 + lane_id < M * 32 - 5"))
    (v,) = [r for r in bad if r.status == "violated"]
    assert v.location.line == 8 and "reduce_sum" in v.message
    assert reproduce(kernel, v)["status"] == REPRODUCED


@pytest.mark.parametrize("schedule", ["lockstep", "warps,width=8", "interleave:3,width=4"])
def test_the_interpreter_stops_at_a_partial_warp_collective(schedule):
    kernel = compile_source(SHUFFLE.format(cond="lane_id < 16"), "k.arg")
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(ArgusRuntimeError, match="only some lanes"):
        interp.run(kernel, {"x": x}, {"N": 64}, {}, schedule=schedule)
    whole = compile_source(SHUFFLE.format(cond="warp_id == 1"), "k.arg")
    got = interp.run(whole, {"x": x}, {"N": 64}, {}, schedule=schedule)["out"]
    assert np.array_equal(got, x)
