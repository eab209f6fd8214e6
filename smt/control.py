"""Control: loops and branches.

Every thread executes every statement; an `If` only predicates (its condition joins the guards
of the statements inside), and a variable assigned in a branch is merged (`ite`) after it. A
`For` walks its body once with the loop variable symbolic; a variable assigned in the body that
existed before the loop is *loop-carried*: inside the body it reads a `Cell` whose head value is
decided after the walk (smt.carried). After the loop a variable holds its value at the last
iteration, or its value before the loop when the loop runs zero times.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.carried import Cell
from argus_verify.smt.diag import AnalysisError
from argus_verify.smt.values import FragV, IntV
from argus_verify.smt.zops import TRUE, bv


def assigned_names(body) -> set:
    """The variables a body (nested loops and branches included) assigns."""
    return {s.name for s in ir.walk_stmts(body) if isinstance(s, (ir.Let, ir.Assign))}


class ControlMixin:
    """Handlers of For and If."""

    # ---- loops -----------------------------------------------------------------------------
    def visit_For(self, s: ir.For, node, env):
        start, stop = self.cint(s.start, env), self.cint(s.stop, env)
        body_bid = self.new_block()
        L = P.LoopInfo(s, start, stop, len(node.loops), body_bid)
        L.nlev = len(node.levels)
        self.loops_by_stmt[id(s)] = L
        assigned = assigned_names(s.body)
        benv = dict(env)
        var = s.var
        benv[var] = IntV(
            lambda S, ctx, inst, t, v=None: inst.vals[var],
            True,
            frozenset({var}),
            lin=({("loop", var): 1}, 0),
        )
        carried = [n for n in assigned if n in env and isinstance(env[n], (IntV, FragV))]
        cells = {n: self.carry(n, env[n], L, benv) for n in carried}
        inner_loops = node.loops + (L,)
        self.walk(s.body, benv, node.levels, inner_loops, node.conds, body_bid)
        post = {n: benv[n] for n in assigned if n in benv}
        for n, cell in cells.items():
            if cell.is_frag and post[n].typ.coords != cell.pre.typ.coords:
                raise AnalysisError(
                    f"'{n}' is reassigned in the loop at line {s.span.line} with a different thread-value "
                    "layout than before the loop; the verifier needs one layout per loop-carried fragment"
                )
        for n, cell in cells.items():
            if cell.is_frag:  # a loop-carried fragment: every element of every iteration is used
                self.demand.sink(cell.pre)
                self.demand.sink(post[n])
        if cells:
            end = P.Node(s, -1, node.levels + ((body_bid, len(s.body), None),), inner_loops, node.conds, self.blocks)
            self.pending_loops.append((L, cells, post, end))
        for n in assigned:
            if n not in post:
                continue
            env[n] = self.after_loop(L, post[n], env.get(n))

    def carry(self, n, pre, L, benv) -> Cell:
        """Make `n` loop-carried in L: the body reads the cell's (head) value through a proxy."""
        cell = Cell(n, pre, L, isinstance(pre, FragV))
        self.cells.append(cell)
        if cell.is_frag:
            benv[n] = FragV(
                n,
                pre.typ,
                lambda S, ctx, inst, t, v, c=cell: c.fn(S, ctx, inst, t, v),
                pre.label,
                frozenset({cell.id}),
                pre.loopdeps | {L.var},
                cfn=lambda S, ctx, inst, c, cell=cell: cell.cfn(S, ctx, inst, c),
                cfn_ok=lambda cell=cell: cell.cfn_ok,
            )
        else:
            benv[n] = IntV(
                lambda S, ctx, inst, t, v=None, c=cell: c.fn(S, ctx, inst, t, v),
                pre.uniform,
                pre.loopdeps | {L.var},
                None,
                None,
                frozenset({cell.id}),
            )
        cell.proxy = benv[n]
        self.proxies[id(benv[n])] = cell
        return cell

    def last_iteration(self, L, S, ctx, inst):
        """The instance of L's last iteration (around `inst`, outside L), and whether L ran."""
        base = V.Inst(
            inst.node if inst is not None else None,
            inst.cnt if inst else {},
            inst.vals if inst else {},
            TRUE,
        )
        start, trips = L.bounds(S, ctx, base)
        n = Z.sub(trips, bv(1))
        base.cnt[L.var] = n
        base.vals[L.var] = Z.add(start, Z.mul(n, bv(L.step)))
        return base, Z.Lt(bv(0), trips)

    def after_loop(self, L, post, pre):
        """The value of a variable assigned in loop L, after the loop: its value at the last
        iteration, or its value before the loop when the loop runs zero times."""
        if isinstance(post, FragV):
            return self.frag_after_loop(L, post, pre)

        def ifn(S, ctx, inst, t, v=None, post=post, pre=pre):
            inst2, ran = self.last_iteration(L, S, ctx, inst)
            a = post.fn(S, ctx, inst2, t, v)
            if pre is None:
                if Z.is_true(ran):
                    return a
                S.notes.add(f"integer '{L.var}'-loop value used after a loop that may run zero times")
                return Z.Ite(ran, a, S.var("undefined"))
            return Z.Ite(ran, a, pre.fn(S, ctx, inst, t, v))

        uniform = post.uniform and (pre.uniform if pre is not None else True)
        return IntV(
            ifn,
            uniform,
            (post.loopdeps | (pre.loopdeps if pre else frozenset())) - {L.var},
            heads=post.heads | (pre.heads if pre else frozenset()),
        )

    def frag_after_loop(self, L, post: FragV, pre: FragV | None) -> FragV:
        undefined = (
            f"'{post.name}' is defined only inside the loop at line {L.stmt.span.line}, which may run zero times"
        )

        def ffn(S, ctx, inst, t, v, post=post, pre=pre):
            inst2, ran = self.last_iteration(L, S, ctx, inst)
            a = post.tag(S, ctx, inst2, t, v)
            if pre is None:  # after a loop that did not run the value is undefined: any tag
                return V.ite(ran, a, self.havoc_tag(S, post.label, undefined))
            return V.ite(ran, a, pre.tag(S, ctx, inst, t, v))

        cfn = cfn_ok = None
        if post.cfn is not None and (pre is None or (pre.cfn is not None and pre.typ.coords == post.typ.coords)):

            def cfn(S, ctx, inst, c, post=post, pre=pre):
                inst2, ran = self.last_iteration(L, S, ctx, inst)
                a = post.cfn(S, ctx, inst2, c)
                if pre is None:
                    return V.ite(ran, a, self.havoc_tag(S, post.label, undefined))
                return V.ite(ran, a, pre.cfn(S, ctx, inst, c))

            def cfn_ok(post=post, pre=pre):
                return post.has_cfn() and (pre is None or pre.has_cfn())

        loopdeps = (post.loopdeps | (pre.loopdeps if pre else frozenset())) - {L.var}
        out = FragV(post.name, post.typ, ffn, post.label, post.heads, loopdeps, cfn, cfn_ok)
        self.demand.flow(out, post)
        if pre is not None:
            self.demand.flow(out, pre)
        return out

    # ---- branches --------------------------------------------------------------------------
    def visit_If(self, s: ir.If, node, env):
        cond = self.cint(s.cond, env)
        # `a and b`: its conjuncts, each implied where the condition holds (smt.hopper.tma_issuer)
        if isinstance(s.cond, ir.IBin) and s.cond.op == "and":
            self.conjuncts[id(cond)] = tuple(self.cint(c, env) for c in conjuncts(s.cond))
        then_bid = self.new_block()
        else_bid = self.new_block()
        tenv = dict(env)
        self.walk(s.then, tenv, node.levels, node.loops, node.conds + ((cond, True),), then_bid)
        eenv = dict(env)
        self.walk(s.orelse, eenv, node.levels, node.loops, node.conds + ((cond, False),), else_bid)
        for n in assigned_names(s.then) | assigned_names(s.orelse):
            a = tenv.get(n)
            b = eenv.get(n)
            if a is None or b is None or a is b:
                env[n] = a if a is not None else b
                continue
            passthrough = None  # `x = new if c else x` with x loop-carried (see CarriedMixin)
            for keep, other in ((a, b), (b, a)):
                if id(keep) in self.proxies:
                    passthrough = (self.proxies[id(keep)], other)
            if isinstance(a, FragV) and a.typ.coords != b.typ.coords:
                raise AnalysisError(
                    f"'{n}' gets different thread-value layouts in the branches of the if at line {s.span.line}"
                )
            env[n] = self.ite_value(cond, a, b)
            if passthrough is not None:
                self.passthrough[id(env[n])] = passthrough

    def ite_value(self, cond: IntV, a, b):
        if isinstance(a, FragV):
            return self.frag_ite(cond, a, b)

        def ifn(S, ctx, inst, t, v=None, a=a, b=b):
            return Z.Ite(Z.i2b(cond.fn(S, ctx, inst, t)), a.fn(S, ctx, inst, t, v), b.fn(S, ctx, inst, t, v))

        return IntV(
            ifn,
            cond.uniform and a.uniform and b.uniform,
            cond.loopdeps | a.loopdeps | b.loopdeps,
            heads=cond.heads | a.heads | b.heads,
        )

    def frag_ite(self, cond: IntV, a: FragV, b: FragV) -> FragV:
        def ffn(S, ctx, inst, t, v, a=a, b=b):
            c = Z.i2b(cond.fn(S, ctx, inst, t))
            return V.ite(c, a.tag(S, ctx, inst, t, v), b.tag(S, ctx, inst, t, v))

        cfn = cfn_ok = None
        if cond.uniform and a.cfn is not None and b.cfn is not None and a.typ.coords == b.typ.coords:

            def cfn(S, ctx, inst, c, a=a, b=b):
                cnd = Z.i2b(cond.fn(S, ctx, inst, None))
                return V.ite(cnd, a.cfn(S, ctx, inst, c), b.cfn(S, ctx, inst, c))

            def cfn_ok(a=a, b=b):
                return a.has_cfn() and b.has_cfn()

        out = FragV(
            a.name,
            a.typ,
            ffn,
            a.label,
            a.heads | b.heads | cond.heads,
            a.loopdeps | b.loopdeps | cond.loopdeps,
            cfn,
            cfn_ok,
        )
        self.demand.flow(out, a)
        self.demand.flow(out, b)
        return out


def conjuncts(e) -> list:
    """The operands of a chain of `and`s (the expression itself when it is not one)."""
    if isinstance(e, ir.IBin) and e.op == "and":
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]
