"""CuTe-semantics layout algebra.

A *layout* ``shape:stride`` is a function from integers to integers.  Shapes and strides are
``IntTuple``s: an ``int`` or a (possibly nested) tuple of ``IntTuple``s, and a layout's shape and
stride are congruent (same tree).  A flat index ``i`` is turned into a coordinate
*colexicographically* -- the first mode varies fastest -- and the image is the inner product of the
(flattened) coordinate with the (flattened) stride.  The last (outermost) mode is not reduced modulo
its extent, so ``L(i)`` is also defined for ``i >= size(L)`` (CuTe's natural extension); the
composition rules below rely on that.

Operations follow the definitions in CuTe's "Layout Algebra" documentation: ``coalesce``,
``composition`` (with by-mode tilers), ``complement``, ``logical_divide``, ``zipped_divide``,
``logical_product``, ``right_inverse`` and ``left_inverse``.  Swizzles (``Swizzle(B, M, S)``) and
``ComposedLayout`` (swizzle o layout) model XOR-swizzled shared-memory layouts.

``apply(idx, ops)`` evaluates a layout on a *symbolic* index through an ``ops`` object so that the
Z3 verifier, the PTX emitter and the numpy interpreter all share one definition; see
``docs/layout.md``.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Protocol

import attrs
import numpy as np

__all__ = [
    "IntTuple",
    "LayoutError",
    "LayoutOps",
    "IntOps",
    "NumpyOps",
    "Layout",
    "Swizzle",
    "ComposedLayout",
    "is_int",
    "is_tuple",
    "flatten",
    "product",
    "congruent",
    "compatible",
    "rank_of",
    "depth_of",
    "make_layout",
    "row_major",
    "col_major",
    "coalesce",
    "composition",
    "compose",
    "complement",
    "logical_divide",
    "zipped_divide",
    "logical_product",
    "right_inverse",
    "left_inverse",
    "inverse_table",
    "functionally_equal",
]

IntTuple = int | tuple  # an int, or a (nested) tuple of IntTuples


class LayoutError(ValueError):
    """Raised for malformed layouts and for algebra operations that are not defined."""


# --------------------------------------------------------------------------------------------
# IntTuple helpers
# --------------------------------------------------------------------------------------------


def is_int(t: Any) -> bool:
    """True for Python/numpy integers (``bool`` excluded)."""
    return isinstance(t, numbers.Integral) and not isinstance(t, bool)


def is_tuple(t: Any) -> bool:
    return isinstance(t, tuple)


def _normalize(t: Any, what: str = "IntTuple") -> IntTuple:
    """Lists -> tuples and numpy ints -> int, recursively; reject anything else."""
    if is_int(t):
        return int(t)
    if isinstance(t, (tuple, list)):
        return tuple(_normalize(e, what) for e in t)
    raise LayoutError(f"{what} must be an int or a nested tuple of ints, got {t!r}")


def flatten(t: IntTuple) -> tuple[int, ...]:
    """Leaves of ``t`` in order; an int flattens to a 1-tuple."""
    if is_int(t):
        return (int(t),)
    out: list[int] = []
    for e in t:
        out.extend(flatten(e))
    return tuple(out)


def product(t: IntTuple) -> int:
    """Product of all leaves (1 for the empty tuple)."""
    return math.prod(flatten(t))


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree structure (leaf values may differ)."""
    if is_int(a) or is_int(b):
        return is_int(a) and is_int(b)
    return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b, strict=True))


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """CuTe's ``compatible(a, b)``: sizes agree and every coordinate of ``a`` is a coordinate of ``b``.

    An int is compatible with any IntTuple of the same size; two tuples must have equal length and be
    compatible mode by mode.
    """
    if is_int(a):
        return product(a) == product(b)
    if is_int(b):
        return False
    return len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b, strict=True))


def rank_of(t: IntTuple) -> int:
    return 1 if is_int(t) else len(t)


def depth_of(t: IntTuple) -> int:
    if is_int(t):
        return 0
    return 1 + max((depth_of(e) for e in t), default=0)


def _fmt(t: IntTuple) -> str:
    if is_int(t):
        return str(t)
    return "(" + ",".join(_fmt(e) for e in t) + ")"


