"""Translation validation: `argus compile --validate`.

Audits the PTX that Argus emitted for a kernel (`argus audit`'s front end and obligations, with the
kernel's launch configuration, sizes and preconditions carried over) and checks that it agrees with
the source-level proof on the obligations both levels state: data races, out-of-bounds accesses and
barrier divergence. An obligation the source proof proved that the PTX audit finds violated is a
disagreement, a bug in Argus (the lowering, the verifier or the audit); an obligation the PTX audit
cannot decide is reported with the construct that stopped it, and is not an error.

A driver module (like cli.py and pipeline.py): it sits above the stages and imports the lowering,
the verifier and the PTX front end.
"""

from __future__ import annotations

import re
import time

import attrs
import z3

from argus_verify import ir
from argus_verify.diagnostics import SOURCES

COMPARED = ("race", "bounds", "barrier-divergence")
# the source obligations that imply each PTX one: races on shared memory are `race`; on global memory
# only outputs are written, each element by one thread (`output-once`). An obligation with no source
# result holds by construction of the language (no barrier in the kernel, no shared array): a PTX
# violation of it is a disagreement all the same.
SOURCE_SIDE = {"race": ("race", "output-once"), "bounds": ("bounds",), "barrier-divergence": ("barrier-divergence",)}
MAX_SIZE = 1 << 20  # the source verifier's size range (smt.zops.MAX_SIZE); checked in the tests
GRID_MAX = ir.GRID_MAX
# Argus's PTX indexes tensors with 32-bit integers (docs/lowering.md, "Not lowered yet"): a tensor has
# fewer than 2**31 elements. The source proof does not need this; the PTX does, so it is assumed here.
ELEMENTS_LIMIT = 1 << 31
BUDGET_S = 60.0  # solver seconds per kernel for the PTX audit; what is left undecided is reported unknown


# ------------------------------------------------------------------ sizes and preconditions


class _BV64:
    """Integer expressions of the kernel (sizes, scalars, grid, requires) as 64-bit Z3 terms, with the
    source semantics (floor division and modulo, ceiling division, comparisons giving 0/1)."""

    def __init__(self, env: dict):
        self.env = env  # IVar name -> BV64 term

    def __call__(self, e):
        if isinstance(e, ir.IConst):
            return z3.BitVecVal(e.value, 64)
        if isinstance(e, ir.IVar):
            if e.name not in self.env:
                raise KeyError(e.name)
            return self.env[e.name]
        if isinstance(e, ir.IUn):
            a = self(e.a)
            return -a if e.op == "-" else z3.If(a == 0, _one(), _zero())
        if isinstance(e, ir.ISelect):
            return z3.If(self(e.cond) != 0, self(e.a), self(e.b))
        if isinstance(e, ir.IBin):
            a, b = self(e.a), self(e.b)
            return _BINOPS[e.op](a, b)
        raise KeyError(type(e).__name__)


def _one():
    return z3.BitVecVal(1, 64)


def _zero():
    return z3.BitVecVal(0, 64)


def _b(c):
    return z3.If(c, _one(), _zero())


def _floordiv(a, b):
    if z3.is_bv_value(b) and b.as_long() > 0 and b.as_long() & (b.as_long() - 1) == 0:
        return a >> (b.as_long().bit_length() - 1)  # arithmetic shift: floor division by 2**k
    q = a / b  # signed, truncating
    r = a - q * b
    return z3.If(z3.And(r != 0, (r < 0) != (b < 0)), q - 1, q)


_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": _floordiv, "%": lambda a, b: a - _floordiv(a, b) * b, "cdiv": lambda a, b: -_floordiv(-a, b),
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "min": lambda a, b: z3.If(a <= b, a, b), "max": lambda a, b: z3.If(a >= b, a, b),
    "==": lambda a, b: _b(a == b), "!=": lambda a, b: _b(a != b), "<": lambda a, b: _b(a < b),
    "<=": lambda a, b: _b(a <= b), ">": lambda a, b: _b(a > b), ">=": lambda a, b: _b(a >= b),
    "and": lambda a, b: _b(z3.And(a != 0, b != 0)), "or": lambda a, b: _b(z3.Or(a != 0, b != 0)),
}


