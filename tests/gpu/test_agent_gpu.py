"""The agent's evaluation on the GPU: the task's own sizes, inputs read back from the device, the
bench against PyTorch eager in the same process, and the executor's one worker per GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify.agent_eval import LocalExecutor, evaluate, gpu_count
from argus_verify.planner.tasks import check_plan, read_task
from argus_verify.planner.templates import plan, render

pytestmark = pytest.mark.cuda
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["level1/09_relu", "level1/18_softmax", "level2/02_gemm_bias_relu"])
def test_template_checks_and_benches_on_the_gpu(name):
    path = ROOT / "tasks" / f"{name}.py"
    t = read_task(path)
    r = evaluate({"source": render(plan(t.declared_ops, t)), "task": str(path), "backend": "cuda", "bench": True,
                  "checks": check_plan(t, "cuda")})
    assert r["verdict"] == "pass", r.get("feedback")
    assert r["runs"][-1]["sizes"] == t.sizes  # checked at the task's own sizes
    b = r["bench"]
    assert b["ours_ms"] > 0 and b["eager_ms"] > 0 and r["reward"] == pytest.approx(b["speedup"])


def test_wrong_kernel_fails_on_the_gpu_and_one_worker_per_gpu():
    path = ROOT / "tasks" / "level1" / "09_relu.py"
    t = read_task(path)
    src = render(plan(t.declared_ops, t)).replace("max(xs, 0.0)", "xs")
    # the template's contract says relu, so the verifier rejects the mutant before any run; without
    # the contract line the proofs hold (tags only) and the GPU's check against the task must catch it
    unstated = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("contract "))
    ex = LocalExecutor(timeout_s=300, cpu_workers=1)  # verification on the GPU worker: one slot per GPU
    try:
        assert not ex.two_phase and ex.slots == max(1, gpu_count())
        stated, r = ex.map([{"source": s, "task": str(path), "backend": "cuda", "bench": True,
                             "checks": check_plan(t, "cuda")} for s in (src, unstated)])
    finally:
        ex.close()
    assert stated["verdict"] == "violated" and "bench" not in stated
    assert r["verdict"] == "wrong" and "bench" not in r


def test_two_phases_on_the_gpu_verified_first_then_checked_and_timed():
    path = ROOT / "tasks" / "level1" / "18_softmax.py"
    t = read_task(path)
    good = render(plan(t.declared_ops, t))
    ex = LocalExecutor(timeout_s=300, cpu_workers=2)
    try:
        assert ex.two_phase and ex.backend == "cuda"
        req = {"task": str(path), "backend": "cuda", "bench": True, "checks": check_plan(t, "cuda")}
        ok, broken = ex.map([{**req, "source": good}, {**req, "source": good + "    store(\n"}])
    finally:
        ex.close()
    assert ok["verdict"] == "pass" and ok["stage"] == "bench" and ok["verification"]["proved"] > 0, ok.get("feedback")
    assert ok["verify_seconds"] > 0 and ok["gpu_seconds"] > 0 and ok["runs"][-1]["sizes"] == t.sizes
    assert broken["verdict"] == "check-error" and "gpu_seconds" not in broken
