"""The last writer of a read from a TMA-fed or stored shared buffer, among finitely many candidate writes.

The general resolution (smt.memory `resolve`) lets a read see a write at any instance that no
candidate instance overwrote (`alive`). That leaves a free instance in every query: in a persistent
kernel, whose ring position is `tile_index * KT + kt`, the solver must work out in each tag query
which tile and k step wrote the stage, and it gives up. For a buffer that only TMA copies and stores
write (block-uniform boxes), the writer of each read is settled once, with no tags, by integer
queries on the read's own instance:

* completeness: every write instance that covers the element before the read is one of the
  candidate instances of its statement (smt.program `recent_before`: the refill two k steps back, the
  previous tile's prefetch, ...) or is overwritten by one of them before the read;
* reach: a candidate that can never be the last of them to cover the element is dropped.

With completeness proved, a read sees the last of the kept candidates that covers its element, and
no other write: the tag queries choose among a few instances at fixed offsets from the read's, and
the choice is forced. A read whose completeness query the solver does not settle keeps the general
resolution. Each query is unsatisfiable on an over-approximation (smt.zops `ABSTRACT`), or is not
used: a dropped candidate is one proved never to be the last writer.

Reads of other buffers keep the general resolution, less the write statements that can never be
their last writer (`never_last`): in a tree unrolled over shared memory (`s[t] = s[t] + s[t + 16]`
under `if t < 16`, then 8, 4, ...) every level's store overwrites the previous one's, and following
each read into every earlier level's store and its reads grows exponentially with the depth.
"""

from __future__ import annotations

import attrs
import z3

from argus_verify import ir, roles
from argus_verify.smt import program as P
from argus_verify.smt import zops as Z

# Z3's resource budget of the completeness query and of each reach query (the final Hopper GEMM's
# take at most a few million: well under a second)
RLIMIT = 20_000_000


@attrs.define
class Candidate:
    W: object  # the write record (smt.records.ShWrite)
    index: int  # its position in the statement's candidate list (the same in every query)
    inst: object
    covers: object  # it executes, covers the element and precedes the read


def eligible(an, rd) -> bool:
    """Reads, in a kernel that uses TMA or wgmma (without warpgroup roles or clusters), of a buffer
    that only TMA copies and stores write, each a block-uniform box (whether it covers an element is
    a comparison of coordinates)."""
    if not an.hopper or roles.has_roles(an.k) or ir.uses_cluster(an.k):
        # (warpgroup roles: the producer's branch precedes the consumers' in program order, which is
        # not the order the mbarriers impose; clusters: multicast writes reach other CTAs' buffers)
        return False
    writers = an.sh_writes.get(rd.alloc.name, [])
    return bool(writers) and rd.alloc.injective and \
        all(W.kind in ("tma", "store") and (W.footprint() or ("",))[0] == "box" for W in writers)


def candidates(an, S, ctx, rd, r_inst, e, keep=None) -> list:
    """The candidate writes of element e for the read at r_inst (those of `keep` alone, when given)."""
    out = []
    for W in an.sh_writes[rd.alloc.name]:
        for j, (k_inst, exists) in enumerate(P.recent_before(S, ctx, W.node, r_inst, an.window)):
            if keep is not None and (id(W), j) not in keep:
                continue
            covers = Z.And(exists, W.executes_uniform(S, ctx, k_inst), W.covers(S, ctx, k_inst, e),
                           P.before(k_inst, r_inst))
            out.append(Candidate(W, j, k_inst, covers))
    return out


def last(cands: list) -> list:
    """For each candidate: it covers the element, and no other candidate covers it later."""
    return [Z.And(a.covers, *[Z.Not(Z.And(b.covers, P.before(a.inst, b.inst))) for b in cands if b is not a])
            for a in cands]


