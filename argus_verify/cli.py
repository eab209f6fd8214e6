"""The `argus` command line.

Exit codes: 0 proved / passed, 1 a counterexample, a vacuous verification or a wrong result, 2 bad
input (usage, parse, type error, sizes outside the kernel's requires), 3 unknown: an obligation
neither proved nor violated (verify), or run / compile / bench refusing such a kernel (without
--allow-unknown), 4 an internal error (a bug in Argus: please report).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from argus_verify.diagnostics import ArgusError, ArgusRuntimeError, error_json, format_error

EXAMPLES = """\
examples:
  argus check specs/gemm_simt.arg
  argus ir specs/vecadd.arg --const BLOCK=2048
  argus run specs/gemm_simt.arg --shape M=128,N=96,K=64
  argus verify specs/gemm_simt.arg --json
  argus verify specs/buggy/gemm_stage_off_by_one.arg --replay
  argus compile specs/vecadd.arg -o /tmp/vecadd.ptx --stats
  argus compile specs/reduce_sum.arg -o /tmp/reduce_sum.ptx --validate
  argus bench specs/row_softmax.arg --shape M=16384,N=1024
  argus test specs/row_softmax.arg --max-examples 30
  argus audit tests/audit/corpus/reduce_tree_ok.cu --json

exit codes: 0 proved/passed, 1 counterexample, vacuous or wrong result, 2 bad input, 3 unknown
            (verify) or refused as unknown (run, compile, bench), 4 internal error
