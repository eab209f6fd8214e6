"""`argus agent run | resume | report`: the agent loop on tasks in the KernelBench convention.

A driver module (like cli.py): it builds the policy (the offline templates and bandit by default,
an LLM through an OpenAI-compatible server with --policy llm), the executor (isolated worker
processes, one per GPU) and the run directory, and hands them to argus_verify.planner.loop.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from argus_verify.diagnostics import SOURCES, ArgusError, Span

EXAMPLES = """\
examples:
  argus agent run tasks/level1/18_softmax.py --out runs/softmax
  argus agent run tasks/level1 --out runs/level1 --iterations 4
  argus agent run tasks/level1/09_relu.py --policy llm --model gpt-4o --base-url http://127.0.0.1:8000/v1
  argus agent resume runs/softmax
  argus agent report runs/level1
"""


def add_parser(sub) -> None:
    """Registers `argus agent` on the main parser's subcommands."""
    ap = sub.add_parser("agent", help="agent runs: propose, verify, run and bench kernels for PyTorch tasks",
                        description="Agent runs: a policy proposes Argus kernels for a task, Argus checks, verifies, "
                                    "runs and times them, and feeds counterexamples back.",
                        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    asub = ap.add_subparsers(dest="agent_command", metavar="ACTION")

    def budgets(sp, defaults: bool):
        d = (lambda v: v) if defaults else (lambda v: None)
        sp.add_argument("--iterations", type=int, default=d(8), help="candidates per task (default 8)")
        sp.add_argument("--tokens", type=int, default=d(200_000), help="LLM token budget per task (default 200000)")
        sp.add_argument("--time", type=float, default=d(1800.0), help="seconds per task (default 1800)")
        sp.add_argument("--candidate-timeout", type=float, default=d(300.0),
                        help="seconds for one candidate's evaluation before it is killed (default 300)")
        sp.add_argument("--memory-mb", type=int, default=d(4096),
                        help="address-space limit of a CPU evaluation worker, MiB (default 4096)")
        sp.add_argument("--jobs", type=int, default=d(1),
                        help="tasks of a folder in flight at once (default 1); they share the executor, whose "
                             "verification runs in parallel while each GPU times one candidate at a time")
        sp.add_argument("--cpu-workers", type=int, default=None,
                        help="with a GPU: processes that check and verify candidates before any GPU time "
                             "(default: the CPU count less one; 1 verifies on the GPU worker)")
        sp.add_argument("--deadline", type=float, default=None,
                        help="seconds from now after which no new candidate is proposed; the runs end "
                             "resumable (argus agent resume goes on)")
        sp.add_argument("--json", action="store_true", help="print the summary as JSON")

    run = asub.add_parser("run", help="run the loop on a task file or a folder of them",
                          epilog="example:\n  argus agent run tasks/level1/18_softmax.py --out runs/softmax",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("task", help="a task .py (KernelBench convention) or a folder of them")
    run.add_argument("--out", help="the run directory (default runs/NAME-TIME); the winner is OUT/best.arg")
    run.add_argument("--policy", choices=("offline", "llm"), default="offline",
                     help="offline: templates and a bandit over the knowledge base (default); llm: a model")
    run.add_argument("--model", help="the model name (--policy llm)")
    run.add_argument("--base-url", help="an OpenAI-compatible server's base URL (--policy llm)")
    run.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    run.add_argument("--memory-tokens", type=int, default=3000, help="token budget of the in-context memory")
    run.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="local: one worker process per GPU (default); ray: Ray tasks, one GPU each")
    run.add_argument("--ray-address", help="join this Ray cluster ('auto': the running one; default: start a "
                                           "local instance)")
    run.add_argument("--no-bench", action="store_true", help="skip the GPU timing (correctness only)")
    budgets(run, True)
    res = asub.add_parser("resume", help="continue a run after a kill (nothing lost)",
                          epilog="example:\n  argus agent resume runs/softmax --iterations 12",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    res.add_argument("run", help="the run directory (or a folder of them)")
    budgets(res, False)
    rep = asub.add_parser("report", help="write RUN/report.md with PNG plots",
                          epilog="example:\n  argus agent report runs/level1",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("run", help="the run directory (or a folder of them)")
    rep.add_argument("--no-plots", action="store_true", help="the Markdown only (no matplotlib, much faster)")
    rep.add_argument("--json", action="store_true", help="print the report's path as JSON")


class AgentUsageError(ArgusError):
    pass


def read_task(path: Path):
    """The planner's view of a task file (planner/tasks.py); a file that is not Python source is bad
    input at its line and column, not a crash."""
    from argus_verify.planner.tasks import read_task as read

    try:
        return read(path)
    except SyntaxError as e:  # the task file's own syntax error, with its caret
        span = None
        if e.lineno:
            try:
                SOURCES.add(str(path), Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                pass
            span = Span(str(path), e.lineno, max(1, e.offset or 1))
        where = "" if span else f"{path}: "
        raise AgentUsageError(f"{where}the task file is not valid Python: {e.msg}", span) from None
    except UnicodeDecodeError as e:
        raise AgentUsageError(f"{path}: the task file is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except ValueError as e:  # source code with null bytes, say
        raise AgentUsageError(f"{path}: the task file cannot be parsed as Python: {e}") from None
    except OSError as e:
        raise AgentUsageError(f"{path}: cannot read the task file: {e.strerror}") from None


def _ops(task_path: Path):
    """The operator chain: the torch.fx graph when torch is installed, else the task's OPS."""
    from argus_verify.planner.tasks import traced_ops

    t = read_task(task_path)
    try:
        import torch  # noqa: F401
    except ImportError:
        return t.declared_ops, "declared OPS (torch not installed)"
    try:
        return traced_ops(task_path), "torch.fx graph"
    except Exception as e:  # untraceable forward: fall back to the declaration, and say so
        if t.declared_ops is not None:
            return t.declared_ops, f"declared OPS (torch.fx failed: {type(e).__name__})"
        raise AgentUsageError(f"{task_path}: torch.fx cannot trace the model ({type(e).__name__}: {e}) and the "
                              "task declares no OPS") from None


def _executor(config: dict):
    from argus_verify.agent_eval import LocalExecutor, RayExecutor

    if config.get("executor") == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise AgentUsageError("--executor ray needs Ray: pip install -e '.[ray]'") from None
        return RayExecutor(timeout_s=config["candidate_timeout"], memory_mb=config["memory_mb"],
                           address=config.get("ray_address"))
    return LocalExecutor(timeout_s=config["candidate_timeout"], memory_mb=config["memory_mb"],
                         cpu_workers=config.get("cpu_workers"))


def _policy(config: dict, task, ops):
    from argus_verify.planner.loop import LLMPolicy, OfflinePolicy

    if config["policy"] == "llm":
        from argus_verify.planner.llm import ChatBackend

        backend = ChatBackend(config["model"], base_url=config.get("base_url"), api_key_env=config["api_key_env"])
        return LLMPolicy(task, ops, backend, memory_tokens=config["memory_tokens"])
    return OfflinePolicy(task, ops)


def _run_task(rd, config: dict, executor, log, deadline: float | None = None) -> dict:
    from argus_verify.planner.loop import Budget, Loop, summarise
    from argus_verify.planner.templates import NotExpressible

    task = read_task(rd.path / "task.py")
    origin = Path(config["task"])
    task.name = origin.stem
    task.level = origin.parent.name if origin.parent.name.startswith("level") else ""
    ops = tuple(config["ops"]) if config.get("ops") is not None else None
    budget = Budget(config["iterations"], config["tokens"], config["time"])
    try:
        if ops is None:
            raise NotExpressible("no operator chain: torch.fx could not read the task and it declares no OPS")
        policy = _policy(config, task, ops)
    except NotExpressible as e:
        rd.append({"kind": "note", "note": "not-expressible", "reason": str(e)})
        s = summarise(task, [], "not expressible", 0.0, note=f"not expressible: {e}")
        rd.write_text("summary.json", json.dumps(s, indent=2))
        log(f"  [{task.name}] not expressible: {e}")
        return s
    backend = executor.backend
    loop = Loop(rd, task, policy, executor, budget, backend=backend,
                bench=backend == "cuda" and not config.get("no_bench"), log=log, deadline=deadline)
    return loop.run_loop()


def cmd_agent(args) -> int:
    from argus_verify.planner.report import run_dirs, write_report
    from argus_verify.planner.rundir import RunDir
    from argus_verify.planner.tasks import task_files

    def log(s):
        if not getattr(args, "json", False):
            print(s, file=sys.stderr)

    if args.agent_command is None:
        raise AgentUsageError("argus agent needs an action: run, resume or report (argus agent --help)")
    if args.agent_command == "report":
        try:
            path = write_report(args.run, plots=not args.no_plots)
        except FileNotFoundError as e:
            raise AgentUsageError(str(e)) from None
        print(json.dumps({"report": str(path)}) if args.json else f"wrote {path}")
        return 0
    deadline = time.time() + args.deadline if args.deadline is not None else None
    jobs = max(1, int(args.jobs or 1))
    work = []  # (run directory, its config): every run directory exists before the first candidate
    if args.agent_command == "run":
        if args.policy == "llm" and not args.model:
            raise AgentUsageError("--policy llm needs --model (and --base-url for a server other than OpenAI's)")
        src = Path(args.task)
        if not src.exists():
            raise AgentUsageError(f"no task file or folder {src}")
        files = task_files(src)
        if not files:
            raise AgentUsageError(f"no task files under {src}")
        out = Path(args.out or f"runs/{src.stem}-{time.strftime('%Y%m%d-%H%M%S')}")
        base = {k: getattr(args, k) for k in ("policy", "model", "base_url", "api_key_env", "memory_tokens", "executor",
                                              "ray_address", "no_bench", "iterations", "tokens", "time",
                                              "candidate_timeout", "memory_mb", "cpu_workers")}
        for f in files:
            rd_path = out if src.is_file() else out / "-".join(f.relative_to(src).with_suffix("").parts)
            ops, ops_from = _ops(f)
            rd = RunDir.create(rd_path, f, {**base, "ops": list(ops) if ops is not None else None,
                                            "ops_from": ops_from})
            log(f"{f}: {' -> '.join(ops or ())} (from the {ops_from}); run directory {rd_path}")
            work.append((rd, rd.config))
        root = out
    else:
        dirs = run_dirs(args.run)
        if not dirs:
            raise AgentUsageError(f"{args.run} holds no agent run (no run.json)")
        for d in dirs:
            rd = RunDir(d)
            config = rd.config
            for k in ("iterations", "tokens", "time", "candidate_timeout", "memory_mb", "cpu_workers"):
                if getattr(args, k, None) is not None:
                    config[k] = getattr(args, k)
            log(f"resuming {d}")
            work.append((rd, config))
        root = Path(args.run)
    executor = _executor(work[0][1])
    if hasattr(executor, "deadline"):
        executor.deadline = deadline
    try:
        if jobs == 1:
            summaries = [_run_task(rd, config, executor, log, deadline) for rd, config in work]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=jobs) as pool:
                summaries = list(pool.map(lambda w: _run_task(w[0], w[1], executor, log, deadline), work))
    finally:
        executor.close()
    if len(summaries) > 1:
        (root / "summary.json").write_text(json.dumps(summaries, indent=2, default=str))
    if args.json:
        print(json.dumps(summaries if len(summaries) > 1 else summaries[0], indent=2, default=str))
    else:
        for s in summaries:
            best = f", best candidate {s['best']} reward {s['best_reward']:.3f}" if s.get("best") else ""
            print(f"{s['task']}: {s['status']}{best} ({s.get('candidates', 0)} candidates, "
                  f"{s.get('rejected_before_gpu', 0)} rejected before GPU time) - {s.get('reason', '')}")
    solved = all(s["status"] in ("solved", "not-expressible") for s in summaries)
    return 0 if solved else 1