def _compact_strides(shape: IntTuple, order: str) -> IntTuple:
    """Compact column-major ("col") or row-major ("row") strides for a (nested) shape."""
    leaves = flatten(shape)
    strides = [0] * len(leaves)
    acc = 1
    idx = range(len(leaves)) if order == "col" else range(len(leaves) - 1, -1, -1)
    for i in idx:
        strides[i] = acc
        acc *= leaves[i]
    it = iter(strides)

    def rebuild(s: IntTuple) -> IntTuple:
        if is_int(s):
            return next(it)
        return tuple(rebuild(e) for e in s)

    return rebuild(shape)


_TOKEN = re.compile(r"\s*(?:([(),])|_?(-?\d+))")


def _parse_int_tuple(text: str) -> IntTuple:
    """Parse ``"((2,2),3)"``-style text (CuTe's ``_`` prefix on static ints is accepted)."""
    tokens: list[str | int] = []
    pos = 0
    text_r = text.rstrip()
    while pos < len(text_r):
        m = _TOKEN.match(text_r, pos)
        if not m:
            raise LayoutError(f"cannot parse IntTuple {text!r} at offset {pos}")
        tokens.append(m.group(1) if m.group(1) else int(m.group(2)))
        pos = m.end()
    i = 0

    def parse() -> IntTuple:
        nonlocal i
        if i >= len(tokens):
            raise LayoutError(f"cannot parse IntTuple {text!r}: unexpected end")
        tok = tokens[i]
        i += 1
        if isinstance(tok, int):
            return tok
        if tok != "(":
            raise LayoutError(f"cannot parse IntTuple {text!r}: unexpected {tok!r}")
        items: list[IntTuple] = []
        if i < len(tokens) and tokens[i] == ")":
            i += 1
            return ()
        while True:
            items.append(parse())
            if i >= len(tokens):
                raise LayoutError(f"cannot parse IntTuple {text!r}: missing ')'")
            tok = tokens[i]
            i += 1
            if tok == ")":
                return tuple(items)
            if tok != ",":
                raise LayoutError(f"cannot parse IntTuple {text!r}: expected ',' or ')'")

    result = parse()
    if i != len(tokens):
        raise LayoutError(f"trailing text in IntTuple {text!r}")
    return result


# --------------------------------------------------------------------------------------------
# The ops protocol for symbolic evaluation
# --------------------------------------------------------------------------------------------


class LayoutOps(Protocol):
    """Arithmetic used by ``Layout.apply`` / ``Swizzle.apply``.  Values are opaque to the layout code."""

    def const(self, c: int) -> Any: ...
    def add(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, c: int) -> Any: ...
    def floordiv(self, a: Any, c: int) -> Any: ...
    def mod(self, a: Any, c: int) -> Any: ...
    def xor(self, a: Any, b: Any) -> Any: ...
    def and_(self, a: Any, c: int) -> Any: ...
    def shr(self, a: Any, c: int) -> Any: ...
    def shl(self, a: Any, c: int) -> Any: ...


class IntOps:
    """``LayoutOps`` over plain Python ints."""

    def const(self, c: int) -> int:
        return int(c)

    def add(self, a: int, b: int) -> int:
        return a + b

    def mul(self, a: int, c: int) -> int:
        return a * c

    def floordiv(self, a: int, c: int) -> int:
        return a // c

    def mod(self, a: int, c: int) -> int:
        return a % c

    def xor(self, a: int, b: int) -> int:
        return a ^ b

    def and_(self, a: int, c: int) -> int:
        return a & c

    def shr(self, a: int, c: int) -> int:
        return a >> c

    def shl(self, a: int, c: int) -> int:
        return a << c


class NumpyOps:
    """``LayoutOps`` over numpy integer arrays (elementwise, int64)."""

    def const(self, c: int) -> np.ndarray:
        return np.int64(c)

    def add(self, a, b):
        return np.add(a, b)

    def mul(self, a, c: int):
        return np.multiply(a, np.int64(c))

    def floordiv(self, a, c: int):
        return np.floor_divide(a, np.int64(c))

    def mod(self, a, c: int):
        return np.mod(a, np.int64(c))

    def xor(self, a, b):
        return np.bitwise_xor(a, b)

    def and_(self, a, c: int):
        return np.bitwise_and(a, np.int64(c))

    def shr(self, a, c: int):
        return np.right_shift(a, np.int64(c))

    def shl(self, a, c: int):
        return np.left_shift(a, np.int64(c))


