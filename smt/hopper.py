"""The tag analysis's handlers of Hopper nodes (mbarriers, TMA, wgmma, fences, groups).

    TmaLoad     a write of the box's elements into the shared view at the places the declared
                layout gives (the `tma-box` obligation proves the hardware writes exactly there),
                each carrying the tag of its global element (out of range: zero fill, masked as a
                masked load is); issued by the one thread the kernel's conditions select.
    Wgmma       reads the A and B shared tiles through their declared layouts (`descriptor-layout`
                proves the descriptors read exactly those) and contracts over k into the
                accumulator fragment, through the mma handling (smt.compute.MmaTerms).
    MbarrierOp, Fence, WgmmaGroup
                no effect on tags. An mbarrier wait is a per-thread wait, not a bar.sync: it is
                not a barrier for barrier-divergence or for ordering generic accesses.

Both TMA writes and wgmma reads belong to the async proxy. What orders them against each other
(a TMA copy lands before the wgmma that reads it; a stage is refilled only after that wgmma
retired) is the mbarrier protocol, which smt/protocol.py checks (mbarrier-phase, stage-reuse,
mbarrier-tx). The encoding here takes it as established: a wgmma read sees the last write before
it in program order. Every result that depends on it says so (`RELIES_ON`) and is downgraded to
unknown when one of those obligations is not proved (smt/__init__.py). Generic accesses are
ordered against async-proxy ones by barriers (and, before a wgmma read of a generic write, a
wgmma_wait(0) after a commit; the fences are async-proxy-fence's part); generic accesses after a
TMA write of the same element are beyond the encoding (unknown).
"""

from __future__ import annotations

import numpy as np

from argus_verify import ir
from argus_verify.layout import Layout
from argus_verify.smt import program as P
from argus_verify.smt import zops as Z
from argus_verify.smt.compute import MmaTerms
from argus_verify.smt.diag import AnalysisError
from argus_verify.smt.records import Check, GAccess, ShRead, ShWrite
from argus_verify.smt.values import FragV, Tr, element_label
from argus_verify.smt.zops import FALSE, OPS, TRUE, bv

# the protocol obligations (smt/protocol.py) a TMA / wgmma data-flow result takes as established:
# the copies' and the wgmmas' timing, and that the hardware addresses the declared layouts
RELIES_ON = ("mbarrier-tx", "mbarrier-phase", "stage-reuse", "wgmma-accumulator", "async-proxy-fence",
             "descriptor-layout", "tma-box")
RELIANCE = ("TMA copies land before the wgmma that reads them and a stage is refilled only after its "
            "wgmma retired: relies on mbarrier-tx, mbarrier-phase and stage-reuse (and the other protocol "
            "obligations)")
RELIANCE_TAGS = ("through TMA and wgmma, for all sizes; relies on the protocol obligations: mbarrier-tx, "
                 "mbarrier-phase, stage-reuse, wgmma-accumulator, async-proxy-fence, descriptor-layout, tma-box")
# the obligations about the values data carries (race and uninitialised-read say themselves what
# they rely on, where an async-proxy access is involved)
DATAFLOW = ("tag-assertion", "output-contract", "reduction-coverage")


def whole_tile(threads: int, tile: tuple) -> ir.TVLayout:
    """Every thread names every element of the tile (value v: row-major index v): the footprint of
    a collective access (a TMA copy, a wgmma operand read)."""
    n = int(np.prod(tile))
    return ir.TVLayout(Layout((threads, n), (0, 1)), tuple(tile))


class TmaWrite(ShWrite):
    """A TMA copy into shared view `view` from global view `src` (kind "tma")."""

    proxy = "async"

    def __init__(self, an, node, alloc, view, src, src_tensor, issuer):
        tv = whole_tile(an.T, view.tile)
        super().__init__(an, "tma", node, alloc, view, tv, tv.values, None, src=src, src_tensor=src_tensor,
                         label=src_tensor)
        self.issuer = issuer  # the one thread that issues it (an int), or None

    @property
    def op(self):
        return "tma_load"

    @property
    def fast(self) -> bool:
        return self.alloc.injective and self.footprint() is not None

    def _footprint(self):
        if self.issuer is None or not self.view.uniform or not self.src.uniform:
            return None
        return ("box",)

    def executes_uniform(self, S, ctx, inst):
        if self.footprint() is None:
            return FALSE
        return self.node.guard(S, ctx, inst, bv(self.issuer))


