"""tag-assertion (implicit): the operands of elementwise operations, reductions and mma carry tags that
line up (the `Check` records of smt.compute and smt.warp)."""

from __future__ import annotations

from functools import partial

from argus_verify.smt.demand import check_mask, demanded
from argus_verify.smt.obligations.common import (
    fmt_tag,
    point,
    result_from,
    source_of,
    span_of,
    tag_value,
    trace_path,
    value_var,
    witness_base,
)
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import OPS

CHECK_MESSAGES = {
    "elementwise": "operands of an elementwise operation carry different tags",
    "reduce": "a reduction combines elements whose tags differ outside the reduced axis",
    "mma": "mma operands' tags do not line up",
}

CHECK_HINTS = {
    "elementwise": "the operands use different thread-value layouts (or views): the same (thread, value) "
    "holds different elements; give them the same layout",
    "reduce": "the reduction (or its lane mask) combines elements of different rows: check axis= and lanes=",
    "mma": "tag(a)[1] must equal tag(b)[0]: an operand is transposed or comes from the wrong k-tile",
}

APPROXIMATE = (
    "the combined elements agree but mix tagged and untagged (or `*`) elements; the "
    "encoding keeps one representative per group and cannot conclude"
)


def check_agreements(an, timeout) -> list:
    out = []
    for ck in an.checks:
        results = []
        windows = getattr(ck, "windows", None)  # a wgmma's operand k windows (smt/hopper.py)
        plan = list(ck.parts)
        while plan:
            part = plan.pop(0)
            res, q, terms = solve(an, timeout, partial(agreement_query, ck=ck, part=part))
            if res.status == "violated" and "approx" in terms[4] and res.ev.is_true(terms[4]["approx"]):
                res.status = "unknown"
                res.reason = APPROXIMATE
            if part in ("win-a", "win-b") and res.status == "violated":
                # a window that does not hold is no bug by itself: the k agreement decides (a window
                # the solver gave up on is reported unknown: the k agreement is no easier)
                windows = None
                plan = ["k"] + [p for p in plan if p not in ("win-a", "win-b")]
                continue
            results.append((res, terms))
            if res.status == "violated":
                break
        span = span_of(ck.node)
        seconds = sum(r.seconds for r, _ in results)
        bad = [(r, tm) for r, tm in results if r.status == "violated"]
        if not bad:
            unk = [r for r, _ in results if r.status == "unknown"]
            res = unk[0] if unk else results[0][0]
            res.seconds = seconds
            message = f"{ck.kind} tag agreement could not be proved"
            out.append(result_from(res, "tag-assertion", span, message, ck.detail))
            if windows and out[-1].status == "proved":
                out[-1].detail["windows"] = sorted(windows.values())  # for reduction-coverage
            continue
        res, (ctx, inst, t, v, r) = bad[0]
        out.append(agreement_violation(an, ck, res, span, seconds, (ctx, inst, t, v, r)))
    return out


def agreement_query(q, ck, part):
    """A point where the check's operands (for one of its parts) disagree."""
    S, ctx, inst, t = point(q, ck.node)
    v = value_var(q, ck.typ.values)
    # only elements whose value reaches a store, an assertion or a loop-carried value (smt.demand)
    q.add(demanded(check_mask(q.an, ck), t, v))
    r = ck.fn(S, ctx, inst, t, v, part) if part is not None else ck.fn(S, ctx, inst, t, v)
    q.add(ck.node.guard(S, ctx, inst, t), r["cons"], r["bad"])
    return ctx, inst, t, v, r


def agreement_violation(an, ck, res, span, seconds, terms) -> ObligationResult:
    ctx, inst, t, v, r = terms
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t, v)
    coord = [ev.int(c) for c in ck.typ.coords.coords(t, v, OPS)]
    w["element"] = {"value": ev.int(v), "tile": ck.result, "coord": coord}
    w["fragment"] = ck.result
    detail = {"tags": {n: tag_value(ev, tg) for n, tg in r["tags"]}, "rule": ck.detail}
    for k, x in r.get("extra", {}).items():
        detail[k] = ev.int(x)
    expl = []
    path = []
    for n, tg in r["tags"]:
        expl.append(f"{n} holds {source_of(tg.trace, ev)} (tag {fmt_tag(tag_value(ev, tg))})")
        if not path:
            path = trace_path(tg.trace, ev)
    if ck.kind == "mma" and "k" in detail:
        expl.append(f"product k = {detail['k']}: {ck.detail}")
    if ck.kind == "mma" and "a_lane" in detail:
        expl.append(f"mma.sync: lane {detail['lane']}'s accumulator value {detail['c_register']} takes, at k = "
                    f"{detail['k']}, a value {detail['a_register']} of lane {detail['a_lane']} and b value "
                    f"{detail['b_register']} of lane {detail['b_lane']}")
    return ObligationResult(
        "tag-assertion",
        "violated",
        span,
        CHECK_MESSAGES[ck.kind],
        w,
        detail,
        path,
        CHECK_HINTS[ck.kind],
        expl,
        seconds,
    )
