"""bank-conflict (a warning): the lanes of one shared access phase fall in different banks or one word."""

from __future__ import annotations

from functools import partial

import numpy as np

from argus_verify import ir
from argus_verify.smt import program as P
from argus_verify.smt import zops as Z
from argus_verify.smt.obligations.common import (
    async_proxy,
    elem_str,
    result_from,
    sh_addr,
    sh_exec,
    sh_opname,
    span_of,
)
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import bv


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
            if async_proxy(acc):
                continue  # TMA and wgmma move whole swizzled tiles, not per-thread bank accesses
            out.append(bank_conflict(an, info, getattr(acc, "bank", None) or acc, timeout))
    return out


def bank_conflict(an, info, acc, timeout):
    span = span_of(acc.node)
    explicit = getattr(acc, "vec", None)
    if explicit is None and isinstance(acc.node.stmt, ir.Assign) and isinstance(acc.node.stmt.op, ir.Load):
        explicit = acc.node.stmt.op.vec
    build = partial(bank_query, an=an, info=info, acc=acc, explicit=explicit)
    res, q, (ctx, inst, warp, l1, l2, g, e1, e2, o1, o2, by1, by2, w1, width_bytes) = solve(
        an, timeout, build, validate=False, abstract=False
    )
    if res.status != "violated":
        proved = f"{sh_opname(acc)} of {info.name} is free of bank conflicts"
        return result_from(res, "bank-conflict", span, "bank-conflict freedom could not be decided", proved)
    ev = res.ev
    wit, detail, expl = bank_witness(
        an, ev, info, acc, (ctx, inst, warp, l1, l2, g, e1, e2, o1, o2, by1, by2, w1), width_bytes
    )
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


def bank_witness(an, ev, info, acc, terms, width_bytes):
    """The witness, detail and explanation of a bank conflict, read from the model."""
    ctx, inst, warp, l1, l2, g, e1, e2, o1, o2, by1, by2, w1 = terms
    wv, a1, a2 = ev.int(warp), ev.int(l1), ev.int(l2)
    bank = ev.int(Z.band(w1, bv(31)))
    wit = {
        "block": [ev.int(x) for x in ctx.block],
        "warp": wv,
        "lanes": [a1, a2],
        "threads": [32 * wv + a1, 32 * wv + a2],
        "loop": {L.var: ev.int(inst.vals[L.var]) for L in acc.node.loops},
        "sizes": {n: ev.int(s) for n, s in an.sizes.items()},
        "value": ev.int(g) * (width_bytes // info.bytes),
    }
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
    return wit, detail, expl


def bank_query(q, an, info, acc, explicit):
    """Two lanes of one warp, in one phase of one access instruction, that access different words
    of one bank."""
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
    w = natural_width(acc, info, explicit)
    width_bytes = w * info.bytes
    g = S.var("g")
    q.add(g >= 0, g < acc.values // w)
    q.point.append(g)
    v = Z.mul(g, bv(w))
    # a phase: the lanes the hardware serves at once (all 32 for 4-byte accesses, fewer for wider)
    phase = 32 if width_bytes <= 4 else (16 if width_bytes == 8 else 8)
    if phase < 32:
        q.add(Z.Eq(Z.floordiv(l1, bv(phase)), Z.floordiv(l2, bv(phase))))
    e1, o1, in1 = sh_addr(an, acc, S, ctx, inst, t1, v)
    e2, o2, in2 = sh_addr(an, acc, S, ctx, inst, t2, v)
    q.add(sh_exec(acc, S, ctx, inst, t1), sh_exec(acc, S, ctx, inst, t2), in1, in2)
    by1, by2 = Z.mul(o1, bv(info.bytes)), Z.mul(o2, bv(info.bytes))
    w1, w2 = Z.shr(by1, bv(2)), Z.shr(by2, bv(2))
    q.add(Z.Eq(Z.band(w1, bv(31)), Z.band(w2, bv(31))), Z.Ne(w1, w2))
    return ctx, inst, warp, l1, l2, g, e1, e2, o1, o2, by1, by2, w1, width_bytes
