"""Wrong verdicts an outside tester found in the Hopper protocol checks (smt/protocol.py), each with its
buggy kernel (violated at the right obligation and line) and its correct neighbour (still proved):

1. TMA loads still in flight when the block exits (a refill guard `nk <= KT` that loads one k tile
   nobody waits for; a prologue without `if s < KT`): `mbarrier-phase` at the `tma_load`, and an
   error in the interpreter at the exit.
2. Only some threads of a warpgroup wait on the `full` mbarrier, then the whole warpgroup issues the
   wgmma that reads the stage: `mbarrier.try_wait` acquires only for the threads that run it.
   `mbarrier-phase` at the wgmma, unless a barrier() after the wait orders the other threads; the
   interpreter stops at that wgmma, and the replay reproduces the witness.
3. `wgmma_commit(); wgmma_commit(); wgmma_wait(3)`: the second commit makes an empty group, which
   `wgmma.wait_group` counts (PTX ISA, wgmma.commit_group): proved, and right in the interpreter;
   with `wgmma_wait(4)` the stage is refilled under a wgmma in flight: `stage-reuse`.

The kernels are tests/hopper/hopper_probe2_*.arg.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hopper_util import bf16_inputs, rel_err

from argus_verify import replay, smt
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.frontend import compile_file
from argus_verify.runtime import interp
from argus_verify.smt.protocol import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
HOPPER = ROOT / "tests" / "hopper"


def _spec(name: str) -> Path:
    return HOPPER / f"hopper_probe2_{name}.arg"


def _protocol(name: str) -> dict:
    rep = smt.verify(compile_file(str(_spec(name))), checks=PROTOCOL)
    return {r.obligation: r for r in rep.results if r.obligation in PROTOCOL}


def _violated(name: str) -> list:
    return [r for r in _protocol(name).values() if r.status == "violated"]


def _all_proved(name: str) -> None:
    res = _protocol(name)
    bad = [(o, r.status, r.message) for o, r in res.items() if r.status != "proved"]
    assert not bad, bad


def _run(name: str, m: int, n: int, k: int):
    a, b, ref = bf16_inputs(m, n, k)
    out = interp.run(compile_file(str(_spec(name))), {"A": a, "B": b}, {"M": m, "N": n, "K": k})["C"]
    return rel_err(out, ref)


# -- 1. TMA loads in flight at the block's exit -------------------------------------------------------


@pytest.mark.parametrize("name,line,loop,stage,phase", [
    ("m08_nk_le_KT", 52, "kt", 1, 1),  # the refill of k tile KT (guard nk <= KT), never waited for
    ("m22_prologue_unguarded", 38, "s", 1, 0),  # the prologue's fill of a stage past KT
])
def test_a_tma_load_in_flight_at_the_exit_is_an_mbarrier_phase_violation(name, line, loop, stage, phase):
    (r,) = _violated(name)
    assert r.obligation == "mbarrier-phase" and r.location.line == line, (r.obligation, r.location.line, r.message)
    assert "exits while the TMA copy into sA" in r.message and "may still be in flight" in r.message
    assert f"no wait on full[{stage}] for phase {phase}" in r.message
    assert r.detail["barrier"] == "full" and r.detail["stage"] == stage and r.detail["phase"] == phase
    assert loop in r.witness["loop"] and "role: producer (thread 0)" in r.explanation[0]
    # the witness's sizes replay: the interpreter stops at that copy, still in flight at the exit
    assert replay.reproduce(compile_file(str(_spec(name))), r)["status"] == "reproduced"


def test_the_guarded_prologue_and_refill_stay_proved():
    # the correct neighbour of both: `if s < KT` in the prologue, `if nk < KT` for the refill
    _all_proved("h4_dblcommit_wait3_ok")
    rep = smt.verify(compile_file(str(ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg")), checks=PROTOCOL)
    assert all(r.status == "proved" for r in rep.results if r.obligation in PROTOCOL)


@pytest.mark.parametrize("name,k,what", [
    ("m08_nk_le_KT", 328, "into sA (kt = 3)"),  # 6 k tiles: tile 6 is loaded into stage 2 at kt = 3
    ("m22_prologue_unguarded", 72, "into sA (s = 2)"),  # 2 k tiles: the prologue's third fill
])
def test_the_interpreter_reports_a_tma_load_in_flight_at_the_exit(name, k, what):
    with pytest.raises(ArgusRuntimeError, match="exits while the TMA copy") as e:
        _run(name, 130, 136, k)
    assert what in str(e.value.args[0]) and "no mbarrier wait on full[2]" in str(e.value.args[0])
    assert e.value.span.line == {"m08_nk_le_KT": 52, "m22_prologue_unguarded": 38}[name]


def test_the_unguarded_prologue_is_right_where_every_fill_is_waited_for():
    # KT >= STAGES - 1: every prologue fill is consumed, the exit finds nothing in flight
    assert _run("m22_prologue_unguarded", 130, 136, 328) < 1e-6


# -- 2. a wait of some threads of a warpgroup does not order the others' wgmma reads ------------------


@pytest.mark.parametrize("name,line,waited,missing", [
    ("w03_lane0_waits", 38, "threads 0", "threads 1..127"),  # `thread_id % 128 == 0` waits
    ("g11_warp0_waits", 35, "threads 0..31", "threads 32..127"),  # `thread_id < 32` waits
    ("w02_warp0_of_each_wg_waits", 38, "threads 0..31", "threads 32..127"),  # `thread_id % 128 < 32`
    ("r10_t0_waits_full", 42, "threads 0", "threads 1..127"),  # warp specialised: consumer thread 0 waits
])
def test_a_wait_of_some_threads_does_not_order_the_warpgroups_wgmma(name, line, waited, missing):
    (r,) = _violated(name)
    assert r.obligation == "mbarrier-phase" and r.location.line == line, (r.obligation, r.location.line, r.message)
    assert f"wgmma of warpgroup 0 reads sA for {missing}, which did not wait" in r.message, r.message
    assert "no wait of theirs on full[0] for phase 0" in r.message
    assert f"in warpgroup 0: {waited}" in r.explanation[1]
    assert r.detail["barrier"] == "full" and r.detail["stage"] == 0 and r.detail["phase"] == 0
    assert r.witness["loop"] == {"kt": 0}
    assert "role:" in r.explanation[0] and "kt = 0" in r.explanation[0]


@pytest.mark.parametrize("name,line,missing", [
    ("w03_lane0_waits", 38, "threads 1..127, 129..255"),
    ("g11_warp0_waits", 35, "threads 32..127"),
    ("w02_warp0_of_each_wg_waits", 38, "threads 32..127, 160..255"),
    ("r10_t0_waits_full", 42, "threads 1..127"),
])
def test_the_interpreter_stops_where_threads_that_did_not_wait_read_the_copy(name, line, missing):
    # a wait acquires the copy for the threads that run it (and a barrier() after it, for all)
    with pytest.raises(ArgusRuntimeError, match="which did not wait for the TMA copy") as e:
        _run(name, 64, 64, 64)
    assert e.value.span.line == line and f"reads sA for {missing} of block" in str(e.value.args[0])
    (r,) = _violated(name)
    out = replay.reproduce(compile_file(str(_spec(name))), r, str(_spec(name)))
    assert out["status"] == replay.REPRODUCED, out


def test_a_barrier_after_the_wait_of_one_thread_orders_the_others():
    # thread 0 waits, then barrier(): the other threads' reads happen after its acquire
    _all_proved("g12_t0_waits_then_barrier")
    a, b, ref = bf16_inputs(130, 136, 200)
    k = compile_file(str(_spec("g12_t0_waits_then_barrier")))
    out = interp.run(k, {"A": a, "B": b}, {"M": 130, "N": 136, "K": 200})["C"]
    assert rel_err(out, ref) < 1e-6


def test_the_warpgroup_granularity_case_stays_violated(tmp_path):
    # `if thread_id < 128:` waits: warpgroup 1 (a role of its own) reads a stage in flight
    src = _spec("w03_lane0_waits").read_text().replace("if thread_id % 128 == 0:", "if thread_id < 128:")
    path = tmp_path / "w01.arg"
    path.write_text(src)
    rep = smt.verify(compile_file(str(path)), checks=PROTOCOL)
    (r,) = [r for r in rep.results if r.status == "violated"]
    assert r.obligation == "mbarrier-phase" and r.location.line == 38
    assert "still in flight" in r.message


# -- 3. empty wgmma groups count --------------------------------------------------------------------


def test_an_empty_wgmma_group_counts_in_wgmma_wait():
    _all_proved("h4_dblcommit_wait3_ok")
    assert _run("h4_dblcommit_wait3_ok", 130, 136, 328) < 1e-6


def test_waiting_for_one_group_too_few_is_still_a_stage_reuse_violation():
    (r,) = _violated("h5_dblcommit_wait4")
    assert r.obligation == "stage-reuse" and r.location.line == 53, (r.obligation, r.location.line, r.message)
    assert "still in flight" in r.message and r.detail["barrier"] == "full"
    assert rel_err_or_nan("h5_dblcommit_wait4") > 1e-2


def rel_err_or_nan(name: str) -> float:
    return _run(name, 130, 136, 328)
