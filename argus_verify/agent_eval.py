"""Evaluation of agent candidates that cannot be gamed (a driver module: it sits above the stages).

A candidate is `.arg` text only; no candidate-supplied host code ever runs. Each candidate is
evaluated in its own process (forked from a fork server that has numpy, z3, torch and Argus
imported, so it starts warm) with a wall-clock limit and, without a GPU, an address-space limit,
so a crash, a hang or an illegal memory access costs that candidate only. Inside the worker, in
order, stopping at the first failure (whose text is the feedback for the planner):

1. check: the front end (errors with file:line:col and the caret);
2. verify: every obligation for all sizes (each violated one's counterexample, witness and hint;
   unknown or vacuous obligations are refused too);
3. run: the task's PyTorch `Model` in float64 is the reference, on several seeds and shapes,
   smallest first (the smallest failing shape is reported): sizes scaled down from the task's in the
   interpreter, and the task's own sizes on the GPU. Outputs are poisoned (NaN) before each run,
   inputs are compared before and after, and an all-zero, constant or NaN output never passes
   where the reference is not so;
4. bench (GPU only): CUDA events, warm-up, L2 flushed before each timed call, PyTorch eager timed
   in the same process; the reward is the speed-up, and one above 10x is flagged for review.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import resource
import shutil
import subprocess
import time
import traceback
from pathlib import Path

import numpy as np

__all__ = ["evaluate", "LocalExecutor", "InProcessExecutor", "RayExecutor", "gpu_count", "run_isolated"]

FLAG_SPEEDUP = 10.0
WARNING_PENALTY = 0.1  # the CPU proxy reward: 1 for a correct kernel, less 0.1 per performance warning


def _fail(stage: str, verdict: str, feedback: str, **more) -> dict:
    return {"stage": stage, "verdict": verdict, "feedback": feedback, "reward": 0.0, **more}


def bind_sizes(kernel, arrays: dict, out_shape: tuple | None = None) -> dict:
    """The kernel's size values from the shapes of the arrays given for its inputs, then (for a size
    only the output names, such as a pooled length) from the reference output's shape."""
    from argus_verify import ir

    sizes: dict = {}
    pairs = [(t, arrays[t.name].shape, "input", "the task passes") for t in kernel.inputs]
    if out_shape is not None:
        pairs.append((kernel.outputs[0], tuple(out_shape), "output", "the reference returns"))
    for t, shape, role, whose in pairs:
        if len(shape) != len(t.shape):
            raise ValueError(f"{role} {t.name} is declared with {len(t.shape)} dimensions but {whose} "
                             f"a {len(shape)}-D tensor of shape {tuple(shape)}")
        for dim, actual in zip(t.shape, shape, strict=True):
            if isinstance(dim, ir.IVar):
                if sizes.setdefault(dim.name, int(actual)) != int(actual):
                    raise ValueError(f"size {dim.name} is {sizes[dim.name]} by one tensor and {actual} by {t.name}")
    return sizes


def _output_sizes_unbound(kernel) -> bool:
    from argus_verify import ir

    bound = {d.name for t in kernel.inputs for d in t.shape if isinstance(d, ir.IVar)}
    return any(isinstance(d, ir.IVar) and d.name not in bound for t in kernel.outputs for d in t.shape)


def _output_shape(task_path: str, sizes: dict | None = None) -> tuple | None:
    """The shape of the task's output at `sizes` (its own without), from the Model run on meta
    tensors (no data, no time); None without torch or when the model cannot run on meta tensors."""
    try:
        import torch
    except ImportError:
        return None
    from argus_verify.planner.tasks import load_module, read_task

    task = read_task(task_path)
    try:
        mod = load_module(task_path, sizes)
        shapes = task.shapes_at({**task.sizes, **(sizes or {})})
        with torch.no_grad():
            out = mod.Model(*mod.get_init_inputs())(*[torch.empty(s, device="meta") for s in shapes])
        return tuple(out.shape)
    except Exception:
        return None


