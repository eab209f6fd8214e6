"""Verification results: one `ObligationResult` per obligation, a `VerifyReport` per kernel.

Text output follows the design's counterexample format (source line with a caret, witness, data
path, hint); JSON output is one object per obligation.
"""

from __future__ import annotations

import attrs

from argus_verify.diagnostics import SOURCES, Span, render_source

OBLIGATIONS = (
    "launch",
    "tag-assertion",
    "output-contract",
    "output-once",
    "reduction-coverage",
    "reduction-operator",
    "padding",
    "bounds",
    "race",
    "barrier-divergence",
    "uninitialised-read",
    "shuffle",  # argus audit: a shfl.sync reading an inactive lane or one outside its member mask
    "cp-async",  # argus audit: cp.async data read before its group was waited for
    "bank-conflict",
    "uncoalesced",
    # Hopper protocols (smt/protocol.py), for kernels with mbarriers, TMA or wgmma
    "mbarrier-tx",
    "mbarrier-phase",
    "stage-reuse",
    "wgmma-accumulator",
    "async-proxy-fence",
    "descriptor-layout",
    "tma-box",
    "bulk-group",
    # thread-block clusters (smt/protocol_cluster.py)
    "cluster-sync",
    "multicast-mask",
)
WARNINGS = ("bank-conflict", "uncoalesced")
AUDIT_ONLY = ("shuffle", "cp-async")  # raised by `argus audit` on PTX; .arg kernels get them by construction
# vacuous: the obligation holds only because no admissible launch exists (smt/vacuity.py); never a proof
STATUSES = ("proved", "violated", "unknown", "warning", "vacuous")


def _own_vacuity(r) -> bool:
    """A result vacuous for a reason of its own (an assertion over tags that are never present),
    rendered at its line; the launch's vacuity is one line for every obligation it empties."""
    return r.status == "vacuous" and "components" in r.detail


@attrs.define
class ObligationResult:
    obligation: str  # one of OBLIGATIONS
    status: str  # proved | violated | unknown | warning | vacuous
    location: Span
    message: str = ""  # one line: what was checked / what failed
    witness: dict = attrs.field(factory=dict)
    detail: dict = attrs.field(factory=dict)
    path: list = attrs.field(factory=list)  # [{"op", "line", "col", "from", "to"}]
    hint: str = ""
    explanation: list = attrs.field(factory=list)  # extra text lines under the witness
    seconds: float = 0.0

    def __attrs_post_init__(self):
        assert self.obligation in OBLIGATIONS, self.obligation
        assert self.status in STATUSES, self.status

    def location_json(self) -> dict:
        loc = self.location.to_json() if self.location is not None else {"file": "", "line": 0, "col": 0}
        src = SOURCES.line(self.location.file, self.location.line) if self.location is not None else None
        loc["source"] = src.strip() if src is not None else ""
        return loc

    def to_json(self) -> dict:
        out = {
            "obligation": self.obligation,
            "status": self.status,
            "location": self.location_json(),
            "message": self.message,
        }
        if self.witness:
            out["witness"] = self.witness
        if self.detail:
            out["detail"] = self.detail
        if self.path:
            out["path"] = [
                {k: v for k, v in p.items() if k in ("op", "line", "col", "from", "to")} for p in self.path
            ]
        if self.hint:
            out["hint"] = self.hint
        return out

    def render(self) -> str:
        sev = {"violated": "error", "warning": "warning", "unknown": "unknown", "proved": "note",
               "vacuous": "vacuous"}[self.status]
        loc = self.location
        head = f"{loc}: {sev}: {self.message}" if loc is not None else f"{sev}: {self.message}"
        lines = [head + f" [{self.obligation}]"]
        if loc is not None:
            src = render_source(loc)
            if src:
                lines.append(src)
        shown = format_witness(self.witness) if self.witness else ""
        if shown:  # (a witness of keys the text does not show, e.g. only a line, prints no empty line)
            lines.append("  witness: " + shown)
        for e in self.explanation:
            lines.append("    " + e)
        if self.path:
            lines.append("  path: " + format_path(self.path))
        if self.hint:
            lines.append("  hint: " + self.hint)
        return "\n".join(lines)


def format_sizes(sizes: dict) -> str:
    if not sizes:
        return ""
    groups: dict = {}
    for k, v in sizes.items():
        groups.setdefault(v, []).append(k)
    parts = [" = ".join(names) + f" = {v}" for v, names in groups.items()]
    return ", ".join(parts)


def format_thread(t) -> str:
    return f"thread {t} (warp {t // 32}, lane {t % 32})"