"""


class UsageError(ArgusError):
    pass


MAX_TIMEOUT_S = (2**32 - 1) // 1000  # Z3 takes its limit in milliseconds, as an unsigned 32-bit integer

# numeric options, taken as text and checked here so that a bad value is a usage error like any
# other (exit 2, JSON with --json): option -> (parse, accept, what it must be)
NUMERIC_OPTIONS = {
    "timeout": (float, lambda x: math.isfinite(x) and 0 < x <= MAX_TIMEOUT_S,
                f"a number of seconds greater than 0 and at most {MAX_TIMEOUT_S}"),
    "jobs": (int, lambda n: n >= 1, "an integer at least 1"),
    "seed": (int, lambda n: 0 <= n < 2**32, f"an integer from 0 to {2**32 - 1} (numpy's seed range)"),
    "reps": (int, lambda n: n >= 1, "an integer at least 1"),
}


def validate_options(args) -> None:
    """Parse and check the numeric options given on the command line (defaults are already valid)."""
    for name, (parse, accept, requirement) in NUMERIC_OPTIONS.items():
        text = getattr(args, name, None)
        if not isinstance(text, str):
            continue
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise UsageError(f"--{name} must be {requirement}, got '{text}'")
        setattr(args, name, value)


def parse_assignments(text: str | None, what: str) -> dict[str, int]:
    """`M=128,N=96` -> {"M": 128, "N": 96}."""
    out: dict[str, int] = {}
    if not text:
        return out
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.isidentifier():
            raise UsageError(f"bad {what} '{part}': expected NAME=INTEGER, e.g. M=128")
        if name in out:
            raise UsageError(f"{what} {name} given twice")
        try:
            out[name] = int(value, 0)
        except ValueError:
            raise UsageError(f"bad {what} '{part}': '{value}' is not an integer") from None
    return out


class _StoreOnce(argparse._StoreAction):
    """A single-value option given twice is an error (argparse would keep the last one silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given_options", {})
        if self.dest in seen and seen[self.dest] != values:
            parser.error(f"{option_string} given twice ({seen[self.dest]!r} and {values!r}): give it once")
        seen[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


class _Merge(argparse._StoreAction):
    """`--const A=1 --const B=2` is `--const A=1,B=2`; a name given twice is an error (parse_assignments)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, values if not before else f"{before},{values}")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so that `main` renders its errors like any other
    usage error (JSON with --json). Subparsers are made of the same class. A single-value option
    given twice is an error."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)
        self.register("action", "merge", _Merge)

    def error(self, message):
        raise ArgparseError(message, self.format_usage())


class ArgparseError(UsageError):
    def __init__(self, message: str, usage: str):
        super().__init__(message)
        self.usage = usage


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="argus", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Argus: a verification-first compiler for GPU kernels (.arg tile language -> "
                    "Z3-proved invariants -> PTX for sm_90a).", epilog=EXAMPLES)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def common(sp, shapes=True, shape_help=None):
        sp.add_argument("file", help="the .arg kernel file")
        sp.add_argument("--kernel", help="which kernel of the file (default: the first; verify and check: every "
                                         "kernel)")
        sp.add_argument("--const", action="merge", metavar="K=V,...",
                        help="compile-time parameters, e.g. BM=128,BN=128 (repeatable; each name once)")
        if shapes:
            sp.add_argument("--shape", action="merge", metavar="M=..,N=..", help=shape_help or
                            "sizes (default: the reference's SHAPES; repeatable, each name once)")
        sp.add_argument("--json", action="store_true", help="machine-readable output")

    def verify_options(sp):
        sp.add_argument("--no-verify", action="store_true", help="skip verification (says so loudly)")
        sp.add_argument("--allow-unknown", action="store_true",
                        help="go on although some obligations are unknown or vacuous (says which, and why)")
        sp.add_argument("--timeout", default=10.0, help="verifier time limit per query (s)")

    def cmd(name, help_, example, shapes=True, shape_help=None):
        sp = sub.add_parser(name, help=help_, description=help_, epilog=f"example:\n  {example}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        common(sp, shapes, shape_help)
        return sp

    cmd("check", "parse and check a kernel (names, dtypes, shapes, layouts, atoms)",
        "argus check specs/gemm_simt.arg", shapes=False)
    sp = cmd("ir", "print the checked, instantiated IR", "argus ir specs/vecadd.arg --const BLOCK=2048",
             shapes=False)
    sp.add_argument("--source", action="store_true",
                    help="print it as .arg source that `argus check` accepts (constants folded in)")
    sp = cmd("run", "run on random inputs and compare with the reference",
             "argus run specs/gemm_simt.arg --shape M=128,N=96,K=64")
    sp.add_argument("--backend", choices=("auto", "interp", "cuda"), default="auto",
                    help="auto: the GPU when there is one, else the numpy interpreter")
    sp.add_argument("--seed", default=None, help="random seed, 0 .. 2**32-1 (default: fresh inputs)")
    verify_options(sp)
    sp = cmd("verify", "prove the kernel's invariants (every kernel of the file, or --kernel's) or print "
             "counterexamples", "argus verify specs/gemm_simt.arg --json",
             shape_help="fix sizes, e.g. M=128,N=96 (default: none: proofs hold for all sizes the requires "
                        "admit; repeatable, each name once)")
    sp.add_argument("--timeout", default=10.0, help="solver time limit per query, seconds")
    sp.add_argument("--jobs", default=None,
                    help="solver processes (default: up to 2, one per core); 1 runs in this process")
    sp.add_argument("--replay", action="store_true",
                    help="re-run each witness in the interpreter and show the concrete wrong value")
    sp.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                    help="a status line on stderr as the stages run (auto: when stderr is a terminal); "
                         "stdout keeps the report alone")
    sp = cmd("compile", "lower to PTX for sm_90a (verified first)",
             "argus compile specs/vecadd.arg -o /tmp/vecadd.ptx --stats", shapes=False)
    sp.add_argument("-o", "--output", help="write the PTX here (default: stdout)")
    sp.add_argument("--stats", action="store_true", help="assemble with ptxas and report registers, "
                                                         "shared memory and spills")
    sp.add_argument("--validate", action="store_true",
                    help="audit the emitted PTX (argus audit) and check it agrees with the source proof on races, "
                         "bounds and barrier divergence; a disagreement is an internal error (exit 4)")
    verify_options(sp)
    sp = cmd("bench", "time on the GPU against the library baseline",
             "argus bench specs/row_softmax.arg --shape M=16384,N=1024")
    verify_options(sp)
    sp.add_argument("--reps", default=50, help="timed repetitions (median reported)")
    from argus_verify import cli_test

    cli_test.add_parser(sub, common)

    from argus_verify.cli_agent import add_parser as add_agent_parser

    add_agent_parser(sub)  # argus agent run | resume | report (argus_verify/cli_agent.py)

    from argus_verify.cli_audit import register as register_audit

    register_audit(sub)
    return p


def load_kernel(args):
    from argus_verify.frontend import compile_file

    consts = parse_assignments(getattr(args, "const", None), "compile-time parameter")
    k = compile_file(args.file, consts, getattr(args, "kernel", None))
    if getattr(args, "kernel", None) is None:
        others = [n for n in file_kernels(args.file) if n != k.name]
        if others:  # say which kernel this is, and that there are more (nothing silently skipped)
            print(f"argus: note: {args.file} has {len(others) + 1} kernels; {args.command} uses the first, {k.name} "
                  f"(the others: {', '.join(others)}; choose one with --kernel NAME)", file=sys.stderr)
    return k


def file_kernels(path: str) -> dict[str, list[str]]:
    """The kernels of a file (which parses: a kernel of it was built already), each with its
    compile-time parameters."""
    from argus_verify.frontend import kernel_declarations, read_source

    return kernel_declarations(read_source(path), str(path))


def load_kernels(args) -> list:
    """Every kernel of the file (`--kernel`: that one), each with the constants and sizes it
    declares: (kernel, its --shape sizes). A --const or --shape name that no kernel has is an error."""
    from argus_verify.frontend import compile_file

    consts = parse_assignments(getattr(args, "const", None), "compile-time parameter")
    if getattr(args, "kernel", None) is not None:
        k = compile_file(args.file, consts, args.kernel)
        return [(k, parse_shape(args, k))]
    declared = file_kernels(args.file)
    if len(declared) <= 1:
        k = compile_file(args.file, consts, None)
        return [(k, parse_shape(args, k))]
    unknown = [c for c in consts if not any(c in d for d in declared.values())]
    if unknown:
        raise UsageError(f"no kernel of {args.file} has a compile-time parameter '{unknown[0]}' (its kernels: " +
                         "; ".join(f"{n}: {', '.join(d) or 'none'}" for n, d in declared.items()) + ")")
    kernels = [compile_file(args.file, {c: v for c, v in consts.items() if c in params}, n)
               for n, params in declared.items()]
    shape = parse_assignments(getattr(args, "shape", None), "shape")
    unknown = [s for s in shape if not any(s in k.sizes for k in kernels)]
    if unknown:
        raise UsageError(f"no kernel of {args.file} has a size '{unknown[0]}' (its kernels' sizes: " +
                         "; ".join(f"{k.name}: {', '.join(k.sizes) or 'none'}" for k in kernels) + ")")
    check_positive(shape)
    return [(k, {s: v for s, v in shape.items() if s in k.sizes}) for k in kernels]


def emit(args, payload: dict, text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)


def cmd_check(args) -> int:
    """Every kernel of the file (or --kernel's); the JSON is the first kernel's, with "kernels" (each
    kernel's) when the file has several."""
    from argus_verify.ir import walk_stmts

    checked = []
    for k, _ in load_kernels(args):
        n_stmts = sum(1 for _ in walk_stmts(k.body))
        checked.append(({"kernel": k.name, "consts": dict(k.consts), "sizes": list(k.sizes), "block": k.block,
                         "statements": n_stmts},
                        f"{args.file}: ok: kernel {k.name} ({n_stmts} statements, {k.block} threads, "
                        f"sizes {', '.join(k.sizes) or 'none'})"))
    payload = {"status": "ok", "file": args.file, **checked[0][0]}
    if len(checked) > 1:
        payload["kernels"] = [c for c, _ in checked]
    emit(args, payload, "\n".join(t for _, t in checked))
    return 0


def cmd_ir(args) -> int:
    from argus_verify.printer import format_kernel, kernel_json

    k = load_kernel(args)
    if args.source:
        from argus_verify.source import format_source

        text = format_source(k)
        emit(args, {**kernel_json(k), "source": text}, text.rstrip("\n"))
        return 0
    emit(args, kernel_json(k), format_kernel(k))
    return 0


def parse_shape(args, kernel) -> dict[str, int]:
    """The sizes given with --shape: names of the kernel's sizes, positive values."""
    given = parse_assignments(getattr(args, "shape", None), "shape")
    unknown = [s for s in given if s not in kernel.sizes]
    if unknown:
        raise UsageError(f"kernel {kernel.name} has no size '{unknown[0]}' (its sizes: "
                         f"{', '.join(kernel.sizes) or 'none'})")
    check_positive(given)
    return given


MAX_SIZE = 2**31 - 1  # sizes are 32-bit kernel parameters


def check_positive(sizes: dict) -> None:
    bad = [s for s, v in sizes.items() if v <= 0]
    if bad:
        raise UsageError(f"size {bad[0]} must be positive, got {sizes[bad[0]]}")
    big = [s for s, v in sizes.items() if v > MAX_SIZE]
    if big:
        raise UsageError(f"size {big[0]}={sizes[big[0]]} is too large: sizes are 32-bit kernel parameters, at most "
                         f"{MAX_SIZE}")


def check_memory(kernel, sizes: dict) -> None:
    """Refuse sizes whose tensors (with the copies a run makes: inputs, outputs, the reference's
    float64 results) cannot fit in this machine's free memory, before allocating anything."""
    from argus_verify import ir

    shapes = ir.tensor_shapes(kernel, sizes)
    need = sum(math.prod(shapes[t.name]) * 8 for t in kernel.tensors) * 3
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need > free:
        given = ", ".join(f"{n}={v}" for n, v in sizes.items())
        raise UsageError(f"sizes {given} need about {need / 2**30:.1f} GiB of host memory for the tensors and "
                         f"their copies; this machine has {free / 2**30:.1f} GiB free: give smaller --shape values")


def check_requires(args, kernel, sizes: dict, origin: str) -> None:
    """Sizes for which the kernel's `requires` cannot hold are bad input, named with the
    precondition they break (a kernel whose requires contradict each other is the verifier's
    business: a violated launch obligation)."""
    from argus_verify.smt import vacuity

    if not sizes:
        return
    adm = vacuity.admissibility(kernel, sizes, getattr(args, "timeout", 10.0), size_cap=False)
    if adm.status != "unsat" or not adm.shapes():
        return
    reqs = adm.requires()
    given = ",".join(f"{n}={sizes[n]}" for n in adm.shapes())
    which = "precondition" if len(reqs) == 1 else "preconditions"
    raise UsageError(f"{given} ({origin}) does not satisfy the kernel's {which} "
                     f"{' and '.join(p.describe() for p in reqs)}", reqs[-1].span if reqs else None)


def resolve_sizes(args, kernel, ref) -> dict[str, int]:
    from argus_verify.reference import default_sizes

    sizes = default_sizes(kernel, ref)
    sizes.update(parse_shape(args, kernel))
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise UsageError(f"no value for size {missing[0]}: give --shape {missing[0]}=... "
                         "(or SHAPES in the reference file)")
    check_positive(sizes)
    check_requires(args, kernel, sizes, "--shape, or SHAPES in the reference file")
    check_memory(kernel, sizes)
    return sizes


class StatusLine:
    """Progress of a long command on stderr: one line rewritten in place on a terminal, one line per
    stage elsewhere (`--progress always` into a log); nothing with `never`, or `auto` off a terminal."""

    def __init__(self, stream, mode: str, label: str):
        tty = bool(getattr(stream, "isatty", lambda: False)())
        self.stream, self.label, self.tty = stream, label, tty
        self.on = mode == "always" or (mode == "auto" and tty)
        self.t0 = time.perf_counter()
        self.shown = False

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.on:
            return
        line = f"{self.label}: [{done}/{total}] {what} ({time.perf_counter() - self.t0:.0f} s)"
        self.stream.write("\r\x1b[K" + line if self.tty else line + "\n")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.on and self.tty and self.shown:
            self.stream.write("\r\x1b[K")  # the report follows on a clean line
            self.stream.flush()


def default_jobs() -> int:
    """The CLI is single-threaded, so forking solver processes is safe; two use this machine's cores."""
    return max(1, min(2, os.cpu_count() or 1))


def verify_first(args, kernel, sizes=None) -> tuple[dict, int] | None:
    """Verify before compiling or running; returns the refusal (JSON payload, exit code), or None
    to go on. A violated obligation is refused (1) unless --no-verify; an unknown or vacuous one
    (3) unless --allow-unknown, naming each with its line and the reason the verifier gave."""
    if getattr(args, "no_verify", False):
        print("argus: WARNING: --no-verify: running a kernel whose invariants were NOT checked "
              "(bounds, races, barriers, tags)", file=sys.stderr)
        return None
    try:
        from argus_verify import smt
        verify = smt.verify
    except (ImportError, AttributeError):
        print("argus: note: the verifier is not available in this build; not verified", file=sys.stderr)
        return None
    status = StatusLine(sys.stderr, "auto", f"argus {args.command}: verifying {args.file}")
    try:
        report = verify(kernel, timeout_s=getattr(args, "timeout", 10.0), shapes=sizes, jobs=default_jobs(),
                        progress=status)
    finally:
        status.close()
    args.source_report = report  # `compile --validate` compares the PTX audit with it
    if report.violations():
        broken = unreproduced(kernel, report, args.file)
        if broken:
            if not args.json:
                print(report.render_text(), file=sys.stderr)
                print(f"argus: {witness_error_text(broken)}", file=sys.stderr)
            return {"status": "error", "kind": "internal", "message": witness_error_text(broken)}, 4
        if not args.json:
            print(report.render_text(), file=sys.stderr)
            print(f"argus: refusing to {args.command} {args.file}: a verification obligation is violated "
                  "(use --no-verify to override)", file=sys.stderr)
        return {"status": "refused", "reason": "verification failed", "verification": report.to_json()}, 1
    if not args.json:
        c = report.counts()
        vacuous = f", {c['vacuous']} vacuous" if c["vacuous"] else ""
        print(f"argus: verified {kernel.name}: {c['proved']} obligations proved, {c['warning']} "
              f"performance warnings, {c['unknown']} unknown{vacuous} (argus verify for details)", file=sys.stderr)
    return refuse_unproved(args, report)


def unreproduced(kernel, report, path) -> list:
    """The violations whose witness does not reproduce in the interpreter (argus_verify.replay):
    each is a bug of Argus, not of the kernel."""
    if not report.violations():
        return []
    from argus_verify.replay import NOT_REPRODUCED, reproduce

    out = []
    for r in report.violations():
        try:
            check = reproduce(kernel, r, path)
        except Exception:  # noqa: BLE001 - a replay that cannot run checks nothing
            continue
        if check["status"] == NOT_REPRODUCED:
            out.append((r, check))
    return out


def witness_error_text(broken) -> str:
    lines = []
    for r, check in broken:
        lines.append(f"the {r.obligation} witness at {r.location.file}:{r.location.line} does not reproduce in "
                     f"the interpreter: {check['text']}")
    return ("internal error: " + "; ".join(lines) + ". This is a bug in Argus (the verifier's counterexample "
            "is wrong), not in the kernel; please report it")


def internal_witness_error(args, report, broken) -> int:
    if args.json:
        print(json.dumps({"status": "error", "kind": "internal", "message": witness_error_text(broken),
                          "results": report.to_json()}, indent=2, default=str))
    else:
        print(report.render_text())
        print(f"argus: {witness_error_text(broken)}", file=sys.stderr)
    return 4


def refuse_unproved(args, report) -> tuple[dict, int] | None:
    """Unknown or vacuous obligations: the refusal (3), or None with --allow-unknown; both name
    each obligation with its place and the verifier's reason."""
    unproved = report.unknowns() + report.vacuous()
    if not unproved:
        return None
    if args.allow_unknown:
        if not args.json:
            print("argus: warning: --allow-unknown: going on although these obligations are not proved:",
                  *unproved_lines(report), sep="\n", file=sys.stderr)
        return None
    if not args.json:
        print(f"argus: refusing to {args.command} {args.file}: these obligations are not proved:",
              *unproved_lines(report), "  (use --allow-unknown to go on anyway)", sep="\n", file=sys.stderr)
    unproved_json = [{"obligation": r.obligation, "status": r.status, "line": r.location.line, "reason": r.message}
                     for r in unproved]
    return {"status": "refused", "reason": "obligations not proved", "unproved": unproved_json,
            "verification": report.to_json()}, 3


def unproved_lines(report) -> list[str]:
    """Each unknown obligation with its place and the verifier's reason; the vacuous ones, which
    share the launch's reason, one line per reason."""
    lines = [f"  {r.location}: {r.obligation} unknown: {r.message}" for r in report.unknowns()]
    lines += [f"  {report.file}: vacuous: {message} [{', '.join(names)}]"
              for message, names in report.vacuous_groups().items()]
    return lines


def refuse(args, refusal) -> int:
    """The refusal's exit code; its JSON with --json (the text went to stderr already)."""
    payload, code = refusal
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    return code


def prepare_to_run(args):
    """The kernel, its reference, the sizes, and the verifier's refusal (None to go on)."""
    from argus_verify.reference import load_reference

    k = load_kernel(args)
    ref = load_reference(args.file)
    sizes = resolve_sizes(args, k, ref)
    return k, ref, sizes, verify_first(args, k, sizes)


def cmd_run(args) -> int:
    from argus_verify.reference import compute_reference, make_inputs, output_error
    from argus_verify.runtime.measure import output_tolerance

    k, ref, sizes, refused = prepare_to_run(args)
    if refused:
        return refuse(args, refused)
    backend = args.backend
    if backend in ("auto", "cuda"):
        from argus_verify.runtime.cuda import cuda_available

        if cuda_available():
            backend = "cuda"
        elif backend == "cuda":
            raise UsageError("--backend cuda: no GPU or pycuda here (install the 'cuda' extra on a GPU "
                             "machine)")
        else:
            backend = "interp"
            if not args.json:
                print("argus: no GPU here: running on the numpy interpreter", file=sys.stderr)
    rng = np.random.default_rng(args.seed)
    inputs = make_inputs(k, sizes, rng, ref)
    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}
    t0 = time.perf_counter()
    if backend == "cuda":
        from argus_verify.pipeline import run_cuda

        outputs = run_cuda(k, arrays, sizes, scalars)
    else:
        from argus_verify.runtime.interp import run

        outputs = run(k, arrays, sizes, scalars)
    elapsed = time.perf_counter() - t0
    result = {"status": "no-reference", "file": args.file, "kernel": k.name, "backend": backend,
              "sizes": sizes, "seconds": round(elapsed, 4), "outputs": {}}
    lines = [f"{args.file}: ran {k.name} on {backend} with {', '.join(f'{a}={b}' for a, b in sizes.items())} "
             f"({elapsed:.2f} s)"]
    code = 0
    if ref is None:
        lines.append("  no reference file (NAME.ref.py): outputs not checked")
    else:
        from argus_verify import ir

        shapes = ir.tensor_shapes(k, sizes)
        expected = compute_reference(ref, inputs, {t.name: shapes[t.name] for t in k.outputs})
        ok_all = True
        for out in k.outputs:
            if out.name not in expected:
                raise ArgusError(f"the reference returns no '{out.name}'")
            err = output_error(outputs[out.name], expected[out.name])
            tol = output_tolerance(ref, out.dtype)  # 0: an integer output compares exactly
            max_abs = float(np.nanmax(np.abs(outputs[out.name].astype(np.float64) - expected[out.name]))) \
                if outputs[out.name].size else 0.0
            unwritten = int(np.isnan(outputs[out.name]).sum() - np.isnan(expected[out.name]).sum())
            ok = err <= tol
            ok_all &= ok
            result["outputs"][out.name] = {"rel_error": err, "max_abs_error": max_abs, "tolerance": tol,
                                           "pass": ok, "nan_elements": max(unwritten, 0)}
            within = f"tolerance {tol:.0e}" if tol else "exact"
            lines.append(f"  {out.name}: rel error {err:.3e} ({within}), max abs error "
                         f"{max_abs:.3e}{f', {unwritten} elements NaN/unwritten' if unwritten > 0 else ''}"
                         f": {'PASS' if ok else 'FAIL'}")
        result["status"] = "pass" if ok_all else "fail"
        lines.append("PASS" if ok_all else "FAIL")
        code = 0 if ok_all else 1
    emit(args, result, "\n".join(lines))
    return code


def cmd_verify(args) -> int:
    """Every kernel of the file (as `audit`), or the one --kernel names. With several kernels the
    text gives each its heading and the JSON (the same flat list of results) carries each result's
    "kernel"; the exit code is the worst: 1 if any kernel has a violation, else 3 for an unknown."""
    from argus_verify import smt

    kernels = load_kernels(args)
    several = len(kernels) > 1
    for k, given in kernels:
        check_requires(args, k, given, "--shape")
    jobs = args.jobs if args.jobs is not None else default_jobs()
    payload, code = [], 0
    for i, (k, given) in enumerate(kernels):
        label = f"argus verify {args.file}" + (f" ({k.name}, kernel {i + 1} of {len(kernels)})" if several else "")
        status = StatusLine(sys.stderr, args.progress, label)
        try:
            report = smt.verify(k, timeout_s=args.timeout, shapes=given or None, jobs=jobs, progress=status)
        finally:
            status.close()
        broken = unreproduced(k, report, args.file)
        if broken:
            return internal_witness_error(args, report, broken)
        if several and not args.json:
            print(f"{'' if i == 0 else chr(10)}== kernel {k.name} ({i + 1} of {len(kernels)}) ==", flush=True)
        replays = []
        if args.replay:
            from argus_verify.replay import replay_all

            if not args.json:  # the verifier's report first, whatever the replays do
                print(report.render_text(), flush=True)
            replays = replay_all(k, report, args.file)
        if args.json:
            # one shape with and without --replay: the list of results, each violated one carrying its replay
            entries = report.to_json()
            pending = iter(replays)
            for entry in entries:
                if args.replay and entry.get("status") == "violated":
                    entry["replay"] = next(pending, None)
            payload += [{"kernel": k.name, **e} for e in entries] if several else entries
        else:
            if not args.replay:
                print(report.render_text(), flush=True)
            for r in replays:
                print(r.get("text", ""), flush=True)
        c = report.exit_code
        code = 1 if 1 in (code, c) else max(code, c)
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    elif several:
        print(f"\n{args.file}: verified {len(kernels)} kernels ({', '.join(k.name for k, _ in kernels)}): "
              f"{'all proved' if code == 0 else 'a violation' if code == 1 else 'something unknown'}")
    return code


def cmd_compile(args) -> int:
    from argus_verify.lowering.ptx import lower

    check_output_path(args.output)
    if args.output and same_file(args.output, args.file):
        raise UsageError(f"-o {args.output} is the kernel source itself: writing the PTX there would destroy it; "
                         "give another file name (e.g. one ending in .ptx)")
    if args.validate and args.no_verify:
        raise UsageError("--validate compares the PTX with the source proof, which --no-verify skips: drop one")
    k = load_kernel(args)
    refused = verify_first(args, k)
    if refused:
        return refuse(args, refused)
    lowered = lower(k)
    result = {"status": "ok", "kernel": k.name, "entry": lowered.entry, "bytes": len(lowered.ptx)}
    if args.validate:
        from argus_verify.validate import validate

        source_report = getattr(args, "source_report", None)
        if source_report is None:
            raise UsageError("--validate needs the source proof, and the verifier did not run")
        v = validate(k, source_report, lowered, timeout_s=args.timeout, ptx_name=args.output)
        result["validation"] = v.to_json()
        if v.disagreements():
            message = ("internal error: the PTX Argus emitted disagrees with the source proof (translation "
                       "validation). This is a bug in Argus (the lowering, the verifier or the audit), not in the "
                       "kernel; please report it")
            if args.json:
                print(json.dumps({"status": "error", "kind": "internal", "message": message,
                                  "validation": result["validation"]}, indent=2, default=str))
            else:
                print(v.render_text(), file=sys.stderr)
                print(f"argus: {message}", file=sys.stderr)
            return 4
        if not args.json:
            print(v.render_text(), file=sys.stderr)
    if args.output:
        try:
            Path(args.output).write_text(lowered.ptx)
        except OSError as e:
            raise UsageError(f"cannot write {args.output}: {e.strerror}") from None
        result["output"] = args.output
    else:
        result["ptx"] = lowered.ptx  # --json without -o: the PTX is in the JSON
    if args.stats:
        from argus_verify.lowering import ptxas
        from argus_verify.lowering.ptxas import assemble

        if ptxas.find_ptxas() is None:
            raise UsageError("--stats needs ptxas (the CUDA toolkit), and there is none on PATH, in $CUDA_HOME/bin "
                             "or /usr/local/cuda/bin; install it or leave out --stats")
        stats = assemble(lowered.ptx)
        result["stats"] = {name: {"registers": s.registers, "shared_bytes": s.shared_bytes,
                                  "spill_stores": s.spill_stores, "spill_loads": s.spill_loads,
                                  "stack_frame": s.stack_frame} for name, s in stats.items()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if not args.output:
        print(lowered.ptx)
    else:
        print(f"wrote {args.output} ({len(lowered.ptx)} bytes, entry {lowered.entry})", file=sys.stderr)
    for name, s in result.get("stats", {}).items():
        print(f"{name}: {s['registers']} registers, {s['shared_bytes']} bytes shared, "
              f"{s['spill_stores']} bytes spill stores, {s['spill_loads']} bytes spill loads, "
              f"{s['stack_frame']} bytes stack", file=sys.stderr)
    return 0


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet)
        return os.path.abspath(a) == os.path.abspath(b)


def check_output_path(path: str | None, option: str = "-o/--output") -> None:
    """Fail before the work, not after it: -o must name a file in an existing, writable folder."""
    if path is None:
        return
    if not path.strip():
        raise UsageError(f"{option} is empty: give a file name" +
                         (" (or leave -o out to print the PTX)" if option.startswith("-o") else ""))
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied")


def cmd_bench(args) -> int:
    from argus_verify.runtime.cuda import cuda_available

    k, ref, sizes, refused = prepare_to_run(args)
    if refused:
        return refuse(args, refused)
    if not cuda_available():
        raise UsageError("argus bench needs an NVIDIA GPU and pycuda (the 'cuda' extra); none here")
    from argus_verify.pipeline import bench_report

    result = bench_report(k, sizes, ref, reps=args.reps)
    emit(args, result, result.get("text", json.dumps(result)))
    return 0 if result.get("pass", True) else 1


def cmd_test(args) -> int:
    from argus_verify.cli_test import cmd_test as run_test

    return run_test(args)


def cmd_audit(args) -> int:
    from argus_verify.cli_audit import cmd_audit as run_audit

    return run_audit(args)


COMMANDS = {"check": cmd_check, "ir": cmd_ir, "run": cmd_run, "verify": cmd_verify, "compile": cmd_compile,
            "bench": cmd_bench, "test": cmd_test, "audit": cmd_audit}


def cmd_agent(args) -> int:
    from argus_verify.cli_agent import cmd_agent as run_agent

    return run_agent(args)


COMMANDS["agent"] = cmd_agent


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except ArgparseError as e:
        if "--json" in argv:
            print(json.dumps(error_json(e), indent=2))
        else:
            print(f"{e.usage}argus: error: {e.message}", file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 2
    try:
        validate_options(args)
        if isinstance(getattr(args, "file", None), str) and not args.file.strip():
            raise UsageError(f"the file name is empty: give the {'.cu or .ptx' if args.command == 'audit' else '.arg'} "
                             "file to read")
        with np.errstate(all="ignore"), warnings.catch_warnings():
            # the CLI reports NaN, overflow and wrong values itself; numpy's warnings are noise in its output
            warnings.simplefilter("ignore", RuntimeWarning)
            code = COMMANDS[args.command](args)
    except ArgusError as e:
        return main_error(args, e)
    except KeyboardInterrupt:
        if getattr(args, "json", False):  # --json output stays JSON, whatever happened
            print(json.dumps({"status": "error", "kind": "interrupted", "message": "interrupted"}, indent=2))
        print("argus: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        return main_error(args, UsageError("out of memory: the sizes are too large for this machine; give "
                                           "smaller ones with --shape"))
    except Exception as e:  # a bug in Argus, not in the user's kernel
        if os.environ.get("ARGUS_DEBUG"):
            raise
        if getattr(args, "json", False):  # --json output stays JSON, whatever happened
            print(json.dumps({"status": "error", "kind": "internal", "message": f"{type(e).__name__}: {e}",
                              "note": "a bug in Argus; rerun with ARGUS_DEBUG=1 for the traceback"}, indent=2))
        print(f"argus: internal error: {type(e).__name__}: {e}\n"
              "  this is a bug in Argus; rerun with ARGUS_DEBUG=1 for the traceback", file=sys.stderr)
        return 4
    sys.stdout.flush()
    return code


def main_error(args, e: ArgusError) -> int:
    if getattr(args, "json", False):
        print(json.dumps(error_json(e), indent=2))
    else:
        print(format_error(e), file=sys.stderr)
    # a fault while running the kernel is the kernel's bug (1); anything else is bad input (2)
    return 1 if isinstance(e, ArgusRuntimeError) else 2


def entry() -> None:
    sys.exit(main())
