"""Grid-stride loops, `for t in range(block_id.x, cdiv(N, TILE), G)` on a grid of G blocks: each
block copies every G-th tile. output-once once took the writing block as block 0 (the view moves
with t, not with block_id.x), so every correct such kernel got a false "never written" (an internal
error once the replay refuted it), and a 1-D store crashed the persistent-schedule lemma. Each
buggy twin (one edit) is violated and its witness reproduces; the correct kernels are proved."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import NOT_REPRODUCED, reproduce
from argus_verify.runtime.interp import run

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
    kernel = compile_source(CORRECT[name], f"{name}.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.exit_code == 0, rep.render_text()
    for n in (1, 300, 2053):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        assert np.array_equal(run(kernel, {"x": x}, {"N": n})["out"], x)


@pytest.mark.parametrize("name, edit, says", BUGGY, ids=[f"{b[0]}:{b[1][1]}" for b in BUGGY])
def test_its_one_edit_twin_is_violated_and_the_witness_reproduces(name, edit, says):
    text = CORRECT[name]
    assert edit[0] in text
    kernel = compile_source(text.replace(edit[0], edit[1], 1), f"{name}.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    once = [r for r in rep.violations() if r.obligation == "output-once"]
    assert once and says in once[0].message, rep.render_text()
    assert not any("internal" in r.message for r in rep.results), rep.render_text()
    for r in rep.violations():
        assert reproduce(kernel, r)["status"] != NOT_REPRODUCED, r.render_text() if hasattr(r, "render_text") else r