def format_witness(w: dict) -> str:
    parts = []
    def block(b):
        shown = b[:2] if len(b) == 3 and b[2] == 0 else b
        return "(" + ", ".join(str(x) for x in shown) + ")"

    if "blocks" in w:  # two blocks (a race in global memory)
        parts.append("blocks " + " and ".join(block(b) for b in w["blocks"]))
    elif "block" in w:
        parts.append("block " + block(w["block"]))
    if "warp" in w and "thread" not in w and "lanes" not in w and "threads" not in w:
        parts.append(f"warp {w['warp']}")
    if "value" in w and "thread" not in w and "padded" not in w and "what" not in w:
        parts.append(f"value {w['value']}")
    if "padded" in w:
        parts.append(w["padded"])
    if "what" in w:  # a finding's own words (reduction-operator)
        parts.append(w["what"])
    if "thread" in w:
        parts.append(format_thread(w["thread"]))
    if "lanes" in w:
        parts.append(f"warp {w.get('warp', 0)}, lanes {w['lanes'][0]} and {w['lanes'][1]}")
    elif "threads" in w:
        parts.append("threads " + " and ".join(f"{t} (warp {t // 32}, lane {t % 32})" for t in w["threads"]))
    if "grid" in w:
        parts.append("grid (" + ", ".join(str(x) for x in w["grid"]) + ")")
    if "requires" in w:
        parts.append("requires at lines " + ", ".join(str(r["line"]) for r in w["requires"]))
    loop = w.get("loop") or {}
    for k, v in loop.items():
        parts.append(f"{k} = {v}")
    for k, v in (w.get("loops") or {}).items():
        if v:
            parts.append(f"{k}: " + ", ".join(f"{a} = {b}" for a, b in v.items()))
    s = format_sizes(w.get("sizes") or {})
    if s:
        parts.append(s)
    s = format_sizes(w.get("scalars") or {})
    if s:
        parts.append(s)
    return ", ".join(parts)


def format_path(path: list) -> str:
    if not path:
        return ""
    out = path[0].get("from", "")
    for p in path:
        op = p.get("op")
        if op:
            out += f" -{op} {p.get('line', 0)}:{p.get('col', 0)}-> " + p.get("to", "")
        elif not out:
            out = p.get("to", "")
    return out


@attrs.define
class VerifyReport:
    kernel: str
    file: str
    results: list = attrs.field(factory=list)
    shapes: dict | None = None
    seconds: float = 0.0
    notes: list = attrs.field(factory=list)

    @property
    def exit_code(self) -> int:
        if any(r.status in ("violated", "vacuous") for r in self.results):
            return 1
        if any(r.status == "unknown" for r in self.results):
            return 3
        return 0

    def violations(self) -> list:
        return [r for r in self.results if r.status == "violated"]

    def warnings(self) -> list:
        return [r for r in self.results if r.status == "warning"]

    def unknowns(self) -> list:
        return [r for r in self.results if r.status == "unknown"]

    def vacuous(self) -> list:
        return [r for r in self.results if r.status == "vacuous"]

    def vacuous_groups(self) -> dict:
        """reason -> the obligations vacuous for it (they share the launch's reason: one line each)."""
        out: dict = {}
        for r in self.vacuous():
            if _own_vacuity(r):
                continue
            names = out.setdefault(r.message, [])
            if r.obligation not in names:
                names.append(r.obligation)
        return out

    def to_json(self) -> list:
        return [r.to_json() for r in self.results]

    def counts(self) -> dict:
        out = {s: 0 for s in STATUSES}
        for r in self.results:
            out[r.status] += 1
        return out

    def render_text(self, verbose: bool = False) -> str:
        blocks = []
        order = {"violated": 0, "unknown": 1, "warning": 2, "proved": 3, "vacuous": 4}
        for r in sorted(self.results, key=lambda r: (order[r.status], r.location.line if r.location else 0)):
            if r.status == "proved" and not verbose:
                continue
            if r.status == "proved":
                blocks.append(f"{r.location}: proved: {r.message} [{r.obligation}]")
            elif r.status != "vacuous" or _own_vacuity(r):
                blocks.append(r.render())
        for message, names in self.vacuous_groups().items():
            blocks.append(f"{self.file}: vacuous: {message} [{', '.join(names)}]")
        c = self.counts()
        scope = ""
        if self.shapes:
            scope = " for " + ", ".join(f"{k}={v}" for k, v in self.shapes.items()) + " only"
        bounded = sum(1 for r in self.results if r.status == "proved" and r.detail.get("bounded"))
        summary = (
            f"{self.file}: kernel {self.kernel}: {len(self.results)} obligations: {c['proved']} proved"
            + (f" ({bounded} of them by bounded runs of the loops)" if bounded else "")
            + f"{scope}, {c['violated']} violated, {c['unknown']} unknown, {c['warning']} warnings"
            + (f", {c['vacuous']} vacuous" if c["vacuous"] else "")
            + f" ({self.seconds:.2f} s)"
        )
        blocks.append(summary)
        return "\n\n".join(blocks) if len(blocks) > 1 else summary
