"""Races in global memory (smt/obligations/global_races.py): two threads write one element of an
output, or one reads an element another writes, with nothing ordering them. Before, only shared
memory was checked, and a kernel without `once` tags was proved with blocks overwriting each
other's elements or reading a neighbour's (an outside probe's `negstore_race`, `clamp_b_twice`).
Each buggy kernel sits beside a correct one that must stay proved, and each witness is shown by a
schedule of the interpreter (blocks one at a time, in either order; warps apart)."""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import REPRODUCED, reproduce
from argus_verify.runtime.schedules import Schedule

COPY = """
kernel copy<BLOCK=128>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    i0 = block_id.x * BLOCK
    a = load(x[i0 : i0 + BLOCK], tv=(BLOCK, 1):(1, 0), mask=True)
    store(out[{start} : {start} + BLOCK], a, mask=True)
"""

# out is written, then read back: the block's own elements (right) or its neighbour's (wrong), by
# the thread that wrote it or by another one (then a barrier must lie between)
READ_BACK = """
kernel readback<BLOCK=128>(x: f32[N]) -> (out: f32[N], y: f32[N]):
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    i0 = block_id.x * BLOCK
    a = load(x[i0 : i0 + BLOCK], tv=(BLOCK, 1):(1, 0), mask=True)
    store(out[i0 : i0 + BLOCK], a, mask=True)
{barrier}    b = load(out[{start} : {start} + BLOCK], tv={tv}, mask=True)
    store(y[i0 : i0 + BLOCK], b, mask=True)
"""
SAME_THREAD = "(BLOCK, 1):(1, 0)"
OTHER_THREAD = "((32, 4), 1):((4, 1), 0)"  # thread (lane l, warp w) reads element 4 l + w

# every thread of a warp holds the warp's total after the butterfly; one lane stores it (right) or all do
ROW_TOTAL = """
kernel rowtotal(x: f32[M, 32]) -> out: f32[M]:
    grid(M)
    block(32)
    row = block_id.x
    xs = load(x[row : row + 1, 0 : 32], tv=(32, 1):(1, 0))
    s = reduce_sum(xs, axis=1, scope=warp, lanes=0b11111)
    store(out[row : row + 1], reshape(s, 1){where})
"""

# each thread sums into its own element over a loop (program order), or its neighbour's
ACCUMULATE = """
kernel accumulate<BLOCK=128>(x: f32[R, N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    i0 = block_id.x * BLOCK
    for r in range(R):
        a = load(x[r : r + 1, i0 : i0 + BLOCK], tv=(BLOCK, 1):(1, 0), mask=True)
        store(out[{start} : {start} + BLOCK], reshape(a, BLOCK), mask=True)
"""


def _races(text: str):
    kernel = compile_source(text, "k.arg")
    rep = smt.verify(kernel, timeout_s=10, jobs=1)
    return kernel, [r for r in rep.results if r.obligation == "race"]


def _verdict(text: str) -> str:
    _, races = _races(text)
    assert races, "the kernel writes an output that is not `once`: a race result is expected"
    statuses = {r.status for r in races}
    return "violated" if "violated" in statuses else ("unknown" if "unknown" in statuses else "proved")


def test_blocks_with_their_own_tiles_are_proved():
    _, races = _races(COPY.format(start="i0"))
    assert [r.status for r in races] == ["proved"]
    assert "global memory" in races[0].message


def test_overlapping_tiles_of_two_blocks_race():
    kernel, races = _races(COPY.format(start="i0 // 2"))
    (bad,) = [r for r in races if r.status == "violated"]
    assert bad.location.line == 7
    w = bad.witness
    assert w["blocks"][0] != w["blocks"][1]
    assert w["element"]["tensor"] == "out"
    assert [a["op"] for a in w["accesses"]] == ["store", "store"]


@pytest.mark.parametrize(("barrier", "start", "tv", "want"), [
    ("", "i0", SAME_THREAD, "proved"),  # each thread reads back what it wrote
    ("", "i0", OTHER_THREAD, "violated"),  # another thread's element, no barrier
    ("    barrier()\n", "i0", OTHER_THREAD, "proved"),
    ("    barrier()\n", "i0 + 1", SAME_THREAD, "violated"),  # the next block's first element
    ("    barrier()\n", "i0 - 1", SAME_THREAD, "violated"),  # the previous block's last element
])
def test_reading_an_output_back(barrier, start, tv, want):
    assert _verdict(READ_BACK.format(barrier=barrier, start=start, tv=tv)) == want


@pytest.mark.parametrize("start", ["i0 + 1", "i0 - 1"])
def test_a_neighbour_block_read_is_shown_by_running_blocks_one_at_a_time(start):
    """Side by side, every block stores before any reads; one block at a time (in launch order
    for the next block's element, last first for the previous one's) the read comes first."""
    kernel, races = _races(READ_BACK.format(barrier="    barrier()\n", start=start, tv=SAME_THREAD))
    (bad,) = [r for r in races if r.status == "violated"]
    check = reproduce(kernel, bad)
    assert check["status"] == REPRODUCED, check
    assert "blocks=" in check["text"]


def test_a_read_of_another_threads_element_is_shown_with_warps_apart():
    kernel, races = _races(READ_BACK.format(barrier="", start="i0", tv=OTHER_THREAD))
    (bad,) = [r for r in races if r.status == "violated"]
    assert reproduce(kernel, bad)["status"] == REPRODUCED


def test_one_lane_storing_a_warp_total_is_proved_and_every_lane_storing_it_is_a_race():
    assert _verdict(ROW_TOTAL.format(where=", where=lane_id == 0")) == "proved"
    # equal values, but a race by CUDA's memory model, as in shared memory
    assert _verdict(ROW_TOTAL.format(where="")) == "violated"


def test_a_thread_rewriting_its_own_element_is_ordered_and_a_neighbours_is_not():
    assert _verdict(ACCUMULATE.format(start="i0")) == "proved"
    assert _verdict(ACCUMULATE.format(start="i0 + r")) == "violated"


def test_a_once_output_is_left_to_output_once():
    text = COPY.format(start="i0 // 2").replace("    i0 =", "    tag out[i] = (i,) once\n    i0 =")
    kernel = compile_source(text, "k.arg")
    rep = smt.verify(kernel, timeout_s=10, jobs=1)
    assert not [r for r in rep.results if r.obligation == "race"]
    assert any(r.obligation == "output-once" and r.status == "violated" for r in rep.results)


def test_block_orders_of_the_interpreter_parse_and_print():
    for text in ("warps,blocks=serial", "warps,blocks=reverse", "lockstep,blocks=serial"):
        assert str(Schedule.parse(text)) == text
    assert str(Schedule.parse("warps,blocks=batch")) == "warps"
