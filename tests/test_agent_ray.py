"""`--executor ray` with a local Ray instance on 127.0.0.1 (skipped without the ray extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("torch")

from argus_verify.agent_eval import RayExecutor  # noqa: E402
from argus_verify.planner.tasks import check_plan, read_task  # noqa: E402
from argus_verify.planner.templates import plan, render  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_ray_executor_evaluates_and_contains():
    path = ROOT / "tasks" / "level1" / "09_relu.py"
    t = read_task(path)
    good = render(plan(t.declared_ops, t))
    req = {"source": good, "task": str(path), "checks": check_plan(t, "interp"), "verify": False}
    ex = RayExecutor(timeout_s=60, memory_mb=2048, num_cpus=1)
    try:
        assert ex.backend == "interp" and ex.slots == 1
        ok, bad = ex.map([req, {**req, "source": good.replace("max(xs, 0.0)", "xs")}])
        assert ok["verdict"] == "pass" and ok["node"]
        assert bad["verdict"] == "wrong"
    finally:
        ray.shutdown()
