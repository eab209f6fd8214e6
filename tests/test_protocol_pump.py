"""The protocol obligations for all sizes (smt/protocol_pump.py): the pumping argument on the lockstep
Hopper GEMMs, and the periodicity check that keeps bounded runs from standing for loops they never
reach the end of (a protocol bug from iteration 40 on used to be "proved" by runs of 10 trips)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from argus_verify import ir, smt
from argus_verify.frontend import compile_file, compile_source
from argus_verify.smt import protocol as P
from argus_verify.smt import protocol_pump as PP
from argus_verify.smt.protocol import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg"
PERSISTENT = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_persistent.arg"
RUNTIME = [o for o in PROTOCOL if o not in P.EXHAUSTIVE]  # the skeleton's obligations (the rest compare tiles)


def _mutant(old: str, new: str):
    src = SPEC.read_text()
    assert old in src
    return compile_source(src.replace(old, new), "mutant.arg")


def _protocol(kernel, **kw):
    return {r.obligation: r for r in smt.verify(kernel, checks=tuple(PROTOCOL), **kw).results}


def test_gemm_protocol_is_proved_for_all_sizes_by_the_pumping_argument():
    res = _protocol(compile_file(str(SPEC)))
    assert set(RUNTIME) - set(res) == {"bulk-group"}  # (reported for kernels with TMA stores)
    for name in RUNTIME[:-1]:
        r = res[name]
        assert r.status == "proved", (name, r.message)
        assert "bounded" not in r.detail and "for all sizes" in r.message
        (loop,) = r.detail["pumped"]["loops"]
        # K sets the k loop's trip count; the ring of 4 stages repeats every 8 iterations
        assert (loop["size"], loop["period"], loop["growth"]) == ("K", 8, 512)
        assert loop["trip_counts_run"][1] >= loop["head"] + 2 * loop["period"] + loop["tail"] - 1


def test_solver_proofs_through_the_protocol_are_no_longer_bounded():
    rep = smt.verify(compile_file(str(SPEC)))
    assert rep.exit_code == 0
    assert not [r.obligation for r in rep.results if "bounded" in r.detail]


@pytest.mark.parametrize("old,new,shape,expect", [
    # the consumer's parity flips from iteration 40 on: it waits on the wrong phase (a hang)
    ("mbarrier_wait(full[kt % STAGES], (kt // STAGES) % 2)",
     "mbarrier_wait(full[kt % STAGES], (kt // STAGES + kt // 40) % 2)", {"K": 2688}, "mbarrier-phase"),
    # expect_tx over-counts at k step 40 only: that phase never completes
    ("mbarrier_expect_tx(full[nk % STAGES], STAGE_BYTES)",
     "mbarrier_expect_tx(full[nk % STAGES], STAGE_BYTES + 16 * (kt == 40))", {"K": 2816}, "mbarrier-tx"),
])
def test_a_bug_beyond_the_runs_trip_counts_is_not_proved(old, new, shape, expect):
    k = _mutant(old, new)
    fixed = _protocol(k, shapes={"M": 64, "N": 64, **shape})
    assert fixed[expect].status == "violated"  # the bug is real at these sizes
    res = _protocol(k)
    assert not [n for n in RUNTIME if n in res and res[n].status == "proved"]
    for n in RUNTIME[:-1]:
        assert res[n].status in ("unknown", "violated")
        if res[n].status == "unknown":
            assert "does not repeat" in res[n].detail["reason"]


def test_a_size_threshold_in_the_protocol_is_not_proved():
    # from K = 4096 on the producer stops refilling (a hang): a step of K that keeps the trip count
    # (4088 -> 4096) changes the protocol, so the lemmas fail and the result cannot claim every size
    k = _mutant("            if nk < KT:\n", "            if nk < KT and K < 4096:\n")
    ok, why, periodic = PP.check_periodic(k, 10)
    assert not ok and periodic is None
    assert why == "a step of 'K' that leaves every trip count changes the protocol: the runs of bounded sizes " \
                  "are no evidence for the rest"
    assert _protocol(k, shapes={"M": 64, "N": 64, "K": 4096})["mbarrier-phase"].status == "violated"
    res = _protocol(k)
    assert not [n for n in RUNTIME if n in res and res[n].status == "proved"]
    assert "changes the protocol" in res["mbarrier-phase"].detail["reason"]


def test_a_persistent_kernel_is_proved_by_trip_counts_and_one_whose_state_drifts_stays_bounded():
    # the tile loop's trip count depends on the block: the argument over trip counts
    # (tests/test_protocol_pump_trips.py) proves it for every size and block
    r = _protocol(compile_file(str(PERSISTENT)))["mbarrier-phase"]
    assert r.status == "proved" and "bounded" not in r.detail
    assert [x["witness"] for x in r.detail["pumped"]["loops"]] == ["block_id.x + 1056", "K - 512"]
    # without a barrier() in the k loop the retired wgmmas pile up: no state repeats, and the result
    # stays bounded and says why
    r = _protocol(compile_file(str(ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_empty.arg")))["mbarrier-phase"]
    assert r.status == "proved" and "pumped" not in r.detail
    why = r.detail["bounded"]["not_for_all_sizes"]
    assert "the protocol depends on the block" in why and "is not the same after 6 iterations" in why


def test_lemmas_of_the_plan_hold_for_the_gemm():
    k = compile_file(str(SPEC))
    ok, why, heads = PP.check_periodic(k, 10)
    assert ok, why
    pl, why, _ = PP.plan(k, {"M": 64, "N": 64, "K": 64}, heads)
    assert pl is not None, why
    (p,) = pl.pumps
    assert (p.size, p.quantum, p.delta, p.L) == ("K", 8, 512, 8)  # requires K % 8 == 0
    assert p.B >= 3  # the last STAGES - 1 iterations refill nothing
    # one size vector per trip count, in the order the trip counts grow
    trips = [PP.trip_value(p.loop, c, dict(k.consts)) for c in pl.combos]
    assert trips == list(range(1, p.trips_run))
    assert all(c["M"] == 64 and c["N"] == 64 for c in pl.combos)  # M and N change nothing


def test_quantum_follows_the_requires():
    src = SPEC.read_text().replace("requires K % 8 == 0", "requires K % 16 == 0")
    k = compile_source(src, "q.arg")
    with PP._IntMode():
        assert PP._step_of(k, "K", PP._least(k, "K")) == 16 and PP._in_one_class(k, "K", 16, {"K": 64})
        assert PP._step_of(k, "M", PP._least(k, "M")) == 1 and PP._in_one_class(k, "M", 1, {"M": 64})
        assert not PP._in_one_class(k, "K", 16, {"K": 72})  # 72 is not admissible: no class to step in


def _skeleton():
    k = compile_file(str(SPEC))
    sk = P.Skeleton(k, {"M": 64, "N": 64, "K": 1024}, (0, 0, 0), (1, 1, 1))
    sk.gemm = None
    return k, sk


def test_fingerprint_reads_every_protocol_state_and_only_that():
    k, sk = _skeleton()
    known = set(PP.STATE) | set(PP.CONSTANT) | set(PP.MESSAGES_OR_DATA)
    sk.run(k.body, {}, np.ones(k.block, dtype=bool))
    assert set(vars(sk)) <= known, set(vars(sk)) - known  # a new attribute must be classified
    # the TMA stores' books: the fingerprint reads open, groups, released and unpublished; sums and
    # sum_id are the followed tags (data), whose lengths alone the rules read
    assert set(vars(P.BulkState({"sC": 4}))) == {"open", "groups", "released", "sums", "sum_id", "unpublished"}
    before = PP.fingerprint(sk)
    sk.loop["kt"] = 12345  # where we are is only for messages
    for b in sk.bars.values():
        b["phase"] += 2  # the rules read the phase's parity
    assert PP.fingerprint(sk) == before
    for b in sk.bars.values():
        b["phase"] += 1
    assert PP.fingerprint(sk) != before
    _, sk2 = _skeleton()
    sk2.run(k.body, {}, np.ones(k.block, dtype=bool))
    sk2.groups.append([])  # one more wgmma group in flight
    assert PP.fingerprint(sk2) != PP.fingerprint(_run(_skeleton()))


def _run(pair):
    k, sk = pair
    sk.run(k.body, {}, np.ones(k.block, dtype=bool))
    return sk


def test_occurrences_substitute_lets_and_refuse_a_let_assigned_again():
    k = compile_file(str(SPEC))
    occ, loops = PP.occurrences(k)
    names = {x.name for o in occ for x in ir.walk_iexpr(o.expr) if isinstance(x, ir.IVar)}
    assert "nk" not in names and "KT" not in names  # lets are substituted
    assert any(o.kind == "parity" for o in occ)  # the wait's parity compares modulo 2
    src = SPEC.read_text().replace("        nk = kt + STAGES - 1\n",
                                   "        nk = kt + STAGES - 1\n        nk = kt + STAGES - 1\n")
    with pytest.raises(PP.Unsupported):
        PP.occurrences(compile_source(src, "twice.arg"))


def test_a_size_threshold_in_a_persistent_kernel_is_caught_by_the_size_steps():
    # the block's trip counts stay as they are from K = 4088 to 4096, its protocol does not: a step
    # lemma (block ids quantified) that runs of small sizes could not replace
    src = PERSISTENT.read_text()
    assert "                if nk < KT:\n" in src
    k = compile_source(src.replace("                if nk < KT:\n", "                if nk < KT and K < 4096:\n"),
                       "persistent_threshold.arg")
    ok, why, _ = PP.check_periodic(k, 10)
    assert not ok and why == "a step of 'K' that leaves every trip count changes the protocol: the runs of " \
                             "bounded sizes are no evidence for the rest"
    # the kernel as written: M, N and K steps that keep every block's tile and k loop counts change nothing
    ok, why, periodic = PP.check_periodic(compile_file(str(PERSISTENT)), 10)
    assert ok and why == "" and all(step.invisible is not False for step in periodic.steps.values())


def test_an_undecided_size_step_does_not_hide_a_refuted_one():
    # each size's lemma E has its own verdict: an undecided query for one size (None) neither
    # passes nor refutes another's
    S = PP.SizeStep
    assert PP._refuted_step({"M": S(1, 1, None), "K": S(8, 8, False), "N": S(1, 1, True)}) == \
        "a step of 'K' that leaves every trip count changes the protocol"
    assert PP._refuted_step({"M": S(1, 1, None), "K": S(8, None, None), "N": S(1, 1, True)}) == ""


def test_a_lower_bound_on_a_size_keeps_the_pumping_argument():
    # `requires K >= 256`: K's admissible values are still one progression of step 8 (from 256 on), so
    # the protocol is proved for all sizes, not bounded; a bound by another size has no fixed step
    k = _mutant("    requires K % 8 == 0\n", "    requires K % 8 == 0\n    requires K >= 256\n")
    with PP._IntMode():
        assert (PP._least(k, "K"), PP._step_of(k, "K", 256)) == (256, 8)
    res = _protocol(k)
    for name in RUNTIME[:-1]:
        assert res[name].status == "proved" and "for all sizes" in res[name].message, (name, res[name].message)
        (loop,) = res[name].detail["pumped"]["loops"]
        assert loop["trip_counts_run"][0] == 4  # K = 256: 4 k tiles, the fewest the kernel admits
    relative = _mutant("    requires K % 8 == 0\n", "    requires K % 8 == 0\n    requires K >= N\n")
    with PP._IntMode():
        assert PP._step_of(relative, "K", PP._least(relative, "K")) is None
    # the late parity flip of the tests above, under the bound: still not proved
    late = compile_source(SPEC.read_text().replace("    requires K % 8 == 0\n",
                                                   "    requires K % 8 == 0\n    requires K >= 256\n").replace(
        "mbarrier_wait(full[kt % STAGES], (kt // STAGES) % 2)",
        "mbarrier_wait(full[kt % STAGES], (kt // STAGES + kt // 40) % 2)"), "late.arg")
    assert _protocol(late)["mbarrier-phase"].status in ("unknown", "violated")
