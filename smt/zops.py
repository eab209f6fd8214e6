"""Z3 arithmetic for the verifier: two exact encodings of the kernel's integers.

Every integer of a kernel (sizes, block and thread ids, loop variables and counters, coordinates,
offsets, tag components) is a Z3 mathematical integer, so there is no overflow to reason about and
`//`, `%` by constants are native to linear integer arithmetic, where Z3 is fast at exactly the
reasoning the obligations need (loop counters, stage indices modulo STAGES, tile arithmetic).

Bit operations are exact too. `Swizzle(B, M, S)` is `x ^ ((x & mask) >> S)`; with a constant mask
and shift, every bit involved is `(x // 2**i) % 2`, and `x ^ y` for a `y` with a known bit range
is `x + sum 2**i * (((x_i + y_i) % 2) - x_i)`: still linear integer arithmetic with division by
constants. `&`, `|`, `^` with a constant, `>>` and `<<` by constants are handled the same way.
Only bit operations between two values of unknown range fall back to 32-bit two's complement
bit-vectors (`Int2BV` / `BV2Int`), exact for values in [-2**31, 2**31).

The same terms can instead be built as 64-bit bit-vectors (`set_mode("bv")`): bit operations are
then native, and division by a constant that is not a power of two introduces a fresh quotient
(`x = c*q + r, 0 <= r < c`) instead of a divider circuit. All values the kernels form stay far
below 2**62, so both encodings are exact. A query is built in the encoding that suits it (bit
vectors when its formula uses bit operations, integers otherwise) and rebuilt in the other one if
the solver gives up.

`Z3Ops` is the `LayoutOps` object through which `Layout.apply` and `TVLayout.coords` evaluate
layouts symbolically, so the verifier shares one definition of every layout with the
interpreter (`NumpyOps`) and the PTX emitter.
"""

from __future__ import annotations

import contextlib

import z3

MAX_SIZE = 1 << 20  # sizes range over 1..MAX_SIZE unless `requires` or --shape says more
FALLBACK_BITS = 32
WIDTH = 64

MODE = "int"  # "int" | "bv"
STATS = {"bitops": 0, "nonpow2": 0, "symdiv": 0, "nonlinear": 0}  # symdiv: divisions by a non-constant
_SINK: list | None = None  # bv mode: definitions of constant-division quotients
_DIVS: dict = {}
# With ABSTRACT set (integer encoding, while a query is built), a product of two non-constants and a
# quotient by a non-constant become applications of uninterpreted functions constrained by facts that
# hold of the real operations (signs, monotonicity, the next multiple; see _nonlinear_facts): an
# over-approximation, so an unsatisfiable abstract query is a proof, and any model of it is not trusted.
ABSTRACT = False
_PRODS: dict = {}  # (id a, id b) -> (a, b, a * b, the constants it is multiplied by)
_QUOTS: dict = {}  # (id a, id b) -> (a, b, a // b)
_count = [0]


def set_mode(mode: str) -> None:
    global MODE
    assert mode in ("int", "bv")
    MODE = mode


@contextlib.contextmanager
def side_query():
    """Build and solve a query beside the one being built: the module's encoding state (mode, sink,
    abstraction, range facts, quotient definitions, abstracted products and quotients, statistics)
    is restored afterwards."""
    global MODE, _SINK, ABSTRACT
    saved = (MODE, _SINK, ABSTRACT)
    tables = [(t, dict(t)) for t in (_RANGE, _DIVS, _PRODS, _QUOTS, STATS)]
    try:
        yield
    finally:
        MODE, _SINK, ABSTRACT = saved
        for table, content in tables:
            table.clear()
            table.update(content)


def begin_query() -> list:
    """Start building a query: fresh range facts, a fresh sink for quotient definitions."""
    global _SINK
    _RANGE.clear()
    _DIVS.clear()
    _PRODS.clear()
    _QUOTS.clear()
    STATS["bitops"] = 0
    STATS["nonpow2"] = 0
    STATS["symdiv"] = 0
    STATS["nonlinear"] = 0
    _SINK = []
    return _SINK


