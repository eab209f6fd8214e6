"""Warpgroup roles in the interpreter: each warpgroup of a warp-specialised kernel (argus_verify/roles.py)
is its own scheduling unit, and the units meet only at `barrier()` and at mbarriers.

A unit runs until it stops: at a barrier (all units must come), at an mbarrier wait whose phase has
not completed and that no copy in flight can complete (it retries once another unit arrived or issued
a copy) or at its end. The unit that runs next is the last ready one: the producer warpgroup (the
last, by the roles' convention) refills a stage as soon as the protocol lets it, and the consumers
lag behind it as far as they may, so a stage released too early is overwritten (poisoned, as TMA
copies land late) before a consumer's wgmma reads it. When every unit is stopped and nothing can
change, the kernel would hang: a deadlock naming each warpgroup's role and the barrier and phase it
waits for. The `warpgroups:1` schedule runs the first ready unit first instead (warpgroup 0
ahead): between them the two orders let either side of a protocol run ahead.
"""

from __future__ import annotations

from argus_verify import roles
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.runtime.interp_hopper import Blocked, HopperState
from argus_verify.runtime.schedules import Arrival, UnitState, release_barrier

BLOCKED = "blocked"


def uses_roles(kernel) -> bool:
    return roles.has_roles(kernel)


def drive_roles(units: list, batch, first: bool = False) -> None:
    """Run one batch's warpgroup units to the end (see the module's docstring); `first`: the first
    ready unit runs first instead of the last (warpgroup 0 ahead, the others lagging)."""
    kernel = units[0].launch.kernel
    names = _role_names(kernel)
    for u in units:
        u.unit_hopper = HopperState(batch.G, batch.threads)
    states = [UnitState(u, u.run()) for u in units]
    hop = batch.hopper
    while True:
        for st in states:  # a stopped unit retries once another arrived or a copy was issued
            if st.status == BLOCKED and st.event.progress != hop.progress:
                st.status = "ready"
        ready = [st for st in states if st.status == "ready"]
        if not ready:
            live = [st for st in states if st.status != "done"]
            if not live:
                units[0].exit_blocks()  # TMA stores and loads still in flight at the blocks' exit
                return
            if all(st.status == "barrier" for st in live):
                release_barrier(states, batch)
                continue
            raise ArgusRuntimeError(_deadlock(states, names), _first_blocked(states, names))
        st = ready[0] if first else ready[-1]
        _advance(st)


def _advance(st: UnitState) -> None:
    try:
        event = st.steps.send(st.resume)
    except StopIteration:
        st.status = "done"
        return
    st.resume = None
    st.event = event
    st.status = BLOCKED if isinstance(event, Blocked) else "barrier" if isinstance(event, Arrival) else "ready"


def _role_names(kernel) -> dict:
    out = {}
    rs = roles.roles(kernel)
    for r in rs:
        tma = any(type(s).__name__ == "TmaLoad" for s in _walk(r.body))
        kind = "producer" if tma else "consumer"
        for w in r.warpgroups:
            out[w] = f"{kind} role (warpgroups {', '.join(map(str, r.warpgroups))})"
    return out


def _walk(body):
    from argus_verify import ir

    return ir.walk_stmts(body)


def _deadlock(states, names) -> str:
    parts = []
    for st in states:
        w = st.unit.first_thread // roles.WARPGROUP
        who = f"warpgroup {w}, {names.get(w, 'no role')}"
        if st.status == BLOCKED:
            line = st.event.stmt.span.line if st.event.stmt.span is not None else 0
            parts.append(f"{who} waits at line {line} on {st.event.what}")
        elif st.status == "barrier":
            parts.append(f"{who} waits at barrier()")
    return "deadlock: every warpgroup is stopped and none can go on: " + "; ".join(parts)


def _first_blocked(states, names):
    """The span to report: the producer's stopped wait (the pipeline's head), else the first one."""
    stopped = [st for st in states if st.status == BLOCKED]
    producer = [st for st in stopped if names.get(st.unit.first_thread // roles.WARPGROUP, "").startswith("producer")]
    first = (producer or stopped or [None])[0]
    return first.event.stmt.span if first is not None else None


__all__ = ["drive_roles", "uses_roles"]
