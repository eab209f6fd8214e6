"""One SMT query: constraints, solving with a time limit, small witnesses, witness validation.

An obligation is proved when the negation of its formula is unsatisfiable. A model is a
candidate counterexample; before it is reported the solver is asked for one with small sizes
(so that `--replay` can run it), and the candidate is *validated*: the encoding over-approximates
the writes a shared read may see and under-approximates barriers and waits (with a few candidate
instances), so each such claim the model relies on is re-checked exactly, with all its values
fixed, by a small existential query. A model that fails validation is blocked and the search
repeats; a candidate that cannot be confirmed, or one that depends on an approximation (a
widened loop-carried value), is reported as unknown, never as a violation.
"""

from __future__ import annotations

import time

import z3

from argus_verify.smt import values as V
from argus_verify.smt import zops as Z


class Ev:
    """Evaluate terms in a model."""

    def __init__(self, model):
        self.m = model

    def int(self, x) -> int:
        if isinstance(x, int):
            return x
        r = self.m.eval(x, model_completion=True)
        if z3.is_int_value(r):
            return r.as_long()
        if z3.is_bv_value(r):
            return r.as_signed_long()
        if z3.is_true(r):
            return 1
        if z3.is_false(r):
            return 0
        return int(str(r))

    def is_true(self, b) -> bool:
        if isinstance(b, bool):
            return b
        return z3.is_true(self.m.eval(b, model_completion=True))


class Outcome:
    def __init__(self, status, model=None, reason="", seconds=0.0):
        self.status = status  # "proved" | "violated" | "unknown"
        self.model = model
        self.reason = reason
        self.seconds = seconds

    @property
    def ev(self) -> Ev:
        return Ev(self.model)


class Query:
    def __init__(self, an, timeout_s: float, mode: str = "int"):
        Z.set_mode(mode)
        self.mode = mode
        self.defs = Z.begin_query()
        self.an = an
        self.S = V.Session(an)
        self.timeout_s = timeout_s
        self.cons = list(an.base_constraints())
        self.validators = []  # callables(model) -> str | None (None: confirmed)
        self.small = []  # terms we prefer small / zero in witnesses (block ids)
        self.point = []  # the witness's own variables (blocked when a candidate is not confirmed)

    def add(self, *cs):
        for c in cs:
            if isinstance(c, (list, tuple)):
                self.add(*c)
            elif not Z.is_true(c):
                self.cons.append(c)

    def solver(self, timeout_s=None):
        s = z3.SolverFor("QF_BV") if self.mode == "bv" else z3.Solver()
        s.set("timeout", max(1, int((timeout_s or self.timeout_s) * 1000)))
        return s

    def run(self, validate: bool = True, tries: int = 4, minimize: bool = True) -> Outcome:
        # One search loop, kept in one piece: when its models and candidates are freed decides how
        # Z3 numbers later terms, and so the later witnesses (see smt/__init__.py).
        t0 = time.perf_counter()
        Z.end_defs()
        s = self.solver()
        s.add(*self.cons)
        s.add(*self.defs)
        reads = self.S.memo.get("__reads__", [])
        for attempt in range(tries):
            r = s.check()
            if r == z3.unsat:
                if attempt == 0:
                    return Outcome("proved", seconds=time.perf_counter() - t0)
                return Outcome(
                    "unknown",
                    reason="candidate counterexamples were not confirmed by the exact re-check",
                    seconds=time.perf_counter() - t0,
                )
            if r != z3.sat:
                return Outcome(
                    "unknown",
                    reason=f"solver gave up after {self.timeout_s:g} s ({s.reason_unknown()})",
                    seconds=time.perf_counter() - t0,
                )
            taints = [x for x in self.S.taints if not Z.is_false(x)]
            tainted = False
            model = None
            if taints:
                # prefer a counterexample that does not rest on a widened loop-carried value
                model = s.model()
                s.push()
                s.add(Z.Not(Z.Or(*taints)))
                if s.check() == z3.sat:
                    model = s.model()
                else:
                    s.pop()
                    # (a re-check that gives up under load keeps the model found before)
                    if s.check() == z3.sat:
                        model = s.model()
                    tainted = True
            if model is None:
                model = s.model()
            if minimize:
                model = self.small_model(s, model)
            if tainted:
                return Outcome(
                    "unknown",
                    model,
                    "possible violation that rests on a value the verifier had to "
                    "widen: " + "; ".join(sorted(self.an.notes)),
                    time.perf_counter() - t0,
                )
            if self.S.notes:
                return Outcome(
                    "unknown",
                    model,
                    "possible violation under an approximation: " + "; ".join(sorted(self.S.notes)),
                    time.perf_counter() - t0,
                )
            bad = None
            if validate:
                bad = validate_reads(self, model, reads)
                if bad is None:
                    for fn in self.validators:
                        bad = fn(model)
                        if bad:
                            break
            if bad is None:
                return Outcome("violated", model, seconds=time.perf_counter() - t0)
            s.add(block_model(self, model))
        return Outcome(
            "unknown",
            reason="candidate counterexamples were not confirmed by the exact re-check",
            seconds=time.perf_counter() - t0,
        )

    def small_model(self, s, model):
        """Prefer witnesses with small sizes and block 0 (cheap to replay, easy to read). `model`
        satisfies `s`; each narrower search that gives up keeps the last model found."""
        sizes = list(self.an.sizes.values())
        # (reads resolved through TMA writes make Hopper queries slower: a minimisation cut short
        # by machine load would change the witness)
        cap = (8.0, 0.8) if getattr(self.an, "hopper", False) else (2.0, 0.2)
        s.set("timeout", max(1, int(min(cap[0], cap[1] * self.timeout_s) * 1000)))
        chosen = None
        for bound in (64, 256, 1024, 8192):
            if all(Ev(model).int(x) <= bound for x in sizes):
                chosen = bound
                break
            s.push()
            s.add(*[x <= bound for x in sizes])
            if s.check() == z3.sat:
                model = s.model()
                chosen = bound
                s.pop()
                break
            s.pop()
        if self.small:
            s.push()
            if chosen is not None:
                s.add(*[x <= chosen for x in sizes])
            s.add(*[x == 0 for x in self.small])
            if s.check() == z3.sat:
                model = s.model()
            s.pop()
        s.set("timeout", max(1, int(self.timeout_s * 1000)))
        return model


