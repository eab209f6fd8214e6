"""Run directories that survive a kill.

    RUN/run.json         the task, the policy and the budgets (written once)
    RUN/task.py          a copy of the task file
    RUN/events.jsonl     one JSON object per line, appended and fsync-ed as it happens: session starts,
                         proposals (with their prompt and reply files), results (verdicts, counterexamples,
                         measurements), notes, ends
    RUN/candidates/cNNNN.arg, RUN/prompts/cNNNN.json, RUN/replies/cNNNN.txt
    RUN/best.arg, RUN/best.json, RUN/model_new.py   the winner so far, and its drop-in module

A candidate's source is on disk before its evaluation starts, so `resume` re-evaluates a candidate
whose result was lost with the process and goes on from there.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

__all__ = ["RunDir"]


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def create(cls, path: str | Path, task_path: str | Path, config: dict) -> RunDir:
        rd = cls(path)
        if (rd.path / "run.json").exists():
            raise FileExistsError(f"{rd.path} already holds a run (use `argus agent resume {rd.path}`)")
        for sub in ("candidates", "prompts", "replies"):
            (rd.path / sub).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task_path, rd.path / "task.py")
        rd._write_json("run.json", {**config, "task": str(task_path), "created": time.time()})
        return rd

    def exists(self) -> bool:
        return (self.path / "run.json").exists()

    @property
    def config(self) -> dict:
        return json.loads((self.path / "run.json").read_text())

    def _write_json(self, name: str, data) -> None:
        tmp = self.path / (name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str))
        os.replace(tmp, self.path / name)

    def append(self, event: dict) -> None:
        event = {"t": time.time(), **event}
        path = self.path / "events.jsonl"
        # a process killed mid-write leaves a partial last line: end it, so this event gets its own line
        torn = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        with open(path, "a") as fh:
            fh.write(("\n" if torn else "") + json.dumps(event, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def events(self) -> list[dict]:
        p = self.path / "events.jsonl"
        if not p.exists():
            return []
        out = []
        for line in p.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill mid-write: the rest is intact
                continue
        return out

    def write_text(self, rel: str, text: str) -> str:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, p)
        return rel

    def read_text(self, rel: str) -> str:
        return (self.path / rel).read_text()

    def candidates(self) -> list[dict]:
        """The run's candidates rebuilt from the events: id, iteration, meta, source, result (or None)."""
        out: dict[int, dict] = {}
        for e in self.events():
            if e.get("kind") == "proposal":
                c = {k: e.get(k) for k in ("id", "iteration", "origin", "meta", "tokens")}
                c["source"] = self.read_text(e["source_file"]) if e.get("source_file") else None
                c["error"] = e.get("error")
                c["result"] = None
                out[e["id"]] = c
            elif e.get("kind") == "result" and e.get("id") in out:
                out[e["id"]]["result"] = e["result"]
        return [out[k] for k in sorted(out)]
