"""The obligations: each becomes a query whose unsatisfiability is the proof.

Formulas (every one also assumes sizes in 1..2**20, `requires`, and ranges for blocks, loop
counters, threads and values; `err` marks elements already wrong because of an upstream
violation, so each bug is reported at its root):

* tag-assertion   exists point: guard, tags present, not err, not cond
                  (and, as implicit assertions, the agreement rules of elementwise, reduce, mma)
* output-contract exists point: stored in bounds, not err, not (tag with `*` dropped == declared)
* output-once     exists two distinct (block, thread, statement/iteration) writing one element;
                  exists an in-bounds element that no (block, thread, value, iteration) writes
* bounds          exists point: executed, unmasked, coordinate outside the tensor / allocation
* race            exists two threads, two accesses to one shared offset, one a write, not
                  ordered by a barrier (async copies: by a retiring wait then a barrier)
* barrier-divergence  exists two threads of a block that disagree on the barrier's guard
* uninitialised-read  exists a read with no write before it, or whose last write is an async
                  copy not yet retired by a wait
* bank-conflict   exists two lanes of one warp, one access phase, same bank, different words
* uncoalesced     a warp's access instruction touches more 32-byte sectors than needed
"""

from __future__ import annotations

import math

import numpy as np
import z3

from argus_verify import ir
from argus_verify.diagnostics import NO_SPAN
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.analysis import NP, View, boxes_of, src_text
from argus_verify.smt.query import Ev, Query, exists_check, solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import FALSE, OPS, TRUE, bv

# ---------------------------------------------------------------------------------------------
# helpers


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
        return "none: a constant"
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


# ---------------------------------------------------------------------------------------------
# tag assertions


def check_assertions(an, timeout) -> list:
    out = []
    for node, stmt, cond, frags, fragenv, sides in an.asserts:
        names = list(dict.fromkeys(f for _, f, _ in frags))

        def build(q, node=node, cond=cond, frags=frags, fragenv=fragenv, names=names):
            S, ctx, inst, t = point(q, node)
            nvals = fragenv[names[0]].typ.values if names else 1
            v = value_var(q, nvals)
            tags = {n: fragenv[n].tag(S, ctx, inst, t, v) for n in names}
            present = [tags[f].present(k) for kind, f, k in frags if kind == "tag"]
            q.add(
                node.guard(S, ctx, inst, t),
                *present,
                *[Z.Not(tags[n].err) for n in names],
                *[tags[n].cons for n in names],
            )
            q.add(Z.Not(Z.i2b(cond.fn(S, ctx, inst, t, v))))
            return S, ctx, inst, t, v, tags

        res, q, (S, ctx, inst, t, v, tags) = solve(an, timeout, build)
        span = span_of(node)
        if res.status != "violated":
            out.append(
                result_from(
                    res,
                    "tag-assertion",
                    span,
                    "tag assertion could not be proved",
                    stmt.source or src_text(span),
                )
            )
            continue
        ev = res.ev
        w = witness_base(an, ev, ctx, inst, t, v)
        detail = {"tags": {n: tag_value(ev, tags[n]) for n in names}}
        expl = []
        if names:
            f0 = fragenv[names[0]]
            coord = [ev.int(c) for c in f0.typ.coords.coords(t, v, OPS)]
            w["element"] = {"value": ev.int(v), "tile": f0.label, "coord": coord}
            w["fragment"] = f0.name
        if sides is not None:
            lhs, rhs, op, ltxt, rtxt = sides
            detail["lhs"] = ev.int(lhs.fn(S, ctx, inst, t, v))
            detail["rhs"] = ev.int(rhs.fn(S, ctx, inst, t, v))
            detail["relation"] = op
        path = []
        for n in names:
            tg = tags[n]
            src = source_of(tg.trace, ev)
            expl.append(
                f"{fragenv[n].label}[value {ev.int(v)}] of thread {ev.int(t)} holds {src} "
                f"(tag {fmt_tag(tag_value(ev, tg))})"
            )
            if not path:
                path = trace_path(tg.trace, ev)
        if sides is not None:
            expl.append(f"{sides[3]} = {detail['lhs']}, but {sides[4]} = {detail['rhs']} (needs {sides[2]})")
        out.append(
            ObligationResult(
                "tag-assertion",
                "violated",
                span,
                "tag assertion failed",
                w,
                detail,
                path,
                assertion_hint(path, w),
                expl,
                res.seconds,
            )
        )
    return out


def assertion_hint(path, w) -> str:
    for hop in path:
        if hop["op"] in ("copy_async", "store") and "written at" in hop["to"]:
            return (
                f"the element was written at line {hop['line']} "
                f"({hop['to'].split('(written at ')[-1].rstrip(')')}) "
                f"but is read at line {w.get('statement', {}).get('line', '?')} with "
                + ", ".join(f"{k} = {v}" for k, v in w.get("loop", {}).items())
                + ": check the stage (buffer) index of the read against the write, and the tile the "
                "producer copies"
            )
    return (
        "follow the path: the first hop whose coordinates differ from what the assertion expects is the bug"
    )


# ---------------------------------------------------------------------------------------------
# implicit assertions: elementwise / reduce / mma agreement

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


