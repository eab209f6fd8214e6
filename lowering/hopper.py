"""Hopper's asynchronous machinery in PTX: mbarriers, TMA loads, wgmma, their fences and groups.

The hardware parameters come from argus_verify.hopper, derived from the shared allocations'
layouts: the boxes and swizzle mode of each TMA load (one tensor map per distinct box, passed as a
128-byte `.param` and built by the runtime with cuTensorMapEncodeTiled) and the matrix descriptors
of each wgmma instruction (start address, LBO, SBO, swizzle). Allocations of kernels that use these
instructions are 1024-byte aligned (the swizzle patterns repeat every 1024 bytes of address).

A mixin of `argus_verify.lowering.ptx.Lowerer`.
"""

from __future__ import annotations

import attrs

from argus_verify import hopper, ir, roles
from argus_verify.lowering.emitter import LoweringError
from argus_verify.lowering.values import ident
from argus_verify.semantics import ASYNC_OPS

TMAP_BYTES = 128


@attrs.frozen
class TensorMapSpec:
    """One tensor map the kernel takes: `param` (its .param name), the 2-D tensor it describes and
    the box the TMA moves (rows x cols elements) with its swizzle (bytes, 0: none)."""

    param: str
    tensor: str
    dtype: str
    box_rows: int
    box_cols: int
    swizzle: int