def model_pins(model):
    pins = []
    for d in model.decls():
        if d.arity() != 0:
            continue
        c = d()
        pins.append(c == model[d])
    return pins


def block_model(q: Query, model):
    """Exclude this witness point (sizes and the obligation's point variables) from the next search."""
    ev = Ev(model)
    keys = [x == ev.int(x) for x in list(q.an.sizes.values()) + list(q.point)]
    return z3.Not(z3.And(*keys)) if keys else z3.BoolVal(False)


def exists_check(q: Query, model, build) -> bool:
    """With every value of `model` fixed, is `build(S)` (over fresh variables) satisfiable?"""
    S = V.Session(q.an)
    S.n = 10_000_000  # fresh names disjoint from the query's
    saved = Z._SINK
    Z._SINK = sink = []
    try:
        cond = build(S)
        base = q.an.base_constraints()
    finally:
        Z._SINK = saved
    if Z.is_false(cond):
        return False
    s = q.solver(min(q.timeout_s, 5.0))
    s.add(*base, *sink, *model_pins(model), cond)
    r = s.check()
    return r != z3.unsat  # unknown counts as "maybe": the candidate is not confirmed


def validate_reads(q: Query, model, reads) -> str | None:
    """Each shared read the model resolved to write W@w: no write to that offset lies between."""
    from argus_verify.smt import program as P

    an = q.an
    ev = Ev(model)
    for rd, ctx, r_inst, _t, e, sel, events in reads:
        i = ev.int(sel)
        if not 0 <= i < len(events):
            continue
        W, w_inst, tw, vw, valid, ok = events[i]
        if not ev.is_true(valid):
            continue
        off = rd.alloc.offset(e)

        def build(S, rd=rd, ctx=ctx, r_inst=r_inst, w_inst=w_inst, off=off, e=e):
            parts = []
            for K in an.sh_writes[rd.alloc.name]:
                k_inst = P.new_inst(S, ctx, K.node, "vk")
                tk, vk = S.var("vtk"), S.var("vvk")
                _, koff, kin = K.addr(S, ctx, k_inst, tk, vk)
                parts.append(
                    Z.And(
                        k_inst.cons,
                        tk >= 0,
                        tk < an.T,
                        vk >= 0,
                        vk < K.values,
                        Z.Eq(koff, off),
                        kin,
                        K.executes(S, ctx, k_inst, tk),
                        P.before(w_inst, k_inst),
                        P.before(k_inst, r_inst),
                    )
                )
            return Z.Or(*parts)

        if exists_check(q, model, build):
            return f"the write read at line {rd.node.span.line} was overwritten before the read"
    return None


# The resource limit (Z3's deterministic work counter, not a clock) of the integer proof attempt.
PROVE_INT_RLIMIT = 300_000


