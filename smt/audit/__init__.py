"""Obligations on audited kernels (hand-written CUDA or PTX lifted to argus_verify.thread_ir):
data races, barrier divergence, bounds, uninitialised shared reads, cp.async waits, shuffles."""

from __future__ import annotations

import time

import z3

from argus_verify import thread_ir as T
from argus_verify.diagnostics import Span
from argus_verify.smt.audit.checks import run_checks
from argus_verify.smt.audit.spec import Directive, Spec, to_z3
from argus_verify.smt.audit.symbolic import Launch, Machine, fit
from argus_verify.smt.report import ObligationResult, VerifyReport

ALL = ("race", "barrier-divergence", "bounds", "uninitialised-read", "shuffle", "cp-async")

__all__ = ["Directive", "Launch", "Spec", "audit_kernel"]


def audit_kernel(kernel: T.Kernel, launch: Launch, spec: Spec, ptx_file: str, shown_file: str,
                 lift_problems: list, timeout_s: float = 10.0, constraints=None,
                 obligations: tuple = ALL, budget_s: float | None = None) -> VerifyReport:
    """Check `obligations` of one lifted kernel. `constraints`, if given, is a function of the name
    environment (PTX parameter names and `block_dim_x`... as BV64 terms) giving more assumptions and
    array extents in bytes (`argus compile --validate` carries a kernel's launch over this way).
    `budget_s` bounds the solver time of the checks (what is left undecided is unknown)."""
    t0 = time.perf_counter()
    report = VerifyReport(kernel=kernel.name, file=shown_file)
    loc = Span(ptx_file, kernel.loc.ptx_line, 1)
    if lift_problems:
        u = lift_problems[0]
        for ob in obligations:
            report.results.append(ObligationResult(ob, "unknown", loc, f"{ob} not decided: {u.reason}"))
        report.seconds = time.perf_counter() - t0
        return report
    m = Machine(kernel, launch, int(timeout_s * 1000))
    m.run()
    env, scalars = _names(kernel, m)
    assumptions, sizes = [], {}
    for d in spec.directives:
        if d.kind == "requires":
            e = to_z3(d.text, env, d.span)
            assumptions.append(e if z3.is_bool(e) else e != 0)
        elif d.kind == "size":
            pname = spec.names.get(d.name, d.name)
            if pname not in m.params:
                from argus_verify.diagnostics import ArgusSyntaxError
                raise ArgusSyntaxError(f"size for '{d.name}', which is not a parameter of {kernel.name}", d.span)
            fits = []
            e = to_z3(d.text, env, d.span, fits)
            elem = spec.elem_bytes.get(pname, 1)
            assumptions += [e >= 0, *fits]
            # an array of that many elements fits the 64-bit address space (its bytes do not wrap)
            assumptions.append(z3.BVMulNoOverflow(e, z3.BitVecVal(elem, e.size()), False))
            sizes[pname] = e * elem
        elif d.kind == "align":
            pname = spec.names.get(d.name, d.name)
            if pname in m.params:
                a = int(d.text, 0)
                assumptions.append(z3.URem(fit(m.params[pname], 64), a) == 0)
    if constraints is not None:
        more, extents = constraints(env)
        assumptions.extend(more)
        sizes.update(extents)
    for pname in sizes:
        if not any(d.kind == "align" and spec.names.get(d.name, d.name) == pname for d in spec.directives):
            assumptions.append(z3.URem(fit(m.params[pname], 64), 256) == 0)
    report.results.extend(run_checks(m, assumptions, sizes, ptx_file, int(timeout_s * 1000), scalars,
                                      obligations, budget_s))
    report.seconds = time.perf_counter() - t0
    return report


def _names(kernel: T.Kernel, m: Machine):
    env, scalars = {}, {}
    for d in "xyz":
        env[f"block_dim_{d}"] = fit(m.ntid[d], 64)
        env[f"grid_dim_{d}"] = fit(m.nctaid[d], 64)
    for p in kernel.params:
        v = m.params[p.name]
        e = fit(v, 64, signed=p.ptx_type.startswith("s"))
        env[p.name] = e
        short = p.name.rsplit("_param_", 1)
        if len(short) == 2:
            env[f"param_{short[1]}"] = e
        if p.source_name:
            env[p.source_name] = e
        if not p.pointee_bytes and p.ptx_type not in ("u64", "b64", "s64") or p.source_name and not p.pointee_bytes:
            scalars[p.source_name or p.name] = e
    return env, scalars
