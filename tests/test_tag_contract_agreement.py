"""Declared tags must say what the contract says (check_tag_agreement in smt/obligations/contract.py).

The output contract is proved by comparing tags, so a tag declaration that names another element
than the contract turns the proof into one about another computation. Each case: a declaration
that disagrees (violated at its line, with the indices where it does) beside the one that agrees.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_file, compile_source
from argus_verify.smt.obligations.contract import check_tag_agreement

ROOT = Path(__file__).resolve().parents[1]

# out[j, i] = x[i, j] on a square matrix, computed by a copy that does not transpose
COPY = """\
kernel tr(x: f32[N, N]) -> out: f32[N, N]:
    grid(cdiv(N, 32), cdiv(N, 32))
    block(256)
    tag x[i, j] = (i, j)
    {out_tag}
    contract out[j, i] = x[i, j]
    m0 = block_id.y * 32
    n0 = block_id.x * 32
    a = load(x[m0 : m0 + 32, n0 : n0 + 32], tv=(256, 4):(1, 256), mask=True)
    store(out[m0 : m0 + 32, n0 : n0 + 32], a, mask=True)
"""

VEC = """\
kernel v(x: f32[M, N], b: f32[N]) -> out: f32[M, N]:
    grid(1)
    block(32)
    tag x[i, j] = {x_tag}
    tag b[j] = {b_tag}
    tag out[i, j] = (i, j) once
    contract out[i, j] = x[i, j] + b[j]
"""


def test_tags_that_describe_a_copy_do_not_prove_a_transpose():
    # with out[j, i] tagged (j, i) the copy carries exactly the tags the output asks for: the
    # output-contract proof held, and the contract (a transpose) is false
    rep = smt.verify(compile_source(COPY.format(out_tag="tag out[j, i] = (j, i) once"), "tr.arg"))
    bad = [r for r in rep.violations() if r.obligation == "output-contract"]
    assert [r.location.line for r in bad] == [4], rep.render_text()
    assert "component 0 of the tag of x[i, j] (i) and of out[j, i] (j) differ" in bad[0].message
    values = bad[0].detail["values"]
    assert values["i"] != values["j"]
    # the tag that says the transpose: the copy is now what the tags reject
    rep = smt.verify(compile_source(COPY.format(out_tag="tag out[j, i] = (i, j) once"), "tr.arg"))
    assert not [r for r in rep.results if "declared tags disagree" in r.message]
    assert [r.obligation for r in rep.violations()] == ["output-contract"]
    assert rep.violations()[0].location.line == 10  # at the store


@pytest.mark.parametrize("x_tag, b_tag, line, component", [
    ("(i, j)", "(*, j)", None, None),
    ("(i, j)", "(j,)", 5, 0),  # b's column in the row's place
    ("(i, j + 1)", "(*, j)", 4, 1),  # x's component is off by one
    ("(i, j)", "(*, j + 0)", None, None),  # equal as integers, not as text
])
def test_each_declared_component_over_output_indices_must_equal_the_outputs(x_tag, b_tag, line, component):
    results = check_tag_agreement(compile_source(VEC.format(x_tag=x_tag, b_tag=b_tag), "v.arg"), 10.0)
    if line is None:
        assert results == []
        return
    assert [(r.status, r.location.line, r.detail["component"]) for r in results] == [("violated", line, component)]


def test_an_input_read_at_a_reduction_variable_is_not_compared_position_by_position():
    # out[j, l] = sum(x[i, j, l] for i): x's (i, j, l) loses its first component to the reduction,
    # so its j sits where out has l; that is no disagreement
    src = ("kernel k(x: f32[M, N, L]) -> out: f32[N, L]:\n    grid(1)\n    block(32)\n"
           "    tag x[i, j, l] = (i, j, l)\n    tag out[j, l] = (j, l) once\n"
           "    contract out[j, l] = sum(x[i, j, l] for i)\n")
    assert check_tag_agreement(compile_source(src, "k.arg"), 10.0) == []


@pytest.mark.parametrize("spec", ["specs/transpose_smem.arg", "specs/gemm_simt.arg", "specs/row_softmax.arg",
                                  "specs/xor_swizzle_transpose.arg", "tests/hopper/gemm_bf16_wgmma_store.arg"])
def test_the_specs_tags_agree_with_their_contracts(spec):
    # components over a reduction's variable (A's k) are the reduction's: not compared
    assert check_tag_agreement(compile_file(ROOT / spec), 10.0) == []