def _degenerate(out: np.ndarray, ref: np.ndarray) -> str | None:
    """An output that is all zeros, constant or NaN where the reference is not so."""
    if out.size == 0:
        return None
    if np.isnan(out).any():
        n = int(np.isnan(out).sum())
        return f"{n} of {out.size} output elements are NaN (never written, or a NaN computed)"
    if out.size > 1 and np.ptp(out) == 0 and np.ptp(ref) != 0:
        return f"every output element is {float(out.flat[0])!r}, but the reference is not constant"
    return None


def _check_run(kernel, task_path: str, sizes: dict, seed: int, backend: str) -> dict:
    """One seeded run at one set of task sizes against the float64 PyTorch reference."""
    import torch

    from argus_verify.planner.tasks import load_module
    from argus_verify.runtime.measure import rel_error, tolerance

    mod = load_module(task_path, sizes)
    torch.manual_seed(seed)
    inputs = mod.get_inputs()
    model = mod.Model(*mod.get_init_inputs())
    with torch.no_grad():
        ref = model.double()(*[t.double() if torch.is_tensor(t) else t for t in inputs])
    ref = ref.detach().cpu().numpy()
    tensors = [t for t in inputs if torch.is_tensor(t)]
    if len(tensors) != len(kernel.inputs):
        return {"ok": False, "why": f"the task passes {len(tensors)} tensors but the kernel takes "
                                    f"{len(kernel.inputs)} inputs ({', '.join(t.name for t in kernel.inputs)})"}
    arrays = {t.name: np.ascontiguousarray(a.detach().cpu().numpy().astype(np.float32))
              for t, a in zip(kernel.inputs, tensors, strict=True)}
    before = {n: a.copy() for n, a in arrays.items()}
    try:
        ksizes = bind_sizes(kernel, arrays, ref.shape)
    except ValueError as e:
        return {"ok": False, "why": str(e)}
    for req_ok, why in _requires(kernel, ksizes):
        if not req_ok:
            return {"ok": None, "why": why}
    if backend == "cuda":
        outputs, after = _run_cuda_checked(kernel, arrays, ksizes)
        changed = [n for n in arrays if not np.array_equal(after[n], before[n], equal_nan=True)]
        if changed:
            return {"ok": False, "why": f"the kernel modified its input {changed[0]} on the GPU"}
    else:
        from argus_verify.runtime.interp import run

        outputs = run(kernel, arrays, ksizes)
    changed = [n for n in arrays if not np.array_equal(arrays[n], before[n], equal_nan=True)]
    if changed:
        return {"ok": False, "why": f"the kernel modified its input {changed[0]}"}
    out = outputs[kernel.outputs[0].name]
    where = f"at {', '.join(f'{k}={v}' for k, v in sizes.items())} (kernel sizes {ksizes}), seed {seed}"
    if out.shape != ref.shape:
        if out.size == ref.size:
            out = out.reshape(ref.shape)
        else:
            return {"ok": False, "why": f"output shape {out.shape} but the reference's is {ref.shape} {where}"}
    bad = _degenerate(out, ref)
    if bad:
        return {"ok": False, "why": f"{bad} {where}"}
    err = rel_error(out, ref)
    tol = tolerance("f32")
    if not err <= tol:
        diff = np.abs(out.astype(np.float64) - ref)
        idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
        return {"ok": False, "why": f"wrong result {where}: relative error {err:.3e} > {tol:.0e}; worst element "
                                    f"out{list(map(int, idx))} = {float(out[idx])!r}, expected {float(ref[idx])!r}"}
    return {"ok": True, "rel_error": err, "where": where}


