"""Lift parsed PTX into the thread-level program form (argus_verify.thread_ir).

Basic blocks are split at labels and branches; dominators give the natural loops (a back edge's
target dominates its source), post-dominators the join of each conditional branch. The
control-flow graph is then rebuilt as structured statements: `If` for branches, `Loop` with
`Break`/`Continue` for natural loops, `Return`. A control-flow graph that is not reducible, a loop
left towards two different places inside an outer loop, or an instruction the lifter does not
model become `Unsupported(reason, loc)`: the obligations they may affect are unknown, never proved.
"""

from __future__ import annotations

import os

from argus_verify import thread_ir as T
from argus_verify.frontend.ptx.parser import Entry, Instr, Label, Module

# opcodes (first dotted word) the verifier evaluates as pure register operations
PURE = {
    "mov", "add", "sub", "mul", "mad", "mul24", "mad24", "div", "rem", "and", "or", "xor", "not", "shl", "shr",
    "min", "max", "neg", "abs", "cvt", "cvta", "selp", "setp", "set", "slct", "bfe", "bfi", "brev", "clz", "popc",
    "prmt", "fma", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "copysign", "testp", "cnot",
    "shf", "sad", "lop3", "dp4a", "dp2a", "vote", "activemask", "match", "isspacep", "nanosleep",
    "createpolicy", "fns", "bmsk", "szext", "madc", "addc", "subc", "mul.hi",
}
# no effect on the properties the audit checks (memory ordering fences are not synchronisation)
IGNORED = {"membar", "fence", "prefetch", "prefetchu", "pmevent", "trap", "brkpt", "discard", "applypriority"}


