"""Compute: constants, elementwise operations, casts, relabelling and the SIMT mma (fma chains).

Elementwise operators and conversions are whatever `argus_verify.semantics` says: the PTX of
`FLOAT_UNARY[op]` / `FLOAT_BINARY[op]` for the compute dtype (a template list over `{d}`, `{a}`,
`{b}`), and `semantics.cvt_instruction` for casts. A new operator in the table is lowered with no
change here. A mixin of `argus_verify.lowering.ptx.Lowerer`.
"""

from __future__ import annotations

import math

import numpy as np

from argus_verify import atoms, ir, semantics
from argus_verify.lowering.emitter import LoweringError, Reg, mov_type
from argus_verify.lowering.values import (
    PARAM_TYPE,
    REG_KIND,
    Deferred,
    check_dtype,
    compute_dtype,
    immediate,
)


def arith(op: str, cd: str, d: Reg, ins: list, span) -> list:
    """PTX for elementwise `op` on operands `ins` (registers or immediates) in compute dtype `cd`
    (f32, f64, i32, u32), into `d`."""
    table = semantics.FLOAT_UNARY if len(ins) == 1 else semantics.FLOAT_BINARY
    entry = table.get(op)
    if entry is None:
        raise LoweringError(f"elementwise '{op}' is not in the semantics table", span)
    templates = entry.ptx.get(cd)
    if templates is None:
        raise LoweringError(f"elementwise '{op}' on {cd} is not supported by the PTX lowering (the semantics "
                            "table has no PTX template for it)", span)
    operands = dict(zip("ab", ins, strict=False))
    return [t.format(d=d, **operands) for t in templates]


def cvt(dst: str, src: str, span=None) -> str:
    instruction = semantics.cvt_instruction(dst, src)
    if instruction is None:
        raise LoweringError(f"no conversion from {src} to {dst}", span)
    return instruction


def _is_copy(op: ir.Elementwise) -> bool:
    """The front end's copy `x = y` is y + 0.0."""
    return (op.op == "+" and len(op.args) == 2 and isinstance(op.args[0], str)
            and isinstance(op.args[1], ir.FConst) and op.args[1].value == 0.0)