def launch_constraints(kernel: ir.Kernel, lowered, shapes: dict | None = None):
    """The source verifier's admissible launches as constraints over the audit's names (the PTX
    parameters and launch sizes): each size in 1..MAX_SIZE (or the given shape), 32-bit scalars,
    every `requires`, the grid the kernel computes from its sizes, and each tensor's extent in bytes;
    plus the lowering's own precondition, fewer than 2**31 elements per tensor.
    Returns a function of the audit's name environment, as `audit_kernel(constraints=...)` takes."""
    pnames = {p.name: f"{lowered.entry}_param_{_ident(p.name)}" for p in lowered.params}

    def build(env: dict):
        names = {n: env[pnames[n]] for n in pnames}
        sizes_env = {}
        cons = []
        for s in kernel.sizes:
            v = names[s]
            sizes_env[s] = v
            cons += [v >= 1, v <= MAX_SIZE]
            if shapes and s in shapes:
                cons.append(v == int(shapes[s]))
        for p in kernel.params:
            if isinstance(p, ir.ScalarParam):
                v = names[p.name]
                sizes_env[p.name] = v
                cons += [v >= -(1 << 31), v < (1 << 31)]
        for c in kernel.consts:
            sizes_env.setdefault(c[0], z3.BitVecVal(int(c[1]), 64))
        ev = _BV64(sizes_env)
        for r in kernel.requires:
            cons.append(ev(r) != 0)
        for d, g in zip("xyz", kernel.grid, strict=True):
            gv = ev(g)
            cons += [gv >= 1, env[f"grid_dim_{d}"] == gv]
        extents = {}
        for t in kernel.tensors:
            n = _one()
            for dim in t.shape:
                n = n * ev(dim)
            extents[pnames[t.name]] = n * ir.DTYPE_BYTES[t.dtype]
            cons.append(n < ELEMENTS_LIMIT)  # the lowering's precondition: 32-bit element indices
        return cons, extents

    return build


def _ident(name: str) -> str:
    from argus_verify.lowering.values import ident

    return ident(name)


# ------------------------------------------------------------------ the PTX audit


def ptx_source_lines(ptx: str) -> dict[int, tuple[str, int]]:
    """PTX line -> (source file, line) from the `// FILE:LINE  statement` comments Argus emits."""
    out, cur = {}, None
    for i, line in enumerate(ptx.splitlines(), 1):
        m = re.match(r"\s*//\s*(\S+?):(\d+)\s", line)
        if m:
            cur = (m.group(1), int(m.group(2)))
        elif cur is not None:
            out[i] = cur
    return out


def audit_ptx(kernel: ir.Kernel, ptx: str, lowered, ptx_name: str, timeout_s: float = 10.0,
              shapes: dict | None = None, budget_s: float | None = BUDGET_S):
    """The audit's report on Argus's PTX for `kernel` (block size exact, grid and sizes as the
    source verifier admits them)."""
    from argus_verify.frontend.ptx import lift_module, parse_ptx
    from argus_verify.smt.audit import Launch, Spec, audit_kernel

    SOURCES.add(ptx_name, ptx)
    module = parse_ptx(ptx, ptx_name)
    lifted = [(k, u) for k, u in lift_module(module, ptx_name, None) if k.name == lowered.entry]
    if not lifted:
        raise ValueError(f"no entry {lowered.entry} in the PTX")
    k, problems = lifted[0]
    launch = Launch((kernel.block, 1, 1), tuple((1, g) for g in GRID_MAX))
    return audit_kernel(k, launch, Spec(), ptx_name, ptx_name, problems, timeout_s,
                        constraints=launch_constraints(kernel, lowered, shapes), obligations=COMPARED,
                        budget_s=budget_s)


# ------------------------------------------------------------------ the comparison


@attrs.define
class Finding:
    obligation: str
    kind: str  # "agree" | "disagree" | "unknown" | "source-not-proved"
    text: str
    source: object = None  # the source-level ObligationResult(s)
    ptx: object = None  # the PTX-level ObligationResult

    def to_json(self) -> dict:
        out = {"obligation": self.obligation, "kind": self.kind, "message": self.text}
        if self.source is not None:
            out["source"] = [r.to_json() for r in self.source]
        if self.ptx is not None:
            out["ptx"] = self.ptx.to_json()
        return out


