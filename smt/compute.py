"""Compute: constants, elementwise operations, casts and relabellings, mma.

An elementwise result carries its tagged operands' tag (`values.merge`), and the operands must
agree (an implicit tag assertion, a `Check`). A cast keeps the tag; a transpose or reshape keeps
the tag of the same register under new coordinates. An mma product (i, k) x (k, j) must pair
a's k with b's k, its result (tag(a)[0], tag(b)[1]) must agree with the accumulator, and the
rows of a and columns of b must be constant along k.
"""

from __future__ import annotations

from argus_verify import atoms, ir
from argus_verify.layout import right_inverse
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.diag import AnalysisError
from argus_verify.smt.records import Check
from argus_verify.smt.values import FragV, TagVal, Tr, element_label, value_label
from argus_verify.smt.zops import OPS, TRUE, bv


def combined(tags: list, opname, span, where, terms) -> TagVal:
    """An elementwise result from its operands' tags: the merged tag, `err` where they disagree;
    its trace continues the path of the first tagged operand."""
    res = tags[0]
    ok = TRUE
    for x in tags[1:]:
        ok = Z.And(ok, V.agree(res, x))
        res = V.merge(res, x)
    prim = next((x for x in tags if not Z.is_true(x.none)), tags[0])
    return res.replace(err=Z.Or(res.err, Z.Not(ok)), trace=Tr(prim.trace, opname, span, where, terms))


def agreement_check(tags):
    """The implicit assertion of an elementwise operation over its [(label, tag)] operands."""
    bad, cons = [], []
    for i in range(len(tags)):
        cons.append(tags[i][1].cons)
        for j in range(i + 1, len(tags)):
            x, y = tags[i][1], tags[j][1]
            bad.append(Z.And(Z.Not(x.err), Z.Not(y.err), Z.Not(V.agree(x, y))))
    return {"bad": Z.Or(*bad), "cons": Z.And(*cons), "tags": tags}


