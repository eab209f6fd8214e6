"""The Argus IR: the contract between the front end and every later stage.

A `Kernel` is one instantiation of a `.arg` kernel: compile-time parameters are already
substituted, so every layout, tile shape and thread count is a concrete integer, while tensor
sizes (M, N, K...), block ids, thread ids and loop variables stay symbolic. All nodes are frozen
attrs classes carrying the `Span` they came from.

Execution model: every statement is executed by every thread of every block (SIMT). Integer
values (`Let`) are per-thread scalars, possibly uniform. A *fragment* is a tile of `tile` shape
distributed over the block's threads: thread t holds values v = 0..V-1, and `FragType.coords`
says which tile coordinate each (t, v) stands for. Views name a rectangular tile of a global
tensor or shared allocation; a load/store pairs a view with a fragment coordinate by coordinate.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np

from argus_verify.diagnostics import NO_SPAN, Span
from argus_verify.layout import ComposedLayout, Layout

LayoutLike = Layout | ComposedLayout

# ---------------------------------------------------------------------------------------------
# dtypes

DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "u32": 4, "i8": 1, "u8": 1}
FLOAT_DTYPES = ("f64", "f32", "f16", "bf16")
GRID_MAX = (2**31 - 1, 65535, 65535)  # the most blocks a CUDA launch takes along x, y and z
BLOCK_MAX = (1024, 1024, 64)  # the most threads a CUDA block has along x, y and z
BLOCK_THREADS_MAX = 1024  # and in all
INT_DTYPES = ("i64", "i32", "u32", "i8", "u8")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def numpy_dtype(dtype: str) -> np.dtype:
    """Host storage dtype. bf16 has no numpy type: it is held in float32, rounded to bf16."""
    return np.dtype(
        {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.float32,
         "i64": np.int64, "i32": np.int32, "u32": np.uint32, "i8": np.int8, "u8": np.uint8}[dtype]
    )


# ---------------------------------------------------------------------------------------------
# integer expressions (sizes, ids, indices, predicates); booleans are 0/1 integers


@attrs.frozen
class IConst:
    value: int
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class IVar:
    """A size (M, N...), a loop variable, an integer `Let`, or a scalar kernel parameter."""

    name: str
    span: Span = attrs.field(default=NO_SPAN, eq=False)


SPECIALS = ("block_id.x", "block_id.y", "block_id.z", "thread_id", "warp_id", "lane_id",
            "num_blocks.x", "num_blocks.y", "num_blocks.z")
PER_THREAD_SPECIALS = ("thread_id", "warp_id", "lane_id")


@attrs.frozen
class ISpecial:
    which: str  # one of SPECIALS
    span: Span = attrs.field(default=NO_SPAN, eq=False)


# "//" and "%" are floor division and modulo on non-negative operands (the front end and the
# verifier check indices are non-negative where it matters); "cdiv" is ceiling division.
INT_BINOPS = ("+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^", "min", "max", "cdiv",
              "==", "!=", "<", "<=", ">", ">=", "and", "or")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")


@attrs.frozen
class IBin:
    op: str
    a: IExpr
    b: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class IUn:
    op: str  # "-" or "not"
    a: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class ISelect:
    cond: IExpr
    a: IExpr
    b: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class ITag:
    """`tag(frag)[component]` inside an assertion: the tag of the element being checked."""

    frag: str
    component: int
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class ICoord:
    """`coord(frag)[axis]` inside an assertion: the element's logical tile coordinate."""

    frag: str
    axis: int
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class ICall:
    """A call of a user `tagfn` (pure integer function), inside tags and assertions."""

    fn: str
    args: tuple
    span: Span = attrs.field(default=NO_SPAN, eq=False)


IExpr = IConst | IVar | ISpecial | IBin | IUn | ISelect | ITag | ICoord | ICall


def walk_iexpr(e: IExpr):
    """Yield `e` and every sub-expression."""
    yield e
    if isinstance(e, IBin):
        yield from walk_iexpr(e.a)
        yield from walk_iexpr(e.b)
    elif isinstance(e, IUn):
        yield from walk_iexpr(e.a)
    elif isinstance(e, ISelect):
        yield from walk_iexpr(e.cond)
        yield from walk_iexpr(e.a)
        yield from walk_iexpr(e.b)
    elif isinstance(e, ICall):
        for a in e.args:
            yield from walk_iexpr(a)


# ---------------------------------------------------------------------------------------------
# how a fragment's values map to tile coordinates


@attrs.frozen
class TVLayout:
    """A thread-value layout ((thread modes), (value modes)) -> flat row-major tile index.

    Thread t, value v stands for flat index `layout((t, v))`, i.e. mode 0 evaluated at t plus
    mode 1 evaluated at v; the flat index is unravelled row-major (last axis fastest) over `tile`.
    """

    layout: Layout
    tile: tuple

    @property
    def threads(self) -> int:
        return self.layout.mode(0).size

    @property
    def values(self) -> int:
        return self.layout.mode(1).size

    def flat_table(self, rows=None) -> np.ndarray:
        """[threads, values] int64 flat tile indices (`rows`: only those threads, in that order)."""
        t_part = self.layout.mode(0).map_all()
        v_part = self.layout.mode(1).map_all()
        return (t_part if rows is None else t_part[rows])[:, None] + v_part[None, :]

    def coord_table(self, rows=None) -> np.ndarray:
        """[threads, values, rank] int64 tile coordinates (`rows`: only those threads, in that order;
        a store issued by one thread of a tile held whole by every thread needs one row, not 256)."""
        flat = self.flat_table(rows)
        return np.stack(np.unravel_index(flat, self.tile), axis=-1) if self.tile else flat[..., None][..., :0]

    def flat(self, t, v, ops):
        return ops.add(self.layout.mode(0).apply(t, ops), self.layout.mode(1).apply(v, ops))

    def coords(self, t, v, ops) -> tuple:
        flat = self.flat(t, v, ops)
        return unravel(flat, self.tile, ops)

    def __str__(self) -> str:
        return str(self.layout)


