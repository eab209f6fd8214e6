"""Output views whose start is computed per thread but whose affine form has no thread term
(`d * 0` with `d = thread_id - 5`): output-once once crashed on them (an internal error: the
block-level coverage encoding evaluated the start without a thread). They go through the
per-thread writer now: the correct kernel is proved, its twin with a real thread shift is not."""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

KERNEL = """\
kernel thread_start(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    base = block_id.x * 256
    d = {d}
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[base + {shift} : base + {shift} + 256], xs, mask=True)
"""


@pytest.mark.parametrize("d", ["thread_id - 5", "thread_id // 7", "7 // (thread_id + 1)"])
def test_a_start_computed_per_thread_with_no_thread_term_is_proved(d):
    rep = smt.verify(compile_source(KERNEL.format(d=d, shift="d * 0"), "t.arg"), timeout_s=30.0)
    assert not any("internal" in r.message for r in rep.results), rep.render_text()
    statuses = {r.obligation: r.status for r in rep.results}
    assert statuses["output-once"] == "proved" and statuses["output-contract"] == "proved", rep.render_text()


def test_its_twin_shifted_by_half_the_threads_is_violated():
    rep = smt.verify(compile_source(KERNEL.format(d="thread_id // 128", shift="d"), "t.arg"), timeout_s=30.0)
    statuses = {r.obligation: r.status for r in rep.results}
    assert statuses["output-once"] == "violated", rep.render_text()
    assert "written twice" in next(r.message for r in rep.results if r.obligation == "output-once")
