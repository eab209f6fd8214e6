"""A block axis the output view does not move with, gated by a condition on that block id
(`grid(cdiv(N, 128), 2)` with `if block_id.y == 1: store(...)`). output-once took block_id.y as 0
there, so the correct kernel got a false "never written" (an internal error after the replay).
The candidate writer is now the least block along the axis whose conditions hold."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import NOT_REPRODUCED, reproduce
from argus_verify.runtime.interp import run

KERNEL = """\
kernel gated(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 128), 3)
    block(128)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    base = block_id.x * 128
    xs = load(x[base : base + 128], tv=(128, 1):(1, 0), mask=True)
    if block_id.y {gate}:
        store(out[base : base + 128], xs, mask=True)
"""


@pytest.mark.parametrize("gate", ["== 1", "== 2", "> 1", "== 0"])
def test_a_store_gated_to_one_block_along_an_unused_axis_is_proved(gate):
    kernel = compile_source(KERNEL.format(gate=gate), "gated.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.exit_code == 0, rep.render_text()
    x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    assert np.array_equal(run(kernel, {"x": x}, {"N": 300})["out"], x)


@pytest.mark.parametrize("gate, says", [("== 3", "never written"), ("< 0", "never written"),
                                        (">= 1", "written twice"), ("!= 1", "written twice")])
def test_a_gate_that_selects_no_block_or_several_is_violated(gate, says):
    kernel = compile_source(KERNEL.format(gate=gate), "gated.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    once = [r for r in rep.violations() if r.obligation == "output-once"]
    assert once and says in once[0].message, rep.render_text()
    for r in rep.violations():
        assert reproduce(kernel, r)["status"] != NOT_REPRODUCED
