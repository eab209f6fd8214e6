"""What the obligations share: query points, witnesses, tags and paths as reported, results."""

from __future__ import annotations

from argus_verify.diagnostics import NO_SPAN
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt.query import Ev, Query
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import OPS


def point(q: Query, node, prefix="i"):
    S = q.S
    ctx = q.an.new_ctx(S)
    inst = P.new_inst(S, ctx, node, prefix)
    t = S.var("t")
    q.add(ctx.cons, inst.cons, t >= 0, t < q.an.T)
    q.small += list(ctx.block)
    q.point += list(ctx.block) + list(inst.cnt.values()) + [t]
    return S, ctx, inst, t


def value_var(q: Query, values: int, name="v"):
    v = q.S.var(name)
    q.add(v >= 0, v < values)
    q.point.append(v)
    return v


def witness_base(an, ev: Ev, ctx, inst, t=None, v=None) -> dict:
    w = {"block": [ev.int(b) for b in ctx.block]}
    if t is not None:
        tt = ev.int(t)
        w.update({"thread": tt, "warp": tt // 32, "lane": tt % 32})
    if inst is not None and inst.node is not None:
        w["loop"] = {L.var: ev.int(inst.vals[L.var]) for L in inst.node.loops}
    w["sizes"] = {n: ev.int(x) for n, x in an.sizes.items()}
    if an.params:
        w["params"] = {n: ev.int(x) for n, x in an.params.items()}
    if inst is not None and inst.node is not None and inst.node.span is not None:
        w["statement"] = {"line": inst.node.span.line, "kind": type(inst.node.stmt).__name__}
    return w


def tag_value(ev: Ev, tg: V.TagVal):
    if ev.is_true(tg.none):
        return None
    out = []
    for val, star in tg.comps:
        out.append("*" if ev.is_true(star) else ev.int(val))
    return out


def fmt_tag(x) -> str:
    if x is None:
        return "none"
    return "(" + ", ".join(str(c) for c in x) + ("," if len(x) == 1 else "") + ")"


def trace_path(tr, ev: Ev) -> list:
    hops = V.render_trace(tr, ev)
    out = []
    prev = None
    for label, op, span in hops:
        if op is None:
            prev = label
            continue
        out.append(
            {
                "op": op,
                "line": span.line if span else 0,
                "col": span.col if span else 0,
                "from": prev or "",
                "to": label,
            }
        )
        prev = label
    if not out and hops:
        out.append({"op": None, "line": 0, "col": 0, "from": "", "to": hops[-1][0]})
    return out


def source_of(tr, ev: Ev) -> str:
    hops = V.render_trace(tr, ev)
    return hops[0][0] if hops else "?"


def result_from(q_out, obligation, node_span, message, ok_message):
    """Proved / unknown result skeleton (violations are built by each obligation)."""
    if q_out.status == "proved":
        return ObligationResult(obligation, "proved", node_span, ok_message, seconds=q_out.seconds)
    return ObligationResult(
        obligation,
        "unknown",
        node_span,
        f"{message}: {q_out.reason}",
        detail={"reason": q_out.reason},
        seconds=q_out.seconds,
    )


def span_of(node):
    return node.span if node is not None and node.span is not None else NO_SPAN


def elem_str(base, coords) -> str:
    return f"{base}[" + ", ".join(str(c) for c in coords) + "]"


def store_elem(an, acc, S, ctx, inst, t, v):
    c = acc.coords.coords(t, v, OPS)
    e = acc.view.elem(S, ctx, inst, t, c)
    return e, an.in_tensor(acc.tensor, e, S)


def sh_addr(an, acc, S, ctx, inst, t, v):
    c = acc.coords.coords(t, v, OPS)
    e = acc.view.elem(S, ctx, inst, t, c)
    return e, acc.alloc.offset(e), an.in_shape(e, acc.alloc.shape)


def sh_exec(acc, S, ctx, inst, t):
    if hasattr(acc, "executes"):
        return acc.executes(S, ctx, inst, t)
    return acc.node.guard(S, ctx, inst, t)


def sh_kind(acc) -> str:
    if hasattr(acc, "kind") and acc.kind in ("store", "async", "tma"):
        return acc.kind
    return "read"


def sh_opname(acc) -> str:
    k = sh_kind(acc)
    return {"store": "store", "async": "copy_async", "tma": "tma_load"}.get(k, getattr(acc, "op", "load"))


def async_proxy(acc) -> bool:
    """A TMA write or a wgmma read: an access of the async proxy, not of a thread."""
    return getattr(acc, "proxy", "generic") == "async"


def distinct_violations(found: list) -> list:
    """One race violation per (line, lines of the two accesses): pairs of statements that meet in
    several ways are reported once."""
    out, seen = [], set()
    for r in found:
        key = (r.location.line, tuple(r.detail.get("lines", [])))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out
