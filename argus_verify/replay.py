"""Replay a verifier witness in the numpy interpreter and show the concrete wrong value.

The verifier names a block, thread, value index, loop iteration and sizes; the interpreter runs
the kernel at those sizes on random inputs, records the named fragment at that point, and looks
the value up in the inputs, so the report can say "a[value 3] of thread 37 = 0.7311 = A[21, 0]"
next to what the assertion expected.
"""

from __future__ import annotations

import math
import types

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError
from argus_verify.reference import evaluate_contract, load_reference, make_inputs

REPLAY_SEED = 20261129
# The interpreter runs every block of a launch: beyond this many tensor elements (inputs and outputs
# together) a witness is left unchecked rather than replayed. (The protocol skeleton's witnesses of
# persistent kernels reach 4360^3, minutes in the interpreter; 2178 x 1800 x 136 takes about 4 s.)
MAX_REPLAY_ELEMENTS = 1 << 23


def _witness_fields(result) -> dict:
    w = getattr(result, "witness", None) or {}
    return w if isinstance(w, dict) else {}


def find_in_inputs(value: float, inputs: dict) -> str | None:
    """The input element equal to `value` (random normals do not repeat), as `A[i, j]`."""
    if not np.isfinite(value):
        return None
    for name, arr in inputs.items():
        if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
            continue
        hits = np.argwhere(arr == np.asarray(value, dtype=arr.dtype))
        if len(hits):
            return f"{name}[{', '.join(str(int(i)) for i in hits[0])}]"
    return None


def find_unique_in_inputs(value: float, inputs: dict) -> str | None:
    """The input element equal to `value` when exactly one is (low-precision inputs such as bf16
    repeat values: an ambiguous value names no element)."""
    if not np.isfinite(value):
        return None
    found = []
    for name, arr in inputs.items():
        if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
            continue
        hits = np.argwhere(arr == np.asarray(value, dtype=arr.dtype))
        found += [f"{name}[{', '.join(str(int(i)) for i in h)}]" for h in hits[:2]]
        if len(found) > 1:
            return None
    return found[0] if found else None


def replay_one(kernel: ir.Kernel, result, path: str) -> dict:
    from argus_verify.runtime.interp import run

    w = _witness_fields(result)
    element = w.get("element")
    element = element if isinstance(element, dict) else {}  # (a coverage witness names its element in words)
    frag = element.get("tile") or element.get("fragment")
    if not w or frag is None or "thread" not in w:
        return _replay_by_reproducing(kernel, result, path)
    label, frag = frag, _labels(kernel).get(frag, frag)  # a temporary is printed by its source, `(xs * 2.0)`
    ref = load_reference(path)
    sizes = dict(getattr(ref, "SHAPES", {}) or {})
    sizes.update({k: int(v) for k, v in (w.get("sizes") or {}).items()})
    sizes = {k: v for k, v in sizes.items() if k in kernel.sizes}
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise ArgusError(f"cannot replay: no value for size {missing[0]}")
    block = tuple(int(b) for b in (list(w.get("block", [0, 0, 0])) + [0, 0, 0])[:3])
    thread = int(w["thread"])
    value_idx = int(element.get("value", w.get("value", 0)))
    loop = {k: int(v) for k, v in (w.get("loop") or {}).items()}
    line = (getattr(result, "location", None) or {})
    line = getattr(line, "line", None) or (line.get("line") if isinstance(line, dict) else None)
    inputs = make_inputs(kernel, sizes, np.random.default_rng(REPLAY_SEED), ref)
    seen: list = []

    def trace(ev):
        if ev.stmt.name != frag:
            return
        if line is not None and ev.stmt.span.line > line:
            return
        if any(ev.loop.get(k) != v for k, v in loop.items()):
            return
        hit = np.nonzero((ev.blocks == np.array(block)).all(axis=1))[0]
        if len(hit) and 0 <= thread - ev.first_thread < ev.value.shape[1]:
            seen.append((ev.stmt.span.line, float(ev.value[hit[0], thread - ev.first_thread, value_idx])))

    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}
    run(kernel, arrays, sizes, scalars, trace=trace)
    if not seen:
        return {"obligation": result.obligation, "replayed": False,
                "text": f"  replay: {label} was not computed for block {block}, thread {thread} at "
                        f"{', '.join(f'{k} = {v}' for k, v in loop.items()) or 'that point'}"}
    at_line, value = seen[-1]
    source = find_in_inputs(value, arrays)
    where = f"block {block}, thread {thread} (warp {thread // 32}, lane {thread % 32})"
    loop_txt = ", ".join(f"{k} = {v}" for k, v in loop.items())
    text = (f"  replay ({', '.join(f'{k}={v}' for k, v in sizes.items())}, seed {REPLAY_SEED}): {label}[value "
            f"{value_idx}] of {where}{', ' + loop_txt if loop_txt else ''} = {value:.6g}"
            + (f", which is {source}" if source else ("" if np.isfinite(value) else
                                                       " (never written: stale shared memory)")))
    expected = element.get("coord")
    if expected is not None and source:
        text += f"; the tile coordinate it stands for is {list(expected)}"
    return {"obligation": result.obligation, "replayed": True, "fragment": frag, "line": at_line,
            "value": value if np.isfinite(value) else str(value), "source": source, "sizes": sizes,
            "block": list(block), "thread": thread, "value_index": value_idx, "loop": loop, "text": text}


