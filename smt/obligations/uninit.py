"""uninitialised-read: every shared element read was written before, and an async copy that wrote it
was retired by a wait."""

from __future__ import annotations

from functools import partial

import numpy as np

from argus_verify.smt import program as P
from argus_verify.smt import zops as Z
from argus_verify.smt.hopper import RELIANCE, RELIES_ON
from argus_verify.smt.hopper_store import RELIANCE_STORE, RELIES_ON_STORE, TmaStoreRead
from argus_verify.smt.ints import const_of
from argus_verify.smt.obligations.common import (
    elem_str,
    point,
    result_from,
    sh_addr,
    span_of,
    trace_path,
    value_var,
    witness_base,
)
from argus_verify.smt.query import Ev, exists_check, solve
from argus_verify.smt.records import boxes_of
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.writers import in_boxes, of_shared_write
from argus_verify.smt.zops import OPS, bv


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
            elif isinstance(rd, TmaStoreRead):
                # the store's read sees what was written before it in program order (smt/hopper_store.py)
                out.append(
                    ObligationResult(
                        "uninitialised-read",
                        "proved",
                        span_of(rd.node),
                        f"every element the TMA store reads from {name} was written before it (for all sizes); "
                        f"{RELIANCE_STORE}",
                        detail={"relies_on": list(RELIES_ON_STORE)},
                        seconds=r1.seconds + r2.seconds,
                    )
                )
            elif any(W.kind == "tma" for W in an.sh_writes[name]):
                # which write a wgmma read sees is proved here; that the TMA copy has landed by then
                # is the mbarrier protocol's (smt/hopper.py)
                out.append(
                    ObligationResult(
                        "uninitialised-read",
                        "proved",
                        span_of(rd.node),
                        f"every element read from {name} was written before the read (for all sizes); {RELIANCE}",
                        detail={"relies_on": list(RELIES_ON)},
                        seconds=r1.seconds + r2.seconds,
                    )
                )
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
    res, q, (ctx, r, t, v, e, off) = solve(an, timeout, partial(nowrite_query, an=an, rd=rd))
    span = span_of(rd.node)
    if res.status != "violated":
        return result_from(res, "uninitialised-read", span,
                           f"initialisation of the read of {rd.alloc.name} could not be proved", "ok")
    ev = res.ev
    w, ge = read_witness(an, ev, rd, ctx, r, t, v, e)
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


def nowrite_query(q, an, rd):
    """A read of an element that none of the last writes (with footprints) before it covers;
    validated by asking exactly whether any write at all precedes it."""
    S, ctx, r, t = point(q, rd.node)
    v = value_var(q, rd.values)
    e, off, inshape = sh_addr(an, rd, S, ctx, r, t, v)
    q.add(rd.node.guard(S, ctx, r, t), inshape)
    D = an.window
    for W in an.sh_writes[rd.alloc.name]:
        if W.footprint() is None:
            # a write under conditions that mix the thread with other values: the threads that
            # may write e are named (smt.writers), and the conditions evaluated at them
            wr = of_shared_write(an, W)
            if wr is None:
                continue
            for k_inst, ex in P.recent_before(S, ctx, W.node, r, D):
                rel = [Z.sub(x, wr.uniform_start(S, ctx, k_inst, d)) for d, x in enumerate(e)]
                runs, named = wr.executes(S, ctx, k_inst, rel)
                q.add(named, Z.Not(Z.And(ex, P.before(k_inst, r), runs)))
            continue
        offsets = None if rd.alloc.injective else constant_box_offsets(W)
        for k_inst, ex in P.recent_before(S, ctx, W.node, r, D):
            # a layout that maps several coordinates to one offset (stride 0): judged by offset
            cov = W.covers(S, ctx, k_inst, e) if offsets is None else in_boxes(offsets, (off,))
            q.add(
                Z.Not(
                    Z.And(
                        ex,
                        W.executes_uniform(S, ctx, k_inst),
                        P.before(k_inst, r),
                        cov,
                    )
                )
            )

    def validate(model):
        def build(S2):
            return written_before(an, S2, ctx, rd, off, r)

        return "a write precedes the read" if exists_check(q, model, build) else None

    q.validators.append(validate)
    return ctx, r, t, v, e, off


def constant_box_offsets(W):
    """The offsets a full-tile write at constant view starts covers, as 1-D boxes (None: the
    write is not such a write)."""
    fp = W.footprint()
    if fp is None or fp[0] != "box":
        return None
    starts = []
    for kind, iv, extent in W.view.items:
        c = const_of(iv)
        if c is None:
            return None
        starts.append(range(c, c + extent) if kind == "slice" else range(c, c + 1))
    grid = np.stack(np.meshgrid(*[np.arange(x.start, x.stop) for x in starts], indexing="ij"), -1)
    coords = tuple(grid[..., d].reshape(-1) for d in range(len(starts)))
    offs = np.asarray(W.alloc.offset_np(coords), dtype=np.int64).reshape(-1)
    return boxes_of({(int(o),) for o in offs})


