"""Hopper: mbarriers, TMA, wgmma. The derived hardware parameters against the declared layouts,
the interpreter's late async completion (each protocol bug of specs/buggy/wgmma_* gives a wrong
answer or a reported error there), the protocol obligations, the PTX and ptxas."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from hopper_util import bf16_inputs, gpu_gemm_error, ptxas_sm90a, rel_err

from argus_verify import hopper, ir, smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_file, compile_source
from argus_verify.layout import ComposedLayout, Layout, Swizzle, row_major
from argus_verify.lowering.ptx import lower
from argus_verify.replay import NOT_REPRODUCED, reproduce
from argus_verify.runtime import interp
from argus_verify.semantics import round_to
from argus_verify.smt.protocol import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg"
GENERIC_B = ROOT / "tests" / "hopper" / "wgmma_generic_b.arg"
# the cluster ones (wgmma_cluster_*) have their own obligations and interpreter outcomes: tests/test_cluster.py
BUGGY = sorted(p for p in (ROOT / "specs" / "buggy").glob("wgmma_*.arg") if not p.stem.startswith("wgmma_cluster_"))


def _view(alloc, stage=0):
    return ir.View(alloc.name, "shared", (ir.Index(ir.IConst(stage)),
                                          *(ir.Slice(ir.IConst(0), d) for d in alloc.shape[1:])))


SW = Swizzle(3, 3, 3)
SA = ir.SharedAlloc("sA", "bf16", (2, 128, 64), ComposedLayout(SW, row_major((2, 128, 64))))
SB = ir.SharedAlloc("sB", "bf16", (2, 64, 128), ComposedLayout(SW, Layout((2, 64, (64, 2)), (8192, 64, (1, 4096)))))


def test_descriptors_and_boxes_derived_from_the_layouts_read_what_the_layouts_place():
    for alloc, which in ((SA, "a"), (SB, "b")):
        v = _view(alloc)
        tab, _, _ = hopper.tile_table(alloc, v)
        assert hopper.layout_mismatch(tab, hopper.tma_table(alloc, v, hopper.tma_boxes(alloc, v))) is None
        op = hopper.wgmma_operand(alloc, v, which)
        t = tab if which == "a" else tab.T
        assert hopper.layout_mismatch(t, hopper.wgmma_table(op, t.shape, 2)) is None
    a = hopper.wgmma_operand(SA, _view(SA), "a")
    b = hopper.wgmma_operand(SB, _view(SB), "b")
    assert (a.major, a.descs[(0, 1)].start, a.descs[(0, 0)].sbo) == ("K", 32, 1024)
    assert (b.major, b.descs[(0, 1)].start, b.descs[(0, 0)].lbo, b.descs[(0, 0)].sbo) == ("MN", 2048, 8192, 1024)
    assert [bx.smem for bx in hopper.tma_boxes(SB, _view(SB))] == [0, 8192]
    # the ISA's field packing: start >> 4 in bits 0-13, LBO >> 4 at 16, SBO >> 4 at 32, 128B swizzle = 1 at 62
    assert b.descs[(0, 0)].encode(1024) == (1024 >> 4) | ((8192 >> 4) << 16) | ((1024 >> 4) << 32) | (1 << 62)


def test_a_layout_the_descriptor_cannot_express_is_caught_element_by_element():
    bad = ir.SharedAlloc("sA", "bf16", (2, 128, 32), ComposedLayout(SW, row_major((2, 128, 32))))
    v = _view(bad)
    tab, _, _ = hopper.tile_table(bad, v)
    mismatch = hopper.layout_mismatch(tab, hopper.wgmma_table(hopper.wgmma_operand(bad, v, "a"), tab.shape, 2))
    assert mismatch is not None and mismatch[0] == (1, 0)


@pytest.mark.parametrize("m,n,k", [(150, 200, 328), (64, 136, 64), (130, 8, 8)])
def test_wgmma_gemm_in_the_interpreter_on_ragged_shapes(m, n, k):
    a, b, ref = bf16_inputs(m, n, k)
    out = interp.run(compile_file(str(SPEC)), {"A": a, "B": b}, {"M": m, "N": n, "K": k})["C"]
    assert rel_err(out, ref) < 1e-6


def test_persistent_variant_walks_every_tile_and_keeps_the_ring_across_tiles():
    k = compile_file(str(ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_persistent.arg"),
                     {"SMS": 3, "GROUP": 2, "WG": 1, "BN": 128})
    a, b, ref = bf16_inputs(300, 264, 200)  # 9 tiles on 3 blocks, 4 k tiles each: phases run on across tiles
    assert rel_err(interp.run(k, {"A": a, "B": b}, {"M": 300, "N": 264, "K": 200})["C"], ref) < 1e-6
    res = smt.verify(k, checks=PROTOCOL).results
    assert all(r.status == "proved" for r in res), [(r.obligation, r.message) for r in res if r.status != "proved"]


def test_two_consumer_warpgroups_split_the_rows():
    k = compile_file(str(ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_wg.arg"))  # 128 x 256 tile, 256 threads
    a, b, ref = bf16_inputs(150, 264, 200)
    assert rel_err(interp.run(k, {"A": a, "B": b}, {"M": 150, "N": 264, "K": 200})["C"], ref) < 1e-6
    ptx = lower(k).ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16") == 4  # one m64 block per warpgroup, 4 k steps
    assert "shr.s32" in ptx  # the warpgroup index selects the A rows


def test_generic_stores_fenced_for_the_async_proxy_are_correct_and_proved():
    a, b, ref = bf16_inputs(70, 72, 200)
    k = compile_file(str(GENERIC_B))
    assert rel_err(interp.run(k, {"A": a, "B": b}, {"M": 70, "N": 72, "K": 200})["C"], ref) < 1e-6
    res = {(r.obligation, r.status) for r in smt.verify(k, checks=PROTOCOL).results}
    # bulk-group is reported for kernels with TMA stores only (tests/test_hopper_store.py)
    assert all(status == "proved" for _, status in res) and {o for o, _ in res} == set(PROTOCOL) - {"bulk-group"}


def test_the_protocol_obligations_are_proved_on_the_gemm_quickly():
    k = compile_file(str(SPEC))
    t0 = time.perf_counter()
    rep = smt.verify(k)
    assert time.perf_counter() - t0 < 20.0  # ~2 s alone on a 2-core machine; generous under load
    proto = [r for r in rep.results if r.obligation in PROTOCOL]
    assert {r.obligation for r in proto} == set(PROTOCOL) - {"bulk-group"}
    assert all(r.status == "proved" for r in proto), [(r.obligation, r.message) for r in proto]
    # every obligation proved; the tag obligations by the solver through TMA and wgmma (for all
    # sizes, not the skeleton's bounded runs), and the race and initialisation proofs saying which
    # protocol obligations they rely on for the async proxy (smt/hopper.py)
    assert all(r.status == "proved" for r in rep.results), [(r.obligation, r.message) for r in rep.results
                                                             if r.status != "proved"]
    followed = {"tag-assertion", "output-contract", "reduction-coverage", "output-once"}
    tags = [r for r in rep.results if r.obligation in followed]
    assert {r.obligation for r in tags} == followed
    assert not [r.message for r in tags if "followed through TMA" in r.message]
    relying = [r for r in rep.results if r.obligation in ("race", "uninitialised-read") and r.detail.get("relies_on")]
    assert {r.obligation for r in relying} == {"race", "uninitialised-read"}
    assert all("mbarrier-phase" in r.message and "stage-reuse" in r.message for r in relying)


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_each_protocol_bug_is_violated_at_its_line_and_wrong_in_the_interpreter(path):
    want = re.findall(r"^# expect: (\S+) line (\d+)$", path.read_text(), re.M)
    k = compile_file(str(path))
    checks = (*PROTOCOL, *{o for o, _ in want})  # the solver's steps only where a spec expects them
    rep = smt.verify(k, checks=checks)
    found = {(r.obligation, r.location.line) for r in rep.results if r.status == "violated"}
    for obligation, line in want:
        assert (obligation, int(line)) in found, sorted(found)
    for r in rep.violations():  # every witness replays (the full verifications: -m slow, test_verify)
        check = reproduce(k, r, str(path))
        assert check["status"] != NOT_REPRODUCED, f"{r.obligation} line {r.location.line}: {check['text']}"
    m, n, kk = 70, 264, 328  # k tiles: 6 > STAGES (refills, parities, drain); 3 column tiles
    a, b, ref = bf16_inputs(m, n, kk)
    schedule = re.findall(r"^# schedule: (\S+)", path.read_text(), re.M)  # an order that shows the bug
    try:
        out = interp.run(k, {"A": a, "B": b}, {"M": m, "N": n, "K": kk},
                         **({"schedule": schedule[0]} if schedule else {}))["C"]
    except ArgusError as e:  # a reported deadlock or protocol error
        assert re.search(r"deadlock|arrivals|mbarrier", str(e)), str(e)
        return
    assert rel_err(out, ref) > 1e-2


def test_wgmma_gemm_lowers_to_tma_mbarrier_wgmma_and_ptxas_takes_it():
    lk = lower(compile_file(str(SPEC)))
    ptx = lk.ptx
    for needle in ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                   "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                   "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "wgmma.fence.sync.aligned",
                   "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 1",
                   "fence.mbarrier_init.release.cluster", ".param .align 64 .b8 gemm_bf16_wgmma_param_tmap0_A[128]"):
        assert needle in ptx, needle
    assert [(m.tensor, m.box_rows, m.box_cols, m.swizzle) for m in lk.tmaps] == [("A", 128, 64, 128),
                                                                               ("B", 64, 64, 128)]
    # stages, 4 mbarriers of 8 bytes, and 1024 bytes to align the window
    assert lk.params[0].kind == "tmap" and lk.dynamic_shared_bytes == 4 * (128 * 64 + 64 * 128) * 2 + 32 + 1024
    done = ptxas_sm90a(ptx)
    assert "warning" not in done.stderr.lower(), done.stderr


@pytest.mark.cuda
@pytest.mark.parametrize("m,n,k", [(150, 200, 328), (257, 264, 200)])
def test_wgmma_gemm_on_the_gpu(m, n, k):
    assert gpu_gemm_error(SPEC, m, n, k) < 1e-5


# The store+prefetch GEMM and its faster variants (BENCHMARKS.md, "Beyond the prefetch spec"): on a
# ragged shape in the interpreter at small constants (6 tiles on 2 blocks, 4 k tiles each: the rings
# run across tiles; warpgroups:1 runs warpgroup 0 ahead, the order that exposes a refill racing
# warpgroup 1), and their PTX at the default constants through ptxas without spills.
HOPPER = ROOT / "tests" / "hopper"
FAST = {  # name: (spec, constants of the timed variant, schedules the interpreter runs)
    "prefetch": ("gemm_bf16_wgmma_store_prefetch.arg", {}, ("lockstep", "warpgroups:1")),
    "prefetch_n192": ("gemm_bf16_wgmma_store_prefetch.arg", {"BN": 192, "STAGES": 4}, ("warpgroups:1",)),
    "empty": ("gemm_bf16_wgmma_store_empty.arg", {}, ("lockstep", "warpgroups:1")),
    "direct": ("gemm_bf16_wgmma_direct_prefetch.arg", {}, ("warpgroups:1",)),
    # the interpreter's warpgroup schedules do not run a cluster's CTAs side by side: lockstep only
    "cluster": ("gemm_bf16_wgmma_store_cluster.arg", {}, ("lockstep",)),
}


@pytest.mark.parametrize("name", sorted(FAST))
def test_the_fast_variants_are_right_on_a_ragged_shape_in_the_interpreter(name):
    spec, consts, schedules = FAST[name]
    small = {"BN": 192 if consts.get("BN") == 192 else 64, "SMS": 2 * (2 if name == "cluster" else 1), "GROUP": 2}
    kern = compile_file(str(HOPPER / spec), consts | small)
    m, n, k = (150, 400, 200) if small["BN"] == 192 else (150, 136, 200)
    a, b, ref = bf16_inputs(m, n, k)
    for schedule in schedules:
        out = interp.run(kern, {"A": a, "B": b}, {"M": m, "N": n, "K": k}, schedule=schedule)["C"]
        assert not np.isnan(out).any(), schedule  # every element stored, nothing past the edges
        assert rel_err(out, ref) < 2.0 ** -9 + 1e-5, schedule  # C rounded to bf16 once
        assert np.array_equal(out, round_to(out, "bf16"))


@pytest.mark.parametrize("name", sorted(FAST))
def test_the_fast_variants_assemble_without_spills(name):
    spec, consts, _ = FAST[name]
    done = ptxas_sm90a(lower(compile_file(str(HOPPER / spec), consts or None)).ptx, "-v")
    assert "0 bytes spill stores, 0 bytes spill loads" in done.stderr, done.stderr


def test_a_stage_released_through_an_mbarrier_by_every_warpgroup_may_be_refilled():
    """Each consumer warpgroup arrives on `empty` after its wgmma_wait and the producing thread waits on
    it before the refill: that orders every warpgroup's retirement before the refill, as a barrier()
    would (it was a false alarm: the lockstep skeleton only counted barrier()). The twin where
    warpgroup 0 alone releases (count 1, thread 0 arrives) still refills under warpgroup 1's reads."""
    spec = HOPPER / "gemm_bf16_wgmma_store_empty.arg"
    small = {"BN": 64, "SMS": 2, "GROUP": 2}
    sizes = {"M": 150, "N": 136, "K": 200}  # 6 tiles on 2 blocks, 4 k tiles each: refills in every tile
    text = spec.read_text()
    one = text.replace("mbarrier_init(empty[s], WG)", "mbarrier_init(empty[s], 1)")
    one = re.sub(r"thread_id % 128 == 0:(\n\s+mbarrier_arrive)", r"thread_id == 0:\1", one)
    assert one.count("mbarrier_arrive") == text.count("mbarrier_arrive") and "% 128 == 0" not in one
    for source, want in ((text, "proved"), (one, "violated")):
        kern = compile_source(source, str(spec), small)
        rep = smt.verify(kern, shapes=sizes, checks=("stage-reuse",))
        (r,) = [r for r in rep.results if r.obligation == "stage-reuse"]
        assert r.status == want, rep.render_text()
    assert "warpgroup 1 may still be reading it" in r.message
