"""`argus agent report RUN`: a Markdown report with PNG plots (matplotlib, from the `agent` extra).

For one run: the candidates table (verdict, reward, the first line of the feedback), and plots of
the reward per iteration, the verdict mix and the best so far. For a folder of runs: per task the
status and the best reward, and per level the share solved, fast_1 (correct and faster than
PyTorch eager, GPU runs only), the geometric-mean speed-up, the candidates rejected before any GPU
time, and the candidates that verified but failed the numerical test (each a verifier weakness).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from argus_verify.planner.loop import REJECTED_BEFORE_GPU
from argus_verify.planner.rundir import RunDir

__all__ = ["write_report", "run_dirs"]


def run_dirs(path: str | Path) -> list[Path]:
    p = Path(path)
    if (p / "run.json").exists():
        return [p]
    return sorted(d for d in p.iterdir() if (d / "run.json").exists()) if p.is_dir() else []


def _plots(rd: RunDir, cands: list[dict], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    done = [c for c in cands if c.get("result")]
    if not done:
        return []
    out.mkdir(parents=True, exist_ok=True)
    files = []
    xs = [c["id"] for c in done]
    rewards = [float(c["result"].get("reward", 0.0)) if c["result"].get("verdict") == "pass" else 0.0 for c in done]
    kind = next((c["result"].get("reward_kind") for c in done if c["result"].get("reward_kind")), "reward")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    colors = ["tab:green" if c["result"].get("verdict") == "pass" else "tab:red" for c in done]
    ax.bar(xs, rewards, color=colors)
    if len(xs) <= 40:
        ax.set_xticks(xs)
    ax.set_xlabel("candidate (in the order proposed)")
    ax.set_ylabel("reward")
    ax.set_title(f"reward per candidate ({kind})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "reward.png", dpi=100)
    plt.close(fig)
    files.append("reward.png")
    best, cur = [], 0.0
    for r in rewards:
        cur = max(cur, r)
        best.append(cur)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.step(xs, best, where="post")
    ax.set_xlabel("candidate")
    ax.set_ylabel("best reward so far")
    fig.tight_layout()
    fig.savefig(out / "best_so_far.png", dpi=100)
    plt.close(fig)
    files.append("best_so_far.png")
    mix = Counter(c["result"].get("verdict") for c in done)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(list(mix), list(mix.values()))
    ax.set_ylabel("candidates")
    ax.set_title("verdict mix", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "verdicts.png", dpi=100)
    plt.close(fig)
    files.append("verdicts.png")
    return files


def _summary(rd: RunDir) -> dict:
    p = rd.path / "summary.json"
    if p.exists():
        return json.loads(p.read_text())
    return {"task": rd.path.name, "status": "running"}


def _one(rd: RunDir, heading: str = "#", plots: bool = True) -> tuple[str, dict]:
    cands = rd.candidates()
    s = _summary(rd)
    want_plots = plots
    plots = _plots(rd, cands, rd.path / "plots") if want_plots else []
    lines = [f"{heading} Agent run: {s.get('task')}", "",
             f"status: **{s.get('status')}** ({s.get('reason', '')}); {len(cands)} candidates, "
             f"{s.get('tokens', 0)} tokens, {s.get('elapsed_s', 0)} s", ""]
    if s.get("best") is not None:
        lines.append(f"best: candidate {s['best']} (best.arg), reward {s.get('best_reward', 0):.3f} "
                     f"({s.get('reward_kind')})")
        if s.get("bench"):
            b = s["bench"]
            lines.append(f"  argus {b['ours_ms']:.4f} ms, PyTorch eager {b['eager_ms']:.4f} ms, speed-up "
                         f"{b['speedup']:.2f}x{' (FLAGGED for review: > 10x)' if b.get('flagged') else ''}")
        lines.append("")
    if cands:
        lines += ["| # | iter | origin | knobs | verdict | reward | feedback |", "|---|---|---|---|---|---|---|"]
        for c in cands:
            r = c.get("result") or {}
            fb = (r.get("feedback") or "").split("\n")[0].replace("|", "\\|")[:90]
            knobs = json.dumps((c.get("meta") or {}).get("knobs", "")).replace("|", "\\|")
            rew = f"{r['reward']:.3f}" if r.get("verdict") == "pass" else ""
            lines.append(f"| {c['id']} | {c['iteration']} | {c.get('origin')} | {knobs} | {r.get('verdict', 'pending')}"
                         f" | {rew} | {fb} |")
        lines.append("")
    for f in plots:
        lines.append(f"![{f}](plots/{f})")
    if not plots and cands and want_plots:
        lines.append("(no plots: matplotlib is not installed; install the 'agent' extra)")
    return "\n".join(lines) + "\n", s


def write_report(path: str | Path, plots: bool = True) -> Path:
    """Write RUN/report.md (and RUN/plots/*.png unless `plots` is False; per task for a folder of runs);
    returns the report's path."""
    path = Path(path)
    dirs = run_dirs(path)
    if not dirs:
        raise FileNotFoundError(f"{path} holds no agent run (no run.json)")
    if dirs == [path]:
        text, _ = _one(RunDir(path), plots=plots)
        (path / "report.md").write_text(text)
        return path / "report.md"
    sums = []
    for d in dirs:
        text, s = _one(RunDir(d), plots=plots)
        (d / "report.md").write_text(text)
        sums.append({**s, "dir": d.name})
    lines = ["# Agent runs", "", "| task | level | status | candidates | rejected before GPU | best reward | note |",
             "|---|---|---|---|---|---|---|"]
    for s in sums:
        rew = f"{s['best_reward']:.3f}" if s.get("best_reward") is not None else ""
        note = s.get("reason", "") if s.get("status") != "solved" else ""
        lines.append(f"| [{s['task']}]({s['dir']}/report.md) | {s.get('level', '')} | {s.get('status')} | "
                     f"{s.get('candidates', 0)} | {s.get('rejected_before_gpu', 0)} | {rew} | {note[:120]} |")
    lines += ["", "## Per level", "", "| level | tasks | correct % | fast_1 % | geomean speed-up | rejected before GPU "
              "| time saved (est.) | verified but wrong |", "|---|---|---|---|---|---|---|---|"]
    by_level: dict = {}
    for s in sums:
        by_level.setdefault(s.get("level") or "-", []).append(s)
    for level, ss in sorted(by_level.items()):
        solved = [s for s in ss if s.get("status") == "solved"]
        speed = [s["bench"]["speedup"] for s in solved if s.get("bench")]
        fast1 = f"{100 * sum(x > 1 for x in speed) / len(ss):.0f}" if speed else "n/a (no GPU)"
        geo = f"{math.exp(sum(math.log(x) for x in speed) / len(speed)):.3f}" if speed else "n/a (no GPU)"
        rej = sum(s.get("rejected_before_gpu", 0) for s in ss)
        vbw = sum(len(s.get("verified_but_wrong", [])) for s in ss)
        saved = sum(s.get("rejected_before_gpu", 0) * (s.get("mean_checked_s") or 0.0) for s in ss)
        where = "GPU" if any(s.get("backend") == "cuda" for s in ss) else "interpreter"
        lines.append(f"| {level} | {len(ss)} | {100 * len(solved) / len(ss):.0f} | {fast1} | {geo} | {rej} | "
                     f"{saved:.1f} s of {where} checks | {vbw} |")
    wrong = [(s["task"], i) for s in sums for i in s.get("verified_but_wrong", [])]
    lines += ["", "Candidates that verified but failed the numerical test (verifier weaknesses): "
              + (", ".join(f"{t} #{i}" for t, i in wrong) if wrong else "none"), ""]
    lines.append(f"Verdicts counted as rejected before GPU time: {', '.join(REJECTED_BEFORE_GPU)}. Time saved: each "
                 "rejected candidate times its task's mean cost of a candidate that reached the numerical test.")
    (path / "report.md").write_text("\n".join(lines) + "\n")
    return path / "report.md"
