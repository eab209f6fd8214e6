"""Integer expressions as emitter values, and conditions as predicates.

Operators mean what `argus_verify.semantics.INT_OPS` says: an operator's `emit` names the
emitter helper (`Emitter.int_<emit>`, which folds constants and ranges before it emits the
table's mnemonic), a comparison's `ptx` is setp's cmp, a logical operator's `ptx` the predicate
instruction (`and.pred`, `or.pred`).
"""

from __future__ import annotations

from argus_verify import ir, semantics
from argus_verify.lowering.emitter import LoweringError
from argus_verify.lowering.values import PARAM_TYPE, Deferred, Frag
from argus_verify.visitor import Visitor


class IntValues(Visitor, families=("int_exprs",)):
    """The value of an integer expression: an int, an affine form or a register (`lw`: the
    kernel's lowerer, for names, sizes, parameters and special registers)."""

    def __init__(self, lw):
        self.lw = lw
        self.em = lw.em

    def visit_IConst(self, e: ir.IConst):
        return e.value

    def visit_IVar(self, e: ir.IVar):
        lw = self.lw
        if e.name in lw.env:
            v = lw.env[e.name]
            if isinstance(v, Frag | Deferred):
                raise LoweringError(f"'{e.name}' is a fragment, not an integer", e.span)
            return v
        if e.name in lw.k.sizes:
            return lw.size(e.name)
        p = next((q for q in lw.k.params if q.name == e.name), None)
        if isinstance(p, ir.ScalarParam) and not ir.is_float(p.dtype):
            return self.em.input("b32", f"param:{p.name}",
                                 f"ld.param{PARAM_TYPE[p.dtype]} {{d}}, [{lw.pname(p.name)}];")
        raise LoweringError(f"no integer value for '{e.name}'", e.span)

    def visit_ISpecial(self, e: ir.ISpecial):
        em, tid, which = self.em, self.lw.tid, e.which
        if which == "thread_id":
            return tid
        if which == "warp_id":
            return em.floordiv(tid, 32)
        if which == "lane_id":
            return em.mod(tid, 32)
        axis = which[-1]
        if which.startswith("block_id"):
            return em.input("b32", f"%ctaid.{axis}", f"mov.u32 {{d}}, %ctaid.{axis};", lo=0)
        return em.input("b32", f"%nctaid.{axis}", f"mov.u32 {{d}}, %nctaid.{axis};", lo=1)

    def visit_IUn(self, e: ir.IUn):
        if e.op == "-":
            return self.em.mul(self.visit(e.a), -1)
        return self.em.to_int(self.lw.pval(e))

    def visit_ISelect(self, e: ir.ISelect):
        return self.em.select(self.lw.pval(e.cond), self.visit(e.a), self.visit(e.b))

    def visit_IBin(self, e: ir.IBin):
        entry = semantics.INT_OPS[e.op]
        if entry.compare or entry.logical:
            return self.em.to_int(self.lw.pval(e))
        helper = getattr(self.em, f"int_{entry.emit}", None)
        if helper is None:
            raise LoweringError(f"integer operator '{e.op}' has no emitter helper int_{entry.emit}", e.span)
        a, b = self.visit(e.a), self.visit(e.b)
        return helper(a, b)

    def _assertion_only(self, e):
        raise LoweringError(f"{type(e).__name__} cannot be lowered here (tags and coords live only in "
                            "assertions)", e.span)

    visit_ITag = visit_ICoord = visit_ICall = _assertion_only


class Predicates(Visitor, families=("int_exprs",)):
    """A condition as a predicate register, or True / False when it folds."""

    def __init__(self, lw):
        self.lw = lw
        self.em = lw.em

    def visit_IConst(self, e: ir.IConst):
        return bool(e.value)

    def visit_IUn(self, e: ir.IUn):
        if e.op == "not":
            return self.em.p_not(self.visit(e.a))
        return self._nonzero(e)

    def visit_IBin(self, e: ir.IBin):
        entry = semantics.INT_OPS[e.op]
        if entry.logical:
            combine = getattr(self.em, f"p_{entry.ptx}")
            return combine(self.visit(e.a), self.visit(e.b))
        if entry.compare:
            return self.em.cmp(entry.ptx, self.lw.ival(e.a), self.lw.ival(e.b))
        return self._nonzero(e)

    def _nonzero(self, e):
        return self.em.to_pred(self.lw.ival(e))

    visit_IVar = visit_ISpecial = visit_ISelect = visit_ITag = visit_ICoord = visit_ICall = _nonzero