def check_agreements(an, timeout) -> list:
    out = []
    for ck in an.checks:
        parts = getattr(ck.fn, "parts", (None,))
        results = []
        for part in parts:

            def build(q, ck=ck, part=part):
                S, ctx, inst, t = point(q, ck.node)
                v = value_var(q, ck.typ.values)
                r = ck.fn(S, ctx, inst, t, v, part) if part is not None else ck.fn(S, ctx, inst, t, v)
                q.add(ck.node.guard(S, ctx, inst, t), r["cons"], r["bad"])
                return ctx, inst, t, v, r

            res, q, terms = solve(an, timeout, build)
            if res.status == "violated" and "approx" in terms[4] and res.ev.is_true(terms[4]["approx"]):
                res.status = "unknown"
                res.reason = (
                    "the combined elements agree but mix tagged and untagged (or `*`) elements; the "
                    "encoding keeps one representative per group and cannot conclude"
                )
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
            out.append(
                result_from(
                    res, "tag-assertion", span, f"{ck.kind} tag agreement could not be proved", ck.detail
                )
            )
            continue
        res, (ctx, inst, t, v, r) = bad[0]
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
        out.append(
            ObligationResult(
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
        )
    return out


# ---------------------------------------------------------------------------------------------
# output contracts


def contract_match(an, tg: V.TagVal, declared: list):
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


def store_elem(an, acc, S, ctx, inst, t, v):
    c = acc.coords.coords(t, v, OPS)
    e = acc.view.elem(S, ctx, inst, t, c)
    return e, an.in_tensor(acc.tensor, e, S)


def check_contracts(an, timeout) -> list:
    out = []
    for acc, frag in an.out_stores:
        decl = an.tagdecls.get(acc.tensor)
        if decl is None:
            continue

        def build(q, acc=acc, frag=frag, decl=decl):
            S, ctx, inst, t = point(q, acc.node)
            v = value_var(q, acc.values)
            e, inb = store_elem(an, acc, S, ctx, inst, t, v)
            tg = frag.tag(S, ctx, inst, t, v)
            declared = [an.term(c, dict(zip(decl.index_vars, e, strict=True)), S) for c in decl.components]
            q.add(
                acc.executes(S, ctx, inst, t),
                inb,
                Z.Not(tg.err),
                tg.cons,
                Z.Not(contract_match(an, tg, declared)),
            )
            return ctx, inst, t, v, e, tg, declared

        res, q, (ctx, inst, t, v, e, tg, declared) = solve(an, timeout, build)
        span = span_of(acc.node)
        if res.status != "violated":
            out.append(
                result_from(
                    res,
                    "output-contract",
                    span,
                    "output contract could not be proved",
                    f"{acc.tensor} receives the declared tags",
                )
            )
            continue
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
        out.append(
            ObligationResult(
                "output-contract",
                "violated",
                span,
                "output contract violated",
                w,
                detail,
                trace_path(tg.trace, ev),
                hint,
                expl,
                res.seconds,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# once: uniqueness and coverage


def check_once(an, timeout) -> list:
    out = []
    for decl in an.k.tags:
        if not decl.once:
            continue
        stores = [acc for acc, _ in an.out_stores if acc.tensor == decl.tensor]
        if not stores:
            tp = an.tensors[decl.tensor]
            out.append(
                ObligationResult(
                    "output-once",
                    "violated",
                    decl.span,
                    f"output {decl.tensor} is never written",
                    {},
                    {},
                    [],
                    f"store a value into {tp.name}",
                )
            )
            continue
        uniq = once_unique(an, decl, stores, timeout)
        out += uniq
        cover = once_cover(an, decl, stores, timeout)
        if not (
            cover.status == "unknown"
            and "overlap" in cover.message
            and any(r.status == "violated" for r in uniq)
        ):
            out.append(cover)
    return out


def once_unique(an, decl, stores, timeout) -> list:
    out = []
    for i, a in enumerate(stores):
        for b in stores[i:]:

            def build(q, a=a, b=b):
                S = q.S
                ctx1, ctx2 = an.new_ctx(S, "block"), an.new_ctx(S, "block2")
                x1 = P.new_inst(S, ctx1, a.node, "x")
                x2 = P.new_inst(S, ctx2, b.node, "y")
                t1, t2, v1, v2 = S.var("t1"), S.var("t2"), S.var("v1"), S.var("v2")
                q.add(
                    ctx1.cons,
                    ctx2.cons,
                    x1.cons,
                    x2.cons,
                    t1 >= 0,
                    t1 < an.T,
                    t2 >= 0,
                    t2 < an.T,
                    v1 >= 0,
                    v1 < a.values,
                    v2 >= 0,
                    v2 < b.values,
                )
                q.point += (
                    list(ctx1.block)
                    + list(ctx2.block)
                    + list(x1.cnt.values())
                    + list(x2.cnt.values())
                    + [t1, t2, v1, v2]
                )
                e1, in1 = store_elem(an, a, S, ctx1, x1, t1, v1)
                e2, in2 = store_elem(an, b, S, ctx2, x2, t2, v2)
                distinct = [
                    Z.Or(*[Z.Ne(p, r) for p, r in zip(ctx1.block, ctx2.block, strict=True)]),
                    Z.Ne(t1, t2),
                ]
                if a is b:
                    distinct.append(Z.Not(P.same_instance(x1, x2)))
                else:
                    distinct.append(TRUE)
                q.add(
                    a.executes(S, ctx1, x1, t1),
                    b.executes(S, ctx2, x2, t2),
                    in1,
                    in2,
                    *[Z.Eq(p, r) for p, r in zip(e1, e2, strict=True)],
                    Z.Or(*distinct),
                )
                return ctx1, ctx2, x1, x2, t1, t2, v1, v2, e1

            res, q, (ctx1, ctx2, x1, x2, t1, t2, v1, v2, e1) = solve(an, timeout, build)
            span = span_of(b.node)
            if res.status != "violated":
                out.append(
                    result_from(
                        res,
                        "output-once",
                        span,
                        "exactly-once could not be proved",
                        f"no element of {decl.tensor} is written twice (lines {a.node.span.line}, "
                        f"{b.node.span.line})",
                    )
                )
                continue
            ev = res.ev
            ge = [ev.int(x) for x in e1]
            w = {
                "sizes": {n: ev.int(x) for n, x in an.sizes.items()},
                "element": {"tensor": decl.tensor, "coord": ge},
                "writers": [],
            }
            for ctx, inst, t, v, acc in ((ctx1, x1, t1, v1, a), (ctx2, x2, t2, v2, b)):
                tt = ev.int(t)
                w["writers"].append(
                    {
                        "block": [ev.int(x) for x in ctx.block],
                        "thread": tt,
                        "warp": tt // 32,
                        "lane": tt % 32,
                        "value": ev.int(v),
                        "line": acc.node.span.line,
                        "loop": {L.var: ev.int(inst.vals[L.var]) for L in acc.node.loops},
                    }
                )
            w["block"] = w["writers"][0]["block"]
            w["threads"] = [w["writers"][0]["thread"], w["writers"][1]["thread"]]
            expl = [
                f"{elem_str(decl.tensor, ge)} is written by "
                + " and by ".join(
                    f"block {tuple(x['block'][:2])} thread {x['thread']} value {x['value']} "
                    f"(line {x['line']}" + "".join(f", {k} = {vv}" for k, vv in x["loop"].items()) + ")"
                    for x in w["writers"]
                )
            ]
            out.append(
                ObligationResult(
                    "output-once",
                    "violated",
                    span,
                    f"an element of {decl.tensor} is written twice",
                    w,
                    {"element": ge},
                    [],
                    "tiles of different blocks (or "
                    "iterations, or threads holding copies of one element) overlap: check "
                    "the tile offsets, or store from one thread with where=",
                    expl,
                    res.seconds,
                )
            )
    return out


def skolem_writer(an, acc):
    """For an output store: a function from an element to the only (block, iteration, tile
    coordinate) that could write it, when the view's starts are affine with one block id or loop
    variable per dimension. Returns (fn, exact) or (None, reason)."""
    used = {}
    rank = len(acc.view.items)
    for d, (_kind, iv, _ext) in enumerate(acc.view.items):
        if iv.lin is None:
            return None, f"the start of dimension {d} of the store is not affine"
        atoms = {a: c for a, c in iv.lin[0].items() if a[0] in ("blk", "loop", "thr")}
        if any(a[0] == "thr" for a in atoms):
            return None, "the store's view depends on the thread"
        if len(atoms) > 1:
            return None, f"dimension {d} of the store mixes several block ids / loop variables"
        for a, c in atoms.items():
            if a in used or c <= 0:
                return None, "a block id or loop variable is used in several dimensions (or negatively)"
            used[a] = (d, c)
    loops = {L.var: L for L in acc.node.loops}
    exact = True
    for a, (d, c) in used.items():
        ext = acc.view.items[d][2]
        step = loops[a[1]].step if a[0] == "loop" else 1
        if c * step < ext:
            exact = False
    # which tile coordinates the statement writes (every thread, value, where=, thread conditions)
    table = acc.coords.coord_table()
    tile = acc.view.tile
    tconds = []
    for c, pos in acc.node.conds:
        if c.uniform:
            continue
        if c.np_fn is None:
            return None, "the store's condition mixes the thread with other values"
        tconds.append((c, pos))
    tt = np.arange(an.T, dtype=np.int64)
    live = np.ones(an.T, dtype=bool)
    for c, pos in tconds:
        x = np.broadcast_to(np.asarray(c.np_fn(tt)) != 0, tt.shape)
        live &= x if pos else ~x
    if acc.where is not None:
        if acc.where.uniform:
            pass
        elif acc.where.np_fn is None:
            return None, "where= mixes the thread with other values"
        else:
            live &= np.broadcast_to(np.asarray(acc.where.np_fn(tt)) != 0, tt.shape)
    pts = {tuple(int(x) for x in table[t, v]) for t in np.nonzero(live)[0] for v in range(table.shape[1])}
    full = len(pts) == math.prod(tile)
    boxes = None if full else boxes_of(pts)

    def lin_eval(lin, skip, S):
        total = bv(lin[1])
        for a, c in lin[0].items():
            if a == skip:
                continue
            if a[0] == "size":
                total = Z.add(total, Z.mul(an.sizes[a[1]], bv(c)))
            elif a[0] == "param":
                total = Z.add(total, Z.mul(an.params[a[1]], bv(c)))
            else:
                return None
        return total

    def fn(S, x):
        blocks = [bv(0), bv(0), bv(0)]
        ok = []
        for a, (d, c) in used.items():
            if a[0] == "blk":
                rest = lin_eval(acc.view.items[d][1].lin, a, S)
                blocks[a[1]] = Z.floordiv(Z.sub(x[d], rest), bv(c))
        ctx = V.Ctx(blocks, TRUE)
        for g, b in zip(an.grid, blocks, strict=True):
            ok += [Z.Le(bv(0), b), Z.Lt(b, g.fn(S, None, None, None))]
        inst = V.Inst(acc.node)
        for L in acc.node.loops:
            start, trips = L.bounds(S, ctx, inst)
            a = ("loop", L.var)
            if a in used:
                d, c = used[a]
                rest = lin_eval(acc.view.items[d][1].lin, a, S)
                if rest is None:
                    return None
                m = Z.floordiv(Z.sub(Z.sub(x[d], rest), Z.mul(start, bv(c))), bv(c * L.step))
            else:
                m = bv(0)
            inst.cnt[L.var] = m
            inst.vals[L.var] = Z.add(start, Z.mul(m, bv(L.step)))
            ok += [Z.Le(bv(0), m), Z.Lt(m, trips)]
        coords = []
        for d, (kind, iv, ext) in enumerate(acc.view.items):
            off = Z.sub(x[d], iv.fn(S, ctx, inst, None))
            if kind == "slice":
                coords.append(off)
                ok += [Z.Le(bv(0), off), Z.Lt(off, bv(ext))]
            else:
                ok.append(Z.Eq(off, bv(0)))
        if boxes is not None:
            ok.append(
                Z.Or(
                    *[
                        Z.And(
                            *[
                                z
                                for lo, hi, y in zip(b[0], b[1], coords, strict=True)
                                for z in (Z.Le(bv(lo), y), Z.Lt(y, bv(hi)))
                            ]
                        )
                        for b in boxes
                    ]
                )
            )
        for c, pos in acc.node.conds:
            if c.uniform:
                y = Z.i2b(c.fn(S, ctx, inst, None))
                ok.append(y if pos else Z.Not(y))
        if acc.where is not None and acc.where.uniform:
            ok.append(Z.i2b(acc.where.fn(S, ctx, inst, None)))
        return Z.And(*ok), ctx, inst, coords

    if rank != len(an.tensor_dims[acc.tensor]):
        return None, "view rank"
    return (fn, exact), ""


def once_cover(an, decl, stores, timeout):
    span = decl.span
    sk = []
    for acc in stores:
        f, why = skolem_writer(an, acc)
        if f is None:
            return ObligationResult(
                "output-once",
                "unknown",
                span,
                f"coverage of {decl.tensor} is beyond the encoding: {why} (line {acc.node.span.line})",
                detail={"reason": why},
            )
        sk.append((acc, f))
    state = {}

    def build(q):
        S = q.S
        dims = an.tensor_dims[decl.tensor]
        x = [S.var(f"x{d}") for d in range(len(dims))]
        q.point += x
        q.add(*[z for xi, d in zip(x, dims, strict=True) for z in (xi >= 0, xi < d.fn(S, None, None, None))])
        exact = True
        for _acc, (fn, ex) in sk:
            r = fn(S, x)
            if r is None:
                state["bad"] = True
                q.add(FALSE)
                continue
            ok, _, _, _ = r
            q.add(Z.Not(ok))
            exact = exact and ex
        state["exact"] = exact
        return x

    res, q, x = solve(an, timeout, build, validate=False)
    if state.get("bad"):
        return ObligationResult(
            "output-once", "unknown", span, f"coverage of {decl.tensor} is beyond the encoding", detail={}
        )
    exact = state["exact"]
    if res.status == "violated" and not exact:
        res.status, res.reason = "unknown", "tiles overlap, so the element may be written by another block"
    if res.status != "violated":
        return result_from(
            res,
            "output-once",
            span,
            f"coverage of {decl.tensor} could not be proved",
            f"every element of {decl.tensor} is written",
        )
    ev = res.ev
    ge = [ev.int(xi) for xi in x]
    w = {
        "sizes": {n: ev.int(s) for n, s in an.sizes.items()},
        "element": {"tensor": decl.tensor, "coord": ge},
    }
    expl = [f"{elem_str(decl.tensor, ge)} is inside the output but no block, thread or iteration writes it"]
    return ObligationResult(
        "output-once",
        "violated",
        span,
        f"an element of {decl.tensor} is never written",
        w,
        {"element": ge},
        [],
        "the grid or the loop bounds miss a (partial) tile: use cdiv "
        "for the extents and mask the tail instead of dropping it",
        expl,
        res.seconds,
    )


# ---------------------------------------------------------------------------------------------
# bounds


def check_bounds(an, timeout) -> list:
    out = []
    for acc in an.g_accesses:
        if acc.mask:
            out.append(
                ObligationResult(
                    "bounds", "proved", span_of(acc.node), f"{acc.kind} of {acc.tensor} is masked"
                )
            )
            continue

        def build(q, acc=acc):
            S, ctx, inst, t = point(q, acc.node)
            v = value_var(q, acc.values)
            c = acc.coords.coords(t, v, OPS)
            e = acc.view.elem(S, ctx, inst, t, c)
            q.add(acc.executes(S, ctx, inst, t), Z.Not(an.in_tensor(acc.tensor, e, S)))
            return S, ctx, inst, t, v, c, e

        res, q, (S, ctx, inst, t, v, c, e) = solve(an, timeout, build)
        span = span_of(acc.node)
        if res.status != "violated":
            out.append(
                result_from(
                    res,
                    "bounds",
                    span,
                    "bounds could not be proved",
                    f"{acc.kind} of {acc.tensor} stays in bounds",
                )
            )
            continue
        ev = res.ev
        w = witness_base(an, ev, ctx, inst, t, v)
        ge = [ev.int(x) for x in e]
        shape = [ev.int(d.fn(S, None, None, None)) for d in an.tensor_dims[acc.tensor]]
        w["element"] = {"value": ev.int(v), "tile": acc.tensor, "coord": [ev.int(x) for x in c]}
        detail = {"address": ge, "extent": shape, "tensor": acc.tensor}
        expl = [f"{acc.kind} of {elem_str(acc.tensor, ge)}: outside {acc.tensor}'s shape {shape} (no mask)"]
        out.append(
            ObligationResult(
                "bounds",
                "violated",
                span,
                f"out-of-bounds {acc.kind} of {acc.tensor}",
                w,
                detail,
                [],
                "add mask=True (and a where= for partial tiles), or a requires "
                "clause that makes the sizes multiples of the tile",
                expl,
                res.seconds,
            )
        )
    for name, info in an.allocs.items():
        for acc in an.sh_writes[name] + an.sh_reads[name]:
            out.append(shared_bounds(an, info, acc, timeout))
    return out


def sh_addr(an, acc, S, ctx, inst, t, v):
    c = acc.coords.coords(t, v, OPS)
    e = acc.view.elem(S, ctx, inst, t, c)
    return e, acc.alloc.offset(e), an.in_shape(e, acc.alloc.shape)


def sh_exec(acc, S, ctx, inst, t):
    if hasattr(acc, "executes"):
        return acc.executes(S, ctx, inst, t)
    return acc.node.guard(S, ctx, inst, t)


def sh_kind(acc) -> str:
    if hasattr(acc, "kind") and acc.kind in ("store", "async"):
        return acc.kind
    return "read"


def sh_opname(acc) -> str:
    k = sh_kind(acc)
    return {"store": "store", "async": "copy_async"}.get(k, getattr(acc, "op", "load"))


def shared_bounds(an, info, acc, timeout):
    def build(q):
        S, ctx, inst, t = point(q, acc.node)
        v = value_var(q, acc.values)
        e, off, inshape = sh_addr(an, acc, S, ctx, inst, t, v)
        q.add(sh_exec(acc, S, ctx, inst, t), Z.Not(inshape))
        return ctx, inst, t, v, e, off

    res, q, (ctx, inst, t, v, e, off) = solve(an, timeout, build)
    span = span_of(acc.node)
    if res.status != "violated":
        return result_from(
            res,
            "bounds",
            span,
            "shared bounds could not be proved",
            f"{sh_opname(acc)} stays inside {info.name}",
        )
    ev = res.ev
    w = witness_base(an, ev, ctx, inst, t, v)
    ge = [ev.int(x) for x in e]
    detail = {"address": ge, "extent": list(info.shape), "offset": ev.int(off), "cosize": info.cosize}
    expl = [
        f"{sh_opname(acc)} of {elem_str(info.name, ge)} (offset {ev.int(off)}): outside {info.name}'s shape "
        f"{list(info.shape)} (cosize {info.cosize})"
    ]
    return ObligationResult(
        "bounds",
        "violated",
        span,
        f"out-of-bounds shared access to {info.name}",
        w,
        detail,
        [],
        "the stage / tile index runs past the allocation: check the index arithmetic (e.g. % STAGES)",
        expl,
        res.seconds,
    )


# ---------------------------------------------------------------------------------------------
# barrier divergence


def check_divergence(an, timeout) -> list:
    out = []
    for b in an.barriers:
        span = span_of(b)
        if not b.conds or b.uniform_guard:
            out.append(
                ObligationResult(
                    "barrier-divergence", "proved", span, "barrier reached by every thread of the block"
                )
            )
            continue

        def build(q, b=b):
            S, ctx, inst, t = point(q, b)
            t2 = S.var("t2")
            q.add(t2 >= 0, t2 < an.T, b.guard(S, ctx, inst, t), Z.Not(b.guard(S, ctx, inst, t2)))
            q.point.append(t2)
            return ctx, inst, t, t2

        res, q, (ctx, inst, t, t2) = solve(an, timeout, build, validate=False)
        if res.status != "violated":
            out.append(
                result_from(
                    res,
                    "barrier-divergence",
                    span,
                    "barrier uniformity could not be proved",
                    "barrier reached by every thread of the block",
                )
            )
            continue
        ev = res.ev
        w = witness_base(an, ev, ctx, inst, t)
        w["threads"] = [ev.int(t), ev.int(t2)]
        del w["thread"], w["warp"], w["lane"]
        expl = [
            f"thread {ev.int(t)} reaches the barrier, thread {ev.int(t2)} does not: the block deadlocks or "
            "misbehaves"
        ]
        out.append(
            ObligationResult(
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
        )
    return out


# ---------------------------------------------------------------------------------------------
# races


def check_races(an, timeout) -> list:
    out = []
    for name in an.allocs:
        writes = an.sh_writes[name]
        reads = an.sh_reads[name]
        accs = writes + reads
        pairs = [(x, y) for x in accs for y in accs if sh_kind(x) != "read" or sh_kind(y) != "read"]
        found = []
        worst = None
        for x, y in pairs:
            r = race_pair(an, x, y, timeout)
            if r.status == "violated":
                found.append(r)
            elif r.status == "unknown" and worst is None:
                worst = r
        span = span_of(an.allocs[name].node)
        if found:
            seen = set()
            for r in found:
                key = (r.location.line, tuple(r.detail.get("lines", [])))
                if key not in seen:
                    seen.add(key)
                    out.append(r)
        elif worst is not None:
            out.append(worst)
        else:
            out.append(ObligationResult("race", "proved", span, f"no data race on {name}"))
    return out


def race_pair(an, X, Y, timeout):
    kx, ky = sh_kind(X), sh_kind(Y)

    def build(q):
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
        kx, ky = sh_kind(X), sh_kind(Y)
        if kx == "async":
            visible = an.visible_after_wait(S, ctx, x, y)
            if ky == "read":
                cond = Z.And(an.retired(S, ctx, x, y), Z.Not(visible))
            else:
                cond = Z.Not(visible)
        else:
            cond = Z.Not(an.barrier_between(S, ctx, x, y))
        q.add(sh_exec(X, S, ctx, x, t1), sh_exec(Y, S, ctx, y, t2), in1, in2, Z.Eq(o1, o2), order, cond)

        def validate(model):
            def build(S2):
                parts = []
                if kx == "async":
                    g = an.group_of(S2, ctx, x)
                    for b in an.definite_barriers():
                        bi = P.new_inst(S2, ctx, b, "vb")
                        for wn in an.waits:
                            if not wn.uniform_guard:
                                continue
                            wi = P.new_inst(S2, ctx, wn, "vw")
                            parts.append(
                                Z.And(
                                    bi.cons,
                                    wi.cons,
                                    b.guard(S2, ctx, bi, None),
                                    wn.guard(S2, ctx, wi, None),
                                    P.before(x, wi),
                                    P.before(wi, bi),
                                    P.before(bi, y),
                                    Z.Lt(g, Z.sub(an.group_of(S2, ctx, wi), bv(wn.stmt.pending))),
                                )
                            )
                else:
                    for b in an.definite_barriers():
                        bi = P.new_inst(S2, ctx, b, "vb")
                        parts.append(
                            Z.And(bi.cons, b.guard(S2, ctx, bi, None), P.before(x, bi), P.before(bi, y))
                        )
                return Z.Or(*parts)

            return "a barrier separates the accesses" if exists_check(q, model, build) else None

        q.validators.append(validate)
        return ctx, x, y, t1, t2, v1, v2, e1, o1

    res, q, (ctx, x, y, t1, t2, v1, v2, e1, o1) = solve(an, timeout, build)
    span = span_of(Y.node)
    if res.status != "violated":
        return result_from(res, "race", span, "race freedom could not be proved", "no race")
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
        tt = ev.int(t)
        w["accesses"].append(
            {
                "op": sh_opname(acc),
                "line": acc.node.span.line,
                "thread": tt,
                "warp": tt // 32,
                "lane": tt % 32,
                "value": ev.int(v),
                "loop": {L.var: ev.int(inst.vals[L.var]) for L in acc.node.loops},
            }
        )
    w["loops"] = {f"line {a['line']}": a["loop"] for a in w["accesses"]}

    def acc_s(a):
        it = "".join(f", {k} = {vv}" for k, vv in a["loop"].items())
        return f"thread {a['thread']} {a['op']}s {elem_str(X.alloc.name, ge)} at line {a['line']}{it}"

    expl = [acc_s(w["accesses"][0]) + ",", "  then " + acc_s(w["accesses"][1]) + ", with no barrier between"]
    if kx == "async":
        expl[-1] = (
            "  then " + acc_s(w["accesses"][1]) + ": the copy was not retired by a wait and then made "
            "visible by a barrier in between"
        )
    kinds = f"{sh_opname(X)}/{sh_opname(Y)}"
    if kx == "read":
        hint = (
            f"write-after-read: the buffer is overwritten at line {lines[1]} while other threads may "
            f"still read it at line {lines[0]}: add barrier() between them (e.g. at the end of the loop body)"
        )
    elif ky == "read":
        hint = f"add barrier() between the write at line {lines[0]} and the read at line {lines[1]}" + (
            " (after the wait)" if kx == "async" else ""
        )
    else:
        hint = f"two writes to one element at lines {lines[0]} and {lines[1]} are not ordered by a barrier"
    return ObligationResult(
        "race",
        "violated",
        span,
        f"data race on {X.alloc.name} ({kinds})",
        w,
        {"lines": lines, "offset": ev.int(o1), "element": ge},
        [],
        hint,
        expl,
        res.seconds,
    )


# ---------------------------------------------------------------------------------------------
# uninitialised reads


def check_uninit(an, timeout) -> list:
    out = []
    for name in an.allocs:
        for rd in an.sh_reads[name]:
            r1 = uninit_nowrite(an, rd, timeout)
            r2 = uninit_unretired(an, rd, timeout)
            bad = [r for r in (r1, r2) if r.status == "violated"]
            unk = [r for r in (r1, r2) if r.status == "unknown"]
            if bad:
                out.append(bad[0])
            elif unk:
                out.append(unk[0])
            else:
                out.append(
                    ObligationResult(
                        "uninitialised-read",
                        "proved",
                        span_of(rd.node),
                        f"every element read from {name} was written and has landed",
                        seconds=r1.seconds + r2.seconds,
                    )
                )
    return out


def uninit_nowrite(an, rd, timeout):
    def build(q):
        S, ctx, r, t = point(q, rd.node)
        v = value_var(q, rd.values)
        e, off, inshape = sh_addr(an, rd, S, ctx, r, t, v)
        q.add(rd.node.guard(S, ctx, r, t), inshape)
        D = an.window
        for W in an.sh_writes[rd.alloc.name]:
            if W.footprint() is None:
                continue
            for k_inst, ex in P.recent_before(S, ctx, W.node, r, D):
                q.add(
                    Z.Not(
                        Z.And(
                            ex,
                            W.executes_uniform(S, ctx, k_inst),
                            P.before(k_inst, r),
                            W.covers(S, ctx, k_inst, e),
                        )
                    )
                )

        def validate(model):
            def build(S2):
                parts = []
                for K in an.sh_writes[rd.alloc.name]:
                    k = P.new_inst(S2, ctx, K.node, "vk")
                    tk, vk = S2.var("vtk"), S2.var("vvk")
                    _, koff, kin = K.addr(S2, ctx, k, tk, vk)
                    parts.append(
                        Z.And(
                            k.cons,
                            tk >= 0,
                            tk < an.T,
                            vk >= 0,
                            vk < K.values,
                            kin,
                            Z.Eq(koff, off),
                            K.executes(S2, ctx, k, tk),
                            P.before(k, r),
                        )
                    )
                return Z.Or(*parts)

            return "a write precedes the read" if exists_check(q, model, build) else None

        q.validators.append(validate)
        return ctx, r, t, v, e, off

    res, q, (ctx, r, t, v, e, off) = solve(an, timeout, build, validate=False)
    span = span_of(rd.node)
    if res.status != "violated":
        return result_from(res, "uninitialised-read", span, "initialisation could not be proved", "ok")
    ev = res.ev
    w = witness_base(an, ev, ctx, r, t, v)
    ge = [ev.int(x) for x in e]
    w["element"] = {
        "value": ev.int(v),
        "tile": rd.label,
        "coord": [ev.int(x) for x in rd.coords.coords(t, v, OPS)],
    }
    w["fragment"] = rd.name
    expl = [
        f"{rd.label}[value {ev.int(v)}] of thread {ev.int(t)} reads {elem_str(rd.alloc.name, ge)}, which no "
        "write before this point produced"
    ]
    return ObligationResult(
        "uninitialised-read",
        "violated",
        span,
        f"read of {rd.alloc.name} that no write produced",
        w,
        {"element": ge, "offset": ev.int(off)},
        [],
        "the buffer (or this stage of it) is read before anything was stored or copied into "
        "it: check the stage index and the prologue",
        expl,
        res.seconds,
    )


def uninit_unretired(an, rd, timeout):
    asyncs = [W for W in an.sh_writes[rd.alloc.name] if W.kind == "async"]
    span = span_of(rd.node)
    if not asyncs:
        return ObligationResult("uninitialised-read", "proved", span, "no async copy into this buffer")

    def build(q):
        S, ctx, r, t = point(q, rd.node)
        v = value_var(q, rd.values)
        tg = None
        e, off, inshape = sh_addr(an, rd, S, ctx, r, t, v)
        q.add(rd.node.guard(S, ctx, r, t), inshape)
        tg = an.resolve(S, ctx, rd, r, t, e)
        reads = S.memo["__reads__"]
        _, _, _, _, _, sel, events = reads[-1]
        alts = []
        for i, (W, w_inst, _tw, _vw, valid, _ok) in enumerate(events):
            if W.kind != "async":
                continue
            alts.append(Z.And(Z.Eq(sel, bv(i)), valid, Z.Not(an.retired(S, ctx, w_inst, r))))
        q.add(tg.cons, Z.Or(*alts))

        def validate(model):
            ev = Ev(model)
            i = ev.int(sel)
            W, w_inst, tw, vw, valid, ok = events[i]

            def build(S2):
                g = an.group_of(S2, ctx, w_inst)
                parts = []
                for wn in an.waits:
                    if not wn.uniform_guard:
                        continue
                    wi = P.new_inst(S2, ctx, wn, "vw")
                    parts.append(
                        Z.And(
                            wi.cons,
                            wn.guard(S2, ctx, wi, None),
                            P.before(w_inst, wi),
                            P.before(wi, r),
                            Z.Lt(g, Z.sub(an.group_of(S2, ctx, wi), bv(wn.stmt.pending))),
                        )
                    )
                return Z.Or(*parts)

            return "a wait retires the copy" if exists_check(q, model, build) else None

        q.validators.append(validate)
        return S, ctx, r, t, v, e, tg, sel, events

    res, q, (S, ctx, r, t, v, e, tg, sel, events) = solve(an, timeout, build)
    if res.status != "violated":
        return result_from(res, "uninitialised-read", span, "async-copy completion could not be proved", "ok")
    ev = res.ev
    i = ev.int(sel)
    W, w_inst, tw, vw, valid, ok = events[i]
    w = witness_base(an, ev, ctx, r, t, v)
    ge = [ev.int(x) for x in e]
    w["element"] = {
        "value": ev.int(v),
        "tile": rd.label,
        "coord": [ev.int(x) for x in rd.coords.coords(t, v, OPS)],
    }
    w["fragment"] = rd.name
    wl = {L.var: ev.int(w_inst.vals[L.var]) for L in W.node.loops}
    g = ev.int(an.group_of(S, ctx, w_inst)) if an.commits.exact else None
    it = "".join(f", {k} = {vv}" for k, vv in wl.items())
    who = f"thread {ev.int(tw)}" if tw is not None else "issued"
    expl = [
        f"{rd.label}[value {ev.int(v)}] of thread {ev.int(t)} reads {elem_str(rd.alloc.name, ge)}, "
        f"last written by the copy_async at line {W.node.span.line} ({who}{it}"
        + (f", commit group {g}" if g is not None else "")
        + "), which no wait has retired yet"
    ]
    waits = ", ".join(f"wait({wn.stmt.pending}) at line {wn.span.line}" for wn in an.waits) or "no wait"
    return ObligationResult(
        "uninitialised-read",
        "violated",
        span,
        f"read of {rd.alloc.name} before the async copy that writes it has landed",
        w,
        {
            "element": ge,
            "writer": {
                "line": W.node.span.line,
                "thread": ev.int(tw) if tw is not None else None,
                "loop": wl,
                "group": g,
            },
        },
        trace_path(tg.trace, ev),
        f"the copy is still in flight ({waits}): wait for its group (smaller n in wait(n), "
        "or a wait before the read) — or the read uses the wrong stage",
        expl,
        res.seconds,
    )


# ---------------------------------------------------------------------------------------------
# bank conflicts


def natural_width(acc, info, explicit):
    """Elements per access instruction: `vec=` when given, else the widest aligned run of
    consecutive values that are consecutive in the allocation (what the lowering vectorises)."""
    b = info.bytes
    V_ = acc.values
    if explicit:
        return explicit
    table = acc.coords.coord_table()
    items = acc.view.items
    coords = []
    axis = 0
    for kind, _, _ in items:
        if kind == "slice":
            coords.append(table[..., axis])
            axis += 1
        else:
            coords.append(np.zeros(table.shape[:2], dtype=np.int64))
    try:
        off = np.asarray(info.offset_np(tuple(coords)), dtype=np.int64)
    except Exception:  # noqa: BLE001 - any layout failure means "no vectorisation"
        return 1
    for w in (16 // b, 8 // b, 4 // b, 2 // b, 1):
        if w < 1 or V_ % w:
            continue
        g = off.reshape(off.shape[0], V_ // w, w)
        if np.all(g - g[..., :1] == np.arange(w)) and np.all(g[..., 0] % w == 0):
            return w
    return 1


def check_banks(an, timeout) -> list:
    out = []
    for name, info in an.allocs.items():
        for acc in an.sh_writes[name] + an.sh_reads[name]:
            out.append(bank_conflict(an, info, acc, timeout))
    return out


def bank_conflict(an, info, acc, timeout):
    span = span_of(acc.node)
    b = info.bytes
    ldm = getattr(acc, "op", "") == "ldmatrix"
    explicit = getattr(acc, "vec", None)
    if explicit is None and isinstance(acc.node.stmt, ir.Assign) and isinstance(acc.node.stmt.op, ir.Load):
        explicit = acc.node.stmt.op.vec

    def build(q):
        S = q.S
        ctx = an.new_ctx(S)
        inst = P.new_inst(S, ctx, acc.node, "i")
        warp, l1, l2 = S.var("warp"), S.var("l1"), S.var("l2")
        q.add(
            ctx.cons,
            inst.cons,
            warp >= 0,
            warp < an.T // 32,
            l1 >= 0,
            l1 < 32,
            l2 >= 0,
            l2 < 32,
            Z.Ne(l1, l2),
        )
        q.point += list(ctx.block) + list(inst.cnt.values()) + [warp, l1, l2]
        q.small += list(ctx.block)
        t1, t2 = Z.add(Z.mul(warp, bv(32)), l1), Z.add(Z.mul(warp, bv(32)), l2)
        if ldm:
            # each 8x8 matrix is one phase: lanes 8m..8m+7 give the addresses of its 8 rows
            count = acc.node.stmt.op.count
            q.add(Z.Eq(Z.shr(l1, bv(3)), Z.shr(l2, bv(3))), Z.Lt(Z.shr(l1, bv(3)), bv(count)))

            def row_addr(lane, t):
                m = Z.shr(lane, bv(3))
                r = Z.band(lane, bv(7))
                rows = acc.view.tile[0]
                ro = Z.add(Z.mul(Z.mod(m, bv(2)), bv(8)), r) if rows == 16 else r
                co = Z.mul(Z.floordiv(m, bv(2)), bv(8)) if rows == 16 else bv(0)
                if count == 2:
                    ro, co = Z.add(Z.mul(m, bv(8)), r), bv(0)
                e = acc.view.elem(S, ctx, inst, t, (ro, co))
                return e, info.offset(e)

            e1, o1 = row_addr(l1, t1)
            e2, o2 = row_addr(l2, t2)
            width_bytes = 16
            g = bv(0)
            q.add(acc.node.guard(S, ctx, inst, t1), acc.node.guard(S, ctx, inst, t2))
        else:
            w = natural_width(acc, info, explicit)
            width_bytes = w * b
            g = S.var("g")
            q.add(g >= 0, g < acc.values // w)
            q.point.append(g)
            v = Z.mul(g, bv(w))
            phase = 32 if width_bytes <= 4 else (16 if width_bytes == 8 else 8)
            if phase < 32:
                q.add(Z.Eq(Z.floordiv(l1, bv(phase)), Z.floordiv(l2, bv(phase))))
            e1, o1, in1 = sh_addr(an, acc, S, ctx, inst, t1, v)
            e2, o2, in2 = sh_addr(an, acc, S, ctx, inst, t2, v)
            q.add(sh_exec(acc, S, ctx, inst, t1), sh_exec(acc, S, ctx, inst, t2), in1, in2)
        by1, by2 = Z.mul(o1, bv(b)), Z.mul(o2, bv(b))
        w1, w2 = Z.shr(by1, bv(2)), Z.shr(by2, bv(2))
        q.add(Z.Eq(Z.band(w1, bv(31)), Z.band(w2, bv(31))), Z.Ne(w1, w2))
        return ctx, inst, warp, l1, l2, g, e1, e2, o1, o2, by1, by2, w1, width_bytes

    res, q, (ctx, inst, warp, l1, l2, g, e1, e2, o1, o2, by1, by2, w1, width_bytes) = solve(
        an, timeout, build, validate=False
    )
    if res.status != "violated":
        r = result_from(
            res,
            "bank-conflict",
            span,
            "bank-conflict freedom could not be decided",
            f"{sh_opname(acc)} of {info.name} is free of bank conflicts",
        )
        return r
    ev = res.ev
    wv, a1, a2 = ev.int(warp), ev.int(l1), ev.int(l2)
    bank = ev.int(Z.band(w1, bv(31)))
    wit = {
        "block": [ev.int(x) for x in ctx.block],
        "warp": wv,
        "lanes": [a1, a2],
        "threads": [32 * wv + a1, 32 * wv + a2],
        "loop": {L.var: ev.int(inst.vals[L.var]) for L in acc.node.loops},
        "sizes": {n: ev.int(s) for n, s in an.sizes.items()},
    }
    if not ldm:
        wit["value"] = ev.int(g) * (width_bytes // b)
    c1, c2 = [ev.int(x) for x in e1], [ev.int(x) for x in e2]
    detail = {
        "bank": bank,
        "addresses": [ev.int(by1), ev.int(by2)],
        "offsets": [ev.int(o1), ev.int(o2)],
        "elements": [c1, c2],
        "access_bytes": width_bytes,
    }
    expl = [
        f"lane {a1} accesses {elem_str(info.name, c1)} (byte {ev.int(by1)}) and lane {a2} accesses "
        f"{elem_str(info.name, c2)} (byte {ev.int(by2)}): both in bank {bank}, different words"
        + (f" ({width_bytes}-byte accesses)" if width_bytes > 4 else "")
    ]
    return ObligationResult(
        "bank-conflict",
        "warning",
        span,
        f"shared-memory bank conflict in {sh_opname(acc)} of {info.name}",
        wit,
        detail,
        [],
        "swizzle the shared layout (layout=Swizzle(B, M, S) o "
        "...) or pad the rows so that the lanes of one access fall in different banks",
        expl,
        res.seconds,
    )


# ---------------------------------------------------------------------------------------------
# coalescing (evaluated exhaustively over each warp of the tile)


def check_coalescing(an) -> list:
    out = []
    for acc in an.g_accesses:
        r = coalescing(an, acc)
        if r is not None:
            out.append(r)
    return out


def coalescing(an, acc):
    span = span_of(acc.node)
    b = ir.DTYPE_BYTES[acc.dtype]
    table = acc.coords.coord_table()  # [T, V, rank]
    T, Vn = table.shape[:2]
    tt = np.arange(T, dtype=np.int64)
    starts = []
    axis = 0
    coords = []
    for kind, iv, _ in acc.view.items:
        if iv.uniform:
            s = np.zeros(T, dtype=np.int64)
        elif iv.np_fn is not None:
            s = np.broadcast_to(np.asarray(iv.np_fn(tt), dtype=np.int64), (T,))
        else:
            return None
        starts.append(s)
        if kind == "slice":
            coords.append(s[:, None] + table[..., axis])
            axis += 1
        else:
            coords.append(np.broadcast_to(s[:, None], (T, Vn)))
    rowkey = np.zeros((T, Vn), dtype=np.int64)
    for c in coords[:-1]:
        rowkey = rowkey * 1_000_003 + c
    col = coords[-1]
    explicit = getattr(acc, "vec", None)
    if acc.kind == "copy_async":
        explicit = getattr(acc.node.stmt, "vec", None)
    elif isinstance(acc.node.stmt, ir.Assign) and isinstance(acc.node.stmt.op, ir.Load):
        explicit = acc.node.stmt.op.vec
    w = explicit
    if w is None:
        w = 1
        for cand in (16 // b, 8 // b, 4 // b, 2 // b):
            if cand >= 1 and Vn % cand == 0:
                g = col.reshape(T, Vn // cand, cand)
                rk = rowkey.reshape(T, Vn // cand, cand)
                if (
                    np.all(g - g[..., :1] == np.arange(cand))
                    and np.all(g[..., 0] % cand == 0)
                    and np.all(rk == rk[..., :1])
                ):
                    w = cand
                    break
    row_bytes = acc.view.tile[-1] * b if acc.view.tile else b
    worst = None
    for warp in range(T // 32):
        lanes = slice(32 * warp, 32 * warp + 32)
        for g in range(Vn // w):
            vs = slice(g * w, g * w + w)
            rk = rowkey[lanes, vs]
            cc = col[lanes, vs]
            elems = set(zip(rk.ravel().tolist(), cc.ravel().tolist(), strict=True))
            sectors = {(r, (c * b) // 32) for r, c in elems}
            need = -(-(len(elems) * b) // min(32, row_bytes))
            if len(sectors) > need and (worst is None or len(sectors) - need > worst[0]):
                worst = (len(sectors) - need, warp, g * w, len(sectors), need, len(elems) * b)
    if worst is None:
        return ObligationResult("uncoalesced", "proved", span, f"{acc.kind} of {acc.tensor} is coalesced")
    _, warp, v0, sec, need, nbytes = worst
    wit = {"warp": warp, "value": v0, "sectors": sec, "minimum": need}
    expl = [
        f"warp {warp}, value {v0}: the 32 lanes touch {sec} 32-byte sectors for {nbytes} bytes (at best "
        f"{need})"
    ]
    return ObligationResult(
        "uncoalesced",
        "warning",
        span,
        f"uncoalesced {acc.kind} of {acc.tensor}",
        wit,
        {"sectors": sec, "minimum": need, "bytes": nbytes, "vector_elems": w},
        [],
        "let consecutive lanes access consecutive addresses along the last axis (thread "
        "stride = vector width in the tv layout), and vectorise (16-byte accesses)",
        expl,
    )


__all__ = [
    "check_assertions",
    "check_agreements",
    "check_contracts",
    "check_once",
    "check_bounds",
    "check_divergence",
    "check_races",
    "check_uninit",
    "check_banks",
    "check_coalescing",
    "View",
    "NP",
    "FALSE",
    "z3",
]
