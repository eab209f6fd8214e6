"""race: two accesses of different threads to one shared offset, one a write, are ordered by a
barrier (async copies: by a retiring wait, then a barrier).

Hopper's async proxy (smt/hopper.py): a TMA write and a wgmma read, or two TMA writes, are ordered
by the mbarrier protocol, which smt/protocol.py checks: those pairs are not queried here, and the
result says that it relies on those obligations. A generic write before a wgmma read or a TMA
write needs a barrier between; a wgmma read before a generic write needs its wgmma committed,
retired by wgmma_wait(0), then a barrier. A TMA write before a generic access of the same element
is not encoded: unknown where they may meet."""

from __future__ import annotations

from functools import partial

from argus_verify.smt import program as P
from argus_verify.smt import zops as Z
from argus_verify.smt.hopper import RELIANCE, RELIES_ON, WgmmaRead
from argus_verify.smt.hopper_store import RELIANCE_STORE, RELIES_ON_STORE, TmaStoreRead
from argus_verify.smt.obligations.common import (
    async_proxy,
    distinct_violations,
    elem_str,
    result_from,
    sh_addr,
    sh_exec,
    sh_kind,
    sh_opname,
    span_of,
)
from argus_verify.smt.query import exists_check, solve
from argus_verify.smt.report import ObligationResult


def check_races(an, timeout) -> list:
    out = []
    for name in an.allocs:
        writes = an.sh_writes[name]
        reads = an.sh_reads[name]
        accs = writes + reads
        pairs = [(x, y) for x in accs for y in accs if sh_kind(x) != "read" or sh_kind(y) != "read"]
        found = []
        worst = None
        relied = False
        for x, y in pairs:
            if async_proxy(x) and async_proxy(y):
                relied = True  # ordered by the mbarrier protocol (see the module's docstring)
                continue
            r = race_pair(an, x, y, timeout)
            if r.status == "violated":
                found.append(r)
            elif r.status == "unknown" and worst is None:
                worst = r
        span = span_of(an.allocs[name].node)
        if found:
            out += distinct_violations(found)
        elif worst is not None:
            out.append(worst)
        elif any(isinstance(a, TmaStoreRead) for a in reads):
            # the barriers around the TMA store are proved here; that the store's read is over before
            # the barrier that precedes a rewrite of the tile is bulk-group's (smt/hopper_store.py)
            out.append(ObligationResult("race", "proved", span, f"no data race on {name} (generic accesses ordered "
                                        f"by barriers, for all sizes; {RELIANCE_STORE})",
                                        detail={"relies_on": list(RELIES_ON_STORE)}))
        elif relied:
            out.append(ObligationResult("race", "proved", span, f"no data race on {name} (generic accesses ordered "
                                        f"by barriers, for all sizes; {RELIANCE})",
                                        detail={"relies_on": list(RELIES_ON)}))
        else:
            out.append(ObligationResult("race", "proved", span, f"no data race on {name}"))
    return out


def race_pair(an, X, Y, timeout):
    res, q, (ctx, x, y, t1, t2, v1, v2, e1, o1) = solve(an, timeout, partial(race_query, an=an, X=X, Y=Y),
                                                              abstract=False)
    span = span_of(Y.node)
    if res.status != "violated":
        return result_from(res, "race", span, "race freedom could not be proved", "no race")
    if sh_kind(X) == "tma":
        reason = (f"the TMA write at line {X.node.span.line} and the {sh_opname(Y)} at line {Y.node.span.line} may "
                  f"access one element of {X.alloc.name}: their ordering through the mbarrier is not encoded")
        return ObligationResult("race", "unknown", span, f"race freedom could not be proved: {reason}",
                                detail={"reason": reason}, seconds=res.seconds)
    ev = res.ev
    ge = [ev.int(c) for c in e1]
    lines = [X.node.span.line, Y.node.span.line]
    w = {
        "block": [ev.int(b) for b in ctx.block],
        "threads": [ev.int(t1), ev.int(t2)],
        "sizes": {n: ev.int(s) for n, s in an.sizes.items()},
        "accesses": [],
        "element": {"tile": X.alloc.name, "coord": ge, "offset": ev.int(o1)},
    }
    for acc, inst, t, v in ((X, x, t1, v1), (Y, y, t2, v2)):
        w["accesses"].append(access_witness(ev, acc, inst, t, v))
    w["loops"] = {f"line {a['line']}": a["loop"] for a in w["accesses"]}
    kx, ky = sh_kind(X), sh_kind(Y)
    return ObligationResult(
        "race",
        "violated",
        span,
        f"data race on {X.alloc.name} ({sh_opname(X)}/{sh_opname(Y)})",
        w,
        {"lines": lines, "offset": ev.int(o1), "element": ge},
        [],
        race_hint(kx, ky, lines),
        race_explanation(X.alloc.name, ge, w["accesses"], kx),
        res.seconds,
    )


