"""output-once: no element of a `once` output is written twice, and every element is written.

Uniqueness: no two distinct (block, thread, statement instance) write one element. Coverage: for
an element of the output, each store has at most one writer that could write it (its block and
iteration follow from the element when the store's view is affine, `SkolemWriter`); the element is
written when one of them does.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from argus_verify import ir
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.flat_writer import flat_writer
from argus_verify.smt.ints import const_of
from argus_verify.smt.obligations.common import elem_str, result_from, span_of, store_elem
from argus_verify.smt.query import solve
from argus_verify.smt.records import boxes_of
from argus_verify.smt.report import ObligationResult
from argus_verify.smt.schedule import persistent_once
from argus_verify.smt.writers import Writers, in_boxes
from argus_verify.smt.zops import FALSE, TRUE, bv


def check_once(an, timeout) -> list:
    out = []
    for decl in _checked_outputs(an):
        stores = [acc for acc, _ in an.out_stores if acc.tensor == decl.tensor]
        if not stores:
            hint = f"store a value into {an.tensors[decl.tensor].name}"
            message = f"output {decl.tensor} is never written"
            out.append(ObligationResult("output-once", "violated", decl.span, message, {}, {}, [], hint))
            continue
        if not decl.once:  # a contract's output: every element is written (no claim of once)
            out.append(once_cover(an, decl, stores, timeout))
            continue
        persistent = persistent_once(an, decl, stores)
        if persistent is not None:  # a persistent tile loop whose schedule the lemma decides
            out += persistent
            continue
        uniq = once_unique(an, decl, stores, timeout)
        out += uniq
        cover = once_cover(an, decl, stores, timeout)
        # an overlap already reported as a double write explains why coverage is unknown
        overlap = cover.status == "unknown" and "overlap" in cover.message
        if not (overlap and any(r.status == "violated" for r in uniq)):
            out.append(cover)
    return out


def _checked_outputs(an) -> list:
    """The outputs whose elements must all be written: those tagged `once`, and those with a
    `contract` (it states every element's value, so an element left unwritten breaks it: a kernel
    whose output has a contract and no `once` tag was proved with half its tiles missing). The
    latter are checked for coverage only, at the contract's line."""
    out = [d for d in an.k.tags if d.once]
    for c in an.k.contracts:
        if not any(d.tensor == c.tensor for d in out):
            out.append(ir.TagDecl(c.tensor, c.index_vars, (), False, c.span))
    return out


# ---------------------------------------------------------------------------------------------
# uniqueness


def once_unique(an, decl, stores, timeout) -> list:
    # The witness is reported here, not by a function of its own: its names (ctx, inst, t, v) keep
    # the second writer's terms alive to the end, and Z3 renumbers freed terms; the later queries'
    # witnesses depend on that numbering (see smt/__init__.py).
    out = []
    for i, a in enumerate(stores):
        for b in stores[i:]:
            build = partial(unique_query, an=an, a=a, b=b)
            res, q, (ctx1, ctx2, x1, x2, t1, t2, v1, v2, e1) = solve(an, timeout, build)
            span = span_of(b.node)
            if res.status != "violated":
                proved = f"no element of {decl.tensor} is written twice (lines {a.node.span.line}, {b.node.span.line})"
                out.append(result_from(res, "output-once", span, "exactly-once could not be proved", proved))
                continue
            ev = res.ev
            ge = [ev.int(x) for x in e1]
            w = {
                "sizes": {n: ev.int(x) for n, x in an.sizes.items()},
                "element": {"tensor": decl.tensor, "coord": ge},
                "writers": [],
            }
            for ctx, inst, t, v, acc in ((ctx1, x1, t1, v1, a), (ctx2, x2, t2, v2, b)):
                w["writers"].append(writer_witness(ev, ctx, inst, t, v, acc))
            w["block"] = w["writers"][0]["block"]
            w["threads"] = [w["writers"][0]["thread"], w["writers"][1]["thread"]]
            out.append(unique_violation(decl, ge, w, span, res.seconds))
    return out


