"""Memory: views, loads, stores and async copies; a shared read resolved to the writes it may see.

A global load takes the tag its tensor's declaration gives the element it reads (and is `err`
out of bounds unless masked). A read of shared offset o at instance r resolves to the writes W@w
(any instance, any thread, any value) that wrote o before r and were not overwritten in between
(`alive`); the read takes W's tag, and is marked `err` unless W had completed (async copies:
retired by a `wait`) and become visible to the reader (same thread, or a barrier since: see
smt.sync).
"""

from __future__ import annotations

import numpy as np

from argus_verify import atoms, ir
from argus_verify.smt import last_writer as LW
from argus_verify.smt import program as P
from argus_verify.smt import values as V
from argus_verify.smt import zops as Z
from argus_verify.smt.records import AllocInfo, GAccess, ShRead, ShWrite, View
from argus_verify.smt.values import FragV, TagVal, Tr, element_label, value_label
from argus_verify.smt.zops import FALSE, OPS, TRUE

MAX_DEPTH = 60  # nested fragment evaluations before giving up (loop-carried data through smem)
# shared reads resolved in one query before giving up: each read's candidate writes resolve their
# own reads, so data combined in shared memory over loop iterations (a tree reduction) multiplies
# them by the candidates at every level; depth alone does not bound that
MAX_RESOLVES = 600  # the specs need at most 10 (reduce_pipe3), the Hopper GEMMs 7; a shared tree of 7 levels 255


