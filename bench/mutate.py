"""Mutation testing of the specs: does `verify` reject every mutant that the interpreter shows wrong?

    python bench/mutate.py [FILES...] [--sample N --seed S] [--jobs J] [--out DIR]
                           [--timeout 5] [--mutant-timeout 120] [--operators constant,layout,...]

Every spec in specs/*.arg (and any FILES given) is mutated one edit at a time: integer constants,
layout shapes and strides, arithmetic operators, comparisons, loop bounds, cdiv, masks, where=
guards, padding values, dropped barrier()/wait()/commit(), swapped view indices and tag(..)[k]
indices. Only mutants the front end accepts count. Each one is verified (`smt.verify`) and run
in the numpy interpreter on several shapes (the reference's SHAPES, ragged and tiny ones, one
input set of all-negative floats, and the interpreter's other schedules when it has them) and
compared with the spec's reference. Classes:

    both            verify rejects (violation or unknown) and the interpreter shows a wrong result
    verifier-only   verify rejects, the interpreter's results are right
    warning-only    verify proves, with a new performance warning; results right
    false-proof     verify proves, the interpreter shows a wrong result (the worst defect)
    neither         equivalent-looking: nobody tells it from the original
    error           the tool, the verifier or the interpreter crashed or ran out of time

Output under --out: mutants.jsonl (one object per mutant), summary.json and report.txt (the
tables, every false proof with its diff, and the verifier-only kills grouped by cause).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import inspect
import json
import multiprocessing
import random
import re
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

import attrs
import numpy as np
from lark import Token, Tree

from argus_verify import ir, semantics, smt
from argus_verify.diagnostics import ArgusError, ArgusRuntimeError
from argus_verify.frontend import compile_source, parse
from argus_verify.reference import compute_reference, default_sizes, load_reference, make_inputs
from argus_verify.runtime import interp
from argus_verify.runtime.measure import rel_error, tolerance

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("both", "verifier-only", "warning-only", "false-proof", "neither", "error")
OPERATORS = ("constant", "layout", "arith", "compare", "loop-bound", "cdiv", "mask", "where", "padding",
             "sync-dropped", "index-swap", "special", "accumulate", "late")
# `late`: the mbarrier call and its argument that a fault from iteration LATE_ITERATION on changes
LATE_CALLS = {"mbarrier_wait": "{} + (({}) >= 40)", "mbarrier_expect_tx": "{} + 16 * (({}) == 40)"}
# the execution-point specials, each replaced by the others of its kind ("special")
SPECIAL_SWAPS = {"thread_id": ("lane_id", "warp_id"), "lane_id": ("thread_id",), "warp_id": ("lane_id",),
                 "x": ("y",), "y": ("x",), "z": ("x",)}
SPEC_STATEMENTS = ("tag_decl", "contract_decl", "requires_stmt", "tagfn_def", "tagfn_inline")  # the specification
SYNC_CALLS = ("barrier", "wait", "commit")
PADDINGS = ("0.0", "-inf", "inf", "1.0")
EXTRA_SCHEDULES = ("reverse", "random:1", "random:2")  # if the interpreter does not list its own


# -- reduction contract lines -------------------------------------------------------------------

def strip_contracts(text: str) -> str:
    """Comment out `contract ...` lines (and their bracketed continuation lines) for a front end
    that does not parse them yet; line and column numbers stay as they were."""
    out, depth = [], 0
    for line in text.splitlines(keepends=True):
        body = line.lstrip()
        if depth > 0 or re.match(r"contract\b", body):
            indent = len(line) - len(body)
            code = body.split("#", 1)[0]
            depth = max(0, depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"))
            line = line[:indent] + "#" + body[1:] if body.strip() else line
        out.append(line)
    return "".join(out)


@functools.cache
def front_end_parses_contracts() -> bool:
    probe = ("kernel probe(x: f32[N]) -> out: f32[N]:\n    grid(1)\n    block(32)\n    tag x[i] = (i,)\n"
             "    tag out[i] = (i,) once\n    contract out[i] = x[i]\n"
             "    xs = load(x[0 : 32], tv=(32, 1):(1, 0), mask=True)\n    store(out[0 : 32], xs, mask=True)\n")
    try:
        compile_source(probe, "<contract-probe>")
    except ArgusError:
        return False
    return True


def front_end_text(text: str) -> str:
    """The text to give today's front end: contract lines stripped until it parses them."""
    return text if front_end_parses_contracts() else strip_contracts(text)


# -- mutants ------------------------------------------------------------------------------------

@attrs.frozen
class Edit:
    start: int
    end: int
    replacement: str
    operator: str


@attrs.frozen
class Mutant:
    spec: str  # path of the spec, as given
    index: int  # position among the spec's mutants (stable for one source text)
    operator: str
    line: int
    before: str
    after: str
    text: str  # the whole mutated source
    diff: str  # against the source it was made from (the file may change while a study runs)

    @property
    def name(self) -> str:
        return f"{Path(self.spec).stem}#{self.index}"

    @property
    def description(self) -> str:
        return f"line {self.line}: {self.operator}: {self.before!r} -> {self.after!r}"


