"""tag-assertion: the kernel's `assert` statements hold for every block, thread, value and iteration."""

from __future__ import annotations

from functools import partial

from argus_verify.smt import zops as Z
from argus_verify.smt.diag import src_text
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


def check_assertions(an, timeout) -> list:
    return check_assertion_list(an, timeout, an.asserts)


def check_assertion_list(an, timeout, asserts) -> list:
    # The witness is read from the model here, not by a function of its own: its names (ev, tg)
    # keep the model and the last tag alive until the next violation, and Z3 renumbers freed terms;
    # the later queries' witnesses depend on that numbering (see smt/__init__.py).
    out = []
    for node, stmt, cond, frags, fragenv, sides in asserts:
        names = list(dict.fromkeys(f for _, f, _ in frags))
        build = partial(assertion_query, node=node, cond=cond, frags=frags, fragenv=fragenv, names=names)
        res, q, (S, ctx, inst, t, v, tags) = solve(an, timeout, build)
        span = span_of(node)
        if res.status != "violated":
            proved = stmt.source or src_text(span)
            result = result_from(res, "tag-assertion", span, "tag assertion could not be proved", proved)
            out.append(_vacuous(an, timeout, result, node, frags, fragenv, names))
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
            lhs, rhs, op, _, _ = sides
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
        hint = assertion_hint(path, w)
        out.append(
            ObligationResult(
                "tag-assertion", "violated", span, "tag assertion failed", w, detail, path, hint, expl, res.seconds
            )
        )
    return out


def _vacuous(an, timeout, result, node, frags, fragenv, names) -> ObligationResult:
    """A proof of an assertion over tag components that no point has (the data it reads is untagged,
    or `*` there) checks nothing: vacuous, not proved."""
    comps = sorted({f"tag({fragenv[f].label})[{k}]" for kind, f, k in frags if kind == "tag"})
    if result.status != "proved" or not comps:
        return result
    build = partial(assertion_query, node=node, cond=None, frags=frags, fragenv=fragenv, names=names)
    seen, _, _ = solve(an, timeout, build, validate=False, minimize=False)
    if seen.status != "proved":  # some point has them (or the solver could not tell: no claim)
        return result
    return ObligationResult("tag-assertion", "vacuous", result.location,
                            f"the assertion checks nothing: {', '.join(comps)} is untagged or '*' wherever it "
                            "runs (declare the input's tag there)", detail={"components": comps},
                            seconds=result.seconds + seen.seconds)


def assertion_query(q, node, cond, frags, fragenv, names):
    """A point where the assertion's tags are present and sound but its condition fails (with
    `cond` None: where they are present at all)."""
    S, ctx, inst, t = point(q, node)
    nvals = fragenv[names[0]].typ.values if names else 1
    v = value_var(q, nvals)
    tags = {n: fragenv[n].tag(S, ctx, inst, t, v) for n in names}
    present = [tags[f].present(k) for kind, f, k in frags if kind == "tag"]
    q.add(node.guard(S, ctx, inst, t), *present, *[tags[n].cons for n in names])
    if cond is not None:  # (an element already wrong upstream is reported there, once)
        q.add(*[Z.Not(tags[n].err) for n in names], Z.Not(Z.i2b(cond.fn(S, ctx, inst, t, v))))
    return S, ctx, inst, t, v, tags


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
    return "follow the path: the first hop whose coordinates differ from what the assertion expects is the bug"