# --------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------


def _norm_shape(t: Any) -> IntTuple:
    return _normalize(t, "shape")


def _norm_stride(t: Any) -> IntTuple | None:
    return None if t is None else _normalize(t, "stride")


@attrs.frozen(repr=False)
class Layout:
    """``shape:stride``.  ``stride=None`` means compact column-major strides."""

    shape: IntTuple = attrs.field(converter=_norm_shape)
    stride: IntTuple = attrs.field(default=None, converter=_norm_stride)

    def __attrs_post_init__(self) -> None:
        if self.stride is None:
            object.__setattr__(self, "stride", _compact_strides(self.shape, "col"))
        if not congruent(self.shape, self.stride):
            raise LayoutError(
                f"shape {_fmt(self.shape)} and stride {_fmt(self.stride)} are not congruent "
                "(they must have the same nesting structure)"
            )
        bad = [s for s in flatten(self.shape) if s < 1]
        if bad:
            raise LayoutError(f"shape {_fmt(self.shape)} has non-positive extents {bad}")

    # ---- construction helpers -----------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Layout:
        """Parse CuTe notation such as ``"((2,2),3):((24,2),8)"`` (``_`` static prefixes allowed)."""
        parts = text.split(":")
        if len(parts) != 2:
            raise LayoutError(f"layout text must look like 'shape:stride', got {text!r}")
        return cls(_parse_int_tuple(parts[0]), _parse_int_tuple(parts[1]))

    # ---- basic properties ---------------------------------------------------------------
    @property
    def size(self) -> int:
        return product(self.shape)

    @property
    def cosize(self) -> int:
        """One past the largest image over ``[0, size)`` (so ``cosize(s:0) == 1``)."""
        return 1 + sum(max(0, (s - 1) * d) for s, d in self.flat_modes())

    @property
    def rank(self) -> int:
        return rank_of(self.shape)

    @property
    def depth(self) -> int:
        return depth_of(self.shape)

    def mode(self, i: int) -> Layout:
        """Top-level mode ``i`` as a layout (an int-shaped layout is its own mode 0)."""
        if is_int(self.shape):
            if i not in (0, -1):
                raise LayoutError(f"mode {i} out of range for rank-1 layout {self}")
            return self
        try:
            return Layout(self.shape[i], self.stride[i])
        except IndexError:
            raise LayoutError(f"mode {i} out of range for rank-{self.rank} layout {self}") from None

    def modes(self) -> tuple[Layout, ...]:
        return tuple(self.mode(i) for i in range(self.rank))

    def flat_modes(self) -> list[tuple[int, int]]:
        return list(zip(flatten(self.shape), flatten(self.stride), strict=True))

    def flattened(self) -> Layout:
        s, d = flatten(self.shape), flatten(self.stride)
        if len(s) == 1:
            return Layout(s[0], d[0])
        return Layout(s, d)

    # ---- evaluation ---------------------------------------------------------------------
    def __call__(self, x: Any) -> int:
        if is_int(x):
            x = int(x)
            if x < 0:
                raise LayoutError(f"negative index {x} for layout {self}")
            return _idx_to_image(x, self.shape, self.stride)
        if isinstance(x, (tuple, list)):
            return _crd_to_image(_normalize(x, "coordinate"), self.shape, self.stride, top=True)
        raise LayoutError(f"layout index must be an int or a coordinate tuple, got {x!r}")

    def apply(self, idx: Any, ops: LayoutOps, bounded: bool = True) -> Any:
        """Evaluate on a symbolic flat index through ``ops``.

        ``bounded=True``: the caller promises ``0 <= idx < size``; the outermost mode is not reduced
        and the result equals ``self(idx)``.  ``bounded=False``: every mode is reduced, so the result
        is ``self(idx % size)`` for any ``idx >= 0``.
        Works on the coalesced form, skipping stride-0 modes, ``* 1``, ``// 1``.
        """
        modes = _coalesced_modes(self.flat_modes(), keep_tail=False)
        terms = []
        div = 1
        n = len(modes)
        for k, (s, d) in enumerate(modes):
            if d != 0:
                c = idx if div == 1 else ops.floordiv(idx, div)
                if not (bounded and k == n - 1):
                    c = ops.mod(c, s)
                if d != 1:
                    c = ops.mul(c, d)
                terms.append(c)
            div *= s
        if not terms:
            return ops.const(0)
        acc = terms[0]
        for t in terms[1:]:
            acc = ops.add(acc, t)
        return acc

    def map_all(self) -> np.ndarray:
        """``np.array([self(i) for i in range(size)], dtype=int64)``, vectorised."""
        acc = np.zeros(1, dtype=np.int64)
        for s, d in _coalesced_modes(self.flat_modes(), keep_tail=False):
            acc = np.add.outer(np.arange(s, dtype=np.int64) * d, acc).ravel()
        return acc

    # ---- printing -----------------------------------------------------------------------
    def __str__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"

    def __repr__(self) -> str:
        return f"Layout({str(self)!r})"


