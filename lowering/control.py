"""Control: statements in program order, integer lets, loops and branches.

A mixin of `argus_verify.lowering.ptx.Lowerer`; it uses the lowerer's emitter `em`, names
`env`, `fixed` / `fixed_regs` (variables that keep one register across control flow), `ival` /
`pval` and, for loops, the software prefetch of `lowering.prefetch`.
"""

from __future__ import annotations

import math
from collections import defaultdict

from argus_verify import ir
from argus_verify.diagnostics import SOURCES, Span
from argus_verify.lowering.analysis import assigned_in
from argus_verify.lowering.emitter import Reg

MAX_FULL_UNROLL = 64


def _source_text(span: Span) -> str:
    text = SOURCES.line(span.file, span.line)
    return (text or "").strip()


class ControlLowering:
    def source_comment(self, span: Span) -> None:
        if span is None or span.line <= 0:
            return
        key = (span.file, span.line)
        if key == self.last_line:
            return
        self.last_line = key
        text = _source_text(span)
        self.em.comment(f"{span.file}:{span.line}  {text}" if text else f"{span.file}:{span.line}")

    def stmts(self, body) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s) -> None:
        self.source_comment(s.span)
        self.visit(s)

    def visit_Let(self, s: ir.Let) -> None:
        self.set_int(s.name, self.ival(s.value))

    def visit_Assert(self, s: ir.Assert) -> None:
        pass  # proved by the verifier; no code

    # -- branches --------------------------------------------------------------------------------
    def visit_If(self, s: ir.If) -> None:
        em = self.em
        p = self.pval(s.cond)
        if p is True:
            self.stmts(s.then)
            return
        if p is False:
            self.stmts(s.orelse)
            return
        els, done = em.label("else"), em.label("endif")
        em.emit(f"@!{p} bra {els if s.orelse else done};")
        em.push_region()
        self.stmts(s.then)
        em.pop_region()
        if s.orelse:
            em.emit(f"bra {done};")
            em.place_label(els)
            em.push_region()
            self.stmts(s.orelse)
            em.pop_region()
        em.place_label(done)
        self.last_line = None

    # -- loops -----------------------------------------------------------------------------------
    def visit_For(self, s: ir.For) -> None:
        em = self.em
        start = self.ival(s.start)
        stop = self.ival(s.stop)
        if self._unrolled_fully(s, start, stop):
            return
        stop_r = stop if isinstance(stop, int) else em.mat(stop)
        var = self._loop_counter(s, start, stop)
        unroll = s.unroll if (s.unroll or 0) > 1 else 1
        assigned = assigned_in(s.body) & self.fixed
        if unroll > 1:  # a main loop of `unroll` copies of the body, then a remainder loop
            stop_main = em.sub(stop, (unroll - 1) * s.step)
            stop_main_r = stop_main if isinstance(stop_main, int) else em.mat(stop_main)
            self._emit_loop(s, var, stop_main_r, unroll, assigned)
            self._emit_loop(s, var, stop_r, 1, assigned)
        else:
            prefetch = self.prefetch_plan(s) if self.prefetch else {}
            if prefetch:
                self.prefetch_prologue(s, start, stop, prefetch)
            self._emit_loop(s, var, stop_r, 1, assigned, prefetch)
        self.env.pop(s.var, None)

    def _unrolled_fully(self, s: ir.For, start, stop) -> bool:
        """Emit the body once per iteration when the trip count is a small constant within `unroll`."""
        if not (isinstance(start, int) and isinstance(stop, int) and s.unroll is not None):
            return False
        trips = len(range(start, stop, s.step))
        if trips > max(s.unroll, 1) or trips > MAX_FULL_UNROLL:
            return False
        for i in range(start, stop, s.step):
            self.env[s.var] = i
            self.stmts(s.body)
        self.env.pop(s.var, None)
        return True

    def _loop_counter(self, s: ir.For, start, stop) -> Reg:
        em = self.em
        lo_start, _ = em.bounds(start)
        _, hi_stop = em.bounds(stop)
        var = em.fixed("b32")
        self.loop_regs.add(var)
        info = em.info[var]
        info.mult = math.gcd(em.multiple(start), s.step) or s.step
        info.lo = lo_start
        info.hi = None if hi_stop is None else hi_stop - 1
        em.assign(var, start)
        return var

    def _emit_loop(self, s: ir.For, var: Reg, stop, copies: int, assigned: set, prefetch: dict | None = None
                   ) -> None:
        """Guard, `copies` copies of the body, and the back-edge; the body is emitted into its own
        buffer first, so loop-invariant instructions land in front of the guard."""
        em = self.em
        outer = em.level
        head, done = em.label("loop"), em.label("done")
        self._enter_loop(var, assigned)
        self._loop_bodies(s, var, stop, copies, prefetch or {})
        stop_text = stop if isinstance(stop, int) else stop.name
        em.invalidate(var)
        em.emit(f"add.s32 {var}, {var}, {copies * s.step};")
        em.emit(f"setp.lt.s32 %p_loop, {var}, {stop_text};")
        em.emit(f"@%p_loop bra {head};")
        body = em.pop_loop()
        self._leave_loop(var, assigned, outer)
        em.emit(f"setp.ge.s32 %p_loop, {var}, {stop_text};")
        em.emit(f"@%p_loop bra {done};")
        em.place_label(head)
        em.buffers[-1].extend(body)
        em.place_label(done)
        self.last_line = None

    def _enter_loop(self, var: Reg, assigned: set) -> None:
        # values kept in fixed registers change inside the loop: nothing reading them may be hoisted
        # out of it, and what was cached about them no longer holds.
        em = self.em
        em.invalidate(var)
        for r in self._fixed_regs_of(assigned):
            em.invalidate(r)
        em.push_loop()
        em.set_level(var, em.level)
        for r in self._fixed_regs_of(assigned):
            em.set_level(r, em.level)

    def _leave_loop(self, var: Reg, assigned: set, outer: int) -> None:
        em = self.em
        em.set_level(var, outer)
        for r in self._fixed_regs_of(assigned):
            em.set_level(r, outer)
            em.invalidate(r)
        em.invalidate(var)

    def _loop_bodies(self, s: ir.For, var: Reg, stop, copies: int, prefetch: dict) -> None:
        em = self.em
        after = defaultdict(list)  # statement index -> the prefetched loads it is the last reader of
        for i, (st, last) in prefetch.items():
            after[last].append((i, st))
        for u in range(copies):
            self.env[s.var] = var if u == 0 else em.add(var, u * s.step)
            self.last_line = None
            for j, st in enumerate(s.body):
                if j in prefetch:
                    self.use_prefetched(st)
                    continue
                self.stmt(st)
                for i, pst in after.get(j, ()):
                    self.prefetch_next(s, var, stop, i, pst)

    def _fixed_regs_of(self, names) -> list:
        out = []
        for name in names:
            r = self.fixed_regs.get(name)
            if r is not None:
                out += list(r) if isinstance(r, tuple) else [r]
        return out
