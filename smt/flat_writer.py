"""The only writer of an output element stored through a flattened index, the commonest elementwise
idiom of hand-written kernels:

    g = block_id.x * B + thread_id          (one element per thread)
    store(out[g // E : g // E + 1, g % E : g % E + 1], v, where=g < M * E)

The starts are not affine (a division by the size E), so `SkolemWriter` cannot invert them. Here the
candidate is computed from the element x: g* = x[row] * E + x[col], then the block g* // B and the
thread g* % B (from g's affine form). Whether that thread really writes x is then asked of the
store's own expressions: its starts evaluated at that block and thread must be x, and its
conditions and where= must hold there. So the candidate never claims more than the kernel does; a
wrong guess only costs completeness, and with B equal to the block size the map is a bijection
(`exact`): an element no candidate writes is written by nobody.
"""

from __future__ import annotations

from collections import Counter

from argus_verify import ir
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.coverage import subst
from argus_verify.smt.zops import TRUE, bv


def flat_writer(an, acc):
    """A `FlatWriter` for a store of one element per thread at (g // E, g % E) or (g % E, g // E),
    at the kernel's top level; None for any other store."""
    stmt = acc.node.stmt
    if acc.node.loops or not isinstance(stmt, ir.Store) or len(stmt.dst.index) != 2:
        return None
    if any(ext != 1 for _kind, _iv, ext in acc.view.items) or len(an.tensor_dims[acc.tensor]) != 2:
        return None
    table = acc.coords.coord_table()
    if table.shape[1] != 1 or table.any():
        return None  # one value per thread, at the tile's only element
    lets = _single_lets(an.k)
    starts = [subst(it.start, lets) for it in stmt.dst.index]
    if not all(isinstance(s, ir.IBin) and s.op in ("//", "%") for s in starts):
        return None
    (a, b) = starts
    if {a.op, b.op} != {"//", "%"} or a.a != b.a or a.b != b.b:
        return None
    row = 0 if a.op == "//" else 1  # the dimension holding g // E
    divisor = a.b
    if isinstance(divisor, ir.IConst) and divisor.value > 0:
        extent = divisor.value
    elif isinstance(divisor, ir.IVar) and divisor.name in an.sizes:
        extent = divisor.name
    else:
        return None
    g = an.ints.visit(a.a, {}, None)
    if g.lin is None:
        return None
    atoms, const = g.lin
    blk = {k: c for k, c in atoms.items() if k[0] == "blk"}
    thr = {k: c for k, c in atoms.items() if k[0] == "thr"}
    rest = {k: c for k, c in atoms.items() if k[0] == "size"}
    if list(blk) != [("blk", 0)] or thr != {("thr", "t"): 1} or len(blk) + len(thr) + len(rest) != len(atoms):
        return None
    step = blk[("blk", 0)]
    if step < 1:
        return None
    offset = (const, {k[1]: c for k, c in rest.items()})
    return FlatWriter(an, acc, row, extent, step, offset)


class FlatWriter:
    """See the module. `__call__(S, x)` -> (the candidate writes x, its block, its instance, its
    tile coordinate), as `SkolemWriter`'s."""

    first_iteration_only = False

    def __init__(self, an, acc, row, extent, step, offset):
        # (terms are made per query: the query's encoding decides their sort)
        self.an, self.acc, self.row, self.extent, self.step, self.offset = an, acc, row, extent, step, offset
        self.exact = step == an.T  # blocks partition g: one (block, thread) per g

    def __call__(self, S, x):
        extent = bv(self.extent) if isinstance(self.extent, int) else self.an.sizes[self.extent]
        const, sizes = self.offset
        offset = bv(const)
        for name, c in sizes.items():
            offset = Z.add(offset, Z.mul(self.an.sizes[name], bv(c)))
        g = Z.add(Z.mul(x[self.row], extent), x[1 - self.row])
        local = Z.sub(g, offset)
        b = Z.floordiv(local, bv(self.step))
        t = Z.sub(local, Z.mul(b, bv(self.step)))
        ctx = V.Ctx([b, bv(0), bv(0)], TRUE)
        ok = [Z.Le(bv(0), t), Z.Lt(t, bv(self.an.T))]
        for grid, blk in zip(self.an.grid, ctx.block, strict=True):
            ok += [Z.Le(bv(0), blk), Z.Lt(blk, grid.fn(S, None, None, None))]
        inst = V.Inst(self.acc.node)
        # the store's own starts at that block and thread are x (the candidate is only a guess)
        for d, (_kind, iv, _ext) in enumerate(self.acc.view.items):
            ok.append(Z.Eq(iv.fn(S, ctx, inst, t), x[d]))
        ok += V.conditions_hold(self.acc.node.conds, S, ctx, inst, t)
        if self.acc.where is not None:
            ok += V.conditions_hold([(self.acc.where, True)], S, ctx, inst, t)
        return Z.And(*ok), ctx, inst, [bv(0), bv(0)]


def _single_lets(kernel) -> dict:
    """name -> value (with the earlier lets substituted) of the kernel's integer lets that are
    assigned once: a let assigned more than once has no single definition at the store."""
    counts = Counter(s.name for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.Let))
    lets: dict = {}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Let) and counts[s.name] == 1:
            lets[s.name] = subst(s.value, lets)
    return lets


__all__ = ["FlatWriter", "flat_writer"]
