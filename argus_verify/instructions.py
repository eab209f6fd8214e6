"""Every builtin of the Argus language, declared once.

A declaration states a builtin's name, its arguments (positional ones, then keyword-only ones with
their defaults), what it produces, its type rule in words and a one-line help text. The front end
checks arity and keywords against it and finds each builtin's handler through this table
(tests/test_frontend_builtins.py fails when a declaration has no handler or a handler no
declaration); docs/language.md lists every name declared here.

Elementwise math functions, reductions and shuffles are declared from the semantics table, so an
entry added there (say `tanh` in `FLOAT_UNARY`) is a builtin `tanh(x)` without any other change.

This module is core: it imports no stage.
"""

from __future__ import annotations

import attrs

from argus_verify import ir
from argus_verify.semantics import FLOAT_UNARY, REDUCE_OPS, SHUFFLE_MODES

REQUIRED = object()  # the default of an argument that must be given

# what a builtin produces
FRAGMENT = "fragment"  # a tile distributed over the block's threads
STATEMENT = "statement"  # nothing: it acts (memory, synchronisation)
LAUNCH = "launch"  # nothing: it configures the kernel (top level only)
LAYOUT = "layout"  # a compile-time layout or swizzle
INTEGER = "integer"  # an integer expression
FRAGMENT_OR_INTEGER = "fragment or integer"  # whichever its operands are
ALLOCATION = "allocation"  # a shared-memory allocation
LOOP = "loop"  # the iteration space of a `for` loop
FLOAT = "float"  # a floating-point constant
PRODUCES = (FRAGMENT, STATEMENT, LAUNCH, LAYOUT, INTEGER, FRAGMENT_OR_INTEGER, ALLOCATION, LOOP, FLOAT)

# how a builtin is written
CALL = "call"  # name(args)
COMPONENT = "component"  # name(x)[k], in assertions
VALUE = "value"  # a bare name (thread_id, block_id.x, inf)
FORMS = (CALL, COMPONENT, VALUE)



@attrs.frozen
class Param:
    """One argument. `shown`: how the default reads in the signature (`tv=L`); `choices`: the bare
    words the argument takes (`scope=warp`), if it takes words; `what`: what a required keyword
    argument is, for the error that says it is missing."""

    name: str
    default: object = REQUIRED
    shown: str | None = None
    choices: tuple = ()
    what: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def text(self, keyword: bool) -> str:
        if not keyword:
            return self.name if self.required else f"{self.name}={self._default_text()}"
        return f"{self.name}={self._default_text()}"

    def _default_text(self) -> str:
        if self.shown is not None:
            return self.shown
        return self.name.upper() if self.required else str(self.default)


@attrs.frozen
class Builtin:
    """A builtin. `variadic`: a trailing run of positional arguments (name stem, fewest allowed),
    e.g. reshape's new dimensions; `usage`: the signature where the arguments are irregular
    (range); `pending`: why the front end refuses it for now."""

    name: str
    family: str
    produces: str
    doc: str
    rule: str
    positional: tuple = ()
    keywords: tuple = ()
    variadic: tuple | None = None
    form: str = CALL
    usage: str | None = None
    pending: str | None = None

    @property
    def min_positional(self) -> int:
        return sum(p.required for p in self.positional) + (self.variadic[1] if self.variadic else 0)

    @property
    def max_positional(self) -> float:
        return float("inf") if self.variadic else len(self.positional)

    def keyword(self, name: str) -> Param | None:
        return next((p for p in self.keywords if p.name == name), None)

    @property
    def signature(self) -> str:
        if self.usage is not None:
            return self.usage
        if self.form == VALUE:
            return self.name
        args = [p.text(keyword=False) for p in self.positional]
        if self.variadic:
            stem, _ = self.variadic
            args += [f"{stem}0", f"{stem}1", "..."]
        args += [p.text(keyword=True) for p in self.keywords]
        call = f"{self.name}({', '.join(args)})"
        return call + "[k]" if self.form == COMPONENT else call

    @property
    def help(self) -> str:
        return f"{self.signature}: {self.doc}"


def _p(name: str, default: object = REQUIRED, shown: str | None = None, choices: tuple = (), what: str = "") -> Param:
    return Param(name, default, shown, choices, what)