class Lifter:
    def __init__(self, module: Module, entry: Entry, ptx_file: str, source_file: str | None):
        self.module = module
        self.entry = entry
        self.ptx_file = ptx_file
        self.source_file = source_file
        self.main_index = self._main_file_index()
        self.unsupported: list[T.Unsupported] = []
        self.budget = 20000
        self.synth = 0  # registers the lifter makes up (ldmatrix lane predicates)

    # ------------------------------------------------------------ locations

    def _main_file_index(self) -> int | None:
        if not self.module.files:
            return None
        if self.source_file:
            want = os.path.basename(self.source_file)
            for i, path in self.module.files.items():
                if os.path.basename(path) == want:
                    return i
        return min(self.module.files)

    def loc(self, pending) -> T.Loc:
        _, ptx_line, dbg = pending
        if dbg is None or self.main_index is None or self.source_file is None:
            return T.Loc(ptx_line)
        f, line, col, inlined = dbg
        if f != self.main_index:
            if inlined is not None and inlined[0] == self.main_index:
                f, line, col = inlined
            else:
                return T.Loc(ptx_line, self.source_file, self._last_main_line, 0) if self._last_main_line \
                    else T.Loc(ptx_line)
        self._last_main_line = line
        return T.Loc(ptx_line, self.source_file, line, col)

    _last_main_line = 0

    # ------------------------------------------------------------ blocks

    def lift(self) -> T.Kernel:
        instrs = []
        for ln in self.entry.lines:
            if isinstance(ln, Instr):
                ln.loc = self.loc(ln.loc) if isinstance(ln.loc, tuple) else ln.loc
                instrs.append(ln)
            elif isinstance(ln, Label):
                instrs.append(ln)
        self.blocks, self.succ, self.label_block = self._split(instrs)
        kernel_loc = T.Loc(self.entry.ptx_line)
        body = self._structure()
        return T.Kernel(self.entry.name, list(self.entry.params), list(self.module.shared) + list(self.entry.shared),
                        body, kernel_loc, dict(self.entry.regs))

    def _split(self, items):
        blocks: list[list] = [[]]
        labels: dict[str, int] = {}
        for it in items:
            if isinstance(it, Label):
                if blocks[-1]:
                    blocks.append([])
                labels[it.name] = len(blocks) - 1
                continue
            blocks[-1].append(it)
            op = it.opcode.split(".")[0]
            if op in ("bra", "ret", "exit", "brx"):
                blocks.append([])
        if not blocks[-1] and len(blocks) > 1 and len(blocks) - 1 not in labels.values():
            blocks.pop()
        n = len(blocks)
        succ: list[list[int]] = []
        for i, b in enumerate(blocks):
            last = b[-1] if b else None
            op = last.opcode.split(".")[0] if last else ""
            nxt = [i + 1] if i + 1 < n else []
            if op == "bra":
                tgt = last.operands[0] if last.operands else None
                name = tgt.name if isinstance(tgt, T.Sym) else str(tgt)
                t = labels.get(name)
                if t is None:
                    self.unsupported.append(T.Unsupported(f"branch to unknown label {name}", last.loc))
                    succ.append([])
                    continue
                succ.append([t] if last.guard is None else [t] + nxt)
            elif op in ("ret", "exit"):
                succ.append([])
            elif op == "brx":
                succ.append([])
            else:
                succ.append(nxt)
        return blocks, succ, labels

    # ------------------------------------------------------------ analysis

    def _structure(self) -> list:
        n = len(self.blocks)
        preds = [[] for _ in range(n)]
        for i, ss in enumerate(self.succ):
            for s in ss:
                preds[s].append(i)
        # reachable blocks and dominators
        order, seen = [], set()
        stack = [(0, iter(self.succ[0]))] if n else []
        seen.add(0)
        post = []
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                post.append(node)
            elif nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(self.succ[nxt])))
        order = list(reversed(post))
        allset = set(order)
        dom = {b: set(allset) for b in order}
        dom[0] = {0}
        changed = True
        while changed:
            changed = False
            for b in order[1:]:
                ps = [p for p in preds[b] if p in allset]
                new = set.intersection(*(dom[p] for p in ps)) | {b} if ps else {b}
                if new != dom[b]:
                    dom[b], changed = new, True
        # post-dominators (a virtual exit -1 after every block without successors)
        exits = [b for b in order if not self.succ[b]]
        pdom = {b: set(allset) | {-1} for b in order}
        for b in exits:
            pdom[b] = {b, -1}
        changed = True
        while changed:
            changed = False
            for b in post:
                if not self.succ[b]:
                    continue
                new = set.intersection(*(pdom[s] for s in self.succ[b])) | {b}
                if new != pdom[b]:
                    pdom[b], changed = new, True
        self.pdom = pdom
        self.rpo = {b: i for i, b in enumerate(order)}
        # natural loops
        self.loops: dict[int, set[int]] = {}
        for b in order:
            for s in self.succ[b]:
                if s in dom[b]:
                    body = {s, b}
                    work = [b]
                    while work:
                        x = work.pop()
                        for p in preds[x]:
                            if p in allset and p not in body:
                                body.add(p)
                                work.append(p)
                    self.loops.setdefault(s, set()).update(body)
                elif self.rpo[s] <= self.rpo[b]:
                    self.unsupported.append(T.Unsupported("irreducible control flow (a retreating edge that is "
                                                          "not a loop back edge)", self._loc_of(b)))
                    return []
        self.loop_exit = {}
        for h, body in self.loops.items():
            outs = {s for b in body for s in self.succ[b] if s not in body}
            # the exit that post-dominates the header if there is one, else the earliest
            ip = [o for o in outs if o in pdom[h]]
            self.loop_exit[h] = ip[0] if ip else (min(outs, key=lambda o: self.rpo[o]) if outs else None)
        return self._region(0, None, [])

    def _loc_of(self, b) -> T.Loc:
        for it in self.blocks[b]:
            return it.loc
        return T.Loc(0)

    def _ipdom(self, b) -> int | None:
        cands = self.pdom[b] - {b}
        if not cands or cands == {-1}:
            return None
        # the post-dominator with the largest post-dominator set is the closest
        return max((c for c in cands if c != -1), key=lambda c: len(self.pdom[c]))

    # ------------------------------------------------------------ structuring

    def _region(self, b: int | None, stop: int | None, loops: list) -> list:
        """Statements from block b until `stop` (exclusive) or until every path has left."""
        out: list = []
        entered_header = None
        while b is not None and b != stop:
            self.budget -= 1
            if self.budget < 0:
                out.append(T.Unsupported("control flow too large to structure", self._loc_of(b)))
                return out
            loop = loops[-1] if loops else None
            if b in self.loops and b != entered_header and (loop is None or b != loop):
                body = self._region(b, None, loops + [b]) if True else []
                out.append(T.Loop(self._loop_body_fix(body), self._loc_of(b), label=f"L{b}"))
                b = self.loop_exit.get(b)
                if b is not None:
                    edge = self._edge(b, loops)
                    if edge is not None:
                        out.append(edge)
                        return out
                continue
            if loop is not None and b == loop and entered_header == b:
                out.append(T.Continue(self._loc_of(b)))
                return out
            entered_header = b
            blk = self.blocks[b]
            for it in blk[:-1]:
                out.extend(self._stmt(it))
            if not blk:
                b = self._next(b, loops, out)
                if b == "done":
                    return out
                continue
            last = blk[-1]
            op = last.opcode.split(".")[0]
            if op in ("ret", "exit"):
                if last.guard is not None:
                    out.append(T.If(last.guard[0], last.guard[1], [T.Return(last.loc)], [], last.loc))
                    b = self._follow(b + 1 if b + 1 < len(self.blocks) else None, loops, out)
                    if b == "done":
                        return out
                    continue
                out.append(T.Return(last.loc))
                return out
            if op == "brx":
                out.append(T.Unsupported("indirect branch (brx.idx)", last.loc))
                return out
            if op != "bra":
                out.extend(self._stmt(last))
                b = self._next(b, loops, out)
                if b == "done":
                    return out
                continue
            if last.guard is None or len(self.succ[b]) != 2:
                b = self._follow(self.succ[b][0] if self.succ[b] else None, loops, out)
                if b == "done":
                    return out
                continue
            taken, fall = self.succ[b]
            join = self._ipdom(b)
            if join is not None and loop is not None and (join not in self.loops[loop] or join == loop):
                join = None
            if join is not None and loop is None and any(join in body for body in self.loops.values()) \
                    and join in self.loops and False:
                join = None
            then = self._branch(taken, join, loops)
            orelse = self._branch(fall, join, loops)
            out.append(T.If(last.guard[0], last.guard[1], then, orelse, last.loc))
            if join is None:
                return out
            b = join
        return out

    def _loop_body_fix(self, body):
        return body

    def _edge(self, t, loops):
        """The statement for an edge to block t inside `loops`, or None if t is the next block to
        structure (a fallthrough)."""
        for depth in range(len(loops) - 1, -1, -1):
            h = loops[depth]
            if t in self.loops[h]:
                if t == h:
                    return T.Continue(self._loc_of(t)) if depth == len(loops) - 1 else \
                        T.Unsupported("continue of an outer loop", self._loc_of(t))
                return None if depth == len(loops) - 1 else T.Unsupported(
                    "branch into an outer loop from an inner one", self._loc_of(t))
            if t == self.loop_exit.get(h):
                return T.Break(self._loc_of(t)) if depth == len(loops) - 1 else \
                    T.Unsupported("break out of two loops at once", self._loc_of(t))
        return None

    def _follow(self, t, loops, out):
        if t is None:
            out.append(T.Return(T.Loc(0)))
            return "done"
        if loops:
            edge = self._edge(t, loops)
            if edge is not None:
                out.append(edge)
                return "done"
            h = loops[-1]
            if t not in self.loops[h]:
                # an exit other than the loop's main exit: the tail runs inline (it returns)
                return t
        return t

    def _next(self, b, loops, out):
        return self._follow(b + 1 if b + 1 < len(self.blocks) else None, loops, out)

    def _branch(self, t, join, loops) -> list:
        if t == join:
            return []
        out: list = []
        if loops:
            edge = self._edge(t, loops)
            if edge is not None:
                return [edge]
        out.extend(self._region(t, join, loops))
        return out

    # ------------------------------------------------------------ instructions

    def _stmt(self, it: Instr) -> list:
        try:
            s = self._lift_instr(it)
        except (IndexError, ValueError, TypeError, AttributeError, StopIteration, KeyError):
            s = None
        if s is None or not _well_formed(s):
            # operands of a kind or number the instruction does not take: nothing is assumed about it
            s = T.Unsupported(f"not supported: {it.opcode} with these operands at PTX line {it.loc.ptx_line}", it.loc,
                              dsts=[o for o in it.operands[:1] if isinstance(o, T.Reg)])
        stmts = s if isinstance(s, list) else [s]
        if it.guard is not None:
            return [T.If(it.guard[0], it.guard[1], stmts, [], it.loc)]
        return stmts

    def _lift_instr(self, it: Instr):
        parts = it.opcode.split(".")
        op = parts[0]
        loc = it.loc
        ops = it.operands
        if op in ("ld", "ldu", "st", "atom", "red"):
            return self._access(it, parts)
        if op == "ldmatrix" and "shared" in parts and len(ops) == 2 and isinstance(ops[1], T.Addr):
            return self._ldmatrix(it, parts)
        if op == "mma":
            # a warp's matrix multiply-accumulate: registers only (their values are not modelled)
            d = ops[0] if ops else None
            regs = d[1] if isinstance(d, tuple) and d[0] == "vec" else [d]
            return T.Unsupported(f"value of {it.opcode} at PTX line {loc.ptx_line}", loc, effects="value",
                                 dsts=[r for r in regs if isinstance(r, T.Reg)])
        if op == "cp" and len(parts) > 1 and parts[1] == "async":
            if "commit_group" in parts:
                return T.CpAsyncCommit(loc)
            if "wait_group" in parts:
                return T.CpAsyncWait(ops[0].value if isinstance(ops[0], T.Imm) else None, loc)
            if "wait_all" in parts:
                return T.CpAsyncWait(None, loc)
            if "bulk" in parts or "mbarrier" in parts:
                return T.Unsupported(f"not supported: {it.opcode} at PTX line {loc.ptx_line}", loc)
            if len(ops) >= 3 and isinstance(ops[0], T.Addr) and isinstance(ops[1], T.Addr) \
                    and isinstance(ops[2], T.Imm):
                size = int(ops[2].value)
                src_size = size
                if len(ops) > 3:
                    if not isinstance(ops[3], T.Imm | T.Reg) or len(ops) > 4:
                        return T.Unsupported(f"not supported: {it.opcode} with a cache policy or an ignore-src "
                                             f"predicate at PTX line {loc.ptx_line}", loc)
                    src_size = int(ops[3].value) if isinstance(ops[3], T.Imm) else ops[3]
                return T.CpAsync(ops[0], ops[1], size, loc, src_size=src_size)
            return T.Unsupported(f"not supported: {it.opcode} at PTX line {loc.ptx_line}", loc)
        if op in ("bar", "barrier"):
            if len(parts) > 1 and parts[1] == "warp":
                return T.Unsupported(f"__syncwarp (bar.warp.sync) at PTX line {loc.ptx_line} is not modelled",
                                     loc, effects="order")
            kind = "arrive" if "arrive" in parts else ("red" if "red" in parts else "sync")
            if kind == "red":
                return T.Unsupported(f"not supported: {it.opcode} at PTX line {loc.ptx_line}", loc)
            return T.Barrier(kind, ops[0] if ops else T.Imm(0), ops[1] if len(ops) > 1 else None, loc)
        if op == "shfl":
            if "sync" not in parts:
                return T.Unsupported(f"not supported: {it.opcode} (shfl without .sync) at PTX line {loc.ptx_line}",
                                     loc)
            mode = next(m for m in ("idx", "up", "down", "bfly") if m in parts)
            d = ops[0]
            dst, pred = (d[1], d[2]) if isinstance(d, tuple) and d[0] == "pair" else (d, None)
            return T.Shuffle(mode, dst, pred, ops[1], ops[2], ops[3], ops[4], loc)
        if op in IGNORED:
            return T.Op("nop", [], [], loc)
        if op in PURE:
            dsts = []
            d = ops[0] if ops else None
            if isinstance(d, tuple) and d[0] == "vec":  # an unpack (`mov.b32 {%h1, %h2}, %r1`): values unknown
                return T.Unsupported(f"value of {it.opcode} at PTX line {loc.ptx_line}", loc, effects="value",
                                     dsts=[r for r in d[1] if isinstance(r, T.Reg)])
            if isinstance(d, tuple) and d[0] == "pair":
                dsts = [d[1], d[2]]
            elif isinstance(d, T.Reg):
                dsts = [d]
            srcs = [self._plain(o) for o in ops[1:]]
            return T.Op(it.opcode, dsts, srcs, loc)
        return T.Unsupported(f"not supported: {it.opcode} at PTX line {loc.ptx_line}", loc,
                             dsts=[o for o in ops if isinstance(o, T.Reg)][:1])

    def _ldmatrix(self, it: Instr, parts):
        """`ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 {d..}, [a]`: lanes 0 .. 8N-1 each give the
        address of one 16-byte row of the N 8x8 matrices (PTX ISA, ldmatrix); each of those lanes is
        modelled as reading its row (which lane receives which element does not matter to races and
        bounds; the values are unknown)."""
        loc = it.loc
        n = next((int(p[1:]) for p in parts if p in ("x1", "x2", "x4")), 1)
        d = it.operands[0]
        regs = d[1] if isinstance(d, tuple) and d[0] == "vec" else [d]
        acc = T.Access("load", "shared", it.operands[1], 16, 1, regs, it.opcode, loc)
        if n == 4:
            return acc
        self.synth += 1
        pred = T.Reg(f"%ldmatrix_lane{self.synth}")
        self.entry.regs[pred.name] = "pred"
        # registers of the lanes that give no address are still written (unknown values)
        rest = T.Unsupported(f"value of {it.opcode} at PTX line {loc.ptx_line}", loc, effects="value",
                             dsts=[r for r in regs if isinstance(r, T.Reg)])
        setp = T.Op("setp.lt.u32", [pred], [T.Special("laneid"), T.Imm(8 * n)], loc)
        return [setp, T.If(pred, False, [acc], [rest], loc)]

    def _plain(self, o):
        if isinstance(o, tuple) and o[0] == "not":
            return ("not", o[1])
        if isinstance(o, tuple) and o[0] == "vec":
            return o
        return o

    def _access(self, it: Instr, parts):
        op = parts[0]
        loc = it.loc
        spaces = ("global", "shared", "param", "local", "const")
        space = next((p for p in parts[1:] if p in spaces), "generic")
        if "shared" in parts and any(p.startswith("shared::cluster") for p in parts):
            space = "cluster"
        vec = next((int(p[1:]) for p in parts if p in ("v2", "v4", "v8")), 1)
        typ = parts[-1]
        width = _type_bytes(typ)
        ops = it.operands
        if op in ("ld", "ldu"):
            dst, addr = ops[0], ops[1]
            regs = dst[1] if isinstance(dst, tuple) and dst[0] == "vec" else [dst]
            return T.Access("load", space, addr, width, vec, regs, it.opcode, loc)
        if op == "st":
            addr, src = ops[0], ops[1]
            regs = src[1] if isinstance(src, tuple) and src[0] == "vec" else [src]
            return T.Access("store", space, addr, width, vec, regs, it.opcode, loc)
        if op == "atom":
            return T.Access("atomic", space, ops[1], width, 1, ops[2:], it.opcode, loc, dst=ops[0])
        return T.Access("atomic", space, ops[0], width, 1, ops[1:], it.opcode, loc)


