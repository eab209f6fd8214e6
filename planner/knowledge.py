"""The knowledge base: optimisation techniques as data (planner/kb/*.toml, read with tomllib).

Each entry has a name, a tier (global restructuring, local patch, or ISA-specific), when it
applies, an Argus sketch, the invariants and tag assertions it must keep, the counterexamples its
usual mistakes produce, and (for the parametric ones) a knob: the template family it applies to,
the knob's name and its values, which the offline policy's bandit chooses among.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs

__all__ = ["Technique", "load_kb", "KB_DIR", "TIERS", "knobs_for", "render_entry"]

KB_DIR = Path(__file__).with_name("kb")
TIERS = ("global", "local", "isa")
REQUIRED = ("name", "title", "tier", "applies_when", "sketch", "invariants", "tag_assertions", "counterexamples")


@attrs.define
class Technique:
    name: str
    title: str
    tier: str
    applies_when: str
    sketch: str
    invariants: list
    tag_assertions: list
    counterexamples: list
    knob: dict | list = attrs.field(factory=dict)  # one knob, or several (a TOML array of tables)
    status: str = ""


def load_kb(folder: str | Path = KB_DIR) -> dict[str, Technique]:
    """Every technique of the knowledge base by name; a malformed entry is an error naming its file."""
    out: dict[str, Technique] = {}
    for path in sorted(Path(folder).glob("*.toml")):
        with path.open("rb") as fh:
            data = tomllib.load(fh)
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise ValueError(f"{path}: knowledge-base entry lacks {', '.join(missing)}")
        if data["tier"] not in TIERS:
            raise ValueError(f"{path}: tier must be one of {TIERS}, got {data['tier']!r}")
        unknown = set(data) - set(REQUIRED) - {"knob", "status"}
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        out[data["name"]] = Technique(**data)
    return out


def knobs_for(family: str, kb: dict[str, Technique] | None = None) -> dict[str, tuple[str, list]]:
    """knob name -> (technique name, values) for the knobs of `family` ("all" applies everywhere)."""
    kb = load_kb() if kb is None else kb
    out = {}
    for t in kb.values():
        for knob in (t.knob if isinstance(t.knob, list) else [t.knob] if t.knob else []):
            fams = knob.get("family")
            fams = [fams] if isinstance(fams, str) else (fams or [])
            if family in fams or "all" in fams:
                _merge(out, t.name, knob)
    return out


def _merge(out: dict, tech_name: str, knob: dict) -> None:
    name = knob["name"]
    if name in out:  # two techniques turning one knob (pipelining and async copy): merge the values
        tech, vals = out[name]
        out[name] = (f"{tech}+{tech_name}", vals + [v for v in knob["values"] if v not in vals])
    else:
        out[name] = (tech_name, list(knob["values"]))


def render_entry(t: Technique, sketch: bool = True) -> str:
    """One technique as prompt text."""
    lines = [f"### {t.title} ({t.name}, tier: {t.tier})", f"When: {' '.join(t.applies_when.split())}"]
    if t.status:
        lines.append(f"Status: {t.status}")
    if sketch:
        lines += ["Sketch:", "```argus", t.sketch.strip("\n"), "```"]
    lines.append("Must keep: " + "; ".join(t.invariants))
    if t.tag_assertions:
        lines.append("Tag assertions: " + "; ".join(t.tag_assertions))
    lines.append("Usual mistakes -> counterexamples: " + " | ".join(t.counterexamples))
    return "\n".join(lines)
