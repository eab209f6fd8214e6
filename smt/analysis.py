"""Abstract interpretation of a kernel over the layout algebra.

`Analysis(kernel)` walks the IR once, flow-sensitively, and turns every integer into an `IntV`
and every fragment into a `FragV`: closures that build, for any block, loop iteration, thread and
value, the Z3 terms of the integer, or of the element's tag. Layouts are evaluated with
`Layout.apply` through `Z3Ops`, so the tag of value v of thread t is composed from exactly the
layouts, swizzles and views its data passed through.

While walking it also records the raw material of every obligation (assertions, agreement checks
of elementwise / reduce / mma operations, output stores, global and shared accesses, barriers,
waits and commits: `smt.records`); `smt.obligations` turns them into queries.

This module is the driver: the walk, the environment and the terms every family uses. Statements
and fragment operations are dispatched by IR node class (`argus_verify.visitor`) to the handlers
of their family:

    smt.memory    views, loads, stores, copy_async, shared reads resolved to their writes
    smt.sync      barriers, commits and waits: the order they impose on shared accesses
    smt.compute   constants, elementwise operations, casts and relabellings, mma
    smt.warp      shuffles and reductions (within a thread and across the lanes of a warp)
    smt.control   loops (their loop-carried values) and branches (merged values)
    smt.carried   the head value of each loop-carried variable, decided once the walk is done
    smt.ints      integer expressions
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt import last_writer as LW
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.carried import CarriedMixin
from argus_verify.smt.compute import ComputeMixin
from argus_verify.smt.control import ControlMixin
from argus_verify.smt.demand import Demand
from argus_verify.smt.diag import AnalysisError, src_text
from argus_verify.smt.hopper import HopperMixin
from argus_verify.smt.hopper_store import HopperStoreMixin
from argus_verify.smt.ints import IntCompiler, TagTerms, combine, named_int
from argus_verify.smt.memory import MemoryMixin
from argus_verify.smt.sync import SyncMixin
from argus_verify.smt.values import FragV, IntV, TagVal, Tr
from argus_verify.smt.warp import WarpMixin
from argus_verify.smt.zops import FALSE, TRUE, bv
from argus_verify.visitor import Visitor

__all__ = ["Analysis", "AnalysisError"]


class Analysis(
    MemoryMixin,
    HopperMixin,
    HopperStoreMixin,
    SyncMixin,
    ComputeMixin,
    WarpMixin,
    ControlMixin,
    CarriedMixin,
    Visitor,
    families=("statements", "fragment_ops"),
):
    """Statement handlers: `visit_<Stmt>(s, node, env)`; fragment operation handlers:
    `visit_<Op>(op, s, node, env, label, loopdeps)` for the `Assign` s, returning its `FragV`."""

    # The cluster statements (their protocol is smt/protocol_cluster.py's), each decided here:
    def visit_TmaLoadMulticast(self, s: ir.TmaLoadMulticast, node, env):
        """Writes the shared memory of every CTA its mask names: data moving between the blocks of a
        cluster is not encoded (the tag encoding follows one block), so no data-flow proof."""
        raise AnalysisError(f"tma_load_multicast at line {s.span.line} writes the shared memory of other CTAs of "
                            "the cluster: data multicast between CTAs is not encoded")

    def visit_MbarrierArriveCluster(self, s: ir.MbarrierArriveCluster, node, env):
        """No data: an arrival (its phases are the cluster protocol's); its index is bounds'."""
        self.barrier_access(s.bar, node, env, "mbarrier_arrive_cluster")

    def visit_ClusterSync(self, s: ir.ClusterSync, node, env):
        """Every thread of the block arrives (release) and waits (acquire) with all of the cluster's:
        for the block's own threads at least what barrier() is, so it orders their accesses as one
        (and, under a condition on the thread, barrier-divergence reports it as it would barrier())."""
        self.barriers.append(node)

    def __init__(self, kernel: ir.Kernel, shapes: dict | None = None):
        # the kernel's tables, the records the walk fills in, then the walk itself
        self.k = kernel
        self.hopper = ir.uses_hopper(kernel.body)  # TMA / wgmma / mbarriers (smt.hopper)
        self.T = kernel.block
        self.shapes = dict(shapes or {})
        self.size_names = tuple(kernel.sizes)
        self.param_names = tuple(
            p.name for p in kernel.params if isinstance(p, ir.ScalarParam) and not ir.is_float(p.dtype)
        )
        self.tagdecls = {t.name: d for t in kernel.tensors if (d := kernel.tag_of(t.name)) is not None}
        self.tagfns = {f.name: f for f in kernel.tagfns}
        self.K = max([len(t.components) for t in self.tagdecls.values()] + [1])
        self.tensors = {t.name: t for t in kernel.tensors}
        self.ints = IntCompiler(self)
        self.tag_terms = TagTerms(self)
        self.blocks: dict = {}
        self.nodes: list = []
        self.loops_by_stmt: dict = {}
        # the records of the walk (see smt.records)
        self.allocs: dict = {}
        self.sh_writes: dict = {}
        self.sh_reads: dict = {}
        self.g_accesses: list = []
        self.asserts: list = []
        self.checks: list = []
        self.out_stores: list = []
        self.barriers: list = []
        # (node, instruction, threads): .sync.aligned statements, per warp (32) or warpgroup (128)
        self.collectives: list = []
        # (node, view, alloc, rows, "ldmatrix" | "stmatrix"): their 16-byte rows (obligations/matrix_rows.py)
        self.matrix_rows: list = []
        self.waits: list = []
        self.wgmma_groups: list = []  # wgmma commit_group / wait_group nodes (smt.hopper)
        self.mbar_accesses: list = []  # mbarrier elements used (smt.hopper): bounds only
        self.tma_stores: list = []  # the TMA stores into outputs (smt.hopper_store)
        self.conjuncts: dict = {}  # id(an if's condition IntV) -> its `and` operands (smt.control)
        self.commit_nodes: list = []
        self.cells: list = []
        self.notes: list = []  # approximations taken while walking (reported with unknowns)
        self.invariant_queries: list = []  # (loop, outcome) for the report
        self.read_plans: dict = {}  # id(ShRead) -> the candidate writes it can see (smt.last_writer)
        self.never_last: dict = {}  # id(ShRead) -> id(W) of write statements it never sees (smt.last_writer)
        self.timeout_s = 10.0
        self.grid = [self.cint(g, {}) for g in kernel.grid]
        self.tensor_dims = {t.name: [self.cint(d, {}) for d in t.shape] for t in kernel.tensors}
        self._bid = 0
        root = self.new_block()
        self.pending_loops: list = []
        self.proxies: dict = {}  # id(head proxy value) -> Cell
        self.passthrough: dict = {}  # id(merged value) -> (Cell, the other branch): x = new if c else x
        self.incr: dict = {}  # (name, loop var) -> (IntV of e, depth), for `x = x + e`
        self.env: dict = {}  # the values bound at the end of the kernel (integers and fragments)
        self.demand = Demand(self.T)  # which fragment elements reach a store or an assertion
        self.walk(kernel.body, self.env, (), (), (), root)
        self.commits = P.CommitCounter(kernel.body, self.loops_by_stmt)
        self.demand.compute()
        self.window = max([2] + [a.shape[0] for a in self.allocs.values() if self._indexed(a.name)])

    def finish(self, timeout_s: float) -> None:
        """Decide the head value of every loop-carried variable (inner loops first). Runs after
        the walk so that every write record exists when the invariants are checked."""
        self.timeout_s = timeout_s
        self.check_generic_tma_reads()
        # the writers of reads of TMA-fed and stored buffers, settled once for every query and every
        # forked step (smt.last_writer)
        for rds in self.sh_reads.values():
            for rd in rds:
                if LW.eligible(self, rd):
                    self.read_plans[id(rd)] = LW.plan(self, rd)
                if self.read_plans.get(id(rd)) is None:
                    self.never_last[id(rd)] = LW.never_last(self, rd)
        for L, cells, post, end in self.pending_loops:
            self.resolve_carried(L, cells, post, end)
        self.pending_loops = []

    @property
    def sizes(self) -> dict:
        """The symbolic sizes, as terms of the current encoding."""
        return {n: Z.var(n) for n in self.size_names}

    @property
    def params(self) -> dict:
        return {n: Z.var(f"param.{n}") for n in self.param_names}

    def _indexed(self, alloc) -> bool:
        accs = self.sh_writes.get(alloc, []) + self.sh_reads.get(alloc, [])
        return any(any(kind == "index" for kind, _, _ in a.view.items) for a in accs)

    def new_block(self) -> int:
        self._bid += 1
        return self._bid

    # ------------------------------------------------------------------------------------------
    # terms every family uses

    def base_constraints(self):
        cons = []
        for name, s in self.sizes.items():
            cons += [s >= 1, s <= Z.MAX_SIZE]
            if name in self.shapes:
                cons.append(s == int(self.shapes[name]))
        for p in self.params.values():
            cons += [p >= -(1 << 31), p < (1 << 31)]
        S = V.Session(self)
        for r in self.k.requires:
            cons.append(Z.i2b(self.cint(r, {}).fn(S, None, None, None)))
        for g in self.grid:
            cons.append(g.fn(S, None, None, None) >= 1)
        return cons

    def new_ctx(self, S, prefix="block") -> V.Ctx:
        ids = [S.var(f"{prefix}.{a}") for a in "xyz"]
        cons = []
        for b, g in zip(ids, self.grid, strict=True):
            cons += [b >= 0, b < g.fn(S, None, None, None)]
        return V.Ctx(ids, Z.And(*cons))

    def in_shape(self, e, shape):
        return Z.And(*[z for x, d in zip(e, shape, strict=True) for z in (Z.Le(bv(0), x), Z.Lt(x, bv(d)))])

    def in_tensor(self, tensor, e, S):
        dims = self.tensor_dims[tensor]
        return Z.And(
            *[z for x, d in zip(e, dims, strict=True) for z in (Z.Le(bv(0), x), Z.Lt(x, d.fn(S, None, None, None)))]
        )

    def input_tag(self, tensor, e, S) -> TagVal:
        decl = self.tagdecls.get(tensor)
        if decl is None:
            return V.untagged(self.K)
        bind = {n: x for n, x in zip(decl.index_vars, e, strict=True)}
        vals = [None if c is None else self.term(c, bind) for c in decl.components]
        return V.tagged(vals, self.K)

    def term(self, e, bind):
        """Evaluate an integer expression of tag declarations: index variables, sizes, tagfns."""
        return self.tag_terms.visit(e, bind)

    def cint(self, e, env, frags=None) -> IntV:
        """An integer expression of the kernel body as an `IntV` (see smt.ints.IntCompiler)."""
        return self.ints.visit(e, env, frags)

    def havoc_tag(self, S, name, reason) -> TagVal:
        """Any tag at all (an over-approximation), tainted: a violation that needs it is unknown."""
        none = S.bool("havoc.none")
        comps = [(S.var("havoc.val"), S.bool("havoc.star")) for _ in range(self.K)]
        return TagVal(
            none,
            comps,
            FALSE,
            TRUE,
            Tr(None, None, None, f"{name} (unknown: widened)"),
            frozenset({reason}),
            TRUE,
        )

    def frag_label(self, name, span) -> str:
        if not name.startswith("_t"):
            return name
        text = src_text(span)
        return f"({text})" if text else name

    # ------------------------------------------------------------------------------------------
    # the walk

    def walk(self, body, env, levels, loops, conds, bid):
        self.blocks[bid] = list(body)
        for idx, s in enumerate(body):
            lv = levels + ((bid, idx, s),)
            node = P.Node(s, len(self.nodes), lv, loops, conds, self.blocks)
            self.nodes.append(node)
            self.visit(s, node, env)

    def visit(self, node, *args):
        if type(node) not in self._dispatch:
            raise AnalysisError(f"{type(node).__name__} is beyond the verifier's encoding")
        return super().visit(node, *args)

    def visit_Let(self, s: ir.Let, node, env):
        e = s.value
        if isinstance(e, ir.IBin) and e.op in ("+", "-") and isinstance(e.a, ir.IVar) and e.a.name == s.name:
            # `x = x + d`: a candidate affine induction variable (see CarriedMixin.try_affine)
            d = self.cint(e.b, env)
            self.incr[s.name, node.loops[-1].var if node.loops else None] = (
                d if e.op == "+" else combine("-", V.const_int(0), d),
                len(node.levels),
            )
        env[s.name] = named_int(self.cint(s.value, env))

    def visit_Assign(self, s: ir.Assign, node, env):
        label = self.frag_label(s.name, s.span)
        loopdeps = frozenset(L.var for L in node.loops)
        env[s.name] = self.visit(s.op, s, node, env, label, loopdeps)

    def visit_Assert(self, s: ir.Assert, node, env):
        frags: list = []
        cond = self.cint(s.cond, env, frags)
        sides = None
        if isinstance(s.cond, ir.IBin) and s.cond.op in ir.COMPARE_OPS:
            sides = (
                self.cint(s.cond.a, env, []),
                self.cint(s.cond.b, env, []),
                s.cond.op,
                src_text(s.cond.a.span),
                src_text(s.cond.b.span),
            )
        self.asserts.append((node, s, cond, frags, {f: env[f] for f in s.frags}, sides))
        for f in s.frags:
            self.demand.sink(env[f])
        # assume after assert: where the assertion fails, later uses of these fragments are
        # already wrong (err), so a bug is reported at the assertion, not again downstream
        names = list(dict.fromkeys(f for _, f, _ in frags))
        for f in names:
            env[f] = self.assumed(env[f], cond, node, frags, {g: env[g] for g in names})

    def assumed(self, f: FragV, cond: IntV, node, frags, fragenv) -> FragV:
        """`f` after `assert cond`: elements for which the assertion fails are marked err."""

        def fn(S, ctx, inst, t, v, f=f):
            x = f.tag(S, ctx, inst, t, v)
            tags = {g: h.tag(S, ctx, inst, t, v) for g, h in fragenv.items()}
            present = Z.And(*[tags[g].present(k) for kind, g, k in frags if kind == "tag"])
            prior = Z.Or(*[tg.err for tg in tags.values()])
            fails = Z.And(node.guard(S, ctx, inst, t), present, Z.Not(prior), Z.Not(Z.i2b(cond.fn(S, ctx, inst, t, v))))
            return x.replace(err=Z.Or(x.err, fails))

        out = FragV(f.name, f.typ, fn, f.label, f.heads | cond.heads, f.loopdeps)
        self.demand.flow(out, f)
        return out
