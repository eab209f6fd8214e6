"""How often a loop's iterations reach a reduction: coverage counts one iteration's window.

A reduction whose value is assigned in the loop that walks its dimension, not accumulated into
a value from before the loop, keeps only the last iteration's window:

    for c0 in range(0, N, CHUNK):
        xs = load(x[row : row + 1, c0 : c0 + CHUNK], ...)
        acc = reduce_sum(xs, axis=1)        # acc = acc + reduce_sum(xs, axis=1) is meant

Coverage counted one iteration's window (complete) and the loop's range (complete), and the kernel
was proved, for a row sum and for a GEMM (`acc = mma(a, b, zeros(...))`). Now a value assigned in
the loop and read after it makes a second iteration a violation, with sizes where it happens; the
witness replays against the contract. The converse: an accumulator that adds the same window at
every iteration of a loop that does not move along the dimension counts each element once per
iteration (proved before; a violation for a sum now, still proved for max). Each buggy kernel is
beside its correct twin."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import replay, smt
from argus_verify.frontend import compile_source

ROOT = Path(__file__).resolve().parents[1]
ROWSUM = (ROOT / "specs" / "reduce_sum.arg").read_text()
GEMM = (ROOT / "specs" / "gemm_simt.arg").read_text()
ROW_INIT = "    acc = zeros(f32[1, 1], tv=(256, CHUNK // 256):(0, 0))\n"
ROW_ACC = "        acc = acc + reduce_sum(xs, axis=1)"
GEMM_INIT = "    acc = zeros(f32[BM, BN], tv=((BN // TN, BM // TM), (TN, TM)):((TN, TM * BN), (1, BN)))\n"
GEMM_ACC = "        acc = mma(a, b, acc)"


def rowsum_last(requires: str = "") -> str:
    assert ROW_INIT in ROWSUM and ROW_ACC in ROWSUM
    src = ROWSUM.replace(ROW_INIT, "").replace(ROW_ACC, "        acc = reduce_sum(xs, axis=1)")
    return src.replace("    grid(M)\n", f"    {requires}\n    grid(M)\n") if requires else src


def gemm_last() -> str:
    assert GEMM_INIT in GEMM and GEMM_ACC in GEMM
    z = GEMM_INIT.strip().split("= ", 1)[1]
    return GEMM.replace(GEMM_INIT, "").replace(GEMM_ACC, f"        z = {z}\n        acc = mma(a, b, z)")


def coverage(src: str):
    kernel = compile_source(src, "k.arg")
    rep = smt.verify(kernel)
    return kernel, rep, [r for r in rep.results if r.obligation == "reduction-coverage"]


def gemm_last_init_kept() -> str:
    """The same, with the accumulator's initialisation still before the loop (an outside probe's
    mma kernel: it was unknown, "carried other than as an accumulator")."""
    z = GEMM_INIT.strip().split("= ", 1)[1]
    return GEMM.replace(GEMM_ACC, f"        z = {z}\n        acc = mma(a, b, z)")


@pytest.mark.parametrize("make", [rowsum_last, gemm_last, gemm_last_init_kept],
                         ids=["row_sum", "gemm", "gemm_init_kept"])
def test_only_the_last_iteration_reaching_the_output_is_violated_and_replays(make):
    kernel, rep, cov = coverage(make())
    bad = [r for r in cov if r.status == "violated"]
    assert len(bad) == 1 and "only the last of the" in bad[0].message, rep.render_text()
    assert bad[0].detail["last_only"] == "acc"
    assert replay.reproduce(kernel, bad[0])["status"] == "reproduced"


@pytest.mark.parametrize("src", [ROWSUM, GEMM], ids=["row_sum", "gemm"])
def test_the_accumulating_twin_stays_proved(src):
    _, rep, cov = coverage(src)
    assert [r.status for r in cov] == ["proved"], rep.render_text()


def test_a_loop_that_runs_once_for_every_admissible_size_keeps_its_proof():
    _, rep, cov = coverage(rowsum_last("requires N <= CHUNK"))
    assert [r.status for r in cov] == ["proved"], rep.render_text()


REPEAT = """\
kernel repeat_window(x: f32[M, N]) -> out: f32[M]:
    requires N <= 1024
    grid(M)
    block(256)
    contract out[i] = {op}(x[i, j] for j)
    row = block_id.x
    acc = full(f32[1, 1], {init}, tv=(256, 4):(0, 0))
    for c0 in range(0, N, 512):
        xs = load(x[row : row + 1, 0 : 1024], tv=(256, 4):(4, 1), mask=True, other={init})
        acc = {op}(acc, reduce_{op}(xs, axis=1))
    w = reduce_{op}(acc, axis=1, scope=warp, lanes=0b11111)
    part = shared(f32[1, 8])
    store(part[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)
    barrier()
    ps = load(part, tv=(256, 8):(0, 1))
    total = reduce_{op}(ps, axis=1)
    store(out[row : row + 1], reshape(total, 1), where=thread_id == 0)
"""


def test_a_loop_that_adds_the_same_window_at_every_iteration_is_violated_for_a_sum():
    # the whole row is loaded at every iteration of a loop that does not move along it: for
    # N in 513..1024 the loop runs twice and every element is summed twice
    src = REPEAT.format(op="sum", init="0.0").replace("acc = sum(acc, ", "acc = acc + (")  # (no sum(a, b))
    kernel, rep, cov = coverage(src)
    bad = [r for r in cov if r.status == "violated"]
    assert len(bad) == 1 and bad[0].detail["repeated"] == "acc", rep.render_text()
    assert replay.reproduce(kernel, bad[0])["status"] == "reproduced"


def test_the_same_repetition_under_max_keeps_its_proof():
    _, rep, cov = coverage(REPEAT.format(op="max", init="-inf"))
    assert [r.status for r in cov] == ["proved"], rep.render_text()