def unravel(flat, tile: tuple, ops) -> tuple:
    """Row-major unravel of a (symbolic) flat index over a constant tile shape."""
    out = []
    rest = flat
    for i in range(len(tile) - 1, -1, -1):
        extent = tile[i]
        if i == 0:
            out.append(rest)
        else:
            out.append(ops.mod(rest, extent))
            rest = ops.floordiv(rest, extent)
    return tuple(reversed(out))


class _Derived:
    """A coordinate map derived from `base`: same threads and values, other coordinates."""

    @property
    def threads(self) -> int:
        return self.base.threads

    @property
    def values(self) -> int:
        return self.base.values


@attrs.frozen
class Projected(_Derived):
    """The coordinates of `base` with axis `axis` collapsed to 0 (a reduction keeps (t, v))."""

    base: TVMap
    axis: int

    @property
    def tile(self) -> tuple:
        t = self.base.tile
        return t[: self.axis] + (1,) + t[self.axis + 1:]

    def coord_table(self, rows=None) -> np.ndarray:
        c = self.base.coord_table(rows).copy()
        c[..., self.axis] = 0
        return c

    def coords(self, t, v, ops) -> tuple:
        c = list(self.base.coords(t, v, ops))
        c[self.axis] = ops.const(0)
        return tuple(c)

    def __str__(self) -> str:
        return f"reduce[{self.axis}]({self.base})"


@attrs.frozen
class Transposed(_Derived):
    """The coordinates of a 2-D `base` with its two axes swapped (a relabelling, no data moves)."""

    base: TVMap

    @property
    def tile(self) -> tuple:
        return tuple(reversed(self.base.tile))

    def coord_table(self, rows=None) -> np.ndarray:
        return self.base.coord_table(rows)[..., ::-1].copy()

    def coords(self, t, v, ops) -> tuple:
        return tuple(reversed(self.base.coords(t, v, ops)))

    def __str__(self) -> str:
        return f"transpose({self.base})"


@attrs.frozen
class Reshaped(_Derived):
    """The coordinates of `base` re-read in a tile of another shape with the same row-major order."""

    base: TVMap
    new_tile: tuple

    @property
    def tile(self) -> tuple:
        return self.new_tile

    def coord_table(self, rows=None) -> np.ndarray:
        c = self.base.coord_table(rows)
        flat = np.ravel_multi_index(tuple(np.moveaxis(c, -1, 0)), self.base.tile)
        return np.stack(np.unravel_index(flat, self.new_tile), axis=-1)

    def coords(self, t, v, ops) -> tuple:
        c = self.base.coords(t, v, ops)
        flat = c[0]
        for axis, extent in zip(c[1:], self.base.tile[1:], strict=True):
            flat = ops.add(ops.mul(flat, extent), axis)
        return unravel(flat, self.new_tile, ops)

    def __str__(self) -> str:
        return f"reshape({self.base}, {list(self.new_tile)})"


TVMap = TVLayout | Projected | Transposed | Reshaped


@attrs.frozen
class FragType:
    dtype: str
    coords: TVMap

    @property
    def tile(self) -> tuple:
        return self.coords.tile

    @property
    def threads(self) -> int:
        return self.coords.threads

    @property
    def values(self) -> int:
        return self.coords.values

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.tile)} tv={self.coords}"


# ---------------------------------------------------------------------------------------------
# views: rectangular tiles of global tensors or shared allocations


@attrs.frozen
class Slice:
    start: IExpr
    extent: int  # constant; the front end proves stop - start is constant
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Index:
    index: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class View:
    base: str
    space: str  # "global" | "shared"
    index: tuple  # one Slice or Index per dimension of the base
    span: Span = attrs.field(default=NO_SPAN, eq=False)

    @property
    def tile(self) -> tuple:
        return tuple(s.extent for s in self.index if isinstance(s, Slice))

    def tile_axes(self) -> tuple:
        """Which base dimension each tile axis comes from."""
        return tuple(i for i, s in enumerate(self.index) if isinstance(s, Slice))


# ---------------------------------------------------------------------------------------------
# fragment-producing operations (right-hand sides of `Assign`)


@attrs.frozen
class Load:
    src: View
    tv: TVLayout
    mask: bool  # out-of-bounds elements (of a global tensor) read `other` instead of faulting
    other: float = 0.0
    vec: int | None = None  # explicit vector width in elements; None: chosen by the lowering


@attrs.frozen
class Full:
    dtype: str
    tv: TVLayout
    value: float


@attrs.frozen
class FConst:
    value: float


@attrs.frozen
class FScalar:
    """A scalar kernel parameter or integer expression used as a float operand."""

    expr: IExpr