class WgmmaRead(ShRead):
    """The read of one shared operand of a wgmma by the async proxy, for the whole warpgroup."""

    op = "wgmma"
    proxy = "async"


class MbarrierAccess(ShRead):
    """An mbarrier operation's (or a TMA's completion) barrier element: checked for bounds only
    (its phases are the protocol's)."""

    op = "mbarrier"
    proxy = "async"


class HopperMixin:
    def visit_MbarrierOp(self, s: ir.MbarrierOp, node, env):
        """No data: its phases are mbarrier-phase's and mbarrier-tx's part; its index is bounds'."""
        self.barrier_access(s.bar, node, env, f"mbarrier_{s.kind}")

    def barrier_access(self, bar: ir.View, node, env, label):
        alloc = self.allocs[bar.base]
        tv = whole_tile(self.T, bar.tile)
        self.mbar_accesses.append(MbarrierAccess(node, alloc, self.compile_view(bar, env), tv, tv.values, label,
                                                 label))

    def visit_Fence(self, s: ir.Fence, node, env):
        """No data: whether fences are in place is async-proxy-fence's and wgmma-accumulator's part."""
        if s.kind == "wgmma":
            self.collectives.append((node, "wgmma_fence", 128))

    def visit_WgmmaGroup(self, s: ir.WgmmaGroup, node, env):
        self.wgmma_groups.append(node)
        self.collectives.append((node, f"wgmma_{s.kind}", 128))

    def visit_SetMaxNReg(self, s: ir.SetMaxNReg, node, env):
        """No data: a register-count policy (its budget is checked at compile time)."""

    def tma_issuer(self, node):
        """The one thread that may issue a statement under `node`'s conditions (None: not one). A
        condition `a and b` that holds bounds the threads by those of its conjuncts that depend on the
        thread alone (`thread_id == 0 and tile == block_id.x`: thread 0 at most)."""
        t = np.arange(self.T, dtype=np.int64)
        live = np.ones(self.T, dtype=bool)
        for c, pos in node.conds:
            if c.uniform:
                continue
            parts = [c] if c.np_fn is not None else list(self.conjuncts.get(id(c), ())) if pos else []
            bounded = False
            for p in parts:
                if p.uniform or p.np_fn is None:
                    continue
                x = np.broadcast_to(np.asarray(p.np_fn(t)) != 0, t.shape)
                live &= x if (pos or p is not c) else ~x
                bounded = True
            if not bounded:
                return None  # a condition on the thread and more, not bounded by a conjunct of the thread
        ts = np.nonzero(live)[0]
        return int(ts[0]) if len(ts) == 1 else None

    def visit_TmaLoad(self, s: ir.TmaLoad, node, env):
        if len(s.src.tile) != len(s.dst.tile) or tuple(s.src.tile) != tuple(s.dst.tile):
            raise AnalysisError(f"tma_load at line {s.span.line}: the global tile {list(s.src.tile)} and the shared "
                                f"tile {list(s.dst.tile)} differ")
        dst = self.compile_view(s.dst, env)
        src = self.compile_view(s.src, env)
        alloc = self.allocs[s.dst.base]
        issuer = self.tma_issuer(node)
        if issuer is None:
            raise AnalysisError(f"tma_load at line {s.span.line} is not issued by exactly one thread the "
                                "kernel's conditions name")
        self.barrier_access(s.bar, node, env, "tma_load's mbarrier")
        w = TmaWrite(self, node, alloc, dst, src, s.src.base, issuer)
        if w.footprint() is None:
            raise AnalysisError(f"tma_load at line {s.span.line}: views whose starts depend on the thread")
        self.sh_writes[alloc.name].append(w)
        dtype = self.tensors[s.src.base].dtype
        # out-of-range elements are zero-filled by the unit: masked, as a masked load is
        self.g_accesses.append(GAccess("tma_load", node, s.src.base, src, w.coords, w.values, True, None, dtype))

    def visit_Wgmma(self, op: ir.Wgmma, s, node, env, label, ld):
        self.collectives.append((node, "wgmma", 128))
        C = env[op.c]
        A, read_a = self.wgmma_operand(op.a, "a", s, node, env, ld)
        B, read_b = self.wgmma_operand(op.b, "b", s, node, env, ld)
        windows = self.operand_windows(s, node)
        terms = WgmmaTerms(self, s, A, B, C, label, {"a": read_a, "b": read_b}, windows)
        ck = Check(
            "mma",
            node,
            terms.check,
            s.type,
            f"wgmma: tag({A.label})[1] == tag({B.label})[0] for every product, and the result "
            f"(tag({A.label})[0], tag({B.label})[1]) agrees with tag({op.c})",
            # with the operands' k windows (each implies its half of the k agreement; coverage
            # uses them), "k" is checked only where a window does not hold (smt.obligations.agreement)
            parts=(("win-a", "win-b") if windows else ("k",)) + MmaTerms.PARTS[1:],
        )
        ck.windows = {x: w.source for x, w in windows.items()}
        self.checks.append(ck)
        out = FragV(s.name, s.type, terms.tag, label, C.heads, ld)
        self.checks[-1].demand = ("same", out, 0)
        self.demand.flow(out, C)
        return out

    def operand_windows(self, s, node) -> dict:
        """The k windows (smt.coverage.WgmmaWindow) of this wgmma's operands, when both are known and
        their tag components are the ones the k agreement compares (a's 1, b's 0)."""
        from argus_verify.smt.coverage import wgmma_windows

        if not hasattr(self, "_windows"):
            self._windows = {(w.line, w.which): w for w in wgmma_windows(self.k)}
        out = {x: self._windows.get((s.span.line, x)) for x in "ab"}
        if any(w is None for w in out.values()) or (out["a"].component, out["b"].component) != (1, 0):
            return {}
        if not node.loops or any(node.loops[-1].var != w.loop.var for w in out.values()):
            return {}
        return out

    def wgmma_operand(self, view: ir.View, which: str, s, node, env, ld):
        """Operand `which` of a wgmma as a fragment every thread holds whole: the tag of tile element
        c is that of the shared element the declared layout places there (read as of this point);
        and the function giving the tag at a tile coordinate."""
        cview = self.compile_view(view, env)
        alloc = self.allocs[view.base]
        tv = whole_tile(self.T, view.tile)
        text = f"{view.base}[...]"
        rd = WgmmaRead(node, alloc, cview, tv, tv.values, text, f"wgmma.{which}")
        self.sh_reads[alloc.name].append(rd)
        typ = ir.FragType(alloc.alloc.dtype, tv)

        def at(S, ctx, inst, t, c):
            e = cview.elem(S, ctx, inst, t, c)
            r_inst = P.Inst(node, {L.var: inst.cnt[L.var] for L in node.loops},
                            {L.var: inst.vals[L.var] for L in node.loops})
            tg = self.resolve(S, ctx, rd, r_inst, t, e)
            return tg.replace(trace=Tr(tg.trace, "wgmma", s.span, element_label(text, len(c)), c))

        def fn(S, ctx, inst, t, v):
            return at(S, ctx, inst, t, tv.coords(t, v, OPS))

        return FragV(f"wgmma.{which}", typ, fn, text, loopdeps=ld), at

    def tma_landed(self, rd):
        """A TMA copy has landed, and is visible, when the async proxy reads its element (a wgmma):
        the mbarrier protocol's part (RELIES_ON). Generic reads of TMA data never get here
        (check_generic_tma_reads)."""
        return TRUE

    # ---- ordering of async-proxy accesses against generic ones -------------------------------
    def wgmma_released(self, S, ctx, x_inst, y_inst):
        """The wgmma of read x_inst was committed, retired by a wgmma_wait(0) and then a barrier
        passed, before y_inst (under-approximation: nearest instances)."""
        commits = [g for g in self.wgmma_groups if g.stmt.kind == "commit"]
        waits = [g for g in self.wgmma_groups if g.stmt.kind == "wait" and g.stmt.pending == 0]
        parts = []
        for b in self.definite_barriers():
            for b_inst, exb in P.recent_before(S, ctx, b, y_inst, 1):
                for w in waits:
                    for w_inst, exw in P.recent_before(S, ctx, w, b_inst, 1):
                        for c in commits:
                            for c_inst, exc in P.recent_before(S, ctx, c, w_inst, 1):
                                parts.append(Z.And(exb, b.guard(S, ctx, b_inst, None), exw,
                                                   w.guard(S, ctx, w_inst, None), exc, c.guard(S, ctx, c_inst, None),
                                                   P.before(x_inst, c_inst), P.before(c_inst, w_inst),
                                                   P.before(w_inst, b_inst)))
        return Z.Or(*parts)

    def exactly_wgmma_released(self, S, ctx, x_inst, y_inst):
        commits = [g for g in self.wgmma_groups if g.stmt.kind == "commit"]
        waits = [g for g in self.wgmma_groups if g.stmt.kind == "wait" and g.stmt.pending == 0]
        parts = []
        for b in self.definite_barriers():
            for w in waits:
                for c in commits:
                    bi, wi, ci = (P.new_inst(S, ctx, n, p) for n, p in ((b, "vb"), (w, "vw"), (c, "vc")))
                    parts.append(Z.And(bi.cons, wi.cons, ci.cons, b.guard(S, ctx, bi, None),
                                       w.guard(S, ctx, wi, None), c.guard(S, ctx, ci, None), P.before(x_inst, ci),
                                       P.before(ci, wi), P.before(wi, bi), P.before(bi, y_inst)))
        return Z.Or(*parts)

    def check_generic_tma_reads(self):
        """Generic reads of shared memory that TMA writes: their ordering (an mbarrier wait of the
        reading threads on the copy's phase) is beyond the encoding."""
        for name, writes in self.sh_writes.items():
            if any(isinstance(w, TmaWrite) for w in writes):
                for rd in self.sh_reads[name]:
                    if getattr(rd, "op", None) == "tma_store":
                        # smt/protocol.py checks a wgmma's read against copies in flight, not a store's
                        raise AnalysisError(f"the TMA store at line {rd.node.span.line} reads {name}, which a TMA copy "
                                            "writes: that the copy has landed before the store reads it is neither "
                                            "encoded nor a protocol obligation")
                    if not isinstance(rd, WgmmaRead):
                        raise AnalysisError(f"the read of {name} at line {rd.node.span.line} by ordinary threads of "
                                            "data a TMA copy writes: its ordering through the mbarrier is not encoded")


