"""The PTX instruction emitter and its integer algebra.

`Emitter` implements the `LayoutOps` protocol of `argus_verify.layout` (const / add / mul /
floordiv / mod / xor / and_ / shr / shl), so `Layout.apply`, `Swizzle.apply`, `TVLayout.coords`
and `ir.layout_offset` produce PTX when handed an emitter instead of `IntOps`. Index arithmetic
therefore comes from the layouts themselves; nothing here knows about any particular layout.

Values are kept symbolic as long as possible:

* a Python `int` is a compile-time constant;
* an `Aff` is an affine form `sum(coeff * reg) + const` over 32-bit integer registers. Adding and
  multiplying by constants emit nothing. `floordiv` / `mod` by a constant split the form into the
  part divisible by the constant and a remainder, and use the registers' known ranges to prove
  the remainder small, so `(4 * tx + 256 * ty + 64 * i + j) % 64` becomes `4 * tx + j` with no
  instruction at all. Only what cannot be proved is *materialised* into instructions.

Every instruction that materialises a value is pure (integer arithmetic, comparisons, selects,
64-bit address arithmetic), so the emitter may:

* common-subexpression-eliminate it (a cache keyed by opcode and operands, scoped to the region of
  straight-line code where the result is available), and
* hoist it out of loops: an instruction is emitted at the loop depth of its deepest operand, i.e.
  in the preheader of the outermost loop it does not depend on. Per-thread index bases are thus
  computed once, outside every loop, and constant per-value offsets become immediates.

Registers that a program variable keeps across loop iterations or branches are *fixed*: they are
written with `mov` (`assign`), which invalidates cached expressions that read them, and their
level is raised to the loop that writes them so nothing depending on them is hoisted.

`Emitter.evaluate` runs the recorded definitions on Python integers (32-bit wrap-around), so the
tests can check the generated address arithmetic against the interpreter's numpy computation.
"""

from __future__ import annotations

import math
import struct
from collections import defaultdict
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np

from argus_verify.diagnostics import ArgusError, Span

__all__ = ["Aff", "Emitter", "LoweringError", "Reg", "f32_imm", "f64_imm", "mov_type"]


class LoweringError(ArgusError):
    """The IR uses something the PTX lowering cannot (yet) translate."""

    def __init__(self, message: str, span: Span | None = None, note: str | None = None):
        super().__init__(message, span, note)


# register kinds -> PTX declaration type and name prefix
REG_KINDS = {
    "pred": (".pred", "%p"),
    "b16": (".b16", "%h"),
    "b32": (".b32", "%r"),
    "b64": (".b64", "%rd"),
    "f32": (".f32", "%f"),
    "f64": (".f64", "%fd"),
}


class Reg:
    """A virtual PTX register. Identity is the object; `id` orders registers by creation."""

    __slots__ = ("id", "kind", "name")

    def __init__(self, id: int, kind: str, name: str):
        self.id, self.kind, self.name = id, kind, name

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


@attrs.frozen
class Aff:
    """`sum(c * r for r, c in terms) + const` over b32 registers; terms sorted by register id."""

    terms: tuple
    const: int = 0

    def nonconst(self) -> Aff:
        return Aff(self.terms, 0)


Value = int | Aff | Reg


@attrs.define
class RegInfo:
    level: int
    lo: int | None = None  # inclusive bounds, None: unknown
    hi: int | None = None
    mult: int = 1  # the value is a multiple of this
    defn: tuple | None = None  # (opcode, operands) for pure instructions, ("in", name) for inputs
    fixed: bool = False


@attrs.define
class Region:
    """A stretch of straight-line code at one loop depth; cached values die with it."""

    level: int
    keys: list = attrs.field(factory=list)


def f32_imm(x: float) -> str:
    return f"0f{struct.unpack('>I', struct.pack('>f', float(x)))[0]:08X}"


def f64_imm(x: float) -> str:
    return f"0d{struct.unpack('>Q', struct.pack('>d', float(x)))[0]:016X}"