class ComputeLowering:
    def visit_Full(self, op: ir.Full, s: ir.Assign) -> tuple:
        kind = REG_KIND[check_dtype(op.dtype, s.span)]
        r = self.em.reg(kind)
        self.em.emit(f"mov{mov_type(kind)} {r}, {immediate(op.value, op.dtype)};")
        return (r,) * s.type.values

    def visit_Relabel(self, op: ir.Relabel, s: ir.Assign) -> tuple:
        return self.frag(op.arg).regs

    # -- elementwise -----------------------------------------------------------------------------
    def visit_Elementwise(self, op: ir.Elementwise, s: ir.Assign) -> tuple:
        dt = check_dtype(s.type.dtype, s.span)
        cd = compute_dtype(dt)
        frags = {a: self.frag(a) for a in op.args if isinstance(a, str)}
        if _is_copy(op):
            return frags[op.args[0]].regs
        consts = [None if isinstance(a, str) else self.operand(a, dt, s.span) for a in op.args]
        cache: dict = {}  # converted inputs and computed results, so broadcast values are computed once
        out = []
        for v in range(s.type.values):
            ins = [self._converted(a, frags[a].regs[v], dt, cache) if isinstance(a, str) else c
                   for a, c in zip(op.args, consts, strict=True)]
            out.append(self._computed(op.op, ins, dt, cd, cache, s.span))
        return tuple(out)

    def _converted(self, name: str, r: Reg, dt: str, cache: dict) -> Reg:
        key = (name, r)
        if key not in cache:
            cache[key] = self.to_compute(r, dt)
        return cache[key]

    def _computed(self, opname: str, ins: list, dt: str, cd: str, cache: dict, span) -> Reg:
        sig = (opname, *[x if isinstance(x, str) else x.id for x in ins])
        if sig not in cache:
            d = self.em.reg(REG_KIND[cd])
            for line in arith(opname, cd, d, ins, span):
                self.em.emit(line)
            cache[sig] = self.from_compute(d, dt)
        return cache[sig]

    def operand(self, a, dtype: str, span):
        """A register or immediate for a non-fragment elementwise operand."""
        em = self.em
        cd = compute_dtype(dtype)
        if isinstance(a, ir.FConst):
            return immediate(a.value, cd)
        if not isinstance(a, ir.FScalar):
            raise LoweringError(f"bad operand {a!r}", span)
        p = self.float_param(a.expr)
        if p is not None:
            r = em.input(REG_KIND[p.dtype], f"param:{p.name}",
                         f"ld.param{PARAM_TYPE[p.dtype]} {{d}}, [{self.pname(p.name)}];")
            return self.to_compute(r, p.dtype)
        v = em.mat(self.ival(a.expr))
        r = em.reg(REG_KIND[cd])  # allocated for integer compute dtypes too: the register numbering depends on it
        if cd in ("f32", "f64"):
            em.emit(f"{cvt(cd, 'i32', span)} {r}, {v};")
            return r
        return v

    def float_param(self, e: ir.IExpr) -> ir.ScalarParam | None:
        """The float scalar parameter `e` names, if it names one."""
        if not isinstance(e, ir.IVar):
            return None
        p = next((q for q in self.k.params if q.name == e.name), None)
        return p if isinstance(p, ir.ScalarParam) and ir.is_float(p.dtype) else None

    # -- conversions -----------------------------------------------------------------------------
    def to_compute(self, r: Reg, dtype: str) -> Reg:
        """16-bit floats are computed in f32."""
        return self.to_cd(r, dtype, "f32") if dtype in ("f16", "bf16") else r

    def from_compute(self, r: Reg, dtype: str) -> Reg:
        if dtype in ("f16", "bf16"):
            h = self.em.reg("b16")
            self.em.emit(f"{cvt(dtype, 'f32')} {h}, {r};")
            return h
        return r

    def to_cd(self, r: Reg, dtype: str, cd: str) -> Reg:
        """`r` (of `dtype`) converted to the compute dtype `cd`."""
        if dtype == cd:
            return r
        f = self.em.reg(REG_KIND[cd])
        self.em.emit(f"{cvt(cd, dtype)} {f}, {r};")
        return f

    def visit_Cast(self, op: ir.Cast, s: ir.Assign) -> tuple:
        src = self.frag(op.arg)
        sd, dd = check_dtype(src.type.dtype, s.span), check_dtype(op.dtype, s.span)
        cache: dict = {}
        pair = semantics.cvt_pair_instruction(dd, sd)
        if pair is not None:  # f32 -> bf16 / f16: two values per packed conversion
            distinct = list(dict.fromkeys(src.regs))
            for lo, hi in zip(distinct[0::2], distinct[1::2], strict=False):
                packed, h_lo, h_hi = self.em.reg("b32"), self.em.reg("b16"), self.em.reg("b16")
                self.em.emit(f"{pair} {packed}, {hi}, {lo};")  # the first source lands in the upper half
                self.em.emit(f"mov.b32 {{{h_lo}, {h_hi}}}, {packed};")
                cache[lo], cache[hi] = h_lo, h_hi
        for r in src.regs:
            if r not in cache:
                cache[r] = self._cast(r, sd, dd, s.span)
        return tuple(cache[r] for r in src.regs)

    def _cast(self, r: Reg, sd: str, dd: str, span) -> Reg:
        if sd == dd:
            return r
        if sd in ("f16", "bf16") and dd in ("f16", "bf16"):  # through f32: no direct cvt between them
            return self.from_compute(self.to_compute(r, sd), dd)
        d = self.em.reg(REG_KIND[dd])
        self.em.emit(f"{cvt(dd, sd, span)} {d}, {r};")
        return d

    # -- the SIMT mma ----------------------------------------------------------------------------
    def visit_Mma(self, op: ir.Mma, s: ir.Assign) -> tuple:
        if op.atom != "fma":
            return self._mma_sync(op, s)
        a_src, b_src = self.env.get(op.a), self.env.get(op.b)
        c = self.frag(op.c)
        ia, ib = fma_pairing(a_src.type, b_src.type, s.type, s.span)
        K = a_src.type.tile[1]
        ad, cdt = check_dtype(a_src.type.dtype, s.span), check_dtype(s.type.dtype, s.span)
        cd = compute_dtype(cdt)
        kc = self._k_chunk(a_src, b_src, K, ir.DTYPE_BYTES[ad])
        acc = [self.to_compute(r, cdt) for r in c.regs]
        cache_a: dict = {}
        cache_b: dict = {}
        for k0 in range(0, K, kc):
            ks = range(k0, k0 + kc)
            fa = self._mma_operand(a_src, ia, ks, cache_a, ad, cd)
            fb = self._mma_operand(b_src, ib, ks, cache_b, ad, cd)
            for k in ks:
                for vc in range(len(acc)):
                    d = self.em.reg(REG_KIND[cd])
                    self.em.emit(f"fma.rn.{cd} {d}, {fa[int(ia[vc, k])]}, {fb[int(ib[vc, k])]}, {acc[vc]};")
                    acc[vc] = d
        return tuple(self.from_compute(r, cdt) for r in acc)

    def _mma_sync(self, op: ir.Mma, s: ir.Assign) -> tuple:
        """One mma.sync per atom instance and k step of the plan; 16-bit operand pairs packed into
        .b32 registers (the lower half holds the even value, as the atom layouts number them)."""
        a, b, c = self.frag(op.a), self.frag(op.b), self.frag(op.c)
        ab, cd = check_dtype(a.type.dtype, s.span), check_dtype(s.type.dtype, s.span)
        try:
            plan = atoms.mma_plan(op.atom, a.type, b.type, s.type)
        except ValueError as e:  # the front end refuses it too; an IR built otherwise may have it
            raise LoweringError(f"mma atom {op.atom}: {e}", s.span) from None
        atom = plan.atom
        packed: dict = {}

        def pack(frag, which, group, per):
            out = []
            for r in range(per // 2):
                key = (which, group, r)
                if key not in packed:
                    lo, hi = frag.regs[group * per + 2 * r], frag.regs[group * per + 2 * r + 1]
                    d = self.em.reg("b32")
                    self.em.emit(f"mov.b32 {d}, {{{lo}, {hi}}};")
                    packed[key] = d
                out.append(packed[key])
            return out

        acc = list(c.regs)
        instr = atom.ptx(ab, cd)
        nc = atom.c.values
        for g, ks in plan.steps:
            for ga, gb in ks:
                ra = pack(a, "a", ga, atom.a.values)
                rb = pack(b, "b", gb, atom.b.values)
                rc = acc[g * nc:(g + 1) * nc]
                rd = [self.em.reg(REG_KIND[cd]) for _ in range(nc)]
                groups = ", ".join("{" + ", ".join(map(str, x)) + "}" for x in (rd, ra, rb, rc))
                self.em.emit(f"{instr} {groups};")
                acc[g * nc:(g + 1) * nc] = rd
        return tuple(acc)

    def _k_chunk(self, a_src, b_src, K: int, esize: int) -> int:
        """How many k steps load their operands together: 16-byte loads along k from shared memory
        when an operand is deferred, unless the `mma_k_chunk` option says otherwise."""
        kc = 1
        if isinstance(a_src, Deferred) or isinstance(b_src, Deferred):
            kc = next((w for w in (4, 2) if K % w == 0 and w * esize <= 16), 1)
        if self.mma_k_chunk is not None:
            kc = max(1, math.gcd(K, self.mma_k_chunk))
        return kc

    def _mma_operand(self, src, pairing: np.ndarray, ks: range, cache: dict, dtype: str, cd: str) -> dict:
        """The registers (in compute dtype) of the operand values the k steps `ks` read; a deferred
        operand is loaded here, k-slice by k-slice, and its slice dies with it."""
        need = sorted({int(pairing[vc, k]) for vc in range(pairing.shape[0]) for k in ks})
        if isinstance(src, Deferred):
            cache.clear()
            regs = self.load_values(src.assign, src.starts, need)
        else:
            regs = {v: src.regs[v] for v in need}
        for v in need:
            if v not in cache:
                cache[v] = self.to_cd(regs[v], dtype, cd)
        return cache


def fma_pairing(ta: ir.FragType, tb: ir.FragType, tc: ir.FragType, span):
    """For each c value and k, the a and b values it multiplies (one pairing for all threads)."""
    ia, ib = ir.fma_pairing(ta, tb, tc)
    if not (np.all(ia == ia[0]) and np.all(ib == ib[0])):
        raise LoweringError("mma atom fma: the pairing of a, b and c values differs between threads; the "
                            "PTX lowering needs one pairing for all threads", span)
    return ia[0], ib[0]
