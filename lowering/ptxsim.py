"""A small PTX simulator for the subset `lowering.ptx` emits, so tests can *execute* the generated
PTX text on the CPU and compare it with the interpreter.

It is deliberately literal: registers hold raw bit patterns (a `.f32` register used by `shfl.b32`
or `mov.b32` keeps its bits), every instruction is decoded from the text, integer arithmetic wraps
at its width, floats are rounded to their width after each operation, `ld`/`st` check that the
address lies inside a tensor (an out-of-bounds access raises instead of reading garbage), shared
memory starts as 0xFF bytes (NaN), `cp.async` data lands in shared memory only at the
`cp.async.wait_group` that retires its group, `shfl.sync` requires all 32 lanes of the warp at the
same instruction, and `bar.sync` requires every live thread of the block.

Threads run one at a time until they reach a synchronising instruction; not fast (~1 µs per
instruction and thread), so use small grids. Approximate instructions (`ex2.approx`, `lg2.approx`,
`rsqrt.approx`) are computed exactly in float32; `fma.rn.f32` is computed in float64 then rounded.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping

import numpy as np

__all__ = ["PtxSimError", "run_lowered", "simulate"]


class PtxSimError(RuntimeError):
    pass


_F16 = np.float16
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


def _bf16_bits(x: np.float32) -> int:
    b = _bits32(x)
    if math.isnan(float(x)):
        return 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


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
        body = text[text.index("{", m.end()) + 1: text.rindex("}")]
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
        if a.startswith("0f"):
            return int(a[2:], 16)
        if a.startswith("0d"):
            return int(a[2:], 16)
        if a.startswith("0x") or a.startswith("-0x"):
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

    def addr(self, th: Thread, a: str) -> int:
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

    # -- execution -----------------------------------------------------------------------------
    def run(self) -> None:
        live = self.threads
        while True:
            progressed = False
            for th in live:
                if th.done or th.wait is not None:
                    continue
                self.run_thread(th)
                progressed = True
            if all(th.done for th in live):
                return
            waiting = [th for th in live if not th.done]
            bars = [th for th in waiting if th.wait and th.wait[0] == "bar"]
            if bars and len(bars) == len(waiting):
                for th in bars:
                    th.wait = None
                    th.pc += 1
                continue
            released = False
            for w in range(0, self.ntid, 32):
                lanes = self.threads[w:w + 32]
                at = [th for th in lanes if th.wait and th.wait[0] == "shfl"]
                if at and len(at) == len(lanes):
                    pcs = {th.wait[1] for th in at}
                    if len(pcs) != 1:
                        raise PtxSimError(f"warp {w // 32}: lanes wait at different shuffles {sorted(pcs)}")
                    self.do_shfl(lanes)
                    released = True
                elif at and any(th.done for th in lanes):
                    raise PtxSimError(f"warp {w // 32}: shfl.sync with exited lanes")
            if not released and not progressed:
                states = sorted({str(th.wait) for th in waiting})
                raise PtxSimError(f"block {self.ctaid}: deadlock, threads wait at {states}")

    def run_thread(self, th: Thread) -> None:
        code = self.p.code
        while not th.done:
            if th.pc >= len(code):
                raise PtxSimError("fell off the end of the kernel")
            ins = code[th.pc]
            self.steps += 1
            if ins.pred is not None:
                p = self.val(th, ins.pred)
                if bool(p) == ins.neg:
                    th.pc += 1
                    continue
            op = ins.op
            if op.startswith("bar.sync"):
                th.wait = ("bar", th.pc)
                return
            if op.startswith("shfl.sync"):
                th.wait = ("shfl", th.pc)
                return
            if op.startswith("bra"):
                th.pc = self.p.labels[ins.args[0]]
                continue
            if op == "ret":
                if th.pending or th.groups:
                    pass
                th.done = True
                return
            self.execute(th, ins)
            th.pc += 1

    def do_shfl(self, lanes: list) -> None:
        ins = self.p.code[lanes[0].wait[1]]
        mode = ins.op.split(".")[2]
        d, a, b, c = ins.args[:4]
        vals = [self.val(th, a) for th in lanes]
        out = []
        for lane, th in enumerate(lanes):
            bb = self.val(th, b) & 31
            cc = self.val(th, c)
            maxlane = cc & 31
            if mode == "up":
                j = lane - bb
                ok = j >= maxlane
            elif mode == "down":
                j = lane + bb
                ok = j <= maxlane
            elif mode == "bfly":
                j = lane ^ bb
                ok = j <= maxlane
            else:
                j = bb
                ok = j <= maxlane
            out.append(vals[j] if ok and 0 <= j < 32 else vals[lane])
        for th, v in zip(lanes, out, strict=True):
            self.set(th, d.split("|")[0], v, 32)
            th.wait = None
            th.pc += 1

    def execute(self, th: Thread, ins: Instr) -> None:
        op = ins.op
        parts = op.split(".")
        name = parts[0]
        a = ins.args
        ty = parts[-1]
        if name == "mov":
            self.mov(th, ins)
        elif name == "ld":
            self.load(th, ins)
        elif name == "st":
            self.store(th, ins)
        elif name == "cvta":
            self.set(th, a[0], self.val(th, a[1]), 64)
        elif name == "cvt":
            self.cvt(th, ins)
        elif name == "setp":
            self.setp(th, ins)
        elif name == "selp":
            w = _SIZES[ty] * 8
            v = self.val(th, a[1]) if self.val(th, a[3]) else self.val(th, a[2])
            self.set(th, a[0], v, w)
        elif name in ("and", "or", "xor", "not") and ty == "pred":
            x = [bool(self.val(th, r)) for r in a[1:]]
            r = {"and": lambda: x[0] and x[1], "or": lambda: x[0] or x[1], "xor": lambda: x[0] != x[1],
                 "not": lambda: not x[0]}[name]()
            self.set(th, a[0], int(r), 1)
        elif name == "cp":
            self.cp_async(th, ins)
        elif ty in ("f32", "f64") or name == "fma":
            self.fop(th, ins)
        else:
            self.iop(th, ins)

    def mov(self, th: Thread, ins: Instr) -> None:
        d, s = ins.args
        ty = ins.op.split(".")[-1]
        if d.startswith("{"):  # unpack
            parts = [x.strip() for x in d[1:-1].split(",")]
            v = self.val(th, s)
            w = _SIZES[ty] * 8 // len(parts)
            for i, r in enumerate(parts):
                self.set(th, r, v >> (i * w), w)
            return
        if s.startswith("{"):  # pack
            parts = [x.strip() for x in s[1:-1].split(",")]
            w = _SIZES[ty] * 8 // len(parts)
            v = 0
            for i, r in enumerate(parts):
                v |= (self.val(th, r) & ((1 << w) - 1)) << (i * w)
            self.set(th, d, v, _SIZES[ty] * 8)
            return
        if ty == "pred":
            self.set(th, d, self.val(th, s), 1)
            return
        self.set(th, d, self.val(th, s), _SIZES[ty] * 8)

    def _space(self, op: str) -> str:
        for sp in ("global", "shared", "param"):
            if f".{sp}" in op:
                return sp
        raise PtxSimError(f"unknown state space in {op}")

    def _read(self, space, addr, n) -> bytes:
        if space == "global":
            return self.mem.read(addr, n)
        if space == "shared":
            if addr < 0 or addr + n > len(self.smem):
                raise PtxSimError(f"shared access at {addr} of {n} bytes outside {len(self.smem)}")
            if addr % n:
                raise PtxSimError(f"misaligned shared access at {addr} ({n} bytes)")
            return bytes(self.smem[addr:addr + n])
        raise PtxSimError(space)

    def _write(self, space, addr, raw: bytes) -> None:
        if space == "global":
            self.mem.write(addr, raw)
        else:
            if addr < 0 or addr + len(raw) > len(self.smem):
                raise PtxSimError(f"shared store at {addr} of {len(raw)} bytes outside {len(self.smem)}")
            self.smem[addr:addr + len(raw)] = np.frombuffer(raw, dtype=np.uint8)

    def load(self, th: Thread, ins: Instr) -> None:
        op = ins.op
        parts = op.split(".")
        ty = parts[-1]
        size = _SIZES[ty]
        space = self._space(op)
        d, src = ins.args
        addr = self.addr(th, src)
        if space == "param":
            self.set(th, d, self.params[addr[1]], size * 8)
            return
        regs = [x.strip() for x in d[1:-1].split(",")] if d.startswith("{") else [d]
        total = size * len(regs)
        if space == "global" and addr % total:
            raise PtxSimError(f"misaligned {total}-byte global load at {addr:#x}: {ins.text}")
        raw = self._read(space, addr, total)
        for i, r in enumerate(regs):
            self.set(th, r, int.from_bytes(raw[i * size:(i + 1) * size], "little"), size * 8)

    def store(self, th: Thread, ins: Instr) -> None:
        op = ins.op
        ty = op.split(".")[-1]
        size = _SIZES[ty]
        space = self._space(op)
        dst, s = ins.args
        addr = self.addr(th, dst)
        regs = [x.strip() for x in s[1:-1].split(",")] if s.startswith("{") else [s]
        if space == "global" and addr % (size * len(regs)):
            raise PtxSimError(f"misaligned global store at {addr:#x}: {ins.text}")
        raw = b"".join((self.val(th, r) & ((1 << (8 * size)) - 1)).to_bytes(size, "little") for r in regs)
        self._write(space, addr, raw)

    def cp_async(self, th: Thread, ins: Instr) -> None:
        op = ins.op
        if op == "cp.async.commit_group":
            th.groups.append(th.pending)
            th.pending = []
            return
        if op == "cp.async.wait_group":
            n = self.val(th, ins.args[0])
            while len(th.groups) > n:
                for daddr, raw in th.groups.pop(0):
                    self._write("shared", daddr, raw)
            return
        if op == "cp.async.wait_all":
            th.groups.append(th.pending)
            th.pending = []
            while th.groups:
                for daddr, raw in th.groups.pop(0):
                    self._write("shared", daddr, raw)
            return
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
        r = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[cmp]
        self.set(th, d, int(r), 1)

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
            if signed and r >> (width - 1):
                r -= 1 << width
            return r

        if name == "add":
            r = v(a[1]) + v(a[2])
        elif name == "sub":
            r = v(a[1]) - v(a[2])
        elif name == "mul":
            r = v(a[1]) * v(a[2])
        elif name == "mad":
            r = v(a[1]) * v(a[2]) + (v(a[3], 64) if wide else v(a[3]))
        elif name in ("div", "rem"):
            x, y = v(a[1]), v(a[2])
            if y == 0:
                raise PtxSimError(f"integer division by zero: {ins.text}")
            q = abs(x) // abs(y)
            q = q if (x >= 0) == (y >= 0) else -q
            r = q if name == "div" else x - q * y
        elif name == "shr":
            r = v(a[1]) >> (self.val(th, a[2]) & 0xFF)
        elif name == "shl":
            r = v(a[1]) << (self.val(th, a[2]) & 0xFF)
        elif name in ("and", "or", "xor"):
            x, y = self.val(th, a[1]), self.val(th, a[2])
            r = {"and": x & y, "or": x | y, "xor": x ^ y}[name]
        elif name == "not":
            r = ~self.val(th, a[1])
        elif name in ("min", "max"):
            r = (min if name == "min" else max)(v(a[1]), v(a[2]))
        elif name == "neg":
            r = -v(a[1])
        elif name == "abs":
            r = abs(v(a[1]))
        else:
            raise PtxSimError(f"unsupported instruction {ins.text!r}")
        self.set(th, a[0], r, w)

    def fop(self, th: Thread, ins: Instr) -> None:
        parts = ins.op.split(".")
        name, ty = parts[0], parts[-1]
        a = ins.args
        if ty == "f64":
            x = [_f64(self.val(th, r)) for r in a[1:]]
            f = {"add": lambda: x[0] + x[1], "sub": lambda: x[0] - x[1], "mul": lambda: x[0] * x[1],
                 "div": lambda: x[0] / x[1] if x[1] else math.copysign(math.inf, x[0]) * math.copysign(1, x[1]),
                 "fma": lambda: math.fsum([x[0] * x[1], x[2]]), "max": lambda: max(x[0], x[1]),
                 "min": lambda: min(x[0], x[1]), "neg": lambda: -x[0], "abs": lambda: abs(x[0]),
                 "sqrt": lambda: math.sqrt(x[0]), "rcp": lambda: 1.0 / x[0]}[name]
            self.set(th, a[0], _bits64(f()), 64)
            return
        x = [_f32(self.val(th, r)) for r in a[1:]]
        with np.errstate(all="ignore"):
            if name == "add":
                r = x[0] + x[1]
            elif name == "sub":
                r = x[0] - x[1]
            elif name == "mul":
                r = x[0] * x[1]
            elif name == "div":
                r = x[0] / x[1]
            elif name in ("fma", "mad"):
                r = np.float32(np.float64(x[0]) * np.float64(x[1]) + np.float64(x[2]))
            elif name == "max":
                r = np.fmax(x[0], x[1])
            elif name == "min":
                r = np.fmin(x[0], x[1])
            elif name == "neg":
                r = -x[0]
            elif name == "abs":
                r = np.abs(x[0])
            elif name == "sqrt":
                r = np.sqrt(x[0])
            elif name == "rcp":
                r = np.float32(1.0) / x[0]
            elif name == "rsqrt":
                r = np.float32(1.0) / np.sqrt(x[0])
            elif name == "ex2":
                r = np.exp2(x[0])
            elif name == "lg2":
                r = np.log2(x[0])
            else:
                raise PtxSimError(f"unsupported instruction {ins.text!r}")
        self.set(th, a[0], _bits32(np.float32(r)), 32)

    def cvt(self, th: Thread, ins: Instr) -> None:
        parts = ins.op.split(".")
        mods = parts[1:-2]
        dt, st = parts[-2], parts[-1]
        d, s = ins.args
        raw = self.val(th, s)
        # source value as a Python number / numpy scalar
        if st == "f32":
            x = _f32(raw)
        elif st == "f64":
            x = _f64(raw)
        elif st == "f16":
            x = np.array(raw & 0xFFFF, dtype=np.uint16).view(_F16)[()]
        elif st == "bf16":
            x = _f32((raw & 0xFFFF) << 16)
        elif st in ("s32", "u32", "s64", "u64", "s16", "u16"):
            bits = _SIZES[st] * 8
            x = raw & ((1 << bits) - 1)
            if st.startswith("s") and x >> (bits - 1):
                x -= 1 << bits
        else:
            raise PtxSimError(f"unsupported cvt {ins.text!r}")
        with np.errstate(all="ignore"):
            if dt == "f32":
                self.set(th, d, _bits32(np.float32(x)), 32)
            elif dt == "f64":
                self.set(th, d, _bits64(float(x)), 64)
            elif dt == "f16":
                self.set(th, d, int(np.array(np.float32(x), dtype=_F16).view(np.uint16)), 16)
            elif dt == "bf16":
                self.set(th, d, _bf16_bits(np.float32(x)), 16)
            elif dt in ("s32", "u32", "s64", "u64"):
                fx = float(x)
                if "rni" in mods:
                    v = int(np.rint(fx)) if math.isfinite(fx) else 0
                elif "rzi" in mods:
                    v = int(fx) if math.isfinite(fx) else 0
                else:
                    v = int(x)
                self.set(th, d, v, _SIZES[dt] * 8)
            else:
                raise PtxSimError(f"unsupported cvt {ins.text!r}")


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
    bases = {}
    names = {}
    for pname, ty in prog.params:
        short = pname[len(prog.entry) + len("_param_"):]
        names[pname] = short
        if short in tensors:
            bases[short] = mem.add(short, tensors[short])
            params[pname] = bases[short]
        else:
            v = args[short]
            if ty == ".f32":
                params[pname] = _bits32(np.float32(v))
            elif ty == ".f64":
                params[pname] = _bits64(v)
            else:
                params[pname] = int(v) & ((1 << (_SIZES[ty[1:]] * 8)) - 1)
    gx, gy, gz = (tuple(grid) + (1, 1, 1))[:3]
    ids = blocks if blocks is not None else [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
    for cid in ids:
        Block(prog, mem, params, tuple(cid), (gx, gy, gz), block, dynamic_shared_bytes).run()
    out = {}
    for _, data, name in mem.bufs:
        arr = np.asarray(tensors[name])
        out[name] = data.view(arr.dtype).reshape(arr.shape).copy()
    return out


def run_lowered(lk, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int], scalars: Mapping | None = None,
                blocks: list | None = None) -> dict:
    """Like `runtime.cuda_backend.run_cuda`, on the simulator: outputs are poisoned (0xFF bytes)
    first and returned in host format (bf16 as float32)."""
    from argus_verify import ir

    kernel = lk.kernel
    scalars = dict(scalars or {})
    shapes = {}
    for t in kernel.tensors:
        shapes[t.name] = tuple(d.value if isinstance(d, ir.IConst) else int(sizes[d.name]) for d in t.shape)
    tensors = {}
    for t in kernel.tensors:
        if t.output:
            dt = np.uint16 if t.dtype == "bf16" else ir.numpy_dtype(t.dtype)
            n = int(np.prod(shapes[t.name], dtype=np.int64))
            tensors[t.name] = np.full(n * np.dtype(dt).itemsize, 0xFF, dtype=np.uint8).view(dt).reshape(
                shapes[t.name])
        else:
            a = np.asarray(inputs[t.name])
            if t.dtype == "bf16":
                x = np.ascontiguousarray(a, dtype=np.float32)
                b = x.view(np.uint32).astype(np.uint64)
                a = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
            tensors[t.name] = np.ascontiguousarray(a, dtype=np.uint16 if t.dtype == "bf16"
                                                   else ir.numpy_dtype(t.dtype))
    args = {**{k: int(v) for k, v in sizes.items()}, **scalars}
    res = simulate(lk.ptx, lk.entry, lk.grid(sizes, scalars), lk.block, args, tensors,
                   lk.dynamic_shared_bytes, blocks)
    out = {}
    for t in kernel.outputs:
        v = res[t.name]
        out[t.name] = (v.astype(np.uint32) << 16).view(np.float32) if t.dtype == "bf16" else v
    return out
