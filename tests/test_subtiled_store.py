"""Output tiles stored in sub-tiles: a dimension's start moved by a block id and loop variables
(`m0 + 16 * i` with `m0 = block_id.y * 32`, i < 2). Coverage used to be unknown there ("mixes
several block ids / loop variables"); the candidate writer now takes the block, then each loop,
outermost first (strictly decreasing steps). The correct kernel is proved; each one-edit twin is
violated at the right place and its witness reproduces."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import NOT_REPRODUCED, reproduce
from argus_verify.runtime.interp import run

KERNEL = """\
kernel subtiles(x: f32[M, N]) -> out: f32[M, N]:
    grid(cdiv(N, 32), cdiv(M, 32))
    block(128)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    contract out[i, j] = x[i, j]

    m0 = block_id.y * 32
    n0 = block_id.x * 32
    for i in range(2):
        for j in range(2):
            a = load(x[m0 + i * 16 : m0 + i * 16 + 16, n0 + j * 16 : n0 + j * 16 + 16], tv=(128, 2):(1, 128), mask=True)
            store(out[m0 + i * 16 : m0 + i * 16 + 16, n0 + j * 16 : n0 + j * 16 + 16], a, mask=True)
"""

TWINS = [
    (("for i in range(2)", "for i in range(1)"), "never written"),
    (("for j in range(2)", "for j in range(3)"), "written twice"),
    (("out[m0 + i * 16 : m0 + i * 16 + 16", "out[m0 + i * 17 : m0 + i * 17 + 16"), "written twice"),
    (("n0 = block_id.x * 32", "n0 = block_id.x * 16"), "written twice"),
]


def test_a_subtiled_store_is_proved_and_right():
    kernel = compile_source(KERNEL, "subtiles.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.exit_code == 0, rep.render_text()
    for m, n in ((1, 1), (33, 70), (64, 64)):
        x = np.random.default_rng(m + n).standard_normal((m, n)).astype(np.float32)
        assert np.array_equal(run(kernel, {"x": x}, {"M": m, "N": n})["out"], x)


@pytest.mark.parametrize("edit, says", TWINS, ids=[e[1] for e, _ in TWINS])
def test_its_one_edit_twin_is_violated(edit, says):
    assert edit[0] in KERNEL
    kernel = compile_source(KERNEL.replace(edit[0], edit[1], 1), "subtiles.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    once = [r for r in rep.violations() if r.obligation == "output-once"]
    assert once and any(says in r.message for r in once), rep.render_text()
    for r in rep.violations():
        assert reproduce(kernel, r)["status"] != NOT_REPRODUCED