def unique_query(q, an, a, b):
    """Two distinct writers (block, thread, instance) of stores a and b that write one element."""
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
    q.point += list(ctx1.block) + list(ctx2.block) + list(x1.cnt.values()) + list(x2.cnt.values()) + [t1, t2, v1, v2]
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


def writer_witness(ev, ctx, inst, t, v, acc) -> dict:
    tt = ev.int(t)
    return {
        "block": [ev.int(x) for x in ctx.block],
        "thread": tt,
        "warp": tt // 32,
        "lane": tt % 32,
        "value": ev.int(v),
        "line": acc.node.span.line,
        "loop": {L.var: ev.int(inst.vals[L.var]) for L in acc.node.loops},
    }


def unique_violation(decl, ge, w, span, seconds) -> ObligationResult:
    expl = [
        f"{elem_str(decl.tensor, ge)} is written by "
        + " and by ".join(
            f"block {tuple(x['block'][:2])} thread {x['thread']} value {x['value']} "
            f"(line {x['line']}" + "".join(f", {k} = {vv}" for k, vv in x["loop"].items()) + ")"
            for x in w["writers"]
        )
    ]
    hint = (
        "tiles of different blocks (or iterations, or threads holding copies of one element) overlap: check "
        "the tile offsets, or store from one thread with where="
    )
    message = f"an element of {decl.tensor} is written twice"
    return ObligationResult("output-once", "violated", span, message, w, {"element": ge}, [], hint, expl, seconds)


# ---------------------------------------------------------------------------------------------
# coverage


def once_cover(an, decl, stores, timeout):
    span = decl.span
    writers = []
    for acc in stores:
        writer, why = skolem_writer(an, acc)
        if writer is None:
            message = f"coverage of {decl.tensor} is beyond the encoding: {why} (line {acc.node.span.line})"
            return ObligationResult("output-once", "unknown", span, message, detail={"reason": why})
        writers.append(writer)
    state = {}
    res, q, x = solve(an, timeout, partial(cover_query, an=an, decl=decl, writers=writers, state=state), validate=False)
    if state.get("bad"):
        message = f"coverage of {decl.tensor} is beyond the encoding"
        return ObligationResult("output-once", "unknown", span, message, detail={})
    if res.status == "violated" and not state["exact"]:
        res.status, res.reason = "unknown", "tiles overlap, so the element may be written by another block"
    if res.status == "violated" and any(w.first_iteration_only for w in writers):
        res.status, res.reason = "unknown", ("the store sits in a loop its view does not move with, and only that "
                                             "loop's first iteration was checked for the element")
    if res.status != "violated":
        proved = f"every element of {decl.tensor} is written"
        return result_from(res, "output-once", span, f"coverage of {decl.tensor} could not be proved", proved)
    return cover_violation(an, decl, res, span, x)


def cover_query(q, an, decl, writers, state):
    """An element of the output that none of the stores' only possible writers writes. `state`
    receives whether that is exact (no tiles overlap) and whether a writer was beyond the encoding."""
    S = q.S
    dims = an.tensor_dims[decl.tensor]
    x = [S.var(f"x{d}") for d in range(len(dims))]
    q.point += x
    q.add(*[z for xi, d in zip(x, dims, strict=True) for z in (xi >= 0, xi < d.fn(S, None, None, None))])
    exact = True
    for writer in writers:
        r = writer(S, x)
        if r is None:
            state["bad"] = True
            q.add(FALSE)
            continue
        ok = r[0]
        if len(r) > 4:
            q.add(r[4])  # the constraints that name the element's holder threads
        q.add(Z.Not(ok))
        exact = exact and writer.exact
    state["exact"] = exact
    return x


