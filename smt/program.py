"""Program structure: statement positions, loop instances, execution order, counting.

Every thread executes the same statement sequence (barriers and loop bounds are block-uniform);
`If` only predicates. A statement *instance* is the statement plus one iteration counter per
enclosing loop. This module gives, as Z3 formulas over instances:

* `before(a, b)`: instance a executes before instance b (lexicographic on the counters of the
  common loops, then program order; a `then` branch counts before its `else` branch);
* `recent_before(S, p)` / `next_after(S, p)`: a few concrete-relative instances of statement S
  just before / after instance p (the latest barrier or wait before a read, the next write that
  overwrites a stage buffer). They are *candidates*: every use is sound with any subset;
* `count_commits(p)`: the number of `commit()` executed before p, in closed form.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt import zops as Z
from argus_verify.smt.values import Inst
from argus_verify.smt.zops import FALSE, TRUE, bv


class LoopInfo:
    def __init__(self, stmt: ir.For, start, stop, depth: int, body_block: int):
        self.stmt = stmt
        self.var = stmt.var
        self.start = start  # IntV
        self.stop = stop  # IntV
        self.step = stmt.step
        self.depth = depth
        self.body_block = body_block

    def bounds(self, S, ctx, inst):
        start = self.start.fn(S, ctx, inst, None)
        stop = self.stop.fn(S, ctx, inst, None)
        trips = Z.smax(bv(0), Z.cdiv(Z.sub(stop, start), bv(self.step)))
        return start, trips


class Node:
    """A statement position. `levels`: ((block id, index, child statement), ...) from the root."""

    def __init__(self, stmt, nid, levels, loops, conds, blocks):
        self.stmt = stmt
        self.id = nid
        self.levels = tuple(levels)
        self.loops = tuple(loops)  # LoopInfo, outermost first
        self.conds = tuple(conds)  # (IntV, polarity)
        self.blocks = blocks  # block id -> list of statements (shared table)

    @property
    def span(self):
        return getattr(self.stmt, "span", None)

    def guard(self, S, ctx, inst, t):
        """The If conditions around this statement hold for thread t. With t None (a block-level
        event: barrier, wait) a condition that mentions the thread is evaluated for thread 0: it
        must be uniform (barrier-divergence), so thread 0 speaks for the block."""
        parts = []
        for c, pos in self.conds:
            tt = t if (t is not None or c.uniform) else Z.bv(0)
            x = Z.i2b(c.fn(S, ctx, inst, tt))
            parts.append(x if pos else Z.Not(x))
        return Z.And(*parts)

    @property
    def uniform_guard(self) -> bool:
        return all(c.uniform for c, _ in self.conds)


def new_inst(S, ctx, node: Node, prefix: str) -> Inst:
    """A fresh symbolic instance of `node`: one counter per enclosing loop, constrained to range."""
    inst = Inst(node)
    cons = []
    for L in node.loops:
        n = S.var(f"{prefix}.{L.var}")
        start, trips = L.bounds(S, ctx, inst)
        inst.cnt[L.var] = n
        inst.vals[L.var] = Z.add(start, Z.mul(n, bv(L.step)))
        cons += [n >= 0, n < trips]
    inst.cons = Z.And(*cons)
    return inst


def _with_counters(S, ctx, node: Node, fixed: dict, make_cnt) -> tuple:
    """Instance of `node` whose counters come from `fixed` (by loop var) or `make_cnt(L, trips)`;
    returns (Inst, exists) where exists says every counter is in range."""
    inst = Inst(node)
    exists = []
    for L in node.loops:
        start, trips = L.bounds(S, ctx, inst)
        if L.var in fixed:
            n, check = fixed[L.var]
        else:
            n, check = make_cnt(L, trips), True
        inst.cnt[L.var] = n
        inst.vals[L.var] = Z.add(start, Z.mul(n, bv(L.step)))
        if check:
            exists += [Z.Le(bv(0), n), Z.Lt(n, trips)]
    inst.cons = TRUE
    return inst, Z.And(*exists)


def divergence(a: Node, b: Node):
    """(common loops, a_first) where a_first is True/False when a precedes/follows b at their
    first difference, None when a is b."""
    common = []
    k = 0
    la, lb = a.levels, b.levels
    while True:
        if k >= len(la) or k >= len(lb):
            return common, None
        ba, xa, ca = la[k]
        bb, xb, cb = lb[k]
        if ba != bb:  # then-branch vs else-branch of one If
            return common, ba < bb
        if xa != xb:
            return common, xa < xb
        if k + 1 >= len(la) or k + 1 >= len(lb):
            return common, None
        if isinstance(ca, ir.For):
            common.append(ca.var)
        k += 1


def before(a: Inst, b: Inst):
    """Instance a strictly precedes instance b in every thread's execution order."""
    la, lb = a.node.levels, b.node.levels

    def rec(k):
        if k >= len(la) or k >= len(lb):
            return FALSE
        ba, xa, ca = la[k]
        bb, xb, cb = lb[k]
        if ba != bb:
            return TRUE if ba < bb else FALSE
        if xa != xb:
            return TRUE if xa < xb else FALSE
        if k + 1 >= len(la) or k + 1 >= len(lb):
            return FALSE
        rest = rec(k + 1)
        if isinstance(ca, ir.For):
            na, nb = a.cnt[ca.var], b.cnt[ca.var]
            if na.eq(nb):
                return rest
            return Z.Or(Z.Lt(na, nb), Z.And(Z.Eq(na, nb), rest))
        return rest

    return rec(0)


def same_instance(a: Inst, b: Inst):
    if a.node is not b.node:
        return FALSE
    return Z.And(*[Z.Eq(a.cnt[L.var], b.cnt[L.var]) for L in a.node.loops])