_TV = _p("tv", shown="L", what="a thread-value layout such as (256, 4):(4, 1)")

_KERNEL = (
    Builtin("grid", "kernel", LAUNCH, "the launch grid: blocks along x, y and z",
            "extents are integer expressions of sizes, integer parameters and constants",
            (_p("x"), _p("y", 1), _p("z", 1))),
    Builtin("block", "kernel", LAUNCH, "the number of threads of a block",
            "a constant multiple of 32 between 32 and 1024", (_p("threads"),)),
    Builtin("cluster", "kernel", LAUNCH, "the thread-block cluster shape: blocks along x, y and z per cluster",
            "constants >= 1 of at most 8 blocks in all; the grid's extents must be multiples of them",
            (_p("x"), _p("y", 1), _p("z", 1))),
    Builtin("policy", "kernel", LAUNCH, "code-generation choices; they never change the meaning",
            "min_blocks_per_sm in 1..32, maxnreg in 1..255 (constants), prefetch True or False",
            keywords=(_p("min_blocks_per_sm", None), _p("maxnreg", None), _p("prefetch", False))),
)

_MEMORY = (
    Builtin("load", "memory", FRAGMENT, "thread t, value v reads view element coords(t, v)",
            "a view of a tensor or shared allocation and a tv layout over its tile; the fragment has the "
            "view's dtype; mask= (global views only) reads `other` outside the tensor; vec= elements per access",
            (_p("view"),), (_TV, _p("mask", False), _p("other", 0.0), _p("vec", None))),
    Builtin("store", "memory", STATEMENT, "every (t, v) whose thread satisfies `where` writes its value",
            "a view of an output tensor or shared allocation and a fragment of the same dtype and tile",
            (_p("view"), _p("frag")), (_p("mask", False), _p("where", None))),
    Builtin("zeros", "memory", FRAGMENT, "a fragment of zeros",
            "a tile type such as f32[64, 64] and a tv layout over that tile", (_p("tile"),), (_TV,)),
    Builtin("full", "memory", FRAGMENT, "a fragment holding one constant",
            "a tile type, a constant value and a tv layout over the tile", (_p("tile"), _p("value")), (_TV,)),
    Builtin("shared", "memory", ALLOCATION, "a shared-memory allocation",
            "a tile type; layout= maps each coordinate to a non-negative offset (default row-major), "
            "at most 227 KB", (_p("tile"),), (_p("layout", None, shown="row_major"),)),
    Builtin("copy_async", "memory", STATEMENT, "cp.async from a global view into a shared view",
            "views of equal dtype and tile; vec= elements (4, 8 or 16 bytes) per copy; the data lands when "
            "a later wait() retires its group", (_p("dst"), _p("src")),
            (_TV, _p("mask", False), _p("vec", None))),
    Builtin("commit", "memory", STATEMENT, "closes the current group of async copies", "no arguments"),
    Builtin("wait", "memory", STATEMENT, "waits until at most n committed groups are in flight",
            "n is a non-negative constant", (_p("n", 0),)),
    Builtin("barrier", "memory", STATEMENT, "bar.sync 0: every thread of the block meets here",
            "no arguments; inside an if, the condition must be the same for the whole block"),
    Builtin("stmatrix", "memory", STATEMENT, "warp-level 8x8 matrix stores to shared memory",
            "a shared view of 16-bit elements, a fragment of its tile, a count x1, x2 or x4 and rows= as for "
            "ldmatrix; every value must land at its own coordinate", (_p("view"), _p("frag"), _p("count", choices=(
                "x1", "x2", "x4"))),
            (_p("rows", shown="L", what="a layout (threads, instructions) -> the tile element each row starts at"),
             _p("trans", False))),
    Builtin("ldmatrix", "memory", FRAGMENT, "warp-level 8x8 matrix loads from shared memory",
            "a shared view of 16-bit elements, a count x1, x2 or x4 and rows= a layout (threads, "
            "instructions) -> tile element where the row each thread supplies starts; the result holds what "
            "the lanes receive", (_p("view"), _p("count", choices=("x1", "x2", "x4"))),
            (_p("rows", shown="L", what="a layout (threads, instructions) -> the tile element each row starts at"),
             _p("trans", False))),
)

