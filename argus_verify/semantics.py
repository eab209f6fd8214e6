"""The one semantics table: what every operator means, in every stage's form.

Each entry states an operator once: its reference meaning on Python ints / numpy arrays (the front
end's constant folding and the interpreter evaluate exactly this), its Z3 form (over the verifier's
term builders in `argus_verify.smt.zops`, passed in as `Z`), and its PTX (a template the lowering
fills in and the PTX simulator reads back). Property tests (tests/test_semantics.py) check that
the forms agree on random operands, so a stage cannot drift from the others.

Adding an elementwise math function (say `tanh`) is one `FloatUnary` entry below and a line in
docs/language.md; the front end accepts it, the interpreter, the verifier, the lowering and the
PTX simulator read it from here.

This module is core: it imports no stage. Stages receive their backends (Z3 builders, the
emitter) as arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import numpy as np

# ---------------------------------------------------------------------------------------------
# integer operators: sizes, ids, indices, predicates (booleans are 0/1 integers)


def _floordiv(a, b):
    return a // b


def _cdiv(a, b):
    return -(-a // b)


def _bool(x):
    return np.asarray(x) != 0


def _as_int(x):
    """A comparison's result as a 0/1 integer of the operands' kind (int stays int)."""
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    return np.asarray(x).astype(np.int64)


@attrs.frozen
class IntOp:
    """A binary integer operator.

    `ref(a, b)`: Python ints or int64 numpy arrays (floor division and modulo round towards minus
    infinity, as Python's; indices are non-negative where it matters). `z3(Z, a, b)`: the term.
    `ptx`: the PTX mnemonic stem for 32-bit registers (None: lowered through the emitter's
    constant-folding helpers, named by `emit`). `divides`: a zero right operand is an error.
    """

    name: str
    ref: Callable
    z3: Callable
    ptx: str | None = None
    emit: str | None = None
    divides: bool = False
    compare: bool = False
    logical: bool = False
    precedence: int = 0
    doc: str = ""


INT_OPS: dict[str, IntOp] = {o.name: o for o in (
    IntOp("+", lambda a, b: a + b, lambda Z, a, b: Z.add(a, b), "add.s32", "add", precedence=9, doc="sum"),
    IntOp("-", lambda a, b: a - b, lambda Z, a, b: Z.sub(a, b), "sub.s32", "sub", precedence=9,
          doc="difference"),
    IntOp("*", lambda a, b: a * b, lambda Z, a, b: Z.mul(a, b), "mul.lo.s32", "mul", precedence=10,
          doc="product"),
    IntOp("//", _floordiv, lambda Z, a, b: Z.floordiv(a, b), "div.s32", "div", divides=True,
          precedence=10, doc="floor division"),
    IntOp("%", lambda a, b: a % b, lambda Z, a, b: Z.mod(a, b), "rem.s32", "rem", divides=True,
          precedence=10, doc="modulo (sign of the divisor)"),
    IntOp("cdiv", _cdiv, lambda Z, a, b: Z.cdiv(a, b), None, "cdiv", divides=True, doc="ceiling division"),
    IntOp("<<", lambda a, b: a << b, lambda Z, a, b: Z.shl(a, b), "shl.b32", "shl", precedence=8,
          doc="shift left"),
    IntOp(">>", lambda a, b: a >> b, lambda Z, a, b: Z.shr(a, b), "shr.s32", "shr", precedence=8,
          doc="arithmetic shift right"),
    IntOp("&", lambda a, b: a & b, lambda Z, a, b: Z.band(a, b), "and.b32", "and", precedence=7,
          doc="bitwise and"),
    IntOp("^", lambda a, b: a ^ b, lambda Z, a, b: Z.xor(a, b), "xor.b32", "xor", precedence=6,
          doc="bitwise xor"),
    IntOp("|", lambda a, b: a | b, lambda Z, a, b: Z.bor(a, b), "or.b32", "or", precedence=5,
          doc="bitwise or"),
    IntOp("min", lambda a, b: _same_kind(np.minimum(a, b), a, b), lambda Z, a, b: Z.smin(a, b), "min.s32",
          "min", doc="minimum"),
    IntOp("max", lambda a, b: _same_kind(np.maximum(a, b), a, b), lambda Z, a, b: Z.smax(a, b), "max.s32",
          "max", doc="maximum"),
    IntOp("==", lambda a, b: _as_int(a == b), lambda Z, a, b: Z.b2i(Z.Eq(a, b)), "eq", compare=True,
          precedence=4, doc="equal"),
    IntOp("!=", lambda a, b: _as_int(a != b), lambda Z, a, b: Z.b2i(Z.Ne(a, b)), "ne", compare=True,
          precedence=4, doc="not equal"),
    IntOp("<", lambda a, b: _as_int(a < b), lambda Z, a, b: Z.b2i(Z.Lt(a, b)), "lt", compare=True,
          precedence=4, doc="less than"),
    IntOp("<=", lambda a, b: _as_int(a <= b), lambda Z, a, b: Z.b2i(Z.Le(a, b)), "le", compare=True,
          precedence=4, doc="at most"),
    IntOp(">", lambda a, b: _as_int(a > b), lambda Z, a, b: Z.b2i(Z.Lt(b, a)), "gt", compare=True,
          precedence=4, doc="greater than"),
    IntOp(">=", lambda a, b: _as_int(a >= b), lambda Z, a, b: Z.b2i(Z.Le(b, a)), "ge", compare=True,
          precedence=4, doc="at least"),
    IntOp("and", lambda a, b: _as_int(_bool(a) & _bool(b)), lambda Z, a, b: Z.b2i(Z.And(Z.i2b(a), Z.i2b(b))),
          "and", logical=True, precedence=2, doc="logical and"),
    IntOp("or", lambda a, b: _as_int(_bool(a) | _bool(b)), lambda Z, a, b: Z.b2i(Z.Or(Z.i2b(a), Z.i2b(b))),
          "or", logical=True, precedence=1, doc="logical or"),
)}


def _same_kind(r, a, b):
    return int(r) if isinstance(a, int) and isinstance(b, int) else r


@attrs.frozen
class IntUnary:
    name: str
    ref: Callable
    z3: Callable
    doc: str = ""


INT_UNARY: dict[str, IntUnary] = {o.name: o for o in (
    IntUnary("-", lambda a: -a, lambda Z, a: Z.neg(a), "negation"),
    IntUnary("not", lambda a: _as_int(np.asarray(a) == 0), lambda Z, a: Z.b2i(Z.Eq(a, Z.bv(0))), "logical not"),
)}


def int_eval(op: str, a, b):
    """Evaluate a binary integer operator on Python ints or int64 arrays (the reference)."""
    return INT_OPS[op].ref(a, b)


def fold(op: str, a: int, b: int) -> int | None:
    """Constant folding on Python ints; None where the result is undefined (division by zero) or
    too large to be worth computing (a shift by 64 or more)."""
    entry = INT_OPS[op]
    if entry.divides and b == 0:
        return None
    if op == "<<" and not 0 <= b < 64:
        return None
    if op == ">>" and b < 0:
        return None
    return int(entry.ref(int(a), int(b)))


# ---------------------------------------------------------------------------------------------
# elementwise float operators on fragments


@attrs.frozen
class FloatBinary:
    """`ref(a, b)` on numpy arrays of the compute dtype; `ptx` maps a compute dtype to the PTX
    instruction (`{d}`, `{a}`, `{b}` filled in). `combines`: the reduction this operator folds
    with (sum for +, max for max...), None where it is not a monoid of a reduction."""

    name: str
    ref: Callable
    ptx: dict
    combines: str | None = None
    doc: str = ""


def _ptx_all(stem: str, dtypes=("f32", "f64")) -> dict:
    return {d: [f"{stem}.{d} {{d}}, {{a}}, {{b}};"] for d in dtypes}


FLOAT_BINARY: dict[str, FloatBinary] = {o.name: o for o in (
    FloatBinary("+", np.add, {**_ptx_all("add.rn"), "i32": ["add.s32 {d}, {a}, {b};"],
                              "u32": ["add.u32 {d}, {a}, {b};"]}, "sum", "sum"),
    FloatBinary("-", np.subtract, {**_ptx_all("sub.rn"), "i32": ["sub.s32 {d}, {a}, {b};"],
                                   "u32": ["sub.u32 {d}, {a}, {b};"]}, None, "difference"),
    FloatBinary("*", np.multiply, {**_ptx_all("mul.rn"), "i32": ["mul.lo.s32 {d}, {a}, {b};"],
                                   "u32": ["mul.lo.u32 {d}, {a}, {b};"]}, "prod", "product"),
    FloatBinary("/", np.divide, _ptx_all("div.rn"), None, "quotient (correctly rounded)"),
    # .NaN: a NaN operand gives NaN, as numpy's maximum and torch's max (plain max.f32 returns the
    # other operand); max.f64 has no .NaN form and keeps PTX's rule (no kernel computes in f64)
    FloatBinary("max", np.maximum, {"f32": ["max.NaN.f32 {d}, {a}, {b};"], **_ptx_all("max", ("f64",)),
                                    "i32": ["max.s32 {d}, {a}, {b};"], "u32": ["max.u32 {d}, {a}, {b};"]},
                "max", "maximum (NaN if either operand is NaN)"),
    FloatBinary("min", np.minimum, {"f32": ["min.NaN.f32 {d}, {a}, {b};"], **_ptx_all("min", ("f64",)),
                                    "i32": ["min.s32 {d}, {a}, {b};"], "u32": ["min.u32 {d}, {a}, {b};"]},
                "min", "minimum (NaN if either operand is NaN)"),
)}


def _f32(x: float) -> str:
    """A PTX f32 immediate with the exact bits of float32(x)."""
    return f"0f{int(np.float32(x).view(np.uint32)):08X}"


LOG2_E = _f32(math.log2(math.e))
LN_2 = _f32(math.log(2.0))


@attrs.frozen
class FloatUnary:
    """`ref(x)` on numpy arrays; `ptx` maps a compute dtype to the instruction sequence (`{d}`,
    `{a}`; later instructions may read `{d}`). `ptx_sim` maps each approximate PTX instruction the
    templates use to the function the PTX simulator computes for it (exactly, in float32)."""

    name: str
    ref: Callable
    ptx: dict
    ptx_sim: dict = attrs.field(factory=dict)
    doc: str = ""


def _recip(x):
    return 1 / x


def _rsqrt(x):
    return 1 / np.sqrt(x)


FLOAT_UNARY: dict[str, FloatUnary] = {o.name: o for o in (
    FloatUnary("neg", np.negative, {"f32": ["neg.f32 {d}, {a};"], "f64": ["neg.f64 {d}, {a};"],
                                    "i32": ["neg.s32 {d}, {a};"], "u32": ["neg.s32 {d}, {a};"]},
               doc="-x"),
    FloatUnary("abs", np.abs, {"f32": ["abs.f32 {d}, {a};"], "f64": ["abs.f64 {d}, {a};"],
                               "i32": ["abs.s32 {d}, {a};"], "u32": ["abs.s32 {d}, {a};"]}, doc="|x|"),
    FloatUnary("sqrt", np.sqrt, {"f32": ["sqrt.rn.f32 {d}, {a};"], "f64": ["sqrt.rn.f64 {d}, {a};"]},
               doc="square root (correctly rounded)"),
    FloatUnary("recip", _recip, {"f32": ["rcp.rn.f32 {d}, {a};"], "f64": ["rcp.rn.f64 {d}, {a};"]},
               doc="1 / x (correctly rounded)"),
    FloatUnary("exp2", np.exp2, {"f32": ["ex2.approx.ftz.f32 {d}, {a};"]}, {"ex2.approx.ftz.f32": np.exp2},
               doc="2 ** x (approximate on the GPU)"),
    FloatUnary("exp", np.exp, {"f32": [f"mul.rn.f32 {{d}}, {{a}}, {LOG2_E};", "ex2.approx.ftz.f32 {d}, {d};"]},
               {"ex2.approx.ftz.f32": np.exp2}, doc="e ** x, as 2 ** (x log2 e) (approximate on the GPU)"),
    FloatUnary("log2", np.log2, {"f32": ["lg2.approx.ftz.f32 {d}, {a};"]}, {"lg2.approx.ftz.f32": np.log2},
               doc="base-2 logarithm (approximate on the GPU)"),
    FloatUnary("log", np.log, {"f32": ["lg2.approx.ftz.f32 {d}, {a};", f"mul.rn.f32 {{d}}, {{d}}, {LN_2};"]},
               {"lg2.approx.ftz.f32": np.log2}, doc="natural logarithm, as log2(x) ln 2 (approximate on the GPU)"),
    FloatUnary("rsqrt", _rsqrt, {"f32": ["rsqrt.approx.ftz.f32 {d}, {a};"]}, {"rsqrt.approx.ftz.f32": _rsqrt},
               doc="1 / sqrt(x) (approximate on the GPU)"),
    FloatUnary("tanh", np.tanh, {"f32": ["tanh.approx.f32 {d}, {a};"]}, {"tanh.approx.f32": np.tanh},
               doc="hyperbolic tangent (approximate on the GPU)"),
)}


def ptx_sim_functions() -> dict:
    """Every approximate PTX instruction the templates use, with the function the simulator
    computes for it."""
    out: dict = {}
    for entry in FLOAT_UNARY.values():
        out.update(entry.ptx_sim)
    return out


# ---------------------------------------------------------------------------------------------
# reductions


@attrs.frozen
class ReduceOp:
    """A reduction: its combining binary operator and identity (what padding must be)."""

    name: str
    binary: str
    identity: float
    ref: Callable  # numpy reduction along an axis
    doc: str = ""


REDUCE_OPS: dict[str, ReduceOp] = {o.name: o for o in (
    ReduceOp("sum", "+", 0.0, np.sum, "sum"),
    ReduceOp("max", "max", -math.inf, np.max, "maximum"),
    ReduceOp("min", "min", math.inf, np.min, "minimum"),
)}


def combine(op: str, a, b):
    """Combine two partial results of reduction `op` (the interpreter's shuffles and partials)."""
    return FLOAT_BINARY[REDUCE_OPS[op].binary].ref(a, b)


# ---------------------------------------------------------------------------------------------
# conversions and rounding


def round_to(x, dtype: str):
    """The value a register of `dtype` holds after a conversion from float32/float64 `x`, with
    round-to-nearest-even as `cvt.rn` does on the GPU; integers round to nearest even too
    (`cvt.rni`). Host storage keeps bf16 in float32 (numpy has no bfloat16)."""
    x = np.asarray(x)
    if dtype == "bf16":
        f = x.astype(np.float32)
        bits = f.view(np.uint32).astype(np.uint64)
        # round to nearest even on the upper 16 bits; NaN stays NaN (quietened)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        out = rounded.view(np.float32)
        return np.where(np.isnan(f), np.float32(np.nan), out)
    if dtype == "f16":
        return x.astype(np.float16)
    if dtype in ("f32", "f64"):
        return x.astype(np.float32 if dtype == "f32" else np.float64)
    info = np.iinfo({"i32": np.int32, "u32": np.uint32, "i64": np.int64, "i8": np.int8, "u8": np.uint8}[dtype])
    if np.issubdtype(x.dtype, np.floating):
        x = np.clip(np.rint(x), info.min, info.max)
    return x.astype(info.dtype)


_CVT_INT = {"i32": "s32", "u32": "u32"}
_FLOATS = ("f32", "f64", "f16", "bf16")


def cvt_instruction(dst: str, src: str) -> str | None:
    """The PTX conversion from a `src` register to a `dst` register (None: no such conversion)."""
    if dst in _FLOATS and src in _FLOATS:
        from argus_verify.ir import DTYPE_BYTES

        return f"cvt.{dst}.{src}" if DTYPE_BYTES[dst] > DTYPE_BYTES[src] else f"cvt.rn.{dst}.{src}"
    if dst in _FLOATS and src in _CVT_INT:
        return f"cvt.rn.{dst}.{_CVT_INT[src]}"
    if dst in _CVT_INT and src in _FLOATS:
        return f"cvt.rni.{_CVT_INT[dst]}.{src}"
    if dst in _CVT_INT and src in _CVT_INT:
        return "mov.b32"
    return None


def cvt_pair_instruction(dst: str, src: str) -> str | None:
    """The packed PTX conversion of two `src` registers into one .b32 holding two `dst` values
    (`cvt.rn.bf16x2.f32 d, a, b`: cvt(a) in the upper half of d, cvt(b) in the lower half, each
    rounded to nearest even as `round_to` does); None where there is none (PTX ISA, cvt: packed
    16-bit destinations from .f32 sources only)."""
    if src == "f32" and dst in ("bf16", "f16"):
        return f"cvt.rn.{dst}x2.f32"
    return None


# ---------------------------------------------------------------------------------------------
# warp shuffles: which lane each lane reads


@attrs.frozen
class ShuffleMode:
    """`source(lane, arg)`: the lane read by `lane` (numpy or ints; a lane whose source is out of
    range reads itself). `z3(Z, t, arg)`: the source *thread* of thread t as a term. `ptx` and
    `clamp`: the shfl.sync mode and its c operand."""

    name: str
    source: Callable
    z3: Callable
    ptx: str
    clamp: int
    doc: str = ""


def _src_xor(lane, arg):
    return (lane ^ arg) & 31


def _src_idx(lane, arg):
    return np.broadcast_to(np.asarray(arg) & 31, np.shape(lane)) if np.ndim(lane) else arg & 31


def _src_up(lane, arg):
    return np.where(lane - arg >= 0, lane - arg, lane)


def _src_down(lane, arg):
    return np.where(lane + arg < 32, lane + arg, lane)


def _z3_xor(Z, t, arg):
    lane = Z.band(t, Z.bv(31))
    return Z.add(Z.sub(t, lane), Z.band(Z.xor(lane, arg), Z.bv(31)))


def _z3_idx(Z, t, arg):
    lane = Z.band(t, Z.bv(31))
    return Z.add(Z.sub(t, lane), Z.band(arg, Z.bv(31)))


def _z3_up(Z, t, arg):
    lane = Z.band(t, Z.bv(31))
    return Z.Ite(Z.Le(Z.bv(0), Z.sub(lane, arg)), Z.sub(t, arg), t)


def _z3_down(Z, t, arg):
    lane = Z.band(t, Z.bv(31))
    return Z.Ite(Z.Lt(Z.add(lane, arg), Z.bv(32)), Z.add(t, arg), t)


SHUFFLE_MODES: dict[str, ShuffleMode] = {o.name: o for o in (
    ShuffleMode("xor", _src_xor, _z3_xor, "bfly", 31, "lane ^ arg"),
    ShuffleMode("idx", _src_idx, _z3_idx, "idx", 31, "lane arg"),
    ShuffleMode("up", _src_up, _z3_up, "up", 0, "lane - arg; lanes below arg keep their own value"),
    ShuffleMode("down", _src_down, _z3_down, "down", 31, "lane + arg; lanes past 31 keep their own value"),
)}


def shuffle_source_thread(mode: str, tid, arg):
    """The thread each thread of a block reads in a shuffle (numpy over thread ids)."""
    tid = np.asarray(tid)
    lane = tid % 32
    return tid - lane + SHUFFLE_MODES[mode].source(lane, arg)


# ---------------------------------------------------------------------------------------------
# Hopper's asynchronous machinery: what each operation is in PTX (lowering/hopper.py fills the
# operands) and what it means (runtime/interp_hopper.py and smt/protocol.py implement it; the
# hardware's address functions are argus_verify/hopper.py).


@attrs.frozen
class AsyncOp:
    name: str
    ptx: str  # a template over named operands
    doc: str


ASYNC_OPS: dict[str, AsyncOp] = {o.name: o for o in (
    AsyncOp("mbarrier.init", "mbarrier.init.shared::cta.b64 [{bar}], {count};",
            "phase 0; `count` arrivals expected per phase, no transaction bytes"),
    AsyncOp("mbarrier.arrive", "mbarrier.arrive.shared::cta.b64 _, [{bar}];",
            "one arrival; the phase completes when arrivals and transaction bytes are both used up"),
    AsyncOp("mbarrier.expect_tx", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar}], {bytes};",
            "`bytes` more transaction bytes for the current phase, then one arrival"),
    AsyncOp("mbarrier.try_wait", "mbarrier.try_wait.parity.shared::cta.b64 {pred}, [{bar}], {parity};",
            "true once the phase of parity `parity` has completed (the phase before phase 0 counts as "
            "completed); the data of the copies that completed it is then visible"),
    AsyncOp("fence.mbarrier_init", "fence.mbarrier_init.release.cluster;",
            "the executing thread's mbarrier inits become visible to the async proxy"),
    AsyncOp("fence.proxy_async", "fence.proxy.async.shared::cta;",
            "the executing thread's ordinary shared writes are ordered before later async-proxy accesses"),
    AsyncOp("tma.load", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                        "[{dst}], [{tmap}, {{{col}, {row}}}], [{bar}];",
            "the box at (col, row) of the tensor map into shared memory, zero outside the tensor; its bytes "
            "complete transactions on the mbarrier when they have landed"),
    AsyncOp("tma.store", "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{tmap}, {{{col}, {row}}}], [{src}];",
            "the box at (col, row) of the tensor map from shared memory, asynchronously in the thread's bulk "
            "group; box elements outside the tensor are not written"),
    AsyncOp("bulk.commit_group", "cp.async.bulk.commit_group;",
            "closes the thread's group of bulk copies issued since"),
    AsyncOp("bulk.wait_group.read", "cp.async.bulk.wait_group.read {n};",
            "waits until at most n of the thread's committed bulk groups are still reading their shared sources"),
    AsyncOp("bulk.wait_group", "cp.async.bulk.wait_group {n};",
            "waits until at most n of the thread's committed bulk groups are in flight (their writes done)"),
    AsyncOp("tma.load.multicast", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                  ".multicast::cluster [{dst}], [{tmap}, {{{col}, {row}}}], [{bar}], {mask};",
            "the box at (col, row) into the shared memory of every CTA of the cluster whose rank is a set bit "
            "of the 16-bit `mask`, at the same offset in each; each copy completes its bytes on the mbarrier at "
            "`bar`'s offset in its CTA"),
    AsyncOp("mapa", "mapa.shared::cluster.u32 {d}, {addr}, {cta};",
            "the shared::cluster address of this CTA's shared address `addr` in the cluster's CTA of rank `cta`"),
    AsyncOp("mbarrier.arrive.cluster", "mbarrier.arrive.shared::cluster.b64 _, [{bar}];",
            "one arrival on the mbarrier at shared::cluster address `bar` (a peer CTA's, through mapa), performed "
            "after this thread's earlier instructions (so wgmma reads it retired are complete when the peer sees "
            "it); the default .release.cta: it does not publish this thread's ordinary writes to the peer"),
    AsyncOp("cluster.arrive", "barrier.cluster.arrive.release.aligned;",
            "this thread arrives at the cluster barrier, releasing its earlier accesses at cluster scope"),
    AsyncOp("cluster.wait", "barrier.cluster.wait.acquire.aligned;",
            "waits until every thread of every CTA of the cluster has arrived; their released accesses "
            "are then visible (acquire)"),
    AsyncOp("wgmma.fence", "wgmma.fence.sync.aligned;", "orders earlier register accesses before later wgmmas"),
    AsyncOp("wgmma.mma_async", "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} {{{d}}}, {desc_a}, {desc_b}, "
                               "{scale_d}, 1, 1, {trans_a}, {trans_b};",
            "d = a @ b + d (scale_d true) for a 64 x n x 16 step of the warpgroup, operands read from shared "
            "memory through descriptors, asynchronously"),
    AsyncOp("wgmma.commit_group", "wgmma.commit_group.sync.aligned;", "closes the group of wgmmas issued since"),
    AsyncOp("setmaxnreg", "setmaxnreg.{action}.sync.aligned.u32 {count};",
            "the executing warpgroup's per-thread register count becomes `count` (.inc takes registers from "
            "the block's pool, waiting until they are free; .dec gives them back)"),
    AsyncOp("wgmma.wait_group", "wgmma.wait_group.sync.aligned {n};",
            "waits until at most n committed groups are in flight; their results are then in the registers"),
)}
