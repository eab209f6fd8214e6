"""Tags of inputs that a contract reads along fewer axes than the output: `*` components.

A bias b[j] added to every row, or a vector x[j] in a matrix-vector product, was left untagged:
an untagged element agrees with every tag, so a kernel that read b[j + 1] was proved. Now such an
input takes the tag its contract implies (b[j]: (*, j) beside out's (i, j)), a `tag x[j] = (*, j)`
declares one, and a contract input with neither leaves the output contract unknown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_reductions import BIAS, GEMV

from argus_verify import ir, replay, smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_source
from argus_verify.printer import format_kernel


def bias(window: str) -> str:
    """tests/test_reductions.py's bias add, reading b at `window`."""
    src = BIAS.format(value="xs + reshape(bs, 1, 128)")
    return src.replace("b[c0 : c0 + 128]", f"b[{window}]", 1)

def gemv(xtag: str, window: str) -> str:
    """tests/test_reductions.py's matrix-vector product, with `xtag` declared before y's tag."""
    return GEMV.format(window=window).replace("    tag y[i]", f"    {xtag}\n    tag y[i]", 1)


def verdicts(src: str) -> tuple:
    kernel = compile_source(src, "k.arg")
    rep = smt.verify(kernel)
    by = {}
    for r in rep.results:
        by.setdefault(r.obligation, []).append(r)
    return kernel, rep, by


def statuses(results) -> set:
    return {r.status for r in results}


def test_a_bias_takes_the_tag_its_contract_implies():
    kernel = compile_source(bias("c0 : c0 + 128"), "k.arg")
    decl = kernel.tag_of("b")
    assert decl is not None and decl.index_vars == ("j",)
    assert decl.components == (None, ir.IVar("j"))
    assert [t.tensor for t in kernel.tags] == ["x", "out"]  # derived, not declared


def test_a_bias_read_one_element_off_is_violated_and_the_right_one_proved():
    _, rep, _ = verdicts(bias("c0 : c0 + 128"))
    assert rep.exit_code == 0, rep.render_text()
    kernel, rep, by = verdicts(bias("c0 + 1 : c0 + 129"))
    assert [(r.obligation, r.status) for r in rep.results if r.status != "proved"] == \
        [("tag-assertion", "violated")], rep.render_text()
    bad = by["tag-assertion"][0]
    assert bad.location.line == 13
    assert "b[1] (tag (*, 1))" in rep.render_text()
    assert replay.reproduce(kernel, bad)["status"] == "reproduced"


def test_an_untagged_vector_at_a_reduction_variable_leaves_the_contract_unknown():
    # x[j] is read at the reduction's variable: no tag follows from y's, so none is derived
    _, rep, by = verdicts(gemv("", "c0 : c0 + 256"))
    (res,) = by["output-contract"]
    assert res.status == "unknown"
    assert res.detail["untagged"] == ["x"]
    assert "declare tag x[j] = (*, j)" in res.message  # in the convention of A's tag
    assert rep.exit_code == 3


def test_a_declared_broadcast_tag_checks_the_vector_window():
    _, rep, by = verdicts(gemv("tag x[j] = (*, j)", "c0 : c0 + 256"))
    assert statuses(by["output-contract"]) == {"proved"}
    assert statuses(by["tag-assertion"]) == {"proved"}
    assert "violated" not in {r.status for r in rep.results}
    kernel, rep, by = verdicts(gemv("tag x[j] = (*, j)", "c0 + 1 : c0 + 257"))
    bad = [r for r in by["tag-assertion"] if r.status == "violated"]
    assert len(bad) == 1 and bad[0].location.line == 14, rep.render_text()
    assert replay.reproduce(kernel, bad[0])["status"] == "reproduced"


@pytest.mark.parametrize("contract, derived", [
    ("out[i, j] = x[i, j] + b[j]", (None, ir.IVar("j"))),
    ("out[i, j] = x[i, j] * b[i]", (ir.IVar("i"), None)),
    ("out[i, j] = x[i, j] + b[j] * b[j]", (None, ir.IVar("j"))),
    ("out[i, j] = x[i, j] + b[j] + b[i]", None),  # read at two index tuples
    ("out[i, j] = x[i, j] + sum(b[k] for k)", None),  # at a reduction variable
])
def test_which_contracts_imply_a_tag(contract, derived):
    src = (f"kernel k(x: f32[M, N], b: f32[N]) -> out: f32[M, N]:\n    grid(1)\n    block(32)\n"
           f"    tag x[i, j] = (i, j)\n    tag out[i, j] = (i, j) once\n    contract {contract}\n")
    decl = compile_source(src, "k.arg").tag_of("b")
    assert (decl.components if decl is not None else None) == derived
    assert ir.untagged_contract_inputs(compile_source(src, "k.arg")) == ([] if derived else ["b"])