Operand = str | FConst | FScalar  # str: a fragment variable


def float_scalar_param(kernel, arg) -> str | None:
    """The name of the floating-point scalar parameter operand `arg` is (`xs * alpha`), else None
    (an integer expression used as a float, such as thread_id, may differ between threads)."""
    if isinstance(arg, FScalar) and isinstance(arg.expr, IVar):
        p = next((p for p in kernel.params if p.name == arg.expr.name), None)
        if isinstance(p, ScalarParam) and is_float(p.dtype):
            return p.name
    return None

ELEMENTWISE_BINARY = ("+", "-", "*", "/", "max", "min")
ELEMENTWISE_UNARY = ("neg", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "recip")


@attrs.frozen
class Elementwise:
    op: str
    args: tuple  # of Operand


@attrs.frozen
class Cast:
    arg: str
    dtype: str


REDUCE_OPS = ("sum", "max", "min")


@attrs.frozen
class Reduce:
    """Reduce over tile axis `axis` within `scope`.

    scope "thread": over the values a thread holds; scope "warp": additionally a butterfly over
    the lane bits in `lanes` (one shfl.xor per bit). The result keeps (t, v): every value holds
    the reduction of its group, and its coordinate on `axis` becomes 0.
    """

    op: str
    arg: str
    axis: int
    scope: str
    lanes: int = 0


@attrs.frozen
class Shuffle:
    """Warp shuffle of every value: mode "xor" (lane ^ arg), "idx" (lane arg), "up", "down"."""

    arg: str
    mode: str
    lane_arg: IExpr


MMA_ATOMS = {
    # name: (M, N, K, allowed (a/b dtype, c dtype) pairs)
    "fma": (1, 1, 1, (("f32", "f32"), ("f64", "f64"), ("f16", "f32"), ("bf16", "f32"))),
    "m16n8k16": (16, 8, 16, (("f16", "f32"), ("bf16", "f32"))),
    "m16n8k8": (16, 8, 8, (("f16", "f32"), ("bf16", "f32"))),
}


@attrs.frozen
class Mma:
    """c + a @ b over fragment tiles a (M, K), b (K, N), c (M, N).

    atom "fma": each thread multiplies the a and b values it holds for each of its c values
    (SIMT; the layouts must give every thread all the (i, k) and (k, j) its c values need).
    Tensor-core atoms (m16n8k16, m16n8k8) execute mma.sync on registers: argus_verify.atoms
    splits the fragments into atom instances (`atoms.mma_plan`) and each instance multiplies the
    values its lanes hold through the atom's A, B and C layouts.
    """

    a: str
    b: str
    c: str
    atom: str


@attrs.frozen
class Ldmatrix:
    """`ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16` from shared view `src`, one
    instruction per value of `rows`: thread t supplies the row that starts at tile element
    `rows(t, i)` for instruction i (lanes 8q .. 8q + 7 of a warp give matrix q's rows). What each
    lane receives is argus_verify.atoms.ldmatrix_layout; the Assign's type holds the resulting
    coordinates (`atoms.ldmatrix_result`)."""

    src: View
    rows: TVLayout
    count: int
    trans: bool


@attrs.frozen
class Relabel:
    """The same registers with new coordinates (transpose / reshape); the Assign's type says how."""

    arg: str


@attrs.frozen
class Wgmma:
    """`wgmma.mma_async` m64nNk16 (bf16/f16 -> f32) of the warpgroup: c + a @ b with a [M, K] and
    b [K, N] read from shared views by the tensor cores (async proxy) through descriptors the
    lowering derives from the allocations' layouts (argus_verify.hopper). Asynchronous: the result
    is the accumulator only after a `wgmma_wait` retires its group; until then c's registers are
    in flight. One instruction per 64-row block of a and 16-wide k step."""

    a: View
    b: View
    c: str


FragOp = Load | Full | Elementwise | Cast | Reduce | Shuffle | Mma | Relabel | Ldmatrix | Wgmma

# ---------------------------------------------------------------------------------------------
# statements


@attrs.frozen
class Let:
    name: str
    value: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Assign:
    name: str
    op: FragOp
    type: FragType
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@functools.lru_cache(maxsize=256)
def _cosize(layout) -> int:
    """A layout's cosize, once per layout (the protocol skeleton asks for it at every shared access)."""
    return layout.cosize


@attrs.frozen
class SharedAlloc:
    name: str
    dtype: str
    shape: tuple
    layout: LayoutLike  # coordinate -> element offset; shape congruent to `shape`
    span: Span = attrs.field(default=NO_SPAN, eq=False)

    @property
    def size_elems(self) -> int:
        return _cosize(self.layout)


@attrs.frozen
class Store:
    dst: View
    value: str
    mask: bool
    where: IExpr | None = None
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Stmatrix:
    """`stmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16` of fragment `value` into shared view
    `dst`, one instruction per value of `rows` (row addresses as for `Ldmatrix`). The front end
    accepts it only where every value lands at its own coordinate (the fragment's coordinates are
    `atoms.ldmatrix_result(rows, count, trans)`), so it means what `Store(dst, value)` means."""

    dst: View
    value: str
    rows: TVLayout
    count: int
    trans: bool
    span: Span = attrs.field(default=NO_SPAN, eq=False)

    def as_store(self) -> Store:
        return Store(self.dst, self.value, False, None, self.span)


