"""The obligations of an audited kernel, checked with two symbolic threads.

Thread 1's events come from one symbolic run (symbolic.py); thread 2's are the same events with
every per-thread variable renamed (its ids, loop iterations and unknown values). Two accesses
race when they are made by different threads, touch a common byte of the same array, at least one
writes, not both are atomics, and nothing orders them: in one block, a barrier orders accesses in
different barrier phases; threads of different blocks are never ordered.

Each check is one Z3 query; `sat` is a violation only when the witness depends on nothing the
lifter or the loop summaries over-approximated (else unknown, with the reason), `unsat` a proof,
anything else unknown.
"""

from __future__ import annotations

import re
import time

import z3

from argus_verify import thread_ir as T
from argus_verify.diagnostics import Span
from argus_verify.smt.audit.symbolic import Event, Machine, bv, fit, free_names, full_barrier
from argus_verify.smt.report import ObligationResult

MEMORY_OBLIGATIONS = ("race", "bounds", "uninitialised-read", "cp-async")


class Checker:
    def __init__(self, m: Machine, assumptions: list, sizes: dict, ptx_file: str, timeout_ms: int,
                 scalars: dict, budget_s: float | None = None):
        self.m = m
        self._two: dict = {}
        self._ren_arrays = None
        self.deadline = None if budget_s is None else time.perf_counter() + budget_s
        self.ptx_file = ptx_file
        self.timeout = timeout_ms
        self.sizes = sizes  # PTX param name -> BV64 size in bytes
        self.scalars = scalars  # shown name -> z3 term
        self.ren = []
        for v in m.per_thread:
            name = v.decl().name()
            n2 = name.replace("t1!", "t2!", 1) if name.startswith("t1!") else name + "'2"
            v2 = z3.Bool(n2) if z3.is_bool(v) else z3.BitVec(n2, v.size())
            self.ren.append((v, v2))
        self.ren_map = {a.decl().name(): b for a, b in self.ren}
        t1_valid = list(m.thread_constraints)
        self.base = list(assumptions) + list(m.assumptions) + t1_valid + [self.two(c) for c in t1_valid]
        self.same_block = z3.And(*[m.ctaid[d] == self.two(m.ctaid[d]) for d in "xyz"])
        self.same_thread = z3.And(self.same_block, *[m.tid[d] == self.two(m.tid[d]) for d in "xyz"])
        self.lin1 = m.linear_tid
        self.lin2 = self.two(m.linear_tid)
        self.written = {f"in!{b}" for b in m.written_bases}
        self.results: list[ObligationResult] = []
        self.memory_blocked = [u for u in m.unsupported if u.effects == "memory"]
        self.order_blocked = [u for u in m.unsupported if u.effects == "order"]
        self.cp_blocked = [u for u in m.unsupported if u.effects == "cp-async"]

    def two(self, e):
        if e is None or not z3.is_expr(e):
            return e
        if not self.ren:
            return e
        key = e.get_id()
        hit = self._two.get(key)
        if hit is None:  # the term is kept alive next to its copy, so its id is not reused
            hit = self._two[key] = (e, self._substitute(e))
        return hit[1]

    def _substitute(self, e):
        """z3.substitute(e, *self.ren) through the C API with the arrays built once (z3.substitute
        checks the sorts of every pair in Python on each call: thousands of pairs, per term)."""
        if self._ren_arrays is None:
            n = len(self.ren)
            src, dst = (z3.Ast * n)(), (z3.Ast * n)()
            for i, (a, b) in enumerate(self.ren):
                src[i], dst[i] = a.as_ast(), b.as_ast()
            self._ren_arrays = (n, src, dst)
        n, src, dst = self._ren_arrays
        return z3.z3._to_expr_ref(z3.Z3_substitute(e.ctx_ref(), e.as_ast(), n, src, dst), e.ctx)

    def spent(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline - 0.05

    def out_of_time(self, obligation: str, what: str) -> None:
        self.results.append(ObligationResult(obligation, "unknown", self.span(self.m.k.loc),
                                             f"{obligation} not decided for {what}: the audit's time budget is spent"))

    # ------------------------------------------------------------ solving

    def solve(self, formulas):
        left = None if self.deadline is None else self.deadline - time.perf_counter()
        if left is not None and left <= 0.05:
            return z3.unknown, None, "the audit's time budget is spent"
        s = z3.Solver()
        s.set("timeout", self.timeout if left is None else max(1, min(self.timeout, int(left * 1000))))
        s.add(self.base + formulas)
        r = s.check()
        return r, (s.model() if r == z3.sat else None), s.reason_unknown() if r == z3.unknown else ""

    def imprecise(self, formulas) -> list[str]:
        names = free_names(formulas)
        out = []
        for n in sorted(names):
            base = n[:-2] if n.endswith("'2") else n
            if base in self.m.imprecise:
                out.append(self.m.imprecise[base])
            elif any(base.startswith(w + "!") for w in self.written):
                out.append(f"a value read from {base.split('!')[1]}, which the kernel also writes")
        return sorted(set(out))

    def span(self, loc: T.Loc | None) -> Span:
        if loc is None:
            return Span(self.ptx_file, 0, 0)
        if loc.file:
            return Span(loc.file, loc.line, max(loc.col, 1))
        return Span(self.ptx_file, loc.ptx_line, 1)

    def where(self, loc: T.Loc) -> str:
        if loc.file:
            return f"line {loc.line} (PTX line {loc.ptx_line})"
        return f"PTX line {loc.ptx_line}"

    # ------------------------------------------------------------ witnesses

    def val(self, model, e) -> int:
        v = model.eval(e, model_completion=True)
        try:
            return v.as_signed_long() if v.size() <= 64 and v.as_long() >= 1 << (v.size() - 1) and \
                v.size() < 64 else v.as_long()
        except Exception:
            return int(str(v)) if str(v).lstrip("-").isdigit() else 0

    def thread_of(self, model, second=False):
        f = self.two if second else (lambda e: e)
        block = [self.val(model, f(self.m.ctaid[d])) for d in "xyz"]
        lin = self.val(model, f(self.lin1))
        tid = [self.val(model, f(self.m.tid[d])) for d in "xyz"]
        return block, lin, tid

    def witness(self, model, second=True, events=()) -> tuple[dict, list]:
        b1, l1, t1 = self.thread_of(model)
        w: dict = {"block": b1}
        lines = []
        if second:
            b2, l2, t2 = self.thread_of(model, True)
            w["threads"] = [l1, l2]
            if b2 != b1:
                lines.append(f"thread {l1} of block ({', '.join(map(str, b1))}) and thread {l2} of block "
                             f"({', '.join(map(str, b2))})")
                w["blocks"] = [b1, b2]
        else:
            w["thread"] = l1
        if t1[1] or t1[2]:
            lines.append(f"threadIdx = ({', '.join(map(str, t1))})")
        w["grid"] = [self.val(model, self.m.nctaid[d]) for d in "xyz"]
        w["block_dim"] = [self.val(model, self.m.ntid[d]) for d in "xyz"]
        scal = {name: self.val(model, e) for name, e in self.scalars.items()}
        if scal:
            w["scalars"] = scal
        loops = {}
        for idx, ev in enumerate(events):
            if ev is None:
                continue
            who = f"thread {l1}" if idx == 0 else f"thread {w['threads'][1]}" if second else ""
            its = {lab: i for lab, i in ev.iters}
            for lab, k in ev.loops:
                if k is not None:
                    its[lab] = self.val(model, k if idx == 0 else self.two(k))
            if its:
                loops[who or "thread"] = {f"iteration of loop {lab}": v for lab, v in its.items()}
        if loops:
            w["loops"] = loops
        return w, lines

    def blocked(self, obligation: str, loc, what: str) -> bool:
        """Memory obligations cannot be proved past an instruction that may touch memory unseen."""
        if obligation in MEMORY_OBLIGATIONS and self.memory_blocked:
            u = self.memory_blocked[0]
            self.results.append(ObligationResult(obligation, "unknown", self.span(u.loc),
                                                 f"{obligation} not decided: {u.reason}"))
            return True
        if obligation == "cp-async" and self.cp_blocked:
            u = self.cp_blocked[0]
            self.results.append(ObligationResult(obligation, "unknown", self.span(u.loc),
                                                 f"{obligation} not decided: {u.reason}"))
            return True
        return False

    def conclude(self, obligation, r, model, why, formulas, loc, message, events=(), second=True,
                 extra=None, order_sensitive=False) -> str:
        if r == z3.unsat:
            return "proved"
        if r == z3.unknown:
            self.results.append(ObligationResult(obligation, "unknown", self.span(loc),
                                                 f"{message}: solver gave up ({why or 'unknown'})"))
            return "unknown"
        reasons = self.imprecise(formulas)
        if order_sensitive and self.order_blocked:
            reasons.append(self.order_blocked[0].reason)
        if not reasons:
            model, why_not = self.confirm_iterations(formulas, model)
            if why_not:
                reasons.append(why_not)
        w, lines = self.witness(model, second, events)
        if extra:
            lines = extra(model) + lines
        if reasons:
            self.results.append(ObligationResult(
                obligation, "unknown", self.span(loc),
                f"possible {message}, but the witness depends on what the audit over-approximates: "
                + "; ".join(reasons[:2]), witness=w, explanation=lines))
            return "unknown"
        self.results.append(ObligationResult(obligation, "violated", self.span(loc), message, witness=w,
                                             explanation=lines))
        return "violated"

    def confirm_iterations(self, formulas, model):
        """A witness in a loop that was not unrolled stands for iteration k; the summary only knows
        that iteration k-1 went on. Look for a witness with every such k at most 64 and check,
        iteration by iteration, that each earlier one went on; else the witness is not trusted."""
        names = free_names(formulas)
        ks = []
        for n in names:
            base = n[:-2] if n.endswith("'2") else n
            if base in self.m.loop_conts:
                k, cont, label = self.m.loop_conts[base]
                if n.endswith("'2"):
                    ks.append((self.ren_map[base], self.two(cont), k, label))
                else:
                    ks.append((k, cont, k, label))
        if not ks:
            return model, ""
        r, m2, _ = self.solve(list(formulas) + [z3.ULE(kv, 64) for kv, _, _, _ in ks])
        if r != z3.sat:
            return model, f"a witness needs a late iteration of loop {ks[0][3]}, which the loop summary cannot confirm"
        for kv, cont, k1, label in ks:
            n = m2.eval(kv, model_completion=True).as_long()
            for j in range(n):
                c = m2.eval(z3.substitute(cont, (kv if kv is k1 else kv, z3.BitVecVal(j, 32))), model_completion=True)
                if not z3.is_true(c):
                    return model, f"the witness's iteration {n} of loop {label} is not reached (iteration {j} exits)"
        return m2, ""

    # ------------------------------------------------------------ helpers

    def instance(self, ev: Event, second: bool, addr=None, phase=None, extra=()):
        f = self.two if second else (lambda e: e)
        cs = [f(ev.guard)]
        if addr is not None:
            cs.append(addr == f(ev.off))
        if phase is not None:
            cs.append(phase == f(ev.phase))
        cs.extend(extra)
        return z3.And(*cs)

    def sites(self, pred):
        out: dict = {}
        for ev in self.m.events:
            if pred(ev):
                out.setdefault((id(ev.stmt), ev.space, ev.write), []).append(ev)
        return list(out.values())

    def name(self, base) -> str:
        """The source name of an array: a parameter's C name, a shared variable without mangling."""
        for p in self.m.k.params:
            if p.name == base:
                return p.source_name or p.name
        m = re.fullmatch(r"_ZZ.*E(\d+)(\w+)", base or "")
        if m and len(m.group(2)) >= int(m.group(1)):
            return m.group(2)[:int(m.group(1))]
        return str(base)

    def access_desc(self, ev: Event) -> str:
        kind = "atomic" if ev.atomic else ("async copy into" if ev.cp else ("write" if ev.write else "read"))
        return f"{kind} {ev.space} {self.name(ev.base)}"

    # ------------------------------------------------------------ races

    def races(self):
        # generic-space accesses whose array is not known count too (as unknown), never silently
        accesses = self.sites(lambda e: e.kind == "access" and (e.space in ("shared", "global") or
                                                                (e.space == "generic" and e.base is None)))
        if self.blocked("race", None, "race"):
            return
        unknown_base = [s for s in accesses if s[0].base is None]
        for s in unknown_base:
            ev = s[0]
            self.results.append(ObligationResult("race", "unknown", self.span(ev.stmt.loc),
                                                 f"the {ev.space} access at {self.where(ev.stmt.loc)} has an address "
                                                 "whose array is not known; races through it are not checked"))
        sites = [s for s in accesses if s[0].base is not None]
        race_free = self.race_batch(sites)
        found = 0
        for i, a in enumerate(sites):
            if self.spent():
                self.out_of_time("race", f"the accesses from {self.where(a[0].stmt.loc)} on")
                found += 1
                break
            for b in sites[i:]:
                ea, eb = a[0], b[0]
                if ea.base != eb.base or ea.space != eb.space or (ea.space, ea.base) in race_free:
                    continue
                if not (ea.write or eb.write) or (ea.atomic and eb.atomic):
                    continue
                if self.race_pair(a, b):
                    found += 1
        if not found and not any(r.obligation == "race" for r in self.results):
            self.results.append(ObligationResult("race", "proved", self.span(self.m.k.loc),
                                                 "no data race on shared or global memory"))

    def race_batch(self, sites) -> set:
        """The arrays proved race-free in one query each: thread 1 writes (any write site), thread 2
        accesses (any site), not both atomically, with overlapping bytes and nothing ordering them.
        The two-thread encoding is symmetric, so this covers every pair with a write. Arrays it does not
        prove (a race, or the solver gave up) are checked pair by pair, which names the two accesses."""
        groups: dict = {}
        for site in sites:
            groups.setdefault((site[0].space, site[0].base), []).extend(site)
        done = set()
        for key, evs in groups.items():
            writes = [e for e in evs if e.write]
            pairs = sum(1 for e in writes for _ in evs)
            if not writes or pairs < 2:
                continue
            x1, x2 = z3.BitVec("addr1", 64), z3.BitVec("addr2", 64)
            p1, p2 = z3.BitVec("phase1", 32), z3.BitVec("phase2", 32)
            n1, n2 = z3.BitVec("size1", 64), z3.BitVec("size2", 64)
            a1, a2 = z3.Bool("atomic1"), z3.Bool("atomic2")
            s1 = z3.Or(*[self.instance(e, False, x1, p1, extra=(n1 == e.nbytes, a1 == e.atomic)) for e in writes])
            s2 = z3.Or(*[self.instance(e, True, x2, p2, extra=(n2 == self.two(e.nbytes) if z3.is_expr(e.nbytes)
                                                               else n2 == e.nbytes, a2 == e.atomic)) for e in evs])
            overlap = z3.And(z3.ULT(x1, x2 + n2), z3.ULT(x2, x1 + n1))
            if key[0] == "shared":
                order = z3.And(self.same_block, p1 == p2)
            else:
                order = z3.Or(z3.Not(self.same_block), p1 == p2)
            r, _, _ = self.solve([s1, s2, overlap, order, z3.Not(self.same_thread), z3.Not(z3.And(a1, a2))])
            if r == z3.unsat:
                done.add(key)
        return done

    def race_pair(self, a, b) -> bool:
        x1, x2 = z3.BitVec("addr1", 64), z3.BitVec("addr2", 64)
        p1, p2 = z3.BitVec("phase1", 32), z3.BitVec("phase2", 32)
        na, nb = a[0].nbytes, b[0].nbytes
        ex1, ex2 = (), ()
        if z3.is_expr(na) or z3.is_expr(nb):  # sizes in registers: one term per event
            na, nb = z3.BitVec("size1", 64), z3.BitVec("size2", 64)
            ex1, ex2 = (lambda e: (na == e.nbytes,)), (lambda e: (nb == self.two(e.nbytes),))
        s1 = z3.Or(*[self.instance(e, False, x1, p1, extra=ex1(e) if ex1 else ()) for e in a])
        s2 = z3.Or(*[self.instance(e, True, x2, p2, extra=ex2(e) if ex2 else ()) for e in b])
        overlap = z3.And(z3.ULT(x1, x2 + nb), z3.ULT(x2, x1 + na))
        if a[0].space == "shared":
            order = z3.And(self.same_block, p1 == p2)
        else:
            order = z3.Or(z3.Not(self.same_block), p1 == p2)
        fs = [s1, s2, overlap, order, z3.Not(self.same_thread)]
        r, model, why = self.solve(fs)
        ea, eb = a[0], b[0]
        la, lb = ea.stmt.loc, eb.stmt.loc
        msg = (f"data race on {ea.space} {self.name(ea.base)}: {self.access_desc(ea)} at {self.where(la)} and "
               f"{self.access_desc(eb)} at {self.where(lb)} by two threads with no barrier between them")
        if r == z3.unsat:
            return False
        evs = (None, None)
        if model is not None:
            evs = (self.pick(model, a, False, x1, p1), self.pick(model, b, True, x2, p2))

        def extra(model):
            return [f"thread 1: {self.access_desc(ea)} at byte offset {self.val(model, x1)} ({self.where(la)}); "
                    f"thread 2: {self.access_desc(eb)} at byte offset {self.val(model, x2)} ({self.where(lb)}); "
                    f"barrier phase {self.val(model, p1)}"
                    + ("" if self.val(model, p1) == self.val(model, p2) else f" and {self.val(model, p2)}")]
        status = self.conclude("race", r, model, why, fs, la, msg, events=evs, extra=extra,
                               order_sensitive=True)
        if status != "proved":
            self.results[-1].detail = {"lines": sorted({self.span(la).line, self.span(lb).line})}
        if status == "violated":
            self.results[-1].hint = ("put __syncthreads() between the two accesses, make both atomic, or give each "
                                     "thread its own element")
        return status != "proved"

    def pick(self, model, evs, second, x, p):
        for e in evs:
            if z3.is_true(model.eval(self.instance(e, second, x, p), model_completion=True)):
                return e
        return evs[0]

    # ------------------------------------------------------------ barriers

    def barriers(self):
        evs = self.m.events
        for ev in evs:
            if ev.kind == "barrier" and not full_barrier(ev.stmt):
                self.results.append(ObligationResult("barrier-divergence", "unknown", self.span(ev.stmt.loc),
                                                     "named or counted barriers are not modelled"))
        bad = 0
        for ev in evs:
            if ev.kind != "branch":
                continue
            loc = ev.barrier_loc
            if loc is None:
                nxt = next((e for e in evs if e.kind == "barrier" and e.seq > ev.seq), None)
                loc = nxt.stmt.loc if nxt is not None else ev.stmt.loc
            keq = [k == self.two(k) for _, k in ev.loops if k is not None]
            fs = [ev.guard, self.two(ev.guard), ev.phase == self.two(ev.phase), self.same_block,
                  z3.Not(self.same_thread), ev.cond != self.two(ev.cond), *keq]
            r, model, why = self.solve(fs)
            msg = (f"barrier divergence: the branch at {self.where(ev.stmt.loc)} goes different ways for two threads "
                   f"of one block, and only some of them reach the barrier at {self.where(loc)}")
            # a named or counted barrier may be meant for part of the block (producer and consumer warps)
            partial_barrier = any(e.kind == "barrier" and e.stmt.loc == loc and not full_barrier(e.stmt) for e in evs)
            st = self.conclude("barrier-divergence", r, model, why, fs, loc, msg, events=(ev, ev),
                               order_sensitive=partial_barrier)
            if st == "violated":
                self.results[-1].hint = "make the condition the same for every thread of the block, or move the " \
                                        "barrier out of the branch"
            if st != "proved":
                bad += 1
        if not bad and not any(r.obligation == "barrier-divergence" for r in self.results):
            self.results.append(ObligationResult("barrier-divergence", "proved", self.span(self.m.k.loc),
                                                 "every barrier is reached by all threads of the block or none"))

    # ------------------------------------------------------------ bounds

    def bounds_batch(self, sites) -> set:
        """The arrays whose accesses are all proved inside in one query (each array with a known size):
        the common case costs one solver call per array instead of one per access site."""
        by_base: dict = {}
        for site in sites:
            ev = site[0]
            if ev.base is None:
                continue
            if ev.space == "shared":
                size = self.m.shared_sizes.get(ev.base)
                size = None if size is None else bv(size, 64)
            else:
                size = self.sizes.get(ev.base)
            if size is not None:
                by_base.setdefault((ev.space, ev.base), (size, []))[1].extend(site)
        done = set()
        for key, (size, evs) in by_base.items():
            x, nb = z3.BitVec("off", 64), z3.BitVec("nbytes", 64)
            cases = [self.instance(e, False, x, extra=(nb == e.nbytes,)) for e in evs]
            inside = z3.And(z3.ULE(x, size), z3.ULE(x + nb, size), z3.ULE(x, x + nb))
            r, _, _ = self.solve([z3.Or(*cases), z3.Not(inside)])
            if r == z3.unsat:
                done.add(key)
        return done

    def bounds(self):
        if self.blocked("bounds", None, "bounds"):
            return
        bad = 0
        all_sites = self.sites(lambda e: e.kind == "access" and (e.space in ("shared", "global") or
                                                                 (e.space == "generic" and e.base is None)))
        proved = self.bounds_batch(all_sites) if len(all_sites) > 1 else set()
        for site in all_sites:
            if (site[0].space, site[0].base) in proved:
                continue
            if self.spent():
                self.out_of_time("bounds", f"the accesses from {self.where(site[0].stmt.loc)} on")
                bad += 1
                break
            ev = site[0]
            loc = ev.stmt.loc
            if ev.base is None:
                self.results.append(ObligationResult("bounds", "unknown", self.span(loc),
                                                     f"the array addressed at {self.where(loc)} is not known"))
                bad += 1
                continue
            if ev.space == "shared":
                size = self.m.shared_sizes.get(ev.base)
                if size is None:
                    self.results.append(ObligationResult("bounds", "unknown", self.span(loc),
                                                         f"dynamic shared memory {ev.base}: its size is not known"))
                    bad += 1
                    continue
                size = bv(size, 64)
            else:
                size = self.sizes.get(ev.base)
                if size is None:
                    name = self.m.k.params and next((p.source_name or p.name for p in self.m.k.params
                                                     if p.name == ev.base), ev.base)
                    self.results.append(ObligationResult(
                        "bounds", "unknown", self.span(loc),
                        f"no size declared for {name}: add `// argus: size {name} = EXPR` (elements)"))
                    bad += 1
                    continue
            nb = ev.nbytes
            x = z3.BitVec("off", 64)
            if z3.is_expr(nb):  # a size in a register (cp.async zero-fill): one term per event
                nb = z3.BitVec("nbytes", 64)
                cases = [self.instance(e, False, x, extra=(nb == e.nbytes,)) for e in site]
            else:
                cases = [self.instance(e, False, x) for e in site]
            inside = z3.And(z3.ULE(x, size), z3.ULE(x + nb, size), z3.ULE(x, x + nb))
            fs = [z3.Or(*cases), z3.Not(inside)]
            r, model, why = self.solve(fs)
            kind = "write" if ev.write else "read"
            name = self.name(ev.base)
            msg = f"out-of-bounds {kind} of {ev.space} {name} at {self.where(loc)}"

            def extra(model, x=x, size=size, nb=nb):
                return [f"byte offset {self.val(model, x)} (+{self.val(model, nb) if z3.is_expr(nb) else nb} bytes) "
                        f"but {self.val(model, size)} bytes exist"]
            picked = self.pick(model, site, False, x, None) if model is not None else None
            st = self.conclude("bounds", r, model, why, fs, loc, msg, events=(picked,), second=False, extra=extra)
            if st != "proved":
                bad += 1
        if not bad:
            self.results.append(ObligationResult("bounds", "proved", self.span(self.m.k.loc),
                                                 "every access stays inside its array"))

    # ------------------------------------------------------------ uninitialised shared reads

    def uninit(self):
        """A shared read is initialised when some thread wrote each byte earlier: the same thread
        earlier in its program, or another thread of the block before a barrier the reader passed.
        First with candidate writers (the reader itself; the thread that an affine write puts at
        that byte), which proves the common cases without quantifiers; then the exact query with a
        quantified writer (solver time limited: unknown if it gives up)."""
        if self.blocked("uninitialised-read", None, ""):
            return
        reads = self.sites(lambda e: e.kind == "access" and e.space == "shared" and e.read and not e.write
                           and e.base is not None)
        writes = [e for e in self.m.events if e.kind == "access" and e.space == "shared" and e.write]
        bad = 0
        t2_vars = [b for a, b in self.ren if not a.decl().name().startswith("t1!ctaid")]
        same_block_sub = [(self.two(self.m.ctaid[d]), self.m.ctaid[d]) for d in "xyz"]
        tid2 = {d: self.two(self.m.tid[d]) for d in "xyz"}
        for site in reads:
            ev = site[0]
            loc = ev.stmt.loc
            x = z3.BitVec("byte", 64)
            p = z3.BitVec("phase", 32)
            sq = z3.BitVec("seq", 32)
            rd = z3.Or(*[z3.And(self.instance(e, False, x, p), sq == e.seq) for e in site])
            cover = []
            cand_cover = []
            for w in writes:
                if w.base is not None and w.base != ev.base:
                    continue
                g2 = self.two(w.guard)
                o2 = self.two(w.off)
                ph2 = self.two(w.phase)
                inside = z3.And(z3.ULE(o2, x), z3.ULT(x, o2 + w.nbytes)) if w.base is not None else z3.BoolVal(True)
                # a write by another thread in the same barrier phase may produce the value too (that
                # pair is the race obligation's business): only reads nothing could have produced fail
                ordered = z3.Or(z3.And(z3.Not(self.same_thread), z3.ULE(ph2, p)),
                                z3.And(self.same_thread, z3.ULT(bv(w.seq, 32), sq)))
                valid = z3.And(*[z3.ULT(tid2[d], self.m.ntid[d]) for d in "xyz"])
                c = z3.substitute(z3.And(g2, inside, ordered, valid), *same_block_sub)
                cover.append(c)
                own = {v.decl().name() for v in t2_vars} & free_names([c])
                if own <= {tid2[d].decl().name() for d in "xyz"}:
                    for cand in self.candidates(o2, x):
                        cand_cover.append(z3.substitute(c, *[(tid2[d], cand[d]) for d in "xyz"]))
            if cand_cover and not self.imprecise(cand_cover):
                r, _, _ = self.solve([rd, z3.Not(z3.Or(*cand_cover))])
                if r == z3.unsat:
                    continue
            covered = z3.Or(*cover) if cover else z3.BoolVal(False)
            qvars = [v for v in t2_vars if v.decl().name() in free_names([covered])]
            body = z3.Not(covered)
            fs = [rd, z3.ForAll(qvars, body) if qvars else body]
            save = self.timeout
            self.timeout = min(self.timeout, 3000)
            r, model, why = self.solve(fs)
            self.timeout = save
            msg = f"read of shared {self.name(ev.base)} at {self.where(loc)} may see memory no thread wrote before it"
            if r == z3.unsat and self.imprecise([covered]):
                self.results.append(ObligationResult(
                    "uninitialised-read", "unknown", self.span(loc),
                    f"cannot show that the read at {self.where(loc)} sees written data: the writes depend on "
                    + "; ".join(self.imprecise([covered])[:2])))
                bad += 1
                continue

            def extra(model, x=x, ev=ev):
                return [f"byte offset {self.val(model, x)} of {self.name(ev.base)}"]
            st = self.conclude("uninitialised-read", r, model, why, [rd], loc, msg, second=False, extra=extra,
                               events=(self.pick(model, site, False, x, p) if model is not None else None,),
                               order_sensitive=True)
            if st != "proved":
                bad += 1
        if not bad and self.order_blocked:
            # the writes it counts may be another thread's across a named or counted barrier, which
            # orders nothing here (the race obligation is unknown there too)
            u = self.order_blocked[0]
            self.results.append(ObligationResult("uninitialised-read", "unknown", self.span(u.loc),
                                                 f"uninitialised-read not decided: {u.reason}"))
        elif not bad:
            self.results.append(ObligationResult("uninitialised-read", "proved", self.span(self.m.k.loc),
                                                 "every shared-memory read sees data written before it"))

    def candidates(self, off2, x):
        """Thread ids (as terms in the reader's variables and the byte x) that may have written x:
        the reader itself, and the inverse of a write offset affine in threadIdx.x (and .y)."""
        tid1 = self.m.tid
        tid2 = {d: self.two(tid1[d]) for d in "xyz"}
        out = [dict(tid1)]
        zero = {d: z3.BitVecVal(0, 32) for d in "xy"}

        def slope(d):
            one, zero = z3.BitVecVal(1, 32), z3.BitVecVal(0, 32)
            others = [(tid2[o], zero) for o in "xy" if o != d]
            e = z3.simplify(z3.substitute(off2, (tid2[d], one), *others)
                            - z3.substitute(off2, (tid2[d], zero), *others))
            return e.as_long() if z3.is_bv_value(e) else None
        ax, ay = slope("x"), slope("y")
        c0 = z3.substitute(off2, (tid2["x"], zero["x"]), (tid2["y"], zero["y"]), (tid2["z"], tid1["z"]))
        rel = x - c0
        if ax and ax < 1 << 31:
            if ay and ay < 1 << 31 and ay >= ax:
                ty = fit(z3.UDiv(rel, ay), 32)
                tx = fit(z3.UDiv(z3.URem(rel, ay), ax), 32)
                out.append({"x": tx, "y": ty, "z": tid1["z"]})
            tx = fit(z3.UDiv(rel, ax), 32)
            out.append({"x": tx, "y": tid1["y"], "z": tid1["z"]})
        return out

    # ------------------------------------------------------------ cp.async

    def cp_async(self):
        cps = [e for e in self.m.events if e.kind == "access" and e.cp]
        if not cps:
            return
        if self.blocked("cp-async", None, ""):
            return
        waits = [e for e in self.m.events if e.kind == "cpwait"]
        reads = self.sites(lambda e: e.kind == "access" and e.space == "shared" and e.read and not e.cp)
        bad = 0

        def covers(w, c, second_w, second_c):
            fw = self.two if second_w else (lambda e: e)
            fc = self.two if second_c else (lambda e: e)
            if w.pending is None:
                return fw(w.guard)
            return z3.And(fw(w.guard), z3.ULT(fc(c.group), fw(w.committed) - w.pending),
                          z3.UGE(fw(w.committed), bv(w.pending, 32)))

        for site in reads:
            ev = site[0]
            loc = ev.stmt.loc
            for c in cps:
                if c.base != ev.base:
                    continue
                for r_ev in site:
                    if r_ev.seq < c.seq and not r_ev.loops:
                        continue
                    between = [w for w in waits if c.seq < w.seq < r_ev.seq]
                    overlap = z3.And(z3.ULT(r_ev.off, c.off + c.nbytes), z3.ULT(c.off, r_ev.off + r_ev.nbytes))
                    same = [r_ev.guard, c.guard, overlap, z3.Not(z3.Or(*[covers(w, c, False, False)
                                                                         for w in between]))]
                    r, model, why = self.solve(same)
                    msg = (f"shared {self.name(ev.base)} read at {self.where(loc)} before the cp.async at "
                           f"{self.where(c.stmt.loc)} that fills it was waited for (cp.async.wait_group)")
                    st = self.conclude("cp-async", r, model, why, same, loc, msg, second=False, events=(r_ev,))
                    if st == "proved":
                        c2o = self.two(c.off)
                        overlap2 = z3.And(z3.ULT(r_ev.off, c2o + c.nbytes), z3.ULT(c2o, r_ev.off + r_ev.nbytes))
                        later = [w for w in waits if w.seq > c.seq]
                        other = [r_ev.guard, self.two(c.guard), overlap2, self.same_block, z3.Not(self.same_thread),
                                 z3.ULE(self.two(c.phase), r_ev.phase),
                                 z3.Not(z3.Or(*[z3.And(covers(w, c, True, True), z3.ULT(self.two(w.phase),
                                                                                         r_ev.phase))
                                                for w in later]))]
                        r, model, why = self.solve(other)
                        st = self.conclude("cp-async", r, model, why, other, loc,
                                           msg.replace("read at", "read by another thread at"), events=(r_ev, c))
                    if st != "proved":
                        bad += 1
                        if st == "violated":
                            self.results[-1].hint = "wait for the copy's group (cp.async.wait_group / " \
                                                    "__pipeline_wait_prior) and then __syncthreads() before reading"
                        break
                else:
                    continue
                break
        if not bad:
            self.results.append(ObligationResult("cp-async", "proved", self.span(self.m.k.loc),
                                                 "every cp.async copy is waited for before its data is read"))

    # ------------------------------------------------------------ shuffles

    def shuffles(self):
        evs = [e for e in self.m.events if e.kind == "shuffle"]
        if not evs:
            return
        bad = 0
        for ev in evs:
            s = ev.stmt
            loc = s.loc
            lane1 = z3.URem(self.lin1, 32)
            warp_base = self.lin1 - lane1
            b = ev.lane & 31
            c = ev.clamp
            segmask = z3.LShR(c, 8) & 31
            max_lane = (lane1 & segmask) | ((c & 31) & ~segmask)
            min_lane = lane1 & segmask
            if s.mode == "up":
                j = lane1 - b
                pval = j >= max_lane
            elif s.mode == "down":
                j = lane1 + b
                pval = j <= max_lane
            elif s.mode == "bfly":
                j = lane1 ^ b
                pval = j <= max_lane
            else:
                j = min_lane | (b & ~segmask)
                pval = j <= max_lane
            mask = ev.mask

            def bit(m, i):
                return z3.Extract(0, 0, z3.LShR(m, i)) == 1
            keq = [k == self.two(k) for _, k in ev.loops if k is not None]
            same_warp = z3.And(self.same_block, z3.UDiv(self.lin2, 32) == z3.UDiv(self.lin1, 32))
            checks = [
                ([ev.guard, z3.Not(bit(mask, lane1))],
                 f"shfl.sync at {self.where(loc)} executed by a lane that is not in its member mask", False),
                ([ev.guard, pval, z3.Not(bit(mask, j))],
                 f"shfl.sync at {self.where(loc)} reads from a lane that is not in its member mask", False),
                ([ev.guard, pval, z3.UGE(warp_base + j, self.m.nthreads)],
                 f"shfl.sync at {self.where(loc)} reads from a lane with no thread (past the end of the block)", False),
                ([ev.guard, pval, same_warp, self.lin2 == warp_base + j, z3.Not(self.two(ev.guard)), *keq],
                 f"shfl.sync at {self.where(loc)} reads from a lane that does not execute it (inactive source lane)",
                 True),
                ([ev.guard, same_warp, bit(mask, z3.URem(self.lin2, 32)), z3.Not(self.two(ev.guard)), *keq],
                 f"shfl.sync at {self.where(loc)}: a lane named in the member mask does not execute it", True),
            ]
            for fs, msg, second in checks:
                r, model, why = self.solve(fs)

                def extra(model, j=j, mask=mask):
                    return [f"source lane {self.val(model, j)}, member mask {self.val(model, mask) & 0xffffffff:#010x}"]
                st = self.conclude("shuffle", r, model, why, fs, loc, msg, second=second, extra=extra,
                                   events=(ev, ev) if second else (ev,))
                if st != "proved":
                    bad += 1
                    if st == "violated":
                        self.results[-1].hint = "make the member mask name exactly the lanes that execute the " \
                                                "shuffle, and read only from those lanes"
                    break
        if not bad:
            self.results.append(ObligationResult("shuffle", "proved", self.span(self.m.k.loc),
                                                 "every shuffle reads from an active lane named in its mask"))


def run_checks(m: Machine, assumptions, sizes, ptx_file, timeout_ms, scalars,
               obligations=None, budget_s: float | None = None) -> list[ObligationResult]:
    """Every obligation's results. `budget_s` bounds the total solver time: once spent, each query
    left is unknown ("the audit's time budget is spent"), never proved."""
    c = Checker(m, assumptions, sizes, ptx_file, timeout_ms, scalars, budget_s)
    steps = (("barrier-divergence", c.barriers), ("bounds", c.bounds), ("race", c.races),
             ("uninitialised-read", c.uninit), ("cp-async", c.cp_async), ("shuffle", c.shuffles))
    if c.solve([])[0] == z3.unsat:  # every obligation would hold vacuously
        where = c.span(m.k.loc)
        why = ("no launch is admissible: the `// argus: requires` and `size` comments and the launch sizes "
               "contradict each other")
        out = [ObligationResult("launch", "violated", where, why, witness={"line": where.line},
                                hint="every other obligation would hold vacuously; correct the requires (or the "
                                     "launch sizes)")]
        return out + [ObligationResult(name, "unknown", where, f"{name} not decided: {why}")
                      for name in (obligations if obligations is not None else [n for n, _ in steps])]
    for name, fn in steps:
        if obligations is not None and name not in obligations:
            continue
        t0 = time.perf_counter()
        if budget_s is not None:  # each obligation gets its share of the budget
            c.deadline = t0 + budget_s / (len(obligations) if obligations is not None else 6)
        n0 = len(c.results)
        fn()
        for r in c.results[n0:]:
            r.seconds = time.perf_counter() - t0
    return c.results


__all__ = ["run_checks", "fit"]

