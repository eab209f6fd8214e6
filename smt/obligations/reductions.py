"""reduction-coverage, reduction-operator and padding: what a contract's reductions must satisfy.

* reduction-coverage  every element a contract's reduction names enters it exactly once (sum) or
                      at least once (max, min), across values, lanes, warps, shared-memory
                      partials and loop iterations (smt/coverage.py counts one window; the
                      solver checks that the loop's windows tile the dimension for every size)
* reduction-operator  the kernel combines with the contract's operators along the contract's
                      dimensions (smt/reduction_flow.py)
* padding             masked-load padding and accumulator starts are the reduction's identity,
                      or never reach an output (smt/reduction_flow.py)

Only kernels with a `contract` get these obligations.
"""

from __future__ import annotations

import time

import z3

from argus_verify import ir
from argus_verify.smt import zops as Z
from argus_verify.smt.coverage import Coverage, Unsupported, Window, WindowsDoNotTile, subst, z3_int, z3_truth
from argus_verify.smt.reduction_flow import ReductionFlow, check_expressions, check_outputs
from argus_verify.smt.report import ObligationResult

COVERED = "every element of the contract's reductions is combined exactly once"
OPERATOR = "the kernel combines with the contract's operators along its dimensions"
PADDING = "padding and accumulator starts are the identity of their reduction"


def check_contract_reductions(an, timeout_s: float) -> list:
    """The step-registry form (smt.obligations.STEPS): the analysis's kernel."""
    return check_reductions(an.k, timeout_s, an.shapes)


def check_reductions(kernel: ir.Kernel, timeout_s: float, shapes: dict | None = None,
                     proved_windows: frozenset = frozenset()) -> list:
    if not kernel.contracts:
        return []
    t0 = time.perf_counter()
    span = kernel.contracts[0].span
    out = _flow_results(kernel, span, timeout_s)
    if not any(r.obligation == "reduction-operator" and r.status == "violated" for r in out):
        # a wrong operator also breaks the counts; it is reported once, at its root
        out += _coverage_results(kernel, timeout_s, shapes or {}, proved_windows)
    for r in out:
        r.seconds = time.perf_counter() - t0
    return out


def _flow_results(kernel, span, timeout_s) -> list:
    flow = ReductionFlow(kernel)
    unseen = sorted({c.tensor for c in kernel.contracts} - {st.dst.base for st, _ in flow.outputs})
    if unseen:  # nothing the pass follows writes the output: no proof from an empty set of stores
        why = f"no store to {', '.join(unseen)} that the pass follows (written by a statement it does not model)"
        return [ObligationResult(n, "unknown", span, f"beyond the analysis: {why}", detail={"reason": why})
                for n in ("reduction-operator", "padding")]
    check_outputs(kernel, flow)
    out = []
    for name, what in (("reduction-operator", OPERATOR), ("padding", PADDING)):
        found = [f for f in flow.findings if f.obligation == name]
        for f in found:
            if f.status == "unknown":
                out.append(ObligationResult(name, "unknown", f.span, f"beyond the analysis: {f.message}",
                                            detail={"reason": f.message}))
                continue
            witness = {k: v for k, v in f.detail.items() if v is not None}  # the operator / values found
            out.append(ObligationResult(name, "violated", f.span, f.message, witness=witness or {"line": f.span.line},
                                        detail=dict(f.detail), hint=f.hint))
        if name == "reduction-operator" and not found:
            for store, status, message, witness in check_expressions(kernel, flow, timeout_s):
                found.append(store)
                explanation = [f"with {', '.join(f'{k} = {v}' for k, v in witness.items())} the two differ"] \
                    if witness else []
                out.append(ObligationResult(
                    name, status, store.span, message, witness={"values": witness} if witness else {},
                    detail={"reason": message} if status == "unknown" else {}, explanation=explanation,
                    hint="compute what the contract states (operators, constants and the order of operations "
                         "may be regrouped, not changed)" if status == "violated" else ""))
        if not found:
            out.append(ObligationResult(name, "proved", span, what))
    return out