# The budget of the attempt on the abstraction of a query's products and quotients of unknowns
# (about 1.5 s of this machine's work; the final Hopper GEMM's uninitialised-read queries take
# 0.03-0.2 million, gemm_bf16_wgmma_direct_prefetch's read of sA more than this budget).
ABSTRACT_RLIMIT = 10_000_000


def prove_in_ints(an, timeout_s: float, build, abstract: bool = False, rlimit: int | None = None):
    """A proof of a query in the integer encoding, within a small budget.

    With `abstract`, each product of two unknowns and each quotient by an unknown is an
    uninterpreted function's application bound only by facts true of the real operation (smt.zops
    `ABSTRACT`): the query then
    has more models than the exact one, so its unsatisfiability is still a proof, and the solver
    stays in linear arithmetic, where it decides the ring positions of persistent kernels
    (`tile_index * KT + kt`) that defeat its nonlinear reasoning.

    Both encodings are exact (smt.zops), so an unsatisfiable integer query is a proof. The tag
    queries (assertions, agreements, contracts, reads resolved to their writes) are mostly linear
    comparisons of sums, which the arithmetic solver settles at once where bit-blasting 64-bit
    adders takes up to a second. It is made for queries whose tags come through shared-memory
    reads (resolved to the writes they see: the slow ones); address queries (races, banks) are
    the opposite, fast in bit-vectors and slow in integers. The attempt is bounded by Z3's resource
    counter, not a clock: the same formula always gets the same answer, whatever the load.
    Anything but a proof (a model, the budget spent) returns None and the caller searches as
    before, in the bit-vector query it built first; the module's encoding state is restored for
    it. Returns (Outcome, Query, terms) or None."""
    with Z.side_query():
        t0 = time.perf_counter()
        Z.ABSTRACT = abstract
        qi = Query(an, timeout_s, "int")
        terms = build(qi)
        Z.end_defs()
        Z.ABSTRACT = False
        s = qi.solver()
        s.set("rlimit", PROVE_INT_RLIMIT if rlimit is None else rlimit)
        s.add(*qi.cons)
        s.add(*qi.defs)
        if s.check() == z3.unsat:
            return Outcome("proved", seconds=time.perf_counter() - t0), qi, terms
        return None


def solve(an, timeout_s: float, build, validate: bool = True, minimize: bool = True, abstract: bool = True):
    """Build a query with `build(q) -> terms` and solve it in the encoding that suits it.

    A first build (bit-vectors, the usual choice) shows what the formula needs: bit operations (swizzles,
    lane xors) go to bit-vectors; division by constants that are not powers of two (stage indices
    modulo 3) or by a size (g // N) go to integers; anything else to bit-vectors, which are faster
    on the small layout arithmetic. `abstract=False` skips the first attempt on the abstraction of
    products (address queries: races and bank conflicts compare swizzled offsets, which it decomposes
    bit by bit and spends its budget on without a proof). When the solver gives up in one encoding
    the other gets a turn (time slices of the per-query limit: 30%, 30%, then the rest to the
    first). Returns (Outcome, Query, terms)."""
    q = Query(an, timeout_s, "bv")
    terms = build(q)
    bits, nonpow2, symdiv = Z.STATS["bitops"], Z.STATS["nonpow2"], Z.STATS["symdiv"]
    # (a division by a size, g // N, bit-blasts into a 64-bit divider circuit that the bit-vector
    # solver rarely settles in time; the integer solver's nonlinear arithmetic does at once)
    first = "int" if ((nonpow2 >= 3 or symdiv) and not bits) else "bv"
    if (symdiv or Z.STATS["nonlinear"]) and ABSTRACT_RLIMIT and abstract:
        quick = prove_in_ints(an, timeout_s, build, abstract=True, rlimit=ABSTRACT_RLIMIT)
        if quick is not None:
            return quick
    if first == "bv" and not bits and q.S.memo.get("__reads__") and PROVE_INT_RLIMIT:
        quick = prove_in_ints(an, timeout_s, build)
        if quick is not None:
            return quick
    second = "bv" if first == "int" else "int"
    plan = [(first, 0.3), (second, 0.3), (first, 0.4)]
    res = None
    for mode, share in plan:
        if not (res is None and mode == q.mode):
            q = Query(an, timeout_s * share, mode)
            terms = build(q)
        q.timeout_s = timeout_s * share
        res = q.run(validate, minimize=minimize)
        if res.status != "unknown" or not res.reason.startswith("solver gave up"):
            break
    if res.status == "unknown" and res.reason.startswith("solver gave up"):
        res.reason = f"solver gave up after {timeout_s:g} s in both encodings"
    return res, q, terms