def _idx_to_image(x: int, shape: IntTuple, stride: IntTuple) -> int:
    """Colexicographic flat index -> image; the last leaf is not reduced (natural extension)."""
    leaves_s, leaves_d = flatten(shape), flatten(stride)
    out = 0
    last = len(leaves_s) - 1
    for k, (s, d) in enumerate(zip(leaves_s, leaves_d, strict=True)):
        if k == last:
            out += x * d
        else:
            out += (x % s) * d
            x //= s
    return out


def _crd_to_image(c: IntTuple, shape: IntTuple, stride: IntTuple, top: bool) -> int:
    if is_int(c):
        if c < 0 or (not top and c >= product(shape)):
            raise LayoutError(f"coordinate {c} out of range for mode of shape {_fmt(shape)}")
        return _idx_to_image(c, shape, stride)
    if is_int(shape) or len(c) != len(shape):
        raise LayoutError(f"coordinate {_fmt(c)} is not compatible with shape {_fmt(shape)}")
    return sum(_crd_to_image(ci, si, di, False) for ci, si, di in zip(c, shape, stride, strict=True))


def _coalesced_modes(modes: list[tuple[int, int]], keep_tail: bool) -> list[tuple[int, int]]:
    """Merge adjacent flat modes ``s0:d0 ++ s1:s0*d0 -> s0*s1:d0`` and drop size-1 modes.

    With ``keep_tail`` a trailing size-1 mode is kept (or merged), so that the result also agrees
    with the input beyond ``size`` (the natural extension of the last mode).
    """
    out: list[tuple[int, int]] = []
    n = len(modes)
    for k, (s, d) in enumerate(modes):
        if s == 1 and not (keep_tail and k == n - 1):
            continue
        if out and d == out[-1][0] * out[-1][1]:
            ps, pd = out[-1]
            out[-1] = (ps * s, pd)
        else:
            out.append((s, d))
    return out


def _from_modes(modes: list[tuple[int, int]]) -> Layout:
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(modes[0][0], modes[0][1])
    return Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes))


# --------------------------------------------------------------------------------------------
# Constructors
# --------------------------------------------------------------------------------------------


def make_layout(*layouts: Layout) -> Layout:
    """Concatenate layouts as the top-level modes of a new layout: ``(L0, L1, ...)``."""
    for lay in layouts:
        if not isinstance(lay, Layout):
            raise LayoutError(f"make_layout expects Layouts, got {lay!r}")
    return Layout(tuple(lay.shape for lay in layouts), tuple(lay.stride for lay in layouts))


def row_major(shape: IntTuple) -> Layout:
    """Compact layout with the *last* leaf fastest: ``row_major((4,8)) == (4,8):(8,1)``."""
    shape = _norm_shape(shape)
    return Layout(shape, _compact_strides(shape, "row"))


def col_major(shape: IntTuple) -> Layout:
    """Compact layout with the *first* leaf fastest (CuTe's default): ``(4,8):(1,4)``."""
    shape = _norm_shape(shape)
    return Layout(shape, _compact_strides(shape, "col"))


# --------------------------------------------------------------------------------------------
# Coalesce
# --------------------------------------------------------------------------------------------


