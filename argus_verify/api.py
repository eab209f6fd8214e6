"""Argus from Python: load a kernel, verify it, call it on NumPy arrays, PyTorch CUDA tensors or
PyCUDA arrays.

    import argus_verify
    vecadd = argus_verify.load("specs/vecadd.arg", BLOCK=1024)
    report = vecadd.verify()          # the report `argus verify` prints (report.render_text())
    out = vecadd(x, y)                # NumPy in, NumPy out (the GPU when present, else the interpreter)
    vecadd(xt, yt, out=ot)            # torch CUDA tensors: zero-copy, on the current stream

A driver module like cli.py and pipeline.py: it sits above the stages and may import any of them;
no stage imports it. Verification runs once per (source, constants, kernel) in a process and its
verdict is kept on disk; the compiled module (PTX, cubin, ptxas's report) is cached on disk too,
keyed by the source, the constants, the kernel, the Argus version and the ptxas version, in the
user cache folder (platformdirs; $ARGUS_CACHE_DIR overrides it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError

__all__ = ["CallError", "Kernel", "VerificationError", "cache_dir", "load"]

ARCH = "sm_90a"


class ConstantError(ArgusError, TypeError):
    """A compile-time constant given to `load` that is not an int (a float is not truncated)."""


class CallError(ArgusError, ValueError):
    """A kernel called with arrays of the wrong shape, dtype, device, layout or kind."""


class VerificationError(ArgusError, RuntimeError):
    """A kernel whose verification found a violated obligation (or, without allow_unknown=True, an
    unknown or vacuous one) is not run; `.report` is the verifier's report."""

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


# -- versions and the cache folder ----------------------------------------------------------------

@functools.cache
def argus_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("argus-verify")
    except PackageNotFoundError:  # pragma: no cover - a source tree without installation
        return "0+unknown"


@functools.cache
def ptxas_version() -> str:
    """ptxas's version line ("none" without ptxas: the driver then JIT-compiles the PTX)."""
    from argus_verify.lowering import ptxas

    exe = ptxas.find_ptxas()
    if exe is None:
        return "none"
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "unknown"


def cache_dir() -> Path:
    """Where compiled modules and verdicts are kept: $ARGUS_CACHE_DIR, else the user cache folder."""
    env = os.environ.get("ARGUS_CACHE_DIR")
    if env:
        return Path(env)
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("argus-verify", appauthor=False))
    except ImportError:  # pragma: no cover - platformdirs is a core dependency
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "argus-verify"