def _replay_by_reproducing(kernel: ir.Kernel, result, path: str) -> dict:
    """A witness without a fragment element (a coverage or race witness): what running the kernel
    shows, at the witness's sizes over the reference's SHAPES."""
    ob = getattr(result, "obligation", "?")
    w = _witness_fields(result)
    ref = load_reference(path)
    sizes = {**dict(getattr(ref, "SHAPES", {}) or {}), **(w.get("sizes") or {})}
    sizes = {k: int(v) for k, v in sizes.items() if k in kernel.sizes}
    if not w or any(s not in sizes for s in kernel.sizes):
        return {"obligation": ob, "replayed": False,
                "text": f"  replay: nothing to replay for {ob} (no fragment element or sizes in the witness)"}
    at = types.SimpleNamespace(obligation=ob, witness={**w, "sizes": sizes}, location=getattr(result, "location", None),
                               message=getattr(result, "message", ""), detail=getattr(result, "detail", None))
    found = reproduce(kernel, at, path)
    shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
    if found["status"] == REPRODUCED:
        return {"obligation": ob, "replayed": True, "sizes": sizes, "text": f"  replay ({shown}): {found['text']}"}
    return {"obligation": ob, "replayed": False, "sizes": sizes,
            "text": f"  replay ({shown}): not shown by a run ({found['text']})"}


def replay_all(kernel: ir.Kernel, report, path: str) -> list[dict]:
    out = []
    for r in report.results:
        if getattr(r, "status", None) == "violated":
            try:
                out.append(replay_one(kernel, r, path))
            except ArgusError as e:  # the replay itself faults (e.g. the out-of-bounds access the verifier found)
                where = f" at {e.span}" if e.span is not None else ""
                out.append({"obligation": r.obligation, "replayed": False, "error": e.message,
                            "text": f"  replay: the interpreter stopped{where}: {e.message}"})
    return out


# ---------------------------------------------------------------------------------------------
# Does a witness reproduce? (checked before a violation is shown: a witness that does not is a
# bug of Argus, reported as an internal error, never as the user's bug)

REPRODUCED, NOT_REPRODUCED, UNCHECKED = "reproduced", "not-reproduced", "unchecked"