def unified_diff(original: str, mutated: str) -> str:
    lines = difflib.unified_diff(original.splitlines(), mutated.splitlines(), "original", "mutant", n=0,
                                 lineterm="")
    return "\n".join(list(lines)[2:])


def span(node) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.start_pos, node.end_pos
    return node.meta.start_pos, node.meta.end_pos


def is_atom(node) -> bool:
    return isinstance(node, Token) or node.data in ("name", "int_lit", "float_lit", "call", "subscript",
                                                    "attribute", "tuple", "tuple1")


class SiteFinder:
    """Walks a parse tree and collects the edits of every mutation operator."""

    def __init__(self, text: str):
        self.text = text
        self.edits: list[Edit] = []

    def src(self, node) -> str:
        a, b = span(node)
        return self.text[a:b]

    def paren(self, node) -> str:
        return self.src(node) if is_atom(node) else f"({self.src(node)})"

    def shifted(self, node, delta: int) -> str:
        """`node + delta` (computed when node is an integer literal)."""
        if isinstance(node, Tree) and node.data == "int_lit":
            return str(int(str(node.children[0]).replace("_", ""), 0) + delta)
        return f"{self.paren(node)} {'+' if delta > 0 else '-'} {abs(delta)}"

    def add(self, node, replacement: str, operator: str) -> None:
        a, b = span(node)
        if replacement != self.text[a:b]:
            self.edits.append(Edit(a, b, replacement, operator))

    def find(self, tree: Tree) -> list[Edit]:
        for item in tree.children:
            if isinstance(item, Tree) and item.data == "kernel":
                self.kernel(item)
        return self.edits

    def kernel(self, k: Tree) -> None:
        for child in k.children:
            if isinstance(child, Tree) and child.data == "const_params":
                for p in child.children:
                    self.walk(p.children[1])
            elif isinstance(child, Tree) and child.data == "suite":
                self.walk(child)

    def walk(self, node, in_layout: bool = False) -> None:
        if not isinstance(node, Tree) or node.data in SPEC_STATEMENTS:
            return
        handler = getattr(self, f"at_{node.data}", None)
        if handler is not None:
            handler(node, in_layout)
        in_layout = in_layout or node.data == "layout"
        for child in node.children:
            self.walk(child, in_layout)

    # integer constants (outside layout literals, which the layout operator covers)
    def at_int_lit(self, node, in_layout):
        if not in_layout:
            for value in int_variants(str(node.children[0])):
                self.add(node, value, "constant")

    # layout literals: every leaf of the shape and of the stride, and swapped neighbours
    def at_layout(self, node, _in_layout):
        shape, stride = node.children
        for part, kind in ((shape, "shape"), (stride, "stride")):
            for leaf in layout_leaves(part):
                for value in self.leaf_variants(leaf, kind):
                    self.add(leaf, value, "layout")
            for tup in layout_tuples(part):
                for a, b in zip(tup.children, tup.children[1:], strict=False):
                    self.swap(a, b, "layout")

    def leaf_variants(self, leaf, kind: str) -> list[str]:
        if isinstance(leaf, Tree) and leaf.data == "int_lit":
            values = int_variants(str(leaf.children[0]))
            zero = str(leaf.children[0]) in ("0", "0b0", "0x0")
            return values + (["1"] if zero else ["0"]) * (kind == "stride")
        e = self.paren(leaf)
        return [f"{e} + 1", f"{e} - 1", f"{e} * 2", f"{e} // 2"]

    def at_binop(self, node, _in_layout):
        op = node.children[1]
        for new in {"+": ("-", "*"), "-": ("+",), "*": ("+",)}.get(str(op), ()):
            self.add(op, new, "arith")

    def at_compare(self, node, _in_layout):
        op = node.children[1]
        new = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}[str(op)]
        self.add(op, new, "compare")

    def at_call(self, node, _in_layout):
        fn = node.children[0]
        name = self.src(fn)
        swaps = {"max": ("min",), "min": ("max",), "reduce_max": ("reduce_min",), "reduce_min": ("reduce_max",),
                 "reduce_sum": ("reduce_max",)}
        for new in swaps.get(name, ()):
            self.add(fn, new, "arith")
        args = call_args(node)
        if name in SYNC_CALLS:
            return
        if name == "cdiv" and len(args) == 2:
            self.add(node, f"{self.paren(args[0])} // {self.paren(args[1])}", "cdiv")
        self.kwargs(node, name)

    # thread_id / lane_id / warp_id swapped, block_id.x <-> block_id.y (a kernel's indexing mixes
    # them up: the verifier must tell which)
    def at_name(self, node, _in_layout):
        name = str(node.children[0])
        if name in ("thread_id", "lane_id", "warp_id"):
            for new in SPECIAL_SWAPS[name]:
                self.add(node, new, "special")

    def at_attribute(self, node, _in_layout):
        base, attr = node.children
        if isinstance(base, Tree) and base.data == "name" and str(base.children[0]) in ("block_id", "num_blocks"):
            for new in SPECIAL_SWAPS.get(str(attr), ()):
                self.add(node, f"{base.children[0]}.{new}", "special")

    def at_expr_stmt(self, node, _in_layout):
        call = node.children[0]
        if isinstance(call, Tree) and call.data == "call" and self.src(call.children[0]) in SYNC_CALLS:
            self.add(node, "pass", "sync-dropped")

    def kwargs(self, call: Tree, name: str) -> None:
        kws = {str(k.children[0]): k for k in call_kwargs(call)}
        mask = kws.get("mask")
        if mask is not None and self.src(mask.children[1]) == "True":
            self.add(mask.children[1], "False", "mask")
        if "where" in kws:
            self.drop_kwarg(call, kws["where"])
        if "other" in kws:
            for pad in PADDINGS:
                if normal_float(self.src(kws["other"].children[1])) != normal_float(pad):
                    self.add(kws["other"].children[1], pad, "padding")
        elif name == "load" and mask is not None and self.src(mask.children[1]) == "True":
            end = span(call.children[1])[1]
            for pad in ("-inf", "1.0"):
                self.edits.append(Edit(end, end, f", other={pad}", "padding"))

    def drop_kwarg(self, call: Tree, kw: Tree) -> None:
        items = call.children[1].children
        i = items.index(kw)
        start = span(items[i - 1])[1] if i > 0 else span(kw)[0]
        end = span(kw)[1] if i > 0 else span(items[i + 1])[0]
        self.edits.append(Edit(start, end, "", "where"))

    def at_suite(self, node, _in_layout):
        """An accumulation turned into an assignment (`accumulate`): the accumulator's start before a
        loop is dropped and `acc = acc + e` in the loop becomes `acc = e` (`max(acc, e)`: `e`;
        `mma(a, b, acc)`: `mma(a, b, <the start>)`), so that only the last iteration reaches what follows.
        One edit spans both statements."""
        stmts = list(node.children)
        for i, loop in enumerate(stmts):
            if not (isinstance(loop, Tree) and loop.data == "for_stmt"):
                continue
            for st in loop.children[3].children:
                if not (isinstance(st, Tree) and st.data == "assign"):
                    continue
                name = str(st.children[0])
                inits = [x for x in stmts[:i] if _assigns(x, name)]
                body = [x for x in loop.children[3].children if _assigns(x, name)]
                new = self.assignment_of(st.children[1], name, inits[-1].children[1] if inits else None)
                if not inits or len(body) != 1 or new is None:
                    continue
                a, b = span(inits[-1])
                line_start = self.text.rfind("\n", 0, a) + 1
                line_end = self.text.index("\n", b) + 1
                s0, s1 = span(st.children[1])
                self.edits.append(Edit(line_start, s1, self.text[line_end:s0] + new, "accumulate"))

    def assignment_of(self, rhs, name: str, init) -> str | None:
        """The right-hand side that assigns what `rhs` accumulates into `name`, or None."""
        if isinstance(rhs, Tree) and rhs.data == "binop" and str(rhs.children[1]) in ("+", "*"):
            left, right = rhs.children[0], rhs.children[2]
            for mine, other in ((left, right), (right, left)):
                if self.src(mine) == name:
                    return self.src(other)
        if isinstance(rhs, Tree) and rhs.data == "call":
            fn, args = self.src(rhs.children[0]), call_args(rhs)
            if fn in ("max", "min") and len(args) == 2:
                for mine, other in ((args[0], args[1]), (args[1], args[0])):
                    if self.src(mine) == name:
                        return self.src(other)
            if fn == "mma" and len(args) >= 3 and self.src(args[2]) == name and init is not None:
                a, b = span(args[2])
                r0 = span(rhs)[0]
                return self.text[r0:a] + self.src(init) + self.text[b:span(rhs)[1]]
        return None

    def at_for_stmt(self, node, _in_layout):
        self.late(node)
        args = [a.children[0] for a in node.children[2].children] if node.children[2] is not None else []
        if not args:
            return
        stop = args[0] if len(args) == 1 else args[1]
        for delta in (1, -1):
            self.add(stop, self.shifted(stop, delta), "loop-bound")
            if len(args) == 1:  # range(stop) -> range(+-1, stop)
                at = span(stop)[0]
                self.edits.append(Edit(at, at, f"{delta}, ", "loop-bound"))
            else:
                self.add(args[0], self.shifted(args[0], delta), "loop-bound")

    def late(self, loop: Tree) -> None:
        """A protocol fault that shows only from iteration 40 of a loop on (`late`): a wait's parity
        flipped from then on, an expect_tx over-counting at that one iteration. Runs of a few trip
        counts never reach it."""
        var = str(loop.children[0])
        for call in loop.children[3].iter_subtrees_topdown():
            if call.data != "call" or self.src(call.children[0]) not in LATE_CALLS:
                continue
            args = call_args(call)
            if len(args) == 2:
                self.add(args[1], LATE_CALLS[self.src(call.children[0])].format(self.paren(args[1]), var), "late")

    def at_subscript(self, node, _in_layout):
        base, subs = node.children
        items = subs.children
        if isinstance(base, Tree) and base.data == "call" and self.src(base.children[0]) in ("tag", "coord"):
            index = items[0].children[0] if len(items) == 1 else None
            if isinstance(index, Tree) and index.data == "int_lit":
                k = int(str(index.children[0]), 0)
                for other in range(3):
                    if other != k:
                        self.add(items[0], str(other), "index-swap")
            return
        if self.src(base) in ir.DTYPE_BYTES or len(items) < 2:
            return
        for a, b in zip(items, items[1:], strict=False):
            self.swap(a, b, "index-swap")
            starts = (self.slice_start(a), self.slice_start(b))
            if None not in starts:
                self.swap(*starts, "index-swap", also=(self.slice_stop_base(a), self.slice_stop_base(b)))

    def slice_start(self, item):
        return item.children[0] if item.data == "sub_slice" and item.children[0] is not None else None

    def slice_stop_base(self, item):
        """In `S : S + E` the S of the stop (swapped along with the start)."""
        stop = item.children[1]
        if isinstance(stop, Tree) and stop.data == "binop" and str(stop.children[1]) == "+" and \
                self.src(stop.children[0]) == self.src(item.children[0]):
            return stop.children[0]
        return None

    def swap(self, a, b, operator: str, also=(None, None)) -> None:
        """Exchange the texts of nodes a and b (and of the pair `also` with them: the S of `S : S + E`)."""
        pairs = [(a, b)] + ([also] if None not in also else [])
        pieces = sorted([(span(x), self.src(y)) for x, y in pairs] + [(span(y), self.src(x)) for x, y in pairs])
        lo, hi = pieces[0][0][0], pieces[-1][0][1]
        out, pos = [], lo
        for (s, e), replacement in pieces:
            out.append(self.text[pos:s] + replacement)
            pos = e
        if "".join(out) != self.text[lo:hi]:
            self.edits.append(Edit(lo, hi, "".join(out), operator))


