"""`argus audit FILE`: check a hand-written CUDA (.cu, through nvcc) or PTX kernel.

The PTX is lifted to the thread-level form (argus_verify.frontend.ptx) and checked by the audit
obligations (argus_verify.smt.audit). Launch sizes come from --block-dim/--grid-dim or from
`// argus:` comments in the source; so do preconditions, array sizes and alignments (docs/audit.md).
Exit codes as for verify: 0 all proved, 1 a violation, 3 something unknown, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from argus_verify.diagnostics import SOURCES, ArgusError, ArgusSyntaxError, Span

EXAMPLE = """examples:
  argus audit tests/audit/corpus/reduce_tree_ok.cu
  argus audit kernel.ptx --block-dim 256 --grid-dim 1..4096 --json
  argus audit kernel.cu --block-dim 16,16 --sarif findings.sarif

launch sizes: X[,Y[,Z]], each an integer or a range LO..HI (symbolic within it)
source comments: // argus: requires n <= grid_dim.x * block_dim.x
                 // argus: size in = n          (elements of in's type; bytes in a .ptx file)
                 // argus: align in 16
                 // argus: block-dim 256        // argus: grid-dim 1..1024
exit codes: 0 every obligation proved, 1 a violation, 2 bad input, 3 something unknown"""

DEFAULT_BLOCK = ((1, 1024), 1, 1)
DEFAULT_GRID = ((1, 65535), 1, 1)
C_TYPES = {"char": 1, "signed char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "bool": 1,
           "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2,
           "__nv_bfloat16": 2, "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4,
           "float": 4, "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8,
           "uint64_t": 8, "size_t": 8, "double": 8, "float2": 8, "int2": 8, "float4": 16, "int4": 16,
           "double2": 16, "uint4": 16, "half2": 4, "__half2": 4}


class AuditUsageError(ArgusError):
    pass


def register(sub) -> None:
    """Add the `audit` subcommand to the main parser's subparsers."""
    sp = sub.add_parser("audit", help="check a hand-written CUDA or PTX kernel (races, barriers, bounds, ...)",
                        description="Audit a hand-written .cu or .ptx kernel with two symbolic threads: data races, "
                                    "barrier divergence, out-of-bounds accesses, uninitialised shared reads, "
                                    "cp.async waits, shuffles.",
                        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("file", help="the .cu or .ptx file")
    sp.add_argument("--kernel", help="which kernel (C or PTX name; default: every kernel of the file)")
    sp.add_argument("--block-dim", metavar="X[,Y[,Z]]", help="threads per block, e.g. 256 or 16,16 or 32..1024")
    sp.add_argument("--grid-dim", metavar="X[,Y[,Z]]", help="blocks per grid, e.g. 1..65535 (default symbolic)")
    sp.add_argument("--json", action="store_true", help="machine-readable output (the verify format)")
    sp.add_argument("--sarif", metavar="FILE", help="also write the findings as SARIF 2.1.0")
    sp.add_argument("--timeout", default=10.0, help="solver time limit per query, seconds")


def parse_dims(text: str, what: str, span: Span | None = None):
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not 1 <= len(parts) <= 3:
        raise AuditUsageError(f"bad {what} '{text}': expected X[,Y[,Z]]", span)
    out = []
    for p in parts:
        m = re.fullmatch(r"(\d+)(?:\.\.(\d+))?", p)
        if not m:
            raise AuditUsageError(f"bad {what} '{text}': each size is an integer or a range LO..HI", span)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else None
        if lo < 1 or (hi is not None and hi < lo):
            raise AuditUsageError(f"bad {what} '{text}': sizes are at least 1 and ranges go up", span)
        out.append(lo if hi is None or hi == lo else (lo, hi))
    while len(out) < 3:
        out.append(1)
    # what CUDA launches (a larger block or grid fails at the launch: nothing to audit there)
    from argus_verify import ir

    limits = ir.BLOCK_MAX if what.endswith("block-dim") else ir.GRID_MAX
    for axis, (d, most) in enumerate(zip(out, limits, strict=True)):
        hi = d[1] if isinstance(d, tuple) else d
        if hi > most:
            raise AuditUsageError(f"bad {what} '{text}': CUDA launches at most {most} "
                                  f"{'threads' if what.endswith('block-dim') else 'blocks'} along "
                                  f"{'xyz'[axis]} (here {hi})", span)
    threads = math.prod(d[0] if isinstance(d, tuple) else d for d in out)
    if what.endswith("block-dim") and threads > ir.BLOCK_THREADS_MAX:
        raise AuditUsageError(f"bad {what} '{text}': a CUDA block has at most {ir.BLOCK_THREADS_MAX} threads "
                              f"(here {threads})", span)
    return tuple(out)


def compile_cu(path: Path) -> str:
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc")
                                         if os.path.exists(p)), None)
    if nvcc is None:
        raise AuditUsageError(f"{path}: auditing a .cu file needs nvcc (not found on PATH); compile it yourself "
                              "with `nvcc -ptx -lineinfo -arch=sm_90a` and audit the .ptx")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / (path.stem + ".ptx")
        r = subprocess.run([nvcc, "-ptx", "-lineinfo", "-arch=sm_90a", path.name, "-o", str(out)],
                           cwd=path.parent or ".", capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise AuditUsageError(f"{path}: nvcc failed:\n{r.stderr.strip()}")
        return out.read_text()


def directives(text: str, file: str):
    """The `// argus:` comments of a source: (kind, name, text, span) in order."""
    from argus_verify.smt.audit import Directive

    out, launch = [], {}
    for i, line in enumerate(text.splitlines(), 1):
        m = re.search(r"//\s*argus:\s*(.*)$", line)
        if not m:
            continue
        body = m.group(1).strip()
        col = line.index(m.group(0)) + 1
        span = Span(file, i, col, i, len(line) + 1)
        word, _, rest = body.partition(" ")
        rest = rest.strip()
        if word == "requires":
            out.append(Directive("requires", "", rest, span))
        elif word == "size":
            name, eq, expr = rest.partition("=")
            if not eq or not name.strip().isidentifier():
                raise ArgusSyntaxError("expected `// argus: size NAME = EXPR`", span)
            out.append(Directive("size", name.strip(), expr.strip(), span))
        elif word == "align":
            parts = rest.split()
            if len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) & (int(parts[1]) - 1):
                raise ArgusSyntaxError("expected `// argus: align NAME N` with N a power of two", span)
            out.append(Directive("align", parts[0], parts[1], span))
        elif word in ("block-dim", "grid-dim"):
            launch[word] = (rest, span)
        else:
            raise ArgusSyntaxError(f"unknown argus directive '{word}' (requires, size, align, block-dim, grid-dim)",
                                   span)
    return out, launch


