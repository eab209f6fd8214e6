"""A row reduction inside a grid-stride loop over rows (`for row in range(block_id.x, M, 4)`,
then the chunk loop `acc = acc + reduce_sum(...)`). reduction-operator was unknown there: in the
outer loop's second pass every name of the inner body existed before the inner loop, and the pass
dropped the expression of every such assignment, not only of the accumulations. The correct kernel
is proved; each one-edit twin is not (violated where the expression is followed, unknown where
the accumulator is carried across rows)."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.runtime.interp import run

KERNEL = """\
kernel rows<CHUNK=1024>(x: f32[M, N]) -> out: f32[M]:
    grid(4)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = sum(x[i, j] for j)

    partial = shared(f32[1, 8])
    for row in range(block_id.x, M, 4):
        acc = zeros(f32[1, 1], tv=(256, CHUNK // 256):(0, 0))
        for c0 in range(0, N, CHUNK):
            xs = load(x[row : row + 1, c0 : c0 + CHUNK], tv=(256, CHUNK // 256):(CHUNK // 256, 1), mask=True)
            acc = acc + reduce_sum(xs, axis=1)
        w = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)
        store(partial[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)
        barrier()
        parts = load(partial, tv=(256, 8):(0, 1))
        total = reduce_sum(parts, axis=1)
        store(out[row : row + 1], reshape(total, 1), where=thread_id == 0)
        barrier()
"""

HOISTED = KERNEL.replace(
    "    for row in range(block_id.x, M, 4):\n        acc = zeros(f32[1, 1], tv=(256, CHUNK // 256):(0, 0))\n",
    "    acc = zeros(f32[1, 1], tv=(256, CHUNK // 256):(0, 0))\n    for row in range(block_id.x, M, 4):\n")

# name -> (text, the obligation that must not be proved, its status)
TWINS = {
    "accumulates_with_max": (KERNEL.replace("total = reduce_sum(parts", "total = reduce_max(parts"),
                             "reduction-operator", "violated"),
    "starts_at_one": (KERNEL.replace("acc = zeros(f32[1, 1]", "acc = full(f32[1, 1], 1.0"),
                      "reduction-operator", "violated"),
    "no_barrier_before_the_next_row": (KERNEL[: KERNEL.rstrip().rfind("\n")] + "\n", "race", "violated"),
    "accumulator_carried_across_rows": (HOISTED, "output-contract", "unknown"),
}


def test_a_row_reduction_in_a_grid_stride_loop_is_proved_and_right():
    kernel = compile_source(KERNEL, "rows.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.exit_code == 0, rep.render_text()
    x = np.random.default_rng(0).standard_normal((9, 1500)).astype(np.float32)
    out = run(kernel, {"x": x}, {"M": 9, "N": 1500})["out"]
    assert np.allclose(out, x.sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", list(TWINS))
def test_its_one_edit_twin_is_not_proved(name):
    text, obligation, status = TWINS[name]
    assert text != KERNEL
    rep = smt.verify(compile_source(text, f"{name}.arg"), timeout_s=30.0)
    assert rep.exit_code != 0, rep.render_text()
    assert any(r.obligation == obligation and r.status == status for r in rep.results), rep.render_text()
    assert not any("internal" in r.message for r in rep.results), rep.render_text()