def _assigns(stmt, name: str) -> bool:
    return isinstance(stmt, Tree) and stmt.data == "assign" and str(stmt.children[0]) == name


def call_args(call: Tree) -> list:
    if call.children[1] is None:
        return []
    return [a.children[0] for a in call.children[1].children if a.data == "arg"]


def call_kwargs(call: Tree) -> list:
    if call.children[1] is None:
        return []
    return [a for a in call.children[1].children if a.data == "kwarg"]


def layout_leaves(node) -> list:
    if isinstance(node, Tree) and node.data in ("tuple", "tuple1"):
        return [leaf for c in node.children for leaf in layout_leaves(c)]
    return [node]


def layout_tuples(node) -> list:
    if isinstance(node, Tree) and node.data in ("tuple", "tuple1"):
        return [node] + [t for c in node.children for t in layout_tuples(c)]
    return []


def int_variants(literal: str) -> list[str]:
    v = int(literal.replace("_", ""), 0)
    fmt = {"0b": bin, "0x": hex}.get(literal[:2].lower(), str)
    values = [v + 1, v - 1, v * 2, v // 2]
    return list(dict.fromkeys(fmt(x) for x in values if x >= 0 and x != v))


def normal_float(text: str) -> float | str:
    try:
        return float(text.replace(" ", ""))
    except ValueError:
        return text


def mutants_of(path: str | Path, operators: tuple = OPERATORS) -> list[Mutant]:
    """Every single-edit mutant of the spec at `path` (type-checked or not), without duplicates."""
    original = Path(path).read_text()
    tree = parse(front_end_text(original), str(path))
    edits = [e for e in SiteFinder(original).find(tree) if e.operator in operators]
    out, seen = [], {original}
    for e in sorted(edits, key=lambda e: (e.start, e.operator, e.end, e.replacement)):
        text = original[:e.start] + e.replacement + original[e.end:]
        if text in seen:
            continue
        seen.add(text)
        line = original.count("\n", 0, e.start) + 1
        out.append(Mutant(str(path), len(out), e.operator, line, original[e.start:e.end], e.replacement, text,
                          unified_diff(original, text)))
    return out


def type_check(mutant: Mutant) -> ir.Kernel | None:
    """The mutant's kernel if the front end accepts it, else None."""
    try:
        return compile_source(front_end_text(mutant.text), f"{mutant.spec}#{mutant.index}")
    except ArgusError:
        return None


# -- the two oracles ------------------------------------------------------------------------------

def warning_keys(report: smt.VerifyReport) -> set:
    return {(r.obligation, r.location.line) for r in report.results if r.status == "warning"}


def verifier_verdict(kernel: ir.Kernel, baseline_warnings: set, timeout_s: float, checks=None) -> dict:
    """Proved (exit code 0, warnings allowed), violated (1), unknown (3) or `exit N`: anything but
    proved rejects the kernel. Findings are the results neither proved nor warnings. `checks`: only
    these obligations (--checks)."""
    t0 = time.perf_counter()
    report = smt.verify(kernel, timeout_s=timeout_s, checks=checks)
    findings = [r for r in report.results if r.status not in ("proved", "warning")]
    sizes = [dict(r.witness["sizes"]) for r in findings if r.witness and r.witness.get("sizes")]
    return {"status": {0: "proved", 1: "violated", 3: "unknown"}.get(report.exit_code, f"exit {report.exit_code}"),
            "findings": [{"obligation": r.obligation, "status": r.status, "line": r.location.line if r.location else 0,
                          "message": r.message} for r in findings],
            "witness_sizes": list({tuple(sorted(x.items())): x for x in sizes}.values()),
            "new_warnings": sorted(f"{o}@{n}" for o, n in warning_keys(report) - baseline_warnings),
            "seconds": round(time.perf_counter() - t0, 3)}


@attrs.frozen
class Trial:
    """One interpreter run: sizes, an input variant and a schedule (None: the interpreter's default)."""

    sizes: dict
    inputs: str = "normal"  # "negative": every float input -|x| - 1; "witness": normal, at a witness's sizes
    schedule: str | None = None

    def label(self) -> str:
        extra = "".join(f", {x}" for x in (self.inputs if self.inputs != "normal" else None, self.schedule) if x)
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items()) + extra