_OPERAND = (T.Reg, T.Imm, T.Special, T.Sym)
# sources each pure opcode needs at least (the symbolic execution reads them by position)
_ARITY = {**{o: 2 for o in ("add", "sub", "mul", "mul24", "div", "rem", "and", "or", "xor", "shl", "shr", "min",
                            "max", "setp", "set", "copysign", "addc", "subc", "sad", "bmsk", "szext", "fns",
                            "dp2a", "dp4a")},
          **{o: 3 for o in ("mad", "mad24", "madc", "selp", "slct", "fma", "bfe", "prmt", "shf")},
          "bfi": 4, "lop3": 4}


def _well_formed(s) -> bool:
    """Operands of the shapes the symbolic execution reads (the grammar accepts any operand anywhere)."""
    if isinstance(s, list):
        return all(_well_formed(x) for x in s)
    if isinstance(s, T.Access):
        return isinstance(s.addr, T.Addr) and all(isinstance(r, _OPERAND) for r in s.regs) and \
            (s.dst is None or isinstance(s.dst, T.Reg))
    if isinstance(s, T.CpAsync):
        return isinstance(s.dst, T.Addr) and isinstance(s.src, T.Addr)
    if isinstance(s, T.Op):
        op = s.opcode.split(".")[0]
        if op != "nop" and len(s.srcs) < _ARITY.get(op, 1 if op in PURE and op not in ("activemask",) else 0):
            return False
        return all(isinstance(d, T.Reg) for d in s.dsts) and \
            all(isinstance(o, _OPERAND) or (isinstance(o, tuple) and o[0] in ("not", "vec")) for o in s.srcs)
    if isinstance(s, T.Shuffle):
        return all(isinstance(o, _OPERAND) for o in (s.value, s.lane, s.clamp, s.mask)) and \
            all(r is None or isinstance(r, T.Reg) for r in (s.dst, s.pred))
    if isinstance(s, T.Barrier):
        return all(o is None or isinstance(o, _OPERAND) for o in (s.barrier_id, s.count))
    if isinstance(s, T.If):
        return _well_formed(s.then) and _well_formed(s.orelse)
    return True


def _type_bytes(typ: str) -> int:
    digits = "".join(c for c in typ if c.isdigit())
    if typ == "pred":
        return 1
    if digits:
        return max(1, int(digits) // 8)
    return 4


def lift_module(module: Module, ptx_file: str, source_file: str | None = None) -> list[tuple[T.Kernel, list]]:
    """Each kernel entry of the module, lifted, with the list of things the lifter did not recover."""
    out = []
    for e in module.entries:
        if not e.is_kernel:
            continue
        lf = Lifter(module, e, ptx_file, source_file)
        k = lf.lift()
        out.append((k, lf.unsupported))
    return out
