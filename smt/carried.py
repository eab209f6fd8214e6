"""Loop-carried values: what a variable holds at the head of each iteration.

Inside a loop body a carried variable reads a `Cell`. Once the walk is done (every write record
exists) `CarriedMixin.resolve_carried` picks, per loop, inner loops first, the cheapest exact
description of each cell, checking each hypothesis as an inductive invariant (a query):

    shift    the body does not read the cell: iteration n sees the pre-loop value at n = 0 and the
             body's value of iteration n - 1 after that (no query needed)
    pre      the value never changes what it carries: the pre-loop value throughout
    first    the value after the first iteration is kept from then on
    affine   `x = x + d`: x = pre + d * counter
    unroll   the recurrence followed exactly a few iterations back, widened (`havoc`) beyond

A fragment cell also has a coordinate form (`FragV.cfn`) when its pre-loop and body values do.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.ints import const_of, lin_add, lin_mul
from argus_verify.smt.zops import bv


def _getter(cell):
    """How to read a value's function: its tag for fragments, its integer for scalars."""
    if cell.is_frag:
        return lambda val, S, ctx, inst, t, v: val.tag(S, ctx, inst, t, v)
    return lambda val, S, ctx, inst, t, v: val.fn(S, ctx, inst, t, v)


class Cell:
    """The value of a loop-carried variable at the head of an iteration (a hypothesis)."""

    def __init__(self, name, pre, loop, is_frag):
        self.name, self.pre, self.loop, self.is_frag = name, pre, loop, is_frag
        self.fn = pre.fn if not is_frag else (lambda S, ctx, inst, t, v, pre=pre: pre.tag(S, ctx, inst, t, v))
        self.id = id(self)
        self.mode = "pre"
        self.reason = ""
        self.cfn = None  # the coordinate form of the hypothesis (see FragV.cfn)
        self.cfn_ok = False  # until the loop is decided: the slow, always-correct path