class MemoryMixin:
    """Handlers of SharedAlloc, Store, CopyAsync and Load, and shared-read resolution."""

    def compile_view(self, view: ir.View, env) -> View:
        items = []
        for it in view.index:
            if isinstance(it, ir.Slice):
                items.append(("slice", self.cint(it.start, env), it.extent))
            else:
                items.append(("index", self.cint(it.index, env), 1))
        return View(view, items)

    def store_live(self, node, where):
        """[T, 1] the threads that may execute a store (its conditions of the thread alone; None:
        every thread, when a condition depends on more than the thread)."""
        t = np.arange(self.T, dtype=np.int64)
        live = np.ones(self.T, dtype=bool)
        conds = list(node.conds) + ([(where, True)] if where is not None else [])
        for c, pos in conds:
            if c.uniform:
                continue
            if c.np_fn is None:
                return None
            x = np.broadcast_to(np.asarray(c.np_fn(t)) != 0, t.shape)
            live &= x if pos else ~x
        return live[:, None]

    # ---- statements ------------------------------------------------------------------------
    def visit_SharedAlloc(self, s: ir.SharedAlloc, node, env):
        self.allocs[s.name] = AllocInfo(s, node)
        self.sh_writes.setdefault(s.name, [])
        self.sh_reads.setdefault(s.name, [])

    def visit_Store(self, s: ir.Store, node, env):
        frag = env[s.value]
        view = self.compile_view(s.dst, env)
        where = self.cint(s.where, env) if s.where is not None else None
        typ = frag.typ
        self.demand.sink(frag, self.store_live(node, where))
        if s.dst.space == "shared":
            alloc = self.allocs[s.dst.base]
            self.sh_writes[alloc.name].append(
                ShWrite(self, "store", node, alloc, view, typ.coords, typ.values, where, frag=frag, label=frag.label)
            )
            return
        acc = GAccess("store", node, s.dst.base, view, typ.coords, typ.values, s.mask, where, typ.dtype)
        self.g_accesses.append(acc)
        if self.tensors[s.dst.base].output:
            self.out_stores.append((acc, frag))

    def visit_Stmatrix(self, s: ir.Stmatrix, node, env):
        """Every value lands at its own coordinate (the front end checked it): a store. (Bank
        conflicts are counted as for a store of the fragment, not per 8x8 matrix.)"""
        self.collectives.append((node, "stmatrix", 32))
        self.visit_Store(s.as_store(), node, env)
        w = self.sh_writes[s.dst.base][-1]  # the store just recorded: its compiled view
        self.matrix_rows.append((node, w.view, w.alloc, s.rows, "stmatrix"))

    def visit_CopyAsync(self, s: ir.CopyAsync, node, env):
        dst = self.compile_view(s.dst, env)
        src = self.compile_view(s.src, env)
        alloc = self.allocs[s.dst.base]
        w = ShWrite(
            self,
            "async",
            node,
            alloc,
            dst,
            s.tv,
            s.tv.values,
            None,
            src=src,
            src_tensor=s.src.base,
            label=f"{s.src.base}",
            vec=s.vec,
        )
        self.sh_writes[alloc.name].append(w)
        dtype = self.tensors[s.src.base].dtype
        self.g_accesses.append(GAccess("copy_async", node, s.src.base, src, s.tv, s.tv.values, s.mask, None, dtype))

    # ---- loads -----------------------------------------------------------------------------
    def visit_Load(self, op: ir.Load, s, node, env, label, ld) -> FragV:
        if op.src.space == "global":
            return self.load_global(s, node, env, label, ld)
        return self.load_shared(s, node, env, label, ld)

    def load_global(self, s, node, env, label, ld) -> FragV:
        op = s.op
        view = self.compile_view(op.src, env)
        tensor = op.src.base
        coords = s.type.coords
        rank = len(view.items)
        dtype = self.tensors[tensor].dtype
        self.g_accesses.append(GAccess("load", node, tensor, view, coords, s.type.values, op.mask, None, dtype))

        def element(S, ctx, inst, t, c, where, terms):
            """The tag of the element at tile coordinate c (read by thread t, None: any)."""
            e = view.elem(S, ctx, inst, t, c)
            tg = self.input_tag(tensor, e, S)
            err = FALSE if op.mask else Z.Not(self.in_tensor(tensor, e, S))
            src = Tr(None, None, None, element_label(tensor, rank), e)
            return tg.replace(err=err, trace=Tr(src, "load", s.span, where, terms))

        def fn(S, ctx, inst, t, v):
            return element(S, ctx, inst, t, coords.coords(t, v, OPS), value_label(label), (v, t))

        cfn = None
        if view.uniform:

            def cfn(S, ctx, inst, c):
                return element(S, ctx, inst, None, c, element_label(label, len(c)), c)

        return FragV(s.name, s.type, fn, label, loopdeps=ld, cfn=cfn)

    def visit_Ldmatrix(self, op: ir.Ldmatrix, s, node, env, label, ld) -> FragV:
        """Each lane's values carry the tags of the elements its type's coordinates name (the ISA's
        ldmatrix layout over the supplied rows); bank conflicts are those of the row reads: 16
        bytes per row address, one phase per 8x8 matrix."""
        rows = atoms.ldmatrix_row_elements(op.rows)
        self.collectives.append((node, "ldmatrix", 32))
        frag = self.load_shared(s, node, env, label, ld, bank=(rows, 8), opname="ldmatrix")
        rd = self.sh_reads[op.src.base][-1]  # the read just recorded: its compiled view
        self.matrix_rows.append((node, rd.view, rd.alloc, op.rows, "ldmatrix"))
        return frag

    def load_shared(self, s, node, env, label, ld, bank=None, opname="load") -> FragV:
        op = s.op
        view = self.compile_view(op.src, env)
        alloc = self.allocs[op.src.base]
        coords = s.type.coords
        rd = ShRead(node, alloc, view, coords, s.type.values, label, s.name)
        if bank is not None:
            rd.bank = ShRead(node, alloc, view, bank[0], bank[0].values, label, s.name)
            rd.bank.vec = bank[1]
        self.sh_reads[alloc.name].append(rd)

        def fn(S, ctx, inst, t, v):
            c = coords.coords(t, v, OPS)
            e = view.elem(S, ctx, inst, t, c)
            r_inst = V.Inst(
                node,
                {L.var: inst.cnt[L.var] for L in node.loops},
                {L.var: inst.vals[L.var] for L in node.loops},
            )
            tg = self.resolve(S, ctx, rd, r_inst, t, e)
            return tg.replace(trace=Tr(tg.trace, opname, s.span, value_label(label), (v, t)))

        return FragV(s.name, s.type, fn, label, loopdeps=ld)

    # ---- shared reads ----------------------------------------------------------------------
    def resolve(self, S, ctx, rd: ShRead, r_inst, t, e) -> TagVal:
        """The tag of shared element e read by thread t at r_inst: that of the last write."""
        S.depth = getattr(S, "depth", 0) + 1
        S.resolves = getattr(S, "resolves", 0) + 1
        try:
            if S.resolves > MAX_RESOLVES:
                reason = "data flows through shared memory along more paths than the encoding follows"
                if reason not in self.notes:  # the reason a tainted counterexample is unknown
                    self.notes.append(reason)
                return self.havoc_tag(S, rd.label, reason)
            if S.depth > MAX_DEPTH:
                reason = ("data flows through shared memory through more stores and loads in a row than the encoding "
                          "follows (around a loop, or a deep tree)")
                if reason not in self.notes:  # the reason a tainted counterexample is unknown
                    self.notes.append(reason)
                return self.havoc_tag(S, rd.label, reason)
            keep = self.read_plans.get(id(rd))
            if keep is not None:
                return self.resolve_last(S, ctx, rd, r_inst, t, e, keep)
            off = rd.alloc.offset(e)
            options = []
            events = []
            # One loop body, not a function per kind of writer: the terms it builds stay alive until
            # the next writer's are built. Z3 reuses the numbers of freed terms, and the witnesses
            # depend on the numbering (see smt/__init__.py), so this keeps them as they were.
            unseen = self.never_last.get(id(rd), ())
            for W in self.sh_writes[rd.alloc.name]:
                if id(W) in unseen:
                    continue
                if W.fast and rd.alloc.injective:
                    w_inst = P.new_inst(S, ctx, W.node, "w")
                    valid = Z.And(
                        w_inst.cons,
                        W.executes_uniform(S, ctx, w_inst),
                        W.covers(S, ctx, w_inst, e),
                        P.before(w_inst, r_inst),
                        self.alive(S, ctx, W, w_inst, r_inst, e),
                    )
                    c = W.tile_coord(S, ctx, w_inst, e)
                    mine = W.holds(S, t, c)
                    issuer = None
                    if W.kind == "async" and len(self.uniform_waits()) < len(self.waits):
                        # waits under conditions on the thread: they retire the copies of the
                        # threads that run them; the issuing thread of c is named when unique
                        issuer = self.unique_issuer(S, W, c)
                        if issuer is not None:
                            valid = Z.And(valid, issuer[1])
                            issuer = issuer[0]
                    if W.kind == "tma":
                        ok = self.tma_landed(rd)
                    elif W.kind == "store":
                        ok = Z.Or(mine, self.barrier_between(S, ctx, w_inst, r_inst))
                    else:
                        ok = Z.And(
                            self.retired(S, ctx, w_inst, r_inst, issuer),
                            Z.Or(mine, self.visible_after_wait(S, ctx, w_inst, r_inst, issuer)),
                        )
                    options.append((valid, self.as_read(W, w_inst, W.tag_at(S, ctx, w_inst, c), ok, e)))
                    events.append((W, w_inst, issuer, None, valid, ok))
                    continue
                w_inst = P.new_inst(S, ctx, W.node, "w")
                tw, vw = S.var("tw"), S.var("vw")
                _, woff, winshape = W.addr(S, ctx, w_inst, tw, vw)
                valid = Z.And(
                    w_inst.cons,
                    tw >= 0,
                    tw < self.T,
                    vw >= 0,
                    vw < W.values,
                    Z.Eq(woff, off),
                    winshape,
                    W.executes(S, ctx, w_inst, tw),
                    P.before(w_inst, r_inst),
                    self.alive(S, ctx, W, w_inst, r_inst, e, (tw, vw, off)),
                )
                ok = self.completed_visible(S, ctx, W, w_inst, tw, r_inst, t)
                options.append((valid, self.as_read(W, w_inst, W.tag(S, ctx, w_inst, tw, vw), ok, e)))
                events.append((W, w_inst, tw, vw, valid, ok))
            sel = S.var("sel")
            out = V.select(sel, options, self.K)
            S.memo.setdefault("__reads__", []).append((rd, ctx, r_inst, t, e, sel, events))
            if unseen and rd.node.conds:  # the writers were pruned for the threads that run the read
                runs = rd.node.guard(S, ctx, r_inst, t)
                idle = self.havoc_tag(S, rd.label, "a read evaluated for a thread that does not run it")
                out = V.select(S.var("runs"), [(runs, out), (Z.Not(runs), idle)], self.K)
            return out
        finally:
            S.depth -= 1

    def resolve_last(self, S, ctx, rd: ShRead, r_inst, t, e, keep) -> TagVal:
        """A read whose writers smt.last_writer settled: the last of the kept candidate writes that
        covers e (they are the only writes it can see)."""
        cands = LW.candidates(self, S, ctx, rd, r_inst, e, keep)
        options, events = [], []
        for a, valid in zip(cands, LW.last(cands), strict=True):
            W = a.W
            if W.fast:  # the tag at the element's tile coordinate
                c = W.tile_coord(S, ctx, a.inst, e)
                if W.kind == "tma":
                    ok = self.tma_landed(rd)
                else:  # a store: visible to its own thread, and to the others after a barrier
                    ok = Z.Or(W.holds(S, t, c), self.barrier_between(S, ctx, a.inst, r_inst))
                options.append((valid, self.as_read(W, a.inst, W.tag_at(S, ctx, a.inst, c), ok, e)))
                events.append((W, a.inst, None, None, valid, ok))
                continue
            # a value without a coordinate form (a wgmma accumulator): the thread and value that
            # write e at that instance, matched by coordinates (the layout is injective: no need to
            # compare swizzled offsets)
            tw, vw = S.var("tw"), S.var("vw")
            ew = W.view.elem(S, ctx, a.inst, tw, W.coords.coords(tw, vw, OPS))
            valid = Z.And(valid, tw >= 0, tw < self.T, vw >= 0, vw < W.values,
                          *[Z.Eq(x, y) for x, y in zip(ew, e, strict=True)], W.executes(S, ctx, a.inst, tw))
            ok = self.completed_visible(S, ctx, W, a.inst, tw, r_inst, t)
            options.append((valid, self.as_read(W, a.inst, W.tag(S, ctx, a.inst, tw, vw), ok, e)))
            events.append((W, a.inst, tw, vw, valid, ok))
        sel = S.var("sel")
        out = V.select(sel, options, self.K)
        S.memo.setdefault("__reads__", []).append((rd, ctx, r_inst, t, e, sel, events))
        return out

    def unique_issuer(self, S, W, c):
        """(thread, constraint naming it) for the only thread of copy W that holds tile
        coordinate c, or None when several threads hold one coordinate."""
        table = W.coords.coord_table()
        flat = table.reshape(-1, table.shape[-1])
        owners = np.repeat(np.arange(table.shape[0]), table.shape[1])
        seen: dict = {}
        for row, t in zip(map(tuple, flat.tolist()), owners.tolist(), strict=True):
            seen.setdefault(row, set()).add(t)
        if any(len(ts) > 1 for ts in seen.values()):
            return None
        th = S.var("issuer")
        return th, Z.And(th >= 0, th < self.T, W.holds(S, th, c))

    def as_read(self, W, w_inst, tg: TagVal, ok, e) -> TagVal:
        """The written tag as the reader sees it: `err` unless the write completed and is visible."""
        where = self.iter_label(W.node, w_inst)
        tr = Tr(
            tg.trace,
            W.op,
            W.node.span,
            element_label(W.alloc.name, len(e)) + where,
            tuple(e) + self.iter_terms(W.node, w_inst),
        )
        return tg.replace(err=Z.Or(tg.err, Z.Not(ok)), trace=tr)

    def iter_label(self, node, inst) -> str:
        if not node.loops:
            return ""
        return " (written at " + ", ".join(f"{L.var}={{}}" for L in node.loops) + ")"

    def iter_terms(self, node, inst) -> tuple:
        return tuple(inst.vals[L.var] for L in node.loops)

    def alive(self, S, ctx, W, w_inst, r_inst, e, writer=None):
        """W@w_inst is not overwritten at coordinate e before r_inst: by writes with footprints, and
        by a write without one (its address or guard depends on more than the thread, e.g. a
        per-thread store under `if base + thread_id < N`) when the thread and value of `writer`
        (tw, vw, offset of e) write e again there. An overwrite is only ever claimed where it
        happens, so the condition stays an over-approximation of "not overwritten"."""
        if not W.alloc.injective:
            return TRUE
        parts = []
        D = self.window
        for K in self.sh_writes[W.alloc.name]:
            by_thread = K.footprint() is None  # (only where the same thread's store is followed)
            if by_thread and (writer is None or K.kind != "store" or W.kind != "store"):
                continue
            cands = P.recent_before(S, ctx, K.node, r_inst, D) + P.next_after(S, ctx, K.node, w_inst, D)
            for k_inst, ex in cands:
                if by_thread:
                    # the same thread and value of K write the same offset at k_inst
                    tw, vw, off = writer
                    _, koff, kinshape = K.addr(S, ctx, k_inst, tw, vw)
                    hit = Z.And(ex, K.executes(S, ctx, k_inst, tw), P.before(w_inst, k_inst),
                                P.before(k_inst, r_inst), vw < K.values, Z.Eq(koff, off), kinshape)
                else:
                    hit = Z.And(
                        ex,
                        K.executes_uniform(S, ctx, k_inst),
                        P.before(w_inst, k_inst),
                        P.before(k_inst, r_inst),
                        K.covers(S, ctx, k_inst, e),
                    )
                parts.append(Z.Not(hit))
        return Z.And(*parts)