@attrs.define
class Validation:
    kernel: str
    entry: str
    findings: list = attrs.field(factory=list)
    seconds: float = 0.0
    ptx_report: object = None

    def disagreements(self) -> list:
        return [f for f in self.findings if f.kind == "disagree"]

    def unknowns(self) -> list:
        return [f for f in self.findings if f.kind == "unknown"]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "entry": self.entry, "seconds": round(self.seconds, 3),
                "agree": sorted({f.obligation for f in self.findings if f.kind == "agree"}),
                "disagreements": [f.to_json() for f in self.disagreements()],
                "unknown": [f.to_json() for f in self.unknowns()],
                "not_compared": [f.to_json() for f in self.findings if f.kind == "source-not-proved"]}

    def render_text(self) -> str:
        lines = []
        agree = sorted({f.obligation for f in self.findings if f.kind == "agree"})
        dis = self.disagreements()
        unk = self.unknowns()
        head = (f"argus: validated the PTX of {self.kernel} (entry {self.entry}) against the source proof in "
                f"{self.seconds:.1f} s: ")
        head += f"{len(dis)} disagreement(s), " if dis else "no disagreement, "
        head += f"agrees on {', '.join(agree) or 'nothing'}"
        head += f", {len(unk)} obligation(s) unknown at the PTX level" if unk else ""
        lines.append(head)
        for f in dis:
            lines.append(f"  DISAGREEMENT [{f.obligation}]: {f.text}")
        for f in unk:
            lines.append(f"  unknown at the PTX level [{f.obligation}]: {f.text}")
        for f in self.findings:
            if f.kind == "source-not-proved":
                lines.append(f"  not compared [{f.obligation}]: {f.text}")
        return "\n".join(lines)


def _ptx_where(r, lines: dict) -> str:
    loc = r.location
    if loc is None:
        return ""
    src = lines.get(loc.line)
    return f"PTX line {loc.line}" + (f" (from {src[0]}:{src[1]})" if src else "")


def _source_side(results, ob) -> str:
    if not results:
        return f"no {ob} obligation at the source level (it holds by construction there)"
    parts = []
    for r in results:
        loc = r.location
        parts.append(f"{loc.file}:{loc.line}: {r.status}: {r.message}" if loc is not None else r.message)
    return "; ".join(parts)


def compare(source_report, ptx_report, ptx: str) -> list[Finding]:
    """The findings of one kernel: per compared obligation, agreement, disagreement (the source
    proved it and the PTX audit found it violated: both witnesses), or unknown (with the reason)."""
    from argus_verify.smt.report import format_witness

    lines = ptx_source_lines(ptx)
    out: list[Finding] = []
    for ob in COMPARED:
        src = [r for r in source_report.results if r.obligation in SOURCE_SIDE[ob]]
        ptx_rs = [r for r in ptx_report.results if r.obligation == ob]
        bad = [r for r in src if r.status != "proved"]
        if bad:
            why = ", ".join(sorted({r.status for r in bad}))
            out.append(Finding(ob, "source-not-proved", f"the source proof did not prove {ob} ({why})", src))
            continue
        violated = [r for r in ptx_rs if r.status == "violated"]
        unknown = [r for r in ptx_rs if r.status == "unknown"]
        for r in violated:
            w = format_witness(r.witness) if r.witness else "(no witness)"
            extra = ("; " + "; ".join(r.explanation)) if r.explanation else ""
            text = (f"the source proof proved {ob}, but the PTX audit finds it violated at {_ptx_where(r, lines)}: "
                    f"{r.message}. PTX witness: {w}{extra}. Source: {_source_side(src, ob)}")
            out.append(Finding(ob, "disagree", text, src, r))
        seen = set()
        for r in unknown:
            key = r.message
            if key in seen:
                continue
            seen.add(key)
            out.append(Finding(ob, "unknown", f"{_ptx_where(r, lines)}: {r.message}", None, r))
        if not violated and not unknown and any(r.status == "proved" for r in ptx_rs):
            out.append(Finding(ob, "agree", f"{ob}: proved at the source level and in the PTX"))
        elif not violated and not unknown:
            out.append(Finding(ob, "unknown", f"the PTX audit gave no result for {ob}", None, None))
    return out


def validate(kernel: ir.Kernel, source_report, lowered=None, *, ptx: str | None = None, timeout_s: float = 10.0,
             shapes: dict | None = None, ptx_name: str | None = None, budget_s: float | None = BUDGET_S) -> Validation:
    """Audit the PTX of `kernel` (Argus's own lowering, or the `ptx` text given: a test plants a
    defect there) and compare it with `source_report`, the source-level proof."""
    t0 = time.perf_counter()
    if lowered is None:
        from argus_verify.lowering.ptx import lower

        lowered = lower(kernel)
    text = lowered.ptx if ptx is None else ptx
    name = ptx_name or f"{kernel.source_file}.ptx"
    rep = audit_ptx(kernel, text, lowered, name, timeout_s, shapes, budget_s)
    v = Validation(kernel.name, lowered.entry, compare(source_report, rep, text), ptx_report=rep)
    v.seconds = time.perf_counter() - t0
    return v
