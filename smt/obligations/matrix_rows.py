"""bounds, for ldmatrix / stmatrix: every row an instruction moves is 16 contiguous, 16-byte-aligned
bytes of its shared allocation.

`ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` (and `stmatrix`) reads (writes) 8 rows per
8x8 matrix, each row 16 contiguous bytes whose start address must be 16-byte aligned (PTX ISA).
The lowering (lowering/memory.py `matrix_row_addresses`) gives the hardware one address per lane
and instruction: that of the row's first element, e0 = rows(t, i) through the view. The fragment's
meaning (`atoms.ldmatrix_delivered`) is elements e0 + (0, .., 0, k), k = 0..7, along the tile's
last axis; the hardware moves the 16 bytes at that address. They agree exactly when, in the
allocation's layout, offset(e0 + (0, .., 0, k)) = offset(e0) + k and offset(e0) is a multiple of
8 elements: a padded row (stride BK + 4) starts 8-byte aligned, and a swizzle that permutes
elements inside a 16-byte chunk (Swizzle(b, 2, s)) scatters the row. Both are faults or wrong data
on the GPU that the element-wise encoding of the other obligations cannot see.

The allocation's base is at least 16-byte aligned (lowering/memory.py `layout_shared`: static
`.shared .align 16` arrays, or offsets that are multiples of 128 (1024 on Hopper) in a dynamic
window declared `.align 128` (1024, rounded up by the kernel)), so an offset that is a multiple of
16 bytes is a 16-byte-aligned address.

Formula: exists block, instance, thread t < T, instruction i < rows.values: the statement executes,
e0 .. e7 inside the allocation's shape (outside is `bounds`' shared check), and offset(e0) mod 8
!= 0 or offset(e_k) != offset(e0) + k for some k."""

from __future__ import annotations

from functools import partial

from argus_verify.smt import zops as Z
from argus_verify.smt.forked import in_child
from argus_verify.smt.obligations.common import (
    elem_str,
    point,
    result_from,
    span_of,
    value_var,
    witness_base,
)
from argus_verify.smt.query import solve
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.zops import OPS, bv

ROW_BYTES = 16  # one 8x8 matrix row of .b16


def check_matrix_rows(an, timeout) -> list:
    if not an.matrix_rows:
        return []
    # In a forked child (smt/forked.py; here where forking is not possible): Z3 numbers its terms
    # in creation order and reuses freed numbers, and the later steps' witnesses depend on those
    # numbers (smt/__init__.py), so these queries' terms must not renumber theirs.
    return in_child(all_rows, an, timeout)()


def all_rows(an, timeout) -> list:
    return [matrix_rows(an, node, view, alloc, rows, opname, timeout)
            for node, view, alloc, rows, opname in an.matrix_rows]


def row_width(alloc) -> int:
    return max(1, ROW_BYTES // alloc.bytes)


def matrix_rows(an, node, view, alloc, rows, opname, timeout) -> ObligationResult:
    span = span_of(node)
    build = partial(rows_query, an=an, node=node, view=view, alloc=alloc, rows=rows)
    res, q, (ctx, inst, t, i, es, offs) = solve(an, timeout, build, abstract=False)
    if res.status != "violated":
        proved = f"{opname} rows of {alloc.name} are 16 contiguous, aligned bytes"
        return result_from(res, "bounds", span, f"{opname} row contiguity could not be proved", proved)
    ev = res.ev
    n = row_width(alloc)
    w = witness_base(an, ev, ctx, inst, t)
    # The sizes go in the detail, not the witness: argus_verify.replay checks a bounds witness by an
    # interpreter fault at the line, and the interpreter reads ldmatrix / stmatrix rows element by
    # element (it has no row addresses to misalign), so it would call a true witness "not
    # reproduced". Without sizes the witness is left unchecked.
    sizes = w.pop("sizes", {})
    ii = ev.int(i)
    e0 = [ev.int(x) for x in es[0]]
    offsets = [ev.int(o) for o in offs]
    byte0 = offsets[0] * alloc.bytes
    w["instruction"] = ii
    w["row"] = {"tile": alloc.name, "coord": e0, "offset": offsets[0], "byte_offset": byte0}
    detail = {"element": e0, "offsets": offsets, "byte_offset": byte0, "instruction": ii, "op": opname,
              "sizes": sizes}
    at = (" at " + ", ".join(f"{k} = {x}" for k, x in sizes.items())) if sizes else ""
    expl = [f"lane {w['lane']} (thread {w['thread']}) supplies, for instruction {ii}, the row starting at "
            f"{elem_str(alloc.name, e0)}: offset {offsets[0]} (byte {byte0})" + at]
    if byte0 % ROW_BYTES:
        expl.append(f"  the row starts at byte {byte0}, not a multiple of {ROW_BYTES}: a misaligned row address")
    bad = [k for k in range(1, n) if offsets[k] != offsets[0] + k]
    if bad:
        k = bad[0]
        ek = e0[:-1] + [e0[-1] + k]
        expl.append(f"  its element {k}, {elem_str(alloc.name, ek)}, is at offset {offsets[k]}, not "
                    f"{offsets[0] + k}: the {n} elements of the row are not contiguous (offsets {offsets})")
    hint = (
        f"{opname} moves each 8x8 matrix row as 16 contiguous bytes at a 16-byte-aligned address: pad rows "
        "by a multiple of 8 elements, and swizzle whole 16-byte chunks (Swizzle(b, 3, s) for 2-byte elements)"
    )
    message = f"{opname} row of {alloc.name} is not 16 contiguous, 16-byte-aligned bytes"
    return ObligationResult("bounds", "violated", span, message, w, detail, [], hint, expl, res.seconds)


def rows_query(q, an, node, view, alloc, rows):
    """A row start (thread t, instruction i) whose row is not n contiguous elements at an offset
    that is a multiple of n."""
    S, ctx, inst, t = point(q, node)
    i = value_var(q, rows.values, "instr")
    n = row_width(alloc)
    # the row start: value 8 i of atoms.ldmatrix_row_elements(rows), i.e. rows(t, i)
    c0 = rows.coords(t, i, OPS)
    es = []
    for k in range(n):
        c = tuple(c0[:-1]) + (Z.add(c0[-1], bv(k)),)
        es.append(view.elem(S, ctx, inst, t, c))
    offs = [alloc.offset(e) for e in es]
    inside = Z.And(*[an.in_shape(e, alloc.shape) for e in es])
    wrong = [Z.Ne(Z.mod(offs[0], bv(n)), bv(0))]
    wrong += [Z.Ne(offs[k], Z.add(offs[0], bv(k))) for k in range(1, n)]
    q.add(node.guard(S, ctx, inst, t), inside, Z.Or(*wrong))
    return ctx, inst, t, i, es, offs