class ComputeMixin:
    """Handlers of Full, Elementwise, Cast, Relabel and Mma."""

    def visit_Full(self, op: ir.Full, s, node, env, label, ld) -> FragV:
        K = self.K
        name = "zeros" if op.value == 0 else "full"

        def fn(S, ctx, inst, t, v):
            src = Tr(None, None, None, f"constant {op.value:g}")
            return V.untagged(K, Tr(src, name, s.span, value_label(label), (v, t)))

        def cfn(S, ctx, inst, c):
            return V.untagged(K, Tr(None, None, None, f"constant {op.value:g}"))

        return FragV(s.name, s.type, fn, label, loopdeps=ld, cfn=cfn)

    def visit_Elementwise(self, op: ir.Elementwise, s, node, env, label, ld) -> FragV:
        frags = {a: env[a] for a in op.args if isinstance(a, str)}
        names = [a for a in op.args if isinstance(a, str)]
        K = self.K
        opname = op.op
        if op.op == "+" and len(op.args) == 2 and isinstance(op.args[1], ir.FConst) and op.args[1].value == 0:
            opname = "copy"  # `b = a`: the front end renames through a + 0.0

        def tags(S, ctx, inst, t, v):
            return [(frags[n].label, frags[n].tag(S, ctx, inst, t, v)) for n in names]

        def fn(S, ctx, inst, t, v):
            ts = tags(S, ctx, inst, t, v)
            if not ts:
                return V.untagged(K, Tr(None, opname, s.span, label))
            return combined([x for _, x in ts], opname, s.span, value_label(label), (v, t))

        if len(names) >= 2:
            self.checks.append(
                Check(
                    "elementwise",
                    node,
                    lambda S, ctx, inst, t, v: agreement_check(tags(S, ctx, inst, t, v)),
                    s.type,
                    f"operands of {label} must carry agreeing tags",
                )
            )
        heads = frozenset().union(*[f.heads for f in frags.values()]) if frags else frozenset()
        cfn = cfn_ok = None
        if names and all(frags[n].cfn is not None and frags[n].typ.coords == s.type.coords for n in names):

            def cfn(S, ctx, inst, c):
                tags = [frags[n].cfn(S, ctx, inst, c) for n in names]
                return combined(tags, opname, s.span, element_label(label, len(c)), c)

            def cfn_ok():
                return all(frags[n].has_cfn() for n in names)

        out = FragV(s.name, s.type, fn, label, heads, ld, cfn, cfn_ok)
        for n in names:
            self.demand.flow(out, frags[n])
        if len(names) >= 2:
            self.checks[-1].demand = ("same", out, 0)
        return out

    def visit_Cast(self, op: ir.Cast, s, node, env, label, ld) -> FragV:
        return self.relabelled(env[op.arg], "cast", s, label, ld)

    def visit_Relabel(self, op: ir.Relabel, s, node, env, label, ld) -> FragV:
        opname = "transpose" if isinstance(s.type.coords, ir.Transposed) else "reshape"
        return self.relabelled(env[op.arg], opname, s, label, ld)

    def relabelled(self, a: FragV, opname, s, label, ld) -> FragV:
        """The registers of `a`, under the coordinates of s's type (cast: the same coordinates)."""

        def fn(S, ctx, inst, t, v, a=a):
            x = a.tag(S, ctx, inst, t, v)
            return x.replace(trace=Tr(x.trace, opname, s.span, value_label(label), (v, t)))

        cfn = None
        if a.cfn is not None and opname in ("cast", "transpose"):

            def cfn(S, ctx, inst, c, a=a, flip=opname == "transpose"):
                x = a.cfn(S, ctx, inst, tuple(reversed(c)) if flip else c)
                return x.replace(trace=Tr(x.trace, opname, s.span, element_label(label, len(c)), c))

        out = FragV(s.name, s.type, fn, label, a.heads, ld, cfn, a.has_cfn)
        self.demand.flow(out, a)
        return out

    def visit_Mma(self, op: ir.Mma, s, node, env, label, ld) -> FragV:
        A, B, C = env[op.a], env[op.b], env[op.c]
        mma = MmaTerms(self, s, A, B, C, label)
        if op.atom != "fma":
            self.collectives.append((node, "mma", 32))
        self.checks.append(
            Check(
                "mma",
                node,
                mma.check,
                s.type,
                f"mma: tag({op.a})[1] == tag({op.b})[0] for every product, and the result "
                f"(tag({op.a})[0], tag({op.b})[1]) agrees with tag({op.c})" + (_BATCH_WORDS if self.K > 2 else ""),
                parts=MmaTerms.PARTS,
            )
        )
        out = FragV(s.name, s.type, mma.tag, label, A.heads | B.heads | C.heads, ld)
        spread = "thread" if op.atom == "fma" else "warp"
        self.checks[-1].demand = ("same", out, 0)
        self.demand.flow(out, A, spread)
        self.demand.flow(out, B, spread)
        self.demand.flow(out, C, spread)
        return out


# what the rule says of tags with more than two components (a batch index), in the checks' words
_BATCH_WORDS = "; components past the second agree between the factors, along k, and with the result"