def _coverage_results(kernel, timeout_s, shapes, proved_windows=frozenset()) -> list:
    try:
        cov = Coverage(kernel, proved_windows)
    except WindowsDoNotTile as e:  # the windows inside and outside the loop miss or repeat an element
        return [_range_violation(kernel.contracts[0], e.key, e.sizes, e.reason,
                                 "the windows read outside the loop (a tail or a prologue chunk) must continue "
                                 "the loop's windows exactly: compare their start and width with the loop's range")]
    except Unsupported as e:
        where = e.span if e.span is not None else kernel.contracts[0].span
        return [ObligationResult("reduction-coverage", "unknown", where,
                                 f"coverage of the contract's reductions is beyond the analysis: {e.reason}",
                                 detail={"reason": f"{e.reason} (line {where.line})"})]
    out = []
    for contract in kernel.contracts:
        mine = []  # this contract's results: a problem of another output's reduction is not its own
        keys = [k for k in cov.keys if any(k.tensor == t for _, t, _ in contract.reduced_dims())]
        bad = [cov.problems[i] for i in cov.reported_for(contract.tensor)]
        for p in bad[:1]:
            mine.append(_problem(kernel, contract, cov, p))
        for key in keys:
            w = cov.windows.get(key)
            if w is None:
                continue
            res = _window_check(kernel, contract, key, w, timeout_s, cov.lets, shapes, cov.last_only.get(key),
                                cov.repeated.get(key))
            if res is not None:
                mine.append(res)
                break  # one gap is enough: the other operands of the same loop share it
        if not mine:
            mine.append(ObligationResult("reduction-coverage", "proved", contract.span, COVERED))
        out += mine
    return out


def _problem(kernel, contract, cov: Coverage, p) -> ObligationResult:
    w = cov.windows[p.key]
    pos = [v for v in contract.index_vars]
    var = next((r.var for r in contract.reductions()), "k")
    elem_idx = ["·"] * kernel.param(p.key.tensor).rank
    elem_idx[p.key.dim] = f"{p.offset}" + (f" + {w.size}·n" if w.loop is not None else "")
    where = f"{p.key.tensor}[{', '.join(elem_idx)}]"
    what = "never" if p.count == 0 else f"{p.count} times"
    want = "exactly once" if p.op == "sum" else "at least once"
    lines = [f"thread {p.thread} (warp {p.thread // 32}, lane {p.thread % 32}), value {p.value}: the {p.op} that ends "
             f"at line {p.span.line} combines {where} {what} (needs {want})"]
    if w.loop is not None:
        lines.append(f"(n: every iteration of the loop at line {w.loop.span.line}, which walks {p.key.tensor}'s "
                     f"dimension {p.key.dim} {w.size} elements at a time)")
    kind = "skipped" if p.count == 0 else "counted twice" if p.count > 1 else "combined"
    return ObligationResult(
        "reduction-coverage", "violated", contract.span,
        f"{contract.tensor}[{', '.join(pos)}] misses or repeats elements of its {p.op} over {var}: {where} is {kind}",
        witness={"thread": p.thread, "warp": p.thread // 32, "lane": p.thread % 32, "value": p.value,
                 "element": where, "count": p.count, "line": p.span.line},
        detail={"tensor": p.key.tensor, "dim": p.key.dim, "offset": p.offset, "count": p.count, "op": p.op},
        hint="make every element enter the reduction once: check the layout strides and chunk sizes, the lanes "
             "of the shuffles, and that every partial is read back",
        explanation=lines)


