"""Division by zero where the divisor depends on the thread, a block id or a loop variable (the
`launch` obligation, smt/vacuity.py). Each buggy kernel has a correct twin that must stay proved;
each violation's witness is replayed in the interpreter, which stops at the division. The
interpreter itself faults only for threads that execute the division (not masked ones, not the
unselected arm of a select)."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.frontend import compile_source
from argus_verify.replay import REPRODUCED, reproduce
from argus_verify.runtime.interp import run

KERNEL = """\
kernel div(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    base = block_id.x * 256
{body}
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[base : base + 256], xs, mask=True)
"""

# name -> (buggy body, its correct twin, what the violation names)
CASES = {
    "thread": ("    q = 7 // (thread_id - 5)",
               "    q = 7 // (thread_id + 1)", "thread 5"),
    "guarded_thread": ("    if thread_id != 6:\n        q = 7 // (thread_id - 5)",
                       "    if thread_id != 5:\n        q = 7 // (thread_id - 5)", "thread 5"),
    "select": ("    q = 7 // (thread_id - 5) if thread_id != 6 else 0",
               "    q = 7 // (thread_id - 5) if thread_id != 5 else 0", "thread 5"),
    "loop": ("    for k in range(0, N // 64):\n        q = 64 // (k - 2)",
             "    for k in range(3, N // 64):\n        q = 64 // (k - 2)", "k = 2"),
    "block": ("    q = 7 // (block_id.x - 1)",
              "    q = 7 // (block_id.x + 1)", "block (1, 0, 0)"),
    "warp_and_lane": ("    q = 7 // (warp_id - lane_id)",
                      "    q = 7 // (warp_id + lane_id + 1)", "thread"),
    "size_under_thread_condition": ("    if thread_id < 128:\n        q = thread_id // (N - 3)",
                                    "    if thread_id < 128:\n        q = thread_id // (N + 3)", "N = 3"),
}


def verify(body: str):
    return smt.verify(compile_source(KERNEL.format(body=body), "div.arg"), timeout_s=30.0)


@pytest.mark.parametrize("name", list(CASES))
def test_division_by_zero_is_violated_at_its_point_and_reproduces(name):
    bad, _, names = CASES[name]
    kernel = compile_source(KERNEL.format(body=bad), "div.arg")
    rep = smt.verify(kernel, timeout_s=30.0, checks=("launch",))
    [v] = rep.violations()
    assert v.obligation == "launch" and "division by zero" in v.message and names in v.message, rep.render_text()
    assert v.location.line == 7 + bad.count("\n")
    assert rep.exit_code == 1
    check = reproduce(kernel, v)
    assert check["status"] == REPRODUCED, check


@pytest.mark.parametrize("name", list(CASES))
def test_its_correct_twin_is_proved(name, monkeypatch):
    monkeypatch.setattr(smt, "SHOW_PROVED_LAUNCH", True)  # (the report leaves the launch proofs out)
    _, good, _ = CASES[name]
    rep = verify(good)
    launch = [r for r in rep.results if r.obligation == "launch"]
    assert launch and all(r.status == "proved" for r in launch), rep.render_text()
    assert any("is never 0" in r.message for r in launch), rep.render_text()
    assert rep.exit_code == 0, rep.render_text()


def test_the_interpreter_faults_only_where_the_division_runs():
    x = np.arange(300, dtype=np.float32)
    for name in ("guarded_thread", "select"):
        good = compile_source(KERNEL.format(body=CASES[name][1]), "div.arg")
        assert np.array_equal(run(good, {"x": x}, {"N": 300})["out"], x)
        bad = compile_source(KERNEL.format(body=CASES[name][0]), "div.arg")
        with pytest.raises(ArgusRuntimeError, match="division by zero"):
            run(bad, {"x": x}, {"N": 300})