def _run_cuda_checked(kernel, arrays: dict, sizes: dict):
    """runtime.cuda_backend.run_cuda, and the inputs read back from the device after the launch."""
    from argus_verify import ir
    from argus_verify.pipeline import gpu_program
    from argus_verify.runtime import cuda, cuda_backend

    program = gpu_program(kernel)
    sizes = cuda_backend.check_sizes(kernel, sizes, {})
    loaded = cuda_backend.load(program)
    host = cuda_backend._host_sets(kernel, arrays, ir.tensor_shapes(kernel, sizes))
    bufs = cuda.DeviceBuffers(host, upload=False)
    try:
        for t in kernel.inputs:
            bufs.copy_in(t.name)
        bufs.poison(*[t.name for t in kernel.outputs])
        grid = cuda_backend.grid_of(kernel, sizes, {})
        if min(grid) > 0:
            cuda.launch(loaded.function, grid, (program.block, 1, 1),
                        cuda_backend.launch_args(program, bufs, sizes, {}), shared_bytes=program.dynamic_shared_bytes)
        cuda._drv().Context.synchronize()
        outs = {t.name: cuda_backend.from_device_array(bufs.copy_out(t.name), t.dtype) for t in kernel.outputs}
        ins = {t.name: cuda_backend.from_device_array(bufs.copy_out(t.name), t.dtype) for t in kernel.inputs}
        return outs, ins
    finally:
        bufs.free()


def _task_sizes_admitted(kernel, task_path: str) -> str | None:
    """Why the kernel cannot run at the task's own sizes (its inputs' ranks, or a `requires` that
    excludes them), or None. Checked from the shapes alone, so it holds without a GPU too: a kernel
    that passes only at the scaled-down sizes does not pass."""
    from types import SimpleNamespace

    from argus_verify.planner.tasks import read_task

    task = read_task(task_path)
    shapes = task.shapes_at(task.sizes)
    if len(shapes) != len(kernel.inputs):
        return (f"the task passes {len(shapes)} tensors but the kernel takes {len(kernel.inputs)} inputs "
                f"({', '.join(t.name for t in kernel.inputs)})")
    out_shape = _output_shape(task_path) if _output_sizes_unbound(kernel) else None
    if out_shape is None and _output_sizes_unbound(kernel):
        return None  # a size only the output names, and no reference to read it from: the run decides
    try:
        sizes = bind_sizes(kernel, {t.name: SimpleNamespace(shape=s) for t, s in zip(kernel.inputs, shapes,
                                                                                       strict=True)}, out_shape)
    except ValueError as e:
        return f"at the task's sizes: {e}"
    for ok, why in _requires(kernel, sizes):
        if not ok:
            return f"the task's own {why}"
    return None


def _requires(kernel, sizes):
    from argus_verify.runtime.interp import host_values

    for req, ok in zip(kernel.requires, host_values(kernel.requires, sizes, {}), strict=True):
        yield bool(ok), f"sizes {sizes} violate the kernel's precondition at line {req.span.line}"


def _flush_l2(torch, buf) -> None:
    buf.zero_()