def _window_check(kernel, contract, key, w: Window, timeout_s, lets, shapes, last_only=None,
                  repeated=None) -> ObligationResult | None:
    """The solver's part: the windows tile the dimension from 0 for every admissible size. With
    `last_only` (loop, name): only the loop's last window reaches the output (through `name`,
    assigned in the loop), so the loop must also never run twice. With `repeated` (loop, name):
    accumulator `name` adds the same window at every iteration of a loop that does not walk the
    dimension, so that loop must never run twice either."""
    env = {n: z3.Int(n) for n in kernel.sizes}
    cons = [z3.And(s >= 1, s <= max(Z.MAX_SIZE, shapes.get(n, 0))) for n, s in env.items()]
    cons += [env[n] == v for n, v in shapes.items() if n in env]
    try:
        cons += [z3_truth(z3_int(r, env)) for r in kernel.requires]
        extent = z3_int(kernel.param(key.tensor).shape[key.dim], env)
        if w.loop is None:
            gap = extent > w.size
            first = None
        else:
            start, trips = _trips(w.loop, lets, env)
            first = w.coef * start
            if w.coef > 0 and w.loop.step > 0:
                # the windows [first + n * size, first + (n + 1) * size) of the iterations n follow each
                # other (coverage.py counts one of them): together they must hold 0 .. extent - 1.
                # Positions before 0 (a loop from -RB) are outside the tensor like those past its end:
                # a masked load pads them (the padding obligation checks the value: the identity), an
                # unmasked one is a bounds violation
                gap = first + trips * w.size < extent
            else:
                gap = trips * w.size < extent
    except KeyError as e:
        return ObligationResult("reduction-coverage", "unknown", contract.span,
                                f"the extent of {key.tensor}'s dimension {key.dim} or the loop's range uses "
                                f"{e.args[0]}",
                                detail={"reason": f"unsupported in the loop range: {e.args[0]}"})
    s = z3.Solver()
    s.set("timeout", int(timeout_s * 1000))
    s.add(*cons)
    early = first is not None and w.coef > 0 and w.loop.step > 0
    bad = gap if first is None else z3.Or(gap, first > 0 if early else first != 0)
    twice = again = None
    if last_only is not None and w.loop is not None and last_only[0] is w.loop:
        twice = trips >= 2
        bad = z3.Or(bad, twice)
    if repeated is not None:
        try:
            _, rtrips = _trips(repeated[0], lets, env)
        except KeyError as e:
            return ObligationResult("reduction-coverage", "unknown", contract.span,
                                    f"the range of the loop at line {repeated[0].span.line} uses {e.args[0]}",
                                    detail={"reason": f"unsupported in the loop range: {e.args[0]}"})
        again = rtrips >= 2
        bad = z3.Or(bad, again)
    s.add(bad)
    res = s.check()
    if res == z3.unsat:
        return None
    if res == z3.unknown:
        return ObligationResult("reduction-coverage", "unknown", contract.span,
                                f"the solver gave up on the loop range ({s.reason_unknown()})",
                                detail={"reason": f"solver: {s.reason_unknown()}"})
    m = s.model()
    sizes = {n: m.eval(v, model_completion=True).as_long() for n, v in env.items()}
    ext = m.eval(extent, model_completion=True).as_long()
    where = w.loop.span if w.loop is not None else contract.span
    if again is not None and z3.is_true(m.eval(again, model_completion=True)):
        n = m.eval(rtrips, model_completion=True).as_long()
        line = repeated[0].span.line
        msg = (f"'{repeated[1]}' adds the same elements of {key.tensor}'s dimension {key.dim} at each of the {n} "
               f"iterations of the loop at line {line}, which does not move along that dimension: each is "
               f"counted {n} times")
        return _range_violation(contract, key, sizes, msg, f"let the loop at line {line} advance the view of "
                                f"{key.tensor} along dimension {key.dim}", repeated=repeated[1])
    if twice is not None and z3.is_true(m.eval(twice, model_completion=True)):
        n = m.eval(trips, model_completion=True).as_long()
        msg = (f"only the last of the {n} iterations of the loop at line {where.line} reaches the output: "
               f"'{last_only[1]}' is assigned in the loop, not accumulated into a value from before it, so "
               f"{key.tensor}'s elements 0 .. {(n - 1) * w.size - 1} of dimension {key.dim} are skipped")
        return _range_violation(contract, key, sizes, msg, f"start '{last_only[1]}' before the loop and combine "
                                f"each iteration into it ({last_only[1]} = {last_only[1]} + ..., or "
                                f"mma(a, b, {last_only[1]}))", last_only=last_only[1])
    at = m.eval(first, model_completion=True).as_long() if first is not None else 0
    if at > 0 or (at < 0 and not early):
        msg = (f"the loop at line {where.line} starts at {key.tensor}'s element {at} of dimension {key.dim}, "
               f"not {'at 0 or before it' if early else '0'}")
    else:
        end = at + (m.eval(trips, model_completion=True).as_long() * w.size) if w.loop is not None else w.size
        msg = (f"{key.tensor}'s dimension {key.dim} has {ext} elements but the reduction covers only "
               f"{max(end, 0)}: elements {max(end, 0)} .. {ext - 1} are skipped")
    return _range_violation(contract, key, sizes, msg, "let the loop run from 0 to the dimension's extent in steps "
                            "of the elements one iteration combines")


def _trips(loop: ir.For, lets: dict, env: dict) -> tuple:
    """(start, trip count) of `loop` as Z3 terms over the sizes (KeyError: a name it cannot express)."""
    start, stop = z3_int(subst(loop.start, lets), env), z3_int(subst(loop.stop, lets), env)
    return start, z3.If(stop > start, (stop - start + loop.step - 1) / loop.step, 0)


def _range_violation(contract, key, sizes: dict, msg: str, hint: str, **detail) -> ObligationResult:
    """A coverage violation that the sizes `sizes` show (loop ranges and iterations)."""
    return ObligationResult(
        "reduction-coverage", "violated", contract.span, msg,
        witness={"sizes": sizes}, detail={"tensor": key.tensor, "dim": key.dim, **detail}, hint=hint,
        explanation=[f"at {', '.join(f'{k} = {v}' for k, v in sizes.items())}: {msg}"])
