"""`argus compile --validate`: the audit of Argus's own PTX agrees with the source proof.

Every spec is validated (its PTX audited with the kernel's launch, sizes and preconditions carried
over); a disagreement would be a bug in Argus. A planted defect (a `bar.sync` deleted from Argus's
output) must be reported as an internal error with both witnesses.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import attrs
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_file
from argus_verify.lowering.ptx import lower
from argus_verify.validate import COMPARED, MAX_SIZE, SOURCE_SIDE, validate

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.arg"))
TIMEOUT = 1.0  # per solver query; a PTX query that needs more is unknown (reported, never an error)
BUDGET = 3.0  # solver seconds per spec (validate splits it between the three obligations)
SOURCE_CHECKS = tuple(sorted({ob for obs in SOURCE_SIDE.values() for ob in obs}))


@functools.cache
def _source(path: Path):
    k = compile_file(str(path))
    return k, smt.verify(k, timeout_s=10.0, checks=SOURCE_CHECKS), lower(k)


def test_size_range_is_the_verifiers():
    from argus_verify.smt import zops

    assert MAX_SIZE == zops.MAX_SIZE


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_validate_every_spec(path):
    k, rep, lowered = _source(path)
    v = validate(k, rep, lowered, timeout_s=TIMEOUT, budget_s=BUDGET)
    assert not v.disagreements(), v.render_text()
    js = json.loads(json.dumps(v.to_json()))
    assert js["kernel"] == k.name and js["disagreements"] == []
    # every compared obligation ends in exactly one of: agreement, unknown (with its reason), or
    # not compared because the source did not prove it
    for ob in COMPARED:
        kinds = {f.kind for f in v.findings if f.obligation == ob}
        assert kinds, ob
        assert kinds <= {"agree", "unknown", "source-not-proved"}
        assert not ("agree" in kinds and "unknown" in kinds), (ob, kinds)
    for f in v.unknowns():
        assert f.text.strip(), f


def _planted(path: Path):
    """Argus's PTX for `path` with its first `bar.sync` deleted."""
    k, rep, lowered = _source(path)
    lines = lowered.ptx.splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith("bar.sync"))
    return k, rep, lowered, "\n".join(lines[:i] + lines[i + 1:]) + "\n"


def test_planted_missing_barrier_is_a_disagreement_with_both_witnesses():
    k, rep, lowered, ptx = _planted(ROOT / "specs" / "guarded_stage.arg")
    clean = validate(k, rep, lowered, timeout_s=TIMEOUT, budget_s=BUDGET)
    assert "race" in {f.obligation for f in clean.findings if f.kind == "agree"}, clean.render_text()
    v = validate(k, rep, lowered, ptx=ptx, timeout_s=TIMEOUT, budget_s=BUDGET)
    dis = v.disagreements()
    assert [f.obligation for f in dis] == ["race"] * len(dis) and dis, v.render_text()
    f = dis[0]
    # the PTX witness: two threads of one block, their accesses and PTX lines mapped to the source
    assert f.ptx.status == "violated" and len(f.ptx.witness["threads"]) == 2
    assert "PTX witness: block" in f.text and "guarded_stage.arg:" in f.text
    # the source side: the source proof's own race result, proved, at its line
    assert f.source and all(r.status == "proved" for r in f.source)
    assert "Source: " in f.text and "proved" in f.text.split("Source: ", 1)[1]
    js = f.to_json()
    assert js["ptx"]["status"] == "violated" and js["source"][0]["status"] == "proved"


def test_cli_validate_ok(tmp_path, capsys):
    from argus_verify.cli import main

    out = tmp_path / "g.ptx"
    code = main(["compile", str(ROOT / "specs" / "guarded_stage.arg"), "-o", str(out), "--validate", "--json",
                 "--timeout", str(TIMEOUT)])
    js = json.loads(capsys.readouterr().out)
    assert code == 0, js
    assert js["validation"]["disagreements"] == [] and "race" in js["validation"]["agree"]


def test_cli_validate_disagreement_is_an_internal_error(tmp_path, capsys, monkeypatch):
    from argus_verify import cli
    from argus_verify.lowering import ptx as lowering_ptx

    path = ROOT / "specs" / "guarded_stage.arg"
    _, _, lowered, ptx = _planted(path)
    monkeypatch.setattr(lowering_ptx, "lower", lambda k, **kw: attrs.evolve(lowered, ptx=ptx))
    code = cli.main(["compile", str(path), "-o", str(tmp_path / "g.ptx"), "--validate", "--json",
                     "--timeout", str(TIMEOUT)])
    js = json.loads(capsys.readouterr().out)
    assert code == 4, js
    assert js["status"] == "error" and js["kind"] == "internal"
    d = js["validation"]["disagreements"][0]
    assert d["obligation"] == "race" and d["ptx"]["status"] == "violated" and d["source"][0]["status"] == "proved"
    # and in text: both witnesses on stderr, exit 4
    code = cli.main(["compile", str(path), "-o", str(tmp_path / "g.ptx"), "--validate", "--timeout", str(TIMEOUT)])
    err = capsys.readouterr().err
    assert code == 4 and "DISAGREEMENT [race]" in err and "PTX witness" in err and "Source:" in err


def test_validate_with_no_verify_is_a_usage_error(capsys):
    from argus_verify.cli import main

    code = main(["compile", str(ROOT / "specs" / "vecadd.arg"), "--validate", "--no-verify", "--json"])
    assert code == 2
    assert "--no-verify" in json.loads(capsys.readouterr().out)["message"]