class CarriedMixin:
    """Deciding the cells of each loop (`resolve_carried`, called by `Analysis.finish`)."""

    UNROLL = 2

    def resolve_carried(self, L, cells, post, end_node):
        try:
            self._resolve_carried(L, cells, post, end_node)
        finally:
            self.decide_cfn(cells, post)

    def _resolve_carried(self, L, cells, post, end_node):
        todo = self.without_invariants(L, cells, post)
        if not todo:
            return
        # 1. invariant from the pre-loop value
        for c in todo:
            c.mode, c.fn = "pre", self.pre_fn(c)
            c.target = c.fn
            self.set_cfn(c, post[c.name], L, "pre")
        bad = self.invariant_check(L, todo, post, end_node)
        if not bad:
            return
        # 2. invariant from the value after the first iteration
        for c in todo:
            self.set_first(c, post[c.name], L)
        bad = self.invariant_check(L, todo, post, end_node)
        if not bad:
            return
        # 3. what fails: integers may be affine induction variables; otherwise unroll the loop
        #    recurrence head(kt) = pre if kt is the first iteration else body(kt - 1) exactly, a few
        #    iterations deep, and widen beyond that depth
        for c in bad:
            if not c.is_frag and self.try_affine(c, post[c.name], L, end_node):
                continue
            self.set_unroll(c, post[c.name], L)
        rest = [c for c in todo if c not in bad]
        if rest and self.invariant_check(L, rest, post, end_node):
            for c in rest:
                self.set_unroll(c, post[c.name], L)

    def without_invariants(self, L, cells, post) -> list:
        """Decide the cells that need no invariant; return the others."""
        ids = {c.id for c in cells.values()}
        todo = []
        for n, cell in cells.items():
            p = post[n]
            if not (p.heads & ids):
                self.set_shift(cell, p)
            else:
                todo.append(cell)
        # `x = new if c else x` (a value refreshed under a condition, e.g. a register prefetch):
        # the unrolled recurrence is exact where c holds, no invariant to look for
        rest = []
        for c in todo:
            pt = self.passthrough.get(id(post[c.name]))
            if pt is not None and pt[0] is c and not (pt[1].heads & ids):
                self.set_unroll(c, post[c.name], L)
            else:
                rest.append(c)
        return rest

    def set_unroll(self, cell, p, L):
        pre = cell.pre
        cell.mode = "unroll"
        reason = (
            f"loop-carried '{cell.name}' (line {L.stmt.span.line}) is followed {self.UNROLL} "
            "iterations back; older values are unknown"
        )
        cell.reason = reason
        self.notes.append(reason)
        self.set_cfn(cell, p, L, "unroll")
        get = _getter(cell)
        ite = V.ite if cell.is_frag else Z.Ite

        def fn(S, ctx, inst, t, v=None):
            n = inst.cnt[L.var]
            first = Z.Eq(n, bv(0))
            if Z.is_true(first):
                return get(pre, S, ctx, inst, t, v)
            depth = S.udepth.get(cell.id, 0)
            if depth >= self.UNROLL:
                if cell.is_frag:
                    older = self.havoc_tag(S, cell.name, reason)
                else:
                    S.notes.add(reason)
                    older = S.var(f"havoc.{cell.name}")
            else:
                S.udepth[cell.id] = depth + 1
                try:
                    prev = self.shifted_inst(S, ctx, inst, L, Z.sub(n, bv(1)))
                    older = get(p, S, ctx, prev, t, v)
                finally:
                    S.udepth[cell.id] = depth
            return ite(first, get(pre, S, ctx, inst, t, v), older)

        cell.fn = fn

    def pre_fn(self, c):
        pre = c.pre
        if c.is_frag:
            return lambda S, ctx, inst, t, v: pre.tag(S, ctx, inst, t, v)
        return pre.fn

    def set_cfn(self, cell, p, L, how):
        """The coordinate form of a loop-carried fragment for the chosen mode (see FragV.cfn)."""
        if not cell.is_frag:
            return
        pre = cell.pre
        if how == "pre":
            cell.cfn = lambda S, ctx, inst, c: pre.cfn(S, ctx, inst, c)
            return
        if how == "havoc":
            cell.cfn = lambda S, ctx, inst, c: self.havoc_tag(S, cell.name, cell.reason)
            return

        def cfn(S, ctx, inst, c):
            n = inst.cnt[L.var]
            first = Z.Eq(n, bv(0))
            if Z.is_true(first):
                return pre.cfn(S, ctx, inst, c)
            if how == "first":
                return V.ite(
                    first,
                    pre.cfn(S, ctx, inst, c),
                    p.cfn(S, ctx, self.shifted_inst(S, ctx, inst, L, bv(0)), c),
                )
            key = ("cfn", cell.id)
            depth = S.udepth.get(key, 0)
            if how == "unroll" and depth >= self.UNROLL:
                older = self.havoc_tag(S, cell.name, cell.reason)
            else:
                S.udepth[key] = depth + 1
                try:
                    older = p.cfn(S, ctx, self.shifted_inst(S, ctx, inst, L, Z.sub(n, bv(1))), c)
                finally:
                    S.udepth[key] = depth
            return V.ite(first, pre.cfn(S, ctx, inst, c), older)

        cell.cfn = cfn

    def decide_cfn(self, cells, post):
        """Which loop-carried fragments keep the coordinate form: the greatest fixpoint of
        'the pre-loop value and the body's value both have it'."""
        frag_cells = [c for c in cells.values() if c.is_frag]
        for c in frag_cells:
            c.cfn_ok = c.cfn is not None
        changed = True
        while changed:
            changed = False
            for c in frag_cells:
                if not c.cfn_ok:
                    continue
                ok = c.mode == "havoc" or (c.pre.has_cfn() and (c.mode == "pre" or post[c.name].has_cfn()))
                if not ok:
                    c.cfn_ok = False
                    changed = True

    def set_shift(self, cell, p):
        """Iteration n sees the head value `pre` at n = 0, and the body-end value `p` of
        iteration n - 1 after that."""
        L = cell.loop
        cell.mode = "shift"
        self.set_cfn(cell, p, L, "shift")
        cell.fn = self._first_or(cell, p, L, lambda n: Z.sub(n, bv(1)))

    def set_first(self, cell, p, L):
        """Iteration n sees `pre` at n = 0 and the body-end value of iteration 0 after that."""
        cell.mode = "first"
        self.set_cfn(cell, p, L, "first")
        cell.fn = self._first_or(cell, p, L, lambda n: bv(0))
        get = _getter(cell)

        def target(S, ctx, inst, t, v=None):
            return get(p, S, ctx, self.shifted_inst(S, ctx, inst, L, bv(0)), t, v)

        cell.target = target

    def _first_or(self, cell, p, L, other):
        """A carried value: `cell.pre` in the loop's first iteration, else `p` at the iteration
        `other(n)` (tags for fragments, integers for scalars)."""
        pre = cell.pre
        get = _getter(cell)
        ite = V.ite if cell.is_frag else Z.Ite

        def fn(S, ctx, inst, t, v=None):
            n = inst.cnt[L.var]
            first = Z.Eq(n, bv(0))
            if Z.is_true(first):
                return get(pre, S, ctx, inst, t, v)
            at = self.shifted_inst(S, ctx, inst, L, other(n))
            return ite(first, get(pre, S, ctx, inst, t, v), get(p, S, ctx, at, t, v))

        return fn

    def shifted_inst(self, S, ctx, inst, L, n):
        out = V.Inst(inst.node, inst.cnt, inst.vals, inst.cons)
        start, _ = L.bounds(S, ctx, inst)
        out.cnt[L.var] = n
        out.vals[L.var] = Z.add(start, Z.mul(n, bv(L.step)))
        return out

    def try_affine(self, cell, p, L, end_node) -> bool:
        """`x = x + d` as the only update of x, directly in the loop body, with d independent of
        the loop and of carried values: x = pre + d * counter at the head of each iteration."""
        inc = self.incr.get((cell.name, L.var))
        if inc is None:
            return False
        d, depth = inc
        if depth != L.nlev + 1 or d.heads or L.var in d.loopdeps:
            return False
        body = ir.walk_stmts(L.stmt.body)
        updates = [st for st in body if isinstance(st, (ir.Let, ir.Assign)) and st.name == cell.name]
        if len(updates) != 1:
            return False
        pre = cell.pre
        cell.mode = "affine"

        def fn(S, ctx, inst, t, v=None):
            return Z.add(pre.fn(S, ctx, inst, t, v), Z.mul(inst.cnt[L.var], d.fn(S, ctx, inst, t, v)))

        cell.fn = fn
        # affine form for coverage: counter = (var - start) / step
        start = const_of(L.start)
        if L.step == 1 and start is not None and pre.lin is not None and d.lin is not None and not d.lin[0]:
            cnt = ({("loop", L.var): 1}, -start)
            cell.proxy.lin = lin_add(pre.lin, lin_mul(d.lin, cnt))
        return True

    def invariant_check(self, L, cells, post, end_node) -> list:
        """The cells whose body-end value may differ from the head hypothesis of the next iteration."""
        from argus_verify.smt.query import solve

        bad = []
        for c in cells:

            def build(q, c=c):
                S = q.S
                ctx = self.new_ctx(S)
                inst = P.new_inst(S, ctx, end_node, "i")
                t = S.var("t")
                q.add(ctx.cons, inst.cons, t >= 0, t < self.T)
                p = post[c.name]
                if c.is_frag:
                    v = S.var("v")
                    q.add(v >= 0, v < p.typ.values)
                    a = p.tag(S, ctx, inst, t, v)
                    b = c.target(S, ctx, inst, t, v)
                    q.add(a.cons, b.cons, Z.Not(V.tags_equal(a, b)))
                else:
                    q.add(Z.Ne(p.fn(S, ctx, inst, t), c.target(S, ctx, inst, t)))

            res, _, _ = solve(self, self.timeout_s, build, validate=False, minimize=False)
            self.invariant_queries.append((c.name, L.stmt.span.line, c.mode, res.status))
            if res.status != "proved":
                bad.append(c)
        return bad