def end_defs() -> None:
    """Terms built from now on (witness rendering) use exact division circuits."""
    global _SINK
    if _abstracting() and _PRODS:
        _SINK.extend(_nonlinear_facts())
    _PRODS.clear()  # (they belong to this query alone: the next one may be in another encoding)
    _QUOTS.clear()
    _SINK = None


def _abstracting() -> bool:
    return ABSTRACT and MODE == "int" and _SINK is not None


_MUL = z3.Function("mul!", z3.IntSort(), z3.IntSort(), z3.IntSort())
_DIV = z3.Function("div!", z3.IntSort(), z3.IntSort(), z3.IntSort())


def _monomial(x):
    """(c, atom) with x = c * atom for a constant c (c = 1, atom = x when x is not such a multiple)."""
    lin = _linear(x)
    if lin is not None and lin[1] == 0 and len(lin[0]) == 1:
        ((atom, coef),) = lin[0].values()
        if coef:
            return coef, atom
    return 1, x


def _abstract_product(a, b):
    # in normal form (`(bid + 4*c - bid) // 4` is `c`), so that equal factors are one term and the
    # facts about pairs relate them; constant multipliers come out (q * (8 * TN) is 8 * (q * TN)),
    # so that products of the same unknowns meet. The function is uninterpreted: products of equal
    # factors are equal (congruence) wherever the factors are different terms
    a, b = z3.simplify(a), z3.simplify(b)
    if const_value(a) is not None or const_value(b) is not None:
        return a * b  # a constant after all: linear, exact
    (ca, a), (cb, b) = _monomial(a), _monomial(b)
    if a.get_id() > b.get_id():
        a, b = b, a
    key = (a.get_id(), b.get_id())
    hit = _PRODS.get(key)
    if hit is None:
        hit = _PRODS[key] = (a, b, _MUL(a, b), set())
    hit[3].add(ca * cb)
    return hit[2] if ca * cb == 1 else (ca * cb) * hit[2]


def _abstract_quotient(a, b):
    a, b = z3.simplify(a), z3.simplify(b)
    if const_value(b) is not None:
        return floordiv(a, b)  # a constant divisor after all: native
    key = (a.get_id(), b.get_id())
    hit = _QUOTS.get(key)
    if hit is not None:
        return hit[2]
    q = _DIV(a, b)
    _QUOTS[key] = (a, b, q)
    p = _abstract_product(q, b)  # q * b: the multiple of b at or below a
    _SINK.extend([
        z3.Implies(b > 0, z3.And(p <= a, a < p + b)),
        z3.Implies(b < 0, z3.And(p >= a, a > p + b)),
        z3.Implies(z3.And(b > 0, a >= 0), z3.And(q >= 0, q <= a)),
    ])
    return q


def _linear(x, depth=0):
    """x as ({atom id: [atom, coefficient]}, constant) when it is a sum of constant multiples of
    terms (None otherwise)."""
    c = const_value(x)
    if c is not None:
        return {}, c
    if depth > 40 or not z3.is_arith(x):
        return None
    k = x.decl().kind() if z3.is_app(x) else None
    kids = x.children()
    if k in (z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS):
        terms, const = {}, 0
        for i, kid in enumerate(kids):
            sign = -1 if (k == z3.Z3_OP_UMINUS or (k == z3.Z3_OP_SUB and i > 0)) else 1
            lin = _linear(kid, depth + 1)
            if lin is None:
                return None
            for key, (atom, coef) in lin[0].items():
                terms.setdefault(key, [atom, 0])[1] += sign * coef
            const += sign * lin[1]
        return terms, const
    if k == z3.Z3_OP_MUL and len(kids) == 2:
        for f, g in ((kids[0], kids[1]), (kids[1], kids[0])):
            cf = const_value(f)
            if cf is not None:
                lin = _linear(g, depth + 1)
                if lin is None:
                    return None
                return {key: [atom, cf * coef] for key, (atom, coef) in lin[0].items()}, cf * lin[1]
    return {x.get_id(): [x, 1]}, 0