class _Run:
    """One interpreter run at a witness's sizes, recording fragment values and a fault, if any."""

    def __init__(self, kernel: ir.Kernel, w: dict, path: str | None, schedule: str = "lockstep",
                 record: bool = True):
        from argus_verify.diagnostics import ArgusRuntimeError
        from argus_verify.runtime.interp import run

        ref = load_reference(path) if path else None
        sizes = {k: int(v) for k, v in (w.get("sizes") or {}).items() if k in kernel.sizes}
        self.ok = all(s in sizes for s in kernel.sizes)
        self.events: list = []
        self.fault = None
        self.outputs: dict = {}
        if self.ok:
            try:
                shapes = ir.tensor_shapes(kernel, sizes)
                self.ok = sum(math.prod(shape) for shape in shapes.values()) <= MAX_REPLAY_ELEMENTS
            except (KeyError, ZeroDivisionError, ArgusError):
                pass  # (the run reports what is wrong with the sizes)
        if not self.ok:
            return
        inputs = make_inputs(kernel, sizes, np.random.default_rng(REPLAY_SEED), ref)
        for name, val in (w.get("params") or {}).items():
            inputs[name] = int(val)
        self.arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
        self.scalars = {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}
        try:
            # (`record`: every fragment value of every thread, for `value`; the outputs alone do not
            # need them, and at a persistent kernel's sizes they take gigabytes)
            self.outputs = run(kernel, self.arrays, sizes, self.scalars,
                               trace=self.events.append if record else None, schedule=schedule)
        except ArgusRuntimeError as e:
            self.fault = e
        except ArgusError:
            self.ok = False  # sizes the interpreter refuses (a requires): nothing to check

    def value(self, name: str, block, thread: int, value: int, loop: dict, line: int | None):
        """The last value fragment `name` took at that point (at or before `line`), or None."""
        found = None
        for ev in self.events:
            if ev.stmt.name != name or (line is not None and ev.stmt.span.line > line):
                continue
            if any(ev.loop.get(k) != v for k, v in loop.items()):
                continue
            hit = np.nonzero((ev.blocks == np.array(block)).all(axis=1))[0]
            t = thread - ev.first_thread
            if len(hit) and 0 <= t < ev.value.shape[1] and 0 <= value < ev.value.shape[2]:
                found = float(ev.value[hit[0], t, value])
        return found


def _point(w: dict):
    block = tuple(int(b) for b in (list(w.get("block", [0, 0, 0])) + [0, 0, 0])[:3])
    element = w.get("element") or {}
    return block, int(w.get("thread", 0)), int(element.get("value", w.get("value", 0))), \
        {k: int(v) for k, v in (w.get("loop") or {}).items()}


def _labels(kernel: ir.Kernel) -> dict:
    """Fragment labels as the verifier prints them -> IR names (temporaries by their source)."""
    from argus_verify.diagnostics import SOURCES

    def src_text(span) -> str:
        line = SOURCES.line(span.file, span.line) if span is not None and span.line > 0 else None
        if line is None:
            return ""
        if span.end_line == span.line and span.end_col > span.col:
            return line[span.col - 1 : span.end_col - 1].strip()
        return line.strip()

    out = {}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Assign):
            label = s.name
            if s.name.startswith("_t"):
                text = src_text(s.span)
                label = f"({text})" if text else s.name
            out.setdefault(label, s.name)
    return out


def _source_tag(kernel: ir.Kernel, source: str, sizes: dict):
    """The declared tag of input element `source` ('A[i, j]'), or None if undeclared."""
    name, _, rest = source.partition("[")
    idx = [int(x) for x in rest.rstrip("]").split(",")]
    decl = kernel.tag_of(name)
    if decl is None:
        return None
    env = {**sizes, **dict(zip(decl.index_vars, idx, strict=True))}
    try:
        return ["*" if c is None else ir.eval_int(c, env) for c in decl.components]
    except (KeyError, ZeroDivisionError):  # tag functions: not evaluated here
        return None


