"""Small constant-trip loops that pass shared memory between iterations, unrolled for the analysis.

The analysis follows shared memory within one iteration of a loop: a value written in one iteration
and read in a later one is a pipelined stage to it, which coverage does not follow and the tag
queries meet only as a deep recurrence. The classic tree `for k in range(1, 9): h = 256 >> k;
if t < h: s[t] = s[t] + s[t + h]; barrier()` is such a loop (an outside probe's kernel: unknown
after 111 s). Unrolled, it is the straight-line tree that the last-writer analysis proves
(`last_writer.never_last`), with the loop variable a constant in each copy.

Only loops with constant bounds, few trips, a barrier and a shared buffer both stored and loaded in
the body, and neither async copies nor Hopper statements, are unrolled. The copies keep the source
spans, so a counterexample names the line; the program's meaning is unchanged, and the interpreter
and the lowering keep the loop.
"""

from __future__ import annotations

import attrs

from argus_verify import ir, semantics

MAX_TRIPS = 16
MAX_UNROLLED_STATEMENTS = 400  # statements of the body (nested ones included) times the trips


def unroll_shared_loops(kernel: ir.Kernel) -> ir.Kernel:
    """`kernel` with its qualifying loops unrolled (the same object when none qualifies)."""
    if ir.uses_hopper(kernel.body) or ir.uses_cluster(kernel):
        return kernel
    body, changed = _body(kernel.body)
    return attrs.evolve(kernel, body=body) if changed else kernel


def _body(stmts: tuple) -> tuple[tuple, bool]:
    out: list = []
    changed = False
    for s in stmts:
        if isinstance(s, ir.For):
            trips = _trips(s)
            if trips is not None and _passes_shared(s):
                for value in trips:
                    out.extend(_fresh(st, s.var, value) for st in s.body)
                changed = True
                continue
            inner, c = _body(s.body)
            if c:
                s = attrs.evolve(s, body=inner)
                changed = True
        elif isinstance(s, ir.If):
            then, c1 = _body(s.then)
            orelse, c2 = _body(s.orelse)
            if c1 or c2:
                s = attrs.evolve(s, then=then, orelse=orelse)
                changed = True
        out.append(s)
    return tuple(out), changed


def _trips(loop: ir.For) -> range | None:
    start, stop = _const(loop.start), _const(loop.stop)
    if start is None or stop is None or loop.step == 0:
        return None
    trips = range(start, stop, loop.step)
    size = sum(1 for _ in ir.walk_stmts(loop.body))
    if len(trips) > MAX_TRIPS or len(trips) * size > MAX_UNROLLED_STATEMENTS:
        return None
    return trips


def _const(e) -> int | None:
    if isinstance(e, ir.IConst):
        return e.value
    if isinstance(e, ir.IBin):
        a, b = _const(e.a), _const(e.b)
        return None if a is None or b is None else semantics.fold(e.op, a, b)
    if isinstance(e, ir.IUn) and e.op == "-":
        a = _const(e.a)
        return None if a is None else -a
    return None


def _passes_shared(loop: ir.For) -> bool:
    """A barrier, and a shared buffer both stored and loaded, in the body; nothing asynchronous and
    no allocation (each copy would allocate again)."""
    stmts = list(ir.walk_stmts(loop.body))
    if any(isinstance(s, (ir.CopyAsync, ir.Commit, ir.Wait, ir.SharedAlloc)) for s in stmts):
        return False
    if not any(isinstance(s, ir.Barrier) for s in stmts):
        return False
    stored = {s.dst.base for s in stmts if isinstance(s, ir.Store) and s.dst.space == "shared"}
    loaded = {s.op.src.base for s in stmts
              if isinstance(s, ir.Assign) and isinstance(s.op, ir.Load) and s.op.src.space == "shared"}
    return bool(stored & loaded)


def _fresh(node, var: str, value: int):
    """A new copy of an IR node with the loop variable replaced by `value`. Every IR object is new, so
    analyses that key statements by identity see each copy as its own statement."""
    if isinstance(node, ir.IVar) and node.name == var:
        return ir.IConst(value, node.span)
    if isinstance(node, tuple):
        return tuple(_fresh(x, var, value) for x in node)
    if attrs.has(type(node)) and type(node).__module__ == ir.__name__:
        changes = {f.alias: _fresh(getattr(node, f.name), var, value)
                   for f in attrs.fields(type(node)) if f.init}
        return type(node)(**changes)
    return node