def _bench(kernel, task_path: str, reps: int = 50) -> dict:
    """Our kernel and PyTorch eager at the task's sizes, in this process, L2 flushed before each call."""
    import torch

    from argus_verify.pipeline import bench_cuda
    from argus_verify.planner.tasks import load_module

    mod = load_module(task_path)
    torch.manual_seed(0)
    inputs = mod.get_inputs()
    arrays = {t.name: np.ascontiguousarray(a.numpy().astype(np.float32))
              for t, a in zip(kernel.inputs, [t for t in inputs if torch.is_tensor(t)], strict=True)}
    ksizes = bind_sizes(kernel, arrays, _output_shape(task_path) if _output_sizes_unbound(kernel) else None)
    ours = bench_cuda(kernel, ksizes, inputs=arrays, warmup=10, reps=reps)
    torch.backends.cuda.matmul.allow_tf32 = False  # the eager baseline in true fp32, as our kernels compute
    torch.backends.cudnn.allow_tf32 = False
    model = mod.Model(*mod.get_init_inputs()).cuda()
    dev = [t.cuda() if torch.is_tensor(t) else t for t in inputs]
    flush = torch.empty(3 * 60 * 2**20 // 4, dtype=torch.float32, device="cuda")  # 3x the H200's 60 MiB L2
    with torch.no_grad():
        for _ in range(10):
            model(*dev)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            _flush_l2(torch, flush)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            model(*dev)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
    base = float(np.median(times))
    speedup = base / ours.median_ms if ours.median_ms > 0 else 0.0
    return {"ours_ms": ours.median_ms, "eager_ms": base, "speedup": speedup, "sizes": ksizes,
            "flagged": speedup > FLAG_SPEEDUP}


def evaluate(req: dict) -> dict:
    """The worker's body: check, verify, run, bench one candidate (see the module's docstring)."""
    from argus_verify.diagnostics import ArgusError, format_error
    from argus_verify.frontend import compile_source

    t0 = time.perf_counter()
    source = req["source"]
    name = req.get("filename", "candidate.arg")
    try:
        kernel = compile_source(source, name, req.get("consts") or {})
    except ArgusError as e:
        return _fail("check", "check-error", format_error(e))
    result: dict = {"kernel": kernel.name}
    if req.get("verified") is not None:  # the CPU phase verified this text already (LocalExecutor, two phases)
        result.update(req["verified"])
    elif req.get("verify", True):
        from argus_verify import smt

        report = smt.verify(kernel, timeout_s=float(req.get("verify_timeout_s", 10.0)), jobs=1)
        counts = report.counts()
        result["verification"] = counts
        violated = report.violations()
        unproved = report.unknowns() + report.vacuous()
        if violated:
            return _fail("verify", "violated", "\n\n".join(r.render() for r in violated), **result)
        if unproved:
            text = "\n".join(f"{r.location}: {r.obligation} {r.status}: {r.message}" for r in unproved)
            return _fail("verify", "unproved", "these obligations are not proved (refused):\n" + text, **result)
        result["warnings"] = [r.render() for r in report.warnings()]
    backend = req.get("backend") or "interp"
    bad = _task_sizes_admitted(kernel, req["task"])
    if bad:
        return _fail("run", "wrong", bad, **result)
    if req.get("phase") == "verify":  # the CPU phase ends here; the GPU phase runs the rest
        result.update(stage="verify", verdict="verified", feedback="verified; the numerical test is next",
                      reward=0.0, verify_seconds=round(time.perf_counter() - t0, 3))
        return result
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"stage": "run", "verdict": "verified-unchecked", "reward": 0.0,
                "feedback": "verified, but PyTorch is not installed: no numerical check (install the 'agent' "
                            "extra)", **result}
    runs = []
    for sizes, seed in req["checks"]:
        try:
            r = _check_run(kernel, req["task"], sizes, seed, backend)
        except ArgusError as e:
            return _fail("run", "fault", f"running at {sizes}, seed {seed}:\n{format_error(e)}", runs=runs, **result)
        r.update(sizes=sizes, seed=seed)
        runs.append(r)
        if r["ok"] is False:
            return _fail("run", "wrong", r["why"], runs=runs, **result)
    if not any(r["ok"] for r in runs):
        return _fail("run", "wrong", "no check could run: " + "; ".join(r["why"] for r in runs), runs=runs, **result)
    result.update(stage="run", verdict="pass", runs=runs, feedback="correct on every seed and shape")
    n_warn = len(result.get("warnings", []))
    result["reward"] = max(0.0, 1.0 - WARNING_PENALTY * n_warn)
    result["reward_kind"] = "proxy: 1 - 0.1 per performance warning (no GPU)"
    if req.get("bench") and backend == "cuda":
        b = _bench(kernel, req["task"], reps=int(req.get("reps", 50)))
        result.update(stage="bench", bench=b, reward=b["speedup"], reward_kind="speed-up over PyTorch eager")
        if b["flagged"]:
            result["feedback"] = f"speed-up {b['speedup']:.1f}x is above {FLAG_SPEEDUP:.0f}x: flagged for review"
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def gpu_count() -> int:
    """GPUs visible here (nvidia-smi -L), 0 without one."""
    if os.environ.get("ARGUS_AGENT_GPUS") is not None:
        return int(os.environ["ARGUS_AGENT_GPUS"])
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class InProcessExecutor:
    """Evaluates in this process, one candidate at a time: no isolation (tests and debugging only)."""

    slots = 1
    gpus = 0
    backend = "interp"

    def map(self, reqs: list[dict]) -> list[dict]:
        return [evaluate(r) for r in reqs]

    def close(self) -> None:
        return None


