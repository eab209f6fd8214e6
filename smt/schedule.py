"""The tile schedule of a persistent kernel: a lemma that every output tile is computed exactly once.

A persistent kernel launches a constant grid (`grid(SMS)`) and loops over tiles,
`for tile in range(block_id.x, TILES, SMS)`, computing from `tile` the output tile's starts, e.g.
in grouped order

    grp = tile // (GROUP * TN); rows = min(GROUP, TM - grp * GROUP)
    m0 = (grp * GROUP + (tile % (GROUP * TN)) % rows) * BM; n0 = ((tile % (GROUP * TN)) // rows) * BN

and storing the tile `C[m0 : m0 + BM, n0 : n0 + BN]`. `schedule_lemma(kernel)` proves, for all sizes
(unbounded integers, the kernel's `requires` assumed), that

  1. the blocks' loops visit every tile in [0, TILES) exactly once (structural: the loop starts at
     block_id.x and steps by the grid's constant extent, in a one-dimensional grid);
  2. tile -> (m0 / BM, n0 / BN) maps [0, TILES) into [0, cdiv(M, BM)) x [0, cdiv(N, BN)), with m0 and
     n0 multiples of the box (BM, BN);
  3. the map is injective, and TILES == cdiv(M, BM) * cdiv(N, BN): so it is a bijection, and the
     boxes (clipped at the tensor's edges) partition the output.

Division and remainder mean what argus_verify.semantics says (floor); the queries are Z3 integer
queries over the kernel's own expressions (its lets inlined). A counterexample (two tiles with the
same output tile, or one outside) is re-evaluated on Python integers before it is reported.

`persistent_once` decides output-once with it, structurally, where each iteration stores its whole
box once (one writer per element, under conditions of the thread alone): the tag obligations do not
use the lemma yet.
"""

from __future__ import annotations

import attrs
import z3

from argus_verify import ir, semantics
from argus_verify.smt import zops as Z

# Z3's deterministic work budget per query of the lemma (the grouped order's injectivity takes 4-8 M)
LEMMA_RLIMIT = 40_000_000


@attrs.define
class ScheduleLemma:
    status: str  # "proved" | "violated" | "unknown"
    message: str
    loop: ir.For | None = None
    store: object = None
    witness: dict = attrs.field(factory=dict)
    seconds: float = 0.0


class _Beyond(Exception):
    pass


def _lets(body, upto=None) -> dict:
    """Integer lets of `body` (not descending into loops or branches) before statement `upto`."""
    out: dict = {}
    for s in body:
        if s is upto:
            break
        if isinstance(s, ir.Let):
            if s.name in out:
                raise _Beyond(f"the integer {s.name!r} is defined twice")
            out[s.name] = s.value
    return out


def _persistent_loop(kernel):
    """(the tile loop that stores the output, its grid extent, the lets before it) of a one-dimensional
    constant grid, or None. The loop may sit in branches (warpgroup roles), not in other loops."""
    try:
        grid = [ir.eval_int(g, {}) for g in kernel.grid]
    except (KeyError, ZeroDivisionError):
        return None
    if len(grid) < 1 or any(g != 1 for g in grid[1:]) or grid[0] <= 1:
        return None
    found = []

    def walk(body, lets):
        for s in body:
            if isinstance(s, ir.For) and isinstance(s.start, ir.ISpecial) and s.start.which == "block_id.x":
                if any(isinstance(x, ir.TmaStore) or (isinstance(x, ir.Store) and x.dst.space == "global")
                       for x in ir.walk_stmts(s.body)):
                    found.append((s, grid[0], {**lets, **_lets(body, s)}))
            elif isinstance(s, ir.If):
                here = {**lets, **_lets(body, s)}
                walk(s.then, here)
                walk(s.orelse, here)

    walk(kernel.body, {})
    return found[0] if len(found) == 1 else None


