"""A reduction that multiplies factors must pair them: tags that carry the reduction's index.

`contract C[i, j] = sum(A[i, k] * B[k, j] for k)` says more than "every k once": A[i, k] meets
B[k, j] of the same k. With A tagged (i, *) and B (*, j) (what the contract implied until now,
and what a user may declare) nothing compared the k of the two factors: a GEMM that multiplies
A[i, k] with B[k ^ 8, j] took every k once, carried the right rows and columns, and was proved.
Now the implied tags carry k where the tag rules compare it ((i, k) and (k, j): the mma rule; x[i, k]
and y[i, k]: the elementwise rule), and a factor whose tag does not leaves the output contract
unknown. Each buggy kernel here is beside its correct twin, which stays proved.

A matrix-vector product's x is counted by reduction-coverage too: its elements ride on the row
axis A's columns walk (`a * reshape(x, 1, 256)`), where the analysis used to keep only A's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_reductions import GEMV

from argus_verify import ir, replay, smt
from argus_verify.frontend import compile_source

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "specs" / "gemm_simt.arg").read_text()
TAGS = ("    tag A[i, k] = (i, k)\n", "    tag B[k, j] = (k, j)\n", "    tag C[i, j] = (i, j) once\n")
ANCHOR = "        assert tag(a)[1] == kt * BK + coord(a)[1]\n"

# B's two 8-row halves of each k tile land in each other's place in shared memory: every k is
# still taken once, but A[i, k] meets B[k ^ 8, j]
LOAD_B = """        gb = load(B[k0 : k0 + BK, n0 : n0 + BN], tv=(256, BK * BN // 256):(BK * BN // 256, 1), mask=True)
        store(sA, ga)
        store(sB, gb)
"""
SWAP_B = """        gb1 = load(B[k0 : k0 + 8, n0 : n0 + BN], tv=(256, 8 * BN // 256):(8 * BN // 256, 1), mask=True)
        gb2 = load(B[k0 + 8 : k0 + 16, n0 : n0 + BN], tv=(256, 8 * BN // 256):(8 * BN // 256, 1), mask=True)
        store(sA, ga)
        store(sB[0 : 8, 0 : BN], gb2)
        store(sB[8 : 16, 0 : BN], gb1)
"""

ROWDOT = """
kernel rowdot(x: f32[M, N], y: f32[M, N]) -> out: f32[M]:
    requires N <= 32
    grid(M)
    block(32)
    contract out[i] = sum(x[i, k] * y[i, k] for k)
    r = block_id.x
    xs = load(x[r : r + 1, 0 : 32], tv=(32, 1):(1, 0), mask=True)
    ys = load(y[r : r + 1, 0 : 32], tv={ytv}, mask=True)
    s = reduce_sum(xs * ys, axis=1, scope=warp, lanes=0b11111)
    store(out[r : r + 1], reshape(s, 1), where=lane_id == 0)
"""


def gemm(tags: tuple | None, swapped: bool) -> str:
    """specs/gemm_simt.arg with `tags` instead of its own (None: no tag, the contract alone) and
    B's halves swapped or not."""
    assert all(t in GEMM for t in TAGS) and ANCHOR in GEMM and LOAD_B in GEMM
    src = GEMM.replace(ANCHOR, "")
    for old, new in zip(TAGS, tags or ("", "", ""), strict=True):
        src = src.replace(old, new)
    return src.replace(LOAD_B, SWAP_B) if swapped else src


def by_obligation(src: str):
    kernel = compile_source(src, "k.arg")
    rep = smt.verify(kernel)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return kernel, rep, out


def test_the_contract_implies_tags_that_carry_k_for_a_gemm():
    kernel = compile_source(gemm(None, False), "k.arg")
    assert kernel.tag_of("A").components == (ir.IVar("i"), ir.IVar("k"))
    assert kernel.tag_of("B").components == (ir.IVar("k"), ir.IVar("j"))


def test_an_untagged_gemm_pairing_the_wrong_k_is_violated_and_the_correct_one_proved():
    _, rep, by = by_obligation(gemm(None, False))
    assert "violated" not in {r.status for r in rep.results} and not rep.unknowns(), rep.render_text()
    assert by["output-contract"] == {"proved"}
    kernel, rep, by = by_obligation(gemm(None, True))
    bad = [r for r in rep.results if r.status == "violated"]
    assert [r.obligation for r in bad] == ["tag-assertion"], rep.render_text()
    assert "mma operands' tags do not line up" in bad[0].message
    assert replay.reproduce(kernel, bad[0])["status"] == "reproduced"


def test_declared_tags_that_star_k_leave_the_contract_unknown():
    star = ("    tag A[i, k] = (i, *)\n", "    tag B[k, j] = (*, j)\n", TAGS[2])
    for swapped in (False, True):  # the swapped kernel was proved with these tags
        _, rep, by = by_obligation(gemm(star, swapped))
        assert by["output-contract"] == {"unknown"}, rep.render_text()
        (res,) = [r for r in rep.results if r.obligation == "output-contract"]
        assert res.detail["unpaired"] == [["A", "k"], ["B", "k"]]
        assert rep.exit_code != 0


def test_declared_tags_that_name_another_function_of_k_are_not_trusted_for_the_pairing():
    shifted = (TAGS[0], "    tag B[k, j] = (k + 0 * j, j)\n", TAGS[2])
    _, rep, by = by_obligation(gemm(shifted, False))
    assert by["output-contract"] == {"unknown"}, rep.render_text()


@pytest.mark.parametrize("ytv, ok", [("(32, 1):(1, 0)", True),
                                     ("((16, 2), 1):((2, 1), 0)", False)])  # y's columns permuted
def test_an_untagged_row_dot_product_pairs_its_factors_by_the_elementwise_rule(ytv, ok):
    kernel, rep, by = by_obligation(ROWDOT.format(ytv=ytv))
    assert kernel.tag_of("y").components == (ir.IVar("i"), ir.IVar("k"))
    if ok:
        assert "violated" not in {r.status for r in rep.results} and not rep.unknowns(), rep.render_text()
    else:
        bad = [r for r in rep.results if r.status == "violated"]
        assert [r.obligation for r in bad] == ["tag-assertion"], rep.render_text()
        assert bad[0].location.line == 10


def test_a_tagged_matrix_vector_product_proves_coverage_of_x_too():
    src = GEMV.format(window="c0 : c0 + 256").replace("    tag y[i]", "    tag x[j] = (*, j)\n    tag y[i]", 1)
    _, rep, by = by_obligation(src)
    assert by["reduction-coverage"] == {"proved"}, rep.render_text()
    assert rep.exit_code == 0
    # the warp's reduction over half its lanes: x and A are both short
    _, rep, by = by_obligation(src.replace("lanes=0b11111", "lanes=0b01111"))
    assert by["reduction-coverage"] == {"violated"}, rep.render_text()


@pytest.mark.parametrize("contract, uses_mma, paired", [
    ("C[i, j] = sum(A[i, k] * B[k, j] for k)", True, {"A": {1}, "B": {0}}),
    ("C[i, j] = sum(A[i, k] * B[k, j] for k)", False, {"A": {1}, "B": {0}}),
    ("C[i, j] = sum(A[i, k] * B[j, k] for k)", False, {"A": {1}, "B": {1}}),  # elementwise rule
    ("C[i, j] = sum(A[i, k] * B[j, k] for k)", True, {}),  # an mma takes B transposed: other components
    ("C[i, j] = sum(A[i, k] for k)", False, {}),  # one factor: nothing to pair
    # attention: K is read at k and at e, so which components an mma compares depends on the kernel
    ("C[i, j] = sum(exp(sum(A[i, e] * K[k, e] for e)) * B[k, j] for k)", True, {}),
])
def test_which_factors_the_contract_pairs(contract, uses_mma, paired):
    src = ("kernel k(A: f32[M, L], B: f32[L, N], K: f32[L, L]) -> C: f32[M, N]:\n    grid(1)\n    block(32)\n"
           f"    contract {contract}\n")
    kernel = compile_source(src, "k.arg")
    assert {t: d for t, d in ir.paired_dims(kernel.contracts[0], uses_mma).items() if d} == paired