def _exact_quotient(a, c: int):
    """a // c as a linear term when c divides every coefficient and the constant of a (the
    persistent loops' `(tile - block_id.x) // SMS` is the tile counter), else None."""
    lin = _linear(a)
    if lin is None or lin[1] % c or any(coef % c for _, coef in lin[0].values()):
        return None
    out = bv(lin[1] // c)
    for atom, coef in lin[0].values():
        if coef:
            out = add(out, mul(atom, bv(coef // c)))
    return out


def _nonlinear_facts() -> list:
    """Facts of the abstracted products p = a * b: each alone (zero, one, signs, at least a
    factor), and each pair sharing a factor y, with the constant multiples c1 and c2 the query
    takes of them: c1 * p1 and c2 * p2 are x1 * y and x2 * y for x = c * (the other factor), so they
    are equal, ordered (by at least |y|, the order reversed for y < 0) or y apart as x1 and x2 are."""
    out = []
    prods = list(_PRODS.values())
    for a, b, p, _ in prods:
        out += [
            z3.Implies(z3.Or(a == 0, b == 0), p == 0),
            z3.Implies(a == 1, p == b),
            z3.Implies(b == 1, p == a),
            z3.Implies(z3.Or(z3.And(a >= 0, b >= 0), z3.And(a <= 0, b <= 0)), p >= 0),
            z3.Implies(z3.Or(z3.And(a >= 0, b <= 0), z3.And(a <= 0, b >= 0)), p <= 0),
            z3.Implies(z3.And(a >= 1, b >= 0), p >= b),
            z3.Implies(z3.And(b >= 1, a >= 0), p >= a),
        ]
    quots = list(_QUOTS.values())
    for i, (a1, b1, q1) in enumerate(quots):
        for a2, b2, q2 in quots[i + 1:]:
            if b1.eq(b2):
                out += [
                    z3.Implies(z3.And(b1 > 0, a1 <= a2), q1 <= q2),
                    z3.Implies(z3.And(b1 > 0, a2 <= a1), q2 <= q1),
                ]
    for i, (a1, b1, p1, cs1) in enumerate(prods):
        for a2, b2, p2, cs2 in prods[i + 1:]:
            # (the function is not commutative: equal factors in the other order, as terms differ)
            out.append(z3.Implies(z3.And(a1 == b2, b1 == a2), p1 == p2))
            for x1, y1, x2, y2 in ((a1, b1, a2, b2), (b1, a1, b2, a2), (a1, b1, b2, a2), (b1, a1, a2, b2)):
                if not y1.eq(y2):
                    continue  # the shared factor y, the other factors x1 and x2
                y = y1
                for c1 in sorted(cs1 | {1}):
                    for c2 in sorted(cs2 | {1}):
                        u1, u2, P1, P2 = c1 * x1, c2 * x2, c1 * p1, c2 * p2
                        out += [
                            z3.Implies(u1 == u2, P1 == P2),
                            z3.Implies(u2 == u1 + 1, P2 == P1 + y),
                            z3.Implies(u1 == u2 + 1, P1 == P2 + y),
                            z3.Implies(z3.And(y >= 0, u1 < u2), P1 + y <= P2),
                            z3.Implies(z3.And(y >= 0, u2 < u1), P2 + y <= P1),
                            # (a size's ceiling quotient is in normal form -((-N) // 256): y < 0)
                            z3.Implies(z3.And(y <= 0, u1 < u2), P2 <= P1 + y),
                            z3.Implies(z3.And(y <= 0, u2 < u1), P1 <= P2 + y),
                        ]
                break
    return out


def _bv_divmod_const(a, c: int):
    key = (a.get_id(), c)
    hit = _DIVS.get(key)
    if hit is not None and hit[0].eq(a):
        return hit[1], hit[2]
    if _SINK is None:
        q = z3.If(a >= 0, z3.UDiv(a, bv(c)), -z3.UDiv(-a + (c - 1), bv(c)))
        r = a - q * c
    else:
        _count[0] += 1
        q = z3.BitVec(f"div!{_count[0]}", WIDTH)
        r = a - q * c
        lim = (1 << (WIDTH - 3)) // c
        _SINK.extend([r >= 0, r < c, q <= lim, q >= -lim])
    _DIVS[key] = (a, q, r)
    return q, r


TRUE = z3.BoolVal(True)
FALSE = z3.BoolVal(False)

# value ranges known for terms, by AST id: (term, lo, hi) inclusive (used to bound bit
# decompositions). Only facts that hold by construction (x % c, x & c, ...) or that the query adds
# as constraints are recorded; `reset_ranges` starts a new query.
_RANGE: dict = {}


def reset_ranges() -> None:
    _RANGE.clear()


_RANGE_ALIAS = None


_CONSTS: dict = {}
_NUMS: dict = {}  # id of a cached numeral -> its value (the cache keeps the objects alive)


def bv(n: int):
    """An integer constant of the current encoding (cached: kernels use few distinct constants)."""
    n = int(n)
    key = (MODE, n)
    hit = _CONSTS.get(key)
    if hit is None:
        if len(_CONSTS) > 50_000:
            _CONSTS.clear()
            _NUMS.clear()
        hit = z3.BitVecVal(n, WIDTH) if MODE == "bv" else z3.IntVal(n)
        _CONSTS[key] = hit
        _NUMS[id(hit)] = n
    return hit


def var(name: str):
    if MODE == "bv":
        return z3.BitVec(name, WIDTH)
    return z3.Int(name)


def const_value(x) -> int | None:
    """The Python int of a numeral (every numeral the Z3 API returns is an IntNumRef or a
    BitVecNumRef, and this module folds constants before building terms), else None."""
    if isinstance(x, int):
        return x
    hit = _NUMS.get(id(x))
    if hit is not None:
        return hit
    if isinstance(x, z3.IntNumRef):
        return x.as_long()
    if isinstance(x, z3.BitVecNumRef):
        return x.as_signed_long()
    return None


def set_range(x, lo: int, hi: int):
    """Record that lo <= x <= hi (the caller adds the matching constraint to its query)."""
    if MODE == "int" and not isinstance(x, int) and not z3.is_int_value(x):
        _RANGE[x.get_id()] = (x, lo, hi)
    return x


def range_of(x):
    c = const_value(x)
    if c is not None:
        return c, c
    hit = _RANGE.get(x.get_id())
    if hit is None or not hit[0].eq(x):
        return None
    return hit[1], hit[2]


def _bool_value(b) -> int:
    """1 for the constant true, -1 for false, 0 otherwise (one API call instead of z3.is_true's four)."""
    if b is True:
        return 1
    if b is False:
        return -1
    if b is TRUE:
        return 1
    if b is FALSE:
        return -1
    return z3.Z3_get_bool_value(b.ctx_ref(), b.as_ast())


def is_true(b) -> bool:
    return _bool_value(b) == 1


def is_false(b) -> bool:
    return _bool_value(b) == -1


# --- terms straight through the C API -------------------------------------------------------------
# z3py's operators coerce the sorts of both sides on every call (several C calls each); the
# builders here make the very same terms, for operands of the sort the current encoding uses, and
# leave anything else to z3py. Query building makes tens of thousands of these terms.

_BV, _AR = z3.BitVecRef, z3.ArithRef


def _same_kind(a, b) -> bool:
    cls = _BV if MODE == "bv" else _AR
    return isinstance(a, cls) and isinstance(b, cls)


def _mk_binary(bv_mk, int_mk, a, b, result):
    """The term (a op b): bv_mk(ctx, a, b) in bit-vectors, int_mk(ctx, 2, [a, b]) in integers."""
    ctx = a.ctx
    if MODE == "bv":
        return result(bv_mk(ctx.ref(), a.as_ast(), b.as_ast()), ctx)
    arr = (z3.Ast * 2)()
    arr[0], arr[1] = a.as_ast(), b.as_ast()
    return result(int_mk(ctx.ref(), 2, arr), ctx)


def _cmp(bv_mk, int_mk, a, b):
    ctx = a.ctx
    mk = bv_mk if MODE == "bv" else int_mk
    return z3.BoolRef(mk(ctx.ref(), a.as_ast(), b.as_ast()), ctx)


# --- Boolean helpers that fold constants, so static facts stay visible to Python ----------------


def _flat(args):
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(_flat(a))
        else:
            out.append(a)
    return out


def _mk_nary(mk, res):
    """z3.And / z3.Or over Boolean terms of the main context, straight through the C API: the
    same term z3py builds, without its per-argument sort coercion (a hot path of query building)."""
    ctx = res[0].ctx
    arr = (z3.Ast * len(res))()
    for i, a in enumerate(res):
        arr[i] = a.as_ast()
    return z3.BoolRef(mk(ctx.ref(), len(res), arr), ctx)


def And(*args):
    res = []
    for a in _flat(args):
        bvv = _bool_value(a)
        if bvv == 1:
            continue
        if bvv == -1:
            return FALSE
        res.append(a)
    if not res:
        return TRUE
    if len(res) == 1:
        return res[0]
    return _mk_nary(z3.Z3_mk_and, res)


def Or(*args):
    res = []
    for a in _flat(args):
        bvv = _bool_value(a)
        if bvv == -1:
            continue
        if bvv == 1:
            return TRUE
        res.append(a)
    if not res:
        return FALSE
    if len(res) == 1:
        return res[0]
    return _mk_nary(z3.Z3_mk_or, res)


def Not(a):
    bvv = _bool_value(a)
    if bvv == 1:
        return FALSE
    if bvv == -1:
        return TRUE
    return z3.BoolRef(z3.Z3_mk_not(a.ctx_ref(), a.as_ast()), a.ctx)


def Implies(a, b):
    return Or(Not(a), b)


def Ite(c, a, b):
    cv = _bool_value(c)
    if cv == 1:
        return a
    if cv == -1:
        return b
    if isinstance(a, int):
        a = bv(a)
    if isinstance(b, int):
        b = bv(b)
    if a.eq(b):
        return a
    if isinstance(a, z3.BoolRef):
        va, vb = _bool_value(a), _bool_value(b)
        if va == 1 and vb == -1:
            return c
        if va == -1 and vb == 1:
            return Not(c)
    if isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef):
        result = z3.BoolRef
    elif _same_kind(a, b):
        result = _BV if MODE == "bv" else _AR  # never a numeral class: an ite is no numeral
    else:
        return z3.If(c, a, b)
    ctx = a.ctx
    return result(z3.Z3_mk_ite(ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast()), ctx)


def Eq(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return z3.BoolVal(ca == cb)
    if not isinstance(a, int) and not isinstance(b, int) and a.eq(b):
        return TRUE
    a, b = _t(a), _t(b)
    if _same_kind(a, b):
        return z3.BoolRef(z3.Z3_mk_eq(a.ctx_ref(), a.as_ast(), b.as_ast()), a.ctx)
    return a == b


def Ne(a, b):
    return Not(Eq(a, b))


def Lt(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return z3.BoolVal(ca < cb)
    a, b = _t(a), _t(b)
    if _same_kind(a, b):
        return _cmp(z3.Z3_mk_bvslt, z3.Z3_mk_lt, a, b)
    return a < b


def Le(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return z3.BoolVal(ca <= cb)
    a, b = _t(a), _t(b)
    if _same_kind(a, b):
        return _cmp(z3.Z3_mk_bvsle, z3.Z3_mk_le, a, b)
    return a <= b


def b2i(b):
    if z3.is_true(b):
        return bv(1)
    if z3.is_false(b):
        return bv(0)
    return z3.If(b, bv(1), bv(0))


def i2b(x):
    c = const_value(x)
    if c is not None:
        return z3.BoolVal(c != 0)
    return x != 0


def _t(x):
    if isinstance(x, int):
        return bv(x)
    return x


# --- integer arithmetic with Python (floor) semantics --------------------------------------------


def add(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(ca + cb)
    if ca == 0:
        return _t(b)
    if cb == 0:
        return _t(a)
    a, b = _t(a), _t(b)
    if _same_kind(a, b):
        return _mk_binary(z3.Z3_mk_bvadd, z3.Z3_mk_add, a, b, _BV if MODE == "bv" else _AR)
    return a + b


def sub(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(ca - cb)
    if cb == 0:
        return _t(a)
    a, b = _t(a), _t(b)
    if _same_kind(a, b):
        return _mk_binary(z3.Z3_mk_bvsub, z3.Z3_mk_sub, a, b, _BV if MODE == "bv" else _AR)
    return a - b


def mul(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(ca * cb)
    if ca == 0 or cb == 0:
        return bv(0)
    if ca == 1:
        return _t(b)
    if cb == 1:
        return _t(a)
    a, b = _t(a), _t(b)
    if ca is None and cb is None:
        STATS["nonlinear"] += 1
        if _abstracting():
            return _abstract_product(a, b)
    if _same_kind(a, b):
        return _mk_binary(z3.Z3_mk_bvmul, z3.Z3_mk_mul, a, b, _BV if MODE == "bv" else _AR)
    return a * b


def floordiv(a, b):
    ca, cb = const_value(a), const_value(b)
    if cb is not None:
        if cb == 0:
            return bv(0)
        if ca is not None:
            return bv(ca // cb)
        if cb == 1:
            return _t(a)
        if _pow2(abs(cb)) is None:
            STATS["nonpow2"] += 1
        if MODE == "bv":
            k = _pow2(cb)
            if k is not None:
                return _t(a) >> k  # arithmetic shift: floor division by 2**k
            if cb > 0:
                return _bv_divmod_const(_t(a), cb)[0]
            return floordiv(neg(a), -cb)
        if cb > 0:  # (exact: Z3 then has no quotient to axiomatise)
            exact = _exact_quotient(_t(a), cb)
            if exact is not None:
                return exact
        if cb > 0:
            r = _t(a) / cb  # Z3 integer division: floor for a positive divisor
            rg = range_of(a)
            if rg is not None:
                set_range(r, rg[0] // cb, rg[1] // cb)
            return r
        return (-_t(a)) / (-cb)
    STATS["symdiv"] += 1
    a, b = _t(a), _t(b)
    if _abstracting():
        return _abstract_quotient(a, b)
    if MODE == "bv":
        q = a / b  # truncating; adjust toward -inf
        r = a - q * b
        return z3.If(z3.And(r != 0, (r < 0) != (b < 0)), q - 1, q)
    return z3.If(b > 0, a / b, (-a) / (-b))


def mod(a, b):
    ca, cb = const_value(a), const_value(b)
    if cb is not None:
        if cb == 0:
            return bv(0)
        if ca is not None:
            return bv(ca % cb)
        if cb == 1:
            return bv(0)
        if _pow2(abs(cb)) is None:
            STATS["nonpow2"] += 1
        if MODE == "bv":
            k = _pow2(cb)
            if k is not None:
                return _t(a) & (cb - 1)
            if cb > 0:
                return _bv_divmod_const(_t(a), cb)[1]
            return sub(a, mul(floordiv(a, cb), cb))
        if cb > 0:
            r = _t(a) % cb  # Z3 mod: in [0, |b|), the floor modulo for a positive divisor
            set_range(r, 0, cb - 1)
            return r
        return sub(a, mul(floordiv(a, cb), cb))
    return sub(a, mul(floordiv(a, b), b))


def cdiv(a, b):
    """Ceiling division as the front end and interpreter define it: -(-a // b)."""
    return neg(floordiv(neg(a), b))


def smin(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(min(ca, cb))
    a, b = _t(a), _t(b)
    return z3.If(a <= b, a, b)


def smax(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(max(ca, cb))
    a, b = _t(a), _t(b)
    return z3.If(a >= b, a, b)


def _pow2(c: int) -> int | None:
    if c > 0 and c & (c - 1) == 0:
        return c.bit_length() - 1
    return None


def _bit(x, i):
    return mod(floordiv(x, bv(1 << i)), bv(2))


def _bits_of(x):
    """Number of low bits that can be non-zero in x (None when unknown or negative possible)."""
    rg = range_of(x)
    if rg is None or rg[0] < 0:
        return None
    return max(1, int(rg[1]).bit_length())


def _fallback(op, a, b):
    ba = z3.Int2BV(_t(a), FALLBACK_BITS)
    bb = z3.Int2BV(_t(b), FALLBACK_BITS)
    r = {"^": ba ^ bb, "&": ba & bb, "|": ba | bb}[op]
    return z3.BV2Int(r, is_signed=True)


def xor(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(ca ^ cb)
    if ca == 0:
        return _t(b)
    if cb == 0:
        return _t(a)
    STATS["bitops"] += 1
    if MODE == "bv":
        return _t(a) ^ _t(b)
    if ca is not None:
        a, b, ca, cb = b, a, cb, ca
    if cb is not None:
        if cb < 0:
            return _fallback("^", a, b)
        # flip the set bits of the constant
        out = _t(a)
        for i in range(cb.bit_length()):
            if cb >> i & 1:
                out = out + (1 << i) * (1 - 2 * _bit(a, i))
        _keep_range_xor(out, a, b)
        return out
    n = _bits_of(b)
    m = _bits_of(a)
    if n is None and m is not None:
        a, b, n = b, a, m
    if n is None:
        return _fallback("^", a, b)
    out = _t(a)
    for i in range(n):
        ai, bi = _bit(a, i), _bit(b, i)
        out = out + (1 << i) * (mod(ai + bi, bv(2)) - ai)
    _keep_range_xor(out, a, b)
    return out


def _keep_range_xor(out, a, b):
    ra, rb = range_of(a), range_of(b)
    if ra is not None and rb is not None and ra[0] >= 0 and rb[0] >= 0:
        n = max(int(ra[1]).bit_length(), int(rb[1]).bit_length())
        set_range(out, 0, (1 << n) - 1)


def band(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(ca & cb)
    if ca == 0 or cb == 0:
        return bv(0)
    k = cb if cb is not None else ca
    if k is None or not (k >= 0 and k & (k + 1) == 0):  # anything but a low mask 2**j - 1
        STATS["bitops"] += 1
    if MODE == "bv":
        return _t(a) & _t(b)
    if ca is not None:
        a, b, ca, cb = b, a, cb, ca
    if cb is not None:
        if cb < 0:
            return sub(a, band(a, ~cb))
        if cb & (cb + 1) == 0:  # a low mask 2**k - 1
            return mod(a, bv(cb + 1))
        out = bv(0)
        for i in range(cb.bit_length()):
            if cb >> i & 1:
                out = add(out, mul(_bit(a, i), bv(1 << i)))
        set_range(out, 0, cb)
        return out
    return _fallback("&", a, b)


def bor(a, b):
    ca, cb = const_value(a), const_value(b)
    if ca is not None and cb is not None:
        return bv(ca | cb)
    STATS["bitops"] += 1
    if MODE == "bv":
        return _t(a) | _t(b)
    if ca is not None or cb is not None:
        return sub(add(a, b), band(a, b))
    return _fallback("|", a, b)


def shl(a, b):
    ca, cb = const_value(a), const_value(b)
    if cb is not None and cb >= 0:
        return mul(a, bv(1 << cb))
    if ca is not None and cb is not None:
        return bv(ca << cb)
    STATS["bitops"] += 1
    if MODE == "bv":
        return _t(a) << _t(b)
    # a shift by a run-time amount: enumerate the amounts that keep values in range
    out = bv(0)
    for k in range(FALLBACK_BITS - 1, -1, -1):
        out = z3.If(_t(b) == k, mul(a, bv(1 << k)), out)
    return out


def shr(a, b):
    _ca, cb = const_value(a), const_value(b)
    if cb is not None and cb >= 0:
        return floordiv(a, bv(1 << cb))
    STATS["bitops"] += 1
    if MODE == "bv":
        return _t(a) >> _t(b)
    out = bv(0)
    for k in range(FALLBACK_BITS - 1, -1, -1):
        out = z3.If(_t(b) == k, floordiv(a, bv(1 << k)), out)
    return out


def neg(a):
    c = const_value(a)
    if c is not None:
        return bv(-c)
    return -_t(a)


class Z3Ops:
    """`LayoutOps` over Z3 integers (layout code passes Python ints as the second operand)."""

    def const(self, c: int):
        return bv(c)

    def add(self, a, b):
        return add(a, b)

    def mul(self, a, c):
        return mul(a, c)

    def floordiv(self, a, c):
        return floordiv(a, c)

    def mod(self, a, c):
        return mod(a, c)

    def xor(self, a, b):
        return xor(a, b)

    def and_(self, a, c):
        return band(a, c)

    def shr(self, a, c):
        return shr(a, c)

    def shl(self, a, c):
        return shl(a, c)


OPS = Z3Ops()