def _tile_store(loop):
    """The one store of an output tile directly in the tile loop's body (under ifs of the thread)."""
    found = []

    def walk(body):
        for s in body:
            if isinstance(s, ir.TmaStore) or (isinstance(s, ir.Store) and s.dst.space == "global"):
                found.append(s)
            elif isinstance(s, ir.If):
                walk(s.then)
                walk(s.orelse)
            elif isinstance(s, ir.For):
                inner = ir.walk_stmts(s.body)
                if any(isinstance(x, (ir.TmaStore, ir.Store)) and x.dst.space == "global" for x in inner):
                    found.append(None)  # a store repeated by an inner loop: not one box per tile
    walk(loop.body)
    return found[0] if len(found) == 1 else None


class _Terms:
    """Kernel integer expressions as Z3 integer terms (lets inlined, sizes as variables)."""

    def __init__(self, kernel, lets: dict, bound: dict, loop, inner: dict):
        self.kernel, self.lets, self.bound, self.inner = kernel, lets, bound, inner
        self.sizes = {n: z3.Int(n) for n in kernel.sizes}
        self.in_loop: dict = {}  # how often each name is defined in the tile loop, at any depth
        for s in ir.walk_stmts(loop.body):
            if isinstance(s, ir.Let):
                self.in_loop[s.name] = self.in_loop.get(s.name, 0) + 1

    def __call__(self, e):
        if isinstance(e, ir.IConst):
            return Z.bv(e.value)
        if isinstance(e, ir.IVar):
            if e.name in self.bound:
                return self.bound[e.name]
            if e.name in self.lets:
                # the definition the store sees: no other one in the loop may shadow it
                if self.in_loop.get(e.name, 0) != (1 if e.name in self.inner else 0):
                    raise _Beyond(f"the integer {e.name!r} is defined more than once in the tile loop")
                return self(self.lets[e.name])
            if e.name in self.sizes:
                return self.sizes[e.name]
            raise _Beyond(f"the tile's start depends on {e.name!r}")
        if isinstance(e, ir.IBin):
            return semantics.INT_OPS[e.op].z3(Z, self(e.a), self(e.b))
        if isinstance(e, ir.IUn):
            return semantics.INT_UNARY[e.op].z3(Z, self(e.a))
        if isinstance(e, ir.ISelect):
            return Z.Ite(Z.i2b(self(e.cond)), self(e.a), self(e.b))
        raise _Beyond(f"{type(e).__name__} in the tile schedule")


def schedule_lemma(kernel, timeout_s: float = 120.0) -> ScheduleLemma | None:
    """The lemma for `kernel`'s persistent tile loop (None: not a persistent kernel)."""
    import time

    found = _persistent_loop(kernel)
    if found is None:
        return None
    t0 = time.perf_counter()
    loop, blocks, outer = found
    saved = Z.MODE
    Z.set_mode("int")
    try:
        return _lemma(kernel, loop, blocks, outer, timeout_s, t0)
    except _Beyond as e:
        return ScheduleLemma("unknown", f"the tile schedule is beyond the lemma: {e}", loop,
                             seconds=time.perf_counter() - t0)
    finally:
        Z.set_mode(saved)


