"""Warp: shuffles and reductions (within a thread's values and across the lanes of a warp).

A shuffle reads the tag of the same value in its source thread (the lane rule of
`semantics.SHUFFLE_MODES`). A reduction combines a group of elements that must agree on every
tag component but the reduced axis (an implicit tag assertion, a `Check`); its result carries
`*` on that axis. A warp-scope reduction combines, by a butterfly over the lane bits in `lanes`,
the values of lanes t ^ m for every m within those bits.
"""

from __future__ import annotations

from argus_verify import ir, semantics
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.records import Check
from argus_verify.smt.values import FragV, TagVal, Tr, value_label
from argus_verify.smt.zops import OPS, TRUE, bv


class WarpMixin:
    """Handlers of Shuffle and Reduce."""

    def visit_Shuffle(self, op: ir.Shuffle, s, node, env, label, ld) -> FragV:
        a = env[op.arg]
        lane_arg = self.cint(op.lane_arg, env)
        self.collectives.append((node, f"shfl_{op.mode}", 32))
        mode = semantics.SHUFFLE_MODES[op.mode]

        def fn(S, ctx, inst, t, v):
            src = mode.z3(Z, t, lane_arg.fn(S, ctx, inst, t))
            x = a.tag(S, ctx, inst, src, v)
            return x.replace(trace=Tr(x.trace, f"shfl_{op.mode}", s.span, value_label(label), (v, t)))

        out = FragV(s.name, s.type, fn, label, a.heads | lane_arg.heads, ld)
        self.demand.flow(out, a, ("shfl", op.mode, lane_arg))
        return out

    def visit_Reduce(self, op: ir.Reduce, s, node, env, label, ld) -> FragV:
        a = env[op.arg]
        opname = f"reduce_{op.op}"
        if op.scope == "warp" and op.lanes:
            self.collectives.append((node, f"{opname}(scope=warp)", 32))
        self.checks.append(
            Check(
                "reduce",
                node,
                lambda S, ctx, inst, t, v: reduce_check(op, a, S, ctx, inst, t, v),
                a.typ,
                f"the elements {opname} combines must agree on every tag component but {op.axis}",
            )
        )
        out = FragV(s.name, s.type, reduced_tags(op, a, s, label), label, a.heads, ld)
        self.demand.flow(out, a, ("reduce", op.lanes if op.scope == "warp" else 0))
        self.checks[-1].demand = ("reduce", out, op.lanes if op.scope == "warp" else 0)
        return out


def reduced_tags(op: ir.Reduce, a: FragV, s, label):
    """The tag function of a reduction's result: the element's tag with `*` on the reduced axis,
    `err` where the butterfly's first partner (lane t ^ lowest lane bit) disagrees."""
    axis = op.axis
    low = (op.lanes & -op.lanes) if op.scope == "warp" else 0
    opname = f"reduce_{op.op}"

    def star(x: TagVal) -> TagVal:
        comps = list(x.comps)
        if axis < len(comps):
            comps[axis] = (comps[axis][0], TRUE)
        return x.replace(comps=comps)

    def fn(S, ctx, inst, t, v):
        x = a.tag(S, ctx, inst, t, v)
        err = x.err
        if low:
            y = a.tag(S, ctx, inst, Z.xor(t, bv(low)), v)
            err = Z.Or(err, Z.Not(V.agree(x, y, skip={axis})))
        return star(x).replace(err=err, trace=Tr(x.trace, opname, s.span, value_label(label), (v, t)))

    return fn


def reduce_check(op: ir.Reduce, a: FragV, S, ctx, inst, t, v) -> dict:
    """The implicit assertion of a reduction at element (t, v) of its operand: a partner, a value
    of lane t ^ m (m = 0 for a thread-scope reduction) in the group that is combined with value v
    (same coordinates as (t ^ m, v) on every axis but `axis`), agrees with it."""
    axis = op.axis
    x = a.tag(S, ctx, inst, t, v)
    v2 = S.var("v2")
    if op.scope == "warp":
        m = Z.set_range(S.var("m"), 0, 31)
        lane_ok = Z.And(m >= 0, m < 32, Z.Eq(Z.band(m, bv(~op.lanes & 31)), bv(0)))
    else:
        m, lane_ok = bv(0), TRUE
    t2 = Z.xor(t, m)
    c1 = a.typ.coords.coords(t2, v, OPS)
    c2 = a.typ.coords.coords(t2, v2, OPS)
    same_group = Z.And(
        v2 >= 0,
        v2 < a.typ.values,
        *[Z.Eq(p, q) for k, (p, q) in enumerate(zip(c1, c2, strict=True)) if k != axis],
    )
    z = a.tag(S, ctx, inst, t2, v2)
    partner_ok = Z.And(same_group, lane_ok)
    live = Z.And(partner_ok, Z.Not(x.err), Z.Not(z.err))
    return {
        "bad": Z.And(live, Z.Or(Z.Not(V.agree(x, z, skip={axis})), Z.Not(V.same_pattern(x, z, skip={axis})))),
        "approx": Z.And(V.agree(x, z, skip={axis}), Z.Not(V.same_pattern(x, z, skip={axis}))),
        "cons": Z.And(x.cons, z.cons, partner_ok),
        "tags": [(a.label, x), (f"{a.label} (partner)", z)],
        "extra": {"partner_thread": t2, "partner_value": v2},
    }
