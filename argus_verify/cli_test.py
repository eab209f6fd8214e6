"""`argus test FILE`: property-based testing of a kernel against its reference with hypothesis.

It searches sizes (1, primes, tile sizes +- 1, declared bounds, the reference's SHAPES, ragged
ones), compile-time constants (the reference's CONSTS = {"NAME": [values]}), input values
(typical, large, ties; NaN and inf where the reference sets NONFINITE = True) and interpreter
schedules; it runs each case on the interpreter, on the PTX simulator (some cases: first and last
block) and on the GPU when there is one, compares each with the reference and with each other,
and shrinks a failure to a minimal case printed with a one-line command that reruns it.
"""

from __future__ import annotations

import json
import sys

EXAMPLE = "argus test specs/vecadd.arg --max-examples 30"


def add_parser(sub, common) -> None:
    """Register `argus test` on the CLI's subparsers (`common` adds FILE, --kernel, --const, --shape,
    --json)."""
    import argparse

    help_ = "search for inputs where the kernel disagrees with its reference (hypothesis), and shrink them"
    sp = sub.add_parser("test", help=help_, description=help_, epilog=f"example:\n  {EXAMPLE}",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    common(sp)
    sp.add_argument("--max-examples", default="50", help="cases to try (default 50)")
    sp.add_argument("--search-seed", default="0", help="hypothesis's seed: the same seed tries the same cases")
    sp.add_argument("--values", choices=("typical", "large", "ties", "nonfinite"), help="pin the input kind")
    sp.add_argument("--seed", default=None, help="pin the input seed, 0 .. 2**32-1")
    sp.add_argument("--schedule", help="pin the interpreter schedule (runtime/schedules.py), e.g. warps")
    sp.add_argument("--ptxsim", choices=("auto", "always", "never"), default="auto",
                    help="run the PTX simulator: on some cases (auto), every case, or none")
    sp.add_argument("--backend", choices=("auto", "interp"), default="auto",
                    help="auto: also on the GPU when there is one")


def cmd_test(args) -> int:
    from argus_verify.cli import UsageError, parse_assignments
    from argus_verify.reference import load_reference
    from argus_verify.testing.check import KernelFamily, reproducer, search

    max_examples = _int(args.max_examples, "--max-examples", 1, 100_000, UsageError)
    search_seed = _int(args.search_seed, "--search-seed", 0, 2**32 - 1, UsageError)
    consts = parse_assignments(args.const, "compile-time parameter")
    family = KernelFamily(args.file, args.kernel, consts)
    k = family.get({})  # checks the file and the constants (exit 2 on bad input)
    sizes = parse_assignments(args.shape, "shape")
    unknown = [s for s in sizes if s not in k.ir.sizes]
    if unknown:
        raise UsageError(f"kernel {k.name} has no size '{unknown[0]}' (its sizes: {', '.join(k.ir.sizes) or 'none'})")
    bad = [s for s, v in sizes.items() if not 0 < v < 2**31]
    if bad:
        raise UsageError(f"size {bad[0]} must be from 1 to 2**31 - 1, got {sizes[bad[0]]}")
    if args.schedule:
        from argus_verify.runtime.schedules import Schedule

        # an unknown schedule, or one that does not fit the kernel's block, is a usage error here, not mid-search
        Schedule.parse(args.schedule).check_block(k.ir.block, args.schedule)
    ref = load_reference(args.file)
    gpu = False
    if args.backend == "auto":
        from argus_verify.runtime.cuda import cuda_available

        gpu = cuda_available()
    pinned = {"consts": consts or None, "sizes": sizes or None, "values": args.values,
              "seed": None if args.seed is None else _int(args.seed, "--seed", 0, 2**32 - 1, UsageError),
              "schedule": args.schedule, "ptxsim": {"auto": None, "always": True, "never": False}[args.ptxsim]}
    if pinned["values"] == "nonfinite" and not getattr(ref, "NONFINITE", False):
        raise UsageError("--values nonfinite: the reference does not define NaN and inf inputs (NONFINITE = True "
                         "in its file)")
    from hypothesis.errors import Unsatisfiable

    from argus_verify.printer import fmt_iexpr

    try:
        result = search(family, ref, max_examples=max_examples, search_seed=search_seed, gpu=gpu,
                        **{n: v for n, v in pinned.items() if v is not None})
    except Unsatisfiable:  # every drawn case broke a `requires` (or the tensor limit) under the pinned sizes
        pins = ", ".join(f"{n}={v}" for n, v in (pinned.get("sizes") or {}).items())
        rules = "; ".join(fmt_iexpr(r) for r in k.ir.requires) or "none"
        raise UsageError(f"no sizes to test: {'with ' + pins + ', ' if pins else ''}the kernel's requires "
                         f"({rules}) admit no case the search could draw") from None
    ran = ", ".join(f"{n} {c}" for n, c in result.ran.items())
    payload = {"status": "pass" if result.failure is None else "fail", "file": args.file, "kernel": k.name,
               "examples": result.examples, "ran": result.ran, "reference": ref is not None}
    if ref is None and not args.json:
        print("argus: no reference file (NAME.ref.py): only comparing the executors with each other", file=sys.stderr)
    if result.failure is None:
        text = f"{args.file}: {k.name}: {result.examples} cases passed ({ran})"
        code = 0
    else:
        case = result.failure
        command = reproducer(args.file, case, args.kernel)
        payload.update({"case": case.to_json(), "problems": result.problems, "reproduce": command})
        text = "\n".join([f"{args.file}: {k.name}: FAIL after {result.examples} cases; minimal failing case:",
                          f"  {case.describe()}", *(f"  {p}" for p in result.problems), f"reproduce: {command}"])
        code = 1
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)
    return code


def _int(text: str, option: str, lo: int, hi: int, error) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise error(f"{option} must be an integer from {lo} to {hi}, got '{text}'")
    return value
