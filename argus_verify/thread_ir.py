"""The thread-level program form of an audited kernel (hand-written CUDA or PTX).

`argus audit` lifts PTX into this form (argus_verify.frontend.ptx) and the audit obligations
(argus_verify.smt.audit) analyse it with two symbolic threads. It is the program one thread runs:
structured control flow recovered from the PTX control-flow graph (`If`, natural loops as `Loop`
with `Break` exits, `Return`), register assignments with PTX opcodes, memory accesses with their
address operands, barriers, shuffles, cp.async groups and atomics, each with its source location.
Whatever the lifter could not recover is an explicit `Unsupported(reason, loc)`: the obligations
it may affect are then reported unknown, never proved.
"""

from __future__ import annotations

import attrs

# ---------------------------------------------------------------- operands


@attrs.frozen
class Reg:
    name: str  # "%r5", "%p1", "%rd3"


@attrs.frozen
class Imm:
    value: int | float
    is_float: bool = False


@attrs.frozen
class Special:
    name: str  # "tid.x", "ctaid.y", "ntid.x", "nctaid.x", "laneid", "warpid"


@attrs.frozen
class Sym:
    """The address of a variable (a shared array) or a kernel parameter's name in `ld.param`."""

    name: str


@attrs.frozen
class Addr:
    """`[base+offset]`: base is a Reg or a Sym (or None for an absolute address)."""

    base: Reg | Sym | None
    offset: int = 0


Operand = Reg | Imm | Special | Sym | Addr


@attrs.frozen
class Loc:
    """Where an instruction came from: its PTX line, and the `.loc` source file and line if any."""

    ptx_line: int
    file: str | None = None
    line: int = 0
    col: int = 0


# ---------------------------------------------------------------- statements


@attrs.define
class Op:
    """`dst = opcode(srcs)`: arithmetic, comparisons, moves, conversions (PTX semantics)."""

    opcode: str  # full dotted opcode, e.g. "mad.lo.s32", "setp.lt.and.s32", "cvta.to.global.u64"
    dsts: list  # [Reg] (two for setp with `p|q`)
    srcs: list  # [Operand]
    loc: Loc


@attrs.define
class Access:
    """A load, store or atomic on a state space ("global", "shared", "param", "local", "const",
    "generic"). `regs` are the data registers (vector accesses have several)."""

    kind: str  # "load" | "store" | "atomic"
    space: str
    addr: Addr
    width: int  # bytes per element
    count: int  # vector length
    regs: list
    opcode: str
    loc: Loc
    dst: Reg | None = None  # atomics with a result


@attrs.define
class CpAsync:
    """`cp.async.{ca,cg}.shared.global [dst], [src], size`: an asynchronous copy in the current group."""

    dst: Addr
    src: Addr
    size: int
    loc: Loc
    # bytes read from the source (the rest of `size` is zero-filled): a number, or a register
    src_size: int | Reg = 0


@attrs.define
class CpAsyncCommit:
    loc: Loc


@attrs.define
class CpAsyncWait:
    pending: int | None  # wait_group N; None for wait_all
    loc: Loc


@attrs.define
class Barrier:
    """`bar.sync id[, count]` / `barrier.sync` / `bar.arrive`."""

    kind: str  # "sync" | "arrive" | "red"
    barrier_id: Operand
    count: Operand | None
    loc: Loc


@attrs.define
class Shuffle:
    """`shfl.sync.MODE.b32 d[|p], a, b, c, membermask`."""

    mode: str  # idx | up | down | bfly
    dst: Reg | None
    pred: Reg | None
    value: Operand
    lane: Operand
    clamp: Operand
    mask: Operand
    loc: Loc


@attrs.define
class If:
    cond: Reg
    negate: bool
    then: list
    orelse: list
    loc: Loc


@attrs.define
class Loop:
    """A natural loop: the body runs again after its last statement until a `Break` leaves it."""

    body: list
    loc: Loc
    label: str = ""


@attrs.define
class Break:
    """Leave the innermost loop (unconditionally; conditions are `If`s around it)."""

    loc: Loc


@attrs.define
class Continue:
    """Go back to the head of the innermost loop (the loop's back edge)."""

    loc: Loc


@attrs.define
class Return:
    loc: Loc


@attrs.define
class Unsupported:
    """Something the lifter did not recover. `effects` says which obligations it can make wrong:
    "memory" (it may read or write memory: every memory obligation is unknown), "value" (it
    defines registers with unknown values: a witness that depends on them is not trusted)."""

    reason: str
    loc: Loc
    effects: str = "memory"  # "memory" | "order" (a synchronisation not modelled) | "value"
    dsts: list = attrs.field(factory=list)


Stmt = (Op | Access | CpAsync | CpAsyncCommit | CpAsyncWait | Barrier | Shuffle | If | Loop | Break | Continue | Return
    | Unsupported)


@attrs.define
class SharedVar:
    name: str
    size: int  # bytes; 0 for extern (dynamic) shared memory
    align: int
    extern: bool = False


@attrs.define
class Param:
    name: str  # the PTX name
    ptx_type: str  # "u64", "u32", "s32", "f32", ...
    source_name: str = ""  # the C name when known (from the .cu signature)
    pointee_bytes: int = 0  # element size of a pointer parameter when known


@attrs.define
class Kernel:
    name: str
    params: list  # [Param]
    shared: list  # [SharedVar]
    body: list  # [Stmt]
    loc: Loc
    regs: dict = attrs.field(factory=dict)  # register name -> PTX type ("pred", "b32", "f32", ...)


def walk(stmts):
    """Every statement, nested ones included, in program order."""
    for s in stmts:
        yield s
        if isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)
        elif isinstance(s, Loop):
            yield from walk(s.body)


def assigned_regs(stmts) -> set[str]:
    """Names of the registers the statements may write."""
    out: set[str] = set()
    for s in walk(stmts):
        if isinstance(s, Op):
            out.update(d.name for d in s.dsts)
        elif isinstance(s, Access):
            if s.kind == "load":
                out.update(r.name for r in s.regs if isinstance(r, Reg))
            if s.dst is not None:
                out.add(s.dst.name)
        elif isinstance(s, Shuffle):
            out.update(r.name for r in (s.dst, s.pred) if r is not None)
        elif isinstance(s, Unsupported):
            out.update(r.name for r in s.dsts)
    return out
