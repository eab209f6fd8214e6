"""The TMA-store epilogue: `tma_store`, `bulk_commit`, `bulk_wait` (tests/hopper/gemm_bf16_wgmma_store.arg).

The interpreter reads a store's shared tile as late as the protocol allows (specs/buggy/wgmma_store_*
are wrong there: tests/test_hopper.py runs them with the other wgmma bugs); here: the correct kernel
on ragged shapes, proved at the buggy specs' constants, its PTX through ptxas, the front end's
errors, and the runtime building the output's tensor map."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hopper_util import bf16_inputs, ptxas_sm90a, rel_err

from argus_verify import smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_file, compile_source
from argus_verify.lowering.ptx import lower
from argus_verify.runtime import interp
from argus_verify.semantics import round_to
from argus_verify.smt.protocol import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store.arg"
SMALL = {"BM": 64, "BN": 128, "BK": 64, "STAGES": 2, "WG": 1, "SMS": 2, "GROUP": 2}  # the buggy specs' constants
BF16_OUT = 2.0 ** -9 + 1e-5  # C rounded to bf16: relative error at most 2^-9 per element, on the f32 sums


@pytest.mark.parametrize("consts,m,n,k", [(SMALL, 150, 200, 328), (SMALL, 130, 8, 8),
                                          ({"SMS": 3, "GROUP": 2}, 300, 264, 200)])
def test_store_epilogue_in_the_interpreter_on_ragged_shapes(consts, m, n, k):
    a, b, ref = bf16_inputs(m, n, k)
    out = interp.run(compile_file(str(SPEC), consts), {"A": a, "B": b}, {"M": m, "N": n, "K": k})["C"]
    assert not np.isnan(out).any()  # every element written, the clipped boxes wrote nothing outside
    assert rel_err(out, ref) < BF16_OUT
    assert np.array_equal(out, round_to(out, "bf16"))  # C holds bf16 values


def test_store_epilogue_protocol_and_the_store_reads_are_proved_where_the_buggy_specs_are_violated():
    """The persistent kernel's tag obligations are beyond what the solver decides in time (its grouped
    tile order: tests/golden); what the store's read of sC takes, it proves for all sizes."""
    k = compile_file(str(SPEC), SMALL)
    checks = (*PROTOCOL, "race", "uninitialised-read", "bounds", "reduction-operator", "padding")
    res = smt.verify(k, checks=checks).results
    assert {r.obligation for r in res} == set(checks)
    assert all(r.status == "proved" for r in res), [(r.obligation, r.message) for r in res if r.status != "proved"]
    box = [r for r in res if r.obligation == "tma-box" and r.location.line == 69]
    assert box and "read sC exactly" in box[0].message
    # the store's read of sC: ordered after the epilogue's writes by the barrier (proved here), and
    # before sC is rewritten by bulk_wait + barrier (bulk-group, which these results rely on)
    on_sc = [r for r in res if (r.obligation == "race" and "on sC" in r.message)
             or (r.obligation == "uninitialised-read" and r.location.line == 69)]
    assert len(on_sc) == 2 and all("bulk-group" in r.detail["relies_on"] for r in on_sc)


EPILOGUE = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_tma_epilogue.arg"


def test_the_solver_follows_tags_through_the_tma_store_for_all_sizes():
    """One tile per block (specs/hopper/gemm_bf16_wgmma.arg) with the TMA-store epilogue: every obligation
    proved, the tag ones by the solver through TMA, wgmma and the store, relying on bulk-group too
    (specs/buggy/tma_store_neighbour_tile.arg and tma_store_every_thread.arg are its buggy twins)."""
    rep = smt.verify(compile_file(str(EPILOGUE)))
    assert all(r.status == "proved" for r in rep.results), [(r.obligation, r.message) for r in rep.results
                                                             if r.status != "proved"]
    contract = [r for r in rep.results if r.obligation == "output-contract"]
    assert contract and all("bulk-group" in r.detail["relies_on"] and "for all sizes" in r.message for r in contract)
    once = [r for r in rep.results if r.obligation == "output-once"]
    assert {r.location.line for r in once} >= {56}  # the store's elements, each written once


