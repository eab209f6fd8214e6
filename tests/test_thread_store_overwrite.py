"""A per-thread store into shared memory inside a loop, under a guard that depends on the loop
(`if base + thread_id < N: store(s[thread_id : thread_id + 1], xs)`), read back by another warp.

Such a store has no footprint (what it writes depends on more than the thread), so it never counted
as overwriting its own earlier iterations: every read could resolve to a write of an older
iteration, the exact re-check refuted each such candidate, and the output contract of a correct
copy stayed unknown ("candidate counterexamples were not confirmed"). An older write is now
overwritten where the same thread and value of a later instance write the same offset. The correct
kernels are proved and right; each one-edit buggy twin is rejected, the interpreter shows it wrong,
and its violations' witnesses reproduce."""

from __future__ import annotations

import pytest
from copy_twins import assert_proved_and_copies, assert_twin_violated, copies

COPY = """\
kernel copy(x: f32[N]) -> out: f32[N]:
    grid(4)
    block(128)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    s = shared(f32[128])
    for t in range(block_id.x, cdiv(N, 128), 4):
        base = t * 128
        xs = load(x[base + thread_id : base + thread_id + 1], tv=(128, 1):(0, 0), mask=True)
        if base + thread_id < N:
            store(s[thread_id : thread_id + 1], xs)
        barrier()
        e = lane_id + 32 * ((warp_id + 1) % 4)
        if base + e < N:
            ys = load(s[e : e + 1], tv=(128, 1):(0, 0))
            store(out[base + e : base + e + 1], ys)
        barrier()
"""

GUARD = "        if base + thread_id < N:\n            store(s"
CORRECT = {
    "if": COPY,
    # the same guard written as the store's where=
    "where": COPY.replace(GUARD + "[thread_id : thread_id + 1], xs)",
                          "        store(s[thread_id : thread_id + 1], xs, where=base + thread_id < N)"),
    # a tile per block instead of a grid-stride loop, in a loop over two halves of the tile
    "halves": COPY.replace("grid(4)", "grid(cdiv(N, 256))").replace(
        "for t in range(block_id.x, cdiv(N, 128), 4):", "for t in range(2 * block_id.x, 2 * block_id.x + 2):"),
}

BUGGY = [
    # the last element's shared copy is never written: its read sees an older iteration's value
    ("if", ("if base + thread_id < N:", "if base + thread_id < N - 1:")),
    # odd iterations read what the even ones wrote
    ("if", ("if base + thread_id < N:", "if base + thread_id < N and t % 2 == 0:")),
    # only a block's first iteration fills the buffer
    ("if", ("if base + thread_id < N:", "if base + thread_id < N and t == block_id.x:")),
    # no barrier between the stores and the other warp's reads
    ("if", ("xs)\n        barrier()\n", "xs)\n")),
    # the where= form with the same off-by-one
    ("where", ("where=base + thread_id < N)", "where=base + thread_id < N - 1)")),
    ("halves", ("if base + thread_id < N:", "if base + thread_id < N and t % 2 == 0:")),
]


@pytest.mark.parametrize("name", list(CORRECT))
def test_the_copy_through_per_thread_stores_is_proved_and_right(name):
    assert name == "if" or CORRECT[name] != COPY
    assert_proved_and_copies(CORRECT[name], name)


@pytest.mark.parametrize("name, edit", BUGGY, ids=[f"{b[0]}:{b[1][1].strip()[:40]}" for b in BUGGY])
def test_its_one_edit_twin_is_rejected_wrong_and_reproduced(name, edit):
    kernel = assert_twin_violated(CORRECT[name], name, edit)
    try:
        ok = copies(kernel)
    except Exception:  # noqa: BLE001 - a fault (an uninitialised read, a race) is wrong too
        ok = False
    assert not ok
