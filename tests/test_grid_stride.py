"""Grid-stride loops, `for t in range(block_id.x, cdiv(N, TILE), G)` on a grid of G blocks: each
block copies every G-th tile. output-once once took the writing block as block 0 (the view moves
with t, not with block_id.x), so every correct such kernel got a false "never written" (an internal
error once the replay refuted it), and a 1-D store crashed the persistent-schedule lemma. Each
buggy twin (one edit) is violated and its witness reproduces; the correct kernels are proved."""

from __future__ import annotations

import pytest
from copy_twins import assert_proved_and_copies, assert_twin_violated

TILE_VIEW = """\
kernel stride(x: f32[N]) -> out: f32[N]:
    grid(4)
    block(64)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    for t in range(block_id.x, cdiv(N, 256), 4):
        base = t * 256
        xs = load(x[base : base + 256], tv=(64, 4):(4, 1), mask=True)
        store(out[base : base + 256], xs, mask=True)
"""

THREAD_VIEW = """\
kernel stride(x: f32[N]) -> out: f32[N]:
    grid(7)
    block(128)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    for t in range(block_id.x, cdiv(N, 128), 7):
        base = t * 128
        xs = load(x[base + thread_id : base + thread_id + 1], tv=(128, 1):(0, 0), mask=True)
        if base + thread_id < N:
            store(out[base + thread_id : base + thread_id + 1], xs)
"""

# two consecutive tiles per block: the block that visits tile t is t // 2 (block 0 was taken, a
# false "never written" for every other block's tiles)
PAIRS = """\
kernel pairs(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 512))
    block(64)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    for t in range(2 * block_id.x, 2 * block_id.x + 2):
        base = t * 256
        xs = load(x[base : base + 256], tv=(64, 4):(4, 1), mask=True)
        store(out[base : base + 256], xs, mask=True)
"""

CORRECT = {"tile_view": TILE_VIEW, "thread_view": THREAD_VIEW, "pairs": PAIRS}

# (kernel, edit, what output-once says)
BUGGY = [
    ("tile_view", ("grid(4)", "grid(3)"), "never written"),  # step 4 over 3 blocks: residue 3 skipped
    ("tile_view", ("grid(4)", "grid(5)"), "written twice"),  # blocks 0 and 4 both start a residue-0 run
    ("tile_view", ("range(block_id.x,", "range(block_id.x + 1,"), "never written"),
    ("tile_view", ("cdiv(N, 256)", "N // 256"), "never written"),
    ("thread_view", ("grid(7)", "grid(6)"), "never written"),
    ("thread_view", ("cdiv(N, 128), 7)", "cdiv(N, 128), 6)"), "written twice"),
    ("pairs", ("2 * block_id.x + 2)", "2 * block_id.x + 1)"), "never written"),
    ("pairs", ("2 * block_id.x + 2)", "2 * block_id.x + 3)"), "written twice"),
    ("pairs", ("grid(cdiv(N, 512))", "grid(cdiv(N, 1024))"), "never written"),
]


@pytest.mark.parametrize("name", list(CORRECT))
def test_a_grid_stride_copy_is_proved_and_right(name):
    assert_proved_and_copies(CORRECT[name], name)


@pytest.mark.parametrize("name, edit, says", BUGGY, ids=[f"{b[0]}:{b[1][1]}" for b in BUGGY])
def test_its_one_edit_twin_is_violated_and_the_witness_reproduces(name, edit, says):
    assert_twin_violated(CORRECT[name], name, edit, says)
