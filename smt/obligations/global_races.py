"""race, in global memory: two threads write one element of an output, or one thread reads an
element of an output that another thread writes, and nothing orders the two accesses.

Blocks are never ordered with each other, so any such pair in two blocks is a race. In one block a
barrier between the accesses orders them (a `copy_async` read of global memory only once a wait
retired the copy, then a barrier; TMA accesses, which the async proxy performs, never by a barrier
alone). Threads holding copies of one tile element that all store it race too, as in shared
memory (CUDA's memory model forbids it even though the values are equal: store from one thread
with `where=`). Outputs tagged `once` are not queried for two writes: output-once's uniqueness
already claims more (no element written twice by anyone, ordered or not); their reads still are.
"""

from __future__ import annotations

from functools import partial

from argus_verify.smt import program as P
from argus_verify.smt import zops as Z
from argus_verify.smt.obligations.common import distinct_violations, elem_str, result_from, span_of, store_elem
from argus_verify.smt.obligations.once import writer_witness
from argus_verify.smt.query import exists_check, solve
from argus_verify.smt.report import ObligationResult

WRITES = ("store", "tma_store")
ASYNC_PROXY = ("tma_store", "tma_load")


def check_global_races(an, timeout) -> list:
    out = []
    once = {d.tensor for d in an.k.tags if d.once}
    for tensor in (t for t in an.k.tensors if t.output):
        accs = [a for a in an.g_accesses if a.tensor == tensor.name]
        writes = [a for a in accs if a.kind in WRITES]
        reads = [a for a in accs if a.kind not in WRITES]
        if not writes:
            continue
        pairs = [(r, w) for r in reads for w in writes]
        if tensor.name not in once:
            pairs = [(a, b) for i, a in enumerate(writes) for b in writes[i:]] + pairs
        if not pairs:
            continue
        found, worst = [], None
        for a, b in pairs:
            for r in pair_results(an, a, b, timeout):
                if r.status == "violated":
                    found.append(r)
                    break
                if r.status == "unknown" and worst is None:
                    worst = r
        if found:
            out += distinct_violations(found)
        elif worst is not None:
            out.append(worst)
        else:
            what = "reads and writes" if reads else "writes"
            out.append(ObligationResult("race", "proved", span_of(writes[0].node),
                                        f"no data race on {tensor.name} (its {what} in global memory: no two "
                                        "blocks, and no two threads of a block without a barrier between, "
                                        "meet at one element)"))
    return out


def pair_results(an, a, b, timeout):
    """The queries of one pair of accesses, stopping at the first that is not proved: two blocks,
    then two threads of one block in either order."""
    orders = [(a, b)] if a is b else [(a, b), (b, a)]
    for query, x_acc, y_acc in [(cross_block_query, a, b)] + [(same_block_query, x, y) for x, y in orders]:
        res, q, terms = solve(an, timeout, partial(query, an=an, X=x_acc, Y=y_acc), abstract=False)
        span = span_of(y_acc.node)
        if res.status != "violated":
            r = result_from(res, "race", span, f"race freedom of {a.tensor} could not be proved", "")
            yield r
            if r.status != "proved":
                return
            continue
        yield violation(an, res, x_acc, y_acc, terms, span)
        return


def cross_block_query(q, an, X, Y):
    """Two blocks access one element of the tensor, at least one of them writing."""
    S = q.S
    ctx1, ctx2 = an.new_ctx(S, "block"), an.new_ctx(S, "block2")
    x = P.new_inst(S, ctx1, X.node, "x")
    y = P.new_inst(S, ctx2, Y.node, "y")
    t1, t2, v1, v2 = _points(q, an, X, Y)
    apart = Z.Or(*[Z.Ne(p, r) for p, r in zip(ctx1.block, ctx2.block, strict=True)])
    q.add(ctx1.cons, ctx2.cons, x.cons, y.cons, apart)
    q.small += list(ctx1.block) + list(ctx2.block)
    q.point += list(ctx1.block) + list(ctx2.block) + list(x.cnt.values()) + list(y.cnt.values()) + [t1, t2, v1, v2]
    e1 = _meet(q, an, X, Y, (ctx1, x, t1, v1), (ctx2, y, t2, v2))
    return (ctx1, ctx2), x, y, t1, t2, v1, v2, e1


