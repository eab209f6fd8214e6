"""The suite run that fits a device budget: verification in parallel on the CPU before any GPU time,
GPU work one candidate at a time, the candidate budget exact when the policy proposes in batches,
a deadline that ends runs resumable, and a folder of tasks in flight at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_verify.agent_eval import InProcessExecutor, LocalExecutor
from argus_verify.cli import main
from argus_verify.planner.loop import Budget, Loop, OfflinePolicy
from argus_verify.planner.rundir import RunDir
from argus_verify.planner.tasks import check_plan, read_task

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "tasks" / "level1" / "09_relu.py"
TRANSPOSE = ROOT / "tasks" / "level1" / "27_transpose.py"

RELU_KERNEL = """kernel relu<BLOCK=1024>(x: f32[M, N]) -> out: f32[M, N]:
    grid(cdiv(N, BLOCK), M)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    r = block_id.y
    c0 = block_id.x * BLOCK
    xs = load(x[r : r + 1, c0 : c0 + BLOCK], tv=(256, 4):(4, 1), mask=True)
    store(out[r : r + 1, c0 : c0 + BLOCK], {value}, mask=True)
"""


def test_two_phases_verify_on_the_cpu_and_only_verified_candidates_reach_the_gpu_slot():
    pytest.importorskip("torch")
    # a "GPU" executor on a machine without one: the second phase runs the interpreter, which is
    # what the requests ask for, so the split between the phases is what this test sees
    ex = LocalExecutor(timeout_s=120, gpus=1, cpu_workers=2)
    try:
        assert ex.two_phase and ex.slots == 2
        checks = check_plan(read_task(RELU), "interp")
        reqs = [{"source": RELU_KERNEL.format(value=v), "task": str(RELU), "checks": checks, "backend": "interp"}
                for v in ("max(xs, 0.0)", "zeros(f32[1, BLOCK], tv=(256, 4):(4, 1))", "max(xs, 0.0) +")]
        good, zeros, broken = ex.map(reqs)
    finally:
        ex.close()
    assert good["verdict"] == "pass" and good["verification"]["proved"] > 0
    assert good["verify_seconds"] > 0 and good["gpu_seconds"] > 0
    assert zeros["verdict"] == "violated" and "[output-contract]" in zeros["feedback"]
    assert broken["verdict"] == "check-error" and "^" in broken["feedback"]
    for r in (zeros, broken):  # refused in the first phase: no second-phase time at all
        assert "gpu_seconds" not in r and "runs" not in r


def test_the_candidate_budget_is_exact_when_candidates_come_in_batches(tmp_path):
    pytest.importorskip("torch")
    t = read_task(RELU)

    class Wide(InProcessExecutor):
        slots = 3

    rd = RunDir.create(tmp_path / "run", RELU, {"policy": "offline"})
    summary = Loop(rd, t, OfflinePolicy(t, t.declared_ops), Wide(), Budget(iterations=4)).run_loop()
    cands = rd.candidates()
    assert summary["candidates"] == 4 and len(cands) == 4
    assert [c["iteration"] for c in cands] == [1, 1, 1, 2]  # a batch of three, then the one left


def test_a_passed_deadline_proposes_nothing_and_resume_goes_on(tmp_path):
    t = read_task(TRANSPOSE)
    rd = RunDir.create(tmp_path / "run", TRANSPOSE, {"policy": "offline"})
    summary = Loop(rd, t, OfflinePolicy(t, t.declared_ops), InProcessExecutor(), Budget(iterations=2),
                   deadline=0.0).run_loop()
    assert summary["candidates"] == 0 and "deadline" in summary["reason"]
    pytest.importorskip("torch")
    summary = Loop(rd, t, OfflinePolicy(t, t.declared_ops), InProcessExecutor(), Budget(iterations=1)).run_loop()
    assert summary["candidates"] == 1 and summary["status"] == "solved"


def test_a_folder_with_tasks_in_flight_at_once_and_a_deadline(tmp_path, capsys):
    pytest.importorskip("torch")
    src = tmp_path / "tasks" / "level1"
    src.mkdir(parents=True)
    for f in (RELU, TRANSPOSE, ROOT / "tasks" / "level2" / "13_gemm_softmax.py"):
        (src / f.name).write_text(f.read_text())
    out = tmp_path / "runs"
    # a deadline already passed: every run directory is made, none proposes anything
    assert main(["agent", "run", str(src.parent), "--out", str(out), "--iterations", "1", "--jobs", "3",
                 "--deadline", "0", "--json"]) == 1
    first = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in first] == ["unsolved", "not-expressible", "unsolved"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["level1-09_relu", "level1-13_gemm_softmax",
                                                                   "level1-27_transpose"]
    # resumed with tasks in flight at once, each gets its candidate
    assert main(["agent", "resume", str(out), "--jobs", "3", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in second] == ["solved", "not-expressible", "solved"]
    assert [s["candidates"] for s in second] == [1, 0, 1]


def test_past_the_deadline_no_gpu_time_starts_and_the_candidate_stays_pending(tmp_path):
    pytest.importorskip("torch")
    t = read_task(RELU)
    ex = LocalExecutor(timeout_s=120, gpus=1, cpu_workers=2)
    ex.deadline = 0.0
    rd = RunDir.create(tmp_path / "run", RELU, {"policy": "offline"})
    try:
        checks = check_plan(t, "interp")
        late, refused = ex.map([{"source": RELU_KERNEL.format(value=v), "task": str(RELU), "checks": checks,
                                 "backend": "interp"} for v in ("max(xs, 0.0)", "max(xs, 0.0) +")])
        assert late is None and refused["verdict"] == "check-error"  # the refusal needs no GPU time
        Loop(rd, t, OfflinePolicy(t, t.declared_ops), ex, Budget(iterations=1), backend="interp").run_loop()
    finally:
        ex.close()
    (cand,) = rd.candidates()
    assert cand["result"] is None  # pending: `resume` evaluates it
    summary = Loop(rd, t, OfflinePolicy(t, t.declared_ops), InProcessExecutor(), Budget(iterations=1)).run_loop()
    assert summary["status"] == "solved" and summary["candidates"] == 1


@pytest.mark.parametrize("name", ["28_avg_pool1d", "29_max_pool2d"])
def test_pool_template_passes_with_the_pooled_size_bound_from_the_reference(name):
    pytest.importorskip("torch")
    from argus_verify.agent_eval import evaluate
    from argus_verify.planner.templates import plan, render

    path = ROOT / "tasks" / "level1" / f"{name}.py"
    t = read_task(path)
    fam = plan(t.declared_ops, t)
    assert fam.name == "pool" and fam.window == (4 if name == "28_avg_pool1d" else 2)
    r = evaluate({"source": render(fam), "task": str(path), "checks": check_plan(t, "interp")})
    assert r["verdict"] == "pass", r["feedback"]
    # sizes not multiples of the window (19, 70 capped): the tail is dropped, as PyTorch does
    assert all(x["ok"] for x in r["runs"]) and len(r["runs"]) == 3


def test_pool_windows_the_template_cannot_take_are_not_expressible(tmp_path):
    from argus_verify.planner.templates import NotExpressible, plan

    src = (ROOT / "tasks" / "level1" / "28_avg_pool1d.py").read_text()
    for call, why in (("avg_pool1d(x, 4, 2)", "non-overlapping"), ("avg_pool1d(x, 4, 4, 1)", "padding"),
                      ("avg_pool1d(x, 4, stride=4, ceil_mode=True)", "ceil mode")):
        f = tmp_path / "pool.py"
        f.write_text(src.replace("avg_pool1d(x, 4, 4)", call))
        t = read_task(f)
        with pytest.raises(NotExpressible, match=why):
            plan(t.declared_ops, t)


def test_exact_gelu_through_an_erf_approximation_passes_against_torchs_exact_gelu():
    pytest.importorskip("torch")
    from argus_verify.agent_eval import evaluate
    from argus_verify.planner.templates import plan, render

    path = ROOT / "tasks" / "level1" / "16_gelu_erf.py"
    t = read_task(path)
    assert t.declared_ops == ("gelu",)
    r = evaluate({"source": render(plan(t.declared_ops, t)), "task": str(path), "checks": check_plan(t, "interp")})
    assert r["verdict"] == "pass", r["feedback"]
    assert max(x["rel_error"] for x in r["runs"]) < 1e-6  # well inside the f32 tolerance (1e-5)


def test_cumsum_is_a_shuffle_scan_with_lanes_below_the_distance_adding_nothing():
    pytest.importorskip("torch")
    from argus_verify.agent_eval import evaluate
    from argus_verify.planner.templates import plan, render

    path = ROOT / "tasks" / "level1" / "26_cumsum.py"
    t = read_task(path)
    fam = plan(t.declared_ops, t)
    src = render(fam)
    assert fam.name == "scan" and "shfl_up(v, 16) * min(lane_id // 16, 1)" in src
    r = evaluate({"source": src, "task": str(path), "checks": check_plan(t, "interp")})
    assert r["verdict"] == "pass", r["feedback"]
    # without the lane factor, lanes below the distance add their own value again: refused by the numbers
    bad = src.replace(" * min(lane_id // 1, 1)", "")
    r = evaluate({"source": bad, "task": str(path), "checks": check_plan(t, "interp")})
    assert r["verdict"] == "wrong" and "relative error" in r["feedback"]


def test_gemm_then_a_row_operation_keeps_whole_rows_in_a_block():
    pytest.importorskip("torch")
    from argus_verify.agent_eval import evaluate
    from argus_verify.planner.templates import NotExpressible, plan, render

    path = ROOT / "tasks" / "level2" / "11_gemm_rowsum.py"
    t = read_task(path)
    fam = plan(t.declared_ops, t)
    assert fam.name == "gemmrow" and fam.defaults == {"cols": 1024}
    r = evaluate({"source": render(fam), "task": str(path), "checks": check_plan(t, "interp")})
    assert r["verdict"] == "pass", r["feedback"]
    soft = read_task(ROOT / "tasks" / "level2" / "13_gemm_softmax.py")
    with pytest.raises(NotExpressible, match="sum of exponentials"):
        plan(soft.declared_ops, soft)
