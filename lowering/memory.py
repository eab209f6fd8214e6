"""Memory: tensors and shared allocations, loads and stores (vectorised where `lowering.vectorise`
proves it), masks, async-copy groups and barriers.

A mixin of `argus_verify.lowering.ptx.Lowerer`; it uses the lowerer's emitter `em`, `ival`,
`pval`, `frag` and its parameter names. Async copies are in `lowering.copies`.
"""

from __future__ import annotations

from collections import defaultdict

import attrs

from argus_verify import ir
from argus_verify.lowering.emitter import Aff, Emitter, LoweringError, mov_type
from argus_verify.lowering.values import (
    MEM_TYPE,
    REG_KIND,
    Deferred,
    Frag,
    SharedInfo,
    TensorInfo,
    address,
    check_dtype,
    ident,
    immediate,
)
from argus_verify.lowering.vectorise import AccessPlan, vector_access

STATIC_SHARED_LIMIT = 48 * 1024


class MemoryLowering:
    # -- setup: shared allocations and tensor pointers, once at the top -------------------------
    def layout_shared(self) -> None:
        """Offsets of the allocations (128-byte aligned); static `.shared` arrays up to 48 KB, one
        dynamic window above."""
        allocs = self.k.shared_allocs()
        # TMA and wgmma swizzle absolute addresses: their kernels align every allocation to 1024
        # bytes, in a dynamic window whose start the kernel rounds up to 1024 itself
        hopper = ir.uses_hopper(self.k.body)
        align = 1024 if hopper else 128
        self.shared_align = align
        total = 0
        offsets = {}
        for a in allocs:
            total = -(-total // align) * align
            offsets[a.name] = total
            total += a.size_elems * ir.DTYPE_BYTES[a.dtype]
        self.shared_bytes = total + (align if hopper else 0)
        self.dynamic = hopper or total > STATIC_SHARED_LIMIT
        self.shared_decls = []
        for a in allocs:
            self.shared[a.name] = SharedInfo(a, self._shared_base(a, offsets[a.name]), ir.DTYPE_BYTES[a.dtype])

    def _shared_base(self, a: ir.SharedAlloc, offset: int):
        em = self.em
        if self.dynamic:
            line = f"mov.u32 {{d}}, {self.entry}_smem;"
            if self.shared_align > 128:
                a = self.shared_align
                line += f"\n    add.u32 {{d}}, {{d}}, {a - 1};\n    and.b32 {{d}}, {{d}}, {-a};"
            base_reg = em.input("b32", "smem:dynamic", line, lo=0, mult=self.shared_align)
            return em.add(base_reg, offset)
        esize = ir.DTYPE_BYTES[a.dtype]
        sym = f"{self.entry}_{ident(a.name)}"
        self.shared_decls.append(f"    .shared .align 16 .b8 {sym}[{max(a.size_elems * esize, esize)}];")
        return em.input("b32", f"smem:{a.name}", f"mov.u32 {{d}}, {sym};", lo=0, mult=16)

    def tensor(self, name: str) -> TensorInfo:
        if name in self.tensors:
            return self.tensors[name]
        tp = self.k.param(name)
        if tp.dtype not in REG_KIND:
            raise LoweringError(f"tensors of {tp.dtype} are not supported by the PTX lowering yet", tp.span)
        raw = self.em.input("b64", f"param:{name}", f"ld.param.u64 {{d}}, [{self.pname(name)}];")
        ptr = self.em.input("b64", f"gptr:{name}", f"cvta.to.global.u64 {{d}}, {raw};")
        shape = [d.value if isinstance(d, ir.IConst) else self.size(d.name) for d in tp.shape]
        # row-major strides in elements (computed once, at the top level)
        strides: list = [1] * len(shape)
        acc: object = 1
        for i in range(len(shape) - 1, -1, -1):
            strides[i] = acc
            acc = self.em.mul_val(acc, shape[i]) if i > 0 else acc
        self.tensors[name] = TensorInfo(name, tp.dtype, ir.DTYPE_BYTES[tp.dtype], ptr, shape, strides,
                                        not tp.output)
        return self.tensors[name]

    # -- statements and operations ---------------------------------------------------------------
    def visit_SharedAlloc(self, s: ir.SharedAlloc) -> None:
        pass  # laid out up front

    def visit_Commit(self, s: ir.Commit) -> None:
        self.em.emit("cp.async.commit_group;")

    def visit_Wait(self, s: ir.Wait) -> None:
        self.em.emit(f"cp.async.wait_group {s.pending};")

    def visit_Barrier(self, s: ir.Barrier) -> None:
        self.em.emit("bar.sync 0;")

    def visit_Load(self, op: ir.Load, s: ir.Assign):
        if id(s) in self.deferred_ids:  # the mma that consumes it emits it, k-slice by k-slice
            self.env[s.name] = Deferred(s, self.view_starts(op.src), s.type)
            return None
        regs = self.load_values(s, self.view_starts(op.src), list(range(s.type.values)))
        return tuple(regs[v] for v in range(s.type.values))

    def matrix_row_addresses(self, view, rows, dtype) -> list:
        """This thread's shared address of each ldmatrix / stmatrix instruction's row (one per value
        of the `rows` layout)."""
        starts = self.view_starts(view)
        which = list(range(rows.values))
        coords = self.element_coords(view, starts, rows, which)
        return self.shared_addresses(view, starts, rows, coords, which, ir.DTYPE_BYTES[dtype])

    def visit_Ldmatrix(self, op: ir.Ldmatrix, s: ir.Assign) -> tuple:
        """One ldmatrix per instruction of `rows`: this thread's row address, four/two/one .b32
        results unpacked into 16-bit halves (value 2q is the lower half of register q)."""
        dtype = check_dtype(s.type.dtype, s.span)
        view = op.src
        n = op.rows.values
        addrs = self.matrix_row_addresses(view, op.rows, dtype)
        kind = REG_KIND[dtype]
        out = []
        suffix = ".trans" if op.trans else ""
        for i in range(n):
            words = [self.em.reg("b32") for _ in range(op.count)]
            self.em.emit(f"ldmatrix.sync.aligned.m8n8.x{op.count}{suffix}.shared.b16 "
                         f"{{{', '.join(map(str, words))}}}, {address(addrs[i])};")
            for w in words:
                lo, hi = self.em.reg(kind), self.em.reg(kind)
                self.em.emit(f"mov.b32 {{{lo}, {hi}}}, {w};")
                out += [lo, hi]
        line = s.span.line if s.span is not None else 0
        plural = "s" if n > 1 else ""
        self.notes.append(f"line {line}: ldmatrix.x{op.count}{suffix} {view.base}: {n} instruction{plural}")
        return tuple(out)

    def visit_Stmatrix(self, s: ir.Stmatrix) -> None:
        """One stmatrix per instruction of `rows`: this thread's row address and its values packed
        in pairs (value 2q in the lower half of register q)."""
        f = self.frag(s.value)
        dtype = check_dtype(f.type.dtype, s.span)
        view = s.dst
        n = s.rows.values
        addrs = self.matrix_row_addresses(view, s.rows, dtype)
        suffix = ".trans" if s.trans else ""
        per = 2 * s.count
        for i in range(n):
            words = []
            for q in range(s.count):
                w = self.em.reg("b32")
                self.em.emit(f"mov.b32 {w}, {{{f.regs[per * i + 2 * q]}, {f.regs[per * i + 2 * q + 1]}}};")
                words.append(w)
            self.em.emit(f"stmatrix.sync.aligned.m8n8.x{s.count}{suffix}.shared.b16 {address(addrs[i])}, "
                         f"{{{', '.join(map(str, words))}}};")
        line = s.span.line if s.span is not None else 0
        plural = "s" if n > 1 else ""
        self.notes.append(f"line {line}: stmatrix.x{s.count}{suffix} {view.base}: {n} instruction{plural}")

    def visit_Store(self, s: ir.Store) -> None:
        f = self.frag(s.value)
        dtype = check_dtype(f.type.dtype, s.span)
        starts = self.view_starts(s.dst)
        pl = self.plan(s.dst, starts, f.type.coords, list(range(f.type.values)), dtype, True, None)
        regs = {v: f.regs[v] for v in pl.kept}
        where = self.pval(s.where) if s.where is not None else True
        self.access("store", s.dst, starts, f.type.coords, pl, regs, dtype, s.mask, 0.0, where)
        self.note(s.span, "store", s.dst.base, pl.groups, pl.align, " (masked)" if s.mask else "")

    def materialise_deferred(self, d: Deferred) -> Frag:
        regs = self.load_values(d.assign, d.starts, list(range(d.type.values)))
        f = Frag(tuple(regs[v] for v in range(d.type.values)), d.type)
        self.env[d.assign.name] = f
        return f

    def load_values(self, s: ir.Assign, starts: tuple, values: list, dest: dict | None = None,
                    note: str | None = "") -> dict:
        """Emit the load `s` restricted to `values` (into `dest` registers when given); returns
        value -> register."""
        op: ir.Load = s.op
        view = op.src
        dtype = check_dtype(s.type.dtype, s.span)
        pl = self.plan(view, starts, op.tv, values, dtype, False, op.vec)
        kind = REG_KIND[dtype]
        regs = {v: (dest[v] if dest is not None else self.em.reg(kind)) for v in pl.kept}
        self.access("load", view, starts, op.tv, pl, regs, dtype, op.mask, op.other, True)
        for v, r in pl.rep.items():
            regs[v] = regs[r]
            if dest is not None and dest[v] is not regs[r]:
                self.em.emit(f"mov{mov_type(kind)} {dest[v]}, {regs[r]};")
                regs[v] = dest[v]
        if len(values) == s.type.values and note is not None:
            self.note(s.span, "load", view.base, pl.groups, pl.align, (" (masked)" if op.mask else "") + note)
        return regs

    def note(self, span, what: str, base: str, groups: list, align, extra: str = "") -> None:
        widths = defaultdict(int)
        for g in groups:
            widths[len(g)] += 1
        parts = [f"{n} x v{w}" if w > 1 else f"{n} scalar" for w, n in sorted(widths.items(), reverse=True)]
        line = span.line if span is not None else 0
        self.notes.append(f"line {line}: {what} {base}: {', '.join(parts) or 'nothing'}"
                          + (", run-time row alignment check" if align is not None else "") + extra)

    # -- coordinates and addresses ---------------------------------------------------------------
    def view_starts(self, view: ir.View) -> tuple:
        return tuple(self.ival(item.start if isinstance(item, ir.Slice) else item.index) for item in view.index)

    def value_coords(self, coords_map, v: int) -> tuple:
        c = tuple(coords_map.coords(self.tid, v, self.em))
        if self.check:
            table = coords_map.coord_table()
            for t in range(coords_map.threads):
                got = [self.em.evaluate(x, {"%tid.x": t}) for x in c]
                if got != [int(x) for x in table[t, v]]:
                    raise AssertionError(f"coordinate mismatch for {coords_map} thread {t} value {v}: "
                                         f"{got} != {list(table[t, v])}")
        return c

    def base_coords(self, view: ir.View, starts: tuple, tile_coord: tuple) -> list:
        """The element of the view's base that tile coordinate `tile_coord` stands for."""
        out = []
        axis = 0
        for item, st in zip(view.index, starts, strict=True):
            if isinstance(item, ir.Slice):
                out.append(self.em.add(st, tile_coord[axis]))
                axis += 1
            else:
                out.append(st)
        return out

    def element_coords(self, view: ir.View, starts: tuple, coords_map, kept: list) -> dict:
        return {v: self.base_coords(view, starts, self.value_coords(coords_map, v)) for v in kept}

    def global_addresses(self, ti: TensorInfo, coords: dict, kept: list, esize: int) -> dict:
        """value -> (64-bit register, immediate byte offset); the terms every value shares are
        added to the tensor's pointer once."""
        em = self.em
        offs = {v: _dot(em, coords[v], ti.strides) for v in kept}
        common = _common_terms([em.aff(offs[v]) for v in kept])
        base, _ = em.addr64(ti.ptr, Aff(common, 0), esize)
        return {v: em.addr64(base, em.sub(offs[v], Aff(common, 0)), esize) for v in kept}

    def shared_addresses(self, view: ir.View, starts: tuple, coords_map, coords: dict, kept: list,
                         esize: int) -> dict:
        """value -> (32-bit register or None, immediate byte offset) in the shared window."""
        em = self.em
        sh = self.shared[view.base]
        out = {}
        for v in kept:
            off = ir.layout_offset(sh.alloc.layout, tuple(coords[v]), em)
            if self.check and all(isinstance(x, int) for x in starts):
                self._check_shared(sh, view, starts, coords_map, v, off)
            out[v] = em.addr32(em.add(sh.base, em.mul(off, esize)), 1)
        return out

    def _check_shared(self, sh: SharedInfo, view, starts, coords_map, v, off) -> None:
        table = coords_map.coord_table()
        for t in range(0, coords_map.threads):
            coords = []
            axis = 0
            for item, st in zip(view.index, starts, strict=True):
                if isinstance(item, ir.Slice):
                    coords.append(st + int(table[t, v, axis]))
                    axis += 1
                else:
                    coords.append(st)
            want = int(sh.alloc.layout(tuple(coords))) if len(coords) > 1 else int(sh.alloc.layout(coords[0]))
            got = self.em.evaluate(off, {"%tid.x": t})
            if got != want:
                raise AssertionError(f"shared offset mismatch in {view.base} for thread {t} value {v}: "
                                     f"{got} != {want}")

    # -- loads and stores ------------------------------------------------------------------------
    def access(self, kind: str, view: ir.View, starts: tuple, coords_map, pl: AccessPlan, regs: dict,
               dtype: str, mask: bool, other: float, where) -> None:
        """Emit a load or store (`kind`) of `regs` per plan `pl`, for threads where `where` holds."""
        if where is False:
            return
        with self.em.only_if(where, "skip"):
            self._access(kind, view, starts, coords_map, pl, regs, dtype, mask, other)

    def _access(self, kind, view, starts, coords_map, pl: AccessPlan, regs, dtype, mask, other) -> None:
        em = self.em
        coords = self.element_coords(view, starts, coords_map, pl.kept)
        if view.space == "global":
            ti = self.tensor(view.base)
            addr = self.global_addresses(ti, coords, pl.kept, pl.esize)
            shape = ti.shape
            opname = ("ld.global.nc" if ti.readonly else "ld.global") if kind == "load" else "st.global"
        else:
            addr = self.shared_addresses(view, starts, coords_map, coords, pl.kept, pl.esize)
            shape = None
            opname = "ld.shared" if kind == "load" else "st.shared"
            mask = False  # masks guard the bounds of global tensors only
        acc = _Accessor(em, kind, opname, dtype, addr, regs, other)

        # A masked access checks 0 <= c too (a view may start before the tensor). Where the ranges do
        # not show every coordinate non-negative (a persistent kernel's tile start), one test of the
        # smallest coordinates chooses between the accesses with upper checks only and those with both.
        low = em.lt_all([(-1, x) for v in pl.kept for x in coords[v]]) if mask else True

        def in_bounds(v, both=False):
            if not mask:
                return True
            return em.within(list(coords[v]), shape) if both else em.lt_all(list(zip(coords[v], shape, strict=True)))

        vec_groups = [g for g in pl.groups if len(g) > 1]
        fast = pl.align if pl.align is not None else True
        if vec_groups and mask:  # the vector path also needs every vector wholly inside the tensor
            fast = em.p_and(fast, em.p_and(low, _vectors_in_bounds(em, vec_groups, coords, shape)))

        def vectors():
            for g in pl.groups:
                acc.vector(g) if len(g) > 1 else acc.scalar(g[0], in_bounds(g[0]))

        def scalars(both=False):
            for v in pl.kept:
                acc.scalar(v, in_bounds(v, both))

        def checked():
            em.either(low, scalars, lambda: scalars(both=True))

        # (the vector path's singletons check the upper bounds only: `fast` holds `low`)
        em.either(fast, vectors, checked) if vec_groups else checked()


@attrs.frozen
class _Accessor:
    """Scalar and vector instructions of one load or store."""

    em: Emitter
    kind: str  # "load" | "store"
    opname: str  # ld.global.nc, st.shared, ...
    dtype: str
    addr: dict  # value -> (register, immediate)
    regs: dict  # value -> register
    other: float  # what a masked-off load reads

    def scalar(self, v: int, pred) -> None:
        em, r = self.em, self.regs[v]
        mem = MEM_TYPE[self.dtype]
        prefix = "" if pred is True else f"@{pred} "
        if self.kind == "load":
            if pred is not True:
                em.emit(f"mov{mov_type(r.kind)} {r}, {immediate(self.other, self.dtype)};")
            if pred is not False:
                em.emit(f"{prefix}{self.opname}.{mem} {r}, {address(self.addr[v])};")
        elif pred is not False:
            em.emit(f"{prefix}{self.opname}.{mem} {address(self.addr[v])}, {r};")

    def vector(self, g: list) -> None:
        lines = vector_access(self.em, self.kind, self.opname, self.dtype, address(self.addr[g[0]]),
                              [self.regs[v] for v in g])
        for line in lines:
            self.em.emit(line)


def _vectors_in_bounds(em: Emitter, groups: list, coords: dict, shape: list):
    """Every vector's last element before the tensor's end (the caller checks the starts)."""
    pairs = []
    for g in groups:
        c = list(coords[g[0]])
        c[-1] = em.add(c[-1], len(g) - 1)
        pairs += list(zip(c, shape, strict=True))
    return em.lt_all(pairs)


def _dot(em: Emitter, coords: list, strides: list):
    acc = 0
    for c, st in zip(coords, strides, strict=True):
        acc = em.add(acc, em.mul_val(c, st))
    return acc


def _common_terms(affs: list) -> tuple:
    if not affs:
        return ()
    common = set(affs[0].terms)
    for a in affs[1:]:
        common &= set(a.terms)
    return tuple(sorted(common, key=lambda rc: rc[0].id))
