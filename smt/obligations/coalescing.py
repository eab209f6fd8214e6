"""uncoalesced (a warning): a warp's global access touches no more 32-byte sectors than its bytes need
(evaluated exhaustively over the warps of the tile, no solver)."""

from __future__ import annotations

import numpy as np

from argus_verify import ir
from argus_verify.smt.obligations.common import (
    span_of,
)
from argus_verify.smt.report import ObligationResult


def check_coalescing(an, timeout=None) -> list:
    """`timeout` is unused: the check counts sectors exhaustively, without the solver."""
    out = []
    for acc in an.g_accesses:
        if acc.kind in ("tma_load", "tma_store"):
            continue  # a bulk tensor copy by the TMA unit, not per-thread accesses
        r = coalescing(an, acc)
        if r is not None:
            out.append(r)
    return out


def coalescing(an, acc):
    span = span_of(acc.node)
    b = ir.DTYPE_BYTES[acc.dtype]
    elements = warp_elements(acc)
    if elements is None:
        return None
    rowkey, col = elements
    w = vector_width(acc, rowkey, col, b)
    worst = worst_access(acc, rowkey, col, b, w)
    if worst is None:
        return ObligationResult("uncoalesced", "proved", span, f"{acc.kind} of {acc.tensor} is coalesced")
    _, warp, v0, sec, need, nbytes = worst
    wit = {"warp": warp, "value": v0, "sectors": sec, "minimum": need}
    expl = [f"warp {warp}, value {v0}: the 32 lanes touch {sec} 32-byte sectors for {nbytes} bytes (at best {need})"]
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


def warp_elements(acc):
    """The element each (thread, value) accesses, relative to the view's uniform start, as
    (row key: every coordinate but the last, folded; last coordinate), each [T, V]; None when the
    start depends on more than the thread."""
    table = acc.coords.coord_table()  # [T, V, rank]
    T, Vn = table.shape[:2]
    tt = np.arange(T, dtype=np.int64)
    axis = 0
    coords = []
    for kind, iv, _ in acc.view.items:
        if iv.uniform:
            s = np.zeros(T, dtype=np.int64)
        elif iv.np_fn is not None:
            s = np.broadcast_to(np.asarray(iv.np_fn(tt), dtype=np.int64), (T,))
        else:
            return None
        if kind == "slice":
            coords.append(s[:, None] + table[..., axis])
            axis += 1
        else:
            coords.append(np.broadcast_to(s[:, None], (T, Vn)))
    rowkey = np.zeros((T, Vn), dtype=np.int64)
    for c in coords[:-1]:
        rowkey = rowkey * 1_000_003 + c
    return rowkey, coords[-1]


def vector_width(acc, rowkey, col, b) -> int:
    """Elements per access instruction: `vec=` when given, else the widest aligned run of
    consecutive values along one row (what the lowering vectorises)."""
    explicit = getattr(acc, "vec", None)
    if acc.kind == "copy_async":
        explicit = getattr(acc.node.stmt, "vec", None)
    elif isinstance(acc.node.stmt, ir.Assign) and isinstance(acc.node.stmt.op, ir.Load):
        explicit = acc.node.stmt.op.vec
    if explicit is not None:
        return explicit
    T, Vn = col.shape
    for cand in (16 // b, 8 // b, 4 // b, 2 // b):
        if cand >= 1 and Vn % cand == 0:
            g = col.reshape(T, Vn // cand, cand)
            rk = rowkey.reshape(T, Vn // cand, cand)
            if (
                np.all(g - g[..., :1] == np.arange(cand))
                and np.all(g[..., 0] % cand == 0)
                and np.all(rk == rk[..., :1])
            ):
                return cand
    return 1


def worst_access(acc, rowkey, col, b, w):
    """(excess sectors, warp, first value, sectors, minimum, bytes) of the access instruction that
    touches the most 32-byte sectors beyond the minimum its bytes need; None when none does."""
    T, Vn = col.shape
    row_bytes = acc.view.tile[-1] * b if acc.view.tile else b
    worst = None
    for warp in range(T // 32):
        lanes = slice(32 * warp, 32 * warp + 32)
        for g in range(Vn // w):
            vs = slice(g * w, g * w + w)
            elems = set(zip(rowkey[lanes, vs].ravel().tolist(), col[lanes, vs].ravel().tolist(), strict=True))
            sectors = {(r, (c * b) // 32) for r, c in elems}
            need = -(-(len(elems) * b) // min(32, row_bytes))
            if len(sectors) > need and (worst is None or len(sectors) - need > worst[0]):
                worst = (len(sectors) - need, warp, g * w, len(sectors), need, len(elems) * b)
    return worst
