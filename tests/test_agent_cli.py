"""`argus agent run | resume | report` end to end with the offline policy (interpreter check)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_verify.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _model_new_is_a_drop_in(out: Path, monkeypatch):
    """ModelNew calls argus_verify.load (the Python API of issue 11; a stand-in on the interpreter
    here) and gives the task's Model's result."""
    import importlib.util

    import numpy as np
    import torch

    import argus_verify
    from argus_verify.agent_eval import bind_sizes
    from argus_verify.frontend import compile_file
    from argus_verify.runtime.interp import run

    def load(path, kernel=None, **consts):
        k = compile_file(path, consts, kernel)

        def call(*tensors):
            arrays = {t.name: a.numpy() for t, a in zip(k.inputs, tensors, strict=True)}
            return torch.from_numpy(run(k, arrays, bind_sizes(k, arrays))[k.outputs[0].name])
        return call

    monkeypatch.setattr(argus_verify, "load", load, raising=False)
    spec = importlib.util.spec_from_file_location("model_new_under_test", out / "model_new.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(40, 70)
    np.testing.assert_allclose(mod.ModelNew()(x).numpy(), x.t().contiguous().numpy())
    with pytest.raises(ValueError):
        mod.ModelNew(0.5)  # made for other init inputs


def test_run_resume_report(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    code = main(["agent", "run", str(ROOT / "tasks/level1/27_transpose.py"), "--out", str(out), "--iterations", "1",
                 "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["status"] == "solved" and summary["best"] == 1
    assert (out / "best.arg").read_text().startswith("# out = x^T")
    _model_new_is_a_drop_in(out, monkeypatch)
    kinds = [json.loads(line)["kind"] for line in (out / "events.jsonl").read_text().splitlines()]
    assert kinds == ["session", "proposal", "result", "end"]
    # resume with a larger budget goes on from candidate 2 (the swizzle knob's other value)
    code = main(["agent", "resume", str(out), "--iterations", "2", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["candidates"] == 2
    assert main(["agent", "report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "| 2 | 2 | template |" in report
    pytest.importorskip("matplotlib")
    for png in ("reward.png", "verdicts.png", "best_so_far.png"):
        assert (out / "plots" / png).read_bytes()[:4] == b"\x89PNG"
        assert f"plots/{png}" in report


def test_not_expressible_is_reported_with_its_reason(tmp_path, capsys):
    out = tmp_path / "gemm_softmax"
    code = main(["agent", "run", str(ROOT / "tasks/level2/13_gemm_softmax.py"), "--out", str(out), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["status"] == "not-expressible" and "sum of exponentials" in summary["reason"]


def test_usage_errors(tmp_path, capsys):
    assert main(["agent", "run", str(tmp_path / "nope.py")]) == 2
    assert "no task file" in capsys.readouterr().err
    assert main(["agent", "run", str(ROOT / "tasks/level1/09_relu.py"), "--policy", "llm"]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["agent", "report", str(tmp_path)]) == 2
    assert main(["agent", "resume", str(tmp_path), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["status"] == "error"
