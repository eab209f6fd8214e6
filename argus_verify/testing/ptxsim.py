"""A small PTX simulator for the subset `argus_verify.lowering` emits, so tests can *execute* the
generated PTX text on the CPU and compare it with the interpreter.

It is deliberately literal: registers hold raw bit patterns (a `.f32` register used by `shfl.b32`
or `mov.b32` keeps its bits), every instruction is decoded from the text, integer arithmetic wraps
at its width, floats are rounded to their width after each operation, `ld`/`st` check that the
address lies inside a tensor (an out-of-bounds access raises instead of reading garbage), shared
memory starts as 0xFF bytes (NaN), `cp.async` data lands in shared memory only at the
`cp.async.wait_group` that retires its group, `shfl.sync` requires all 32 lanes of the warp at the
same instruction, and `bar.sync` requires every live thread of the block.

Where the semantics table (`argus_verify.semantics`) states what a PTX instruction computes, the
simulator reads it from there: approximate instructions (`ex2.approx`, `lg2.approx`, ...) compute
`semantics.ptx_sim_functions()` exactly in their float type, so a math function added to the table
with a new instruction runs here unchanged; conversions round as `semantics.round_to`; setp's
comparisons are the table's comparison operators; a shuffle must use a mode and clamp the table
lists. The rest follows the PTX ISA (truncating integer division, `max.f32` ignoring a NaN operand and
`max.NaN.f32` returning it, the shfl.sync lane rule); `fma.rn.f32` is computed in float64 then rounded.

Threads run one at a time until they reach a synchronising instruction; not fast (~1 µs per
instruction and thread), so use small grids.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping

import numpy as np

from argus_verify import ir, semantics

__all__ = ["PtxSimError", "run_lowered", "simulate"]


class PtxSimError(RuntimeError):
    pass


_U32 = 0xFFFFFFFF


def _s32(x: int) -> int:
    x &= _U32
    return x - (1 << 32) if x >> 31 else x


def _s64(x: int) -> int:
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def _f32(bits: int) -> np.float32:
    return np.array(bits & _U32, dtype=np.uint32).view(np.float32)[()]


def _bits32(x) -> int:
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def _f64(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits & ((1 << 64) - 1)))[0]


def _bits64(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def _bf16_bits(x) -> np.ndarray:
    """bf16 bit patterns of float values, rounded as `cvt.rn.bf16.f32` (the table's rounding)."""
    return (np.asarray(semantics.round_to(x, "bf16")).view(np.uint32) >> 16).astype(np.uint16)


def _f16_bits(x) -> int:
    return int(np.asarray(semantics.round_to(x, "f16")).view(np.uint16))


# ---------------------------------------------------------------------------------------------
# parsing


_INSTR = re.compile(r"^(?:@(!?)(%\w+)\s+)?([\w.:]+)\s*(.*)$")


class Instr:
    __slots__ = ("pred", "neg", "op", "args", "text")

    def __init__(self, pred, neg, op, args, text):
        self.pred, self.neg, self.op, self.args, self.text = pred, neg, op, args, text


def _split_args(s: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _reg_list(operand: str) -> list:
    """`{%r1, %r2}` -> ["%r1", "%r2"]; a single register -> [it]."""
    return [x.strip() for x in operand[1:-1].split(",")] if operand.startswith("{") else [operand]


class Program:
    def __init__(self, ptx: str, entry: str | None = None):
        lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
        text = "\n".join(lines)
        m = re.search(r"\.entry\s+(\w+)\s*\((.*?)\)", text, re.S)
        if not m:
            raise PtxSimError("no .entry")
        self.entry = m.group(1)
        if entry is not None and entry != self.entry:
            raise PtxSimError(f"entry {self.entry}, expected {entry}")
        self.params = []
        for p in m.group(2).split(","):
            p = p.strip()
            if p:
                _, ty, name = p.split()
                self.params.append((name, ty))
        self._parse_shared(text)
        self._parse_code(text[text.index("{", m.end()) + 1: text.rindex("}")])
        # what the table says the approximate instructions compute (read per program, so a table
        # entry added at run time, as the tests do, is seen)
        self.approx = semantics.ptx_sim_functions()
        self.shuffles = {(m.ptx, m.clamp) for m in semantics.SHUFFLE_MODES.values()}

    def _parse_shared(self, text: str) -> None:
        self.shared = {}  # symbol -> (offset, size)
        self.dynamic = None
        off = 0
        for sm in re.finditer(r"\.shared\s+\.align\s+(\d+)\s+\.b8\s+(\w+)\[(\d*)\]", text):
            align, name, size = int(sm.group(1)), sm.group(2), sm.group(3)
            if size == "":
                self.dynamic = name
                continue
            off = -(-off // align) * align
            self.shared[name] = (off, int(size))
            off += int(size)
        self.static_bytes = off

    def _parse_code(self, body: str) -> None:
        self.code: list[Instr] = []
        self.labels: dict[str, int] = {}
        for raw in body.split("\n"):
            for stmt in raw.split(";"):
                stmt = stmt.strip()
                if not stmt or stmt.startswith("."):
                    continue
                if stmt.endswith(":"):
                    self.labels[stmt[:-1]] = len(self.code)
                    continue
                im = _INSTR.match(stmt)
                if not im:
                    raise PtxSimError(f"cannot parse {stmt!r}")
                neg, pred, op, rest = im.groups()
                self.code.append(Instr(pred, neg == "!", op, _split_args(rest), stmt))


# ---------------------------------------------------------------------------------------------
# machine state


class Memory:
    """Global memory: named byte buffers at distinct base addresses."""

    def __init__(self):
        self.bufs: list = []  # (base, bytearray view (np.uint8), name)
        self.next = 1 << 32

    def add(self, name: str, arr: np.ndarray) -> int:
        data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).copy()
        base = self.next
        self.next += ((len(data) + 4095) // 4096 + 1) * 4096
        self.bufs.append((base, data, name))
        return base

    def find(self, addr: int, n: int):
        for base, data, _ in self.bufs:
            if base <= addr and addr + n <= base + len(data):
                return data, addr - base
        near = min(self.bufs, key=lambda b: abs(addr - b[0]))
        raise PtxSimError(f"global access of {n} bytes at {addr:#x} is outside every tensor "
                          f"(nearest: {near[2]} at {near[0]:#x}, {len(near[1])} bytes)")

    def read(self, addr: int, n: int) -> bytes:
        data, off = self.find(addr, n)
        return bytes(data[off:off + n])

    def write(self, addr: int, raw: bytes) -> None:
        data, off = self.find(addr, len(raw))
        data[off:off + len(raw)] = np.frombuffer(raw, dtype=np.uint8)


class Thread:
    __slots__ = ("tid", "pc", "regs", "done", "pending", "groups", "wait")

    def __init__(self, tid: int):
        self.tid = tid
        self.pc = 0
        self.regs: dict[str, int] = {}
        self.done = False
        self.pending: list = []  # cp.async issued since the last commit
        self.groups: list = []  # committed, not yet retired
        self.wait = None  # ("bar"|"shfl", pc) when blocked


_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "f16": 2, "bf16": 2, "u16": 2, "s16": 2, "b32": 4, "u32": 4,
          "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}

# the shfl.sync lane rule of the PTX ISA (no segment mask): (source lane, whether it is in range)
# for lane l, operand b and clamp c
_SHFL_LANE = {
    "up": lambda lane, b, c: (lane - b, lane - b >= c),
    "down": lambda lane, b, c: (lane + b, lane + b <= c),
    "bfly": lambda lane, b, c: (lane ^ b, lane ^ b <= c),
    "idx": lambda lane, b, c: (b, b <= c),
}

# setp's comparisons, as the table's comparison operators compute them
_SETP = {o.ptx: o.ref for o in semantics.INT_OPS.values() if o.compare}


def shfl_source(mode: str, lane: int, b: int, c: int) -> int:
    """The lane that `lane` reads in `shfl.sync.<mode>` with operands b and c (itself when out of
    range)."""
    j, ok = _SHFL_LANE[mode](lane, b & 31, c & 31)
    return j if ok and 0 <= j < 32 else lane


def _wrap_div(name: str, x: int, y: int, text: str) -> int:
    if y == 0:
        raise PtxSimError(f"integer division by zero: {text}")
    q = abs(x) // abs(y)
    q = q if (x >= 0) == (y >= 0) else -q
    return q if name == "div" else x - q * y


# integer instructions on operand values (sign-extended for .s types)
_INT_OPS = {
    "add": lambda a: a[0] + a[1], "sub": lambda a: a[0] - a[1], "mul": lambda a: a[0] * a[1],
    "min": lambda a: min(a[0], a[1]), "max": lambda a: max(a[0], a[1]), "neg": lambda a: -a[0],
    "abs": lambda a: abs(a[0]),
}
_BIT_OPS = {
    "and": lambda a: a[0] & a[1], "or": lambda a: a[0] | a[1], "xor": lambda a: a[0] ^ a[1],
    "not": lambda a: ~a[0],
}


def _f64_div(x, y):
    return x / y if y else math.copysign(math.inf, x) * math.copysign(1, y)


# float instructions of the PTX ISA that are exact in their type (.rn rounding)
_F32_OPS = {
    "add": lambda x: x[0] + x[1], "sub": lambda x: x[0] - x[1], "mul": lambda x: x[0] * x[1],
    "div": lambda x: x[0] / x[1], "max": lambda x: np.fmax(x[0], x[1]), "min": lambda x: np.fmin(x[0], x[1]),
    "neg": lambda x: -x[0], "abs": lambda x: np.abs(x[0]), "sqrt": lambda x: np.sqrt(x[0]),
    "rcp": lambda x: np.float32(1.0) / x[0],
    "fma": lambda x: np.float32(np.float64(x[0]) * np.float64(x[1]) + np.float64(x[2])),
}
_F32_OPS["mad"] = _F32_OPS["fma"]
_F32_NAN_OPS = {"max": lambda x: np.maximum(x[0], x[1]), "min": lambda x: np.minimum(x[0], x[1])}  # max.NaN
_F64_OPS = {
    "add": lambda x: x[0] + x[1], "sub": lambda x: x[0] - x[1], "mul": lambda x: x[0] * x[1],
    "div": lambda x: _f64_div(x[0], x[1]), "fma": lambda x: math.fsum([x[0] * x[1], x[2]]),
    "max": lambda x: max(x[0], x[1]), "min": lambda x: min(x[0], x[1]), "neg": lambda x: -x[0],
    "abs": lambda x: abs(x[0]), "sqrt": lambda x: math.sqrt(x[0]), "rcp": lambda x: 1.0 / x[0],
}


class Block:
    def __init__(self, prog: Program, mem: Memory, params: dict, ctaid: tuple, nctaid: tuple, ntid: int,
                 dynamic_bytes: int):
        self.p = prog
        self.mem = mem
        self.params = params
        self.ctaid = ctaid
        self.nctaid = nctaid
        self.ntid = ntid
        dyn_base = -(-prog.static_bytes // 128) * 128
        self.smem = np.full(dyn_base + dynamic_bytes + 16, 0xFF, dtype=np.uint8)
        self.sym = {name: off for name, (off, _) in prog.shared.items()}
        if prog.dynamic:
            self.sym[prog.dynamic] = dyn_base
        self.threads = [Thread(t) for t in range(ntid)]
        self.steps = 0

    # -- operands ------------------------------------------------------------------------------
    def val(self, th: Thread, a: str) -> int:
        if a.startswith("%"):
            if a in th.regs:
                return th.regs[a]
            sp = self.special(th, a)
            if sp is not None:
                return sp
            raise PtxSimError(f"thread {th.tid}: read of undefined register {a} at {self.p.code[th.pc].text!r}")
        if a.startswith(("0f", "0d")):
            return int(a[2:], 16)
        if a.startswith(("0x", "-0x")):
            return int(a, 16)
        if re.fullmatch(r"-?\d+", a):
            return int(a)
        if a in self.sym:
            return self.sym[a]
        raise PtxSimError(f"bad operand {a!r}")

    def special(self, th: Thread, a: str):
        axis = "xyz"
        if a == "%tid.x":
            return th.tid
        if a in ("%tid.y", "%tid.z"):
            return 0
        if a.startswith("%ctaid."):
            return self.ctaid[axis.index(a[-1])]
        if a.startswith("%nctaid."):
            return self.nctaid[axis.index(a[-1])]
        if a == "%ntid.x":
            return self.ntid
        if a == "%laneid":
            return th.tid % 32
        return None

    def addr(self, th: Thread, a: str):
        """A byte address, or ("param", name) for a parameter."""
        inner = a.strip()[1:-1].strip()
        m = re.fullmatch(r"(%?\w+)\s*(?:\+\s*(-?\d+))?", inner)
        if not m:
            raise PtxSimError(f"bad address {a!r}")
        base = m.group(1)
        off = int(m.group(2) or 0)
        if base in self.params:
            return ("param", base)
        return self.val(th, base) + off

    def set(self, th: Thread, d: str, v: int, width: int) -> None:
        th.regs[d] = int(v) & ((1 << width) - 1) if width else int(v)

    # -- scheduling ----------------------------------------------------------------------------
    def run(self) -> None:
        while True:
            progressed = False
            for th in self.threads:
                if not th.done and th.wait is None:
                    self.run_thread(th)
                    progressed = True
            if all(th.done for th in self.threads):
                return
            waiting = [th for th in self.threads if not th.done]
            if self._release_barrier(waiting):
                continue
            if not self._release_shuffles() and not progressed:
                states = sorted({str(th.wait) for th in waiting})
                raise PtxSimError(f"block {self.ctaid}: deadlock, threads wait at {states}")

    def _release_barrier(self, waiting: list) -> bool:
        bars = [th for th in waiting if th.wait and th.wait[0] == "bar"]
        if not bars or len(bars) != len(waiting):
            return False
        for th in bars:
            th.wait = None
            th.pc += 1
        return True

    def _release_shuffles(self) -> bool:
        released = False
        for w in range(0, self.ntid, 32):
            lanes = self.threads[w:w + 32]
            at = [th for th in lanes if th.wait and th.wait[0] == "shfl"]
            if at and len(at) == len(lanes):
                pcs = {th.wait[1] for th in at}
                if len(pcs) != 1:
                    raise PtxSimError(f"warp {w // 32}: lanes wait at different shuffles {sorted(pcs)}")
                op = self.p.code[at[0].wait[1]].op
                if op.startswith("ldmatrix"):
                    self.do_ldmatrix(lanes)
                elif op.startswith("stmatrix"):
                    self.do_stmatrix(lanes)
                elif op.startswith("mma.sync"):
                    self.do_mma(lanes)
                else:
                    self.do_shfl(lanes)
                released = True
            elif at and any(th.done for th in lanes):
                raise PtxSimError(f"warp {w // 32}: shfl.sync with exited lanes")
        return released

    def run_thread(self, th: Thread) -> None:
        code = self.p.code
        while not th.done:
            if th.pc >= len(code):
                raise PtxSimError("fell off the end of the kernel")
            ins = code[th.pc]
            self.steps += 1
            if ins.pred is not None and bool(self.val(th, ins.pred)) == ins.neg:
                th.pc += 1
                continue
            op = ins.op
            if op.startswith(("bar.sync", "shfl.sync", "ldmatrix", "stmatrix", "mma.sync")):
                th.wait = ("bar" if op.startswith("bar") else "shfl", th.pc)
                return
            if op.startswith("bra"):
                th.pc = self.p.labels[ins.args[0]]
                continue
            if op == "ret":
                th.done = True
                return
            self.execute(th, ins)
            th.pc += 1

    def do_shfl(self, lanes: list) -> None:
        ins = self.p.code[lanes[0].wait[1]]
        mode = ins.op.split(".")[2]
        d, a, b, c = ins.args[:4]
        clamps = {self.val(th, c) for th in lanes}
        if any((mode, clamp) not in self.p.shuffles for clamp in clamps):
            raise PtxSimError(f"{ins.text!r}: the semantics table has no shuffle mode with this PTX mode and clamp")
        vals = [self.val(th, a) for th in lanes]
        out = [vals[shfl_source(mode, lane, self.val(th, b), self.val(th, c))] for lane, th in enumerate(lanes)]
        for th, v in zip(lanes, out, strict=True):
            self.set(th, d.split("|")[0], v, 32)
            th.wait = None
            th.pc += 1

    # -- warp-level matrix instructions, by the PTX ISA's rules (groupID = lane >> 2,
    # threadID_in_group = lane % 4), written here independently of argus_verify.atoms ----------
    def do_ldmatrix(self, lanes: list) -> None:
        """ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lanes 8q..8q+7 address the rows of
        matrix q (16 bytes each); lane l receives row l/4, columns 2(l%4), 2(l%4)+1 of each matrix
        (with .trans: column l/4 of rows 2(l%4), 2(l%4)+1), the lower-numbered element in the low half."""
        ins = self.p.code[lanes[0].wait[1]]
        parts = ins.op.split(".")
        count = int(next(p for p in parts if p in ("x1", "x2", "x4"))[1])
        trans = "trans" in parts
        regs = _reg_list(ins.args[0])
        mats = []
        for q in range(count):
            rows = []
            for r in range(8):
                addr = self.addr(lanes[8 * q + r], ins.args[1])
                if addr % 16:
                    raise PtxSimError(f"misaligned ldmatrix row address {addr:#x}: {ins.text}")
                rows.append(np.frombuffer(self._read("shared", addr, 16), dtype=np.uint16))
            mats.append(np.stack(rows))
        for lane, th in enumerate(lanes):
            g, t = lane >> 2, lane % 4
            for q, r in enumerate(regs):
                m = mats[q]
                lo, hi = (m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1])
                self.set(th, r, int(lo) | int(hi) << 16, 32)
            th.wait = None
            th.pc += 1

    def do_stmatrix(self, lanes: list) -> None:
        """stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: the inverse of ldmatrix (lane l's
        register q holds row l/4, columns 2(l%4), 2(l%4)+1 of matrix q, or with .trans column l/4 of
        rows 2(l%4), 2(l%4)+1); lanes 8q..8q+7 address matrix q's rows."""
        ins = self.p.code[lanes[0].wait[1]]
        parts = ins.op.split(".")
        count = int(next(p for p in parts if p in ("x1", "x2", "x4"))[1])
        trans = "trans" in parts
        regs = _reg_list(ins.args[1])
        for q in range(count):
            m = np.zeros((8, 8), dtype=np.uint16)
            for lane, th in enumerate(lanes):
                g, t = lane >> 2, lane % 4
                w = self.val(th, regs[q])
                lo, hi = w & 0xFFFF, w >> 16 & 0xFFFF
                if trans:
                    m[2 * t, g], m[2 * t + 1, g] = lo, hi
                else:
                    m[g, 2 * t], m[g, 2 * t + 1] = lo, hi
            for r in range(8):
                addr = self.addr(lanes[8 * q + r], ins.args[0])
                if addr % 16:
                    raise PtxSimError(f"misaligned stmatrix row address {addr:#x}: {ins.text}")
                self._write("shared", addr, m[r].tobytes())
        for th in lanes:
            th.wait = None
            th.pc += 1

    def do_mma(self, lanes: list) -> None:
        """mma.sync.aligned.m16n8k{16,8}.row.col.f32.{bf16,f16}.{bf16,f16}.f32 by the fragment
        figures of the ISA; products exact, the sum rounded once to f32."""
        ins = self.p.code[lanes[0].wait[1]]
        parts = ins.op.split(".")
        shape, ab, cd = parts[3], parts[7], parts[6]
        if cd != "f32" or ab not in ("bf16", "f16") or shape not in ("m16n8k16", "m16n8k8"):
            raise PtxSimError(f"unsupported mma: {ins.text}")
        K = 16 if shape == "m16n8k16" else 8
        d, a, b, c = (_reg_list(x) for x in ins.args[:4])

        def half(bits: int) -> float:
            if ab == "bf16":
                return float(_f32(bits << 16))
            return float(np.uint16(bits).view(np.float16))

        A, B, C = np.zeros((16, K)), np.zeros((K, 8)), np.zeros((16, 8))
        for lane, th in enumerate(lanes):
            g, t = lane >> 2, lane % 4
            av = [self.val(th, r) >> (16 * h) & 0xFFFF for r in a for h in (0, 1)]
            bv = [self.val(th, r) >> (16 * h) & 0xFFFF for r in b for h in (0, 1)]
            for i, x in enumerate(av):
                row = g + 8 * ((i // 2) % 2) if K == 16 else g + 8 * (i // 2)
                col = 2 * t + (i & 1) + (8 * (i // 4) if K == 16 else 0)
                A[row, col] = half(x)
            for i, x in enumerate(bv):
                row = 2 * t + (i & 1) + (8 * (i // 2) if K == 16 else 0)
                B[row, g] = half(x)
            for i, r in enumerate(c):
                C[g + 8 * (i // 2), 2 * t + (i & 1)] = float(_f32(self.val(th, r)))
        D = (C + A @ B).astype(np.float32)
        for lane, th in enumerate(lanes):
            g, t = lane >> 2, lane % 4
            for i, r in enumerate(d):
                self.set(th, r, _bits32(D[g + 8 * (i // 2), 2 * t + (i & 1)]), 32)
            th.wait = None
            th.pc += 1

    # -- instructions --------------------------------------------------------------------------
    def execute(self, th: Thread, ins: Instr) -> None:
        parts = ins.op.split(".")
        name, ty = parts[0], parts[-1]
        handler = {"mov": self.mov, "ld": self.load, "st": self.store, "cvta": self.cvta, "cvt": self.cvt,
                   "setp": self.setp, "selp": self.selp, "cp": self.cp_async}.get(name)
        if handler is None and ty == "pred":
            handler = self.pred_logic
        elif handler is None and (ty in ("f32", "f64") or name == "fma"):
            handler = self.fop
        handler = handler or self.iop
        handler(th, ins)

    def cvta(self, th: Thread, ins: Instr) -> None:
        self.set(th, ins.args[0], self.val(th, ins.args[1]), 64)

    def selp(self, th: Thread, ins: Instr) -> None:
        a = ins.args
        v = self.val(th, a[1]) if self.val(th, a[3]) else self.val(th, a[2])
        self.set(th, a[0], v, _SIZES[ins.op.split(".")[-1]] * 8)

    def pred_logic(self, th: Thread, ins: Instr) -> None:
        x = [bool(self.val(th, r)) for r in ins.args[1:]]
        name = ins.op.split(".")[0]
        r = {"and": lambda: x[0] and x[1], "or": lambda: x[0] or x[1], "xor": lambda: x[0] != x[1],
             "not": lambda: not x[0]}[name]()
        self.set(th, ins.args[0], int(r), 1)

    def mov(self, th: Thread, ins: Instr) -> None:
        d, s = ins.args
        ty = ins.op.split(".")[-1]
        width = 1 if ty == "pred" else _SIZES[ty] * 8
        if d.startswith("{"):  # unpack
            parts = _reg_list(d)
            v = self.val(th, s)
            w = width // len(parts)
            for i, r in enumerate(parts):
                self.set(th, r, v >> (i * w), w)
        elif s.startswith("{"):  # pack
            parts = _reg_list(s)
            w = width // len(parts)
            v = 0
            for i, r in enumerate(parts):
                v |= (self.val(th, r) & ((1 << w) - 1)) << (i * w)
            self.set(th, d, v, width)
        else:
            self.set(th, d, self.val(th, s), width)

    def _space(self, op: str) -> str:
        for sp in ("global", "shared", "param"):
            if f".{sp}" in op:
                return sp
        raise PtxSimError(f"unknown state space in {op}")

    def _read(self, space, addr, n) -> bytes:
        if space == "global":
            return self.mem.read(addr, n)
        if space == "shared":
            addr &= _U32  # (a 32-bit shared address wraps: [%r - 4 t + 508] is valid PTX)
            if addr < 0 or addr + n > len(self.smem):
                raise PtxSimError(f"shared access at {addr} of {n} bytes outside {len(self.smem)}")
            if addr % n:
                raise PtxSimError(f"misaligned shared access at {addr} ({n} bytes)")
            return bytes(self.smem[addr:addr + n])
        raise PtxSimError(space)

    def _write(self, space, addr, raw: bytes) -> None:
        if space == "global":
            self.mem.write(addr, raw)
            return
        addr &= _U32  # (shared addresses are 32 bits: see _read)
        if addr < 0 or addr + len(raw) > len(self.smem):
            raise PtxSimError(f"shared store at {addr} of {len(raw)} bytes outside {len(self.smem)}")
        self.smem[addr:addr + len(raw)] = np.frombuffer(raw, dtype=np.uint8)

    def load(self, th: Thread, ins: Instr) -> None:
        size = _SIZES[ins.op.split(".")[-1]]
        space = self._space(ins.op)
        d, src = ins.args
        addr = self.addr(th, src)
        if space == "param":
            self.set(th, d, self.params[addr[1]], size * 8)
            return
        regs = _reg_list(d)
        total = size * len(regs)
        if space == "global" and addr % total:
            raise PtxSimError(f"misaligned {total}-byte global load at {addr:#x}: {ins.text}")
        raw = self._read(space, addr, total)
        for i, r in enumerate(regs):
            self.set(th, r, int.from_bytes(raw[i * size:(i + 1) * size], "little"), size * 8)

    def store(self, th: Thread, ins: Instr) -> None:
        size = _SIZES[ins.op.split(".")[-1]]
        space = self._space(ins.op)
        dst, s = ins.args
        addr = self.addr(th, dst)
        regs = _reg_list(s)
        if space == "global" and addr % (size * len(regs)):
            raise PtxSimError(f"misaligned global store at {addr:#x}: {ins.text}")
        raw = b"".join((self.val(th, r) & ((1 << (8 * size)) - 1)).to_bytes(size, "little") for r in regs)
        self._write(space, addr, raw)

    def cp_async(self, th: Thread, ins: Instr) -> None:
        op = ins.op
        if op == "cp.async.commit_group":
            th.groups.append(th.pending)
            th.pending = []
        elif op == "cp.async.wait_group":
            self._retire(th, self.val(th, ins.args[0]))
        elif op == "cp.async.wait_all":
            th.groups.append(th.pending)
            th.pending = []
            self._retire(th, 0)
        else:
            self._issue_copy(th, ins)

    def _retire(self, th: Thread, pending: int) -> None:
        """Land the oldest committed groups until at most `pending` remain."""
        while len(th.groups) > pending:
            for daddr, raw in th.groups.pop(0):
                self._write("shared", daddr, raw)

    def _issue_copy(self, th: Thread, ins: Instr) -> None:
        dst, src, size = ins.args[:3]
        size = self.val(th, size)
        src_size = self.val(th, ins.args[3]) if len(ins.args) > 3 else size
        daddr = self.addr(th, dst)
        saddr = self.addr(th, src)
        if daddr % size or saddr % size:
            raise PtxSimError(f"misaligned cp.async of {size} bytes: {ins.text}")
        raw = self.mem.read(saddr, src_size) if src_size else b""
        th.pending.append((daddr, raw + bytes(size - src_size)))

    def setp(self, th: Thread, ins: Instr) -> None:
        _, cmp, ty = ins.op.split(".")
        d, x, y = ins.args
        a, b = self.val(th, x), self.val(th, y)
        if ty == "s32":
            a, b = _s32(a), _s32(b)
        elif ty == "u32":
            a, b = a & _U32, b & _U32
        elif ty == "s64":
            a, b = _s64(a), _s64(b)
        elif ty == "f32":
            a, b = float(_f32(a)), float(_f32(b))
        self.set(th, d, int(_SETP[cmp](a, b)), 1)

    def iop(self, th: Thread, ins: Instr) -> None:
        parts = ins.op.split(".")
        name, ty = parts[0], parts[-1]
        a = ins.args
        wide = "wide" in parts
        w = 64 if wide or ty in ("s64", "u64", "b64") else 32
        inw = 32 if wide else w
        signed = ty.startswith("s")

        def v(x, width=inw):
            r = self.val(th, x) & ((1 << width) - 1)
            return r - (1 << width) if signed and r >> (width - 1) else r

        if name in _INT_OPS:
            r = _INT_OPS[name]([v(x) for x in a[1:]])
        elif name in _BIT_OPS:
            r = _BIT_OPS[name]([self.val(th, x) for x in a[1:]])
        elif name == "mad":
            r = v(a[1]) * v(a[2]) + (v(a[3], 64) if wide else v(a[3]))
        elif name in ("div", "rem"):
            r = _wrap_div(name, v(a[1]), v(a[2]), ins.text)
        elif name in ("shr", "shl"):
            amount = self.val(th, a[2]) & 0xFF
            r = v(a[1]) >> amount if name == "shr" else v(a[1]) << amount
        else:
            raise PtxSimError(f"unsupported instruction {ins.text!r}")
        self.set(th, a[0], r, w)

    def fop(self, th: Thread, ins: Instr) -> None:
        parts = ins.op.split(".")
        name, ty = parts[0], parts[-1]
        approx = self.p.approx.get(ins.op)
        if ty == "f64":
            x = [_f64(self.val(th, r)) for r in ins.args[1:]]
            f = approx or _F64_OPS.get(name)
            if f is None:
                raise PtxSimError(f"unsupported instruction {ins.text!r}")
            self.set(th, ins.args[0], _bits64(f(*x) if approx else f(x)), 64)
            return
        x = [_f32(self.val(th, r)) for r in ins.args[1:]]
        f = approx or (_F32_NAN_OPS.get(name) if "NaN" in parts else _F32_OPS.get(name))
        if f is None:
            raise PtxSimError(f"unsupported instruction {ins.text!r}")
        with np.errstate(all="ignore"):
            r = f(*x) if approx else f(x)
        self.set(th, ins.args[0], _bits32(np.float32(r)), 32)

    def cvt(self, th: Thread, ins: Instr) -> None:
        parts = ins.op.split(".")
        mods = parts[1:-2]
        dt, st = parts[-2], parts[-1]
        if dt in ("bf16x2", "f16x2") and st == "f32":  # d = {cvt(a) upper half, cvt(b) lower half}
            d, a, b = ins.args
            half = _f16_bits if dt == "f16x2" else (lambda x: int(_bf16_bits(np.float32(x))))
            with np.errstate(all="ignore"):
                hi, lo = half(_f32(self.val(th, a))), half(_f32(self.val(th, b)))
            self.set(th, d, (hi << 16) | lo, 32)
            return
        d, s = ins.args
        x = _cvt_source(self.val(th, s), st, ins.text)
        with np.errstate(all="ignore"):
            if dt == "f32":
                self.set(th, d, _bits32(np.float32(x)), 32)
            elif dt == "f64":
                self.set(th, d, _bits64(float(x)), 64)
            elif dt == "f16":
                self.set(th, d, _f16_bits(x), 16)
            elif dt == "bf16":
                self.set(th, d, int(_bf16_bits(np.float32(x))), 16)
            elif dt in ("s32", "u32", "s64", "u64"):
                self.set(th, d, _to_int(x, mods), _SIZES[dt] * 8)
            else:
                raise PtxSimError(f"unsupported cvt {ins.text!r}")


def _cvt_source(raw: int, st: str, text: str):
    """A cvt's source register as a Python / numpy number of its type."""
    if st == "f32":
        return _f32(raw)
    if st == "f64":
        return _f64(raw)
    if st == "f16":
        return np.array(raw & 0xFFFF, dtype=np.uint16).view(np.float16)[()]
    if st == "bf16":
        return _f32((raw & 0xFFFF) << 16)
    if st in ("s32", "u32", "s64", "u64", "s16", "u16"):
        bits = _SIZES[st] * 8
        x = raw & ((1 << bits) - 1)
        return x - (1 << bits) if st.startswith("s") and x >> (bits - 1) else x
    raise PtxSimError(f"unsupported cvt {text!r}")


def _to_int(x, mods: list) -> int:
    fx = float(x)
    if "rni" in mods:
        return int(np.rint(fx)) if math.isfinite(fx) else 0
    if "rzi" in mods:
        return int(fx) if math.isfinite(fx) else 0
    return int(x)


def simulate(ptx: str, entry: str, grid: tuple, block: int, args: Mapping, tensors: Mapping[str, np.ndarray],
             dynamic_shared_bytes: int = 0, blocks: list | None = None) -> dict:
    """Run `entry` of `ptx` on `tensors` (device-format numpy arrays, by parameter name; outputs are
    updated in place and returned). `args` gives the value of each non-tensor parameter (sizes,
    scalars as Python numbers; floats are passed as f32/f64 bit patterns by their PTX type).
    `blocks` restricts the simulation to some block ids (default: the whole grid).
    """
    prog = Program(ptx, entry)
    mem = Memory()
    params = {}
    for pname, ty in prog.params:
        short = pname[len(prog.entry) + len("_param_"):]
        if short in tensors:
            params[pname] = mem.add(short, tensors[short])
        else:
            params[pname] = _param_bits(args[short], ty)
    gx, gy, gz = (tuple(grid) + (1, 1, 1))[:3]
    ids = blocks if blocks is not None else [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
    for cid in ids:
        Block(prog, mem, params, tuple(cid), (gx, gy, gz), block, dynamic_shared_bytes).run()
    out = {}
    for _, data, name in mem.bufs:
        arr = np.asarray(tensors[name])
        out[name] = data.view(arr.dtype).reshape(arr.shape).copy()
    return out


def _param_bits(value, ty: str) -> int:
    if ty == ".f32":
        return _bits32(np.float32(value))
    if ty == ".f64":
        return _bits64(value)
    return int(value) & ((1 << (_SIZES[ty[1:]] * 8)) - 1)


def run_lowered(lk, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int], scalars: Mapping | None = None,
                blocks: list | None = None) -> dict:
    """Like `runtime.cuda_backend.run_cuda`, on the simulator: outputs are poisoned (0xFF bytes)
    first and returned in host format (bf16 as float32)."""
    kernel = lk.kernel
    scalars = dict(scalars or {})
    shapes = ir.tensor_shapes(kernel, sizes)
    tensors = {t.name: (_poisoned(t, shapes[t.name]) if t.output else _device_input(t, inputs[t.name]))
               for t in kernel.tensors}
    args = {**{k: int(v) for k, v in sizes.items()}, **scalars}
    grid = tuple(lk.grid(sizes, scalars))
    if ir.empty_grid(grid):  # as the GPU does
        raise PtxSimError(ir.empty_grid(grid))
    res = simulate(lk.ptx, lk.entry, grid, lk.block, args, tensors, lk.dynamic_shared_bytes, blocks)
    out = {}
    for t in kernel.outputs:
        v = res[t.name]
        out[t.name] = (v.astype(np.uint32) << 16).view(np.float32) if t.dtype == "bf16" else v
    return out


def _device_dtype(dtype: str):
    return np.uint16 if dtype == "bf16" else ir.numpy_dtype(dtype)


def _poisoned(t, shape: tuple) -> np.ndarray:
    dt = _device_dtype(t.dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return np.full(n * np.dtype(dt).itemsize, 0xFF, dtype=np.uint8).view(dt).reshape(shape)


def _device_input(t, a) -> np.ndarray:
    if t.dtype == "bf16":
        return np.ascontiguousarray(_bf16_bits(np.ascontiguousarray(a, dtype=np.float32)))
    return np.ascontiguousarray(a, dtype=_device_dtype(t.dtype))