class HopperLowering:
    def hopper_setup(self) -> None:
        self.tmaps: dict = {}  # (tensor, rows, cols, swizzle) -> TensorMapSpec
        self._true = None

    def _true_pred(self):
        if self._true is None:
            self._true = self.em.input("pred", "pred:true", "setp.eq.u32 {d}, 0, 0;")
        return self._true

    def _bar_addr(self, bar: ir.View):
        sh = self.shared[bar.base]
        return self.em.mat(self.em.add(sh.base, self.em.mul(self.ival(bar.index[0].index), 8)))

    def _operand(self, e: ir.IExpr) -> str:
        v = self.ival(e)
        return str(v) if isinstance(v, int) else str(self.em.mat(v))

    def _view_base(self, view: ir.View):
        """Byte address of a shared view's element (0, 0) (by the declared layout)."""
        sh = self.shared[view.base]
        starts = self.view_starts(view)
        coords = self.base_coords(view, starts, tuple(0 for _ in view.tile))
        off = ir.layout_offset(sh.alloc.layout, tuple(coords), self.em)
        return self.em.add(sh.base, self.em.mul(off, sh.esize))

    # -- statements ------------------------------------------------------------------------------
    def visit_MbarrierOp(self, s: ir.MbarrierOp) -> None:
        em = self.em
        addr = self._bar_addr(s.bar)
        if s.kind == "init":
            em.emit(ASYNC_OPS["mbarrier.init"].ptx.format(bar=addr, count=self._operand(s.value)))
        elif s.kind == "arrive":
            em.emit(ASYNC_OPS["mbarrier.arrive"].ptx.format(bar=addr))
        elif s.kind == "expect_tx":
            em.emit(ASYNC_OPS["mbarrier.expect_tx"].ptx.format(bar=addr, bytes=self._operand(s.value)))
        else:
            parity = self._operand(s.value)
            p = em.reg("pred")
            again = em.label("mbar_wait")
            em.place_label(again)
            em.emit(ASYNC_OPS["mbarrier.try_wait"].ptx.format(pred=p, bar=addr, parity=parity))
            em.emit(f"@!{p} bra {again};")

    def visit_Fence(self, s: ir.Fence) -> None:
        self.em.emit(ASYNC_OPS[{"proxy_async": "fence.proxy_async", "mbarrier_init": "fence.mbarrier_init",
                                "wgmma": "wgmma.fence"}[s.kind]].ptx)

    def visit_SetMaxNReg(self, s: ir.SetMaxNReg) -> None:
        # .inc or .dec against the launch count the kernel is compiled with (.maxnreg, set by the front end)
        launch = roles.launch_registers(self.k)
        if s.count != launch:
            action = "inc" if s.count > launch else "dec"
            self.em.emit(ASYNC_OPS["setmaxnreg"].ptx.format(action=action, count=s.count))

    def visit_WgmmaGroup(self, s: ir.WgmmaGroup) -> None:
        if s.kind == "commit":
            self.em.emit(ASYNC_OPS["wgmma.commit_group"].ptx)
        else:
            self.em.emit(ASYNC_OPS["wgmma.wait_group"].ptx.format(n=s.pending))

    def visit_TmaLoad(self, s: ir.TmaLoad) -> None:
        self._tma_load(s, "tma_load", "tma.load")

    def _tma_load(self, s: ir.TmaLoad | ir.TmaLoadMulticast, what: str, op: str,
                  mask: ir.IExpr | None = None) -> None:
        """The boxes of one TMA load of `s.src` into `s.dst` arriving on `s.bar`; for the multicast
        form, `mask` is the set of the cluster's CTAs that receive them (bit i: CTA rank i)."""
        em = self.em
        alloc = self.shared[s.dst.base].alloc
        try:
            boxes = hopper.tma_boxes(alloc, s.dst)
        except ValueError as e:
            raise LoweringError(f"{what}: {e}", s.span) from None
        b0 = boxes[0]
        tmap = self._tensor_map(s.src.base, alloc.dtype, b0)
        bar = self._bar_addr(s.bar)
        base = self._view_base(s.dst)
        multicast = {} if mask is None else {"mask": self._mask_b16(mask)}
        row = self.ival(s.src.index[0].start)
        col = self.ival(s.src.index[1].start)
        for box in boxes:
            dst = em.mat(em.add(base, box.smem))
            c = em.add(col, box.col0)
            cr = str(c) if isinstance(c, int) else str(em.mat(c))
            rr = str(row) if isinstance(row, int) else str(em.mat(row))
            em.emit(ASYNC_OPS[op].ptx.format(dst=dst, tmap=tmap, col=cr, row=rr, bar=bar, **multicast))
        line = s.span.line if s.span is not None else 0
        self.notes.append(f"line {line}: {what} {s.src.base} -> {s.dst.base}: {len(boxes)} box(es) of "
                          f"{b0.rows} x {b0.cols}, swizzle {b0.swizzle or 'none'}")

    def _mask_b16(self, mask: ir.IExpr):
        """The multicast mask as the b16 operand the instruction takes."""
        em = self.em
        v = self.ival(mask)
        r = em.reg("b16")
        if isinstance(v, int):
            em.emit(f"mov.b16 {r}, {v & 0xFFFF};")
        else:
            em.emit(f"cvt.u16.u32 {r}, {em.mat(v)};")
        return r

    def _tensor_map(self, tensor: str, dtype: str, box: hopper.TmaBox) -> str:
        """The register holding the generic address of the tensor map of `tensor` with `box`'s shape
        and swizzle (one .param per distinct map: loads and stores of one shape share it)."""
        key = (tensor, box.rows, box.cols, box.swizzle)
        if key not in self.tmaps:
            name = f"tmap{len(self.tmaps)}_{ident(tensor)}"
            self.tmaps[key] = TensorMapSpec(name, tensor, dtype, box.rows, box.cols, box.swizzle)
        spec = self.tmaps[key]
        return self.em.input("b64", f"tmap:{spec.param}",
                             f"mov.u64 {{d}}, {self.pname(spec.param)};\n    cvta.param.u64 {{d}}, {{d}};")

    def visit_TmaStore(self, s: ir.TmaStore) -> None:
        em = self.em
        alloc = self.shared[s.src.base].alloc
        try:
            boxes = hopper.tma_boxes(alloc, s.src)
        except ValueError as e:
            raise LoweringError(f"tma_store: {e}", s.span) from None
        tmap = self._tensor_map(s.dst.base, alloc.dtype, boxes[0])
        base = self._view_base(s.src)
        row = self.ival(s.dst.index[0].start)
        col = self.ival(s.dst.index[1].start)
        rr = str(row) if isinstance(row, int) else str(em.mat(row))
        for box in boxes:
            src = em.mat(em.add(base, box.smem))
            c = em.add(col, box.col0)
            cr = str(c) if isinstance(c, int) else str(em.mat(c))
            em.emit(ASYNC_OPS["tma.store"].ptx.format(tmap=tmap, col=cr, row=rr, src=src))
        b0 = boxes[0]
        line = s.span.line if s.span is not None else 0
        self.notes.append(f"line {line}: tma_store {s.src.base} -> {s.dst.base}: {len(boxes)} box(es) of "
                          f"{b0.rows} x {b0.cols}, swizzle {b0.swizzle or 'none'}")

    def visit_BulkGroup(self, s: ir.BulkGroup) -> None:
        if s.kind == "commit":
            self.em.emit(ASYNC_OPS["bulk.commit_group"].ptx)
        else:
            op = "bulk.wait_group.read" if s.read else "bulk.wait_group"
            self.em.emit(ASYNC_OPS[op].ptx.format(n=s.pending))

    # -- wgmma -----------------------------------------------------------------------------------
    def visit_Wgmma(self, op: ir.Wgmma, s: ir.Assign) -> tuple:
        em = self.em
        c = self.frag(op.c)
        operands = []
        for which, view in (("a", op.a), ("b", op.b)):
            alloc = self.shared[view.base].alloc
            try:
                operands.append(hopper.wgmma_operand(alloc, view, which))
            except ValueError as e:
                raise LoweringError(f"wgmma: {e}", s.span) from None
        da, db = operands
        m, n = s.type.tile
        k = op.a.tile[1]
        # the accumulator registers: wgmma updates them in place, so they are the result's own
        if s.name in self.fixed:
            target = self.fixed_regs.get(s.name)
            if target is None:
                target = self.fixed_regs[s.name] = tuple(em.fixed("f32") for _ in c.regs)
        else:
            target = tuple(em.reg("f32") for _ in c.regs)
        for d, r in zip(target, c.regs, strict=True):
            if d is not r:
                em.assign(d, r)
        base_a, base_b = self._view_base(op.a), self._view_base(op.b)
        ab = self.shared[op.a.base].alloc.dtype
        scale_d = self._true_pred()
        per = n // 2  # f32 accumulators per thread of one m64nN instruction
        wgs = roles.fragment_warpgroups(self.k, s)  # the role's consumer warpgroups, else the block's
        local = m // (hopper.WGMMA_M * wgs)  # 64-row blocks of each warpgroup
        if wgs > 1:  # warpgroup w reads A's row blocks w * local ..: the descriptors' starts must be affine
            wg = self.em.floordiv(self.tid, hopper.WARPGROUP)
            for kk in range(k // hopper.WGMMA_K):
                d0, d1 = da.descs[(0, kk)], da.descs[(local, kk)]
                step = d1.start - d0.start
                for w in range(wgs):
                    for j in range(local):
                        want = da.descs[(w * local + j, kk)].start
                        if want != da.descs[(j, kk)].start + w * step:
                            raise LoweringError("wgmma: A's row blocks are not evenly spaced between warpgroups",
                                                s.span)
            base_a = self.em.add(base_a, self.em.mul(wg, step))
        for kk in range(k // hopper.WGMMA_K):
            descb = self._desc(base_b, db.descs[(0, kk)])
            for j in range(local):
                desca = self._desc(base_a, da.descs[(j, kk)])
                regs = target[j * per:(j + 1) * per]
                em.emit(ASYNC_OPS["wgmma.mma_async"].ptx.format(
                    n=n, ab=ab, d=", ".join(map(str, regs)), desc_a=desca, desc_b=descb, scale_d=scale_d,
                    trans_a=da.descs[(j, kk)].trans, trans_b=db.descs[(0, kk)].trans))
        line = s.span.line if s.span is not None else 0
        self.notes.append(f"line {line}: wgmma m64n{n}k16 x {local * (k // 16)} per warpgroup: a {da.major}-major, "
                          f"b {db.major}-major, swizzle {da.descs[(0, 0)].swizzle} B")
        return target

    def _desc(self, base, d: hopper.Descriptor):
        """The 64-bit descriptor: the start address field from the run-time base, the rest constant."""
        em = self.em
        addr = em.mat(em.add(base, d.start))
        lo = em.reg("b32")
        em.emit(f"bfe.u32 {lo}, {addr}, 4, 14;")
        const = hopper.Descriptor(0, d.lbo, d.sbo, d.swizzle, d.major).encode()
        if const & 0xFFFFFFFF:
            em.emit(f"or.b32 {lo}, {lo}, {const & 0xFFFFFFFF};")
        hi = em.reg("b32")
        em.emit(f"mov.b32 {hi}, {const >> 32};")
        r = em.reg("b64")
        em.emit(f"mov.b64 {r}, {{{lo}, {hi}}};")
        return r
