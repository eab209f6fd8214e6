"""barrier-divergence: every barrier is reached by all threads of a block or by none."""

from __future__ import annotations

from functools import partial

from argus_verify.smt import zops as Z
from argus_verify.smt.obligations.common import point, result_from, span_of, witness_base
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult

UNIFORM = "barrier reached by every thread of the block"


def check_divergence(an, timeout) -> list:
    out = []
    for b in an.barriers:
        span = span_of(b)
        if not b.conds or b.uniform_guard:
            out.append(ObligationResult("barrier-divergence", "proved", span, UNIFORM))
            continue
        res, q, (ctx, inst, t, t2) = solve(an, timeout, partial(divergence_query, an=an, b=b), validate=False)
        if res.status != "violated":
            out.append(result_from(res, "barrier-divergence", span, "barrier uniformity could not be proved", UNIFORM))
            continue
        out.append(divergence_violation(an, res, span, (ctx, inst, t, t2)))
    return out


def divergence_query(q, an, b):
    """Two threads of one block, one reaching barrier b and one not."""
    S, ctx, inst, t = point(q, b)
    t2 = S.var("t2")
    q.add(t2 >= 0, t2 < an.T, b.guard(S, ctx, inst, t), Z.Not(b.guard(S, ctx, inst, t2)))
    q.point.append(t2)
    return ctx, inst, t, t2


def divergence_violation(an, res, span, terms) -> ObligationResult:
    ctx, inst, t, t2 = terms
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t)
    w["threads"] = [ev.int(t), ev.int(t2)]
    del w["thread"], w["warp"], w["lane"]
    expl = [f"thread {ev.int(t)} reaches the barrier, thread {ev.int(t2)} does not: the block deadlocks or misbehaves"]
    return ObligationResult(
        "barrier-divergence",
        "violated",
        span,
        "barrier() under a condition that is not uniform over the block",
        w,
        {"threads": w["threads"]},
        [],
        "move barrier() out of the thread-dependent branch (predicate the work instead)",
        expl,
        res.seconds,
    )
