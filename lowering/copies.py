"""Asynchronous global -> shared copies (`cp.async`), vectorised where a run of `vec` elements is
contiguous in global and in shared memory alike; masked copies zero-fill through `src-size`.

A mixin of `argus_verify.lowering.ptx.Lowerer`; it uses the planning of `lowering.vectorise` and
the addressing of `lowering.memory`.
"""

from __future__ import annotations

import attrs

from argus_verify import ir
from argus_verify.lowering.emitter import Emitter, mov_type
from argus_verify.lowering.values import MEM_TYPE, REG_KIND, TensorInfo, address, check_dtype, immediate


class CopyLowering:
    def visit_CopyAsync(self, s: ir.CopyAsync) -> None:
        src_t = self.tensor(s.src.base)
        dtype = check_dtype(src_t.dtype, s.span)
        esize = ir.DTYPE_BYTES[dtype]
        values = list(range(s.tv.values))
        src_starts = self.view_starts(s.src)
        dst_starts = self.view_starts(s.dst)
        sp = self.plan(s.src, src_starts, s.tv, values, dtype, True, s.vec)
        dp = self.plan(s.dst, dst_starts, s.tv, values, dtype, True, s.vec)
        groups = _shared_runs(sp.groups, dp.groups, s.vec)
        kept = sp.kept
        src_coords = self.element_coords(s.src, src_starts, s.tv, kept)
        dst_coords = self.element_coords(s.dst, dst_starts, s.tv, kept)
        copier = _Copier(self.em, s.mask, src_t, dtype, esize, src_coords,
                         self.global_addresses(src_t, src_coords, kept, esize),
                         self.shared_addresses(s.dst, dst_starts, s.tv, dst_coords, kept, esize))

        def vectors():
            for g in groups:
                copier.vector(g) if len(g) > 1 else copier.element(g[0])

        def elements():
            for v in kept:
                copier.element(v)

        vectorised = any(len(g) > 1 for g in groups) and sp.align is not None
        fast = sp.align if vectorised else True
        if vectorised and s.mask:  # src-size zero-fills a run's tail, never its head: runs start in the row
            fast = self.em.p_and(fast, self.em.lt_all([(-1, src_coords[g[0]][-1]) for g in groups if len(g) > 1]))
        self.em.either(fast, vectors, elements)
        self.note(s.span, "copy_async", s.src.base, groups, sp.align, " (masked, zero-fill)" if s.mask else "")


def _shared_runs(src_groups: list, dst_groups: list, vec: int) -> list:
    """The groups usable for one cp.async: the same `vec`-long run in global and in shared memory;
    the others copy element by element."""
    dst = {tuple(g) for g in dst_groups}
    out = []
    for g in src_groups:
        if len(g) == vec and tuple(g) in dst:
            out.append(g)
        else:
            out.extend([v] for v in g)
    return out


@attrs.frozen
class _Copier:
    em: Emitter
    mask: bool
    src: TensorInfo
    dtype: str
    esize: int
    src_coords: dict  # value -> element coordinates in the source tensor
    gaddr: dict  # value -> (64-bit register, immediate)
    saddr: dict  # value -> (32-bit register, immediate)

    def element(self, v: int) -> None:
        """One element: cp.async when 4 or 8 bytes, else a synchronous copy (also correct)."""
        em = self.em
        pred = em.within(list(self.src_coords[v]), self.src.shape) if self.mask else True
        dst, src = address(self.saddr[v]), address(self.gaddr[v])
        if self.esize in (4, 8, 16):
            if pred is True:
                em.emit(f"cp.async.ca.shared.global {dst}, {src}, {self.esize};")
            else:
                n = em.select(pred, self.esize, 0)
                em.emit(f"cp.async.ca.shared.global {dst}, {src}, {self.esize}, {em.mat(n)};")
            return
        kind = REG_KIND[self.dtype]
        r = em.reg(kind)
        if pred is not True:
            em.emit(f"mov{mov_type(kind)} {r}, {immediate(0.0, self.dtype)};")
        prefix = "" if pred is True else f"@{pred} "
        em.emit(f"{prefix}ld.global.nc.{MEM_TYPE[self.dtype]} {r}, {src};")
        em.emit(f"st.shared.{MEM_TYPE[self.dtype]} {dst}, {r};")

    def vector(self, g: list) -> None:
        """One cp.async of the run `g`; masked: `src-size` is the bytes still inside the row (0 in a
        row outside the tensor), the rest is zero-filled."""
        em = self.em
        nbytes = len(g) * self.esize
        cache = "cg" if nbytes == 16 else "ca"
        head = f"cp.async.{cache}.shared.global {address(self.saddr[g[0]])}, {address(self.gaddr[g[0]])}, {nbytes}"
        if not self.mask:
            em.emit(f"{head};")
            return
        c = self.src_coords[g[0]]
        shape = self.src.shape
        rows = em.within(list(c[:-1]), shape[:-1])  # (the run starts at or after the row's start: `fast`)
        left = em.sub(shape[-1], c[-1])  # elements left in the row
        n = em.minmax(em.minmax(left, 0, "max"), len(g), "min")
        nb = em.select(rows, em.mul(n, self.esize), 0) if rows is not True else em.mul(n, self.esize)
        em.emit(f"{head}, {nb if isinstance(nb, int) else em.mat(nb)};")