@attrs.frozen
class CopyAsync:
    """cp.async global -> shared of `vec` elements per thread and instruction; completes at a wait."""

    dst: View
    src: View
    tv: TVLayout
    mask: bool
    vec: int
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Commit:
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Wait:
    """Wait until at most `pending` committed async-copy groups are still in flight."""

    pending: int
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Barrier:
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class For:
    var: str
    start: IExpr
    stop: IExpr
    step: int
    body: tuple
    unroll: int | None = None
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class If:
    cond: IExpr
    then: tuple
    orelse: tuple = ()
    span: Span = attrs.field(default=NO_SPAN, eq=False)
    plain: bool = False  # a condition selecting whole warpgroups, built as a per-thread branch, not a role


@attrs.frozen
class Assert:
    """A tag assertion: `cond` must hold for every block, thread, value and loop iteration.

    `frags` are the fragments whose tags/coords it mentions; they must share (t, v) shape.
    """

    cond: IExpr
    frags: tuple
    source: str = ""
    span: Span = attrs.field(default=NO_SPAN, eq=False)


MBARRIER_OPS = ("init", "arrive", "expect_tx", "wait")


@attrs.frozen
class MbarrierOp:
    """An mbarrier operation on `bar` (a one-element view of an i64 shared allocation):
    init (value: arrival count), arrive, expect_tx (arrive.expect_tx; value: transaction bytes),
    wait (try_wait.parity loop; value: the parity of the phase waited for)."""

    kind: str
    bar: View
    value: IExpr | None = None
    span: Span = attrs.field(default=NO_SPAN, eq=False)


FENCES = ("proxy_async", "mbarrier_init", "wgmma")


@attrs.frozen
class Fence:
    """fence.proxy.async.shared::cta | fence.mbarrier_init.release.cluster | wgmma.fence."""

    kind: str
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class TmaLoad:
    """cp.async.bulk.tensor global -> shared of the whole tile of `src` (elements outside the tensor
    are zero-filled) into shared view `dst`, completing `tile bytes` of transactions on mbarrier
    `bar`. Issued by every thread that runs it (guard it to one thread)."""

    dst: View
    src: View
    bar: View
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class WgmmaGroup:
    """wgmma.commit_group (kind "commit") or wgmma.wait_group `pending` (kind "wait")."""

    kind: str
    pending: int = 0
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class TmaStore:
    """cp.async.bulk.tensor shared -> global of the whole tile of shared view `src` into global view
    `dst` (box elements outside the tensor are not written), in the executing thread's current bulk
    group. The async proxy reads `src` at some time before a `BulkGroup` wait retires the group:
    generic writes to it must be fenced (fence_proxy_async) before, and it must not be rewritten
    until then. Issued by every thread that runs it (guard it to one thread)."""

    dst: View
    src: View
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class BulkGroup:
    """cp.async.bulk.commit_group (kind "commit") or cp.async.bulk.wait_group[.read] `pending` (kind
    "wait"): at most `pending` of the thread's committed bulk groups stay in flight; with `read`
    only their reads of shared memory are complete (the source may be rewritten), without it their
    writes are too (visible)."""

    kind: str
    pending: int = 0
    read: bool = True
    span: Span = attrs.field(default=NO_SPAN, eq=False)



@attrs.frozen
class SetMaxNReg:
    """setmaxnreg: the warpgroup's per-thread register count becomes `count` (the first statement of a
    warpgroup role; argus_verify/roles.py)."""

    count: int
    const: str | None = attrs.field(default=None, eq=False)  # the compile-time constant it names, if any
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class TmaLoadMulticast:
    """cp.async.bulk.tensor ... .multicast::cluster: the TmaLoad of `src` into shared view `dst` of
    every CTA of the cluster whose rank is a set bit of `mask`, each copy completing its tile bytes
    on the mbarrier at `bar`'s offset in that CTA. Issued by every thread that runs it."""

    dst: View
    src: View
    bar: View
    mask: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class MbarrierArriveCluster:
    """mapa + mbarrier.arrive.shared::cluster: one arrival on the mbarrier at `bar`'s offset in the
    shared memory of the cluster's CTA of rank `cta` (this CTA's included), performed after this
    thread's earlier instructions (CTA-scope release: it publishes no ordinary writes to the peer)."""

    bar: View
    cta: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class ClusterSync:
    """barrier.cluster.arrive.release + barrier.cluster.wait.acquire: every thread of every CTA of
    the cluster meets here; what each did before is visible to all after (mbarrier inits included)."""

    span: Span = attrs.field(default=NO_SPAN, eq=False)


CLUSTER_STMTS = (TmaLoadMulticast, MbarrierArriveCluster, ClusterSync)
HOPPER_STMTS = (MbarrierOp, Fence, TmaLoad, WgmmaGroup, TmaStore, BulkGroup, SetMaxNReg, *CLUSTER_STMTS)

Stmt = (Let | Assign | SharedAlloc | Store | Stmatrix | CopyAsync | Commit | Wait | Barrier | For | If | Assert
        | MbarrierOp | Fence | TmaLoad | WgmmaGroup | TmaStore | BulkGroup | SetMaxNReg | TmaLoadMulticast
        | MbarrierArriveCluster | ClusterSync)

# ---------------------------------------------------------------------------------------------
# the kernel


