"""Integer expressions: the kernel's integers as `IntV` closures, and tag declarations as terms.

`IntCompiler` turns an expression of the kernel body into an `IntV` (`Analysis.cint`): constants
fold, affine forms and numpy evaluations over thread ids are kept where they exist (coverage and
footprints use them). `TagTerms` evaluates the expressions of tag declarations and tag functions
directly as terms, over bound index variables. Operators mean what `argus_verify.semantics` says:
its Z3 forms build the terms, its reference folds constants and evaluates over numpy arrays.
"""

from __future__ import annotations

import numpy as np

from argus_verify import semantics
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.diag import AnalysisError
from argus_verify.smt.values import IntV
from argus_verify.smt.zops import OPS, bv
from argus_verify.visitor import Visitor

# ---------------------------------------------------------------------------------------------
# linear forms (for coverage of outputs): ({atom: coef}, const)


def lin_add(a, b, sign=1):
    if a is None or b is None:
        return None
    out = dict(a[0])
    for k, c in b[0].items():
        out[k] = out.get(k, 0) + sign * c
    return ({k: c for k, c in out.items() if c}, a[1] + sign * b[1])


def lin_mul(a, b):
    if a is None or b is None:
        return None
    if not a[0]:
        return ({k: c * a[1] for k, c in b[0].items() if c * a[1]}, a[1] * b[1])
    if not b[0]:
        return ({k: c * b[1] for k, c in a[0].items() if c * b[1]}, a[1] * b[1])
    return None


def thread_atom_lin(iv: IntV):
    """The affine form of `iv`, where an integer of the thread alone that is not affine itself
    (`thread_id // T`, `c ^ r`) stands for an opaque thread atom ("thr", iv): coverage evaluates
    such atoms over every thread with numpy (`np_fn`) and in Z3 through `iv.fn`."""
    if iv.lin is not None:
        return iv.lin
    if not iv.uniform and iv.np_fn is not None and not iv.loopdeps and not iv.heads:
        return ({("thr", iv): 1}, 0)
    return None


def lin_of(op, a, b):
    """The affine form of `a op b` (None where the operator leaves affine forms)."""
    if op == "+":
        return lin_add(a, b)
    if op == "-":
        return lin_add(a, b, -1)
    if op == "*":
        return lin_mul(a, b)
    return None


# ---------------------------------------------------------------------------------------------
# operators


def int_term(op, a, b):
    """The term of `a op b`, from the semantics table."""
    entry = semantics.INT_OPS.get(op)
    if entry is None:
        raise AnalysisError(f"integer operator {op!r}")
    return entry.z3(Z, a, b)


def const_of(iv: IntV) -> int | None:
    """The value of a constant integer (None when it is not one)."""
    if iv.lin is None or iv.lin[0] or iv.loopdeps or iv.heads or not iv.uniform:
        return None
    try:
        return Z.const_value(iv.fn(None, None, None, None))
    except (AttributeError, TypeError, KeyError):
        return None


def combine(op, a: IntV, b: IntV) -> IntV:
    """`a op b`: folded when both are constants, else a closure with the numpy and affine forms
    that exist."""
    fa, fb = a.fn, b.fn
    npf = None
    if a.np_fn is not None and b.np_fn is not None and op in semantics.INT_OPS:

        def npf(t, a=a, b=b):
            return semantics.int_eval(
                op, np.asarray(a.np_fn(t), dtype=np.int64), np.asarray(b.np_fn(t), dtype=np.int64)
            )

    lin = lin_of(op, a.lin, b.lin)
    if lin is None and op in ("+", "-", "*"):
        lin = lin_of(op, thread_atom_lin(a), thread_atom_lin(b))
    ca, cb = const_of(a), const_of(b)
    if ca is not None and cb is not None:
        r = semantics.fold(op, ca, cb)
        if r is not None:
            return V.const_int(r)
    return IntV(
        lambda S, ctx, inst, t, v=None: int_term(op, fa(S, ctx, inst, t, v), fb(S, ctx, inst, t, v)),
        a.uniform and b.uniform,
        a.loopdeps | b.loopdeps,
        npf,
        lin,
        a.heads | b.heads,
        a.inexact | b.inexact,
    )


def named_int(iv: IntV) -> IntV:
    """Memoise a Let's value per session (it may be used in many places)."""
    ivid = iv.id
    loopdeps = sorted(iv.loopdeps)

    def fn(S, ctx, inst, t, v=None):
        key = (
            "int",
            ivid,
            ctx.key if ctx is not None else (),
            tuple(inst.cnt[x].get_id() for x in loopdeps if x in inst.cnt) if inst is not None else (),
            t.get_id() if (t is not None and not iv.uniform) else None,
        )
        hit = S.memo.get(key)
        if hit is None:
            hit = iv.fn(S, ctx, inst, t, v)
            S.memo[key] = hit
        return hit

    return IntV(fn, iv.uniform, iv.loopdeps, iv.np_fn, iv.lin, iv.heads, iv.inexact)


# the per-thread specials: (term of the thread id, numpy form over thread ids, affine atom)
THREAD_SPECIALS = {
    "thread_id": (lambda t: t, lambda t: t, ("thr", "t")),
    "warp_id": (lambda t: Z.shr(t, bv(5)), lambda t: t >> 5, ("thr", "warp")),
    "lane_id": (lambda t: Z.band(t, bv(31)), lambda t: t & 31, ("thr", "lane")),
}


# ---------------------------------------------------------------------------------------------
# expressions of the kernel body -> IntV