_BAR = _p("bar", what="an mbarrier: one element of an mbarrier(n) allocation, such as full[s]")

# Hopper's asynchronous machinery (argus_verify.hopper derives the hardware's parameters)
_HOPPER = (
    Builtin("mbarrier", "hopper", ALLOCATION, "n mbarriers in shared memory (8 bytes each)",
            "a constant count n >= 1; index it (full[s]) to name one barrier", (_p("n"),)),
    Builtin("mbarrier_init", "hopper", STATEMENT, "mbarrier.init: phase 0, `count` arrivals expected per phase",
            "an mbarrier and a positive integer; run it in one thread, then fence_mbarrier_init() and "
            "barrier()", (_BAR, _p("count"))),
    Builtin("mbarrier_arrive", "hopper", STATEMENT, "mbarrier.arrive: one arrival on the current phase",
            "an mbarrier", (_BAR,)),
    Builtin("mbarrier_expect_tx", "hopper", STATEMENT,
            "mbarrier.arrive.expect_tx: one arrival, and `bytes` more transaction bytes the phase waits for",
            "an mbarrier and a non-negative integer byte count", (_BAR, _p("bytes"))),
    Builtin("mbarrier_wait", "hopper", STATEMENT,
            "mbarrier.try_wait.parity loop: waits until the phase of parity `parity` has completed",
            "an mbarrier and an integer whose value is 0 or 1", (_BAR, _p("parity"))),
    Builtin("fence_mbarrier_init", "hopper", STATEMENT,
            "fence.mbarrier_init.release.cluster: makes mbarrier inits visible to the async proxy",
            "no arguments"),
    Builtin("fence_proxy_async", "hopper", STATEMENT,
            "fence.proxy.async.shared::cta: orders this thread's generic shared writes before async-proxy "
            "reads (wgmma, TMA stores)", "no arguments"),
    Builtin("tma_load", "hopper", STATEMENT,
            "cp.async.bulk.tensor global -> shared of a tile, zero fill outside the tensor, completing its "
            "bytes on an mbarrier", "a shared view and a global view of the same 2-D tile and dtype, and an "
                                    "mbarrier; guard it to one thread", (_p("dst"), _p("src"), _BAR)),
    Builtin("tma_load_multicast", "hopper", STATEMENT,
            "cp.async.bulk.tensor .multicast::cluster: tma_load into the same shared view of every CTA of the "
            "cluster named in `mask` (bit r: rank r), each completing its bytes on its own mbarrier `bar`",
            "as tma_load, in a kernel with a cluster(...) shape, and an integer mask of cluster ranks",
            (_p("dst"), _p("src"), _BAR, _p("mask"))),
    Builtin("mbarrier_arrive_cluster", "hopper", STATEMENT,
            "mapa + mbarrier.arrive.shared::cluster: one arrival on mbarrier `bar` of the cluster's CTA of "
            "rank `cta`, after this thread's earlier instructions (a consumer's release of a stage)",
            "an mbarrier and an integer rank in the cluster", (_BAR, _p("cta"))),
    Builtin("cluster_sync", "hopper", STATEMENT,
            "barrier.cluster.arrive.release + barrier.cluster.wait.acquire: every thread of every CTA of the "
            "cluster meets here", "no arguments; top level of a kernel with a cluster(...) shape"),
    Builtin("wgmma", "hopper", FRAGMENT, "wgmma.mma_async m64nNk16: c + a @ b from shared memory, asynchronous",
            "shared views a [M, K] and b [K, N] of bf16 or f16 (M a multiple of 64, K of 16), c an f32 "
            "fragment [M, N] in the accumulator layout; the result is ready after wgmma_wait",
            (_p("a"), _p("b"), _p("c"))),
    Builtin("wgmma_fence", "hopper", STATEMENT, "wgmma.fence: orders register accesses before wgmma",
            "no arguments"),
    Builtin("wgmma_commit", "hopper", STATEMENT, "wgmma.commit_group: closes the current group of wgmmas",
            "no arguments"),
    Builtin("wgmma_wait", "hopper", STATEMENT,
            "wgmma.wait_group n: waits until at most n committed wgmma groups are in flight",
            "n is a non-negative constant", (_p("n", 0),)),
    Builtin("setmaxnreg", "hopper", STATEMENT,
            "setmaxnreg.inc/dec: the per-thread register count of the role's warpgroups (docs/language.md)",
            "a constant multiple of 8 in 24..256, the first statement of a warpgroup role "
            "(if warpgroup_id ...:)", (_p("count"),)),
)