def cover_violation(an, decl, res, span, x) -> ObligationResult:
    ev = res.ev
    ge = [ev.int(xi) for xi in x]
    w = {
        "sizes": {n: ev.int(s) for n, s in an.sizes.items()},
        "element": {"tensor": decl.tensor, "coord": ge},
    }
    expl = [f"{elem_str(decl.tensor, ge)} is inside the output but no block, thread or iteration writes it"]
    hint = (
        "the grid or the loop bounds miss a (partial) tile: use cdiv for the extents and mask the tail instead of "
        "dropping it"
    )
    message = f"an element of {decl.tensor} is never written"
    return ObligationResult("output-once", "violated", span, message, w, {"element": ge}, [], hint, expl, res.seconds)


# ---------------------------------------------------------------------------------------------
# the only writer of an element


def skolem_writer(an, acc):
    """For an output store: the `SkolemWriter` of its elements, when the view's starts are affine
    with one block id or loop variable per dimension. Returns (writer, "") or (None, reason).
    Stores whose view or conditions depend on the thread get a `ThreadSkolemWriter`."""
    used, why = affine_dimensions(acc)
    boxes = None
    if used is not None:
        boxes, why = written_boxes(an, acc)
    if why:
        writer, why2 = thread_skolem_writer(an, acc)
        if writer is None:
            writer = flat_writer(an, acc)  # out[g // E, g % E]: a flattened index
        return (writer, "") if writer is not None else (None, why2 or why)
    if len(acc.view.items) != len(an.tensor_dims[acc.tensor]):
        return None, "view rank"
    return SkolemWriter(an, acc, used, boxes), ""


def thread_skolem_writer(an, acc):
    """The only writer of an element of a store whose view starts or conditions depend on the
    thread: its block and iteration from the element (as in `SkolemWriter`), its thread(s) from the
    element's offset in what the block writes (`smt.writers.Writers`)."""
    if len(acc.view.items) != len(an.tensor_dims[acc.tensor]):
        return None, "view rank"
    wr, why = Writers.of(an, acc.node, acc.view, acc.coords, acc.values, acc.where)
    if wr is None:
        return None, why
    used = {}
    for d, (_kind, rest, _thr, _ext, _iv) in enumerate(wr.dims):
        if rest is None:
            return None, f"the start of dimension {d} of the store is not affine"
        atoms = {a: c for a, c in rest[0].items() if a[0] in ("blk", "loop")}
        if len(atoms) > 1 and not _nested(acc, atoms):
            return None, f"dimension {d} of the store mixes several block ids / loop variables"
        for a, c in atoms.items():
            if a in used or c <= 0:
                return None, "a block id or loop variable is used in several dimensions (or negatively)"
            used[a] = (d, c)
    return ThreadSkolemWriter(an, acc, used, wr), ""


def affine_dimensions(acc):
    """{("blk", axis) | ("loop", var): (dimension, coefficient)}: which dimension of the store's
    view each block id and loop variable moves, or (None, reason)."""
    used = {}
    for d, (_kind, iv, _ext) in enumerate(acc.view.items):
        if iv.lin is None:
            return None, f"the start of dimension {d} of the store is not affine"
        atoms = {a: c for a, c in iv.lin[0].items() if a[0] in ("blk", "loop", "thr")}
        # (a start whose affine form lost its thread term, `d * 0`, is still computed per thread)
        if any(a[0] == "thr" for a in atoms) or not iv.uniform:
            return None, "the store's view depends on the thread"
        if len(atoms) > 1 and not _nested(acc, atoms):
            return None, f"dimension {d} of the store mixes several block ids / loop variables"
        for a, c in atoms.items():
            if a in used or c <= 0:
                return None, "a block id or loop variable is used in several dimensions (or negatively)"
            used[a] = (d, c)
    return used, ""


def _nested(acc, atoms: dict) -> bool:
    """A dimension's start moved by several atoms as a sub-tiling (`m0 + 16 * i` with
    `m0 = block_id.y * 32`): at most one block id, then loop variables outermost first, with
    strictly decreasing coefficients (the candidate writer takes them in that order)."""
    order = [a for a in atoms if a[0] == "blk"]
    if len(order) > 1:
        return False
    order += [("loop", L.var) for L in acc.node.loops if ("loop", L.var) in atoms]
    if len(order) != len(atoms):
        return False
    coefs = [atoms[a] for a in order]
    return all(c > 0 for c in coefs) and all(a > b for a, b in zip(coefs, coefs[1:], strict=False))


