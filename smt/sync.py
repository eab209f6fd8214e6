"""Synchronisation: barriers, commits and waits, and the order they impose on shared accesses.

A plain store becomes visible to other threads at the next barrier. An async copy lands when a
`wait(n)` retires its commit group (groups are counted in closed form by `program.CommitCounter`)
and becomes visible to other threads at a barrier after that wait. The formulas below use a few
candidate instances of each barrier and wait (`program.recent_before`): an under-approximation
of the order, which the obligations re-check exactly before reporting a violation.
"""

from __future__ import annotations

from argus_verify import ir
from argus_verify.smt import program as P
from argus_verify.smt import zops as Z
from argus_verify.smt.zops import FALSE, bv


class SyncMixin:
    """Handlers of Commit, Wait and Barrier, and the ordering formulas."""

    def visit_Commit(self, s: ir.Commit, node, env):
        self.commit_nodes.append(node)

    def visit_Wait(self, s: ir.Wait, node, env):
        self.waits.append(node)

    def visit_Barrier(self, s: ir.Barrier, node, env):
        self.barriers.append(node)

    def definite_barriers(self):
        # a barrier under a thread-dependent condition is a barrier-divergence violation of its
        # own; for ordering, the condition is taken for thread 0 (see Node.guard)
        return list(self.barriers)

    def uniform_waits(self):
        """The waits every thread of a block executes alike (only they order async copies)."""
        return [w for w in self.waits if w.uniform_guard]

    def waits_for(self, tw):
        """(wait, the thread its guard is evaluated for): the uniform waits, and, when the copy's
        issuing thread tw is known, the waits under conditions on the thread, evaluated for tw
        (cp.async groups are per thread: the issuing thread's own wait retires its copy)."""
        out = [(w, None) for w in self.uniform_waits()]
        if tw is not None:
            out += [(w, tw) for w in self.waits if not w.uniform_guard]
        return out

    def barrier_between(self, S, ctx, x_inst, y_inst):
        """A barrier executes after x_inst and before y_inst (under-approximation)."""
        parts = []
        for b in self.definite_barriers():
            for b_inst, ex in P.recent_before(S, ctx, b, y_inst, 1):
                parts.append(Z.And(ex, b.guard(S, ctx, b_inst, None), P.before(x_inst, b_inst)))
        return Z.Or(*parts)

    def group_of(self, S, ctx, inst):
        return self.commits.before(S, ctx, inst)

    def retires(self, S, ctx, w, w_inst, group):
        """Wait `w` at w_inst retires commit group `group`."""
        return Z.Lt(group, Z.sub(self.group_of(S, ctx, w_inst), bv(w.stmt.pending)))

    def groups_uncountable(self, S) -> bool:
        """Commit groups cannot be counted exactly (noted: no async copy is then ever retired)."""
        if self.commits.exact:
            return False
        S.notes.add(f"async-copy groups cannot be counted exactly ({self.commits.reason})")
        return True

    def retired(self, S, ctx, x_inst, y_inst, tw=None):
        """The async copy x_inst (issued by thread tw, None: unknown) was retired by a wait
        executed before y_inst."""
        if self.groups_uncountable(S):
            return FALSE
        g = self.group_of(S, ctx, x_inst)
        parts = []
        for w, wt in self.waits_for(tw):
            for w_inst, ex in P.recent_before(S, ctx, w, y_inst, 1):
                guard = w.guard(S, ctx, w_inst, wt)
                parts.append(Z.And(ex, guard, P.before(x_inst, w_inst), self.retires(S, ctx, w, w_inst, g)))
        return Z.Or(*parts)

    def visible_after_wait(self, S, ctx, x_inst, y_inst, tw=None):
        """The async copy x_inst (issued by thread tw) was retired by a wait, then a barrier,
        before y_inst."""
        if self.groups_uncountable(S):
            return FALSE
        g = self.group_of(S, ctx, x_inst)
        parts = []
        for b in self.definite_barriers():
            for b_inst, exb in P.recent_before(S, ctx, b, y_inst, 1):
                for w, wt in self.waits_for(tw):
                    for w_inst, exw in P.recent_before(S, ctx, w, b_inst, 1):
                        parts.append(
                            Z.And(
                                exb,
                                b.guard(S, ctx, b_inst, None),
                                exw,
                                w.guard(S, ctx, w_inst, wt),
                                P.before(x_inst, w_inst),
                                self.retires(S, ctx, w, w_inst, g),
                            )
                        )
        return Z.Or(*parts)

    def completed_visible(self, S, ctx, W, w_inst, tw, r_inst, t):
        """The write W@w_inst by thread tw has completed and is visible to thread t at r_inst."""
        if W.kind == "tma":
            return self.tma_landed(None)
        if W.kind == "store":
            return Z.Or(Z.Eq(tw, t), self.barrier_between(S, ctx, w_inst, r_inst))
        return Z.And(
            self.retired(S, ctx, w_inst, r_inst, tw),
            Z.Or(Z.Eq(tw, t), self.visible_after_wait(S, ctx, w_inst, r_inst, tw)),
        )

    # ---- the exact forms, for re-checking a candidate counterexample (any instances at all) ----
    def exactly_barrier_between(self, S, ctx, x_inst, y_inst):
        parts = []
        for b in self.definite_barriers():
            bi = P.new_inst(S, ctx, b, "vb")
            parts.append(Z.And(bi.cons, b.guard(S, ctx, bi, None), P.before(x_inst, bi), P.before(bi, y_inst)))
        return Z.Or(*parts)

    def exactly_retired(self, S, ctx, x_inst, y_inst, tw=None):
        g = self.group_of(S, ctx, x_inst)
        parts = []
        for w, wt in self.waits_for(tw):
            wi = P.new_inst(S, ctx, w, "vw")
            parts.append(
                Z.And(
                    wi.cons,
                    w.guard(S, ctx, wi, wt),
                    P.before(x_inst, wi),
                    P.before(wi, y_inst),
                    self.retires(S, ctx, w, wi, g),
                )
            )
        return Z.Or(*parts)

    def exactly_visible_after_wait(self, S, ctx, x_inst, y_inst):
        g = self.group_of(S, ctx, x_inst)
        parts = []
        for b in self.definite_barriers():
            bi = P.new_inst(S, ctx, b, "vb")
            for w in self.uniform_waits():
                wi = P.new_inst(S, ctx, w, "vw")
                parts.append(
                    Z.And(
                        bi.cons,
                        wi.cons,
                        b.guard(S, ctx, bi, None),
                        w.guard(S, ctx, wi, None),
                        P.before(x_inst, wi),
                        P.before(wi, bi),
                        P.before(bi, y_inst),
                        self.retires(S, ctx, w, wi, g),
                    )
                )
        return Z.Or(*parts)