def same_block_query(q, an, X, Y):
    """Two threads of one block access one element, X's access first (or both in one instance of
    one store), one of them writing, with nothing ordering X before Y."""
    S = q.S
    ctx = an.new_ctx(S)
    x = P.new_inst(S, ctx, X.node, "x")
    y = P.new_inst(S, ctx, Y.node, "y")
    t1, t2, v1, v2 = _points(q, an, X, Y)
    q.add(ctx.cons, x.cons, y.cons, Z.Ne(t1, t2))
    q.small += list(ctx.block)
    q.point += list(ctx.block) + list(x.cnt.values()) + list(y.cnt.values()) + [t1, t2, v1, v2]
    e1 = _meet(q, an, X, Y, (ctx, x, t1, v1), (ctx, y, t2, v2))
    order = P.before(x, y)
    if X is Y:
        order = Z.Or(order, P.same_instance(x, y))
    q.add(order, Z.Not(_ordered(an, S, ctx, X, x, y)))

    def validate(model):
        return "the accesses are ordered" if exists_check(q, model, lambda S2: _ordered(an, S2, ctx, X, x, y,
                                                                                         exact=True)) else None

    q.validators.append(validate)
    return (ctx, ctx), x, y, t1, t2, v1, v2, e1


def _points(q, an, X, Y):
    S = q.S
    t1, t2, v1, v2 = S.var("t1"), S.var("t2"), S.var("v1"), S.var("v2")
    q.add(t1 >= 0, t1 < an.T, t2 >= 0, t2 < an.T, v1 >= 0, v1 < X.values, v2 >= 0, v2 < Y.values)
    return t1, t2, v1, v2


def _meet(q, an, X, Y, px, py):
    """Both accesses run, inside the tensor, at one element; returns X's element."""
    S = q.S
    (cx, x, t1, v1), (cy, y, t2, v2) = px, py
    e1, in1 = store_elem(an, X, S, cx, x, t1, v1)
    e2, in2 = store_elem(an, Y, S, cy, y, t2, v2)
    q.add(X.executes(S, cx, x, t1), Y.executes(S, cy, y, t2), in1, in2,
          *[Z.Eq(p, r) for p, r in zip(e1, e2, strict=True)])
    return e1


def _ordered(an, S, ctx, X, x, y, exact=False):
    """X's access at x is complete and visible to every thread of the block at y."""
    if X.kind in ASYNC_PROXY:
        return Z.FALSE
    if X.kind == "copy_async":
        return (an.exactly_visible_after_wait if exact else an.visible_after_wait)(S, ctx, x, y)
    return (an.exactly_barrier_between if exact else an.barrier_between)(S, ctx, x, y)


def violation(an, res, X, Y, terms, span) -> ObligationResult:
    (c1, c2), x, y, t1, t2, v1, v2, e1 = terms
    ev = res.ev
    ge = [ev.int(c) for c in e1]
    accesses = [_access(ev, acc, ctx, inst, t, v) for acc, ctx, inst, t, v in ((X, c1, x, t1, v1), (Y, c2, y, t2, v2))]
    same = accesses[0]["block"] == accesses[1]["block"]
    w = {
        "block": accesses[0]["block"],
        "threads": [accesses[0]["thread"], accesses[1]["thread"]],
        "sizes": {n: ev.int(s) for n, s in an.sizes.items()},
        "accesses": accesses,
        "element": {"tensor": X.tensor, "coord": ge},
        "loops": {f"line {a['line']}": a["loop"] for a in accesses},
    }
    if not same:
        w["blocks"] = [a["block"] for a in accesses]
    lines = [X.node.span.line, Y.node.span.line]
    kinds = "/".join(a["op"] for a in accesses)

    def says(a):
        it = "".join(f", {k} = {vv}" for k, vv in a["loop"].items())
        return (f"block {tuple(a['block'])} thread {a['thread']} {a['op']}s {elem_str(X.tensor, ge)} at line "
                f"{a['line']}{it}")

    expl = [says(accesses[0]) + ",", "  and " + says(accesses[1]) + (
        ": nothing orders the two (no barrier between them)" if same else ": blocks are not ordered with each other")]
    if X.kind in WRITES and Y.kind in WRITES:
        hint = ("two threads write one element of the output: check the tile offsets of the blocks (or iterations), "
                "or store from one thread with where=")
    elif same:
        hint = (f"a thread reads {X.tensor} where another thread of its block writes: put a barrier() between the read "
                "and the write (or write to another output)")
    else:
        hint = (f"a block reads elements of {X.tensor} that another block writes, and blocks run in no fixed order: "
                "read only the elements the block itself writes, or write to another output")
    return ObligationResult("race", "violated", span, f"data race on {X.tensor} in global memory ({kinds})", w,
                            {"lines": lines, "element": ge}, [], hint, expl, res.seconds)


def _access(ev, acc, ctx, inst, t, v) -> dict:
    return {"op": acc.kind, **writer_witness(ev, ctx, inst, t, v, acc)}
