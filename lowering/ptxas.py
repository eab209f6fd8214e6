"""Assemble PTX with NVIDIA's ``ptxas`` and read back its resource report.

Why a separate step: the driver JIT (``cuModuleLoadData``) hides register, shared-memory and spill
figures, and fails late (on the GPU machine). Running ``ptxas -v`` ahead of time catches malformed PTX
on any machine with the CUDA toolkit, points at the offending PTX line, and gives the resource numbers
the planner needs (occupancy, spills) without a GPU.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

__all__ = [
    "PtxDiagnostic",
    "PtxStats",
    "PtxasError",
    "assemble",
    "assemble_cubin",
    "find_ptxas",
    "parse_report",
    "ptxas_available",
]

DEFAULT_ARCH = "sm_90a"
DEFAULT_TIMEOUT_S = 120.0

# `ptxas /tmp/x/kernel.ptx, line 12; error   : Unknown symbol '%r9'`
_DIAG_RE = re.compile(
    r"^ptxas\s+(?P<file>.+?),\s+line\s+(?P<line>\d+);\s+(?P<sev>error|warning|fatal)\s*:\s*(?P<msg>.*)$"
)
# Messages with no source position: `ptxas fatal   : Ptx assembly aborted due to errors`.
_GLOBAL_DIAG_RE = re.compile(r"^ptxas\s+(?P<sev>error|warning|fatal)\s*:\s*(?P<msg>.*)$")
_INFO_RE = re.compile(r"^ptxas\s+info\s*:\s*(?P<msg>.*)$")
_ENTRY_RE = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPS_RE = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME_RE = re.compile(
    r"(?P<stack>\d+) bytes stack frame,\s*(?P<st>\d+) bytes spill stores,\s*(?P<ld>\d+) bytes spill loads"
)
_REGS_RE = re.compile(r"Used (?P<n>\d+) registers")
_BARRIERS_RE = re.compile(r"used (?P<n>\d+) barriers")
_SMEM_RE = re.compile(r"(?P<n>\d+) bytes smem")
_CMEM_RE = re.compile(r"\d+ bytes cmem\[\d+\]")
_ARCH_RE = re.compile(r"^sm_\d+[af]?$")


@attrs.frozen
class PtxDiagnostic:
    """One positioned (or global, ``line is None``) ptxas message."""

    severity: str
    line: int | None
    message: str


class PtxasError(Exception):
    """ptxas rejected the PTX (or could not run).

    ``stderr`` is ptxas's full output; ``lines`` are the PTX line numbers (1-based, in the order
    ptxas reported them, duplicates removed) of every positioned *error*; ``line`` is the first of
    them, the one to show a user. ``diagnostics`` keeps every parsed message, warnings included.
    """

    def __init__(self, message: str, stderr: str = "", returncode: int | None = None) -> None:
        self.stderr = stderr
        self.returncode = returncode
        self.diagnostics: tuple[PtxDiagnostic, ...] = tuple(_parse_diagnostics(stderr))
        seen: dict[int, None] = {}
        for d in self.diagnostics:
            if d.severity in ("error", "fatal") and d.line is not None:
                seen.setdefault(d.line, None)
        self.lines: tuple[int, ...] = tuple(seen)
        self.line: int | None = self.lines[0] if self.lines else None
        detail = stderr.strip()
        super().__init__(f"{message}\n{detail}" if detail else message)


@attrs.frozen
class PtxStats:
    """ptxas ``-v`` figures for one ``.entry``.

    ``shared_bytes`` is *static* shared memory only (``.shared`` declarations); dynamic shared memory is
    chosen at launch and never appears here. ``cmem`` is the raw constant-bank text (e.g.
    ``"372 bytes cmem[0]"``) because recent ptxas versions (CUDA 13) no longer print it at all.
    """

    registers: int
    shared_bytes: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    cmem: str | None
    raw: str
    barriers: int = 0
    warnings: tuple[str, ...] = ()


def find_ptxas() -> str | None:
    """Path of the ptxas executable: $PATH first, then $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda."""
    found = shutil.which("ptxas")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if not root:
            continue
        cand = Path(root) / "bin" / "ptxas"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def ptxas_available() -> bool:
    return find_ptxas() is not None


def _parse_diagnostics(text: str) -> list[PtxDiagnostic]:
    out: list[PtxDiagnostic] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        m = _DIAG_RE.match(line)
        if m:
            out.append(PtxDiagnostic(m["sev"], int(m["line"]), m["msg"].strip()))
            continue
        m = _GLOBAL_DIAG_RE.match(line)
        if m:
            out.append(PtxDiagnostic(m["sev"], None, m["msg"].strip()))
    return out


@attrs.define
class _EntryAcc:
    # Mutable accumulator while walking the report; frozen into PtxStats at the end.
    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    barriers: int = 0
    cmem: list[str] = attrs.field(factory=list)
    raw: list[str] = attrs.field(factory=list)

    def stats(self, warnings: tuple) -> PtxStats:
        return PtxStats(registers=self.registers, shared_bytes=self.shared_bytes, spill_stores=self.spill_stores,
                        spill_loads=self.spill_loads, stack_frame=self.stack_frame,
                        cmem=", ".join(self.cmem) if self.cmem else None, raw="\n".join(self.raw),
                        barriers=self.barriers, warnings=warnings)


class _ReportWalk:
    """The state of a walk over a ``ptxas -v`` report, one line at a time."""

    def __init__(self):
        self.entries: dict[str, _EntryAcc] = {}
        self.current: str | None = None  # entry whose "Used N registers" line comes next
        self.props_for: str | None = None  # function whose frame line comes next

    def line(self, line: str) -> None:
        info = _INFO_RE.match(line)
        msg = info["msg"] if info else line
        for pattern, handler in ((_ENTRY_RE, self._entry), (_PROPS_RE, self._props), (_FRAME_RE, self._frame)):
            m = pattern.search(msg)
            if m:
                handler(m, line)
                return
        m = _REGS_RE.search(msg)
        if m and self.current is not None:
            self._resources(m, msg, line)
        elif self.current is not None and info and msg.startswith("Compile time"):
            self.entries[self.current].raw.append(line)

    def _entry(self, m, line: str) -> None:
        self.current = m["name"]
        self.entries.setdefault(self.current, _EntryAcc()).raw.append(line)
        self.props_for = None

    def _props(self, m, line: str) -> None:
        self.props_for = m["name"]
        if self.props_for in self.entries:
            self.entries[self.props_for].raw.append(line)

    def _frame(self, m, line: str) -> None:
        acc = self.entries.get(self.props_for) if self.props_for is not None else None
        if acc is not None:  # a .func's frame line is not its caller's
            acc.stack_frame, acc.spill_stores, acc.spill_loads = int(m["stack"]), int(m["st"]), int(m["ld"])
            acc.raw.append(line)
        self.props_for = None

    def _resources(self, m, msg: str, line: str) -> None:
        acc = self.entries[self.current]
        acc.registers = int(m["n"])
        b = _BARRIERS_RE.search(msg)
        acc.barriers = int(b["n"]) if b else 0
        s = _SMEM_RE.search(msg)
        acc.shared_bytes = int(s["n"]) if s else 0
        acc.cmem = _CMEM_RE.findall(msg)
        acc.raw.append(line)


def parse_report(text: str) -> dict[str, PtxStats]:
    """Parse a ``ptxas -v`` report into per-entry stats.

    The report interleaves entries and non-entry ``.func``s::

        ptxas info    : Compiling entry function 'k' for 'sm_90a'
        ptxas info    : Function properties for k
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 32 registers, used 1 barriers, 384 bytes smem, 372 bytes cmem[0]
        ptxas info    : Function properties for helper      <- a .func: its frame line is not k's
            16 bytes stack frame, ...

    Only entries are returned; a ``.func``'s frame line is ignored (its cost is already folded into
    the caller's "cumulative stack size" by ptxas).
    """
    warnings = tuple(
        f"line {d.line}: {d.message}" if d.line is not None else d.message
        for d in _parse_diagnostics(text)
        if d.severity == "warning"
    )
    walk = _ReportWalk()
    for raw_line in text.splitlines():
        if raw_line.strip():
            walk.line(raw_line.strip())
    return {name: a.stats(warnings) for name, a in walk.entries.items()}


def assemble_cubin(
    ptx: str,
    arch: str = DEFAULT_ARCH,
    extra: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
) -> tuple[bytes, dict[str, PtxStats]]:
    """Run ``ptxas -arch=<arch> -v`` on ``ptx``; return the cubin bytes and per-entry stats.

    Raises PtxasError when ptxas is missing, times out, or rejects the PTX.
    """
    if not _ARCH_RE.match(arch):
        raise ValueError(f"not an SM architecture: {arch!r} (expected e.g. 'sm_90a')")
    exe = find_ptxas()
    if exe is None:
        raise PtxasError("ptxas not found on PATH or under $CUDA_HOME/bin")
    # A private temp dir: ptxas needs real files, and concurrent compiles must not collide.
    with tempfile.TemporaryDirectory(prefix="argus-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(ptx, encoding="utf-8")
        cmd = [exe, f"-arch={arch}", "-v", *extra, "-o", str(out), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise PtxasError(f"ptxas timed out after {timeout:g} s", err) from e
        # ptxas writes both the -v report and errors to stderr; keep stdout too, just in case.
        report = (proc.stderr or "") + (proc.stdout or "")
        if proc.returncode != 0 or not out.is_file():
            raise PtxasError(f"ptxas failed (exit {proc.returncode})", report, proc.returncode)
        cubin = out.read_bytes()
    return cubin, parse_report(report)


def assemble(
    ptx: str,
    arch: str = DEFAULT_ARCH,
    extra: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
) -> dict[str, PtxStats]:
    """Assemble ``ptx`` and return only the per-entry resource stats (the cubin is discarded)."""
    return assemble_cubin(ptx, arch, extra, timeout)[1]
