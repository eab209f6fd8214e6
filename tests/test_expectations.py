"""Every buggy spec is reported at the obligation and line its header names, and every spec is
fully proved.

The verdicts come from the golden reports (tests/golden/verify/*.json), which tests/test_golden.py
keeps equal to what `argus verify` prints today; this test only reads them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "verify"
BUGGY = sorted((ROOT / "specs" / "buggy").glob("*.arg"))
CORRECT = sorted((ROOT / "specs").glob("*.arg"))


def expectations(path: Path) -> list:
    return re.findall(r"^# expect: (\S+) line (\d+)$", path.read_text(), re.M)


def report(kind: str, path: Path) -> list:
    return json.loads((GOLDEN / f"{kind}__{path.stem}.json").read_text())


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_buggy_spec_is_reported_where_its_header_says(path):
    want = expectations(path)
    assert want, f"{path.name} has no '# expect: OBLIGATION line N' header"
    found = {(r["obligation"], r["location"]["line"]) for r in report("buggy", path)
             if r["status"] in ("violated", "warning", "vacuous")}
    for obligation, line in want:
        assert (obligation, int(line)) in found, f"{path.name}: expected {obligation} at line {line}: {sorted(found)}"


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_spec_is_fully_proved_and_states_a_contract(path):
    bad = [(r["obligation"], r["location"]["line"], r["status"]) for r in report("specs", path)
           if r["status"] not in ("proved", "warning")]
    assert not bad, f"{path.name}: {bad}"
    assert re.search(r"^\s*contract ", path.read_text(), re.M), f"{path.name} states no contract"