def c_signatures(text: str) -> dict:
    """__global__ function name -> [(param name, pointee bytes or 0)] from a .cu source."""
    out = {}
    for m in re.finditer(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(([^)]*)\)", text):
        params = []
        for p in m.group(2).split(","):
            p = p.strip()
            if not p or p == "void":
                continue
            pm = re.match(r"(.*?)(\w+)\s*(\[\s*\])?$", p)
            if not pm:
                params.append(("", 0))
                continue
            typ, name = pm.group(1), pm.group(2)
            pointer = "*" in typ or pm.group(3)
            base = re.sub(r"\b(const|volatile|__restrict__|restrict|struct)\b|\*", " ", typ)
            base = " ".join(base.split())
            params.append((name, C_TYPES.get(base, 1) if pointer else 0))
        out[m.group(1)] = params
    return out


def _matches(c_name: str, ptx_name: str) -> bool:
    return ptx_name == c_name or re.match(rf"_Z\d+{re.escape(c_name)}", ptx_name) is not None and \
        ptx_name.startswith(f"_Z{len(c_name)}{c_name}")


def read_source(path: Path) -> str:
    """A .cu or .ptx file's text; a file that is not UTF-8 text (a binary) is bad input."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise AuditUsageError(f"{path}: cannot read it: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise AuditUsageError(f"{path}:{line}: not a text file: byte 0x{data[e.start]:02x} at offset {e.start} is not "
                              "UTF-8 (argus audit reads .cu or .ptx source text)") from None


def cmd_audit(args) -> int:
    from argus_verify.frontend.ptx import lift_module, parse_ptx
    from argus_verify.smt.audit import Launch, Spec, audit_kernel

    path = Path(args.file)
    if not path.exists():
        raise AuditUsageError(f"{args.file}: no such file")
    if path.suffix not in (".cu", ".ptx"):
        raise AuditUsageError(f"{args.file}: argus audit reads .cu or .ptx files")
    try:
        timeout = float(args.timeout)
        assert 0 < timeout < 4e6
    except (ValueError, AssertionError):
        raise AuditUsageError(f"--timeout must be a positive number of seconds, got '{args.timeout}'") from None
    if path.is_dir():
        raise AuditUsageError(f"{args.file}: is a directory, not a .cu or .ptx file")
    if args.sarif is not None:  # fail before the work, not after it (as compile -o)
        from argus_verify.cli import check_output_path, same_file

        check_output_path(args.sarif, "--sarif")
        sources = [args.file] + ([str(path.with_suffix(".cu"))] if path.suffix == ".ptx" else [])
        if any(same_file(args.sarif, f) for f in sources):
            raise AuditUsageError(f"--sarif {args.sarif} is the audited source itself: give another file name "
                                  "(e.g. one ending in .sarif)")
    source = None
    if path.suffix == ".cu":
        source = path
        read_source(path)  # text, before nvcc sees it
        ptx_text = compile_cu(path)
        ptx_name = str(path.with_suffix(".ptx"))
    else:
        ptx_text = read_source(path)
        ptx_name = str(path)
        sib = path.with_suffix(".cu")
        if sib.is_file():
            source = sib
    SOURCES.add(ptx_name, ptx_text)
    src_text = read_source(source) if source is not None else ""
    if source is not None:
        SOURCES.add(str(source), src_text)
    dirs, launch_dirs = directives(src_text, str(source)) if source is not None else ([], {})
    d2, l2 = directives(ptx_text, ptx_name)
    dirs += d2
    launch_dirs.update(l2)
    block = DEFAULT_BLOCK
    grid = DEFAULT_GRID
    if "block-dim" in launch_dirs:
        block = parse_dims(*launch_dirs["block-dim"][:1], "block-dim", launch_dirs["block-dim"][1])
    if "grid-dim" in launch_dirs:
        grid = parse_dims(launch_dirs["grid-dim"][0], "grid-dim", launch_dirs["grid-dim"][1])
    if args.block_dim:
        block = parse_dims(args.block_dim, "--block-dim")
    if args.grid_dim:
        grid = parse_dims(args.grid_dim, "--grid-dim")
    module = parse_ptx(ptx_text, ptx_name)
    kernels = lift_module(module, ptx_name, str(source) if source is not None else None)
    sigs = c_signatures(src_text) if source is not None else {}
    if args.kernel:
        kernels = [(k, u) for k, u in kernels if k.name == args.kernel or _matches(args.kernel, k.name)]
        if not kernels:
            raise AuditUsageError(f"{args.file}: no kernel named '{args.kernel}'")
    if not kernels:
        raise AuditUsageError(f"{args.file}: no kernel entry (.entry) to audit")
    reports = []
    for k, problems in kernels:
        spec = Spec(directives=list(dirs))
        c_params = next((ps for name, ps in sigs.items() if _matches(name, k.name)), None)
        if c_params is not None and len(c_params) == len(k.params):
            for p, (cname, elem) in zip(k.params, c_params, strict=True):
                p.source_name = cname
                p.pointee_bytes = elem
                spec.names[cname] = p.name
                if elem:
                    spec.elem_bytes[p.name] = elem
        for i, p in enumerate(k.params):
            spec.names.setdefault(f"param_{i}", p.name)
        reports.append(audit_kernel(k, Launch(block, grid), spec, ptx_name, str(source or ptx_name), problems,
                                    timeout))
    code = 0
    for r in reports:
        c = r.exit_code
        code = 1 if 1 in (code, c) else max(code, c)
    if args.sarif:
        from argus_verify.sarif import sarif_log

        try:
            Path(args.sarif).write_text(json.dumps(sarif_log(reports), indent=2))
        except OSError as e:
            raise AuditUsageError(f"cannot write --sarif {args.sarif}: {e.strerror}") from None
    if args.json:
        out = []
        for r in reports:
            for item in r.to_json():
                out.append({"kernel": r.kernel, **item})
        print(json.dumps(out, indent=2, default=str))
    else:
        print("\n\n".join(r.render_text() for r in reports))
    return code