@attrs.frozen
class TensorParam:
    name: str
    dtype: str
    shape: tuple  # of IExpr (IVar for symbolic sizes, IConst)
    output: bool
    span: Span = attrs.field(default=NO_SPAN, eq=False)

    @property
    def rank(self) -> int:
        return len(self.shape)


@attrs.frozen
class ScalarParam:
    name: str
    dtype: str
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class TagDecl:
    """`tag X[i, j] = (e0, e1)`: element (i, j) of X carries tag (e0, e1) (inputs) or must (outputs)."""

    tensor: str
    index_vars: tuple
    components: tuple  # of IExpr over index_vars, sizes, tagfns; None: `*` (inputs: matches any value)
    once: bool = False  # outputs: every element written exactly once
    span: Span = attrs.field(default=NO_SPAN, eq=False)


# ---------------------------------------------------------------------------------------------
# reduction contracts: what each output element is computed from, and with which operator


@attrs.frozen
class CElem:
    """`x[i, j]` in a contract: an element of an input tensor, indexed by contract variables."""

    tensor: str
    indices: tuple  # of str: one index variable per dimension
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class CReduce:
    """`sum(body for k)`: `op` (a semantics.REDUCE_OPS name) over every k along the dimension
    the variable indexes in `body`."""

    op: str
    var: str
    body: CExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class CBin:
    op: str  # a semantics.FLOAT_BINARY name
    a: CExpr
    b: CExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class CUn:
    op: str  # a semantics.FLOAT_UNARY name
    a: CExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class CConst:
    value: float
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class CScalar:
    """A floating-point scalar parameter of the kernel (`alpha` in `x[i] * alpha`)."""

    name: str
    span: Span = attrs.field(default=NO_SPAN, eq=False)


CExpr = CElem | CReduce | CBin | CUn | CConst | CScalar


@attrs.frozen
class Contract:
    """`contract out[i] = max(x[i, j] for j)`: output `tensor` at `index_vars` is `expr`."""

    tensor: str
    index_vars: tuple
    expr: CExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)

    def reductions(self) -> list:
        """Every CReduce of the expression, outermost first."""
        out, todo = [], [self.expr]
        while todo:
            e = todo.pop(0)
            if isinstance(e, CReduce):
                out.append(e)
                todo.append(e.body)
            elif isinstance(e, CBin):
                todo += [e.a, e.b]
            elif isinstance(e, CUn):
                todo.append(e.a)
        return out

    def reduced_dims(self) -> list:
        """(operator, tensor, dimension) of every reduction, in order, each once:
        `sum(A[i, k] * B[k, j] for k)` reduces A's dimension 1 and B's dimension 0 by sum."""
        out = []
        for red in self.reductions():
            for elem in contract_elements(red.body):
                for dim, var in enumerate(elem.indices):
                    if var == red.var and (red.op, elem.tensor, dim) not in out:
                        out.append((red.op, elem.tensor, dim))
        return out


def contract_elements(e) -> list:
    """The input elements (CElem) a contract expression reads, left to right."""
    if isinstance(e, CElem):
        return [e]
    if isinstance(e, CReduce):
        return contract_elements(e.body)
    if isinstance(e, CBin):
        return contract_elements(e.a) + contract_elements(e.b)
    if isinstance(e, CUn):
        return contract_elements(e.a)
    return []


@attrs.frozen
class TagFn:
    name: str
    params: tuple
    body: IExpr
    span: Span = attrs.field(default=NO_SPAN, eq=False)


@attrs.frozen
class Kernel:
    name: str
    params: tuple  # TensorParam | ScalarParam, in signature order (outputs last)
    consts: tuple  # ((name, value), ...) after instantiation
    sizes: tuple  # names of symbolic sizes, in order of first appearance
    requires: tuple  # of IExpr
    grid: tuple  # 3 IExpr
    block: int
    tags: tuple  # of TagDecl
    tagfns: tuple  # of TagFn
    body: tuple  # of Stmt
    source_file: str = "<string>"
    span: Span = attrs.field(default=NO_SPAN, eq=False)
    # compiler policies from `policy(...)`: they change the generated code, never the meaning
    policies: tuple = ()  # ((name, value), ...)
    contracts: tuple = ()  # of Contract
    # thread-block cluster shape from `cluster(x, y, z)`; (1, 1, 1): no clusters
    cluster: tuple = (1, 1, 1)

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    def contract_of(self, tensor: str) -> Contract | None:
        return next((c for c in self.contracts if c.tensor == tensor), None)

    def policy(self, name: str, default=None):
        return dict(self.policies).get(name, default)

    def param(self, name: str):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def tensors(self) -> tuple:
        return tuple(p for p in self.params if isinstance(p, TensorParam))

    @property
    def inputs(self) -> tuple:
        return tuple(p for p in self.tensors if not p.output)

    @property
    def outputs(self) -> tuple:
        return tuple(p for p in self.tensors if p.output)

    def declared_tag(self, tensor: str) -> TagDecl | None:
        return next((t for t in self.tags if t.tensor == tensor), None)

    def tag_of(self, tensor: str) -> TagDecl | None:
        """`tensor`'s tag: declared, or for an input that a contract reads and no `tag` names, the
        one the contract implies (`derived_tag`)."""
        declared = self.declared_tag(tensor)
        return declared if declared is not None else derived_tag(self, tensor)

    def shared_allocs(self) -> list:
        return [s for s in walk_stmts(self.body) if isinstance(s, SharedAlloc)]


