"""barrier-divergence: every barrier is reached by all threads of a block or by none, and every
warp-synchronous instruction (shuffles, warp reductions, mma.sync, ldmatrix, stmatrix: the
`.sync.aligned` forms the lowering emits for the whole warp) by all lanes of a warp or by none."""

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
    for node, what, width in an.collectives:
        span = span_of(node)
        group = "warp" if width == 32 else "warpgroup"
        whole = f"{what} run by every thread of a {group} or by none"
        if not node.conds or node.uniform_guard:
            out.append(ObligationResult("barrier-divergence", "proved", span, whole))
            continue
        res, q, terms = solve(an, timeout, partial(divergence_query, an=an, b=node, width=width), validate=False)
        if res.status != "violated":
            out.append(result_from(res, "barrier-divergence", span, f"{what}: {group} uniformity could not be proved",
                                   whole))
            continue
        out.append(lanes_violation(an, res, span, terms, what, width))
    return out


def divergence_query(q, an, b, width=None):
    """Two threads of one block (of one group of `width` threads: a warp, a warpgroup), one reaching
    statement b and one not."""
    S, ctx, inst, t = point(q, b)
    t2 = S.var("t2")
    q.add(t2 >= 0, t2 < an.T, b.guard(S, ctx, inst, t), Z.Not(b.guard(S, ctx, inst, t2)))
    if width is not None:
        q.add(Z.Eq(Z.floordiv(t, Z.bv(width)), Z.floordiv(t2, Z.bv(width))))
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


def lanes_violation(an, res, span, terms, what, width) -> ObligationResult:
    ctx, inst, t, t2 = terms
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t)
    a, b = ev.int(t), ev.int(t2)
    if width == 32:
        group, detail = "warp", {"lanes": [a % 32, b % 32], "warp": w["warp"]}
        w["lanes"] = detail["lanes"]
        del w["thread"], w["lane"]
        who = f"lane {a % 32} of warp {w['warp']} runs {what}, lane {b % 32} does not"
    else:
        group, detail = "warpgroup", {"threads": [a, b], "warpgroup": a // width}
        w["threads"] = [a, b]
        del w["thread"], w["warp"], w["lane"]
        who = f"thread {a} of warpgroup {a // width} runs {what}, thread {b} does not"
    expl = [f"{who}: the instruction waits for every thread of the {group} (it would hang or read undefined values)"]
    return ObligationResult(
        "barrier-divergence",
        "violated",
        span,
        f"{what} under a condition that is not uniform over the {group}",
        w,
        detail,
        [],
        f"run it in every thread of the {group} (compute everywhere and keep the result where needed with where= on "
        "the store, or an if after it)",
        expl,
        res.seconds,
    )