def reproduce(kernel: ir.Kernel, result, path: str | None = None) -> dict:
    """Check a violation's witness concretely in the interpreter, at the witness's sizes:

    bounds               the run faults at the access's line
    uninitialised-read   the value read is NaN (nothing visible was written), or, for a copy still
                         in flight, differs from the value read when copies land at once
    output-once          an element 'never written' is still NaN after the run
    tag-assertion,       every operand the witness names whose value is a copy of an input
    output-contract      element holds an element with the claimed tag
    launch (division)    the run faults with a division by zero at the division's line
    barrier-divergence   the run stops at the statement: a barrier or a warp collective that only some
                         threads of the block (lanes of the warp) reach
    mbarrier-phase,      (the block exits with a TMA copy in flight) the run stops at the copy's line
    bulk-group
    mbarrier-phase       (threads that did not wait read a TMA copy) the run stops at the read
    reduction-coverage   an output differs from what the contract gives (float64), well beyond rounding
    (and mma tag-assertion / output-contract witnesses, whose operands other threads hold)

    race,                the result at the witness's sizes depends on the schedule the interpreter
    output-once (twice)  runs warps and threads in (shown, not pinned to the witness's two accesses)

    Returns {"status": reproduced | not-reproduced | unchecked, "text"}. Unchecked: nothing in
    the witness can be checked by running the kernel (computed values, a race no schedule shows)."""
    w = _witness_fields(result)
    ob = getattr(result, "obligation", "?")
    line = getattr(getattr(result, "location", None), "line", None)

    def out(status, text):
        return {"obligation": ob, "line": line, "status": status, "text": text}

    if not w or "sizes" not in w:
        return out(UNCHECKED, "no sizes in the witness")
    if ob == "bounds":
        return _stops_at(kernel, w, path, line, out, (NOT_REPRODUCED, "the interpreter ran the witness's sizes "
                                                                      "without an out-of-bounds access"))
    if ob == "barrier-divergence":  # the interpreter stops where a barrier or a warp collective is partial
        return _stops_at(kernel, w, path, line, out, (UNCHECKED, "the interpreter did not stop at the statement (its "
                                                                 "condition may hold for every thread of the blocks "
                                                                 "it ran)"))
    if ob == "uninitialised-read":
        frag = w.get("fragment")
        if frag is None or "thread" not in w:
            return out(UNCHECKED, "no fragment element in the witness")
        block, thread, value, loop = _point(w)
        r = _Run(kernel, w, path)
        if not r.ok or r.fault is not None:
            return out(UNCHECKED, "the interpreter cannot run these sizes")
        x = r.value(frag, block, thread, value, loop, line)
        if x is None:
            return out(NOT_REPRODUCED, f"the read of {frag} does not run at that point")
        if np.isnan(x):
            return out(REPRODUCED, f"{frag}[value {value}] of thread {thread} reads NaN (never written)")
        if "writer" in (getattr(result, "detail", None) or {}):  # a copy still in flight
            early = _Run(kernel, w, path, "lockstep,copies=early")
            y = early.value(frag, block, thread, value, loop, line) if early.ok else None
            if y is not None and y != x:
                return out(REPRODUCED, f"{frag}[value {value}] of thread {thread} reads {x:.6g}; {y:.6g} once "
                                       "the copy lands")
        return out(NOT_REPRODUCED, f"{frag}[value {value}] of thread {thread} reads {x:.6g}, a written value")
    if ob == "output-once" and "never written" in getattr(result, "message", ""):
        coord = (w.get("element") or {}).get("coord")
        tensor = (w.get("element") or {}).get("tensor")
        r = _Run(kernel, w, path, record=False)
        if not r.ok or r.fault is not None or coord is None:
            return out(UNCHECKED, "the interpreter cannot run these sizes")
        x = float(r.outputs[tensor][tuple(coord)])
        if np.isnan(x):
            return out(REPRODUCED, f"{tensor}{list(coord)} is never written")
        return out(NOT_REPRODUCED, f"{tensor}{list(coord)} is written ({x:.6g})")
    if ob in ("tag-assertion", "output-contract"):
        tags = (getattr(result, "detail", None) or {}).get("tags") or {}
        message = getattr(result, "message", "")
        if "mma" in message or "reduction" in message:  # operands held by other threads / values
            found = _contract_mismatch(kernel, w, path)
            if found is None:
                return out(UNCHECKED, "the operands are not at the witness's (thread, value), and no contract "
                                      "gives the output's values at these sizes")
            return out(*found)
        if not tags or "thread" not in w:
            return out(UNCHECKED, "no operand tags in the witness")
        block, thread, value, loop = _point(w)
        r = _Run(kernel, w, path)
        if not r.ok or r.fault is not None:
            return out(UNCHECKED, "the interpreter cannot run these sizes")
        names = _labels(kernel)
        checked = []
        for label, claimed in tags.items():
            name = names.get(label)
            if name is None or claimed is None or "*" in [str(c) for c in claimed]:
                # a reduced value (a '*' component) is one of many combined elements: its value
                # names one of them, not necessarily the one whose tag the witness shows
                continue
            x = r.value(name, block, thread, value, loop, line)
            source = find_unique_in_inputs(x, r.arrays) if x is not None else None
            if source is None:
                continue
            real = _source_tag(kernel, source, {k: int(v) for k, v in w["sizes"].items()})
            if real is None:
                continue
            for c, want in zip(real, claimed, strict=False):
                if want != "*" and c != "*" and int(want) != int(c):
                    return out(NOT_REPRODUCED, f"{label} holds {source} with tag {tuple(real)}, not {claimed}")
            checked.append(f"{label} holds {source}")
        if checked:
            return out(REPRODUCED, "; ".join(checked))
        if ob == "output-contract":  # a sum (a GEMM's output): the contract gives what it should be
            found = _contract_mismatch(kernel, w, path)
            if found is not None and found[0] == REPRODUCED:
                return out(*found)
        return out(UNCHECKED, "no operand value is a copy of an input element")
    launch_faults = {"division by zero": "a division by zero", "TMA moves": "a TMA row stride it refuses"}
    fault_kind = next((k for k in launch_faults if k in getattr(result, "message", "")), None)
    if ob == "launch" and fault_kind is not None:
        absent = (NOT_REPRODUCED, f"the interpreter ran the witness's sizes without {launch_faults[fault_kind]}")
        return _stops_at(kernel, {**w, "params": w.get("params") or w.get("scalars") or {}}, path, line, out,
                         absent, fault_kind)
    if ob in ("mbarrier-phase", "bulk-group") and "the block exits while" in getattr(result, "message", ""):
        # a TMA copy still in flight at the exit: the interpreter faults at it
        return _stops_at(kernel, w, path, line, out, (UNCHECKED, "the interpreter did not stop at that copy"),
                         "exits while")
    if ob == "mbarrier-phase" and "which did not wait" in getattr(result, "message", ""):
        # a read of a TMA copy by threads that did not acquire it: the interpreter faults at the read
        return _stops_at(kernel, w, path, line, out, (UNCHECKED, "the interpreter did not stop at that read"),
                         "did not wait")
    if ob == "reduction-coverage":  # a loop range or a lost iteration: the output differs from the contract
        found = _contract_mismatch(kernel, w, path)
        return out(*found) if found is not None else out(UNCHECKED, "no contract gives the output's values at "
                                                                    "these sizes")
    if ob == "race" or (ob == "output-once" and "thread" not in w and "threads" in w):
        return _schedule_dependence(kernel, w, path, out)
    return out(UNCHECKED, f"{ob} witnesses are not replayed")