def _write_atomic(path: Path, data: bytes) -> None:
    """Write via a private temporary file and a rename, so a concurrent reader sees all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# -- loading --------------------------------------------------------------------------------------

def load(path: str | os.PathLike, kernel: str | None = None, **consts: int) -> Kernel:
    """Parse, check and instantiate a kernel of `path` (the first one, or `kernel`) with
    compile-time constants `consts`; errors are `ArgusError`s carrying the source position."""
    from argus_verify.frontend import compile_source, read_source

    if kernel is not None and not isinstance(kernel, str):
        raise ConstantError(f"kernel= names a kernel of the file (a str), not {type(kernel).__name__} {kernel!r}")
    for name, value in consts.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConstantError(f"compile-time parameter {name} must be an int, not {type(value).__name__} "
                                f"{value!r}")
    consts = {name: int(value) for name, value in consts.items()}
    text = read_source(path)
    k = compile_source(text, str(path), consts, kernel)
    return Kernel(k, text, str(path))


_VERIFIED: dict[tuple, object] = {}  # (key, timeout) -> report: verification once per process


class Kernel:
    """A checked kernel: `.verify()`, `.ptx`, `.stats`, and a call (see `__call__`)."""

    def __init__(self, kernel: ir.Kernel, source: str, path: str = "<string>"):
        self.ir = kernel
        self.source = source
        self.path = path
        self.name = kernel.name
        self.consts = dict(kernel.consts)
        self._program = None
        self.cache_hit: bool | None = None  # after compiling: whether the module came from the disk cache

    def __repr__(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self.consts.items())
        return f"<argus kernel {self.name}<{consts}> from {self.path}>"

    @property
    def inputs(self) -> list[str]:
        """The call's positional parameters: input tensors and scalars, in signature order."""
        return [p.name for p in self.ir.params if not (isinstance(p, ir.TensorParam) and p.output)]

    @property
    def outputs(self) -> list[str]:
        return [t.name for t in self.ir.outputs]

    # -- keys ------------------------------------------------------------------------------------
    @functools.cached_property
    def key(self) -> str:
        """Identity of (source, constants, kernel): the verification cache's key."""
        blob = json.dumps({"source": self.source, "consts": sorted(self.consts.items()), "kernel": self.name},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _module_dir(self) -> Path:
        blob = json.dumps({"kernel": self.key, "argus": argus_version(), "ptxas": ptxas_version(), "arch": ARCH})
        return cache_dir() / "modules" / hashlib.sha256(blob.encode()).hexdigest()[:32]

    # -- verification ----------------------------------------------------------------------------
    def verify(self, timeout_s: float = 10.0, jobs: int = 1, progress=None):
        """The verifier's report (`smt.report.VerifyReport`: `.render_text()`, `.to_json()`,
        `.exit_code`), computed once per (source, constants, kernel, timeout) in this process.
        `progress(done, total, what)` is called as the verification's stages run (not for a
        report this process already has)."""
        from argus_verify import smt

        memo = (self.key, float(timeout_s))
        if memo not in _VERIFIED:
            report = smt.verify(self.ir, timeout_s=timeout_s, jobs=jobs, progress=progress)
            _VERIFIED[memo] = report
            self._store_verdict(report, timeout_s)
        return _VERIFIED[memo]

    def _verdict_path(self, timeout_s: float = 10.0) -> Path:
        """Where the verdict of this kernel at this solver time limit is kept: a verdict found under a
        short limit (unknowns where the solver gave up) does not stand for a longer one, and the
        messages name this file's path."""
        blob = json.dumps({"kernel": self.key, "timeout": float(timeout_s), "path": str(self.path)})
        return cache_dir() / "verdicts" / f"{hashlib.sha256(blob.encode()).hexdigest()}-{argus_version()}.json"

    def _store_verdict(self, report, timeout_s: float = 10.0) -> None:
        verdict = {"kernel": self.name, **_verdict_of(report)}
        try:
            _write_atomic(self._verdict_path(timeout_s), json.dumps(verdict).encode())
        except OSError:
            pass  # a read-only cache folder only costs a re-verification next time

    def verdict(self, timeout_s: float = 10.0) -> dict:
        """The verification verdict (exit code, counts, violated and unproved obligations): from
        this process, else from the disk cache, else by verifying now."""
        memo = (self.key, float(timeout_s))
        if memo not in _VERIFIED:
            try:
                return json.loads(self._verdict_path(timeout_s).read_text())
            except (OSError, ValueError):
                pass
        return _verdict_of(self.verify(timeout_s))

    def check_verified(self, allow_unknown: bool = False, timeout_s: float = 10.0) -> None:
        """Raise VerificationError unless every obligation is proved (or only unknown/vacuous with
        allow_unknown)."""
        v = self.verdict(timeout_s)
        if v["violated"]:
            raise VerificationError(f"{self.name}: verification failed, not running it:\n  " +
                                    "\n  ".join(v["violated"]) + "\n  (argus verify for the counterexample; "
                                    "verify=False to run anyway)", _VERIFIED.get((self.key, float(timeout_s))))
        if v["unproved"] and not allow_unknown:
            raise VerificationError(f"{self.name}: obligations not proved, not running it:\n  " +
                                    "\n  ".join(v["unproved"]) + "\n  (allow_unknown=True to run anyway)")

    # -- compilation -----------------------------------------------------------------------------
    def program(self):
        """The compiled module as `runtime.cuda_backend.GpuProgram` (PTX, cubin when ptxas is
        present, launch parameters), from the disk cache or compiled now and stored there."""
        if self._program is None:
            self._program = self._cached_program()
        return self._program

    def _cached_program(self):
        from argus_verify.lowering.hopper import TensorMapSpec
        from argus_verify.lowering.ptx import KernelParam
        from argus_verify.runtime.cuda_backend import GpuProgram

        folder = self._module_dir()
        try:
            meta = json.loads((folder / "module.json").read_text())
            ptx = (folder / "kernel.ptx").read_text()
            cubin = (folder / "kernel.cubin").read_bytes() if meta["cubin"] else None
            self.cache_hit = True
        except (OSError, ValueError, KeyError):
            meta, ptx, cubin = self._compile(folder)
            self.cache_hit = False
        params = tuple(KernelParam(*p) for p in meta["params"])
        stats = _stats_of(meta["stats"])
        tmaps = tuple(TensorMapSpec(*m) for m in meta.get("tmaps", ()))
        if len(tmaps) != sum(p.kind == "tmap" for p in params):  # a cache entry from before tensor maps were stored
            meta, ptx, cubin = self._compile(folder)
            params = tuple(KernelParam(*p) for p in meta["params"])
            tmaps = tuple(TensorMapSpec(*m) for m in meta["tmaps"])
        return GpuProgram(ptx, meta["entry"], params, meta["block"], meta["dynamic_shared_bytes"], cubin, stats,
                          tmaps)

    def _compile(self, folder: Path):
        from argus_verify.lowering import ptxas
        from argus_verify.lowering.ptx import lower

        lk = lower(self.ir)
        cubin = stats = None
        if ptxas.find_ptxas() is not None:
            cubin, report = ptxas.assemble_cubin(lk.ptx, ARCH)
            stats = report.get(lk.entry)
        meta = {"kernel": self.name, "consts": self.consts, "entry": lk.entry, "block": lk.block,
                "dynamic_shared_bytes": lk.dynamic_shared_bytes, "shared_bytes": lk.shared_bytes,
                "params": [[p.name, p.kind, p.ptx_type, p.dtype] for p in lk.params], "cubin": cubin is not None,
                "tmaps": [[m.param, m.tensor, m.dtype, m.box_rows, m.box_cols, m.swizzle] for m in lk.tmaps],
                "stats": None if stats is None else {f: getattr(stats, f) for f in _STATS_FIELDS},
                "argus": argus_version(), "ptxas": ptxas_version()}
        try:
            _write_atomic(folder / "kernel.ptx", lk.ptx.encode())
            if cubin is not None:
                _write_atomic(folder / "kernel.cubin", cubin)
            _write_atomic(folder / "module.json", json.dumps(meta, indent=1).encode())  # last: marks it complete
        except OSError:
            pass
        return meta, lk.ptx, cubin

    @property
    def ptx(self) -> str:
        """The PTX for sm_90a."""
        return self.program().ptx

    @property
    def stats(self):
        """ptxas's resource report of the entry (`lowering.ptxas.PtxStats`: registers, shared
        bytes, spills, stack), or None where there is no ptxas."""
        return self.program().stats

    # -- the call --------------------------------------------------------------------------------
    def __call__(self, *args, out=None, backend: str = "auto", verify: bool = True, allow_unknown: bool = False,
                 schedule: str = "lockstep", **kwargs):
        """Run the kernel. Positional arguments are the inputs (tensors and scalars) in signature
        order; keywords may name them, and give sizes that no array shows (`N=...`). Arrays are
        all NumPy, all torch CUDA tensors, or all PyCUDA GPUArrays:

        * NumPy: the GPU when one is present (backend="auto" or "cuda"), else the interpreter
          (backend="interp", with `schedule`); outputs are new NumPy arrays, or written into `out`.
        * torch CUDA tensors / PyCUDA GPUArrays: zero-copy, through their device pointers, on
          torch's current stream; outputs are allocated on the same device, or `out` is written.

        Returns the output (one) or a tuple of outputs in signature order. The kernel is verified
        first (once) and refused with VerificationError when an obligation fails (verify=False
        skips that; allow_unknown=True runs with unknown or vacuous obligations).
        """
        from argus_verify.api_call import run_call

        # the arguments are checked first (cheap), then the kernel is verified (once), then run
        checked = (lambda: self.check_verified(allow_unknown)) if verify else (lambda: None)
        return run_call(self, args, kwargs, out, backend, schedule, checked)


_STATS_FIELDS = ("registers", "shared_bytes", "spill_stores", "spill_loads", "stack_frame", "cmem", "raw",
                 "barriers", "warnings")


def _stats_of(d: Mapping | None):
    if d is None:
        return None
    from argus_verify.lowering.ptxas import PtxStats

    return PtxStats(**{**d, "warnings": tuple(d.get("warnings", ()))})


def _verdict_of(report) -> dict:
    return {"exit_code": report.exit_code, "counts": report.counts(),
            "violated": [f"{r.location}: {r.obligation}: {r.message}" for r in report.violations()],
            "unproved": [f"{r.location}: {r.obligation} {r.status}: {r.message}"
                         for r in report.unknowns() + report.vacuous()]}


def clear_cache() -> None:
    """Remove the disk cache (compiled modules and verdicts) and this process's verifications."""
    _VERIFIED.clear()
    shutil.rmtree(cache_dir(), ignore_errors=True)