def test_no_tag_is_derived_without_an_output_tag():
    # x's tag may follow another convention than the contract's indices: out's is not guessed
    src = ("kernel k(x: f32[M, N], b: f32[N]) -> out: f32[M, N]:\n    grid(1)\n    block(32)\n"
           "    tag x[i, j] = (i, j)\n    contract out[i, j] = x[i, j] + b[j]\n")
    assert compile_source(src, "k.arg").tag_of("b") is None


def test_a_declared_star_prints_and_round_trips():
    src = gemv("tag x[j] = (*, j)", "c0 : c0 + 256")
    kernel = compile_source(src, "k.arg")
    assert kernel.tag_of("x").components == (None, ir.IVar("j"))
    assert "tag x[j] = (*, j)" in format_kernel(kernel)


HEAD = "kernel k(x: f32[N], A: f32[M, N]) -> out: f32[M, N]:\n    grid(1)\n    block(32)\n"


@pytest.mark.parametrize("line, col, message", [
    ("tag out[i, j] = (*, j) once", 22, "an output's tag names every component; '*' is for inputs"),
    ("tag x[j] = (*,)", 16, "a tag needs a component that is not '*'"),
    ("q = *", 9, "'*' stands only for a component of an input's tag that matches any value"),
])
def test_star_outside_an_input_tag_is_an_error(line, col, message):
    with pytest.raises(ArgusError) as info:
        compile_source(HEAD + f"    {line}\n", "k.arg")
    err = info.value
    assert (err.span.line, err.span.col) == (4, col), err
    assert err.message.startswith(message)


# -- kernels that declare no tag at all -------------------------------------------------------------

SPECS = Path(__file__).resolve().parent.parent / "specs"


def untagged(spec: str) -> str:
    """A spec with its `tag` lines and its assertions over tags removed: what a user who writes
    only the contract gets (an assertion over tags that are not there is vacuous: below)."""
    return "".join(ln for ln in (SPECS / spec).read_text().splitlines(keepends=True)
                   if not ln.startswith("    tag ") and not ln.lstrip().startswith("assert tag("))


@pytest.mark.parametrize("spec", ["vecadd.arg", "reduce_sum.arg", "row_softmax.arg", "transpose_smem.arg",
                                  "xor_swizzle_transpose.arg", "gemm_simt.arg", "thread_row_max.arg"])
def test_a_correct_spec_without_tags_is_proved_by_the_tags_its_contract_implies(spec):
    kernel = compile_source(untagged(spec), spec)
    assert not kernel.tags
    rep = smt.verify(kernel)
    assert rep.exit_code == 0, rep.render_text()
    out = kernel.contracts[0].tensor
    assert kernel.tag_of(out).components == tuple(ir.IVar(v) for v in kernel.contracts[0].index_vars)


@pytest.mark.parametrize("spec, old, new, line", [
    # each was proved before the tags were derived: nothing compared the data with the contract
    ("reduce_sum.arg", "x[row : row + 1, c0", "x[row + 1 : row + 2, c0", 19),  # the next row's sum
    ("vecadd.arg", "y[base : base + BLOCK]", "y[base + 1 : base + BLOCK + 1]", 11),  # y one element off
    ("transpose_smem.arg", "store(out[n0 : n0 + T, m0 : m0 + T]", "store(out[m0 : m0 + T, n0 : n0 + T]", 17),
])
def test_a_wrong_spec_without_tags_is_violated(spec, old, new, line):
    src = untagged(spec)
    assert old in src
    kernel = compile_source(src.replace(old, new, 1), spec)
    rep = smt.verify(kernel)
    bad = rep.violations()
    assert bad and rep.exit_code == 1, rep.render_text()
    assert line in {r.location.line for r in bad}, rep.render_text()
    # a sum is no copy of an input element: its witness cannot be replayed element by element
    assert {replay.reproduce(kernel, r)["status"] for r in bad} <= {replay.REPRODUCED, replay.UNCHECKED}


