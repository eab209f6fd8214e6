"""bounds: every unmasked global access and every shared access stays inside its tensor / allocation."""

from __future__ import annotations

from functools import partial

from argus_verify.smt import zops as Z
from argus_verify.smt.obligations.common import (
    elem_str,
    point,
    result_from,
    sh_addr,
    sh_exec,
    sh_opname,
    span_of,
    value_var,
    witness_base,
)
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import OPS


def check_bounds(an, timeout) -> list:
    out = []
    for acc in an.g_accesses:
        span = span_of(acc.node)
        if acc.mask:
            out.append(ObligationResult("bounds", "proved", span, f"{acc.kind} of {acc.tensor} is masked"))
            continue
        res, q, (S, ctx, inst, t, v, c, e) = solve(an, timeout, partial(global_query, an=an, acc=acc))
        if res.status != "violated":
            proved = f"{acc.kind} of {acc.tensor} stays in bounds"
            out.append(result_from(res, "bounds", span, "bounds could not be proved", proved))
            continue
        out.append(global_violation(an, acc, res, span, (S, ctx, inst, t, v, c, e)))
    for name, info in an.allocs.items():
        for acc in an.sh_writes[name] + an.sh_reads[name]:
            out.append(shared_bounds(an, info, acc, timeout))
    for acc in an.mbar_accesses:  # mbarrier indices (smt/hopper.py)
        out.append(shared_bounds(an, acc.alloc, acc, timeout))
    return out


def global_query(q, an, acc):
    """An executed element of an unmasked global access outside its tensor."""
    S, ctx, inst, t = point(q, acc.node)
    v = value_var(q, acc.values)
    c = acc.coords.coords(t, v, OPS)
    e = acc.view.elem(S, ctx, inst, t, c)
    q.add(acc.executes(S, ctx, inst, t), Z.Not(an.in_tensor(acc.tensor, e, S)))
    return S, ctx, inst, t, v, c, e


def global_violation(an, acc, res, span, terms) -> ObligationResult:
    S, ctx, inst, t, v, c, e = terms
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t, v)
    ge = [ev.int(x) for x in e]
    shape = [ev.int(d.fn(S, None, None, None)) for d in an.tensor_dims[acc.tensor]]
    w["element"] = {"value": ev.int(v), "tile": acc.tensor, "coord": [ev.int(x) for x in c]}
    detail = {"address": ge, "extent": shape, "tensor": acc.tensor}
    expl = [f"{acc.kind} of {elem_str(acc.tensor, ge)}: outside {acc.tensor}'s shape {shape} (no mask)"]
    hint = (
        "add mask=True (and a where= for partial tiles), or a requires clause that makes the sizes multiples of "
        "the tile"
    )
    message = f"out-of-bounds {acc.kind} of {acc.tensor}"
    return ObligationResult("bounds", "violated", span, message, w, detail, [], hint, expl, res.seconds)


def shared_bounds(an, info, acc, timeout):
    res, q, (ctx, inst, t, v, e, off) = solve(an, timeout, partial(shared_query, an=an, acc=acc))
    span = span_of(acc.node)
    if res.status != "violated":
        proved = f"{sh_opname(acc)} stays inside {info.name}"
        return result_from(res, "bounds", span, "shared bounds could not be proved", proved)
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t, v)
    ge = [ev.int(x) for x in e]
    detail = {"address": ge, "extent": list(info.shape), "offset": ev.int(off), "cosize": info.cosize}
    expl = [
        f"{sh_opname(acc)} of {elem_str(info.name, ge)} (offset {ev.int(off)}): outside {info.name}'s shape "
        f"{list(info.shape)} (cosize {info.cosize})"
    ]
    hint = "the stage / tile index runs past the allocation: check the index arithmetic (e.g. % STAGES)"
    message = f"out-of-bounds shared access to {info.name}"
    return ObligationResult("bounds", "violated", span, message, w, detail, [], hint, expl, res.seconds)


def shared_query(q, an, acc):
    """An executed element of a shared access outside its allocation's shape."""
    S, ctx, inst, t = point(q, acc.node)
    v = value_var(q, acc.values)
    e, off, inshape = sh_addr(an, acc, S, ctx, inst, t, v)
    q.add(sh_exec(acc, S, ctx, inst, t), Z.Not(inshape))
    return ctx, inst, t, v, e, off
