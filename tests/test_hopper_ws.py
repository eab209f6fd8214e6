"""Warp specialisation: warpgroup roles with setmaxnreg (argus_verify/roles.py) and the warp-specialised
persistent GEMM (tests/hopper/gemm_bf16_wgmma_ws.arg): correct in the interpreter with the roles
running independently, its protocol obligations proved (smt/protocol_roles.py), its PTX assembled by
ptxas with the register policy the compiler fixed; the policy's compile-time errors; the ws buggy
specs (specs/buggy/wgmma_ws_*.arg) deadlocked or wrong in the interpreter, with the role, barrier and
phase named. (tests/test_hopper.py checks each buggy spec's verdict at its line.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hopper_util import bf16_inputs, gpu_gemm_error, ptxas_sm90a, rel_err

from argus_verify import ir, roles, smt
from argus_verify.cli import main
from argus_verify.diagnostics import ArgusError, ArgusRuntimeError
from argus_verify.frontend import compile_file, compile_source
from argus_verify.lowering.ptx import lower
from argus_verify.runtime import interp
from argus_verify.smt.protocol import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
WS = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_ws.arg"
BUGGY = ROOT / "specs" / "buggy"
SMALL = {"SMS": 4, "BN": 128, "STAGES": 2}  # several tiles per block, rings run on across tiles: the buggy specs
TAGS = ("tag-assertion", "output-contract", "reduction-coverage", "output-once")


@pytest.mark.parametrize("consts,shape", [({"SMS": 2, "GROUP": 2}, (130, 264, 136)),  # 128 x 256 tiles
                                          (SMALL, (257, 264, 600))])  # 3 x 3 tiles on 4 blocks, 10 k tiles
def test_ws_gemm_is_correct_in_the_interpreter_on_ragged_shapes(consts, shape):
    m, n, k = shape
    a, b, ref = bf16_inputs(m, n, k)
    out = interp.run(compile_file(str(WS), consts), {"A": a, "B": b}, {"M": m, "N": n, "K": k})["C"]
    assert rel_err(out, ref) < 1e-6


def test_ws_gemm_is_correct_with_either_side_ahead():
    # warpgroups: the producer ahead (the default for roles); warpgroups:1: consumer warpgroup 0 ahead
    m, n, k = 130, 136, 328  # 2 x 2 tiles on 2 blocks, 6 k tiles on 2 stages: the rings wrap
    a, b, ref = bf16_inputs(m, n, k)
    kern = compile_file(str(WS), {**SMALL, "SMS": 2})
    for schedule in ("warpgroups", "warpgroups:1"):
        out = interp.run(kern, {"A": a, "B": b}, {"M": m, "N": n, "K": k}, schedule=schedule)["C"]
        assert rel_err(out, ref) < 1e-6, schedule
    with pytest.raises(ArgusError, match="warpgroups takes 0"):
        interp.run(kern, {"A": a, "B": b}, {"M": m, "N": n, "K": k}, schedule="warpgroups:2")


def test_ws_protocol_and_tags_are_proved():
    # (the tag obligations other than output-once end unknown on this kernel whatever the limit: the
    # rings run across tiles, issue 10's open gap; a 2 s limit per query instead of 10 s takes this
    # test from 72 s to 20 s, and a violation, which this test refuses, needs a confirmed model either way)
    rep = smt.verify(compile_file(str(WS), SMALL), checks=(*PROTOCOL, *TAGS), timeout_s=2.0).results
    assert {r.obligation for r in rep} == (set(PROTOCOL) - {"bulk-group"}) | set(TAGS)  # (no TMA store)
    # the protocol is proved; the tag obligations are the solver's since the tags merge, and on the
    # roles' persistent tile order it ends unknown (time limit, k windows), never violated
    proto = [r for r in rep if r.obligation in PROTOCOL]
    assert all(r.status == "proved" for r in proto), [(r.obligation, r.message) for r in proto if r.status != "proved"]
    assert all(r.status in ("proved", "unknown") for r in rep), [(r.obligation, r.message) for r in rep]
    # output-once by the persistent schedule's lemma (smt/schedule.py): the consumers' store, once per tile
    once = [r for r in rep if r.obligation == "output-once"]
    assert len(once) == 2 and all(r.status == "proved" and "bijection" in r.message for r in once), once


def test_roles_are_read_off_warpgroup_conditions():
    tid = ir.ISpecial("thread_id")
    wg = ir.IBin("//", tid, ir.IConst(128))
    assert roles.warpgroup_split(ir.IBin("==", wg, ir.IConst(2)), 384) == ((2,), (0, 1))
    assert roles.warpgroup_split(ir.IBin("<", tid, ir.IConst(256)), 384) == ((0, 1), (2,))
    assert roles.warpgroup_split(ir.IBin("==", tid, ir.IConst(0)), 384) is None  # thread 0: not a warpgroup
    assert roles.warpgroup_split(ir.IBin("==", wg, ir.IConst(0)), 128) is None  # one warpgroup: nothing to split
    k = compile_file(str(WS))
    assert [(r.warpgroups, r.registers) for r in roles.roles(k)] == [((2,), 40), ((0, 1), 232)]
    assert k.policy("maxnreg") == 168  # 65536 / 384 threads, a multiple of 8; 40 + 2 * 232 <= 512 per thread


def test_ws_lowers_to_setmaxnreg_against_the_launch_count_and_ptxas_takes_it():
    ptx = lower(compile_file(str(WS))).ptx
    assert ".maxnreg 168" in ptx
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
    assert ptx.count("mbarrier.arrive.shared::cta.b64") == 2  # the consumers' releases of empty[s]
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16") == 4  # one m64 block per consumer, 4 k steps
    done = ptxas_sm90a(ptx, "-v")
    assert "warning" not in done.stderr.lower(), done.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in done.stderr
    assert re.search(r"Used (\d+) registers", done.stderr) and int(re.search(r"Used (\d+) registers",
                                                                             done.stderr).group(1)) <= 168


def _ws_with(old: str, new: str) -> str:
    text = WS.read_text()
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("old,new,message,at", [
    ("PRODUCER_REGS=40", "PRODUCER_REGS=36", "multiple of 8 in 24..256, got 36", "setmaxnreg(PRODUCER_REGS)"),
    ("PRODUCER_REGS=40", "PRODUCER_REGS=264", "multiple of 8 in 24..256, got 264", "setmaxnreg(PRODUCER_REGS)"),
    ("CONSUMER_REGS=232", "CONSUMER_REGS=248", "248 + 248 + 40 per thread", "setmaxnreg(CONSUMER_REGS)"),
    ("        setmaxnreg(CONSUMER_REGS)\n", "        KT2 = KT\n        setmaxnreg(CONSUMER_REGS)\n",
     "first statement of a warpgroup role", "setmaxnreg(CONSUMER_REGS)"),
    ("    barrier()\n", "    barrier()\n    setmaxnreg(40)\n", "first statement of a warpgroup role", "setmaxnreg(40)"),
    ("    if warpgroup_id == WG:", "    if warpgroup_id == 0:", "put it first", "tv=ACC"),
])
def test_register_policy_and_roles_are_checked_at_compile_time(old, new, message, at):
    text = _ws_with(old, new)
    with pytest.raises(ArgusError) as e:
        compile_source(text, "ws.arg")
    assert message in str(e.value.args[0]), e.value.args[0]
    line = next(i for i, t in enumerate(text.splitlines(), 1) if at in t and not t.startswith("#")
                and (at != "tv=ACC" or "zeros" in t))
    assert e.value.span.line == line and e.value.span.col > 1


def test_a_bad_register_policy_exits_2_with_file_line_col(capsys, tmp_path):
    path = tmp_path / "ws.arg"
    path.write_text(_ws_with("CONSUMER_REGS=232", "CONSUMER_REGS=248"))
    code = main(["compile", str(path), "--no-verify"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert re.search(rf"{re.escape(str(path))}:\d+:\d+: .*register file", err), err
    assert "^" in err


def test_a_ws_deadlock_in_the_interpreter_names_role_barrier_and_phase():
    a, b, _ = bf16_inputs(70, 264, 328)
    with pytest.raises(ArgusRuntimeError) as e:
        interp.run(compile_file(str(BUGGY / "wgmma_ws_empty_wrong_parity.arg")), {"A": a, "B": b},
                   {"M": 70, "N": 264, "K": 328})
    msg = str(e.value.args[0])
    assert "deadlock" in msg and "warpgroup 2, producer role" in msg and "empty[0]" in msg and "phase 0" in msg
    assert "warpgroup 0, consumer role" in msg and "full[0]" in msg
    assert e.value.span.line == 40  # the producer's wait on empty, the head of the stopped pipeline


@pytest.mark.cuda
@pytest.mark.parametrize("m,n,k", [(150, 200, 328), (257, 264, 600), (1000, 1000, 1000)])
def test_ws_gemm_on_the_gpu(m, n, k):
    assert gpu_gemm_error(WS, m, n, k) < 1e-5


def test_output_writers_of_the_consumers_fragment_in_a_larger_block():
    # the consumers' accumulator layout names 256 threads of the 384 (the producer warpgroup stores
    # nothing): each of its elements has one writer, and no thread beyond the layout is a writer
    from argus_verify.smt.analysis import Analysis
    from argus_verify.smt.writers import Writers

    an = Analysis(compile_file(str(WS), SMALL), None)
    (acc, _frag), = an.out_stores
    writers, why = Writers.of(an, acc.node, acc.view, acc.coords, acc.values, acc.where)
    assert an.T == 384 and acc.coords.coord_table().shape[0] == 256
    assert why == "" and writers.m == 1 and len(writers.points) == 128 * 128
    assert writers.live.shape == (256,) and writers.live.all()