class IntCompiler(Visitor, families=("int_exprs",)):
    """`visit(e, env, frags)`: names come from `env` (Lets, loop variables), sizes and scalar
    parameters. `frags` collects the tag(...) / coord(...) an assertion mentions (None outside
    assertions, where they are refused)."""

    def __init__(self, an):
        self.an = an

    def visit_IConst(self, e, env, frags):
        return V.const_int(e.value)

    def visit_IVar(self, e, env, frags):
        if e.name in env and isinstance(env[e.name], IntV):
            return env[e.name]
        if e.name in self.an.size_names:
            n = e.name
            return IntV(lambda S, ctx, inst, t, v=None: Z.var(n), True, lin=({("size", n): 1}, 0))
        if e.name in self.an.param_names:
            n = f"param.{e.name}"
            return IntV(lambda S, ctx, inst, t, v=None: Z.var(n), True, lin=({("param", e.name): 1}, 0))
        raise AnalysisError(f"unknown integer {e.name!r}")

    def visit_ISpecial(self, e, env, frags):
        w = e.which
        if w.startswith("block_id."):
            ax = "xyz".index(w[-1])
            return IntV(lambda S, ctx, inst, t, v=None: ctx.block[ax], True, lin=({("blk", ax): 1}, 0))
        if w.startswith("num_blocks."):
            return self.an.grid["xyz".index(w[-1])]
        if w not in THREAD_SPECIALS:
            raise AnalysisError(f"special {w}")
        term, np_fn, atom = THREAD_SPECIALS[w]
        return IntV(lambda S, ctx, inst, t, v=None: term(t), False, np_fn=np_fn, lin=({atom: 1}, 0))

    def visit_IBin(self, e, env, frags):
        return combine(e.op, self.visit(e.a, env, frags), self.visit(e.b, env, frags))

    def visit_IUn(self, e, env, frags):
        # through the binary operators (-a as 0 - a, not a as a == 0), which fold and stay affine
        a = self.visit(e.a, env, frags)
        if e.op == "-":
            return combine("-", V.const_int(0), a)
        return combine("==", a, V.const_int(0))

    def visit_ISelect(self, e, env, frags):
        c, a, b = (self.visit(x, env, frags) for x in (e.cond, e.a, e.b))
        npf = None
        if c.np_fn and a.np_fn and b.np_fn:

            def npf(t, c=c, a=a, b=b):
                return np.where(np.asarray(c.np_fn(t)) != 0, a.np_fn(t), b.np_fn(t))

        return IntV(
            lambda S, ctx, inst, t, v=None: Z.Ite(
                Z.i2b(c.fn(S, ctx, inst, t, v)), a.fn(S, ctx, inst, t, v), b.fn(S, ctx, inst, t, v)
            ),
            c.uniform and a.uniform and b.uniform,
            c.loopdeps | a.loopdeps | b.loopdeps,
            npf,
            heads=c.heads | a.heads | b.heads,
        )

    def visit_ICall(self, e, env, frags):
        fn = self.an.tagfns[e.fn]
        sub = dict(env)
        for p, a in zip(fn.params, e.args, strict=True):
            sub[p] = self.visit(a, env, frags)
        return self.visit(fn.body, sub, frags)

    def _fragment(self, e, env, frags):
        if frags is None:
            raise AnalysisError("tag(...) / coord(...) outside an assertion")
        return env[e.frag]

    def visit_ITag(self, e, env, frags):
        f = self._fragment(e, env, frags)
        k = e.component

        def tagfn(S, ctx, inst, t, v=None, f=f, k=k):
            return f.tag(S, ctx, inst, t, v).comp(k)[0]

        frags.append(("tag", e.frag, k))
        return IntV(tagfn, False)

    def visit_ICoord(self, e, env, frags):
        f = self._fragment(e, env, frags)
        ax = e.axis

        def coordfn(S, ctx, inst, t, v=None, f=f, ax=ax):
            return f.typ.coords.coords(t, v, OPS)[ax]

        frags.append(("coord", e.frag, ax))
        return IntV(coordfn, False)


# ---------------------------------------------------------------------------------------------
# expressions of tag declarations -> terms


class TagTerms(Visitor, families=("int_exprs",)):
    """`visit(e, bind)`: the term of a tag declaration's expression; index variables come from
    `bind`, and sizes, scalar parameters and tag functions may appear."""

    def __init__(self, an):
        self.an = an

    def visit_IConst(self, e, bind):
        return bv(e.value)

    def visit_IVar(self, e, bind):
        if e.name in bind:
            return bind[e.name]
        if e.name in self.an.size_names:
            return Z.var(e.name)
        if e.name in self.an.param_names:
            return Z.var(f"param.{e.name}")
        raise AnalysisError(f"unknown name {e.name!r} in a tag expression")

    def visit_IBin(self, e, bind):
        return int_term(e.op, self.visit(e.a, bind), self.visit(e.b, bind))

    def visit_IUn(self, e, bind):
        return semantics.INT_UNARY[e.op].z3(Z, self.visit(e.a, bind))

    def visit_ISelect(self, e, bind):
        return Z.Ite(Z.i2b(self.visit(e.cond, bind)), self.visit(e.a, bind), self.visit(e.b, bind))

    def visit_ICall(self, e, bind):
        fn = self.an.tagfns[e.fn]
        sub = {p: self.visit(a, bind) for p, a in zip(fn.params, e.args, strict=True)}
        return self.visit(fn.body, sub)

    def _beyond(self, e, bind):
        raise AnalysisError(f"{type(e).__name__} in a tag expression")

    visit_ISpecial = visit_ITag = visit_ICoord = _beyond
