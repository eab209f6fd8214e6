"""The LLM feedback loop against a fake OpenAI-compatible server on 127.0.0.1: a wrong kernel first,
then a fix; the counterexample must reach the second prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_fakes import FakeChatServer

from argus_verify.agent_eval import InProcessExecutor
from argus_verify.planner.llm import ChatBackend
from argus_verify.planner.loop import Budget, LLMPolicy, Loop
from argus_verify.planner.rundir import RunDir
from argus_verify.planner.tasks import read_task

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tasks" / "level1" / "09_relu.py"

GOOD = """kernel relu<BLOCK=1024>(x: f32[M, N]) -> out: f32[M, N]:
    grid(cdiv(N, BLOCK), M)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    r = block_id.y
    c0 = block_id.x * BLOCK
    xs = load(x[r : r + 1, c0 : c0 + BLOCK], tv=(256, 4):(4, 1), mask=True)
    store(out[r : r + 1, c0 : c0 + BLOCK], max(xs, 0.0){mask})
"""
WRONG = GOOD.format(mask="")  # the store of the ragged tail is not masked: an out-of-bounds store
FIXED = GOOD.format(mask=", mask=True")


def _loop(tmp_path, server, iterations):
    task = read_task(TASK)
    rd = RunDir.create(tmp_path / "run", TASK, {"policy": "llm"})
    backend = ChatBackend("fake-model", base_url=server.base_url, max_retries=2, backoff_s=0.0, timeout_s=20)
    policy = LLMPolicy(task, task.declared_ops, backend, start=False)
    return rd, Loop(rd, task, policy, InProcessExecutor(), Budget(iterations=iterations))


def test_counterexample_reaches_the_next_prompt(tmp_path):
    script = [503, f"Here it is:\n```argus\n{WRONG}```\n", f"Fixed:\n```argus\n{FIXED}```"]
    with FakeChatServer(script) as server:
        rd, loop = _loop(tmp_path, server, 2)
        summary = loop.run_loop()
    # the 503 was retried; then two proposals
    assert len(server.requests) == 3
    first, second = server.user_prompts()[1], server.user_prompts()[2]
    # the verifier's counterexample for line 9 of the candidate: place, caret, witness, hint
    assert "candidate.arg:9:5: error: out-of-bounds store of out [bounds]" not in first
    assert "candidate.arg:9:5: error: out-of-bounds store of out [bounds]" in second
    assert "witness: block" in second and "witness: block" not in first
    assert "^^^" in second and "hint: add mask=True" in second
    assert summary["status"] == "solved" and summary["best"] == 2
    verdicts = [c["result"]["verdict"] for c in rd.candidates()]
    assert verdicts == ["violated", "pass"]
    # tokens come from the server's usage (prompt 100 + request number, completion 10)
    assert summary["tokens"] == (102 + 10) + (103 + 10)
    assert (rd.path / "best.arg").read_text() == FIXED
    saved = json.loads((rd.path / "prompts" / "c0002.json").read_text())
    assert "candidate.arg:9:5: error: out-of-bounds store" in saved[1]["content"]
    assert "Fixed:" in (rd.path / "replies" / "c0002.txt").read_text()


def test_malformed_replies_are_feedback(tmp_path):
    script = ["```python\nimport torch\nprint(1)\n```", ("```argus\nkernel relu<BLOCK=1024>(x: f32", "length"),
              "I would write a kernel here.", f"```argus\n{FIXED}```"]
    with FakeChatServer(script) as server:
        rd, loop = _loop(tmp_path, server, 4)
        summary = loop.run_loop()
    prompts = server.user_prompts()
    assert "another language (python)" in prompts[1]
    assert "truncated" in prompts[2]
    assert "no code block" in prompts[3]
    assert [c["result"]["verdict"] for c in rd.candidates()] == ["malformed"] * 3 + ["pass"]
    assert summary["rejected_before_gpu"] == 3


def test_token_budget_stops_the_loop(tmp_path):
    with FakeChatServer([f"```argus\n{WRONG}```"] * 5) as server:
        rd, loop = _loop(tmp_path, server, 5)
        loop.budget.tokens = 150  # one reply costs ~111 tokens: the second call would pass the budget
        summary = loop.run_loop()
    assert len(server.requests) == 2
    assert "token budget" in summary["reason"]