# the TMA store and its bulk groups (the epilogue: shared tile -> global through the async proxy)
_TMA_STORE = (
    Builtin("tma_store", "hopper", STATEMENT,
            "cp.async.bulk.tensor shared -> global of a tile in the thread's bulk group; box elements outside "
            "the tensor are not written", "a global view and a shared view of the same 2-D tile and dtype; guard "
                                          "it to one thread, after fence_proxy_async() and barrier()",
            (_p("dst"), _p("src"))),
    Builtin("bulk_commit", "hopper", STATEMENT, "cp.async.bulk.commit_group: closes the thread's current bulk group",
            "no arguments"),
    Builtin("bulk_wait", "hopper", STATEMENT,
            "cp.async.bulk.wait_group.read n: at most n bulk groups still read their shared sources "
            "(writes=True: wait_group n, their global writes complete too)",
            "n is a constant in 0..7", (_p("n", 0),), (_p("writes", False),)),
)

# every unary entry of the table is a function (`neg(x)` is also written `-x`)
_UNARY = tuple(
    Builtin(name, "compute", FRAGMENT, entry.doc, "a floating-point fragment; the result has its layout",
            (_p("x"),))
    for name, entry in FLOAT_UNARY.items()
)

_REDUCE = tuple(
    Builtin(f"reduce_{name}", "compute", FRAGMENT, f"the {entry.doc} of the values whose coordinates agree on "
            "every axis but `axis`",
            "a fragment and a constant axis; scope=warp also combines the lanes whose ids differ in the bits "
            "of lanes= (a mask in 1..31); the result's coordinate on `axis` is 0",
            (_p("x"),), (_p("axis", shown="k", what="the tile axis to reduce"),
                         _p("scope", "thread", shown="thread", choices=("thread", "warp")), _p("lanes", 0)))
    for name, entry in REDUCE_OPS.items()
)

_COMPUTE = (
    *_UNARY,
    *_REDUCE,
    Builtin("cast", "compute", FRAGMENT, "elementwise conversion, rounding to nearest even",
            "a fragment and a dtype; the result has the fragment's layout", (_p("x"), _p("dtype"))),
    Builtin("min", "compute", FRAGMENT_OR_INTEGER, "elementwise minimum of fragments, or of integers",
            "two integers, or operands of which at least one is a fragment (as for `+`)", (_p("a"), _p("b"))),
    Builtin("max", "compute", FRAGMENT_OR_INTEGER, "elementwise maximum of fragments, or of integers",
            "two integers, or operands of which at least one is a fragment (as for `+`)", (_p("a"), _p("b"))),
    Builtin("mma", "compute", FRAGMENT, "c + a @ b on tiles a [M, K], b [K, N], c [M, N]",
            "three 2-D fragments, a and b of one dtype; with atom=fma every thread holds the rows of a and "
            "columns of b its c values need; the result has c's layout",
            (_p("a"), _p("b"), _p("c")), (_p("atom", "fma", shown="fma", choices=tuple(ir.MMA_ATOMS)),)),
    Builtin("transpose", "compute", FRAGMENT, "the same registers with row and column swapped",
            "a 2-D fragment; no data moves", (_p("x"),)),
    Builtin("reshape", "compute", FRAGMENT, "the same registers relabelled over a new tile shape",
            "a fragment and constant dimensions with the same number of elements; no data moves",
            (_p("x"),), variadic=("d", 1)),
    Builtin("cdiv", "integer", INTEGER, "ceiling division", "two integers", (_p("a"), _p("b"))),
)

_WARP = tuple(
    Builtin(f"shfl_{name}", "warp", FRAGMENT, f"warp shuffle of every value; lane l reads {entry.doc}",
            "a fragment of 32-bit values and an integer argument (a constant one must be in 0..31)",
            (_p("x"), _p("arg")))
    for name, entry in SHUFFLE_MODES.items()
)

