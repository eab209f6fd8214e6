"""Pre-analysis of a kernel body, before any instruction is emitted: which names each statement
reads, which variables need one register across control flow, and which shared-memory loads an
mma can read k-slice by k-slice instead of all at once."""

from __future__ import annotations

from collections import Counter, defaultdict

from argus_verify import ir
from argus_verify.visitor import Visitor


def iexpr_names(e) -> set:
    return {x.name for x in ir.walk_iexpr(e) if isinstance(x, ir.IVar)} if e is not None else set()


def view_names(view: ir.View) -> set:
    out = set()
    for item in view.index:
        out |= iexpr_names(item.start if isinstance(item, ir.Slice) else item.index)
    return out


def nested_bodies(s) -> tuple:
    """The statement lists inside a loop or branch (none for other statements)."""
    if isinstance(s, ir.For):
        return (s.body,)
    if isinstance(s, ir.If):
        return (s.then, s.orelse)
    return ()


class Reads(Visitor, families=("statements", "fragment_ops")):
    """The names a statement or fragment operation reads; loops and branches with their bodies."""

    def visit_Let(self, s: ir.Let) -> set:
        return iexpr_names(s.value)

    def visit_Assign(self, s: ir.Assign) -> set:
        return self.visit(s.op)

    def visit_Store(self, s: ir.Store) -> set:
        return view_names(s.dst) | {s.value} | iexpr_names(s.where)

    def visit_Stmatrix(self, s: ir.Stmatrix) -> set:
        return view_names(s.dst) | {s.value}

    def visit_CopyAsync(self, s: ir.CopyAsync) -> set:
        return view_names(s.dst) | view_names(s.src)

    def visit_MbarrierOp(self, s: ir.MbarrierOp) -> set:
        return view_names(s.bar) | (iexpr_names(s.value) if s.value is not None else set())

    def visit_TmaLoad(self, s: ir.TmaLoad) -> set:
        return view_names(s.dst) | view_names(s.src) | view_names(s.bar)

    def visit_TmaStore(self, s: ir.TmaStore) -> set:
        return view_names(s.dst) | view_names(s.src)

    def visit_TmaLoadMulticast(self, s: ir.TmaLoadMulticast) -> set:
        return view_names(s.dst) | view_names(s.src) | view_names(s.bar) | iexpr_names(s.mask)

    def visit_MbarrierArriveCluster(self, s: ir.MbarrierArriveCluster) -> set:
        return view_names(s.bar) | iexpr_names(s.cta)

    def visit_For(self, s: ir.For) -> set:
        return iexpr_names(s.start) | iexpr_names(s.stop) | self._deep(s.body)

    def visit_If(self, s: ir.If) -> set:
        return iexpr_names(s.cond) | self._deep((*s.then, *s.orelse))

    def _deep(self, body) -> set:
        out = set()
        for s in body:
            out |= self.visit(s)
        return out

    def _nothing(self, node) -> set:
        return set()

    # assertions are proved, not executed: they read nothing at run time
    visit_SharedAlloc = visit_Commit = visit_Wait = visit_Barrier = visit_Assert = _nothing
    visit_Fence = visit_WgmmaGroup = visit_BulkGroup = visit_SetMaxNReg = _nothing
    visit_ClusterSync = _nothing

    def visit_Load(self, op: ir.Load) -> set:
        return view_names(op.src)

    def visit_Ldmatrix(self, op: ir.Ldmatrix) -> set:
        return view_names(op.src)

    def visit_Elementwise(self, op: ir.Elementwise) -> set:
        out = set()
        for a in op.args:
            if isinstance(a, str):
                out.add(a)
            elif isinstance(a, ir.FScalar):
                out |= iexpr_names(a.expr)
        return out

    def _argument(self, op) -> set:
        return {op.arg}

    visit_Cast = visit_Reduce = visit_Relabel = _argument
    visit_Full = _nothing

    def visit_Shuffle(self, op: ir.Shuffle) -> set:
        return {op.arg} | iexpr_names(op.lane_arg)

    def visit_Mma(self, op: ir.Mma) -> set:
        return {op.a, op.b, op.c}

    def visit_Wgmma(self, op: ir.Wgmma) -> set:
        return view_names(op.a) | view_names(op.b) | {op.c}


