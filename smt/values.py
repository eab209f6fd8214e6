"""Abstract values of the verifier: symbolic tags, integer and fragment closures, query sessions.

A value is a *function* of the point where it is observed: the block (`Ctx`), the loop iteration
(`Inst`: one counter per enclosing loop), the thread `t` and, for fragments, the value index `v`.
Closures build Z3 terms when a query instantiates them, so one abstract value serves every
obligation, at any iteration, for any pair of threads.

A tag (`TagVal`) is a tuple of `K` components; each component is a bit-vector with a `star` flag
(`*`, a reduced axis), the whole tag may be `none` (a constant: no tag), `err` marks elements whose
value already depends on a violated obligation upstream (an operation whose operands disagreed, a
racy or unfinished shared read, an out-of-bounds load), so that one bug is reported once, at its
root. Tags read through shared memory are relations, not functions: `cons` constrains auxiliary
variables (the writer's thread, value and iteration), and the possible tags are those of every
assignment of the auxiliaries that satisfies `cons`.
"""

from __future__ import annotations

import itertools

import z3

from argus_verify.smt import zops as Z
from argus_verify.smt.zops import FALSE, TRUE, bv

_ids = itertools.count()


# ---------------------------------------------------------------------------------------------
# traces: the data path of an element, for counterexamples


class Tr:
    """One hop of a data path: `prev` -op at span-> label (a format string over Z3 terms)."""

    __slots__ = ("prev", "op", "span", "label", "terms")

    def __init__(self, prev, op, span, label, terms=()):
        self.prev, self.op, self.span, self.label, self.terms = prev, op, span, label, tuple(terms)


class TrChoice:
    """The path depends on the model: the first option whose condition holds."""

    __slots__ = ("options",)

    def __init__(self, options):
        self.options = tuple(options)


def element_label(name: str, rank: int) -> str:
    """`name[{}, {}]`: a trace label for an element by its coordinates (terms filled in from the model)."""
    return f"{name}[" + ", ".join(["{}"] * rank) + "]"


def value_label(name: str) -> str:
    """`name[value {}] of thread {}`: a trace label for a fragment element by value and thread."""
    return name + "[value {}] of thread {}"


def render_trace(tr, ev) -> list:
    """[(label, op, span)] from the source element to the final one; `ev` evaluates Z3 terms."""
    out = []
    seen = 0
    while tr is not None and seen < 64:
        seen += 1
        if isinstance(tr, TrChoice):
            nxt = None
            for cond, opt in tr.options:
                if ev.is_true(cond):
                    nxt = opt
                    break
            tr = nxt
            continue
        vals = [ev.int(x) for x in tr.terms]
        try:
            label = tr.label.format(*vals)
        except (IndexError, ValueError):
            label = tr.label
        out.append((label, tr.op, tr.span))
        tr = tr.prev
    out.reverse()
    return out


# ---------------------------------------------------------------------------------------------
# tags


class TagVal:
    """`taint`: the value may come from a widened (unknown) loop-carried value; a counterexample
    that needs it is reported as unknown."""

    __slots__ = ("none", "comps", "err", "cons", "trace", "inexact", "taint")

    def __init__(self, none, comps, err=FALSE, cons=TRUE, trace=None, inexact=frozenset(), taint=FALSE):
        self.taint = taint
        self.none = none
        self.comps = tuple(comps)  # ((val, star), ...)
        self.err = err
        self.cons = cons
        self.trace = trace
        self.inexact = frozenset(inexact)

    def replace(self, **kw) -> TagVal:
        d = {s: getattr(self, s) for s in self.__slots__}
        d.update(kw)
        return TagVal(**d)

    def comp(self, k):
        if k < len(self.comps):
            return self.comps[k]
        return bv(0), TRUE

    def present(self, k):
        """Component k exists: the element is tagged and k is neither `*` nor absent."""
        if k >= len(self.comps):
            return FALSE
        return Z.And(Z.Not(self.none), Z.Not(self.comps[k][1]))


def untagged(K: int, trace=None) -> TagVal:
    return TagVal(TRUE, [(bv(0), TRUE)] * K, trace=trace)


def tagged(values, K: int, trace=None) -> TagVal:
    comps = [(bv(0), TRUE) if v is None else (v, FALSE) for v in values[:K]]  # None: a declared `*`
    comps += [(bv(0), TRUE)] * (K - len(comps))  # absent components behave like `*`
    return TagVal(FALSE, comps, trace=trace)


