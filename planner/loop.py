"""The agent loop: propose, check, verify, run, bench; feedback and memory back to the policy.

The loop is a stage module: it knows the task, the policy and the run directory, and takes the
evaluation as an object (`evaluator.map(requests) -> results`, `evaluator.slots`), which the driver
(argus_verify.agent_eval) implements with isolated subprocesses. Every candidate is verified before
it gets any GPU time: the worker stops at the first failing step.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import attrs

from argus_verify.planner.bandit import Bandit
from argus_verify.planner.knowledge import knobs_for, load_kb, render_entry
from argus_verify.planner.memory import build_memory
from argus_verify.planner.prompts import build_messages, parse_reply
from argus_verify.planner.rundir import RunDir
from argus_verify.planner.tasks import Task, check_plan
from argus_verify.planner.templates import NotExpressible, plan, render

__all__ = ["Budget", "Proposal", "OfflinePolicy", "LLMPolicy", "Loop", "model_new_source", "REJECTED_BEFORE_GPU"]

# verdicts reached before any GPU time (the front end, the verifier, or the reply itself)
REJECTED_BEFORE_GPU = ("check-error", "violated", "unproved", "malformed")


@attrs.define
class Budget:
    iterations: int = 8
    tokens: int = 200_000
    seconds: float = 3600.0


@attrs.define
class Proposal:
    source: str | None
    origin: str
    meta: dict = attrs.field(factory=dict)
    error: str | None = None  # a malformed reply: the feedback
    messages: list | None = None
    reply: str | None = None
    tokens: int = 0


class OfflinePolicy:
    """Parametric templates (chosen from the task's operator chain) and a bandit over the knowledge
    base's transformations; no LLM."""

    name = "offline"

    def __init__(self, task: Task, ops: tuple, kb=None):
        self.family = plan(ops, task)  # NotExpressible propagates: the loop records the reason
        knobs = self.family.knobs(kb)
        self.techniques = {k: tech for k, (tech, _) in knobs.items()}
        self.bandit = Bandit({k: v for k, (_, v) in knobs.items()}, self.family.defaults)

    def propose(self, candidates: list[dict]) -> Proposal | None:
        cfg = self.bandit.propose()
        if cfg is None:
            return None
        self.bandit.mark(cfg)
        return Proposal(render(self.family, cfg), "template",
                        {"family": self.family.name, "knobs": cfg, "techniques": self.techniques})

    def observe(self, cand: dict) -> None:
        knobs = (cand.get("meta") or {}).get("knobs")
        if knobs is None:
            return
        r = cand.get("result") or {}
        self.bandit.observe(knobs, float(r.get("reward", 0.0)) if r.get("verdict") == "pass" else 0.0)


class LLMPolicy:
    """An LLM proposes each candidate; the prompt carries the task, the knowledge base's techniques,
    a verified starting point when a template exists, the in-context memory and the last feedback."""

    name = "llm"

    def __init__(self, task: Task, ops: tuple, backend, memory_tokens: int = 3000, kb=None, start: bool = True):
        self.task, self.backend, self.memory_tokens = task, backend, memory_tokens
        kb = load_kb() if kb is None else kb
        self.start = None
        try:
            fam = plan(ops, task)
            if start:
                self.start = render(fam)
            names = {n for tech, _ in knobs_for(fam.name, kb).values() for n in tech.split("+")}
            entries = [kb[n] for n in sorted(names) if n in kb]
            self.knowledge = "\n\n".join(render_entry(t) for t in entries)
        except NotExpressible:
            self.knowledge = "\n\n".join(render_entry(t, sketch=False) for t in kb.values())

    def propose(self, candidates: list[dict]) -> Proposal | None:
        last = candidates[-1] if candidates else None
        feedback = None
        if last and last.get("result") and last["result"].get("verdict") != "pass":
            feedback = f"candidate {last['id']}: {last['result']['verdict']}\n{last['result'].get('feedback', '')}"
        messages = build_messages(self.task.source, self.task.name, self.task.args, self.knowledge, self.start,
                                  build_memory(candidates, self.memory_tokens), feedback)
        reply = self.backend.chat(messages)
        parsed = parse_reply(reply.text, reply.finish_reason)
        return Proposal(parsed.source, "llm", {"model": getattr(self.backend, "model", "?"),
                                               "prompt_tokens": reply.prompt_tokens,
                                               "completion_tokens": reply.completion_tokens,
                                               "attempts": reply.attempts},
                        parsed.error, messages, reply.text, reply.prompt_tokens + reply.completion_tokens)

    def observe(self, cand: dict) -> None:
        return None


def model_new_source(task: Task, kernel_file: str = "best.arg") -> str:
    """A drop-in `ModelNew` for the task that runs the winning kernel through the Python API."""
    return f'''"""Drop-in replacement for {task.name}'s Model: runs the verified Argus kernel {kernel_file}."""

from pathlib import Path

import torch

KERNEL = Path(__file__).with_name("{kernel_file}")
BAKED = {list(task.init_inputs)!r}  # get_init_inputs() when the kernel was made: its constants are in the text


class ModelNew(torch.nn.Module):
    def __init__(self, *init_inputs):
        super().__init__()
        if list(init_inputs) != BAKED:
            raise ValueError(f"this kernel was made for init inputs {{BAKED}}, not {{list(init_inputs)}}")
        self._kernel = None

    def forward(self, *inputs):
        if self._kernel is None:
            try:
                from argus_verify import load
            except ImportError as e:  # the Python API (argus_verify.load) is not in this build
                raise RuntimeError("ModelNew needs argus_verify.load (the Python API)") from e
            self._kernel = load(KERNEL)
        return self._kernel(*inputs)
'''


class Loop:
    def __init__(self, run: RunDir, task: Task, policy, evaluator, budget: Budget, backend: str = "interp",
                 bench: bool = False, log=None, verify_timeout_s: float = 10.0, deadline: float | None = None):
        self.run, self.task, self.policy, self.evaluator = run, task, policy, evaluator
        self.deadline = deadline  # time.time() after which no new candidate is proposed (resume goes on)
        self.budget, self.backend, self.bench = budget, backend, bench
        self.log = log or (lambda s: None)
        self.verify_timeout_s = verify_timeout_s

    def _request(self, source: str) -> dict:
        return {"source": source, "task": str(self.run.path / "task.py"), "filename": "candidate.arg",
                "checks": check_plan(self.task, self.backend), "backend": self.backend, "bench": self.bench,
                "verify_timeout_s": self.verify_timeout_s}

    def _elapsed(self) -> float:
        return self._elapsed_before + (time.time() - self._session_start)

    def _record(self, cand: dict, result: dict) -> None:
        cand["result"] = result
        self.run.append({"kind": "result", "id": cand["id"], "result": result, "elapsed": self._elapsed()})
        self.policy.observe(cand)
        r = result
        extra = f" reward {r['reward']:.3f}" if r.get("verdict") == "pass" else ""
        first = (r.get("feedback") or "").split("\n")[0][:110]
        self.log(f"  [{self.task.name}] candidate {cand['id']}: {r.get('verdict')}{extra}  {first}")

    def _evaluate(self, cands: list[dict]) -> None:
        todo = [c for c in cands if c["source"] is not None]
        results = self.evaluator.map([self._request(c["source"]) for c in todo]) if todo else []
        for c, r in zip(todo, results, strict=True):
            if r is None:  # the executor's deadline passed before its GPU time: pending, resume evaluates it
                self.log(f"  [{self.task.name}] candidate {c['id']}: not evaluated before the deadline (pending)")
                continue
            self._record(c, r)
        for c in cands:
            if c["source"] is None:
                self._record(c, {"stage": "propose", "verdict": "malformed", "feedback": c["error"], "reward": 0.0})

    def run_loop(self) -> dict:
        events = self.run.events()
        self._elapsed_before = max((e.get("elapsed", 0.0) for e in events), default=0.0)
        self._session_start = time.time()
        cands = self.run.candidates()
        self.run.append({"kind": "session", "resumed": bool(events), "elapsed": self._elapsed_before})
        for c in cands:
            if c["result"] is not None:
                self.policy.observe(c)
                if c.get("meta", {}).get("knobs") is not None and hasattr(self.policy, "bandit"):
                    self.policy.bandit.mark(c["meta"]["knobs"])
        pending = [c for c in cands if c["result"] is None]
        if pending:
            self.log(f"  [{self.task.name}] re-evaluating {len(pending)} candidate(s) whose result was lost")
            self._evaluate(pending)
        iteration = max((c["iteration"] for c in cands), default=0)
        tokens = sum(int(c.get("tokens") or 0) for c in cands)
        next_id = max((c["id"] for c in cands), default=0) + 1
        batch = max(1, int(getattr(self.evaluator, "slots", 1))) if self.policy.name == "offline" else 1
        reason = None
        while reason is None:
            if len(cands) >= self.budget.iterations:
                reason = f"iteration budget ({self.budget.iterations}) spent"
            elif tokens >= self.budget.tokens:
                reason = f"token budget ({self.budget.tokens}) spent"
            elif self._elapsed() >= self.budget.seconds:
                reason = f"time budget ({self.budget.seconds:g} s) spent"
            elif self.deadline is not None and time.time() >= self.deadline:
                reason = "the command's deadline passed (argus agent resume continues)"
            if reason:
                break
            iteration += 1
            new = []
            for _ in range(min(batch, self.budget.iterations - len(cands))):
                try:
                    p = self.policy.propose(cands)
                except Exception as e:  # an LLM that cannot be reached ends the run, recorded
                    reason = f"the policy failed: {type(e).__name__}: {e}"
                    break
                if p is None:
                    if not new:
                        reason = "every configuration of the template has been tried"
                    break
                cid = next_id
                next_id += 1
                ev = {"kind": "proposal", "id": cid, "iteration": iteration, "origin": p.origin, "meta": p.meta,
                      "tokens": p.tokens, "error": p.error, "elapsed": self._elapsed()}
                if p.source is not None:
                    ev["source_file"] = self.run.write_text(f"candidates/c{cid:04d}.arg", p.source)
                if p.messages is not None:
                    ev["prompt_file"] = self.run.write_text(f"prompts/c{cid:04d}.json",
                                                            json.dumps(p.messages, indent=1))
                if p.reply is not None:
                    ev["reply_file"] = self.run.write_text(f"replies/c{cid:04d}.txt", p.reply)
                self.run.append(ev)
                tokens += p.tokens
                c = {"id": cid, "iteration": iteration, "origin": p.origin, "meta": p.meta, "tokens": p.tokens,
                     "source": p.source, "error": p.error, "result": None}
                cands.append(c)
                new.append(c)
            if new:
                self._evaluate(new)
        self.run.append({"kind": "end", "reason": reason, "elapsed": self._elapsed()})
        return self.finish(cands, reason)

    def finish(self, cands: list[dict], reason: str) -> dict:
        summary = summarise(self.task, cands, reason, self._elapsed())
        summary["backend"] = self.backend
        best = summary.get("best")
        if best is not None:
            c = next(c for c in cands if c["id"] == best)
            self.run.write_text("best.arg", c["source"])
            self.run.write_text("best.json", json.dumps({"id": best, "result": c["result"], "meta": c["meta"]},
                                                        indent=2, default=str))
            self.run.write_text("model_new.py", model_new_source(self.task))
        self.run.write_text("summary.json", json.dumps(summary, indent=2, default=str))
        return summary


def summarise(task: Task, cands: list[dict], reason: str, elapsed: float, note: str | None = None) -> dict:
    done = [c for c in cands if c.get("result")]
    verdicts = Counter(c["result"].get("verdict") for c in done)
    passing = [c for c in done if c["result"].get("verdict") == "pass"]
    best = max(passing, key=lambda c: (float(c["result"].get("reward", 0.0)), -c["id"])) if passing else None
    out = {"task": task.name, "level": task.level, "status": "solved" if best else ("not-expressible" if note else
                                                                                    "unsolved"),
           "reason": note or reason, "candidates": len(cands), "verdicts": dict(verdicts),
           "rejected_before_gpu": sum(verdicts.get(v, 0) for v in REJECTED_BEFORE_GPU),
           "tokens": sum(int(c.get("tokens") or 0) for c in cands), "elapsed_s": round(elapsed, 2),
           "best": best["id"] if best else None}
    if best:
        r = best["result"]
        out.update(best_reward=r.get("reward"), reward_kind=r.get("reward_kind"), bench=r.get("bench"))
    wrong_after_verify = [c["id"] for c in done if c["result"].get("verdict") in ("wrong", "fault")
                          and c["result"].get("stage") == "run" and "verification" in c["result"]]
    out["verified_but_wrong"] = wrong_after_verify
    # what a candidate that reached the numerical test (and, on a GPU, the bench) cost: the time that
    # each candidate rejected before it saved
    reached = [float(c["result"].get("wall_seconds") or c["result"].get("seconds") or 0.0) for c in done
               if c["result"].get("stage") in ("run", "bench")]
    out["mean_checked_s"] = round(sum(reached) / len(reached), 3) if reached else None
    return out