def _wrap32(x: int) -> int:
    return ((int(x) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _v2(m: int) -> int:
    """Trailing zero bits of m (m > 0); 64 for m == 0 (the value is 0)."""
    if m == 0:
        return 64
    return (m & -m).bit_length() - 1


def _is_pow2(c: int) -> bool:
    return c > 0 and c & (c - 1) == 0


def _mulb(x: int | None, c: int) -> int | None:
    return None if x is None else x * c


def _fmt(x: Any) -> str:
    if isinstance(x, Reg):
        return x.name
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return str(x)


_SETP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class Emitter:
    """Emits PTX instructions into loop-level buffers; see the module docstring."""

    def __init__(self) -> None:
        self.count: dict[str, int] = defaultdict(int)
        self.info: dict[Reg, RegInfo] = {}
        self.prologue: list[str] = []
        self.buffers: list[list[str]] = [[]]
        self.regions: list[Region] = [Region(0)]
        self.cse: dict[tuple, Reg] = {}
        self.key_reg_index: dict[Reg, set] = defaultdict(set)
        self.nlabels = 0
        self.indent = "    "

    # -- registers and raw emission ----------------------------------------------------------
    @property
    def level(self) -> int:
        return len(self.buffers) - 1

    def reg(self, kind: str, level: int | None = None, lo=None, hi=None, mult: int = 1,
            defn: tuple | None = None, fixed: bool = False) -> Reg:
        self.count[kind] += 1
        r = Reg(sum(self.count.values()), kind, f"{REG_KINDS[kind][1]}{self.count[kind]}")
        self.info[r] = RegInfo(self.level if level is None else level, lo, hi, mult, defn, fixed)
        return r

    def input(self, kind: str, name: str, line: str, lo=None, hi=None, mult: int = 1) -> Reg:
        """A register defined once in the prologue (a special register or a parameter)."""
        key = ("in", name)
        if key in self.cse:
            return self.cse[key]
        r = self.reg(kind, level=0, lo=lo, hi=hi, mult=mult, defn=("in", name))
        self.prologue.append(self.indent + line.format(d=r.name))
        self.cse[key] = r  # never scoped: the prologue dominates everything
        return r

    def emit(self, line: str) -> None:
        self.buffers[-1].append(self.indent + line)

    def comment(self, text: str) -> None:
        self.buffers[-1].append(self.indent + "// " + text)

    def label(self, hint: str = "L") -> str:
        self.nlabels += 1
        return f"$L_{hint}_{self.nlabels}"

    def place_label(self, name: str) -> None:
        self.buffers[-1].append(f"{name}:")

    def declarations(self) -> list[str]:
        out = []
        for kind, (ty, prefix) in REG_KINDS.items():
            n = self.count.get(kind, 0)
            if n:
                out.append(f"{self.indent}.reg {ty} {prefix}<{n + 1}>;")
        return out

    # -- regions, loops, fixed registers ---------------------------------------------------------
    def push_region(self) -> None:
        self.regions.append(Region(self.level))

    def pop_region(self) -> None:
        region = self.regions.pop()
        for key in region.keys:
            self._drop(key)

    def push_loop(self) -> None:
        self.buffers.append([])
        self.regions.append(Region(self.level))

    def pop_loop(self) -> list[str]:
        self.pop_region()
        return self.buffers.pop()

    @contextmanager
    def only_if(self, pred, hint: str):
        """What is emitted inside runs only where `pred` holds: a branch around it, unless `pred`
        is True (a False `pred` is the caller's to skip)."""
        if pred is True:
            yield
            return
        skip = self.label(hint)
        self.emit(f"@!{pred} bra {skip};")
        self.push_region()
        yield
        self.pop_region()
        self.place_label(skip)

    def either(self, pred, then, otherwise) -> None:
        """`then()` where `pred` holds, `otherwise()` elsewhere; one of them only when `pred` is
        constant."""
        if pred is True:
            then()
            return
        if pred is False:
            otherwise()
            return
        slow, done = self.label("scalar"), self.label("joined")
        self.emit(f"@!{pred} bra {slow};")
        self.push_region()
        then()
        self.pop_region()
        self.emit(f"bra {done};")
        self.place_label(slow)
        self.push_region()
        otherwise()
        self.pop_region()
        self.place_label(done)

    def _drop(self, key) -> None:
        r = self.cse.pop(key, None)
        if r is not None:
            for x in _regs_in(key):
                self.key_reg_index[x].discard(key)

    def _put(self, key, r: Reg) -> None:
        level = self.info[r].level
        for region in reversed(self.regions):
            if region.level <= level:
                break
        self.cse[key] = r
        region.keys.append(key)
        for x in _regs_in(key):
            self.key_reg_index[x].add(key)

    def invalidate(self, r: Reg) -> None:
        """Forget every cached expression that reads `r` (it is about to change)."""
        for key in list(self.key_reg_index.get(r, ())):
            self._drop(key)

    def fixed(self, kind: str) -> Reg:
        """A register for a program variable that is written more than once."""
        return self.reg(kind, fixed=True)

    def set_level(self, r: Reg, level: int) -> None:
        self.info[r].level = level

    def assign(self, dst: Reg, src: Value | str) -> None:
        """`mov` into a fixed register (not cached, not hoisted)."""
        self.invalidate(dst)
        if isinstance(src, str):
            self.emit(f"mov{mov_type(dst.kind)} {dst}, {src};")
            return
        if dst.kind == "b32":
            src = self.mat(src)
        if src is dst:
            return
        self.emit(f"mov{mov_type(dst.kind)} {dst}, {_fmt(src)};")

    # -- pure instructions -----------------------------------------------------------------------
    def pure(self, kind: str, opcode: str, args: list, lo=None, hi=None, mult: int = 1) -> Reg:
        key = (opcode, *args)
        hit = self.cse.get(key)
        if hit is not None:
            return hit
        level = max((self.info[a].level for a in args if isinstance(a, Reg)), default=0)
        d = self.reg(kind, level=level, lo=lo, hi=hi, mult=mult, defn=(opcode, tuple(args)))
        if opcode.startswith("selp"):
            text = f"{opcode} {d}, {_fmt(args[0])}, {_fmt(args[1])}, {_fmt(args[2])};"
        else:
            text = f"{opcode} {d}, {', '.join(_fmt(a) for a in args)};"
        self.buffers[level].append(self.indent + text)
        self._put(key, d)
        return d

    # -- the affine algebra --------------------------------------------------------------------
    @staticmethod
    def aff(x: Value) -> Aff:
        if isinstance(x, Aff):
            return x
        if isinstance(x, Reg):
            return Aff(((x, 1),), 0)
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return Aff((), int(x))
        if isinstance(x, bool):
            return Aff((), int(x))
        raise TypeError(f"not an integer value: {x!r}")

    @staticmethod
    def _out(terms: dict, const: int) -> Value:
        items = tuple(sorted(((r, c) for r, c in terms.items() if c != 0), key=lambda rc: rc[0].id))
        if not items:
            return int(const)
        return Aff(items, int(const))

    def const(self, c: int) -> int:
        return int(c)

    def add(self, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        A, B = self.aff(a), self.aff(b)
        terms = dict(A.terms)
        for r, c in B.terms:
            terms[r] = terms.get(r, 0) + c
        return self._out(terms, A.const + B.const)

    def sub(self, a: Value, b: Value) -> Value:
        return self.add(a, self.mul(b, -1))

    def mul(self, a: Value, c: int) -> Value:
        c = int(c)
        if isinstance(a, int):
            return a * c
        if c == 0:
            return 0
        A = self.aff(a)
        return self._out({r: k * c for r, k in A.terms}, A.const * c)

    def bounds(self, a: Value) -> tuple[int | None, int | None]:
        if isinstance(a, int):
            return a, a
        A = self.aff(a)
        lo = hi = A.const
        for r, c in A.terms:
            inf = self.info[r]
            if c > 0:
                tl, th = _mulb(inf.lo, c), _mulb(inf.hi, c)
            else:
                tl, th = _mulb(inf.hi, c), _mulb(inf.lo, c)
            lo = None if lo is None or tl is None else lo + tl
            hi = None if hi is None or th is None else hi + th
        return lo, hi

    def multiple(self, a: Value) -> int:
        """A known divisor of `a` (0 when `a` is the constant 0)."""
        if isinstance(a, int):
            return abs(a)
        A = self.aff(a)
        g = abs(A.const)
        for r, c in A.terms:
            g = math.gcd(g, abs(c) * self.info[r].mult)
        return g

    def _split(self, a: Value, c: int) -> tuple[Value, Value]:
        """a = c * E + R with every coefficient of R (and its constant) in [0, c)."""
        A = self.aff(a)
        q0, r0 = divmod(A.const, c)
        qs, rs = {}, {}
        for r, k in A.terms:
            q, m = divmod(k, c)
            if q:
                qs[r] = q
            if m:
                rs[r] = m
        return self._out(qs, q0), self._out(rs, r0)

    def _small(self, R: Value, c: int) -> bool:
        lo, hi = self.bounds(R)
        return lo is not None and hi is not None and lo >= 0 and hi < c

    def _reduce(self, a: Value, c: int):
        """a = c * E + g * Rg + s where 0 <= s < g, g | c, and Rg's coefficients are small.

        Returns (E, Rg, cg = c / g, g, s, small) with `small` true when 0 <= Rg < cg is proved;
        then a // c == E and a % c == g * Rg + s with no instruction.
        """
        E, R = self._split(a, c)
        if isinstance(R, int):
            return E, 0, c, 1, R, True
        P = self.aff(R).nonconst()
        r0 = self.aff(R).const
        g = math.gcd(c, self._coef_gcd(P))
        q, s = divmod(r0, g)
        Rg = self.add(self._divexact(P, g), q)
        cg = c // g
        return E, Rg, cg, g, s, self._small(Rg, cg)

    def floordiv(self, a: Value, c: int) -> Value:
        c = int(c)
        if c < 0:  # floor(a / c) = floor(-a / -c)
            return self.floordiv(self.mul(a, -1), -c)
        if c == 0:
            raise LoweringError("division by the constant 0")
        if c == 1:
            return a
        if isinstance(a, int):
            return a // c
        E, Rg, cg, g, s, small = self._reduce(a, c)
        if small:
            return E
        lo, hi = self.bounds(Rg)
        qlo = None if lo is None else lo // cg
        qhi = None if hi is None else hi // cg
        if _is_pow2(cg):
            t = self.pure("b32", "shr.s32", [self.mat(Rg), cg.bit_length() - 1], lo=qlo, hi=qhi)
        elif lo is not None and lo >= 0:
            t = self.pure("b32", "div.s32", [self.mat(Rg), cg], lo=qlo, hi=qhi)
        else:  # the remainder may be negative: divide the whole (non-negative) value instead
            alo, ahi = self.bounds(a)
            return self.pure("b32", "div.s32", [self.mat(a), c], lo=None if alo is None else alo // c,
                             hi=None if ahi is None else ahi // c)
        return self.add(E, t)

    def mod(self, a: Value, c: int) -> Value:
        c = int(c)
        if c < 0:  # a % c = a - c * floor(a / c) = -((-a) % -c), in (c, 0]
            return self.mul(self.mod(self.mul(a, -1), -c), -1)
        if c == 0:
            raise LoweringError("modulo by the constant 0")
        if c == 1:
            return 0
        if isinstance(a, int):
            return a % c
        _, Rg, cg, g, s, small = self._reduce(a, c)
        if small:
            return self.add(self.mul(Rg, g), s)
        lo, _ = self.bounds(Rg)
        if _is_pow2(cg):
            t = self.pure("b32", "and.b32", [self.mat(Rg), cg - 1], lo=0, hi=cg - 1)
        elif lo is not None and lo >= 0:
            t = self.pure("b32", "rem.s32", [self.mat(Rg), cg], lo=0, hi=cg - 1)
        else:
            return self.pure("b32", "rem.s32", [self.mat(a), c], lo=0, hi=c - 1)
        return self.add(self.mul(t, g), s)

    def _coef_gcd(self, a: Value) -> int:
        """gcd of the constant and the coefficients (not the registers' own multiples)."""
        if isinstance(a, int):
            return abs(a)
        A = self.aff(a)
        g = abs(A.const)
        for _, c in A.terms:
            g = math.gcd(g, abs(c))
        return g

    def _divexact(self, a: Value, g: int) -> Value:
        """a / g where g divides the constant and every coefficient."""
        if g == 1:
            return a
        if isinstance(a, int):
            return a // g
        A = self.aff(a)
        return self._out({r: k // g for r, k in A.terms}, A.const // g)

    def shr(self, a: Value, c: int) -> Value:
        return self.floordiv(a, 1 << int(c))

    def shl(self, a: Value, c: int) -> Value:
        return self.mul(a, 1 << int(c))

    def and_(self, a: Value, c: int) -> Value:
        c = int(c)
        if isinstance(a, int):
            return a & c
        if c == 0:
            return 0
        if c > 0 and c & (c + 1) == 0:  # low mask 2^k - 1: a mod 2^k (exact in two's complement)
            return self.mod(a, c + 1)
        if c > 0:
            s = _v2(c)
            m = c >> s
            if m & (m + 1) == 0:  # contiguous bit field m << s
                return self.mul(self.mod(self.floordiv(a, 1 << s), m + 1), 1 << s)
        lo, hi = self.bounds(a)
        return self.pure("b32", "and.b32", [self.mat(a), c], lo=0 if c >= 0 else None,
                         hi=c if c >= 0 else None)

    def or_(self, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return a | b
        x, y = sorted((self.mat(a), self.mat(b)), key=lambda r: r.id)
        return self.pure("b32", "or.b32", [x, y])

    def _clean_split(self, a: Value, p: int):
        """a = p * E + R with 0 <= R < p provable, or None."""
        E, R = self._split(a, p)
        if isinstance(R, int) or self._small(R, p):
            return E, R
        return None

    def xor(self, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return a ^ b
        if isinstance(a, int) and a == 0:
            return b
        if isinstance(b, int) and b == 0:
            return a
        # Only the bits where the narrower operand can be non-zero need an xor instruction: split the
        # wider one into high / middle / low bit fields (exact: power-of-two floordiv and mod).
        for X, Y in ((a, b), (b, a)):
            lo, hi = self.bounds(Y)
            if lo is None or hi is None or lo < 0:
                continue
            if hi == 0:
                return X
            split = None
            for hb in range(hi.bit_length(), 31):
                split = self._clean_split(X, 1 << hb)
                if split is not None:
                    break
            if split is None:
                continue
            E, R = split
            lb = min(_v2(self.multiple(Y)), hb)
            while lb > 0:
                s2 = self._clean_split(R, 1 << lb)
                ys = self._clean_split(Y, 1 << lb)
                if s2 is not None and ys is not None and ys[1] == 0:
                    M, L = s2
                    Ym = ys[0]
                    break
                lb -= 1
            if lb == 0:
                M, L, Ym = R, 0, Y
            mid = self._xor_fields(M, Ym)
            return self.add(self.mul(E, 1 << hb), self.add(self.mul(mid, 1 << lb), L))
        return self._xor_fields(a, b)

    def _peel(self, a: Value) -> tuple[Value, int]:
        """a = P ^ k with k a constant whose bits lie above P's range (so P + k == P ^ k)."""
        if isinstance(a, int):
            return 0, a
        A = self.aff(a)
        P = A.nonconst()
        k = A.const
        lo, hi = self.bounds(P)
        if k >= 0 and lo is not None and hi is not None and lo >= 0 and k % (1 << hi.bit_length()) == 0:
            return P, k
        return A, 0

    def _xor_fields(self, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return a ^ b
        pa, ka = self._peel(a)
        pb, kb = self._peel(b)
        k = ka ^ kb
        if isinstance(pa, int) and isinstance(pb, int):
            return (pa ^ pb) ^ k
        lo_a, hi_a = self.bounds(pa)
        lo_b, hi_b = self.bounds(pb)
        width = None
        if None not in (lo_a, hi_a, lo_b, hi_b) and lo_a >= 0 and lo_b >= 0:
            width = max(hi_a, hi_b, k if k >= 0 else 0).bit_length()
        mult = 1 << min(_v2(self.multiple(pa)), _v2(self.multiple(pb)), 31)
        if isinstance(pa, int) or isinstance(pb, int):
            reg, c = (self.mat(pb), pa) if isinstance(pa, int) else (self.mat(pa), pb)
            k ^= c
            r = reg
        else:
            x, y = sorted((self.mat(pa), self.mat(pb)), key=lambda q: q.id)
            r = self.pure("b32", "xor.b32", [x, y], lo=0 if width is not None else None,
                          hi=(1 << width) - 1 if width is not None else None, mult=mult)
        if k:
            kmult = 1 << min(_v2(self.info[r].mult), _v2(k))
            r = self.pure("b32", "xor.b32", [r, k], lo=0 if width is not None else None,
                          hi=(1 << width) - 1 if width is not None else None, mult=kmult)
        return r

    def mul_val(self, a: Value, b: Value) -> Value:
        """a * b for two run-time values: (Pa + ca)(Pb + cb) = Pa*Pb + ca*Pb + cb*Pa + ca*cb."""
        if isinstance(a, int):
            return self.mul(b, a)
        if isinstance(b, int):
            return self.mul(a, b)
        A, B = self.aff(a), self.aff(b)
        Pa, Pb = A.nonconst(), B.nonconst()
        la, ha = self.bounds(Pa)
        lb, hb = self.bounds(Pb)
        lo = hi = None
        if None not in (la, ha, lb, hb) and la >= 0 and lb >= 0:
            lo, hi = la * lb, ha * hb
        x, y = sorted((self.mat(Pa), self.mat(Pb)), key=lambda q: q.id)
        prod = self.pure("b32", "mul.lo.s32", [x, y], lo=lo, hi=hi,
                         mult=self.multiple(Pa) * self.multiple(Pb) or 1)
        out = self.add(prod, self.mul(Pb, A.const))
        out = self.add(out, self.mul(Pa, B.const))
        return self.add(out, A.const * B.const)

    def minmax(self, a: Value, b: Value, op: str) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b) if op == "min" else max(a, b)
        la, ha = self.bounds(a)
        lb, hb = self.bounds(b)
        if op == "min":
            if ha is not None and lb is not None and ha <= lb:
                return a
            if hb is not None and la is not None and hb <= la:
                return b
        else:
            if la is not None and hb is not None and la >= hb:
                return a
            if lb is not None and ha is not None and lb >= ha:
                return b
        x, y = sorted((self.mat(a), self.mat(b)), key=lambda q: q.id)
        return self.pure("b32", f"{op}.s32", [x, y])

    # -- the IR's integer operators, one helper per `emit` name of semantics.INT_OPS ---------------
    # Each folds constants and known ranges first; what remains is one instruction with the table's
    # mnemonic (tests/test_lowering_structure.py checks that they agree).
    def int_add(self, a: Value, b: Value) -> Value:
        return self.add(a, b)

    def int_sub(self, a: Value, b: Value) -> Value:
        return self.sub(a, b)

    def int_mul(self, a: Value, b: Value) -> Value:
        return self.mul_val(a, b)

    def int_div(self, a: Value, b: Value) -> Value:
        """a // b, rounded towards minus infinity as the semantics table says. `div.s32` truncates
        towards zero: it agrees where the ranges show a >= 0 and b > 0 (indices, sizes: the usual
        case); elsewhere the quotient of a nonzero remainder whose sign differs from b's is one less."""
        if isinstance(b, int):
            return self.floordiv(a, b)
        q = self.pure("b32", "div.s32", [self.mat(a), self.mat(b)])
        if self._truncation_agrees(a, b):
            return q
        return self.sub(q, self.to_int(self._rounded_up(a, b)))

    def int_rem(self, a: Value, b: Value) -> Value:
        """a % b with the sign of b (`rem.s32` takes a's: corrected as for `int_div`)."""
        if isinstance(b, int):
            return self.mod(a, b)
        r = self.pure("b32", "rem.s32", [self.mat(a), self.mat(b)])
        if self._truncation_agrees(a, b):
            return r
        return self.add(r, self.select(self._rounded_up(a, b), b, 0))

    def _truncation_agrees(self, a: Value, b: Value) -> bool:
        la, _ = self.bounds(a)
        lb, _ = self.bounds(b)
        return la is not None and la >= 0 and lb is not None and lb >= 1

    def _rounded_up(self, a: Value, b: Value) -> Reg | bool:
        """The truncated quotient a / b lies above the floor: the remainder is nonzero and its sign
        differs from b's."""
        r = self.pure("b32", "rem.s32", [self.mat(a), self.mat(b)])
        return self.p_and(self.cmp("ne", r, 0), self.cmp("lt", self.int_xor(r, b), 0))

    def int_cdiv(self, a: Value, b: Value) -> Value:
        if isinstance(b, int):
            return self.floordiv(self.add(a, b - 1), b)
        return self.int_div(self.add(self.sub(a, 1), b), b)

    def int_shl(self, a: Value, b: Value) -> Value:
        return self.shl(a, b) if isinstance(b, int) else self._shift_by_register("shl.b32", a, b)

    def int_shr(self, a: Value, b: Value) -> Value:
        return self.shr(a, b) if isinstance(b, int) else self._shift_by_register("shr.s32", a, b)

    def _shift_by_register(self, opcode: str, a: Value, b: Value) -> Value:
        if isinstance(a, int) and a == 0:
            return 0
        return self.pure("b32", opcode, [self.mat(a), self.mat(b)])

    def int_and(self, a: Value, b: Value) -> Value:
        if isinstance(b, int):
            return self.and_(a, b)
        if isinstance(a, int):
            return self.and_(b, a)
        x, y = sorted((self.mat(a), self.mat(b)), key=lambda q: q.id)
        return self.pure("b32", "and.b32", [x, y])

    def int_or(self, a: Value, b: Value) -> Value:
        return self.or_(a, b)

    def int_xor(self, a: Value, b: Value) -> Value:
        return self.xor(a, b)

    def int_min(self, a: Value, b: Value) -> Value:
        return self.minmax(a, b, "min")

    def int_max(self, a: Value, b: Value) -> Value:
        return self.minmax(a, b, "max")

    # -- materialisation -------------------------------------------------------------------------
    def mat(self, a: Value) -> Reg:
        """A b32 register holding `a` (emits the shortest mad/add chain; cached and hoisted)."""
        if isinstance(a, Reg):
            return a
        if isinstance(a, (int, np.integer)):
            v = int(a)
            return self.pure("b32", "mov.b32", [v], lo=v, hi=v, mult=abs(v) or 1)
        A = a
        if len(A.terms) == 1 and A.terms[0][1] == 1 and A.const == 0:
            return A.terms[0][0]
        key = ("aff", A.terms, A.const)
        hit = self.cse.get(key)
        if hit is not None:
            return hit
        ordered = sorted(A.terms, key=lambda rc: (self.info[rc[0]].level, rc[0].id))
        acc: Reg | None = None
        part: dict = {}
        for r, c in ordered:
            part[r] = c
            P = self._out(part, 0)
            lo, hi = self.bounds(P)
            m = self.multiple(P) or 1
            if acc is None:
                acc = r if c == 1 else self.pure("b32", "mul.lo.s32", [r, c], lo=lo, hi=hi, mult=m)
            elif c == 1:
                x, y = sorted((acc, r), key=lambda q: q.id)
                acc = self.pure("b32", "add.s32", [x, y], lo=lo, hi=hi, mult=m)
            elif c == -1:
                acc = self.pure("b32", "sub.s32", [acc, r], lo=lo, hi=hi, mult=m)
            else:
                acc = self.pure("b32", "mad.lo.s32", [r, c, acc], lo=lo, hi=hi, mult=m)
        if A.const:
            lo, hi = self.bounds(A)
            acc = self.pure("b32", "add.s32", [acc, A.const], lo=lo, hi=hi, mult=self.multiple(A) or 1)
        self._put(key, acc)
        return acc

    def addr64(self, base: Reg, off: Value, scale: int) -> tuple[Reg, int]:
        """64-bit `base + scale * off` as (register, immediate byte offset); a mad.wide per term."""
        A = self.aff(off)
        acc = base
        for r, c in sorted(A.terms, key=lambda rc: (self.info[rc[0]].level, rc[0].id)):
            acc = self.pure("b64", "mad.wide.s32", [r, c * scale, acc])
        return acc, A.const * scale

    def addr32(self, off: Value, scale: int) -> tuple[Reg | None, int]:
        """32-bit `scale * off` as (register or None, immediate)."""
        A = self.aff(self.mul(off, scale))
        if not A.terms:
            return None, A.const
        return self.mat(A.nonconst()), A.const

    # -- predicates ------------------------------------------------------------------------------
    def cmp(self, op: str, a: Value, b: Value) -> Reg | bool:
        """Predicate `a op b` (signed); constant-folded when the ranges decide it."""
        if op in ("gt", "ge"):
            return self.cmp("lt" if op == "gt" else "le", b, a)
        d = self.sub(a, b)
        if op == "le":
            d = self.add(d, -1)
            op = "lt"
        lo, hi = self.bounds(d)
        if op == "lt":
            if hi is not None and hi < 0:
                return True
            if lo is not None and lo >= 0:
                return False
        elif op in ("eq", "ne"):
            if lo is not None and hi is not None and lo == hi:
                return (lo == 0) == (op == "eq")
            if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                return op == "ne"
        D = self.aff(d)
        P = D.nonconst()
        rhs = -D.const
        return self.pure("pred", f"setp.{op}.s32", [self.mat(P), rhs])

    def lt_all(self, pairs: list) -> Reg | bool:
        """AND of `a < b` for (a, b) pairs; pairs that differ only by constants share one setp."""
        best: dict = {}
        for a, b in pairs:
            d = self.aff(self.sub(a, b))
            key = d.terms
            best[key] = max(best.get(key, d.const), d.const)
        out: Reg | bool = True
        for terms, c in best.items():
            out = self.p_and(out, self.cmp("lt", Aff(terms, c) if terms else c, 0))
        return out

    def within(self, coords: list, shape: list) -> Reg | bool:
        """AND of 0 <= c < extent for each coordinate and its extent: a masked access is in bounds on
        both sides (a view may start before the tensor: `x[base - 1 : ...]`). The lower checks fold
        away where the ranges show the coordinate is never negative (the usual case)."""
        return self.lt_all([*zip(coords, shape, strict=True), *((-1, c) for c in coords)])

    def p_and(self, a: Reg | bool, b: Reg | bool) -> Reg | bool:
        if a is False or b is False:
            return False
        if a is True:
            return b
        if b is True:
            return a
        if a is b:
            return a
        x, y = sorted((a, b), key=lambda q: q.id)
        return self.pure("pred", "and.pred", [x, y])

    def p_or(self, a: Reg | bool, b: Reg | bool) -> Reg | bool:
        if a is True or b is True:
            return True
        if a is False:
            return b
        if b is False:
            return a
        if a is b:
            return a
        x, y = sorted((a, b), key=lambda q: q.id)
        return self.pure("pred", "or.pred", [x, y])

    def p_not(self, a: Reg | bool) -> Reg | bool:
        if isinstance(a, bool):
            return not a
        return self.pure("pred", "not.pred", [a])

    def select(self, p: Reg | bool, a: Value, b: Value) -> Value:
        if p is True:
            return a
        if p is False:
            return b
        la, ha = self.bounds(a)
        lb, hb = self.bounds(b)
        lo = None if la is None or lb is None else min(la, lb)
        hi = None if ha is None or hb is None else max(ha, hb)
        x = a if isinstance(a, int) else self.mat(a)
        y = b if isinstance(b, int) else self.mat(b)
        return self.pure("b32", "selp.b32", [x, y, p], lo=lo, hi=hi)

    def to_int(self, p: Reg | bool) -> Value:
        if isinstance(p, bool):
            return int(p)
        return self.pure("b32", "selp.b32", [1, 0, p], lo=0, hi=1)

    def to_pred(self, a: Value | Reg) -> Reg | bool:
        if isinstance(a, Reg) and a.kind == "pred":
            return a
        return self.cmp("ne", a, 0)

    # -- evaluation (tests) ----------------------------------------------------------------------
    def evaluate(self, value: Value | Reg | bool, env: dict, memo: dict | None = None) -> int:
        """Run the recorded definitions of `value` on Python integers; `env` maps input registers
        (or their names, e.g. "%tid.x", "param:N") to values."""
        if memo is None:
            memo = {}
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, Aff):
            return value.const + sum(c * self.evaluate(r, env, memo) for r, c in value.terms)
        r = value
        if r in memo:
            return memo[r]
        if r in env:
            memo[r] = int(env[r])
            return memo[r]
        defn = self.info[r].defn
        if defn is None:
            raise KeyError(f"{r} has no definition (a fixed register?)")
        if defn[0] == "in":
            if defn[1] not in env:
                raise KeyError(f"no value for input {defn[1]}")
            memo[r] = int(env[defn[1]])
            return memo[r]
        op, args = defn
        vals = [self.evaluate(a, env, memo) for a in args]
        memo[r] = _semantics(op, vals)
        return memo[r]


def _regs_in(key):
    """Every register in a (nested) cache key."""
    for x in key:
        if isinstance(x, Reg):
            yield x
        elif isinstance(x, tuple):
            yield from _regs_in(x)


def mov_type(kind: str) -> str:
    """The `mov` type suffix for a register kind."""
    return {"pred": ".pred", "b16": ".b16", "b32": ".b32", "b64": ".b64", "f32": ".f32", "f64": ".f64"}[kind]


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _semantics(op: str, v: list) -> int:
    name = op.split(".")[0]
    if op.startswith("setp."):
        cmp = op.split(".")[1]
        a, b = v
        return int({"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[cmp])
    if op == "and.pred":
        return int(bool(v[0]) and bool(v[1]))
    if op == "or.pred":
        return int(bool(v[0]) or bool(v[1]))
    if op == "not.pred":
        return int(not v[0])
    if op == "mad.wide.s32":
        return _wrap32(v[0]) * _wrap32(v[1]) + v[2]
    if op == "mul.wide.s32":
        return _wrap32(v[0]) * _wrap32(v[1])
    if op == "add.s64":
        return v[0] + v[1]
    fn = {
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "mad": lambda a, b, c: a * b + c,
        "shr": lambda a, b: _wrap32(a) >> b,
        "shl": lambda a, b: a << b,
        "and": lambda a, b: a & b,
        "or": lambda a, b: a | b,
        "xor": lambda a, b: a ^ b,
        "div": _trunc_div,
        "rem": lambda a, b: a - _trunc_div(a, b) * b,
        "min": min,
        "max": max,
        "mov": lambda a: a,
        "selp": lambda a, b, p: a if p else b,
    }[name]
    return _wrap32(fn(*[_wrap32(x) for x in v]))