def plan(an, rd) -> set | None:
    """The candidates (id(W), index) that can be the read's last writer, when completeness is proved
    (None otherwise)."""
    from argus_verify.smt.query import Query

    with Z.side_query():
        Z.ABSTRACT = True
        q = Query(an, an.timeout_s, "int")
        S = q.S
        ctx = an.new_ctx(S)
        r = P.new_inst(S, ctx, rd.node, "r")
        t, v = S.var("t"), S.var("v")
        c = rd.coords.coords(t, v, Z.OPS)
        e = rd.view.elem(S, ctx, r, t, c)
        # (neither the read's conditions nor its bounds are assumed: a query may evaluate a value it
        # then discards, and every evaluation must find its writer among the kept candidates)
        q.add(ctx.cons, r.cons, t >= 0, t < an.T, v >= 0, v < rd.values)
        cands = candidates(an, S, ctx, rd, r, e)
        missed = []
        for W in an.sh_writes[rd.alloc.name]:
            w = P.new_inst(S, ctx, W.node, "w")
            mine = [a.inst for a in cands if a.W is W]
            missed.append(Z.And(
                w.cons, W.executes_uniform(S, ctx, w), W.covers(S, ctx, w, e), P.before(w, r),
                *[Z.Not(P.same_instance(w, k)) for k in mine],
                *[Z.Not(Z.And(a.covers, P.before(w, a.inst))) for a in cands],
            ))
        lasts = last(cands)
        Z.end_defs()
        Z.ABSTRACT = False
        # The queries run in a Z3 context of their own: in the shared one their cost follows the term
        # ids of whatever the process built before (the final spec's sB completeness took 1.8 s there
        # after the other obligations, 1.0 s alone), so a verdict could depend on the process's history.
        own = z3.Context()
        base = [f.translate(own) for f in list(q.cons) + list(q.defs)]

        def possible(cond) -> bool:
            # (a fresh solver each time: the incremental one, after a push, at times spends minutes
            # outside the resource count)
            s = z3.Solver(ctx=own)
            s.set("rlimit", RLIMIT)
            s.add(*base, cond.translate(own))
            return s.check() != z3.unsat  # (unknown counts as possible)

        if possible(Z.Or(*missed)):
            return None
        return {(id(a.W), a.index) for a, valid in zip(cands, lasts, strict=True) if possible(valid)}


def never_last(an, rd) -> set:
    """id(W) of the write statements that are never the last write of the element the read takes,
    at any instance, thread and value where the read runs (its conditions hold): every write of that
    element is overwritten before the read, by the writes `alive` follows. A thread that does not run
    the read may still evaluate it (in a query that discards the value): smt.memory `resolve` gives it
    an unknown tag there. Checked where the buffer has three write statements or more (below that
    there is nothing to prune worth a query)."""
    from argus_verify.smt.query import Query

    writers = an.sh_writes.get(rd.alloc.name, [])
    if len(writers) < 3 or not rd.alloc.injective:
        return set()
    out = set()
    for W in writers:
        with Z.side_query():
            q = Query(an, an.timeout_s, "int")
            S = q.S
            ctx = an.new_ctx(S)
            r = P.new_inst(S, ctx, rd.node, "r")
            w = P.new_inst(S, ctx, W.node, "w")
            t, v, tw, vw = S.var("t"), S.var("v"), S.var("tw"), S.var("vw")
            e = rd.view.elem(S, ctx, r, t, rd.coords.coords(t, v, Z.OPS))
            off = rd.alloc.offset(e)
            _, woff, inshape = W.addr(S, ctx, w, tw, vw)
            seen = Z.And(ctx.cons, r.cons, w.cons, t >= 0, t < an.T, v >= 0, v < rd.values, tw >= 0, tw < an.T,
                         vw >= 0, vw < W.values, rd.node.guard(S, ctx, r, t), W.executes(S, ctx, w, tw),
                         Z.Eq(woff, off), inshape,
                         P.before(w, r), an.alive(S, ctx, W, w, r, e, (tw, vw, off)))
            Z.end_defs()
            if Z.is_false(seen):
                out.add(id(W))
                continue
            own = z3.Context()
            solver = z3.Solver(ctx=own)
            solver.set("rlimit", RLIMIT)
            solver.add(*[f.translate(own) for f in list(q.cons) + list(q.defs)], seen.translate(own))
            if solver.check() == z3.unsat:
                out.add(id(W))
    return out
