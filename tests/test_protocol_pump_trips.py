"""The pumping argument over trip counts (smt/protocol_pump_trips.py): the persistent GEMMs' protocol
obligations proved for every size and block, and the kernels whose protocol depends on the block, on
the sizes beyond the trip counts, or on the tile index, left unproved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from argus_verify import ir, smt
from argus_verify.frontend import compile_file, compile_source
from argus_verify.smt import protocol as P
from argus_verify.smt import protocol_pump as PP
from argus_verify.smt import protocol_pump_trips as PT
from argus_verify.smt.protocol import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
FINAL = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_prefetch.arg"
RUNTIME = [o for o in PROTOCOL if o not in P.EXHAUSTIVE]


def _mutant(old: str, new: str):
    src = FINAL.read_text()
    assert old in src
    return compile_source(src.replace(old, new), "mutant.arg")


def _protocol(kernel, **kw):
    return {r.obligation: r for r in smt.verify(kernel, checks=tuple(PROTOCOL), **kw).results}


def _lemmas(kernel):
    ok, why, periodic = PP.check_periodic(kernel, 8)
    assert ok, why
    with PP._IntMode():
        varying = [lp for lp in periodic.loops if not PP._is_constant(lp, kernel)]
        return periodic, varying, PT._determined(kernel, periodic.occ, varying)


def test_the_final_gemm_protocol_is_proved_for_every_size_and_block():
    res = _protocol(compile_file(str(FINAL)))
    for name in RUNTIME:
        r = res[name]
        assert r.status == "proved", (name, r.message)
        assert "bounded" not in r.detail and "for all sizes" in r.message and "every other size and block" in r.message
        tile, k = r.detail["pumped"]["loops"]
        # the tile loop shrinks by moving the block 6 grid strides on; the k loop by 6 k tiles of K
        assert (tile["witness"], tile["period"], tile["head"], tile["tail"]) == ("block_id.x + 792", 6, 1, 1)
        assert (k["witness"], k["period"], k["tail"]) == ("K - 384", 6, 2)
        # every trip count of the box ran: the tile loop 0 .. A + 2L + B - 1, the k loop from 1
        assert tile["trip_counts_run"] == [0, 13]
        assert k["trip_counts_run"] == [1, k["head"] + 12 + 2 - 1]


def test_solver_proofs_on_the_final_gemm_are_no_longer_bounded():
    rep = smt.verify(compile_file(str(FINAL)))
    assert rep.exit_code == 0
    assert not [r.obligation for r in rep.results if "bounded" in r.detail]


def test_the_lemmas_on_the_final_gemm():
    k = compile_file(str(FINAL))
    periodic, varying, determined = _lemmas(k)
    assert determined is True  # the same trip counts, the same protocol, whatever the block and sizes
    tile, kloop = varying
    with PP._IntMode():
        assert PT._witnesses(k, tile, 6, periodic.steps)[0] == ("block", "block_id.x", 792)
        assert PT._witnesses(k, kloop, 6, periodic.steps) == [("size", "K", -384)]
        holds = PT._checker(k, periodic.occ, varying, tile, ("block", "block_id.x", 792), 6)
        assert holds(1, 1) is True
        # a head of 0 is refuted: the first tile loads its own k tiles, the others had them prefetched
        assert holds(0, 1) is False
        # a wrong witness is refuted: one grid stride takes one tile off, not six
        assert PT._checker(k, periodic.occ, varying, tile, ("block", "block_id.x", 132), 6)(1, 1) is False
        assert PT.prefix_tail(k, periodic.occ, varying, tile, [0, 1]) == 1
        assert PT.prefix_tail(k, periodic.occ, varying, kloop, [1]) is None  # (not a statement of the body)


@pytest.mark.parametrize("old,new,reason", [
    # block 77 skips its refills (a hang there only): the protocol differs between blocks with the same
    # trip counts, so the runs of the first and last blocks are no evidence
    ("                if nk < KT:\n", "                if nk < KT and block_id.x != 77:\n",
     "differ in the protocol"),
    # the next tile's loads stop once there are 50000 tiles: a step of N that keeps the trip counts
    # changes the protocol (lemma E refutes it where its solver settles in time; else lemma D does)
    ("        if thread_id == 0 and nt < TM * TN:\n",
     "        if thread_id == 0 and nt < TM * TN and TM * TN < 50000:\n", ("a step of 'N'", "differ in the protocol")),
    # the 16th tile of each block is not prefetched (a hang from there on): beyond the runs
    ("        if thread_id == 0 and nt < TM * TN:\n",
     "        if thread_id == 0 and nt < TM * TN and (tile - block_id.x) // SMS != 15:\n", "does not repeat"),
    # expect_tx over-counts from the 10th tile on
    ("                    mbarrier_expect_tx(full[(base + nk) % STAGES], STAGE_BYTES)",
     "                    mbarrier_expect_tx(full[(base + nk) % STAGES], "
     "STAGE_BYTES + 16 * ((tile - block_id.x) // SMS >= 9))", "does not repeat"),
])
def test_a_protocol_the_trip_counts_do_not_fix_is_not_proved(old, new, reason):
    res = _protocol(_mutant(old, new))
    for name in RUNTIME:
        assert res[name].status in ("unknown", "violated"), (name, res[name].message)
        if res[name].status == "unknown":
            assert any(x in res[name].detail["reason"] for x in ((reason,) if isinstance(reason, str) else reason))


def test_the_block_dependence_refutes_lemma_d():
    k = _mutant("                if nk < KT:\n", "                if nk < KT and block_id.x != 77:\n")
    assert _lemmas(k)[2] is False


def _world(k, sizes, block):
    grid = tuple(max(1, int(ir.eval_int(g, sizes))) for g in k.grid)
    sk = P.Skeleton(k, sizes, (block, 0, 0), grid)
    sk.gemm = None
    return sk


def test_a_run_resumed_from_a_longer_runs_snapshot_is_the_run_from_the_start():
    k = compile_file(str(FINAL))
    tile = next(s for s in k.body if isinstance(s, ir.For))
    kloop = next(s for s in ir.walk_stmts(tile.body) if isinstance(s, ir.For) and s.var == "kt")
    sizes = {"M": 128, "N": 1189 * 256, "K": 7 * 64}  # 132 * 9 + 1 tiles: block 0 runs 10, block 264 runs 8
    checks = {id(tile): (1, 7, 6), id(kloop): (2, 8, 6)}
    longest = _world(k, sizes, 0)
    longest.pump_checks, longest.snap_loop = checks, tile
    longest.run(k.body, {}, np.ones(k.block, dtype=bool))
    assert sorted(longest.snapshots) == list(range(10))
    whole = _world(k, sizes, 264)
    whole.pump_checks = checks
    whole.run(k.body, {}, np.ones(k.block, dtype=bool))
    whole.bulk_exit()
    resumed = _world(k, sizes, 264)
    resumed.pump_checks = checks
    resumed.resume(longest.snapshots[8 - 1], tile, 8 - 1)
    resumed.bulk_exit()
    assert PP.fingerprint(resumed) == PP.fingerprint(whole)
    assert resumed.pump_seen[id(tile)][-1] == whole.pump_seen[id(tile)][-1]  # (8 trips, states at 1 and 7)
    assert resumed.pump_seen[id(kloop)] == whole.pump_seen[id(kloop)]


def test_a_bug_at_one_k_tile_count_is_found_though_the_first_runs_miss_it():
    """The pumping argument runs before the sweep of single sizes (smt/protocol.check_protocol): the
    first combinations (64, 520 and 4360 for every size) have 1, 9 and 69 k tiles, and this mutant
    hangs only with 2 (the prologue skips stage 1). The pumping argument's runs do not prove it, so
    the sweep runs and reports the hang at its smallest size."""
    k = _mutant("        if thread_id == 0 and tile == block_id.x:\n            for s in range(STAGES - 1):\n"
                "                if s < KT:\n",
                "        if thread_id == 0 and tile == block_id.x:\n            for s in range(STAGES - 1):\n"
                "                if s < KT and s * KT != 2:\n")
    res = {r.obligation: r for r in P.check_protocol(k)}
    r = res["mbarrier-phase"]
    assert r.status == "violated" and "deadlock" in r.message and r.location.line == 58, r.message
    assert r.witness["sizes"]["K"] in range(65, 129) and r.witness["loop"]["kt"] == 1
    # the correct kernel: proved for all sizes without the sweep (its bounded runs are the first ones)
    ok = {r.obligation: r for r in P.check_protocol(compile_file(str(FINAL)))}
    assert ok["mbarrier-phase"].status == "proved" and "pumped" in ok["mbarrier-phase"].detail
    assert ok["tag-assertion"].detail["bounded"]["runs"] < 10