def _lemma(kernel, loop, blocks, outer, timeout_s, t0) -> ScheduleLemma:
    import time

    def done(status, message, **kw):
        return ScheduleLemma(status, message, loop, store, seconds=time.perf_counter() - t0, **kw)

    store = _tile_store(loop)
    if store is None:
        raise _Beyond("the tile loop does not store exactly one output tile per iteration")
    dst = store.dst
    # (before the step: a 1-D grid-stride loop is the encoding's to decide, whatever its step)
    if len(dst.index) != 2 or not all(isinstance(it, ir.Slice) for it in dst.index):
        raise _Beyond("the stored tile is not a 2-D slice of the output")
    if loop.step != blocks:
        return done("violated", f"the tile loop steps by {loop.step}, not by the grid's {blocks} blocks: "
                    + ("tiles are skipped" if loop.step > blocks else "blocks compute the same tiles"),
                    witness={"step": loop.step, "blocks": blocks})
    inner = _lets(loop.body, None)
    if set(outer) & set(inner) or loop.var in outer or loop.var in inner:
        raise _Beyond("a name of the tile loop is also defined outside it")
    (bm, bn) = (it.extent for it in dst.index)
    tensor = next(t for t in kernel.tensors if t.name == dst.base)
    t1, t2 = z3.Int("tile1"), z3.Int("tile2")
    f1 = _Terms(kernel, {**outer, **inner}, {loop.var: t1}, loop, inner)
    f2 = _Terms(kernel, {**outer, **inner}, {loop.var: t2}, loop, inner)
    m1, n1 = (f1(it.start) for it in dst.index)
    m2, n2 = (f2(it.start) for it in dst.index)
    stop = f1(loop.stop)
    rows_t = Z.cdiv(f1(tensor.shape[0]), Z.bv(bm))
    cols_t = Z.cdiv(f1(tensor.shape[1]), Z.bv(bn))
    pre = [x >= 1 for x in f1.sizes.values()] + [Z.i2b(f1(r)) for r in kernel.requires]

    def query(*cons):
        s = z3.Solver()
        s.set("timeout", int(timeout_s * 1000))
        s.set("rlimit", LEMMA_RLIMIT)  # (the work counter: the same answer whatever the load)
        s.add(*pre, *cons)
        r = s.check()
        return r, (s.model() if r == z3.sat else None), s.reason_unknown() if r == z3.unknown else ""

    def in_range(t):
        return z3.And(t >= 0, t < stop)

    checks = [
        ("count", "the tile loop's bound is the number of output tiles",
         [z3.Not(stop == rows_t * cols_t)]),
        ("range", "each tile's box lies on the output's tile grid",
         [in_range(t1), z3.Not(z3.And(m1 % bm == 0, n1 % bn == 0, m1 >= 0, n1 >= 0,
                                      m1 / bm < rows_t, n1 / bn < cols_t))]),
        ("injective", "two tiles never store the same box",
         [in_range(t1), in_range(t2), t1 != t2, m1 == m2, n1 == n2]),
    ]
    for name, claim, cons in checks:
        r, model, why = query(*cons)
        if r == z3.unsat:
            continue
        if r == z3.unknown:
            return done("unknown", f"{claim}: the solver gave up ({why})")
        sizes = {n: model.eval(v, model_completion=True).as_long() for n, v in f1.sizes.items()}
        tiles = [model.eval(t, model_completion=True).as_long() for t in (t1, t2)]
        witness = _confirm(kernel, loop, outer, inner, dst, name, sizes, tiles)
        if witness is None:
            return done("unknown", f"{claim}: a counterexample of the solver did not hold on integers")
        return done("violated", f"{claim} does not hold: {witness['text']}", witness=witness)
    return done("proved", f"every output tile {dst.base}[m0 : m0 + {bm}, n0 : n0 + {bn}] is computed by exactly "
                "one iteration of one block: the blocks visit each tile once, and tile -> (m0, n0) is a "
                "bijection onto the output's tile grid (for all sizes)")