def test_an_input_read_at_a_reduction_variable_keeps_its_other_components():
    src = ("kernel k(x: f32[M, N]) -> out: f32[M]:\n    grid(1)\n    block(32)\n"
           "    tag out[r] = (r,)\n    contract out[i] = sum(x[i, k] for k)\n")
    decl = compile_source(src, "k.arg").tag_of("x")
    assert decl.index_vars == ("r", "*1") and decl.components == (ir.IVar("r"), None)


def test_an_untagged_output_beside_declared_tags_is_unknown():
    src = untagged("vecadd.arg").replace("    contract", "    tag x[i] = (i,)\n    contract", 1)
    rep = smt.verify(compile_source(src, "vecadd.arg"))
    (res,) = [r for r in rep.results if r.obligation == "output-contract"]
    assert res.status == "unknown" and res.detail["untagged"] == ["out"]
    assert "declare tag out[i] = (i,) once" in res.message


def test_an_assertion_over_a_component_that_is_never_present_is_vacuous():
    # A's k component declared '*': `assert tag(a)[1] == ...` held only because the component is
    # never there (an untagged A did the same); the spec as written stays proved
    src = (SPECS / "gemm_pipelined.arg").read_text()
    rep = smt.verify(compile_source(src, "gemm_pipelined.arg"))
    assert {r.status for r in rep.results if r.obligation == "tag-assertion"} == {"proved"}
    star = src.replace("    tag A[i, k] = (i, k)", "    tag A[i, k] = (i, *)", 1)
    assert star != src
    rep = smt.verify(compile_source(star, "gemm_pipelined.arg"))
    vac = [r for r in rep.results if r.status == "vacuous"]
    assert [(r.obligation, r.location.line) for r in vac] == [("tag-assertion", 41)], rep.render_text()
    assert vac[0].detail["components"] == ["tag(a)[1]"]
    assert rep.exit_code == 1
    assert "gemm_pipelined.arg:41:9: vacuous: the assertion checks nothing" in rep.render_text()


def test_a_contract_output_left_partly_unwritten_is_violated():
    # without `once` nothing asked for every element to be written: a block index on the wrong axis
    # left all but the first tile unwritten, and the kernel was proved (a mutation study found 20
    # such mutants among the kernels above); the contract states every element's value
    src = untagged("vecadd.arg")
    rep = smt.verify(compile_source(src, "vecadd.arg"))
    cover = [r for r in rep.results if r.obligation == "output-once"]
    assert [r.status for r in cover] == ["proved"] and "every element of out is written" in cover[0].message
    bad = src.replace("base = block_id.x * BLOCK", "base = block_id.y * BLOCK", 1)
    assert bad != src
    rep = smt.verify(compile_source(bad, "vecadd.arg"))
    (res,) = [r for r in rep.results if r.obligation == "output-once"]
    assert res.status == "violated" and res.location.line == 6  # the contract
    assert "an element of out is never written" in res.message


def test_an_input_reduced_along_its_first_axis_keeps_its_other_axes_in_place():
    # a column sum with the contract only: x[i, j] carries (*, j), as the reduction along axis 0
    # stars that axis and leaves j where the kernel's tile has it (the output's position would
    # have put j first, and the reduction would have starred it: a false violation)
    src = ("kernel colsum<CH=8>(x: f32[M, N]) -> out: f32[N]:\n    grid(cdiv(N, 256))\n    block(256)\n"
           "    contract out[j] = sum(x[i, j] for i)\n    c0 = block_id.x * 256\n"
           "    acc = zeros(f32[1, 256], tv=(256, (1, CH)):(1, (1, 0)))\n"
           "    for r0 in range(0, M, CH):\n"
           "        xs = load(x[r0 : r0 + CH, c0 : c0 + 256], tv=(256, (1, CH)):(1, (1, 256)), mask=True)\n"
           "        acc = acc + reduce_sum(xs, axis=0)\n"
           "    store(out[c0 : c0 + 256], reshape(acc, 256), mask=True)\n")
    kernel = compile_source(src, "colsum.arg")
    assert kernel.tag_of("x").components == (None, ir.IVar("j"))
    rep = smt.verify(kernel)
    assert rep.exit_code == 0, rep.render_text()
    wrong = src.replace("x[r0 : r0 + CH, c0 : c0 + 256]", "x[r0 : r0 + CH, c0 + 1 : c0 + 257]", 1)
    rep = smt.verify(compile_source(wrong, "colsum.arg"))
    assert "output-contract" in {r.obligation for r in rep.violations()}, rep.render_text()
