"""The tag analysis through TMA copies and wgmma (smt/hopper.py): what its proofs rely on, the
data bugs it finds (specs/buggy/hopper_*) shown wrong in the interpreter, and the reports it
changed. Verdicts are read from the golden reports (tests/test_golden.py keeps them equal to what
`argus verify` prints); the few live runs here are the interpreter's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hopper_util import bf16_inputs

from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_file
from argus_verify.runtime import interp

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "verify"
BUGGY = ROOT / "specs" / "buggy"


def golden(name: str) -> list:
    return json.loads((GOLDEN / f"buggy__{name}.json").read_text())


def test_async_proxy_proofs_are_unknown_when_the_protocol_they_rely_on_is_violated():
    # the refill overwrites a stage the wgmma still reads: the race and initialisation proofs
    # for the TMA-written buffers rest on stage-reuse, so they are not proofs here
    rep = golden("wgmma_refill_before_release")
    assert any(r["obligation"] == "stage-reuse" and r["status"] == "violated" for r in rep)
    relying = [r for r in rep if r["obligation"] in ("race", "uninitialised-read") and "TMA" in r["message"]]
    assert relying and all(r["status"] == "unknown" for r in relying)
    assert all("stage-reuse is violated" in r["message"] for r in relying)


def test_the_solver_finds_the_wrong_k_tile_itself():
    # not only the skeleton's bounded runs: the wgmma's implicit k agreement fails in the solver
    rep = golden("wgmma_a_wrong_k_tile")
    solver = [r for r in rep if r["obligation"] == "tag-assertion" and r["status"] == "violated"
              and r["message"] == "mma operands' tags do not line up"]
    assert solver and solver[0]["location"]["line"] == 37
    assert solver[0]["witness"]["loop"]  # names the iteration


def test_an_epilogue_reading_a_neighbours_sums_is_violated_and_wrong():
    rep = golden("hopper_epilogue_wrong_element")
    bad = [(r["obligation"], r["location"]["line"]) for r in rep if r["status"] == "violated"]
    assert bad == [("output-contract", 48)]
    k = compile_file(str(BUGGY / "hopper_epilogue_wrong_element.arg"))
    a, b, ref = bf16_inputs(70, 136, 72)
    out = interp.run(k, {"A": a, "B": b}, {"M": 70, "N": 136, "K": 72})["C"]
    assert np.abs(out - ref).max() > 1.0  # the neighbouring lane's column


def test_a_refill_of_the_wrong_k_tile_misses_a_k_tile_and_is_wrong():
    rep = golden("hopper_refill_skips_k_tile")
    bad = [(r["obligation"], r["location"]["line"]) for r in rep if r["status"] == "violated"]
    assert bad == [("reduction-coverage", 12)]
    # the solver cannot prove the k window there (a consequence of the violation, not a proof)
    cov = [r for r in rep if r["obligation"] == "reduction-coverage" and r["status"] == "unknown"]
    assert cov and "k window" in cov[0]["message"]
    k = compile_file(str(BUGGY / "hopper_refill_skips_k_tile.arg"))
    a, b, ref = bf16_inputs(70, 72, 5 * 64)  # 5 k tiles: one refill
    out = interp.run(k, {"A": a, "B": b}, {"M": 70, "N": 72, "K": 5 * 64})["C"]
    assert np.abs(out - ref).max() > 1.0


def test_a_stage_index_outside_the_allocation_is_a_bounds_violation_and_faults():
    rep = golden("hopper_oob_stage_index")
    bad = sorted((r["obligation"], r["location"]["line"]) for r in rep if r["status"] == "violated")
    assert bad == [("bounds", 37), ("bounds", 44)]
    k = compile_file(str(BUGGY / "hopper_oob_stage_index.arg"))
    a, b, _ = bf16_inputs(64, 64, 5 * 64)
    with pytest.raises(ArgusError, match="out-of-bounds access sA"):
        interp.run(k, {"A": a, "B": b}, {"M": 64, "N": 64, "K": 5 * 64})


def test_a_generic_store_racing_with_the_wgmma_is_a_race():
    rep = golden("hopper_generic_write_race")
    bad = [(r["obligation"], r["location"]["line"]) for r in rep if r["status"] == "violated"]
    assert bad == [("race", 34)]
    race = next(r for r in rep if r["obligation"] == "race" and r["status"] == "violated")
    assert {a["op"] for a in race["witness"]["accesses"]} == {"store", "wgmma"}


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_no_obligation_is_reported_twice(path):
    rows = [(r["obligation"], r["status"], r["location"]["line"], r["message"]) for r in json.loads(path.read_text())]
    twice = {x for x in rows if rows.count(x) > 1 and x[1] == "unknown"}
    assert not twice, twice


def test_a_kernel_checked_after_another_gets_its_own_layouts_offsets():
    """The skeleton caches the element offsets of each shared view. They were cached by the view's
    value, which does not include the allocation's layout: in one process (the mutation study, an
    agent run, the Python API), a kernel checked after another with the same view expressions read
    the first kernel's offsets. This mutant's sB layout (a block stride halved) mixes the k rows
    of B; checked after the correct spec, its wgmma tags passed."""
    from argus_verify.frontend import compile_source
    from argus_verify.smt.protocol import check_protocol

    final = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_prefetch.arg"
    src = final.read_text()
    old = "(64, BN // 64)):(BK * BN, 64, (1, BK * 64)))"
    assert old in src
    mutant = compile_source(src.replace(old, "(64, BN // 64)):(BK * BN, 64, (1, (BK * 64) // 2)))"), "mutant.arg")
    correct = {r.obligation: r.status for r in check_protocol(compile_file(str(final)))}
    assert correct["tag-assertion"] == "proved"
    found = {r.obligation: r for r in check_protocol(mutant)}
    assert found["tag-assertion"].status == "violated" and found["tag-assertion"].location.line == 60