def derived_tag(kernel: Kernel, tensor: str) -> TagDecl | None:
    """The tag that the contracts imply for an untagged tensor, where they imply one.

    `contract out[i, j] = x[i, j] + b[j]` with `tag out[i, j] = (i, j)` says that the b element
    combined into out[i, j] is b[j]: b[j] carries (*, j), the output tag's components that depend
    only on b's indices (the rest `*`). Without it, an untagged b agrees with every tag and a kernel
    that reads b[j + 1] is proved. An input read at a reduction variable is tagged along its own
    axes (`sum(x[i, k] for k)` into out[i]: x[i, k] carries (i, *)). None where the reads disagree
    (`_implied_tag`), no component is left, or the output has no tag (the caller says the indexing
    is not checked). An output takes (i, j) from its contract where the kernel
    declares no tag at all."""
    if tensor not in {p.name for p in kernel.inputs}:
        contract = kernel.contract_of(tensor)
        if contract is None or kernel.tags:
            return None
        # a kernel that declares no tag at all: its contract names each output element by its
        # indices, so out[i, j] must receive what is tagged (i, j) (no `once`: that is not claimed)
        return TagDecl(tensor, contract.index_vars, tuple(IVar(v) for v in contract.index_vars), False,
                       contract.span)
    found = None
    uses_mma = any(isinstance(s, Assign) and isinstance(s.op, (Mma, Wgmma)) for s in walk_stmts(kernel.body))
    for c in kernel.contracts:
        tuples = {e.indices for e in contract_elements(c.expr) if e.tensor == tensor}
        if not tuples:
            continue
        out = kernel.tag_of(c.tensor)
        paired = paired_dims(c, uses_mma).get(tensor, set())
        decl = _implied_tag(tensor, tuples, c, out, paired) if out is not None else None
        if decl is None or (found is not None and found != decl):
            return None
        found = decl
    return found


def _implied_tag(tensor: str, tuples: set, contract: Contract, out: TagDecl, paired: set) -> TagDecl | None:
    """The tag of `tensor`, read by `contract` at the index tuples `tuples`, in `out`'s terms.
    `paired`: the dimensions a reduction's variable indexes where the tags must follow that
    variable (`paired_dims`); they keep the element's own index, every other reduced one is `*`.

    Each dimension an output variable indexes takes that variable's name in `out`'s declaration.
    Read at output variables only (an elementwise operand, a broadcast vector), the tag is `out`'s
    components over those names (`*` for the rest): it meets the output's values position by
    position. Read at a reduction's variable too, its components follow its own dimensions, as a
    reduction stars the axis it reduces (`sum(x[i, j] for i)` into out[j]: x[i, j] carries
    (*, j)): each output variable's dimension holds that variable where `out` has it as a component
    of its own, in `out`'s order (else no tag). None where a dimension is indexed by two output
    variables, or one variable by two dimensions."""
    rank = len(next(iter(tuples)))
    names, own = [], set()  # own: dimensions only a reduction's variable indexes
    for d in range(rank):
        at = {t[d] for t in tuples if t[d] in contract.index_vars}
        if len(at) > 1:
            return None
        if at:
            names.append(out.index_vars[contract.index_vars.index(at.pop())])
        else:
            var = min(t[d] for t in tuples)  # the reduction's variable, when paired (one per dimension)
            names.append((var if var not in out.index_vars else f"{var}'") if d in paired else f"*{d}")
            own.add(d)
    if any(len(set(t)) != len(t) for t in tuples) or len(set(names)) != rank:
        return None
    if all(set(t) <= set(contract.index_vars) for t in tuples):
        present = set(names)
        comps = tuple(e if {x.name for x in walk_iexpr(e) if isinstance(x, IVar)} & set(out.index_vars) <= present
                      else None for e in out.components)
    else:
        where = [next((k for k, e in enumerate(out.components) if e == IVar(n)), None) for n in names]
        kept = [k for d, k in enumerate(where) if d not in own]
        if None in kept or kept != sorted(kept):
            return None  # the reduced tag would not line up with the output's
        comps = tuple(None if n.startswith("*") else IVar(n) for n in names)
    if all(x is None for x in comps):
        return None
    return TagDecl(tensor, tuple(names), comps, False, contract.span)


def paired_dims(contract: Contract, uses_mma: bool = False) -> dict:
    """tensor -> the dimensions whose index its tag must carry so that the kernel's tag rules check
    how a reduction pairs its factors. `sum(A[i, k] * B[k, j] for k)` multiplies A[i, k] with
    B[k, j] of the same k; with A tagged (i, *) and B (*, j) a kernel that pairs A[i, k] with
    B[k + 8, j] carries the right rows and columns, takes every k once, and computes something
    else. Tagged (i, k) and (k, j), the mma rule (`tag(a)[1] == tag(b)[0]`) compares them.

    Implied only where the layout the kernel's rule compares follows from the contract: the mma
    pattern (one factor [., k], one [k, .]), and factors of one rank with k at the same dimension
    (`x[i, k] * y[i, k]`) in a kernel without mma (the elementwise rule; an mma would take one of
    them transposed, as attention's Q K^T does, and compare other components). A tensor read at
    the variables of two reductions (attention's K[k, e]) is left out: which of its components an
    mma compares depends on the kernel. Left out, a factor's pairing is unchecked, and the output
    contract says so (`unpaired_factors`)."""
    out: dict = {}
    variables: dict = {}  # tensor -> the reduction variables it is read at
    for red in contract.reductions():
        for e in contract_elements(red.body):
            if red.var in e.indices:
                variables.setdefault(e.tensor, set()).add(red.var)
    for red in contract.reductions():
        factors = _factors(red)
        if len({(e.tensor, e.indices) for e in factors}) < 2 or any(e.indices.count(red.var) != 1 for e in factors):
            continue
        where = {(len(e.indices), e.indices.index(red.var)) for e in factors}
        if (len(where) == 1 and not uses_mma) or (len(factors) == 2 and where == {(2, 0), (2, 1)}):
            for e in factors:
                if len(variables[e.tensor]) == 1:
                    out.setdefault(e.tensor, set()).add(e.indices.index(red.var))
    return out


