"""The evaluation cannot be gamed: zeros, constants, unwritten (NaN) outputs, a copy of the input,
writing an input, an illegal access, a hang and a crashed process are each refused and contained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from argus_verify.agent_eval import LocalExecutor, _degenerate, evaluate
from argus_verify.planner.tasks import check_plan, read_task

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "tasks" / "level1" / "09_relu.py"
CRASH = ROOT / "tests" / "agent_tasks" / "crash_on_inputs.py"

HEAD = """kernel relu<BLOCK=1024>(x: f32[M, N]) -> out: f32[M, N]:
    grid(cdiv(N, BLOCK), M)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    r = block_id.y
    c0 = block_id.x * BLOCK
"""
LOAD = "    xs = load(x[r : r + 1, c0 : c0 + BLOCK], tv=(256, 4):(4, 1), mask=True)\n"
STORE = "    store(out[r : r + 1, c0 : c0 + BLOCK], {v}, mask=True{where})\n"


def kernel(value: str, where: str = "", load: str = LOAD) -> str:
    return HEAD + load + STORE.format(v=value, where=where)


def req(source: str, task: Path = RELU, verify: bool = True) -> dict:
    return {"source": source, "task": str(task), "checks": check_plan(read_task(task), "interp"), "verify": verify}


def test_a_correct_kernel_passes():
    r = evaluate(req(kernel("max(xs, 0.0)")))
    assert r["verdict"] == "pass", r["feedback"]
    assert len(r["runs"]) == 3 and all(x["ok"] for x in r["runs"])


def test_zeros_refused_by_the_verifier_and_by_the_numbers():
    zeros = kernel("zeros(f32[1, BLOCK], tv=(256, 4):(4, 1))", load="")
    r = evaluate(req(zeros))
    assert r["verdict"] == "violated" and "[output-contract]" in r["feedback"]
    r = evaluate(req(zeros, verify=False))  # even unverified, the numerical test refuses it
    assert r["verdict"] == "wrong" and "every output element is 0.0" in r["feedback"]


def test_constant_and_unwritten_outputs_refused():
    r = evaluate(req(kernel("full(f32[1, BLOCK], 1.0, tv=(256, 4):(4, 1))", load=""), verify=False))
    assert r["verdict"] == "wrong" and "every output element is 1.0" in r["feedback"]
    half = evaluate(req(kernel("max(xs, 0.0)", where=", where=thread_id % 2 == 0"), verify=False))
    assert half["verdict"] == "wrong" and "NaN (never written" in half["feedback"]
    assert half["stage"] == "run"


def test_degenerate_only_where_the_reference_is_not():
    assert _degenerate(np.zeros(4), np.zeros(4)) is None  # a zero reference may be matched by zeros
    assert _degenerate(np.zeros(4), np.arange(4.0)) is not None
    assert _degenerate(np.array([1.0, np.nan]), np.ones(2)) is not None


def test_copy_of_the_input_verifies_but_fails_the_numbers():
    r = evaluate(req(kernel("xs")))  # tags agree with the contract: only the numbers catch it
    assert r["verification"]["violated"] == 0
    assert r["verdict"] == "wrong" and "relative error" in r["feedback"]
    assert "at BATCH=19, DIM=19" in r["feedback"]  # the smallest shape, reported first


def test_a_kernel_whose_requires_excludes_the_task_sizes_does_not_pass():
    # correct at the scaled-down sizes (N <= 64), but the task's rows have 4096 elements
    src = HEAD.replace("    grid(", "    requires N <= 64\n    grid(", 1) + LOAD \
        + STORE.format(v="max(xs, 0.0)", where="")
    r = evaluate(req(src))
    assert r["verdict"] == "wrong" and "task's own sizes" in r["feedback"] and "precondition" in r["feedback"]


def test_writing_an_input_is_refused_before_anything_runs():
    src = HEAD + LOAD + "    store(x[r : r + 1, c0 : c0 + BLOCK], xs, mask=True)\n" + STORE.format(v="xs", where="")
    r = evaluate(req(src))
    assert r["verdict"] == "check-error" and "^" in r["feedback"]


def test_inputs_compared_before_and_after(monkeypatch):
    from argus_verify.runtime import interp

    real = interp.run

    def tampering(kernel, arrays, sizes, *a, **k):
        arrays["x"][...] = 0.0  # what a kernel writing its input through an alias would do
        return real(kernel, arrays, sizes, *a, **k)

    monkeypatch.setattr(interp, "run", tampering)
    r = evaluate(req(kernel("max(xs, 0.0)"), verify=False))
    assert r["verdict"] == "wrong" and "modified its input x" in r["feedback"]


def test_fault_hang_and_crash_are_contained():
    ex = LocalExecutor(timeout_s=20, memory_mb=2048, gpus=0)
    try:
        oob = kernel("max(xs, 0.0)", load=LOAD.replace(", mask=True", ""))
        hang = HEAD + LOAD + "    acc = xs\n    for i in range(1000000000):\n        acc = acc + xs\n" \
            + STORE.format(v="acc", where="")
        fault, crash = ex.map([req(oob, verify=False), req(kernel("max(xs, 0.0)"), task=CRASH, verify=False)])
        assert fault["verdict"] == "fault" and "out-of-bounds" in fault["feedback"]
        assert crash["verdict"] == "crashed" and "signal 11" in crash["feedback"]
        ex.timeout_s = 3
        (hung,) = ex.map([req(hang, verify=False)])
        assert hung["verdict"] == "timeout"
        ex.timeout_s = 20
        (after,) = ex.map([req(kernel("max(xs, 0.0)"), verify=False)])  # the executor still works
        assert after["verdict"] == "pass"
    finally:
        ex.close()
