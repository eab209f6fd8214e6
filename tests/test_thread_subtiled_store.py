"""Per-thread stores in a loop of block-sized steps, `i = block_id.x * 1024 + k * 128 + thread_id`
(each thread writes one element per iteration, a block covers 1024): the commonest way to give a
thread several elements. output-once was unknown there ("dimension 0 of the store mixes several
block ids / loop variables"): the per-thread candidate writer took one block id or loop variable per
dimension. It now takes the block, then each loop, outermost first, as for tile views
(tests/test_subtiled_store.py). The correct kernels are proved and right; each one-edit twin is
violated with the expected message and its witness reproduces."""

from __future__ import annotations

import pytest
from copy_twins import assert_proved_and_copies, assert_twin_violated, copies

from argus_verify import smt
from argus_verify.frontend import compile_source

STEPS = """\
kernel steps(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 1024))
    block(128)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    for k in range(8):
        i = block_id.x * 1024 + k * 128 + thread_id
        if i < N:
            v = load(x[i : i + 1], tv=(128, 1):(0, 0))
            store(out[i : i + 1], v)
"""

LOOP = "    for k in range(8):\n        i = block_id.x * 1024 + k * 128 + thread_id"
CORRECT = {
    "steps": STEPS,
    # the loop variable is the offset itself
    "offsets": STEPS.replace(LOOP, "    for k in range(0, 1024, 128):\n        i = block_id.x * 1024 + k + thread_id"),
    # each thread walks 8 consecutive elements: the loop step is smaller than the threads' spread, so
    # the iteration is the least one at which some thread's offset is the element's
    "consecutive": STEPS.replace(LOOP, "    for k in range(8):\n        i = block_id.x * 1024 + thread_id * 8 + k"),
    # where= instead of the if
    "where": STEPS.replace("        if i < N:\n            v = load(x[i : i + 1], tv=(128, 1):(0, 0))\n"
                           "            store(out[i : i + 1], v)",
                           "        v = load(x[i : i + 1], tv=(128, 1):(0, 0), mask=True)\n"
                           "        store(out[i : i + 1], v, where=i < N)"),
}

BUGGY = [
    ("steps", ("range(8)", "range(7)"), "never written"),  # each block's last 128 elements
    ("steps", ("cdiv(N, 1024)", "cdiv(N, 2048)"), "never written"),
    ("steps", ("if i < N:", "if i < N - 1:"), "never written"),
    ("steps", ("k * 128", "k * 127"), "written twice"),  # iterations overlap
    ("steps", ("range(8)", "range(9)"), "written twice"),  # into the next block's first 128
    ("offsets", ("range(0, 1024, 128)", "range(0, 1024, 256)"), "never written"),
    ("where", ("where=i < N)", "where=i < N - 2)"), "never written"),
    ("consecutive", ("thread_id * 8 + k", "thread_id * 7 + k"), "written twice"),
    ("consecutive", ("thread_id * 8 + k", "thread_id * 9 + k"), "written twice"),
    ("consecutive", ("range(8)", "range(9)"), "written twice"),
]
# elements left unwritten by the consecutive walk: the candidate is not known to be the only writer
# there ("tiles overlap"), so these are unknown, never proved
UNWRITTEN = [("range(8)", "range(7)"), ("cdiv(N, 1024)", "cdiv(N, 2048)"), ("if i < N:", "if i < N - 1:")]


@pytest.mark.parametrize("name", list(CORRECT))
def test_a_per_thread_store_in_block_sized_steps_is_proved_and_right(name):
    assert name == "steps" or CORRECT[name] != STEPS
    assert_proved_and_copies(CORRECT[name], name)


@pytest.mark.parametrize("name, edit, says", BUGGY, ids=[f"{b[0]}:{b[1][1]}" for b in BUGGY])
def test_its_one_edit_twin_is_violated_and_the_witness_reproduces(name, edit, says):
    assert_twin_violated(CORRECT[name], name, edit, says)


@pytest.mark.parametrize("edit", UNWRITTEN, ids=[e[1] for e in UNWRITTEN])
def test_a_consecutive_walk_that_leaves_elements_unwritten_is_not_proved(edit):
    text = CORRECT["consecutive"]
    assert edit[0] in text
    kernel = compile_source(text.replace(edit[0], edit[1], 1), "consecutive.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.exit_code != 0 and not copies(kernel), rep.render_text()
    assert [r.status for r in rep.results if r.obligation == "output-once" and r.status != "proved"]