def _factors(red: CReduce) -> list:
    """The elements a reduction's body reads at its variable, each once."""
    return list(dict.fromkeys(e for e in contract_elements(red.body) if red.var in e.indices))


def unpaired_factors(kernel: Kernel, output: str) -> list:
    """(tensor, variable) of each factor of a reduction in `output`'s contract whose pairing with the
    other factors no tag follows: the reduction multiplies several elements read at its variable
    (`paired_dims`'s products) and this factor's tag does not carry that index as it is at the
    dimension the variable indexes (a `*` there, no tag, or another function of it)."""
    contract = kernel.contract_of(output)
    out = []
    for red in contract.reductions() if contract is not None else ():
        factors = _factors(red)
        if len({(e.tensor, e.indices) for e in factors}) < 2:
            continue
        for e in factors:
            decl = kernel.tag_of(e.tensor)
            dims = [d for d, v in enumerate(e.indices) if v == red.var]
            if decl is None or not all(IVar(decl.index_vars[d]) in decl.components for d in dims):
                if (e.tensor, red.var) not in out:
                    out.append((e.tensor, red.var))
    return out


def untracked_indices(kernel: Kernel, output: str) -> list:
    """(tensor, variable) where `output`'s contract reads an element at one of the output's own
    indices (`l` in `C[l, i, j] = sum(A[l, i, k] * B[l, k, j] for k)`) and the element's tag, or the
    output's, does not carry that index as it is: then which l the kernel reads is not compared (a
    batched GEMM that reads batch 0 of B for every l carries the right tags). Untagged inputs are
    `untagged_contract_inputs`'s."""
    contract = kernel.contract_of(output)
    if contract is None:
        return []
    out_decl = kernel.tag_of(output)
    out: list = []

    def carries(decl, dim: int) -> bool:
        return decl is not None and IVar(decl.index_vars[dim]) in decl.components

    for e in contract_elements(contract.expr):
        decl = kernel.tag_of(e.tensor)
        if decl is None:
            continue
        for dim, var in enumerate(e.indices):
            if var not in contract.index_vars:
                continue
            for tensor, ok in ((e.tensor, carries(decl, dim)),
                               (output, carries(out_decl, contract.index_vars.index(var)))):
                if not ok and (tensor, var) not in out:
                    out.append((tensor, var))
    return out


def untagged_contract_inputs(kernel: Kernel, output: str | None = None) -> list:
    """Inputs that a contract (`output`'s, or any) reads and that carry no tag, declared or
    derived: the elements of them that reach the output are not checked."""
    contracts = kernel.contracts if output is None else [c for c in kernel.contracts if c.tensor == output]
    names = dict.fromkeys(e.tensor for c in contracts for e in contract_elements(c.expr))
    return [n for n in names if kernel.tag_of(n) is None]


def walk_stmts(body):
    """Every statement, depth first, loop and branch bodies included."""
    for s in body:
        yield s
        if isinstance(s, For):
            yield from walk_stmts(s.body)
        elif isinstance(s, If):
            yield from walk_stmts(s.then)
            yield from walk_stmts(s.orelse)


def uses_cluster(kernel: Kernel) -> bool:
    """Whether a kernel runs in thread-block clusters: a cluster(...) shape of more than one block,
    or cluster statements (with cluster(1), each block is a cluster of one)."""
    return kernel.cluster != (1, 1, 1) or any(isinstance(s, CLUSTER_STMTS) for s in walk_stmts(kernel.body))


TMA_ROW_BYTES = 16  # a tensor map's row stride is a multiple of 16 bytes (cuTensorMapEncodeTiled)


def empty_grid(grid) -> str | None:
    """Why CUDA refuses a launch of `grid` (x, y, z blocks) for having no blocks, or None: every
    executor (the interpreter, the PTX simulator, the GPU) refuses it alike, as the verifier's
    `launch` obligation reports such sizes."""
    axis = next((a for a, v in enumerate(grid) if v < 1), None)
    if axis is None:
        return None
    return (f"the grid {tuple(grid)} has no blocks along {'xyz'[axis]} at these sizes: CUDA refuses a launch with "
            "no blocks (the verifier's `launch` obligation reports such sizes)")