class LocalExecutor:
    """Evaluates candidates in subprocesses: one worker slot per GPU found (CUDA_VISIBLE_DEVICES set
    to that GPU), one slot without a GPU. Each evaluation gets `timeout_s` of wall-clock time and,
    without a GPU, `memory_mb` of address space; a hang or crash is that candidate's verdict.

    With a GPU and `cpu_workers` > 1, evaluation has two phases: the front end and the verifier run
    first in up to `cpu_workers` processes at once that see no GPU (each with the memory limit), and
    only the candidates they pass go on to the GPU slots, where the numerical test and the bench run
    one candidate per GPU at a time, so timings never overlap. `map` may be called from several
    threads at once (several tasks in flight); the two pools are shared."""

    def __init__(self, timeout_s: float = 300.0, memory_mb: int | None = 4096, gpus: int | None = None,
                 cpu_workers: int | None = None):
        self.gpus = gpu_count() if gpus is None else gpus
        self.timeout_s = timeout_s
        self.cpu_memory_mb = memory_mb
        self.memory_mb = memory_mb if self.gpus == 0 else None  # CUDA reserves huge address ranges
        if cpu_workers is None:
            cpu_workers = max(1, (os.cpu_count() or 1) - 1) if self.gpus else 1
        self.cpu_workers = max(1, int(cpu_workers)) if self.gpus else 1
        # the offline policy proposes this many candidates at a time: one per GPU, or one per CPU
        # worker when verification runs apart (each GPU then takes them in turn)
        self.slots = max(1, self.gpus, self.cpu_workers if self.two_phase else 1)
        self._pool = cf.ThreadPoolExecutor(max_workers=max(1, self.gpus))
        self._cpu_pool = cf.ThreadPoolExecutor(max_workers=self.cpu_workers) if self.two_phase else None
        self._free = list(range(max(1, self.gpus)))
        # time.time() after which no evaluation starts on a GPU: such a candidate's result is None (not
        # evaluated), so the run directory keeps it pending and `resume` evaluates it
        self.deadline: float | None = None

    def _late(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    @property
    def two_phase(self) -> bool:
        return bool(self.gpus) and self.cpu_workers > 1

    @property
    def backend(self) -> str:
        return "cuda" if self.gpus else "interp"

    def _run_one(self, req: dict) -> dict | None:
        if self._late() and self.gpus:
            return None
        slot = self._free.pop()
        try:
            return run_isolated(req, self.timeout_s, self.memory_mb, gpu=slot if self.gpus else None)
        finally:
            self._free.append(slot)

    def _verify_one(self, req: dict) -> dict:
        return run_isolated({**req, "phase": "verify"}, self.timeout_s, self.cpu_memory_mb, gpu=-1)

    def _gpu_one(self, req: dict, first: dict) -> dict:
        if first.get("verdict") != "verified":
            return first
        carried = {k: first[k] for k in ("verification", "warnings") if k in first}
        res = self._run_one({**req, "verified": carried})
        if res is None:
            return None
        res["verify_seconds"] = first.get("verify_seconds")
        res["gpu_seconds"] = res.get("wall_seconds", res.get("seconds"))
        return res

    def map(self, reqs: list[dict]) -> list[dict | None]:
        if not self.two_phase:
            return list(self._pool.map(self._run_one, reqs))
        firsts = list(self._cpu_pool.map(self._verify_one, reqs))
        return list(self._pool.map(self._gpu_one, reqs, firsts))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._cpu_pool is not None:
            self._cpu_pool.shutdown(wait=True)


# imported once by the fork server, so that each evaluation process starts warm (a fork, not a fresh
# interpreter importing torch and z3); an ImportError (no torch) is ignored by the fork server
PRELOAD = ["numpy", "z3", "argus_verify.frontend", "argus_verify.smt", "argus_verify.runtime.interp",
           "argus_verify.agent_eval", "torch"]
_CTX = None


def _context():
    global _CTX
    if _CTX is None:
        import multiprocessing

        _CTX = multiprocessing.get_context("forkserver")
        _CTX.set_forkserver_preload(PRELOAD)
    return _CTX


def _vm_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _child(req: dict, conn, memory_mb: int | None, gpu: int | None, log_path: str) -> None:
    """The evaluation process: its own output file, GPU and address-space limit (beyond the
    preloaded image), then `evaluate`; the result goes back through the pipe."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    if gpu is not None:  # -1: no GPU at all (the CPU verification phase)
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu) if gpu >= 0 else ""
    if memory_mb:
        b = _vm_bytes() + int(memory_mb) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (b, b))
    try:
        res = evaluate(req)
    except BaseException as e:  # an Argus bug, or out of memory: contained, reported, never a pass
        res = _fail("internal", "internal-error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
    conn.send(res)
    conn.close()


class RayExecutor:
    """Spreads evaluations over a Ray cluster (`--executor ray`, the `ray` extra): each evaluation is
    a Ray task holding one GPU when the cluster has GPUs, and inside it runs `run_isolated` (its own
    process, limits and containment) on the GPU Ray assigned. `address` None starts a local Ray
    instance on this machine (127.0.0.1); "auto" joins a running cluster."""

    def __init__(self, timeout_s: float = 300.0, memory_mb: int | None = 4096, address: str | None = None,
                 num_cpus: int | None = None):
        import ray

        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "log_to_driver": False}
            if address is None:
                kwargs.update(num_cpus=num_cpus or 1, _node_ip_address="127.0.0.1")
            ray.init(address=address, **kwargs)
        self._ray = ray
        res = ray.cluster_resources()
        self.gpus = int(res.get("GPU", 0))
        self.slots = max(1, self.gpus or int(res.get("CPU", 1)))
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb if self.gpus == 0 else None
        self._remote = ray.remote(num_gpus=1 if self.gpus else 0, num_cpus=0 if self.gpus else 1)(_ray_evaluate)

    @property
    def backend(self) -> str:
        return "cuda" if self.gpus else "interp"

    def map(self, reqs: list[dict]) -> list[dict]:
        refs = [self._remote.remote(r, self.timeout_s, self.memory_mb, bool(self.gpus)) for r in reqs]
        return self._ray.get(refs)

    def close(self) -> None:
        return None  # the Ray instance outlives the executor (ray.shutdown() ends a local one)


def _ray_evaluate(req: dict, timeout_s: float, memory_mb: int | None, on_gpu: bool) -> dict:
    gpu = None
    if on_gpu:
        import ray

        ids = ray.get_gpu_ids()
        gpu = int(ids[0]) if ids else None
    res = run_isolated(req, timeout_s, memory_mb, gpu=gpu)
    res["node"] = os.uname().nodename
    return res


def run_isolated(req: dict, timeout_s: float, memory_mb: int | None, gpu: int | None = None) -> dict:
    """One evaluation in its own process (forked from a warm fork server) with the limits; the
    result, or the containment verdict when the process hangs or dies."""
    import tempfile

    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryDirectory(prefix="argus-eval-") as tmp:
        log_path = str(Path(tmp) / "worker.log")
        t0 = time.perf_counter()
        proc = ctx.Process(target=_child, args=(req, send, memory_mb, gpu, log_path), daemon=True)
        proc.start()
        send.close()
        res = None
        try:
            if recv.poll(timeout_s):
                try:
                    res = recv.recv()
                except EOFError:  # the process died before answering
                    res = None
            else:
                proc.kill()
                proc.join(10)
                return _fail("contained", "timeout", f"the evaluation ran past its limit of {timeout_s:g} s and was "
                                                     "killed (a hang or a far too slow kernel); the other candidates "
                                                     "are unaffected", seconds=round(timeout_s, 3))
        finally:
            recv.close()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
        seconds = round(time.perf_counter() - t0, 3)
        if res is not None:
            res.setdefault("seconds", seconds)
            res["wall_seconds"] = seconds
            return res
        code = proc.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        tail = "\n".join(Path(log_path).read_text(errors="replace").strip().splitlines()[-8:])
        return _fail("contained", "crashed", f"the evaluation process died ({how}); the other candidates are "
                                             f"unaffected. Last lines of its output:\n{tail}", seconds=seconds)