def race_query(q, an, X, Y):
    """Two threads of one block access one offset of the allocation, one of them writing, with
    nothing ordering the first access before the second (validated exactly before it is reported)."""
    S = q.S
    ctx = an.new_ctx(S)
    x = P.new_inst(S, ctx, X.node, "x")
    y = P.new_inst(S, ctx, Y.node, "y")
    t1, t2, v1, v2 = S.var("t1"), S.var("t2"), S.var("v1"), S.var("v2")
    q.add(
        ctx.cons,
        x.cons,
        y.cons,
        t1 >= 0,
        t1 < an.T,
        t2 >= 0,
        t2 < an.T,
        Z.Ne(t1, t2),
        v1 >= 0,
        v1 < X.values,
        v2 >= 0,
        v2 < Y.values,
    )
    q.small += list(ctx.block)
    q.point += list(ctx.block) + list(x.cnt.values()) + list(y.cnt.values()) + [t1, t2, v1, v2]
    e1, o1, in1 = sh_addr(an, X, S, ctx, x, t1, v1)
    e2, o2, in2 = sh_addr(an, Y, S, ctx, y, t2, v2)
    order = P.before(x, y)
    if X is Y:
        order = Z.Or(order, P.same_instance(x, y))
    cond = unordered(an, S, ctx, X, Y, x, y)
    q.add(sh_exec(X, S, ctx, x, t1), sh_exec(Y, S, ctx, y, t2), in1, in2, Z.Eq(o1, o2), order, cond)
    kx = sh_kind(X)

    def validate(model):
        def build(S2):
            if isinstance(X, WgmmaRead):
                return an.exactly_wgmma_released(S2, ctx, x, y)
            if kx == "async":
                return an.exactly_visible_after_wait(S2, ctx, x, y)
            return an.exactly_barrier_between(S2, ctx, x, y)

        return "a barrier separates the accesses" if exists_check(q, model, build) else None

    q.validators.append(validate)
    return ctx, x, y, t1, t2, v1, v2, e1, o1


def unordered(an, S, ctx, X, Y, x, y):
    """Nothing makes access X at x visible to another thread's access Y at y: no barrier between
    (X a plain write or a read); for an async copy X, no wait retiring it followed by a barrier (and,
    before a read, a wait did retire it: a read of a copy no wait retired is an uninitialised read)."""
    kx, ky = sh_kind(X), sh_kind(Y)
    if kx == "tma":
        return Z.TRUE  # nothing encoded orders it before a generic access (unknown: race_pair)
    if isinstance(X, WgmmaRead):
        return Z.Not(an.wgmma_released(S, ctx, x, y))
    if kx != "async":
        return Z.Not(an.barrier_between(S, ctx, x, y))
    visible = an.visible_after_wait(S, ctx, x, y)
    if ky == "read":
        return Z.And(an.retired(S, ctx, x, y), Z.Not(visible))
    return Z.Not(visible)


def access_witness(ev, acc, inst, t, v) -> dict:
    tt = ev.int(t)
    return {
        "op": sh_opname(acc),
        "line": acc.node.span.line,
        "thread": tt,
        "warp": tt // 32,
        "lane": tt % 32,
        "value": ev.int(v),
        "loop": {L.var: ev.int(inst.vals[L.var]) for L in acc.node.loops},
    }


def race_explanation(alloc, ge, accesses, kx) -> list:
    def access(a):
        it = "".join(f", {k} = {vv}" for k, vv in a["loop"].items())
        return f"thread {a['thread']} {a['op']}s {elem_str(alloc, ge)} at line {a['line']}{it}"

    expl = [access(accesses[0]) + ",", "  then " + access(accesses[1]) + ", with no barrier between"]
    if kx == "async":
        expl[-1] = (
            "  then " + access(accesses[1]) + ": the copy was not retired by a wait and then made "
            "visible by a barrier in between"
        )
    return expl


def race_hint(kx, ky, lines) -> str:
    if kx == "read":
        return (
            f"write-after-read: the buffer is overwritten at line {lines[1]} while other threads may "
            f"still read it at line {lines[0]}: add barrier() between them (e.g. at the end of the loop body)"
        )
    if ky == "read":
        return f"add barrier() between the write at line {lines[0]} and the read at line {lines[1]}" + (
            " (after the wait)" if kx == "async" else ""
        )
    return f"two writes to one element at lines {lines[0]} and {lines[1]} are not ordered by a barrier"