def _stops_at(kernel: ir.Kernel, w: dict, path: str | None, line, out, no_fault: tuple, fault: str = "") -> dict:
    """A witness the interpreter shows by faulting at its line (with `fault` in the message): run
    the witness's sizes; `no_fault` is the (status, text) when the run does not fault at all."""
    r = _Run(kernel, w, path, record=False)
    if not r.ok:
        return out(UNCHECKED, "the interpreter cannot run these sizes")
    if r.fault is None:
        return out(*no_fault)
    at = getattr(getattr(r.fault, "span", None), "line", None)
    if at == line and fault in str(r.fault):
        return out(REPRODUCED, str(r.fault.args[0] if r.fault.args else r.fault))
    return out(UNCHECKED, f"the interpreter faulted first at line {at}")


def _contract_mismatch(kernel: ir.Kernel, w: dict, path: str | None):
    """(status, text) from running the kernel at the witness's sizes and comparing each output that
    has a contract with what the contract gives (float64): a mismatch well beyond rounding
    reproduces the witness; agreement leaves it unchecked; None when there is nothing to compare."""
    r = _Run(kernel, w, path, record=False)
    if not r.ok or r.fault is not None or not kernel.contracts:
        return None
    sizes = {k: int(v) for k, v in w["sizes"].items() if k in kernel.sizes}
    inputs = {**r.arrays, **r.scalars}
    compared = []
    for contract in kernel.contracts:
        want = evaluate_contract(kernel, contract, inputs, sizes)
        got = r.outputs.get(contract.tensor)
        if want is None or got is None:
            continue
        got = np.asarray(got, dtype=np.float64)
        # rounding: the output's precision over the magnitudes summed (float32 sums stay far below)
        eps = {"f32": 2.0 ** -12, "f64": 2.0 ** -40}.get(kernel.param(contract.tensor).dtype, 2.0 ** -6)
        tol = eps * (1.0 + np.abs(want))
        with np.errstate(invalid="ignore"):
            bad = np.isfinite(got) & np.isfinite(want) & (np.abs(got - want) > tol)
        if bad.any():
            at = tuple(int(x[0]) for x in np.nonzero(bad))
            return (REPRODUCED, f"{contract.tensor}{list(at)} is {got[at]:.6g} where the contract gives "
                                f"{want[at]:.6g} (the witness's sizes, random inputs)")
        compared.append(contract.tensor)
    if not compared:
        return None
    # equal outputs do not refute the witness (its element may be masked, or its difference vanish on
    # these inputs): unchecked, never "not reproduced", which would report a bug of Argus
    return (UNCHECKED, f"{', '.join(compared)} equal{'s' if len(compared) == 1 else ''} the contract at the "
                       "witness's sizes (random inputs): the witness's own element is not checked")