def agree(a: TagVal, b: TagVal, skip=()) -> z3.BoolRef:
    """Component-wise agreement: `*` and untagged agree with anything."""
    parts = []
    for k, ((va, sa), (vb, sb)) in enumerate(zip(a.comps, b.comps, strict=True)):
        if k in skip:
            continue
        parts.append(Z.Or(sa, sb, Z.Eq(va, vb)))
    return Z.Or(a.none, b.none, Z.And(*parts))


def same_pattern(a: TagVal, b: TagVal, skip=()) -> z3.BoolRef:
    """Same none-ness and the same `*` components: then one element represents a group exactly."""
    parts = [Z.Eq(Z.b2i(a.none), Z.b2i(b.none))]
    for k, ((_, sa), (_, sb)) in enumerate(zip(a.comps, b.comps, strict=True)):
        if k not in skip:
            parts.append(Z.Or(a.none, Z.Eq(Z.b2i(sa), Z.b2i(sb))))
    return Z.And(*parts)


def merge(a: TagVal, b: TagVal, trace=None) -> TagVal:
    """Tag of an elementwise result: the tagged operand's components, `*` filled from the other."""
    comps = []
    for (va, sa), (vb, sb) in zip(a.comps, b.comps, strict=True):
        star_ab = Z.And(sa, sb)
        val_ab = Z.Ite(sa, vb, va)
        star = Z.Ite(a.none, sb, Z.Ite(b.none, sa, star_ab))
        val = Z.Ite(a.none, vb, Z.Ite(b.none, va, val_ab))
        comps.append((val, star))
    return TagVal(
        Z.And(a.none, b.none),
        comps,
        Z.Or(a.err, b.err),
        Z.And(a.cons, b.cons),
        trace if trace is not None else (a.trace if not Z.is_true(a.none) else b.trace),
        a.inexact | b.inexact,
        Z.Or(a.taint, b.taint),
    )


def ite(c, a: TagVal, b: TagVal) -> TagVal:
    if Z.is_true(c):
        return a
    if Z.is_false(c):
        return b
    comps = [
        (Z.Ite(c, va, vb), Z.Ite(c, sa, sb)) for (va, sa), (vb, sb) in zip(a.comps, b.comps, strict=True)
    ]
    return TagVal(
        Z.Ite(c, a.none, b.none),
        comps,
        Z.Ite(c, a.err, b.err),
        Z.And(Z.Implies(c, a.cons), Z.Implies(Z.Not(c), b.cons)),
        TrChoice([(c, a.trace), (TRUE, b.trace)]),
        a.inexact | b.inexact,
        Z.Ite(c, a.taint, b.taint),
    )


def select(sel, options, K: int) -> TagVal:
    """A tag chosen by the auxiliary selector `sel` among `(valid, TagVal)` options."""
    if not options:
        return TagVal(TRUE, [(bv(0), TRUE)] * K, FALSE, FALSE)
    if len(options) == 1:
        valid, t = options[0]
        return t.replace(cons=Z.And(valid, t.cons))
    conds = [Z.Eq(sel, bv(i)) for i in range(len(options))]
    cons = Z.Or(*[Z.And(c, valid, t.cons) for c, (valid, t) in zip(conds, options, strict=True)])
    last = options[-1][1]
    none, err, taint = last.none, last.err, last.taint
    comps = list(last.comps)
    for c, (_, t) in reversed(list(zip(conds[:-1], options[:-1], strict=True))):
        none = Z.Ite(c, t.none, none)
        err = Z.Ite(c, t.err, err)
        taint = Z.Ite(c, t.taint, taint)
        comps = [
            (Z.Ite(c, vt, v0), Z.Ite(c, st, s0)) for (vt, st), (v0, s0) in zip(t.comps, comps, strict=True)
        ]
    inexact = frozenset().union(*[t.inexact for _, t in options])
    trace = TrChoice([(c, t.trace) for c, (_, t) in zip(conds, options, strict=True)])
    return TagVal(none, comps, err, cons, trace, inexact, taint)


def tags_equal(a: TagVal, b: TagVal) -> z3.BoolRef:
    """Same tag (for loop invariants): none-ness, star pattern and present values."""
    parts = [Z.Eq(Z.b2i(a.none), Z.b2i(b.none))]
    for (va, sa), (vb, sb) in zip(a.comps, b.comps, strict=True):
        parts.append(Z.Or(a.none, Z.And(Z.Eq(Z.b2i(sa), Z.b2i(sb)), Z.Or(sa, Z.Eq(va, vb)))))
    return Z.And(*parts)


# ---------------------------------------------------------------------------------------------
# points of observation


