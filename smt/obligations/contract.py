"""output-contract: every stored output element carries its declared tag (`*` components dropped)."""

from __future__ import annotations

from functools import partial

from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.obligations.common import (
    elem_str,
    fmt_tag,
    point,
    result_from,
    source_of,
    span_of,
    store_elem,
    tag_value,
    trace_path,
    value_var,
    witness_base,
)
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import OPS, TRUE


def check_contracts(an, timeout) -> list:
    out = []
    for acc, frag in an.out_stores:
        decl = an.tagdecls.get(acc.tensor)
        if decl is None:
            continue
        build = partial(contract_query, an=an, acc=acc, frag=frag, decl=decl)
        res, q, (ctx, inst, t, v, e, tg, declared) = solve(an, timeout, build)
        span = span_of(acc.node)
        if res.status != "violated":
            proved = f"{acc.tensor} receives the declared tags"
            out.append(result_from(res, "output-contract", span, "output contract could not be proved", proved))
            continue
        out.append(contract_violation(an, acc, frag, res, span, (ctx, inst, t, v, e, tg, declared)))
    return out


def contract_query(q, an, acc, frag, decl):
    """A stored element, in bounds and sound, whose tag is not the declared one."""
    S, ctx, inst, t = point(q, acc.node)
    v = value_var(q, acc.values)
    e, inb = store_elem(an, acc, S, ctx, inst, t, v)
    tg = frag.tag(S, ctx, inst, t, v)
    declared = [an.term(c, dict(zip(decl.index_vars, e, strict=True))) for c in decl.components]
    q.add(
        acc.executes(S, ctx, inst, t),
        inb,
        Z.Not(tg.err),
        tg.cons,
        Z.Not(contract_match(tg, declared)),
    )
    return ctx, inst, t, v, e, tg, declared


def contract_match(tg: V.TagVal, declared: list):
    """Value tag with `*` components dropped equals the declared tag."""
    K = len(tg.comps)
    stars = [s for _, s in tg.comps]
    if all(Z.is_true(s) or Z.is_false(s) for s in stars):
        patterns = [(TRUE, [Z.is_true(s) for s in stars])]
    else:
        patterns = []
        for mask in range(1 << K):
            bits = [bool(mask >> k & 1) for k in range(K)]
            patterns.append((Z.And(*[s if b else Z.Not(s) for s, b in zip(stars, bits, strict=True)]), bits))
    alts = []
    for cond, bits in patterns:
        kept = [tg.comps[k][0] for k in range(K) if not bits[k]]
        if len(kept) != len(declared):
            continue
        alts.append(Z.And(cond, *[Z.Eq(a, b) for a, b in zip(kept, declared, strict=True)]))
    return Z.And(Z.Not(tg.none), Z.Or(*alts))


def contract_violation(an, acc, frag, res, span, terms) -> ObligationResult:
    ctx, inst, t, v, e, tg, declared = terms
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t, v)
    coord = [ev.int(c) for c in acc.coords.coords(t, v, OPS)]
    w["element"] = {"value": ev.int(v), "tile": frag.label, "coord": coord}
    w["fragment"] = frag.name
    ge = [ev.int(x) for x in e]
    got = tag_value(ev, tg)
    want = [ev.int(x) for x in declared]
    detail = {"element": ge, "lhs": got, "rhs": want, "tags": {frag.label: got}}
    expl = [
        f"{elem_str(acc.tensor, ge)} receives {frag.label}[value {ev.int(v)}] of thread {ev.int(t)}, "
        f"which holds {source_of(tg.trace, ev)} (tag {fmt_tag(got)}); the contract says {fmt_tag(want)}"
    ]
    hint = (
        "the stored value carries no tag: it is a constant, or the loop that computes it may not run"
        if got is None
        else "the element stored is computed from the wrong inputs: compare the tile "
        "offsets and layouts on the path with the output's view"
    )
    path = trace_path(tg.trace, ev)
    return ObligationResult(
        "output-contract", "violated", span, "output contract violated", w, detail, path, hint, expl, res.seconds
    )
