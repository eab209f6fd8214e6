"""Warpgroup roles (warp specialisation) and their register policy.

A *role* is a branch of an `if` whose condition depends on the thread only through its warpgroup
(`warpgroup_id`, i.e. thread_id // 128): every thread of a warpgroup takes the same branch, so the
branch is run by whole warpgroups, independently of the others (a producer warpgroup issuing TMA
loads, consumer warpgroups issuing wgmma). A role may begin with `setmaxnreg(n)`: the per-thread
register count its warpgroups run with. The compiler fixes the launch count (`.maxnreg`) so that
the whole block fits the register file at launch, and checks that the roles' counts fit it too:
n * 128 registers per warpgroup, summed over the block's warpgroups, at most 64 K (PTX ISA,
setmaxnreg: n in 24..256, a multiple of 8; .inc needs n >= the current count, .dec n <= it).

Every stage reads roles from here: the frontend (fragments inside a role are spread over the
role's warpgroups), the lowering (setmaxnreg.inc/dec against the launch count, wgmma's warpgroup
count), the interpreter and the protocol checker (each warpgroup runs as its own unit).
"""

from __future__ import annotations

import attrs
import numpy as np

from argus_verify import ir, semantics

WARPGROUP = 128
REGISTER_FILE = 64 * 1024  # 32-bit registers per SM, the most one block may hold (Hopper)
REG_GRANULE = 8  # setmaxnreg counts and the launch count come in multiples of 8
SETMAXNREG_RANGE = (24, 256)


def warpgroup_split(cond: ir.IExpr, block: int) -> tuple[tuple, tuple] | None:
    """(warpgroups taking the then branch, those taking the else branch) when `cond` is a function of
    the thread's warpgroup alone that not every warpgroup agrees on; None otherwise."""
    if block % WARPGROUP or block <= WARPGROUP:
        return None
    tids = np.arange(block, dtype=np.int64)
    try:
        v = _eval(cond, tids)
    except _NotWarpgroup:
        return None
    v = np.broadcast_to(np.asarray(v) != 0, (block,)).reshape(-1, WARPGROUP)
    if not (v == v[:, :1]).all():
        return None
    per = v[:, 0]
    if per.all() or not per.any():
        return None
    return tuple(int(w) for w in np.nonzero(per)[0]), tuple(int(w) for w in np.nonzero(~per)[0])


class _NotWarpgroup(Exception):
    pass


def _eval(e: ir.IExpr, tids: np.ndarray):
    if isinstance(e, ir.IConst):
        return e.value
    if isinstance(e, ir.ISpecial) and e.which in ir.PER_THREAD_SPECIALS:
        return {"thread_id": tids, "warp_id": tids // 32, "lane_id": tids % 32}[e.which]
    if isinstance(e, ir.IBin):
        a, b = _eval(e.a, tids), _eval(e.b, tids)
        if semantics.INT_OPS[e.op].divides and np.any(np.asarray(b) == 0):
            raise _NotWarpgroup
        return semantics.int_eval(e.op, a, b)
    if isinstance(e, ir.IUn):
        return semantics.INT_UNARY[e.op].ref(np.asarray(_eval(e.a, tids)))
    raise _NotWarpgroup


@attrs.frozen
class Role:
    warpgroups: tuple  # the warpgroups that run it
    body: tuple  # its statements
    registers: int | None  # its setmaxnreg count (None: the launch count)
    span: object  # the setmaxnreg statement, or the if


def roles(kernel: ir.Kernel) -> list[Role]:
    """The roles of the kernel's warpgroup splits (outermost splits only), in source order."""
    out: list[Role] = []

    def walk(body):
        for s in body:
            if isinstance(s, ir.If):
                split = None if s.plain else warpgroup_split(s.cond, kernel.block)
                if split is not None:
                    for wgs, branch in zip(split, (s.then, s.orelse), strict=True):
                        first = branch[0] if branch else None
                        regs = first.count if isinstance(first, ir.SetMaxNReg) else None
                        out.append(Role(wgs, branch, regs, first.span if regs is not None else s.span))
                    continue
                walk(s.then)
                walk(s.orelse)
            elif isinstance(s, ir.For):
                walk(s.body)

    walk(kernel.body)
    return out


def has_roles(kernel: ir.Kernel) -> bool:
    return bool(roles(kernel))


def launch_registers(kernel: ir.Kernel) -> int:
    """The per-thread register count the kernel launches with: its maxnreg policy, else the most that
    lets one block of its size fit the register file (a multiple of 8)."""
    given = kernel.policy("maxnreg")
    if given is not None:
        return int(given)
    return min(255, REGISTER_FILE // kernel.block // REG_GRANULE * REG_GRANULE)


def role_of_statements(kernel: ir.Kernel) -> dict:
    """id(statement) -> its Role, for every statement inside a role."""
    out: dict = {}
    for r in roles(kernel):
        for s in ir.walk_stmts(r.body):
            out[id(s)] = r
    return out


def fragment_warpgroups(kernel: ir.Kernel, stmt) -> int:
    """How many warpgroups a fragment statement's values are spread over: its role's, else the block's."""
    r = role_of_statements(kernel).get(id(stmt))
    return len(r.warpgroups) if r is not None else kernel.block // WARPGROUP


def register_plan(kernel: ir.Kernel) -> tuple[int, list[tuple[Role, str]]]:
    """(launch count, [(role, "inc" | "dec" | "")]) for the roles that set a count; raises
    ValueError(message, span) when the policy cannot hold."""
    launch = launch_registers(kernel)
    if launch * kernel.block > REGISTER_FILE:
        raise ValueError(f"the launch count of {launch} registers per thread for {kernel.block} threads needs "
                         f"{launch * kernel.block} registers, over the {REGISTER_FILE} of the register file",
                         kernel.span)
    rs = roles(kernel)
    plan = []
    per_wg = {w: launch for w in range(kernel.block // WARPGROUP)}
    for r in rs:
        if r.registers is None:
            continue
        n = r.registers
        action = "inc" if n > launch else "dec" if n < launch else ""
        plan.append((r, action))
        for w in r.warpgroups:
            per_wg[w] = n
    total = sum(per_wg.values()) * WARPGROUP
    if plan and total > REGISTER_FILE:
        worst = max((r for r, _ in plan), key=lambda r: r.registers)
        parts = " + ".join(f"{per_wg[w]}" for w in sorted(per_wg))
        raise ValueError(f"the roles' register counts ({parts} per thread, 128 threads per warpgroup) need "
                         f"{total} registers, over the {REGISTER_FILE} of the register file", worst.span)
    return launch, plan


def register_only_values(kernel: ir.Kernel) -> set:
    """Values of the compile-time constants that setmaxnreg names (register counts, no size quantum),
    unless another constant has the same value."""
    named = {s.const for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.SetMaxNReg) and s.const}
    values = dict(kernel.consts)
    return {values[n] for n in named
            if n in values and not any(v == values[n] and m not in named for m, v in kernel.consts)}