def coalesce(layout: Layout, profile: IntTuple | None = None) -> Layout:
    """Simplify ``layout`` without changing it as a function on ``[0, size)``.

    Without ``profile`` the result has depth <= 1.  With a ``profile`` IntTuple, coalescing is
    applied by mode: wherever the profile has an int leaf the corresponding sub-layout is coalesced
    (CuTe's ``coalesce(layout, trg_profile)``), so the top-level structure is preserved.
    """
    if profile is None or is_int(profile):
        return _from_modes(_coalesced_modes(layout.flat_modes(), keep_tail=False))
    profile = _normalize(profile, "profile")
    if is_int(layout.shape) or len(profile) > layout.rank:
        raise LayoutError(f"coalesce profile {_fmt(profile)} has more modes than layout {layout}")
    subs = [coalesce(layout.mode(i), p) for i, p in enumerate(profile)]
    subs += list(layout.modes()[len(profile) :])
    return make_layout(*subs)


# --------------------------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------------------------


def _compose_leaf(a_modes: list[tuple[int, int]], s: int, d: int, a_text: str, reach: list[int]) -> Layout:
    """``A o s:d`` for A given by coalesced flat modes (A's last mode is treated as unbounded).

    ``reach[m]`` is increased by the largest coordinate of A's mode ``m`` that ``i*d`` (``i < s``)
    produces, so that the caller can check that the leaves of B add up without carries.
    """
    if d < 0:
        raise LayoutError(f"composition {a_text} o {s}:{d} is not defined: negative right-hand stride")
    if s == 1:
        return Layout(1, 0)
    if d == 0 or not a_modes:  # A(0) == 0, and an empty A is the constant 0 function
        return Layout(s, 0)
    n = len(a_modes)
    # 1. "Divide out" the stride d from the front of A's shape: every d-th element of A.
    #    Entries (extent | None for the unbounded last mode, stride, A-mode index, coordinate unit).
    rest = d
    strided: list[tuple[int | None, int, int, int]] = []
    for k, (a, w) in enumerate(a_modes):
        if k == n - 1:
            strided.append((None, w * rest, k, rest))
            break
        if rest == 1 or a % rest == 0:
            strided.append((a // rest, w * rest, k, rest))
            strided.extend((am, wm, m, 1) for m, (am, wm) in enumerate(a_modes[k + 1 : -1], start=k + 1))
            strided.append((None, a_modes[-1][1], n - 1, 1))
            break
        if rest % a == 0:
            rest //= a
            continue
        if (s - 1) * rest < a:  # all s images land inside this mode, no wrap-around: s:(w*rest)
            reach[k] += (s - 1) * rest
            return Layout(s, w * rest)
        raise LayoutError(
            f"composition {a_text} o {s}:{d} is not defined: stride divisibility fails "
            f"(remaining stride {rest} neither divides nor is a multiple of extent {a} of the left operand)"
        )
    # 2. "Mod out" s: keep the first s elements of the strided layout.
    rest_s = s
    out: list[tuple[int, int]] = []
    for b, v, m, unit in strided:
        if rest_s == 1:
            break
        if b is None or rest_s <= b:
            out.append((rest_s, v))
            reach[m] += (rest_s - 1) * unit
            rest_s = 1
            break
        if rest_s % b != 0:
            raise LayoutError(
                f"composition {a_text} o {s}:{d} is not defined: shape divisibility fails "
                f"(remaining extent {rest_s} is not a multiple of extent {b} of the strided left operand)"
            )
        out.append((b, v))
        reach[m] += (b - 1) * unit
        rest_s //= b
    return _from_modes(_coalesced_modes(out, keep_tail=False))


def _compose_tree(a_modes, a_text, b_shape, b_stride, reach):
    """Apply ``_compose_leaf`` at each leaf of B, keeping B's tree; returns (shape, stride)."""
    if is_int(b_shape):
        r = _compose_leaf(a_modes, b_shape, b_stride, a_text, reach)
        return r.shape, r.stride
    parts = [_compose_tree(a_modes, a_text, s, d, reach) for s, d in zip(b_shape, b_stride, strict=True)]
    return tuple(p[0] for p in parts), tuple(p[1] for p in parts)


def _as_tiler(t: Any) -> Any:
    """Normalise a tiler entry: Layout / None stay, int -> s:1, list -> tuple."""
    if isinstance(t, (Layout, ComposedLayout)) or t is None:
        return t
    if is_int(t):
        return Layout(int(t), 1)
    if isinstance(t, (tuple, list)):
        return tuple(t)
    raise LayoutError(f"tiler entries must be Layouts, ints, None or tuples, got {t!r}")


def _by_mode(fn, a: Layout, tiler: tuple, name: str) -> Layout:
    """Apply ``fn(mode_i, tiler_i)`` to each top-level mode (``None`` keeps the mode)."""
    modes = (a,) if is_int(a.shape) else a.modes()
    if len(tiler) > len(modes):
        raise LayoutError(f"{name}: tiler of rank {len(tiler)} exceeds rank {len(modes)} of layout {a}")
    subs = []
    for i, m in enumerate(modes):
        t = tiler[i] if i < len(tiler) else None
        subs.append(m if t is None else fn(m, t))
    return make_layout(*subs)


def composition(a: Layout | ComposedLayout, b: Any) -> Layout | ComposedLayout:
    """``A o B`` with ``R(i) == A(B(i))`` for ``i < size(B)`` and ``compatible(B.shape, R.shape)``.

    ``b`` may be a Layout, an int (``s:1``), or a *tiler*: a tuple whose entries are tilers (or
    ``None`` to keep a mode), applied by mode to ``a``.  Each leaf of B is composed separately
    and coalesced.  Raises ``LayoutError`` when CuTe's stride/shape divisibility conditions fail
    (and the result is therefore not a layout).  A ``ComposedLayout`` on the left keeps its swizzle.
    """
    if isinstance(a, ComposedLayout):
        inner = composition(a.inner, b)
        return ComposedLayout(a.outer, inner)
    if not isinstance(a, Layout):
        raise LayoutError(f"composition: left operand must be a Layout, got {a!r}")
    b = _as_tiler(b)
    if isinstance(b, tuple):
        return _by_mode(composition, a, tuple(_as_tiler(t) for t in b), "composition")
    if isinstance(b, ComposedLayout):
        raise LayoutError("composition: a swizzled layout cannot be the right operand")
    a_modes = _coalesced_modes(a.flat_modes(), keep_tail=True)
    reach = [0] * len(a_modes)
    shape, stride = _compose_tree(a_modes, str(a), b.shape, b.stride, reach)
    # Composing leaf by leaf is exact only if B's leaves never carry between A's modes:
    # A(x + y) == A(x) + A(y) needs the per-mode coordinates of x and y to add up below the extent.
    for m, (am, _) in enumerate(a_modes[:-1]):
        if reach[m] >= am:
            raise LayoutError(
                f"composition {a} o {b} is not defined: the modes of the right operand overlap in "
                f"mode {m} (extent {am}) of coalesced {_from_modes(a_modes)} (coordinates reach "
                f"{reach[m]}), so the result is not a layout (is the right operand injective?)"
            )
    return Layout(shape, stride)


def compose(f: Any, g: Any) -> Layout | ComposedLayout:
    """Generic ``f o g``: Swizzle o Layout -> ComposedLayout, Layout o Layout -> composition, ..."""
    if isinstance(f, Swizzle):
        if isinstance(g, Layout):
            return ComposedLayout(f, g)
        raise LayoutError(f"compose: Swizzle o {type(g).__name__} is not representable")
    if isinstance(f, (Layout, ComposedLayout)):
        if isinstance(g, Swizzle):
            raise LayoutError("compose: Layout o Swizzle is not representable as a layout")
        return composition(f, g)
    raise LayoutError(f"compose: unsupported operands {f!r}, {g!r}")


# --------------------------------------------------------------------------------------------
# Complement, divide, product
# --------------------------------------------------------------------------------------------


def complement(layout: Layout, cotarget: IntTuple | None = None) -> Layout:
    """CuTe's complement: the ordered layout of "the rest" of ``[0, size(cotarget))``.

    Post-conditions: strides of the result are positive and increasing (ordered), its images
    ``R(i), i >= 1`` avoid the images of ``layout``, and ``cosize((layout, R)) >= size(cotarget)``.
    ``cotarget`` defaults to ``cosize(layout)``.  Raises ``LayoutError`` if ``layout`` has negative
    strides or its sorted modes do not satisfy the divisibility condition (e.g. non-injective).
    """
    if cotarget is None:
        target = layout.cosize
    else:
        target = product(_normalize(cotarget, "cotarget"))
    modes = [(s, d) for s, d in layout.flat_modes() if s != 1 and d != 0]
    if any(d < 0 for _, d in modes):
        raise LayoutError(f"complement of {layout}: negative strides are not supported")
    modes.sort(key=lambda m: (m[1], m[0]))
    out: list[tuple[int, int]] = []
    current = 1
    for s, d in modes:
        if d % current != 0:
            raise LayoutError(
                f"complement of {layout} is not defined: stride {d} is not a multiple of {current} "
                "(the layout is not injective or its modes interleave non-divisibly)"
            )
        out.append((d // current, current))
        current = s * d
    out.append((-(-target // current), current))
    return _from_modes(_coalesced_modes(out, keep_tail=False))


def logical_divide(a: Layout | ComposedLayout, tiler: Any) -> Layout | ComposedLayout:
    """``A ⊘ B = A o (B, complement(B, size(A)))``; by mode for tuple tilers."""
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, logical_divide(a.inner, tiler))
    tiler = _as_tiler(tiler)
    if isinstance(tiler, tuple):
        return _by_mode(logical_divide, a, tuple(_as_tiler(t) for t in tiler), "logical_divide")
    return composition(a, make_layout(tiler, complement(tiler, a.size)))


def zipped_divide(a: Layout | ComposedLayout, tiler: Any) -> Layout | ComposedLayout:
    """``((Tile...), (Rest...))``: like ``logical_divide`` but tiles gathered in mode 0."""
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, zipped_divide(a.inner, tiler))
    tiler = _as_tiler(tiler)
    if not isinstance(tiler, tuple):
        return logical_divide(a, tiler)
    tiler = tuple(_as_tiler(t) for t in tiler)
    if any(t is None for t in tiler):
        raise LayoutError("zipped_divide: None (keep-mode) entries are not supported in the tiler")
    d = logical_divide(a, tiler)
    n = len(tiler)
    tiles = [d.mode(i).mode(0) for i in range(n)]
    rests = [d.mode(i).mode(1) for i in range(n)] + list(d.modes()[n:])
    return make_layout(make_layout(*tiles), make_layout(*rests))


def logical_product(a: Layout, b: Any) -> Layout:
    """``A ⊗ B = (A, complement(A, size(A) * cosize(B)) o B)``; by mode for tuple tilers."""
    b = _as_tiler(b)
    if isinstance(b, tuple):
        return _by_mode(logical_product, a, tuple(_as_tiler(t) for t in b), "logical_product")
    return make_layout(a, composition(complement(a, a.size * b.cosize), b))


# --------------------------------------------------------------------------------------------
# Inverses
# --------------------------------------------------------------------------------------------


def right_inverse(layout: Layout) -> Layout:
    """Largest ``R`` (built from the contiguous stride chain 1, s, s*s', ...) with ``L(R(i)) == i``.

    Only modes with positive strides participate; if no mode has stride 1 the result is ``1:0``.
    """
    shapes = flatten(layout.shape)
    strides = flatten(layout.stride)
    weights, acc = [], 1
    for s in shapes:
        weights.append(acc)
        acc *= s
    cand = sorted(
        ((d, s, w) for s, d, w in zip(shapes, strides, weights, strict=True) if s != 1 and d > 0),
    )
    out: list[tuple[int, int]] = []
    current = 1
    for d, s, w in cand:
        if d != current:
            break
        out.append((s, w))
        current *= s
    return _from_modes(_coalesced_modes(out, keep_tail=False))


def left_inverse(layout: Layout) -> Layout:
    """``R`` with ``R(L(i)) == i`` for all ``i < size(L)``; requires ``L`` injective (and 'divisible').

    Computed as ``right_inverse((L, complement(L)))``.
    """
    if any(s != 1 and d == 0 for s, d in layout.flat_modes()):
        raise LayoutError(f"left_inverse of {layout}: layout is not injective (stride-0 mode)")
    try:
        comp = complement(layout)
    except LayoutError as e:
        raise LayoutError(f"left_inverse of {layout} does not exist: {e}") from None
    return right_inverse(make_layout(layout, comp))


def inverse_table(layout: Layout | ComposedLayout) -> np.ndarray:
    """For a bijection onto ``[0, size)``: ``table[layout(i)] == i`` (numpy int64 array)."""
    img = layout.map_all()
    n = img.size
    if n and (img.min() < 0 or img.max() >= n or np.bincount(img, minlength=n).max() != 1):
        raise LayoutError(f"inverse_table: {layout} is not a bijection onto [0, {n})")
    table = np.empty(n, dtype=np.int64)
    table[img] = np.arange(n, dtype=np.int64)
    return table


def functionally_equal(a: Layout | ComposedLayout, b: Layout | ComposedLayout) -> bool:
    """Same size and same images on ``[0, size)``."""
    return a.size == b.size and bool(np.array_equal(a.map_all(), b.map_all()))


# --------------------------------------------------------------------------------------------
# Swizzles
# --------------------------------------------------------------------------------------------


def _strict_int(value: Any) -> int:
    if not is_int(value):
        raise LayoutError(f"Swizzle parameters must be ints, got {value!r}")
    return int(value)


def _nonneg(_inst, attribute, value) -> None:
    if value < 0:
        raise LayoutError(f"Swizzle {attribute.name} must be non-negative, got {value!r}")


@attrs.frozen(repr=False)
class Swizzle:
    """CuTe ``Swizzle<B, M, S>``: XOR the ``B`` bits at ``M + max(S,0)`` into the bits at ``M - min(S,0)``.

    For ``S > 0``: ``x ^ ((x & (((1 << B) - 1) << (M + S))) >> S)``; for ``S < 0`` the mask sits at
    ``M`` and is shifted left by ``-S``.  Requires ``|S| >= B`` so the two bit fields are disjoint,
    which makes the swizzle an involution.
    """

    bits: int = attrs.field(converter=_strict_int, validator=_nonneg)
    base: int = attrs.field(converter=_strict_int, validator=_nonneg)
    shift: int = attrs.field(converter=_strict_int)

    def __attrs_post_init__(self) -> None:
        if abs(self.shift) < self.bits:
            raise LayoutError(f"{self}: |shift| must be >= bits so the bit fields do not overlap")

    @property
    def yyy_mask(self) -> int:
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    @property
    def zzz_mask(self) -> int:
        return ((1 << self.bits) - 1) << (self.base - min(0, self.shift))

    @property
    def period(self) -> int:
        """The swizzle maps every aligned block of this many elements onto itself."""
        return 1 << (self.base + self.bits + abs(self.shift))

    def __call__(self, x: Any) -> Any:
        if self.bits == 0:
            return x
        y = x & self.yyy_mask
        return x ^ (y >> self.shift if self.shift >= 0 else y << -self.shift)

    def apply(self, x: Any, ops: LayoutOps) -> Any:
        if self.bits == 0:
            return x
        y = ops.and_(x, self.yyy_mask)
        y = ops.shr(y, self.shift) if self.shift >= 0 else ops.shl(y, -self.shift)
        return ops.xor(x, y)

    def __str__(self) -> str:
        return f"Swizzle({self.bits},{self.base},{self.shift})"

    def __repr__(self) -> str:
        return str(self)


@attrs.frozen(repr=False)
class ComposedLayout:
    """``outer o inner``: a swizzle applied to the image of a layout."""

    outer: Swizzle = attrs.field()
    inner: Layout = attrs.field()

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.outer, Swizzle) or not isinstance(self.inner, Layout):
            raise LayoutError(
                f"ComposedLayout needs (Swizzle, Layout), got ({type(self.outer).__name__}, "
                f"{type(self.inner).__name__})"
            )

    @property
    def shape(self) -> IntTuple:
        return self.inner.shape

    @property
    def size(self) -> int:
        return self.inner.size

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def cosize(self) -> int:
        """Upper bound on images + 1: the swizzle only permutes bits below ``hi``, so it maps each
        aligned block of ``2**hi`` onto itself; round the inner cosize up to that block."""
        if self.outer.bits == 0:
            return self.inner.cosize
        hi = self.outer.zzz_mask.bit_length()
        block = 1 << hi
        return -(-self.inner.cosize // block) * block

    def __call__(self, x: Any) -> int:
        return self.outer(self.inner(x))

    def apply(self, idx: Any, ops: LayoutOps, bounded: bool = True) -> Any:
        return self.outer.apply(self.inner.apply(idx, ops, bounded=bounded), ops)

    def map_all(self) -> np.ndarray:
        return self.outer(self.inner.map_all())

    def __str__(self) -> str:
        return f"{self.outer} o {self.inner}"

    def __repr__(self) -> str:
        return f"ComposedLayout({str(self)!r})"
