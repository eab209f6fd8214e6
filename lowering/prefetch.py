"""Software prefetch: global loads of a loop body issued one iteration ahead.

A mixin of `argus_verify.lowering.ptx.Lowerer` (used by `lowering.control` for loops without
unrolling); it uses the lowerer's emitter, names and `load_values` of `lowering.memory`. Inputs do
not change during a launch, so a load whose address depends only on the loop variable, loop
invariants and pure integer lets of the body can be issued for iteration i + 1 right after its
last reader in iteration i, into the registers iteration i + 1 then reads.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.lowering.analysis import READS, assigned_in, iexpr_names, view_names
from argus_verify.lowering.values import REG_KIND, Frag, check_dtype


class PrefetchLowering:
    def prefetch_plan(self, s: ir.For) -> dict:
        """{index of a prefetchable load in the body: (its Assign, index of its last reader)}."""
        written = assigned_in(s.body)
        pure_lets: dict = {}
        out = {}
        for i, st in enumerate(s.body):
            if isinstance(st, ir.Let):
                if st.name not in self.fixed and st.name not in pure_lets and self._invariant(
                        iexpr_names(st.value), s, pure_lets, written):
                    pure_lets[st.name] = i
                continue
            last = self._last_reader(s, i, st, pure_lets, written)
            if last is not None:
                out[i] = (st, last)
        return out

    @staticmethod
    def _invariant(names: set, s: ir.For, pure_lets: dict, written: set) -> bool:
        """Every name is the loop variable, a pure let of the body or not written in the body."""
        return all(n == s.var or n in pure_lets or n not in written for n in names)

    def _last_reader(self, s: ir.For, i: int, st, pure_lets: dict, written: set) -> int | None:
        """For a prefetchable load at body index i, the index of the last statement reading it."""
        if not (isinstance(st, ir.Assign) and isinstance(st.op, ir.Load) and st.op.src.space == "global"):
            return None
        if st.name in self.fixed or id(st) in self.deferred_ids or self.k.param(st.op.src.base).output:
            return None
        if not self._invariant(view_names(st.op.src), s, pure_lets, written):
            return None
        writes = sum(1 for x in ir.walk_stmts(s.body) if isinstance(x, ir.Let | ir.Assign) and x.name == st.name)
        readers = [j for j, x in enumerate(s.body) if st.name in READS.visit(x)]
        if writes != 1 or not readers or min(readers) <= i:
            return None
        return max(readers)

    def prefetch_prologue(self, s: ir.For, start, stop, prefetch: dict) -> None:
        """The first iteration's loads, before the loop (skipped when the loop runs zero times)."""
        em = self.em
        p = em.cmp("lt", start, stop)
        if p is False:
            return
        with em.only_if(p, "noprefetch"):
            em.comment("prefetch of the first iteration's global loads")
            for i, (st, _) in sorted(prefetch.items()):
                kind = REG_KIND[check_dtype(st.type.dtype, st.span)]
                dest = tuple(em.fixed(kind) for _ in range(st.type.values))
                self.prefetch_regs[id(st)] = dest
                self._prefetch_load(s, i, st, start, dest, note=", prefetched one iteration ahead")

    def prefetch_next(self, s: ir.For, var, stop, i: int, st: ir.Assign) -> None:
        """After the last reader of `st` in this iteration: its load for the next one."""
        em = self.em
        nxt = em.add(var, s.step)
        p = em.cmp("lt", nxt, stop)
        skip = em.label("noprefetch")
        em.comment(f"prefetch '{st.name}' for the next iteration (line {st.span.line})")
        if p is not True:
            em.emit(f"@!{p} bra {skip};")
        em.push_region()
        self._prefetch_load(s, i, st, nxt, self.prefetch_regs[id(st)])
        em.pop_region()
        em.place_label(skip)
        self.env[s.var] = var

    def use_prefetched(self, st: ir.Assign) -> None:
        self.source_comment(st.span)
        self.em.comment("(loaded one iteration ahead)")
        self.env[st.name] = Frag(self.prefetch_regs[id(st)], st.type)

    def _prefetch_load(self, s: ir.For, i: int, st: ir.Assign, var_value, dest: tuple,
                       note: str | None = None) -> None:
        saved = self._bind_iteration(s, i, var_value)
        try:
            starts = self.view_starts(st.op.src)
            self.load_values(st, starts, list(range(st.type.values)), dict(enumerate(dest)), note=note)
        finally:
            self._restore(saved)

    def _bind_iteration(self, s: ir.For, upto: int, var_value) -> dict:
        """Bind the loop variable to `var_value` and re-evaluate the body's pure lets before `upto`;
        returns the bindings to restore."""
        saved = {s.var: self.env.get(s.var)}
        self.env[s.var] = var_value
        for st in s.body[:upto]:
            if isinstance(st, ir.Let) and st.name not in self.fixed:
                saved.setdefault(st.name, self.env.get(st.name))
                self.set_int(st.name, self.ival(st.value))
        return saved

    def _restore(self, saved: dict) -> None:
        for k, v in saved.items():
            if v is None:
                self.env.pop(k, None)
            else:
                self.env[k] = v