def written_boxes(an, acc):
    """The tile coordinates the statement writes (every thread, value, where=, thread conditions)
    as boxes (None: the whole tile), or (None, reason) when that depends on more than the thread."""
    table = acc.coords.coord_table()
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
    if acc.where is not None and not acc.where.uniform:
        if acc.where.np_fn is None:
            return None, "where= mixes the thread with other values"
        live &= np.broadcast_to(np.asarray(acc.where.np_fn(tt)) != 0, tt.shape)
    pts = {tuple(int(x) for x in table[t, v]) for t in np.nonzero(live)[0] for v in range(table.shape[1])}
    full = len(pts) == math.prod(acc.view.tile)
    return (None if full else boxes_of(pts)), ""


def _const_trips(L) -> int | None:
    """The trip count of loop L when its bounds are constants."""
    lo, hi = const_of(L.start), const_of(L.stop)
    return None if lo is None or hi is None else max(0, -(-(hi - lo) // L.step))


def _at_iteration(inst, L, start, i: int):
    """A copy of instance `inst` at iteration i of loop L (which starts at `start`)."""
    trial = V.Inst(inst.node, inst.cnt, inst.vals, inst.cons)
    trial.cnt[L.var] = bv(i)
    trial.vals[L.var] = Z.add(start, bv(i * L.step))
    return trial


def _least(count: int, holds):
    """The least i < count for which holds(i) (a Z3 condition), else count - 1, as a term."""
    choice = bv(count - 1)
    for i in range(count - 2, -1, -1):
        choice = Z.Ite(holds(i), bv(i), choice)
    return choice


class SkolemWriter:
    """`writer(S, x)`: (the only writer of element x writes it, its block, its instance, its tile
    coordinate), or None beyond the encoding. `exact`: no two writers' tiles overlap, so that
    writer is the only one."""

    def __init__(self, an, acc, used, boxes):
        self.an, self.acc, self.used, self.boxes = an, acc, used, boxes
        self.exact = self.disjoint()
        self.gated = self.gated_loops()

    def extent(self, d) -> int:
        """What one block and iteration writes along dimension d: the view's tile."""
        return self.acc.view.items[d][2]

    def disjoint(self) -> bool:
        """No two blocks or iterations write overlapping parts of the output: each atom's step spans
        what one block and iteration writes along its dimension (`extent`), and in a sub-tiled
        dimension each step spans all the smaller ones (constant trip counts), e.g. 32 >= 16 * 2 for
        `block_id.y * 32 + 16 * i`, i < 2."""
        loops = {L.var: L for L in self.acc.node.loops}
        exact = True
        for a, (d, c) in self.used.items():
            step = loops[a[1]].step if a[0] == "loop" else 1
            if c * step < self.extent(d):
                exact = False
        for d in {d for d, _c in self.used.values()}:
            atoms = sorted(((c, a) for a, (e, c) in self.used.items() if e == d), reverse=True)
            for (big, a), (small, b) in zip(atoms, atoms[1:], strict=False):
                trips = _const_trips(loops[b[1]])
                span = big * (loops[a[1]].step if a[0] == "loop" else 1)
                if trips is None or small * loops[b[1]].step * trips > span:
                    exact = False
        return exact

    def same_dim(self, a) -> list:
        """The other atoms moving the dimension atom `a` moves."""
        d = self.used[a][0]
        return [b for b, (e, _c) in self.used.items() if e == d and b != a]

    @property
    def first_iteration_only(self) -> bool:
        """A loop around the store that its view does not move with is taken at its first iteration
        (`instance`): a store guarded to a later one (`if t == 1:`) is not seen there. (Except
        the loops of `gated_loops`.)"""
        return any(("loop", L.var) not in self.used and L.var not in self.gated for L in self.acc.node.loops)

    GATED_TRIPS = 32  # the most iterations `gated_loops` chooses among

    def gated_loops(self) -> dict:
        """Loops the view does not move with, of constant trip counts (at most GATED_TRIPS), whose
        iteration the store's uniform conditions select (`for k in range(3): if k == 2: store`): {var:
        (trips, the conditions)}. The candidate iteration is the least whose conditions hold."""
        out = {}
        outer = set()
        conds = [(c, pos) for c, pos in self.acc.node.conds if c.uniform]
        for L in self.acc.node.loops:
            trips = _const_trips(L)
            mine = [(c, pos) for c, pos in conds if L.var in c.loopdeps]
            if ("loop", L.var) not in self.used and trips is not None and mine and 1 < trips <= self.GATED_TRIPS \
                    and all(c.loopdeps <= outer | {L.var} for c, _ in mine):
                out[L.var] = (trips, mine)
            outer.add(L.var)
        return out

    def lin_eval(self, lin, skip, known=None, drop=()):
        """The affine form without atom `skip`: sizes and scalars as terms, the atoms in `known` by
        their terms, those in `drop` left out (the smaller sub-tile steps); None for any other."""
        total = bv(lin[1])
        for a, c in lin[0].items():
            if a == skip or a in drop:
                continue
            if a[0] == "size":
                total = Z.add(total, Z.mul(self.an.sizes[a[1]], bv(c)))
            elif a[0] == "param":
                total = Z.add(total, Z.mul(self.an.params[a[1]], bv(c)))
            elif known is not None and a in known:
                total = Z.add(total, Z.mul(known[a], bv(c)))
            else:
                return None
        return total

    def __call__(self, S, x):
        ok = []
        ctx = self.block(S, x, ok)
        inst = None if ctx is None else self.instance(S, x, ctx, ok)
        if inst is None:
            return None
        coords = self.tile_coords(S, x, ctx, inst, ok)
        acc = self.acc
        if self.boxes is not None:
            ok.append(Z.Or(*[in_box(b, coords) for b in self.boxes]))
        ok += V.conditions_hold([(c, pos) for c, pos in acc.node.conds if c.uniform], S, ctx, inst)
        if acc.where is not None and acc.where.uniform:
            ok += V.conditions_hold([(acc.where, True)], S, ctx, inst)
        return Z.And(*ok), ctx, inst, coords

    def block(self, S, x, ok):
        """The block that could write x (appending to `ok` that it exists; None beyond the encoding)."""
        blocks = [bv(0), bv(0), bv(0)]
        for a, (d, c) in self.used.items():
            if a[0] == "blk":
                # (the loop steps of a sub-tiled dimension are smaller than the block's: dropped by the floor)
                rest = self.lin_eval(self.start_lin(d), a, drop=self.same_dim(a))
                if rest is None:
                    return None
                blocks[a[1]] = Z.floordiv(Z.sub(Z.sub(x[d], rest), bv(self.view_lo(d))), bv(c))
        for axis, b in self.strided_blocks(x).items():
            blocks[axis] = b
        self.gated_blocks(S, blocks)
        ctx = V.Ctx(blocks, TRUE)
        for g, b in zip(self.an.grid, blocks, strict=True):
            ok += [Z.Le(bv(0), b), Z.Lt(b, g.fn(S, None, None, None))]
        return ctx

    GATED_EXTENT = 32  # the most blocks along an axis `gated_blocks` chooses among

    def gated_blocks(self, S, blocks) -> None:
        """A block axis the view does not move with, on a grid of a few blocks along it, under
        conditions that select among them (`if block_id.y == 1:`): the candidate is the least block
        along that axis whose conditions hold, not block 0 (a false "never written" otherwise)."""
        fixed = {a[1] for a in self.used if a[0] == "blk"}
        conds = [(c, pos) for c, pos in self.acc.node.conds if c.uniform and not c.loopdeps]
        if self.acc.where is not None and self.acc.where.uniform and not self.acc.where.loopdeps:
            conds.append((self.acc.where, True))
        if not conds:
            return
        for axis, g in enumerate(self.an.grid):
            ext = const_of(g)
            if axis in fixed or ext is None or not 1 < ext <= self.GATED_EXTENT or Z.const_value(blocks[axis]) != 0:
                continue

            def holds(y, axis=axis):
                trial = list(blocks)
                trial[axis] = bv(y)
                return Z.And(*V.conditions_hold(conds, S, V.Ctx(trial, TRUE), None))

            blocks[axis] = _least(ext, holds)

    def strided_blocks(self, x) -> dict:
        """A loop whose start moves with the block, storing a view that moves with the loop variable t
        but not with block_id.a: the block whose loop visits the t of element x.
          * `for t in range(block_id.a + k, stop, step)` (grid-stride): block_id.a == (t - k) mod step;
          * `for t in range(c * block_id.a + k, stop)` (c consecutive t per block): block_id.a ==
            (t - k) // c. Whatever the stop, no other block can visit t when that one does not: the
            others' runs start more than c before t, or after it, and a run of fewer than c
            iterations that misses t ends before the next block's start.
        (Taking that block as 0, the default, misses the other blocks' tiles: a false "never
        written".) {axis: that block id}."""
        out = {}
        for L in self.acc.node.loops:
            a = ("loop", L.var)
            lin = L.start.lin
            if a not in self.used or lin is None:
                continue
            blk = [b for b in lin[0] if b[0] == "blk"]
            if len(blk) != 1 or blk[0] in self.used or blk[0][1] in out:
                continue
            coef = lin[0][blk[0]]
            if coef != 1 and not (L.step == 1 and isinstance(coef, int) and coef > 1):
                continue
            d, c = self.used[a]
            rest = self.view_rest(d, a)
            k = self.lin_eval(lin, blk[0])
            if rest is None or k is None:
                continue
            t = Z.floordiv(Z.sub(Z.sub(x[d], rest), bv(self.view_lo(d))), bv(c))
            out[blk[0][1]] = Z.mod(Z.sub(t, k), bv(L.step)) if coef == 1 else Z.floordiv(Z.sub(t, k), bv(coef))
        return out

    def start_lin(self, d):
        """The affine form of the start of the view's dimension d (without the thread)."""
        return self.acc.view.items[d][1].lin

    def view_rest(self, d, skip):
        """The start of the view's dimension d without the atom `skip` (sizes and constants only)."""
        return self.lin_eval(self.start_lin(d), skip)

    def view_lo(self, d) -> int:
        """The least tile coordinate written in dimension d."""
        return 0

    def interleaved(self, L, a, d, c) -> int:
        """(ThreadSkolemWriter: an innermost loop whose steps interleave with the threads' offsets.)
        A tile view's element gives its iteration directly."""
        return 0

    def instance(self, S, x, ctx, ok):
        """The iteration of every enclosing loop that could write x (None beyond the encoding)."""
        inst = V.Inst(self.acc.node)
        for L in self.acc.node.loops:
            start, trips = L.bounds(S, ctx, inst)
            a = ("loop", L.var)
            if a in self.used:
                d, c = self.used[a]
                # a sub-tiled dimension: the block and the outer loops are known, the inner steps dropped
                known = {b: ctx.block[b[1]] if b[0] == "blk" else inst.vals[b[1]]
                         for b in self.same_dim(a) if b[0] == "blk" or b[1] in inst.vals}
                drop = [b for b in self.same_dim(a) if b not in known]
                rest = self.lin_eval(self.start_lin(d), a, known, drop)
                if rest is None:
                    return None
                off = Z.sub(Z.sub(Z.sub(x[d], rest), Z.mul(start, bv(c))), bv(self.view_lo(d)))
                m = Z.floordiv(off, bv(c * L.step))
                interleaved = self.interleaved(L, a, d, c)
                if interleaved:
                    m = self.least_written(S, ctx, inst, L, start, x, interleaved)
            elif L.var in self.gated:
                count, conds = self.gated[L.var]

                def holds(i, L=L, start=start, conds=conds):
                    return Z.And(*V.conditions_hold(conds, S, ctx, _at_iteration(inst, L, start, i)))

                m = _least(count, holds)
            else:
                m = bv(0)
            inst.cnt[L.var] = m
            inst.vals[L.var] = Z.add(start, Z.mul(m, bv(L.step)))
            ok += [Z.Le(bv(0), m), Z.Lt(m, trips)]
        return inst

    def tile_coords(self, S, x, ctx, inst, ok):
        """x's coordinate in the tile that block and instance store (it must lie in the tile)."""
        coords = []
        for d, (kind, iv, ext) in enumerate(self.acc.view.items):
            off = Z.sub(x[d], iv.fn(S, ctx, inst, None))
            if kind == "slice":
                coords.append(off)
                ok += [Z.Le(bv(0), off), Z.Lt(off, bv(ext))]
            else:
                ok.append(Z.Eq(off, bv(0)))
        return coords


def in_box(box, coords):
    """The coordinates lie in the half-open box ((lo...), (hi...))."""
    lo, hi = box
    return Z.And(*[z for a, b, y in zip(lo, hi, coords, strict=True) for z in (Z.Le(bv(a), y), Z.Lt(y, bv(b)))])


class ThreadSkolemWriter(SkolemWriter):
    """`SkolemWriter` for stores whose view starts or conditions depend on the thread: the element
    x is written at offset r = x - U (U: the thread-independent part of the starts) in what the
    candidate block and iteration write, by the threads `Writers` names for r."""

    def __init__(self, an, acc, used, wr):
        self.an, self.acc, self.used, self.wr = an, acc, used, wr
        self.exact = self.disjoint()
        self.gated = {}  # (its instance takes every loop the view does not move with at the first iteration)

    def start_lin(self, d):
        return self.wr.dims[d][1]

    def extent(self, d) -> int:
        """What the threads of one block and iteration write along dimension d."""
        return int(self.wr.hi[d] - self.wr.lo[d])

    def interleaved(self, L, a, d, c) -> int:
        """The trip count of the innermost loop L when its steps interleave with the threads' offsets
        (`thread_id * 8 + k`, k < 8: the step, 1, is smaller than what the threads span) and the
        element's offset alone does not give the iteration; 0 otherwise. Only a constant trip count
        of at most GATED_TRIPS, with no smaller atom in the dimension."""
        trips = _const_trips(L)
        if L is not self.acc.node.loops[-1] or trips is None or not 1 < trips <= self.GATED_TRIPS:
            return 0
        if any(self.used[b][1] < c for b in self.same_dim(a)):
            return 0
        return trips if c * L.step < self.extent(d) else 0

    def least_written(self, S, ctx, inst, L, start, x, trips):
        """The least iteration of L at which some thread's offset is x's (by the offsets the threads
        write, `Writers.boxes`); the candidate is then checked like any other."""
        def holds(i):
            trial = _at_iteration(inst, L, start, i)
            r = [Z.sub(x[e], self.wr.uniform_start(S, ctx, trial, e)) for e in range(len(x))]
            return in_boxes(self.wr.boxes, r)

        return _least(trips, holds)

    def view_lo(self, d) -> int:
        return int(self.wr.lo[d])

    def __call__(self, S, x):
        ok = []
        ctx = self.block(S, x, ok)
        inst = None if ctx is None else self.instance(S, x, ctx, ok)
        if inst is None:
            return None
        r = [Z.sub(x[d], self.wr.uniform_start(S, ctx, inst, d)) for d in range(len(x))]
        ex, named = self.wr.executes(S, ctx, inst, r)
        ok.append(ex)
        return Z.And(*ok), ctx, inst, r, named