class WgmmaTerms(MmaTerms):
    """MmaTerms for `c + a @ b` with a and b read from shared tiles: the element at (i, k) of an
    operand is the one its coordinate names (every thread of the warpgroup reads all of it)."""

    def __init__(self, an, s, A, B, C, label, readers, windows):
        self.s, self.A, self.B, self.C, self.label = s, A, B, C, label
        self.readers = readers
        self.windows = windows
        self.Kt = A.typ.tile[1]
        self.K = an.K
        self.T = an.T
        self.plan = None

    def holder(self, S, ctx, inst, t, frag, want, tag, v=None, k=None):
        return self.readers["a" if frag is self.A else "b"](S, ctx, inst, t, want), t, None

    def check(self, S, ctx, inst, t, v, part):
        if part not in ("win-a", "win-b"):
            return super().check(S, ctx, inst, t, v, part)
        which = part[-1]
        w = self.windows[which]
        k1 = S.var("k")
        i, j = self.s.type.coords.coords(t, v, OPS)
        frag = self.A if which == "a" else self.B
        x, _, _ = self.holder(S, ctx, inst, t, frag, (i, k1) if which == "a" else (k1, j), which)
        val, star = x.comp(w.component)
        want = Z.add(Z.mul(bv(w.coef), inst.vals[w.loop.var]), k1)
        bad = Z.And(Z.Not(x.none), Z.Not(star), Z.Not(x.err), Z.Not(Z.Eq(val, want)))
        return {"bad": bad, "cons": Z.And(x.cons, k1 >= 0, k1 < self.Kt), "tags": [(frag.label, x)],
                "extra": {"k": k1}}


__all__ = ["DATAFLOW", "HopperMixin", "RELIES_ON", "RELIANCE", "RELIANCE_TAGS", "TmaWrite", "WgmmaRead", "TRUE"]