def _schedule_dependence(kernel: ir.Kernel, w: dict, path: str | None, out) -> dict:
    """A race (or two threads writing one element) is shown concretely when the kernel's result at
    the witness's sizes changes with the order in which the interpreter runs warps and threads
    (runtime/schedules.py): lockstep against each adversarial schedule, on the same inputs. The
    same result under every schedule proves nothing either way (the racing values may be equal,
    or no schedule tried hits the window): unchecked, never 'not reproduced'."""
    from argus_verify.runtime.interp import SCHEDULES

    base = _Run(kernel, w, path, record=False)
    if not base.ok or base.fault is not None:
        return out(UNCHECKED, "the interpreter cannot run these sizes")
    for schedule in SCHEDULES:
        if schedule == "lockstep":
            continue
        r = _Run(kernel, w, path, schedule, record=False)
        if not r.ok:
            continue
        if r.fault is not None:
            return out(REPRODUCED, f"under the {schedule} schedule the run faults: {r.fault}")
        for name, got in r.outputs.items():
            want = base.outputs.get(name)
            if want is None or np.array_equal(np.asarray(got), np.asarray(want), equal_nan=True):
                continue
            diff = np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))))
            at = tuple(int(i) for i in diff[0])
            return out(REPRODUCED, f"the result depends on the schedule: {name}{list(at)} is {float(want[at]):.6g} "
                                   f"in lockstep and {float(got[at]):.6g} under {schedule} "
                                   f"({len(diff)} elements differ)")
    return out(UNCHECKED, f"the same result under {len(SCHEDULES)} schedules at these sizes")


def reproduce_all(kernel: ir.Kernel, report, path: str | None = None) -> list[dict]:
    """`reproduce` for every violation of a report."""
    return [reproduce(kernel, r, path) for r in report.results if getattr(r, "status", None) == "violated"]