class MmaTerms:
    """The tags of `c + a @ b` (tiles a (M, K), b (K, N), c (M, N)) and its agreement checks.

    The check is four sub-queries (smaller formulas solve much faster than their conjunction):
    k-agreement of a product, rows of a constant along k, columns of b constant along k, products
    agreeing with the accumulator."""

    PARTS = ("k", "rows", "cols", "acc")

    def __init__(self, an, s: ir.Assign, A: FragV, B: FragV, C: FragV, label: str):
        self.s, self.A, self.B, self.C, self.label = s, A, B, C, label
        self.Kt = A.typ.tile[1]
        self.K = an.K
        self.T = an.T
        self.plan = None
        if s.op.atom != "fma":  # mma.sync: operands by register, through the atom's layouts
            try:
                self.plan = atoms.mma_plan(s.op.atom, A.typ, B.typ, s.type)
            except ValueError as e:  # the front end refuses it; an IR built otherwise may have it
                raise AnalysisError(f"mma at line {s.span.line}: {e}") from None
            at = self.plan.atom
            self.inv = {w: right_inverse(at.operand(w).layout) for w in "ab"}

    def register(self, S, t, v, k, which):
        """The (thread, value) whose register mma.sync multiplies as operand `which` for the product
        of step k of c's value (t, v): the c value's lane and register give its place in the atom's
        C tile (i, j); k gives the k step (a plan lookup) and the place in the atom's A (i, k) or
        B (k, j) tile, which the inverse of the operand layout turns into a lane and a register."""
        at = self.plan.atom
        lane = Z.band(t, bv(31))
        base = Z.sub(t, lane)
        Vc = at.c.values
        gc, rc = Z.floordiv(v, bv(Vc)), Z.mod(v, bv(Vc))
        ci, cj = at.c.coords(lane, rc, OPS)
        ks, kk = Z.floordiv(k, bv(at.K)), Z.mod(k, bv(at.K))
        group = bv(0)
        idx = 0 if which == "a" else 1
        for g, steps in self.plan.steps:
            for step, pair in enumerate(steps):
                group = Z.Ite(Z.And(Z.Eq(gc, bv(g)), Z.Eq(ks, bv(step))), bv(pair[idx]), group)
        flat = Z.add(Z.mul(ci, bv(at.K)), kk) if which == "a" else Z.add(Z.mul(kk, bv(at.N)), cj)
        pos = self.inv[which].apply(flat, OPS)
        per = at.operand(which).values
        return Z.bor(base, Z.band(pos, bv(31))), Z.add(Z.mul(group, bv(per)), Z.shr(pos, bv(5)))

    def holder(self, S, ctx, inst, t, frag, want, tag, v=None, k=None):
        """A (thread, value) of `frag` holding tile coordinate `want` (aux variables); for mma.sync
        the register the instruction reads for c's value (t, v) at step k."""
        if self.plan is not None:
            th, vv = self.register(S, t, v, k, "a" if frag is self.A else "b")
            return frag.tag(S, ctx, inst, th, vv), th, vv
        th = t
        cons = []
        vv = S.var(f"{tag}.v")
        c = frag.typ.coords.coords(th, vv, OPS)
        cons += [vv >= 0, vv < frag.typ.values] + [Z.Eq(x, y) for x, y in zip(c, want, strict=True)]
        x = frag.tag(S, ctx, inst, th, vv)
        return x.replace(cons=Z.And(x.cons, *cons)), th, vv

    def product(self, S, ctx, inst, t, v, k):
        """The tag of the product a[i, k] * b[k, j] for c's element (t, v) at (i, j), and whether
        its k components agree."""
        K = self.K
        i, j = self.s.type.coords.coords(t, v, OPS)
        ta, tha, va = self.holder(S, ctx, inst, t, self.A, (i, k), "a", v, k)
        tb, thb, vb = self.holder(S, ctx, inst, t, self.B, (k, j), "b", v, k)
        a0, sa0 = ta.comp(0)
        a1, sa1 = ta.comp(1)
        b0, sb0 = tb.comp(0)
        b1, sb1 = tb.comp(1)
        comps = [(a0, Z.Or(ta.none, sa0)), (b1, Z.Or(tb.none, sb1))]
        same = []  # components past the second (a batch index): both factors' must agree, the product keeps it
        for c in range(2, K):
            (ac, sac), (bc, sbc) = ta.comp(c), tb.comp(c)
            a_any, b_any = Z.Or(ta.none, sac), Z.Or(tb.none, sbc)
            comps.append((Z.Ite(a_any, bc, ac), Z.And(a_any, b_any)))
            same.append(Z.Or(a_any, b_any, Z.Eq(ac, bc)))
        prod = TagVal(
            Z.And(ta.none, tb.none),
            comps[:K],
            Z.Or(ta.err, tb.err),
            Z.And(ta.cons, tb.cons),
            ta.trace,
            ta.inexact | tb.inexact,
            Z.Or(ta.taint, tb.taint),
        )
        kagree = Z.Or(ta.none, tb.none, sa1, sb0, Z.Eq(a1, b0))
        if same:  # (only then: a new term renumbers later ones, and witnesses follow the numbering)
            kagree = Z.And(kagree, *same)
        if self.plan is not None:  # (kept only here: a live term changes how Z3 numbers later ones)
            self.last_registers = (tha, va, thb, vb)
        return prod, kagree, ta, tb

    def tag(self, S, ctx, inst, t, v) -> TagVal:
        c = self.C.tag(S, ctx, inst, t, v)
        prod, kagree, ta, tb = self.product(S, ctx, inst, t, v, bv(0))
        ok = Z.And(kagree, V.agree(prod, c))
        res = V.merge(c, prod)
        return res.replace(
            err=Z.Or(res.err, Z.Not(ok)), trace=Tr(ta.trace, "mma", self.s.span, value_label(self.label), (v, t))
        )

    def check(self, S, ctx, inst, t, v, part):
        k1 = S.var("k")
        dom = [k1 >= 0, k1 < self.Kt]
        i, j = self.s.type.coords.coords(t, v, OPS)
        if part == "k":
            r = self.check_k(S, ctx, inst, t, v, k1, dom)
        elif part in ("rows", "cols"):
            r = self.check_constant_along_k(S, ctx, inst, t, part, k1, dom, i, j, v)
        else:
            r = self.check_accumulator(S, ctx, inst, t, v, k1, dom)
        if self.plan is not None and part in ("k", "acc"):  # the witness names lanes and registers
            tha, va, thb, vb = self.last_registers
            r["extra"].update({"lane": Z.mod(t, bv(32)), "c_register": v, "a_lane": Z.mod(tha, bv(32)),
                               "a_register": va, "b_lane": Z.mod(thb, bv(32)), "b_register": vb})
        return r

    def check_k(self, S, ctx, inst, t, v, k1, dom):
        p1, ag1, ta, tb = self.product(S, ctx, inst, t, v, k1)
        bad = Z.And(Z.Not(p1.err), Z.Not(ag1))
        return {
            "bad": bad,
            "cons": Z.And(p1.cons, *dom),
            "tags": [(self.A.label, ta), (self.B.label, tb)],
            "extra": {"k": k1},
        }

    def check_constant_along_k(self, S, ctx, inst, t, part, k1, dom, i, j, v=None):
        k2 = S.var("k2")
        dom += [k2 >= 0, k2 < self.Kt]
        # a's row (and components past the second, which the products agree on) and b's column
        frag, comps = (self.A, [0, *range(2, self.K)]) if part == "rows" else (self.B, [1])
        want1 = (i, k1) if part == "rows" else (k1, j)
        want2 = (i, k2) if part == "rows" else (k2, j)
        x, _, _ = self.holder(S, ctx, inst, t, frag, want1, "x", v, k1)
        y, _, _ = self.holder(S, ctx, inst, t, frag, want2, "y", v, k2)
        # (terms made in the order they were made for one component: Z3 numbers terms as they are
        # made, and the witnesses it picks follow the numbering)
        pairs = [(x.comp(comp), y.comp(comp)) for comp in comps]
        live = Z.And(Z.Not(x.err), Z.Not(y.err))
        agree_c = Z.And(*[Z.Or(x.none, y.none, sx, sy, Z.Eq(vx, vy)) for (vx, sx), (vy, sy) in pairs])
        none_same = Z.Eq(Z.b2i(x.none), Z.b2i(y.none))
        pattern = Z.And(none_same, Z.Or(x.none, Z.And(*[Z.Eq(Z.b2i(sx), Z.b2i(sy)) for (_, sx), (_, sy) in pairs])))
        return {
            "bad": Z.And(live, Z.Not(Z.And(agree_c, pattern))),
            "approx": Z.And(agree_c, Z.Not(pattern)),
            "cons": Z.And(x.cons, y.cons, *dom),
            "tags": [(f"{frag.label} (k = k1)", x), (f"{frag.label} (k = k2)", y)],
            "extra": {"k": k1, "k2": k2},
        }

    def check_accumulator(self, S, ctx, inst, t, v, k1, dom):
        c = self.C.tag(S, ctx, inst, t, v)
        p1, _, ta, tb = self.product(S, ctx, inst, t, v, k1)
        bad = Z.And(Z.Not(p1.err), Z.Not(c.err), Z.Not(V.agree(p1, c)))
        return {
            "bad": bad,
            "cons": Z.And(c.cons, p1.cons, *dom),
            "tags": [(self.A.label, ta), (self.B.label, tb), (self.C.label, c)],
            "extra": {"k": k1},
        }