READS = Reads()


class Appearances(Visitor, families=("statements",)):
    """(name, is_write, path) for every use of a name; path: the bodies (loop body, branch arm)
    that contain the use, outermost first."""

    def __init__(self):
        self.out: list = []

    def walk(self, stmts, path: tuple) -> list:
        for s in stmts:
            self.visit(s, path)
        return self.out

    def _read(self, names, path) -> None:
        self.out.extend((n, False, path) for n in names)

    def visit_For(self, s: ir.For, path) -> None:
        self._read(iexpr_names(s.start) | iexpr_names(s.stop), path)
        self.walk(s.body, path + ((id(s), 0),))

    def visit_If(self, s: ir.If, path) -> None:
        self._read(iexpr_names(s.cond), path)
        self.walk(s.then, path + ((id(s), 0),))
        self.walk(s.orelse, path + ((id(s), 1),))

    def visit_Assert(self, s: ir.Assert, path) -> None:
        pass  # proved by the verifier; no code reads anything

    def _plain(self, s, path) -> None:
        self._read(READS.visit(s), path)

    def _defining(self, s, path) -> None:
        self._plain(s, path)
        self.out.append((s.name, True, path))

    visit_Let = visit_Assign = _defining
    visit_SharedAlloc = visit_Store = visit_Stmatrix = visit_CopyAsync = visit_Commit = visit_Wait = _plain
    visit_Barrier = visit_MbarrierOp = visit_Fence = visit_TmaLoad = visit_WgmmaGroup = _plain
    visit_TmaStore = visit_BulkGroup = visit_SetMaxNReg = _plain
    visit_TmaLoadMulticast = visit_MbarrierArriveCluster = visit_ClusterSync = _plain


def appearances(body) -> list:
    return Appearances().walk(body, ())


def read_counts(body) -> Counter:
    """How many statements read each name."""
    return Counter(name for name, is_write, _ in appearances(body) if not is_write)


def fixed_names(body) -> set:
    """Variables that need one register across control flow: written inside a loop or branch body
    and also used (read or written) outside that body."""
    by_name = defaultdict(list)
    for name, is_write, path in appearances(body):
        by_name[name].append((is_write, path))
    return {name for name, uses in by_name.items() if _escapes(uses)}


def _escapes(uses: list) -> bool:
    """Some write sits in a body that some other use of the name is outside of."""
    return any(any(body_id not in p for _, p in uses)
               for is_write, path in uses if is_write for body_id in path)


def assigned_in(stmts) -> set:
    return {s.name for s in ir.walk_stmts(stmts) if isinstance(s, ir.Let | ir.Assign)}


def deferrable_loads(body, uses: Counter) -> set:
    """ids of the shared-memory loads that one SIMT mma consumes right after them (only mmas, lets
    and assertions between, and no let rebinding an index of the load's view): the mma emits
    them itself, k-slice by k-slice, so their registers need not all be live at once."""
    out: set = set()
    _find_deferrable(body, uses, out)
    return out


def _find_deferrable(stmts, uses: Counter, out: set) -> None:
    for j, s in enumerate(stmts):
        for inner in nested_bodies(s):
            _find_deferrable(inner, uses, out)
        if isinstance(s, ir.Assign) and isinstance(s.op, ir.Mma) and s.op.atom == "fma":
            for name in {s.op.a, s.op.b} - {s.op.c}:
                if uses[name] == 1:
                    load = _producer(stmts, j, name)
                    if load is not None:
                        out.add(id(load))


def _producer(stmts, j: int, name: str):
    """The shared-memory load of `name` that statement j's mma can take over, or None."""
    for i in range(j - 1, -1, -1):
        p = stmts[i]
        if isinstance(p, ir.Assign) and p.name == name:
            if not (isinstance(p.op, ir.Load) and p.op.src.space == "shared"):
                return None
            names = view_names(p.op.src)
            rebound = any(isinstance(b, ir.Let) and b.name in names for b in stmts[i + 1:j])
            return None if rebound else p
        if isinstance(p, ir.Assign) and isinstance(p.op, ir.Mma):
            continue
        if not isinstance(p, ir.Let | ir.Assign | ir.Assert):
            return None
    return None