def interpreter_trials(kernel: ir.Kernel, ref, quick: bool = False) -> list[Trial]:
    """The reference's SHAPES, halved, an eighth (both odd, so ragged against power-of-two tiles),
    all-ones and doubled plus one; the eighth again with negative inputs, and the halved one (big
    enough for several loop iterations) with every other schedule the interpreter offers.
    `quick`: the halved and the eighth shapes, and one other schedule."""
    base = default_sizes(kernel, ref) or {s: 64 for s in kernel.sizes}
    half = {s: v // 2 | 1 for s, v in base.items()}
    small = {s: (v // 8 + 3) | 1 for s, v in base.items()}
    schedules = interpreter_schedules()
    if quick:
        return [Trial(half), Trial(small)] + [Trial(half, schedule=s) for s in schedules[:1]]
    shapes = [base, half, small, {s: 1 for s in base}, {s: 2 * v + 1 for s, v in base.items()}]
    trials = [Trial(s) for s in {tuple(s.items()): s for s in shapes}.values()]
    if not hasattr(ref, "make_inputs"):
        trials.append(Trial(small, "negative"))
    return trials + [Trial(half, schedule=s) for s in schedules]


@functools.cache
def interpreter_schedules() -> tuple:
    """Schedules other than lockstep, if `runtime.interp.run` takes a `schedule` argument."""
    if "schedule" not in inspect.signature(interp.run).parameters:
        return ()
    return tuple(s for s in getattr(interp, "SCHEDULES", EXTRA_SCHEDULES) if s != "lockstep")


def witness_trials(verifier: dict, limit: int = 1 << 23) -> list[Trial]:
    """The sizes of the verifier's witnesses (at most two), where running them is cheap enough."""
    out = []
    for sizes in verifier.get("witness_sizes", []):
        if sizes and int(np.prod(list(sizes.values()))) <= limit and Trial(sizes, "witness") not in out:
            out.append(Trial(sizes, "witness"))
    return out[:2]


def run_trial(kernel: ir.Kernel, ref, trial: Trial, seed: int) -> dict | None:
    """None when the results match the reference, else what went wrong; raises ArgusError when the
    sizes violate a `requires` (the caller skips the trial)."""
    inputs = make_inputs(kernel, trial.sizes, np.random.default_rng(seed), ref)
    if trial.inputs == "negative":
        # rounded back to each tensor's dtype (bf16 inputs live in float32 arrays), as make_inputs does
        dtypes = {t.name: t.dtype for t in kernel.tensors}
        inputs = {k: semantics.round_to(-np.abs(v) - 1, dtypes.get(k, "f32"))
                  if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in inputs.items()}
    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}
    extra = {"schedule": trial.schedule} if trial.schedule else {}
    try:
        outputs = interp.run(kernel, arrays, trial.sizes, scalars, **extra)
    except ArgusRuntimeError as e:
        return {"trial": trial.label(), "fault": str(e).splitlines()[0]}
    expected = compute_reference(ref, inputs)
    for out in kernel.outputs:
        got, want = outputs[out.name].astype(np.float64), expected[out.name]
        tol = getattr(ref, "TOLERANCE", None) or tolerance(out.dtype)
        err = rel_error(got, want)
        scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
        bad = ~np.isclose(got, want, rtol=0, atol=10 * tol * scale)
        if err > tol or bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
            return {"trial": trial.label(), "output": out.name, "rel_error": err, "wrong_elements": int(bad.sum()),
                    "first_wrong": first, "got": None if first is None else float(got[first]),
                    "want": None if first is None else float(want[first])}
    return None


def interpreter_verdict(kernel: ir.Kernel, ref, trials: list[Trial], seed: int) -> dict:
    if ref is None:
        return {"status": "no-reference", "trials": 0}
    ran = 0
    for trial in trials:
        try:
            failure = run_trial(kernel, ref, trial, seed)
        except ArgusError as e:
            if "requires" in str(e):
                continue
            raise
        ran += 1
        if failure is not None:
            return {"status": "fault" if "fault" in failure else "wrong", "trials": ran, **failure}
    return {"status": "ok" if ran else "no-trial", "trials": ran}


def classify(verifier: dict | None, interpreter: dict | None) -> str:
    if not verifier or not interpreter or verifier["status"] == "error" or \
            interpreter["status"] not in ("ok", "wrong", "fault"):
        return "error"
    rejected = verifier["status"] != "proved"
    wrong = interpreter["status"] != "ok"
    if rejected:
        return "both" if wrong else "verifier-only"
    if wrong:
        return "false-proof"
    return "warning-only" if verifier["new_warnings"] else "neither"


# -- evaluating one mutant ---------------------------------------------------------------------------

@attrs.frozen
class Baseline:
    """What the original spec gives, which every mutant of it is compared with."""

    spec: str
    warnings: frozenset
    trials: tuple
    verify_status: str
    interpreter_status: str
    checks: tuple | None = None  # the obligations verified (None: all)


def baseline_of(spec: str, timeout_s: float, seed: int, quick: bool = False, checks=None) -> Baseline:
    kernel = compile_source(front_end_text(Path(spec).read_text()), spec)
    report = smt.verify(kernel, timeout_s=timeout_s, checks=checks)
    ref = reference_of(spec)
    trials = interpreter_trials(kernel, ref, quick)
    status = interpreter_verdict(kernel, ref, trials, seed)["status"]
    verdict = {0: "proved", 1: "violated", 3: "unknown"}.get(report.exit_code, f"exit {report.exit_code}")
    return Baseline(spec, frozenset(warning_keys(report)), tuple(trials), verdict, status, checks)


@functools.cache
def reference_of(spec: str):
    return load_reference(spec)


class MutantTimeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise MutantTimeout()


def evaluate(mutant: Mutant, base: Baseline, timeout_s: float = 5.0, limit_s: float = 120.0, seed: int = 0) -> dict:
    """Verify and run one mutant; every failure is caught and recorded, `limit_s` bounds the whole."""
    record = {"mutant": mutant.name, "spec": mutant.spec, "operator": mutant.operator, "line": mutant.line,
              "before": mutant.before, "after": mutant.after, "description": mutant.description,
              "diff": mutant.diff, "verifier": None, "interpreter": None}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    t0 = time.perf_counter()
    stage = "front end"
    try:
        kernel = type_check(mutant)
        stage = "verify"
        record["verifier"] = verifier_verdict(kernel, base.warnings, timeout_s, base.checks)
        stage = "interpreter"
        trials = list(base.trials) + witness_trials(record["verifier"])
        record["interpreter"] = interpreter_verdict(kernel, reference_of(mutant.spec), trials, seed)
    except MutantTimeout:
        record["error"] = f"{stage}: over the limit of {limit_s:.0f} s per mutant"
    except Exception as e:  # a crash of any stage is a finding, recorded with its traceback
        record["error"] = f"{stage}: {type(e).__name__}: {e}"
        record["traceback"] = traceback.format_exc(limit=-4)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if record["verifier"] is None and "error" in record:
        record["verifier"] = {"status": "error"}
    record["class"] = classify(record["verifier"], record["interpreter"])
    record["seconds"] = round(time.perf_counter() - t0, 3)
    return record


def _evaluate_task(task) -> dict:
    return evaluate(*task)


# -- the study ---------------------------------------------------------------------------------------

def collect(files: list[str], operators: tuple) -> tuple[list[Mutant], dict]:
    """Every type-checked mutant of every file, and per file how many were generated and type-checked."""
    checked, counts = [], {}
    for f in files:
        ms = mutants_of(f, operators)
        typed = [m for m in ms if type_check(m) is not None]
        counts[f] = {"generated": len(ms), "type-checked": len(typed)}
        checked += typed
    return checked, counts


def run_study(mutants: list[Mutant], baselines: dict, args) -> list[dict]:
    """Evaluate the mutants in worker processes, one JSON line per mutant as it finishes. With
    --resume the records already in OUT/mutants.jsonl are kept and their mutants skipped; with
    --deadline the study stops taking mutants after that many seconds (the report says how many ran)."""
    path = args.out / "mutants.jsonl"
    records = []
    if args.resume and path.exists():
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    done = {r["mutant"] for r in records}
    todo = [m for m in mutants if m.name not in done]
    print(f"{len(done)} mutants already evaluated, {len(todo)} to go", flush=True)
    tasks = [(m, baselines[m.spec], args.timeout, args.mutant_timeout, args.seed) for m in todo]
    out = path.open("a" if args.resume else "w")
    ctx = multiprocessing.get_context("fork")
    t0 = time.time()
    with ctx.Pool(args.jobs, maxtasksperchild=20) as pool:
        for i, rec in enumerate(pool.imap_unordered(_evaluate_task, tasks), 1):
            records.append(rec)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            if rec["class"] in ("false-proof", "error") or i % 25 == 0:
                print(f"[{i}/{len(tasks)}] {rec['mutant']} {rec['class']}: {rec['description']}", flush=True)
            if args.deadline and time.time() - t0 > args.deadline:
                print(f"deadline of {args.deadline:g} s reached after {i} of {len(tasks)} mutants", flush=True)
                pool.terminate()
                break
    out.close()
    return sorted(records, key=lambda r: (r["spec"], int(r["mutant"].rsplit("#", 1)[1])))


def tables(records: list[dict], counts: dict) -> str:
    head = f"{'spec':26s} {'gen':>5s} {'typed':>5s} {'run':>5s} " + " ".join(f"{c:>13s}" for c in CLASSES) + \
        f" {'unknown':>7s}"
    lines = [head, "-" * len(head)]
    total = Counter()
    for spec, n in counts.items():
        rs = [r for r in records if r["spec"] == spec]
        c = Counter(r["class"] for r in rs)
        unk = sum(1 for r in rs if (r["verifier"] or {}).get("status") == "unknown")
        c.update({"gen": n["generated"], "typed": n["type-checked"], "run": len(rs), "unknown": unk})
        total.update(c)
        lines.append(row(Path(spec).name, c))
    lines += ["-" * len(head), row("total", total), "",
              f"verifier kills: {total['both'] + total['verifier-only']} (+{total['warning-only']} warning-only), "
              f"interpreter kills: {total['both'] + total['false-proof']}, false proofs: {total['false-proof']}"]
    return "\n".join(lines)


def row(name: str, c: Counter) -> str:
    return f"{name:26s} {c['gen']:5d} {c['typed']:5d} {c['run']:5d} " + " ".join(f"{c[k]:13d}" for k in CLASSES) + \
        f" {c['unknown']:7d}"


def by_operator(records: list[dict]) -> str:
    lines = [f"{'operator':14s} " + " ".join(f"{c:>13s}" for c in CLASSES)]
    for op in OPERATORS:
        c = Counter(r["class"] for r in records if r["operator"] == op)
        if c:
            lines.append(f"{op:14s} " + " ".join(f"{c[k]:13d}" for k in CLASSES))
    return "\n".join(lines)


def kill_groups(records: list[dict]) -> str:
    """Verifier-only and warning-only kills grouped by spec, operator and what the verifier reported."""
    groups = defaultdict(list)
    for r in records:
        if r["class"] in ("verifier-only", "warning-only"):
            v = r["verifier"]
            why = sorted({f"{'' if x['status'] == 'violated' else x['status'] + ' '}{x['obligation']}@{x['line']}"
                          for x in v["findings"]}) or v["new_warnings"]
            groups[(Path(r["spec"]).stem, r["operator"], ", ".join(why))].append(r)
    lines = []
    for (spec, op, why), rs in sorted(groups.items()):
        lines.append(f"{len(rs):4d}  {spec:16s} {op:13s} {why}\n      e.g. {rs[0]['mutant']} {rs[0]['description']}")
    return "\n".join(lines)


# Why the verifier rejects a mutant whose results the interpreter finds right (checked in this order)
EXPLANATIONS = {
    "assertion": "the mutation changed an `assert` line: the kernel computes what it did, and the "
                 "verifier rejects the now-false claim (the interpreter does not evaluate tag claims)",
    "performance": "only bank-conflict / uncoalesced findings: an access pattern the spec's policy forbids; "
                   "the values are right",
    "same-value writes": "race / output-once where several threads store the same value (a guard that picked "
                         "one writer was changed): a data race by CUDA's rules, invisible in the values",
    "dead reads": "uninitialised-read of shared elements that no thread wrote, in lanes whose values the masked "
                  "store then drops",
    "solver limit": "only unknowns: the solver gave up or the analysis could not follow the mutant; never a proof",
    "contract findings": "coverage / operator / contract violations the trials do not show: each one is "
                         "explained by hand in VERIFICATION.md (sizes or values the trials miss, or a check "
                         "stricter than the values)",
}


def explain(record: dict, source_lines: list[str]) -> str:
    """The category (a key of EXPLANATIONS) of a verifier-only kill, or 'unexplained'."""
    v = record["verifier"] or {}
    findings = v.get("findings") or []
    obligations = {f["obligation"] for f in findings if f["status"] == "violated"}
    line = source_lines[record["line"] - 1].strip() if 0 < record["line"] <= len(source_lines) else ""
    if line.startswith("assert"):
        return "assertion"
    if findings and all(f["status"] == "unknown" for f in findings):
        return "solver limit"
    if obligations and obligations <= {"bank-conflict", "uncoalesced"}:
        return "performance"
    if obligations and obligations <= {"race", "output-once"}:
        return "same-value writes"
    if obligations and obligations <= {"uninitialised-read"}:
        return "dead reads"
    if obligations & {"reduction-coverage", "reduction-operator", "output-contract", "tag-assertion", "padding"}:
        return "contract findings"
    return "unexplained"


def explained(records: list[dict]) -> str:
    sources: dict = {}
    groups = defaultdict(list)
    for r in records:
        if r["class"] != "verifier-only":
            continue
        if r["spec"] not in sources:
            sources[r["spec"]] = (ROOT / r["spec"]).read_text().splitlines()
        groups[explain(r, sources[r["spec"]])].append(r)
    lines = []
    for key in list(EXPLANATIONS) + ["unexplained"]:
        rs = groups.get(key)
        if rs:
            lines.append(f"{len(rs):4d}  {key}: {EXPLANATIONS.get(key, 'look at these one by one')}\n"
                         f"      e.g. {rs[0]['mutant']} {rs[0]['description']}")
            if key in ("unexplained", "contract findings"):
                lines += [f"      {r['mutant']} {r['description']}" for r in rs[1:]]
    return "\n".join(lines) or "none"


def false_proofs(records: list[dict]) -> str:
    out = []
    for r in records:
        if r["class"] == "false-proof":
            i = r["interpreter"]
            shown = i.get("fault") or (f"{i['output']}: rel error {i['rel_error']:.3g}, {i['wrong_elements']} "
                                       f"elements wrong, first {i['first_wrong']}: got {i['got']}, want {i['want']}")
            out.append(f"FALSE PROOF {r['mutant']} {r['description']}\n{r['diff']}\n  interpreter ({i['trial']}): "
                       f"{shown}\n")
    return "\n".join(out) or "no false proofs"


def report(records: list[dict], counts: dict, baselines: dict) -> str:
    errors = [f"{r['mutant']} {r['description']}: {r.get('error') or r['interpreter']}"
              for r in records if r["class"] == "error"]
    parts = ["Originals:"] + [f"  {Path(b.spec).name}: verify {b.verify_status}, interpreter {b.interpreter_status} "
                              f"({len(b.trials)} trials)" for b in baselines.values()]
    parts += ["", tables(records, counts), "", by_operator(records), "", "False proofs:", false_proofs(records),
              "", "Verifier-only kills explained:", explained(records),
              "", "Verifier-only and warning-only kills by cause:", kill_groups(records) or "none", "",
              f"Errors: {len(errors)}"] + errors
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="extra spec files (specs/*.arg are always included)")
    ap.add_argument("--only", nargs="*", help="only these files (instead of specs/*.arg + FILES)")
    ap.add_argument("--sample", type=int, help="evaluate a random sample of N type-checked mutants")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample and of the inputs")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("/tmp/argus_mutation"))
    ap.add_argument("--timeout", type=float, default=5.0, help="solver time limit per query (s)")
    ap.add_argument("--mutant-timeout", type=float, default=120.0, help="time limit per mutant (s)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the records in OUT/mutants.jsonl and evaluate only the mutants not in it")
    ap.add_argument("--deadline", type=float, help="stop taking new mutants after this many seconds")
    ap.add_argument("--operators", default=",".join(OPERATORS), help="comma-separated subset of: " +
                    ", ".join(OPERATORS))
    ap.add_argument("--checks", help="verify only these obligations (comma-separated names; 'protocol': the "
                    "Hopper protocol ones). A false proof is then one of these proved on a kernel the interpreter "
                    "shows wrong, which may be a bug only the other obligations catch: read the diffs")
    args = ap.parse_args(argv)
    checks = None
    if args.checks:
        from argus_verify.smt.protocol import PROTOCOL

        checks = tuple(dict.fromkeys(n for c in args.checks.split(",") if c
                                     for n in (PROTOCOL if c == "protocol" else (c,))))
        unknown_checks = set(checks) - set(smt.OBLIGATIONS)
        if unknown_checks:
            ap.error(f"unknown obligations: {', '.join(sorted(unknown_checks))}")
    operators = tuple(o for o in args.operators.split(",") if o)
    unknown_ops = set(operators) - set(OPERATORS)
    if unknown_ops:
        ap.error(f"unknown operators: {', '.join(sorted(unknown_ops))}")
    files = args.only or [str(p.relative_to(ROOT)) for p in sorted((ROOT / "specs").glob("*.arg"))] + args.files
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    mutants, counts = collect(files, operators)
    if args.sample is not None:
        mutants = random.Random(args.seed).sample(mutants, min(args.sample, len(mutants)))
    print(f"{sum(n['generated'] for n in counts.values())} mutants generated, {len(mutants)} type-checked ones "
          "to evaluate", flush=True)
    baselines = {f: baseline_of(f, args.timeout, args.seed, checks=checks) for f in files}
    records = run_study(mutants, baselines, args)
    text = report(records, counts, baselines)
    text += f"\n\n{len(records)} mutants in {time.time() - t0:.0f} s (jobs={args.jobs}, seed={args.seed}" + \
        (f", sample {args.sample}" if args.sample is not None else "") + \
        (f", checks {','.join(checks)}" if checks else "") + ")"
    if len(records) < len(mutants):
        text += f"\nPARTIAL: {len(records)} of {len(mutants)} type-checked mutants evaluated (rerun with --resume)"
    (args.out / "report.txt").write_text(text + "\n")
    summary = {"classes": Counter(r["class"] for r in records), "per_spec": counts, "evaluated": len(records)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