_LAYOUT = (
    Builtin("Swizzle", "layout", LAYOUT, "xor of bits [M+S, M+S+B) into bits [M, M+B) of an offset",
            "constants B, M >= 0 and |S| >= B; compose it with a layout: Swizzle(3, 3, 3) o (8, 64):(64, 1)",
            (_p("B"), _p("M"), _p("S"))),
    Builtin("row_major", "layout", LAYOUT, "the row-major layout of a shape", "constant dimensions",
            variadic=("d", 1)),
    Builtin("col_major", "layout", LAYOUT, "the column-major layout of a shape", "constant dimensions",
            variadic=("d", 1)),
)

_CONTROL = (
    Builtin("range", "control", LOOP, "the iteration space of a for loop",
            "integer bounds the same for every thread of the block, a positive constant step; unroll= a "
            "constant >= 1", (_p("start"), _p("stop", None), _p("step", 1)), (_p("unroll", None),),
            usage="range([start,] stop[, step], unroll=None)"),
    Builtin("tag", "assertion", INTEGER, "component k of the tag of fragment x's value",
            "assertions only; x is a fragment and k a constant", (_p("x"),), form=COMPONENT),
    Builtin("coord", "assertion", INTEGER, "coordinate k of fragment x's value in its tile",
            "assertions only; x is a fragment and k a constant axis", (_p("x"),), form=COMPONENT),
)

_VALUES = (
    Builtin("thread_id", "kernel", INTEGER, "the thread's index in its block", "differs between threads",
            form=VALUE),
    Builtin("warp_id", "kernel", INTEGER, "thread_id // 32", "differs between threads", form=VALUE),
    Builtin("warpgroup_id", "kernel", INTEGER, "thread_id // 128", "differs between warpgroups; an if on it "
            "alone splits the block into warpgroup roles", form=VALUE),
    Builtin("lane_id", "kernel", INTEGER, "thread_id % 32", "differs between threads", form=VALUE),
    Builtin("block_id", "kernel", INTEGER, "the block's index in the grid (.x, .y, .z)",
            "the same for every thread of a block", form=VALUE, usage="block_id.x"),
    Builtin("num_blocks", "kernel", INTEGER, "the grid's extents (.x, .y, .z)", "the same for every thread",
            form=VALUE, usage="num_blocks.x"),
    Builtin("cluster_rank", "kernel", INTEGER, "the block's rank in its cluster (%cluster_ctarank): "
            "block_id.x % cx + cx * (block_id.y % cy) + cx * cy * (block_id.z % cz)",
            "the same for every thread of a block; needs cluster(...)", form=VALUE),
    Builtin("inf", "constant", FLOAT, "positive infinity (-inf: negative)", "a floating-point constant",
            form=VALUE),
    Builtin("nan", "constant", FLOAT, "not a number", "a floating-point constant", form=VALUE),
)

BUILTINS: dict[str, Builtin] = {b.name: b for b in (*_KERNEL, *_MEMORY, *_HOPPER, *_COMPUTE, *_WARP, *_LAYOUT,
                                                   *_CONTROL, *_VALUES, *_TMA_STORE)}

# mma atoms the front end refuses for now, and why

# the bare words some arguments take (scope=warp, atom=fma, x4): names only in those positions
BARE_WORDS = frozenset(w for b in BUILTINS.values() for p in (*b.positional, *b.keywords) for w in p.choices)


def unary_op(name: str) -> str | None:
    """The semantics table's elementwise operator a builtin applies, if it is one."""
    return name if name in FLOAT_UNARY and name in BUILTINS else None


def reduce_op(name: str) -> str | None:
    """The reduction of a `reduce_<op>` builtin."""
    op = name.removeprefix("reduce_")
    return op if name.startswith("reduce_") and op in REDUCE_OPS else None


def shuffle_mode(name: str) -> str | None:
    """The lane rule of a `shfl_<mode>` builtin."""
    mode = name.removeprefix("shfl_")
    return mode if name.startswith("shfl_") and mode in SHUFFLE_MODES else None