class Ctx:
    """A block: its ids (Z3 terms) and their range constraints."""

    __slots__ = ("block", "cons", "key")

    def __init__(self, block, cons):
        self.block = tuple(block)
        self.cons = cons
        self.key = tuple(b.get_id() for b in self.block)


class Inst:
    """An instance of a statement: the iteration counter and value of each enclosing loop."""

    __slots__ = ("node", "cnt", "vals", "cons", "_key")

    def __init__(self, node, cnt=None, vals=None, cons=TRUE):
        self.node = node
        self.cnt = dict(cnt or {})
        self.vals = dict(vals or {})
        self.cons = cons
        self._key = None

    @property
    def key(self):
        if self._key is None:
            self._key = tuple((k, v.get_id()) for k, v in sorted(self.cnt.items()))
        return self._key


class Session:
    """The state of one query: fresh names, memoised evaluations, approximation notes."""

    def __init__(self, analysis):
        self.an = analysis
        self.n = 0
        self.memo: dict = {}
        self.notes: set = set()
        self.taints: list = []  # taint flags of the tags evaluated (see TagVal)
        self.udepth: dict = {}  # cell id -> depth of the loop recurrence being unrolled

    def var(self, prefix: str):
        self.n += 1
        return Z.var(f"{prefix}!{self.n}")

    def bool(self, prefix: str) -> z3.BoolRef:
        self.n += 1
        return z3.Bool(f"{prefix}!{self.n}")


# ---------------------------------------------------------------------------------------------
# integer and fragment values


class IntV:
    """A per-thread integer: `fn(S, ctx, inst, t, v)` -> bit-vector term.

    `uniform`: the same for every thread of a block. `loopdeps`: loop variables it depends on.
    `np_fn(t)`: a numpy evaluation over thread ids when it depends on nothing else (None if not).
    `lin`: an affine form {atom: coefficient}, constant, when it is affine in block ids, loop
    variables, sizes and thread specials (None otherwise). `heads`: loop-carried cells it reads.
    """

    __slots__ = ("fn", "uniform", "loopdeps", "np_fn", "lin", "heads", "inexact", "id")

    def __init__(
        self, fn, uniform, loopdeps=frozenset(), np_fn=None, lin=None, heads=frozenset(), inexact=frozenset()
    ):
        self.fn = fn
        self.uniform = uniform
        self.loopdeps = frozenset(loopdeps)
        self.np_fn = np_fn
        self.lin = lin
        self.heads = frozenset(heads)
        self.inexact = frozenset(inexact)
        self.id = next(_ids)


def conditions_hold(conds, S, ctx, inst, t=None) -> list:
    """Each (IntV, polarity) condition of `conds` holds at that block, instance and thread."""
    out = []
    for c, pos in conds:
        y = Z.i2b(c.fn(S, ctx, inst, t))
        out.append(y if pos else Z.Not(y))
    return out


def const_int(c: int) -> IntV:
    return IntV(lambda S, ctx, inst, t, v=None: bv(c), True, np_fn=lambda t: c, lin=({}, int(c)))


class FragV:
    """A fragment: `tag(S, ctx, inst, t, v)` -> TagVal (memoised per session)."""

    __slots__ = ("name", "typ", "fn", "heads", "label", "id", "loopdeps", "cfn", "cfn_ok")

    def __init__(self, name, typ, fn, label, heads=frozenset(), loopdeps=frozenset(), cfn=None, cfn_ok=None):
        # cfn(S, ctx, inst, c) -> TagVal: the tag of the element at tile coordinate c, when it
        # depends on the coordinate only (not on which thread or value holds it). Whether it does
        # may only be known once loop-carried values are decided: `cfn_ok()` says (at query time).
        self.cfn = cfn
        self.cfn_ok = cfn_ok
        self.name = name
        self.typ = typ
        self.fn = fn
        self.label = label
        self.heads = frozenset(heads)
        self.loopdeps = frozenset(loopdeps)
        self.id = next(_ids)

    def has_cfn(self) -> bool:
        return self.cfn is not None and (self.cfn_ok is None or self.cfn_ok())

    def tag(self, S, ctx, inst, t, v) -> TagVal:
        cnt = inst.cnt if inst is not None else {}
        key = (
            "frag",
            self.id,
            ctx.key,
            tuple(cnt[x].get_id() for x in sorted(self.loopdeps) if x in cnt),
            t.get_id(),
            v.get_id(),
        )
        hit = S.memo.get(key)
        if hit is None:
            hit = self.fn(S, ctx, inst, t, v)
            S.memo[key] = hit
            if not Z.is_false(hit.taint):
                S.taints.append(hit.taint)
        return hit