def written_before(an, S, ctx, rd, off, r):
    """Some write (any instance, thread and value) wrote offset off before the read r (exactly)."""
    parts = []
    for K in an.sh_writes[rd.alloc.name]:
        k = P.new_inst(S, ctx, K.node, "vk")
        tk, vk = S.var("vtk"), S.var("vvk")
        _, koff, kin = K.addr(S, ctx, k, tk, vk)
        parts.append(
            Z.And(
                k.cons,
                tk >= 0,
                tk < an.T,
                vk >= 0,
                vk < K.values,
                kin,
                Z.Eq(koff, off),
                K.executes(S, ctx, k, tk),
                P.before(k, r),
            )
        )
    return Z.Or(*parts)


def read_witness(an, ev, rd, ctx, r, t, v, e):
    """The witness of a read, and the element it reads."""
    w = witness_base(an, ev, ctx, r, t, v)
    ge = [ev.int(x) for x in e]
    w["element"] = {
        "value": ev.int(v),
        "tile": rd.label,
        "coord": [ev.int(x) for x in rd.coords.coords(t, v, OPS)],
    }
    if getattr(rd, "proxy", "generic") != "async":  # an async-proxy read fills no fragment of a thread
        w["fragment"] = rd.name
    return w, ge


def uninit_unretired(an, rd, timeout):
    asyncs = [W for W in an.sh_writes[rd.alloc.name] if W.kind == "async"]
    span = span_of(rd.node)
    if not asyncs:
        return ObligationResult("uninitialised-read", "proved", span, "no async copy into this buffer")
    res, q, (S, ctx, r, t, v, e, tg, sel, events) = solve(an, timeout, partial(unretired_query, an=an, rd=rd))
    if res.status != "violated":
        return result_from(res, "uninitialised-read", span, "async-copy completion could not be proved", "ok")
    ev = res.ev
    i = ev.int(sel)
    W, w_inst, tw, vw, valid, ok = events[i]
    w, ge = read_witness(an, ev, rd, ctx, r, t, v, e)
    wl = {L.var: ev.int(w_inst.vals[L.var]) for L in W.node.loops}
    g = ev.int(an.group_of(S, ctx, w_inst)) if an.commits.exact else None
    who = f"thread {ev.int(tw)}" if tw is not None else "issued"
    reads = f"{rd.label}[value {ev.int(v)}] of thread {ev.int(t)} reads {elem_str(rd.alloc.name, ge)}, "
    writer = {"line": W.node.span.line, "thread": ev.int(tw) if tw is not None else None, "loop": wl, "group": g}
    expl = [reads + unretired_writer_text(writer, who)]
    waits = ", ".join(f"wait({wn.stmt.pending}) at line {wn.span.line}" for wn in an.waits) or "no wait"
    return ObligationResult(
        "uninitialised-read",
        "violated",
        span,
        f"read of {rd.alloc.name} before the async copy that writes it has landed",
        w,
        {"element": ge, "writer": writer},
        trace_path(tg.trace, ev),
        f"the copy is still in flight ({waits}): wait for its group (smaller n in wait(n), "
        "or a wait before the read) — or the read uses the wrong stage",
        expl,
        res.seconds,
    )


def unretired_query(q, an, rd):
    """A read whose element was last written by an async copy that no wait has retired before it."""
    S, ctx, r, t = point(q, rd.node)
    v = value_var(q, rd.values)
    e, off, inshape = sh_addr(an, rd, S, ctx, r, t, v)
    q.add(rd.node.guard(S, ctx, r, t), inshape)
    tg = an.resolve(S, ctx, rd, r, t, e)
    reads = S.memo["__reads__"]
    _, _, _, _, _, sel, events = reads[-1]
    alts = []
    for i, (W, w_inst, tw, _vw, valid, _ok) in enumerate(events):
        if W.kind != "async":
            continue
        alts.append(Z.And(Z.Eq(sel, bv(i)), valid, Z.Not(an.retired(S, ctx, w_inst, r, tw))))
    q.add(tg.cons, Z.Or(*alts))

    def validate(model):
        ev = Ev(model)
        i = ev.int(sel)
        W, w_inst, tw, vw, valid, ok = events[i]

        def build(S2):
            return an.exactly_retired(S2, ctx, w_inst, r, tw)

        return "a wait retires the copy" if exists_check(q, model, build) else None

    q.validators.append(validate)
    return S, ctx, r, t, v, e, tg, sel, events


def unretired_writer_text(writer, who) -> str:
    it = "".join(f", {k} = {vv}" for k, vv in writer["loop"].items())
    group = f", commit group {writer['group']}" if writer["group"] is not None else ""
    return f"last written by the copy_async at line {writer['line']} ({who}{it}{group}), which no wait has retired yet"