def recent_before(S, ctx, node: Node, p: Inst, depth: int) -> list:
    """Candidate instances of `node` before instance p: in p's iteration of the common loops
    (when node precedes p there) and in the `depth` previous iterations of the innermost common
    loop; loops of `node` not enclosing p are taken at their last `depth` iterations where the
    instance is in p's iteration or the one before (a prefetch loop after a persistent kernel's k
    loop fills the next tile's first stages, each read in that tile), at their last one before that."""
    common, first = divergence(node, p.node)
    fixed_base = {v: (p.cnt[v], False) for v in common}
    out = []
    deeper = [L for L in node.loops if L.var not in common]

    def fill(fixed, variants):
        res = []
        for d in range(variants):

            def make(L, trips, d=d, outer=deeper[0].var if deeper else None):
                return Z.sub(trips, bv(1 + (d if L.var == outer else 0)))

            res.append(_with_counters(S, ctx, node, fixed, make))
        return res

    if first:
        out += fill(fixed_base, depth if deeper else 1)
    if common:
        inner = common[-1]
        for d in range(1, depth + 1):
            fixed = dict(fixed_base)
            fixed[inner] = (Z.sub(p.cnt[inner], bv(d)), True)
            out += fill(fixed, depth if (deeper and d == 1) else 1)
        out += _outer_neighbours(S, ctx, node, p, common, -1)
    return out


def _outer_neighbours(S, ctx, node: Node, p: Inst, common: list, step: int) -> list:
    """For each common loop but the innermost: node's instance in the previous (step -1) or next
    (+1) iteration of that loop, with the loops inside it at their last (first) iterations: the
    end-of-body barrier of a tile's last k step orders the next tile's first k step."""
    out = []
    for i, var in enumerate(common[:-1]):
        fixed = {v: (p.cnt[v], False) for v in common[:i]}
        fixed[var] = (Z.add(p.cnt[var], bv(step)), True)

        def edge(L, trips):
            return Z.sub(trips, bv(1)) if step < 0 else bv(0)

        out.append(_with_counters(S, ctx, node, fixed, edge))
    return out


def next_after(S, ctx, node: Node, p: Inst, depth: int) -> list:
    """Candidate instances of `node` after instance p (mirror of `recent_before`): loops of
    `node` not enclosing p at their first iterations (`depth` of them in p's iteration of the common
    loops and the next one)."""
    common, first = divergence(node, p.node)
    fixed_base = {v: (p.cnt[v], False) for v in common}
    out = []
    deeper = [L for L in node.loops if L.var not in common]

    def fill(fixed, variants):
        res = []
        for d in range(variants):

            def make(L, trips, d=d, outer=deeper[0].var if deeper else None):
                return bv(d if L.var == outer else 0)

            res.append(_with_counters(S, ctx, node, fixed, make))
        return res

    if first is False:
        out += fill(fixed_base, depth if deeper else 1)
    if common:
        inner = common[-1]
        for d in range(1, depth + 1):
            fixed = dict(fixed_base)
            fixed[inner] = (Z.add(p.cnt[inner], bv(d)), True)
            out += fill(fixed, depth if (deeper and d == 1) else 1)
        out += _outer_neighbours(S, ctx, node, p, common, 1)
    return out


class CommitCounter:
    """Closed form of the number of `commit()` statements executed before an instance."""

    def __init__(self, body, loops_by_stmt):
        self.loops_by_stmt = loops_by_stmt  # id(For) -> LoopInfo
        self.exact = True
        self.reason = ""
        self._check(body, ())

    def _check(self, body, enclosing):
        for s in body:
            if isinstance(s, ir.If):
                if _contains(s, ir.Commit):
                    self.exact = False
                    self.reason = f"commit() under an if at line {s.span.line}"
            elif isinstance(s, ir.For):
                L = self.loops_by_stmt[id(s)]
                if _contains(s, ir.Commit) and (L.start.loopdeps | L.stop.loopdeps) & set(enclosing):
                    self.exact = False
                    self.reason = (
                        f"a loop whose bounds depend on an outer loop contains commit() (line {s.span.line})"
                    )
                self._check(s.body, enclosing + (s.var,))

    def per_iter(self, body, S, ctx, inst):
        total = bv(0)
        for s in body:
            total = Z.add(total, self.total(s, S, ctx, inst))
        return total

    def total(self, s, S, ctx, inst):
        if isinstance(s, ir.Commit):
            return bv(1)
        if isinstance(s, ir.For) and _contains(s, ir.Commit):
            L = self.loops_by_stmt[id(s)]
            _, trips = L.bounds(S, ctx, inst)
            return Z.mul(trips, self.per_iter(s.body, S, ctx, inst))
        return bv(0)

    def before(self, S, ctx, p: Inst):
        node = p.node
        total = bv(0)
        blocks = node.blocks
        partial = Inst(node)
        for k, (bid, idx, child) in enumerate(node.levels):
            for s in blocks[bid][:idx]:
                total = Z.add(total, self.total(s, S, ctx, partial))
            if k + 1 < len(node.levels) and isinstance(child, ir.For):
                L = self.loops_by_stmt[id(child)]
                if _contains(child, ir.Commit):
                    total = Z.add(total, Z.mul(p.cnt[L.var], self.per_iter(child.body, S, ctx, partial)))
                partial.cnt[L.var] = p.cnt[L.var]
                partial.vals[L.var] = p.vals[L.var]
        return total


def _contains(s, kind) -> bool:
    if isinstance(s, kind):
        return True
    if isinstance(s, ir.For):
        return any(_contains(x, kind) for x in s.body)
    if isinstance(s, ir.If):
        return any(_contains(x, kind) for x in s.then + s.orelse)
    return False