def test_the_tma_store_is_interpreted_correctly_on_a_ragged_shape():
    a, b, ref = bf16_inputs(150, 200, 136)
    out = interp.run(compile_file(str(EPILOGUE), {"BN": 64, "STAGES": 2}), {"A": a, "B": b},
                     {"M": 150, "N": 200, "K": 136})["C"]
    assert not np.isnan(out).any() and rel_err(out, ref) < BF16_OUT


def test_multicast_is_beyond_the_tag_encoding_and_says_so():
    k = compile_file(str(ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_cluster.arg"))
    res = smt.verify(k, checks=("output-contract", "race")).results
    assert res and all(r.status == "unknown" and "multicast between CTAs is not encoded" in r.message for r in res)


def test_store_epilogue_lowers_to_bulk_tensor_stores_and_ptxas_takes_it():
    lk = lower(compile_file(str(SPEC)))
    ptx = lk.ptx
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 4  # 4 boxes of 64 columns
    for needle in ("cp.async.bulk.commit_group;", "cp.async.bulk.wait_group.read 0;", "fence.proxy.async.shared::cta;",
                   ".param .align 64 .b8 gemm_bf16_wgmma_store_param_tmap2_C[128]"):
        assert needle in ptx, needle
    assert [(m.tensor, m.box_rows, m.box_cols, m.swizzle) for m in lk.tmaps][-1] == ("C", 128, 64, 128)
    ptxas_sm90a(ptx)


HEAD = """kernel k<BM=64, BN=64>(A: bf16[M, N]) -> C: bf16[M, N]:
    grid(1)
    block(128)
    sC = shared(bf16[BM, BN], layout=Swizzle(3, 3, 3) o row_major(BM, BN))
"""


@pytest.mark.parametrize("line,message", [
    ("tma_store(A[0 : BM, 0 : BN], sC[0 : BM, 0 : BN])", "not an output"),
    ("tma_store(C[0 : BM, 0 : 32], sC[0 : BM, 0 : BN])", "differ"),
    ("tma_store(sC[0 : BM, 0 : BN], C[0 : BM, 0 : BN])", "global view"),
    ("bulk_wait(9)", "0..7"),
])
def test_bad_tma_stores_are_reported_at_their_line(line, message):
    with pytest.raises(ArgusError) as e:
        compile_source(HEAD + "    " + line + "\n", "t.arg")
    assert message in str(e.value) and e.value.span.line == 5


def test_a_tensor_map_without_cuda_python_is_a_clear_usage_error(monkeypatch):
    from argus_verify.runtime import cuda_backend
    from argus_verify.runtime.tma import DriverProgram, TmaUnavailable, param_buffers

    lk = lower(compile_file(str(SPEC)))
    prog = cuda_backend.GpuProgram(lk.ptx, lk.entry, lk.params, lk.block, lk.dynamic_shared_bytes, tmaps=lk.tmaps)
    monkeypatch.setitem(sys.modules, "cuda", None)  # import cuda... fails
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(TmaUnavailable, match="cuda-python"):
        param_buffers(prog, {"A": 1 << 20, "B": 2 << 20, "C": 3 << 20}, {"M": 8, "N": 8, "K": 8},
                      {"A": (8, 8), "B": (8, 8), "C": (8, 8)})
    with pytest.raises(TmaUnavailable, match="cuda-python"):
        DriverProgram(prog)
    with pytest.raises(ValueError, match="tensor maps"):  # the PyCUDA argument list is not for such kernels
        cuda_backend.launch_args(prog, {}, {"M": 8, "N": 8, "K": 8}, {})
    assert not isinstance(TmaUnavailable("x"), RuntimeError)  # an ArgusError: exit code 2 in the CLI


@pytest.mark.cuda
@pytest.mark.parametrize("shape", ["M=150,N=200,K=328", "M=257,N=264,K=200"])
def test_argus_run_builds_the_tensor_maps_on_the_gpu(shape):
    pytest.importorskip("cuda.bindings")
    from argus_verify.runtime.cuda import cuda_available

    if not cuda_available():
        pytest.skip("no GPU")
    argus = [sys.executable, "-c", "from argus_verify.cli import entry; entry()"]
    done = subprocess.run([*argus, "run", str(SPEC), "--backend", "cuda", "--allow-unknown", "--shape", shape],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "PASS" in done.stdout, done.stdout + done.stderr


@pytest.mark.cuda
def test_python_api_builds_the_tensor_maps_on_the_gpu(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("cuda.bindings")
    from argus_verify.runtime.cuda import cuda_available

    if not cuda_available():
        pytest.skip("no GPU")
    import argus_verify

    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    k = argus_verify.load(SPEC)
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(257, 200, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(200, 264, device="cuda", generator=g).to(torch.bfloat16)
    c = k(a, b, allow_unknown=True)  # torch tensors: zero copy, the maps over their addresses
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert c.dtype == torch.bfloat16 and not torch.isnan(c).any()
    assert float((c.double() - ref).norm() / ref.norm()) < BF16_OUT
    host = k(a.float().cpu().numpy(), b.float().cpu().numpy(), backend="cuda", allow_unknown=True)  # copied
    assert rel_err(host, ref.cpu().numpy()) < BF16_OUT


COPY = """kernel tma_copy<BM=64, BN=64>(A: bf16[M, N]) -> C: bf16[M, N]:
    requires N % 8 == 0
    grid(cdiv(N, BN), cdiv(M, BM))
    block(128)
    sC = shared(bf16[BM, BN], layout=Swizzle(3, 3, 3) o row_major(BM, BN))
    full = mbarrier(1)
    if thread_id == 0:
        mbarrier_init(full[0], 1)
        fence_mbarrier_init()
    barrier()
    m0 = block_id.y * BM
    n0 = block_id.x * BN
    if thread_id == 0:
        mbarrier_expect_tx(full[0], BM * BN * 2)
        tma_load(sC[0 : BM, 0 : BN], A[m0 : m0 + BM, n0 : n0 + BN], full[0])
    mbarrier_wait(full[0], 0)
    if thread_id == 0:
        tma_store(C[m0 : m0 + BM, n0 : n0 + BN], sC[0 : BM, 0 : BN])
        bulk_commit()
        bulk_wait(0, writes=True)
"""


def test_a_tma_only_copy_clips_ragged_tiles_and_waits_for_the_writes():
    from argus_verify.printer import format_kernel

    k = compile_source(COPY, "copy.arg")
    a = round_to(np.random.default_rng(1).standard_normal((70, 136)).astype(np.float32), "bf16")
    out = interp.run(k, {"A": a}, {"M": 70, "N": 136})["C"]
    assert np.array_equal(out, a)  # the boxes past the edges wrote nothing (C is NaN-poisoned before)
    res = smt.verify(k, checks=PROTOCOL).results
    assert all(r.status == "proved" for r in res), [(r.obligation, r.message) for r in res if r.status != "proved"]
    assert "bulk_wait(0, writes=True)" in format_kernel(k)
    ptx = lower(k).ptx
    assert "cp.async.bulk.wait_group 0;" in ptx and ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 1


def test_a_tma_load_under_a_thread_and_tile_condition_has_one_issuer():
    """`if thread_id == 0 and tile == block_id.x` (the prefetch spec): the conjunct of the thread
    bounds the issuers to thread 0, so the solver follows these loads (a condition that mixes the
    thread with more, with no such conjunct, stays beyond the encoding)."""
    from argus_verify.smt.analysis import Analysis, AnalysisError
    from argus_verify.smt.hopper import TmaWrite

    prefetch = ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_store_prefetch.arg"
    an = Analysis(compile_file(str(prefetch), SMALL))
    assert sorted((w.node.span.line, w.issuer) for w in an.sh_writes["sA"] if isinstance(w, TmaWrite)) == [
        (54, 0), (68, 0), (81, 0)]
    issue = "    if thread_id == 0:\n        mbarrier_expect_tx"
    mixed = COPY.replace(issue, issue.replace("thread_id == 0", "thread_id < M"))
    assert mixed != COPY
    with pytest.raises(AnalysisError, match="not issued by exactly one thread"):
        Analysis(compile_source(mixed, "mixed.arg"))