def tma_tensors(kernel: Kernel) -> dict:
    """The global tensors a TMA copy moves -> the first statement that does (its tensor map needs a
    row stride of a multiple of TMA_ROW_BYTES)."""
    out: dict = {}
    for s in walk_stmts(kernel.body):
        if isinstance(s, (TmaLoad, TmaLoadMulticast)):
            out.setdefault(s.src.base, s)
        elif isinstance(s, TmaStore):
            out.setdefault(s.dst.base, s)
    return out


def uses_hopper(body) -> bool:
    """Whether a kernel body uses the Hopper async machinery (mbarriers, TMA, wgmma)."""
    for s in walk_stmts(body):
        if isinstance(s, HOPPER_STMTS) or (isinstance(s, Assign) and isinstance(s.op, Wgmma)):
            return True
    return False


def layout_offset(layout: LayoutLike, coords: tuple, ops):
    """Offset of the element at `coords` (one entry per top-level mode) under a shared layout."""
    inner = layout.inner if isinstance(layout, ComposedLayout) else layout
    if inner.rank == 1 and len(coords) == 1:
        off = inner.apply(coords[0], ops)
    else:
        off = None
        for i, c in enumerate(coords):
            term = inner.mode(i).apply(c, ops)
            off = term if off is None else ops.add(off, term)
    if isinstance(layout, ComposedLayout):
        off = layout.outer.apply(off, ops)
    return off


def reduction_groups(src: FragType, result: FragType) -> np.ndarray:
    """[T, V, V]: value w of a thread joins the group of its value v. Values of one thread that share
    a coordinate of the argument are copies of one element and count once; values whose coordinates
    differ only on the reduced axis form a group. (The interpreter reduces, and the verifier's
    coverage counts, through these groups.)"""

    def flat(typ):
        c = typ.coords.coord_table()
        if not c.shape[-1]:
            return np.zeros(c.shape[:2], dtype=np.int64)
        return np.ravel_multi_index(tuple(np.moveaxis(c, -1, 0)), typ.tile)

    src_flat = flat(src)
    first = np.zeros(src_flat.shape, dtype=bool)
    for t in range(src_flat.shape[0]):
        first[t, np.unique(src_flat[t], return_index=True)[1]] = True
    res = flat(result)
    return (res[:, :, None] == res[:, None, :]) & first[:, None, :]


def fma_pairing(ta: FragType, tb: FragType, tc: FragType) -> tuple[np.ndarray, np.ndarray]:
    """For the SIMT mma (atom fma): for each thread and c value at (i, j), the indices of the a
    values holding (i, k) and the b values holding (k, j), k = 0..K-1, as [threads, c values, K].
    The front end has checked that every thread holds them all."""
    K = ta.tile[1]
    M, N = tc.tile
    ca, cb, cc = ta.coords.coord_table(), tb.coords.coord_table(), tc.coords.coord_table()
    T = cc.shape[0]
    rows = np.arange(T)[:, None]

    def first_holder(coords, flat, size):
        # table[t, element] = the first value of thread t holding it (-1: none)
        big = coords.shape[1]
        table = np.full((T, size), big, dtype=np.int64)
        values = np.broadcast_to(np.arange(big), flat.shape)
        np.minimum.at(table, (np.broadcast_to(rows, flat.shape), flat), values)
        table[table == big] = -1
        return table

    atab = first_holder(ca, ca[..., 0] * K + ca[..., 1], M * K)
    btab = first_holder(cb, cb[..., 0] * N + cb[..., 1], K * N)
    ks = np.arange(K)
    i, j = cc[..., 0][..., None], cc[..., 1][..., None]
    ia = atab[rows[..., None], i * K + ks]
    ib = btab[rows[..., None], ks * N + j]
    if (ia < 0).any() or (ib < 0).any():
        raise ValueError("a thread lacks an operand of its SIMT mma (the front end checks this)")
    return ia, ib


def tensor_shapes(kernel: Kernel, sizes) -> dict[str, tuple]:
    """Concrete shape of every tensor parameter for the given sizes."""
    from argus_verify.diagnostics import ArgusError

    out = {}
    for t in kernel.tensors:
        dims = []
        for d in t.shape:
            if isinstance(d, IConst):
                dims.append(d.value)
            elif d.name in sizes:
                dims.append(int(sizes[d.name]))
            else:
                raise ArgusError(f"no value for size '{d.name}' of tensor '{t.name}' (give --shape {d.name}=...)",
                                 t.span)
        out[t.name] = tuple(dims)
    return out


def eval_int(e: IExpr, env) -> int:
    """Evaluate an integer expression on Python ints (grid extents, `requires`, uniform values);
    names come from `env`. Operators mean what the semantics table says."""
    from argus_verify import semantics

    if isinstance(e, IConst):
        return e.value
    if isinstance(e, IVar):
        if e.name not in env:
            raise KeyError(f"no value for '{e.name}'")
        return int(env[e.name])
    if isinstance(e, IUn):
        return int(semantics.INT_UNARY[e.op].ref(eval_int(e.a, env)))
    if isinstance(e, ISelect):
        return eval_int(e.a, env) if eval_int(e.cond, env) else eval_int(e.b, env)
    if isinstance(e, IBin):
        a, b = eval_int(e.a, env), eval_int(e.b, env)
        if semantics.INT_OPS[e.op].divides and b == 0:
            raise ZeroDivisionError(f"'{e.op}' by zero")
        return int(semantics.int_eval(e.op, a, b))
    raise KeyError(f"cannot evaluate {type(e).__name__} on the host")