def _confirm(kernel, loop, outer, inner, dst, name, sizes, tiles):
    """The counterexample re-evaluated on Python integers (None if it does not hold there)."""
    env0 = dict(sizes)
    for n, e in outer.items():
        try:
            env0[n] = ir.eval_int(e, env0)
        except KeyError:
            pass
    stop = ir.eval_int(loop.stop, env0)
    bm, bn = (it.extent for it in dst.index)
    shape = [ir.eval_int(d, env0) for d in next(t for t in kernel.tensors if t.name == dst.base).shape]
    grid = (-(-shape[0] // bm), -(-shape[1] // bn))

    def box(t):
        env = dict(env0)
        env[loop.var] = t
        for n, e in inner.items():
            try:
                env[n] = ir.eval_int(e, env)
            except KeyError:  # of the block or the thread: the starts must not need it
                pass
        return tuple(ir.eval_int(it.start, env) for it in dst.index)

    try:
        return _witness(name, sizes, tiles, stop, grid, box, bm, bn, shape)
    except (KeyError, ZeroDivisionError):
        return None


def _witness(name, sizes, tiles, stop, grid, box, bm, bn, shape):
    if name == "count":
        if stop != grid[0] * grid[1]:
            return {"sizes": sizes, "tiles": stop, "grid": list(grid),
                    "text": f"with {sizes} the loop runs over {stop} tiles, the output has {grid[0]} x {grid[1]}"}
        return None
    if name == "range":
        t = tiles[0]
        m0, n0 = box(t)
        if not (m0 % bm == 0 and n0 % bn == 0 and 0 <= m0 // bm < grid[0] and 0 <= n0 // bn < grid[1]):
            return {"sizes": sizes, "tile": t, "start": [m0, n0],
                    "text": f"with {sizes} tile {t} stores at ({m0}, {n0}), off the {grid[0]} x {grid[1]} tile grid"}
        return None
    a, b = tiles
    start = box(a)
    inside = all(0 <= x < n for x, n in zip(start, shape, strict=True))  # the box holds an element of the output
    if a != b and 0 <= a < stop and 0 <= b < stop and start == box(b) and inside:
        return {"sizes": sizes, "tiles": [a, b], "start": list(box(a)),
                "text": f"with {sizes} tiles {a} and {b} both store at {box(a)} (so some tile is never stored)"}
    return None


def persistent_once(an, decl, stores) -> list | None:
    """output-once of a persistent kernel's output from the lemma (None: not this case, and the
    solver's encoding decides). Each iteration of the tile loop must store the whole box of its
    tile, each element by one thread, under conditions of the thread alone that some thread meets,
    and the store must not sit in another loop: then the boxes of the tiles, a bijection onto the
    output's tile grid, are each written exactly once."""
    from argus_verify.smt.obligations.common import span_of
    from argus_verify.smt.report import ObligationResult
    from argus_verify.smt.writers import Writers

    if len(stores) != 1:
        return None
    acc = stores[0]
    if "_schedule_lemma" not in an.__dict__:
        an._schedule_lemma = schedule_lemma(an.k)
    lemma = an._schedule_lemma
    if lemma is None or lemma.store is not acc.node.stmt or lemma.status == "unknown":
        return None
    if [L.var for L in acc.node.loops] != [lemma.loop.var]:
        return None
    wr, _why = Writers.of(an, acc.node, acc.view, acc.coords, acc.values, acc.where)
    if wr is None or wr.mixed or wr.uniform_conds or not wr.live.any() or wr.m != 1:
        return None
    if any(thr for _kind, _rest, thr, _ext, _iv in wr.dims):
        return None
    tile = tuple(it.extent for it in lemma.store.dst.index)
    if len(wr.points) != tile[0] * tile[1] or tuple(wr.lo) != (0, 0) or tuple(wr.hi) != tile:
        return None
    span = span_of(acc.node)
    seconds = lemma.seconds
    line = acc.node.span.line
    if lemma.status == "violated":
        w = lemma.witness
        if "tiles" not in w or not isinstance(w["tiles"], list):
            return None  # off the tile grid or a different count: the solver's encoding says more
        ge = list(w["start"])
        witness = {"sizes": w["sizes"], "element": {"tensor": decl.tensor, "coord": ge}, "tiles": w["tiles"]}
        expl = [f"tiles {w['tiles'][0]} and {w['tiles'][1]} of the tile loop (line {lemma.loop.span.line}) both "
                f"store the box at {tuple(ge)} (line {line})"]
        return [ObligationResult("output-once", "violated", span, f"an element of {decl.tensor} is written twice",
                                 witness, {"element": ge, "schedule": lemma.message},
                                 [], "the tile order maps two tiles to one output tile: check how m0 and n0 are "
                                 "computed from the tile index", expl, seconds)]
    detail = {"schedule": lemma.message}
    how = (f"the tile schedule of line {lemma.loop.span.line} is a bijection onto {decl.tensor}'s tiles (proved for "
           "all sizes), each iteration storing its tile's box once")
    return [ObligationResult("output-once", "proved", span, f"no element of {decl.tensor} is written twice (line "
                             f"{line}): {how}", detail=dict(detail), seconds=seconds / 2),
            ObligationResult("output-once", "proved", decl.span, f"every element of {decl.tensor} is written: {how}",
                             detail=dict(detail), seconds=seconds / 2)]


__all__ = ["ScheduleLemma", "persistent_once", "schedule_lemma"]
