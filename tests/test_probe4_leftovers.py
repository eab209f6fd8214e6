"""The fourth outside probe's leftovers (VERIFICATION.md, "Fourth outside probe"), each kernel with
its bug beside a correct neighbour that must be proved. The probe's kernels are under
tests/probe4/ (with their references: `argus test` agrees with the verdicts asserted here).

* padding in f32: a padding value whose products overflow (3e38 * 3 is inf, inf - inf NaN) is not
  the identity, although over the reals it cancels (`ov6`: was a false proof);
* padding under `requires`: a masked load that can never pad (`requires N == COLS`) brings no
  padding (`padreq`, `ln2`: were false alarms);
* a loop over the reduced dimension from a negative, masked index (`cs_c2`: was a false alarm);
* coverage of `b + a - a` (`sub1`: was a false alarm);
* one output's coverage bug is reported at that output's contract only (`mo_m11`);
* padding and operator violations print a witness with words in it, never an empty one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

HERE = Path(__file__).resolve().parent / "probe4"
REDUCTIONS = ("reduction-coverage", "reduction-operator", "padding")


def report(text: str):
    return smt.verify(compile_source(text, "k.arg"), timeout_s=10, jobs=1)


def verdicts(text: str) -> dict:
    """obligation -> the set of its statuses (every obligation of the kernel)."""
    out: dict = {}
    for r in report(text).results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


def kernel(name: str) -> str:
    return (HERE / f"{name}.arg").read_text()


def all_proved(v: dict) -> bool:
    return all(s == {"proved"} for ob, s in v.items() if ob not in ("uncoalesced", "bank-conflict"))


# -- 1. padding values that overflow f32 ------------------------------------------------------------

def test_padding_that_overflows_f32_is_violated():
    # b * 3 - a * 2 with b padded 2e38 and a 3e38: 6e38 - 6e38 = 0 over the reals, inf - inf = NaN in f32
    v = verdicts(kernel("ov6"))
    assert v["padding"] == {"violated"}, v


@pytest.mark.parametrize("a, b", [
    ("6.0", "4.0"),                                            # 12 - 12 = 0
    ("1.9014759003423441e30", "1.2676506002282294e30"),        # 1.5 * 2^100 and 2^100: exact in f32
])
def test_padding_that_cancels_in_f32_is_proved(a, b):
    v = verdicts(kernel("ov6").replace("3e38", a).replace("2e38", b))
    assert all_proved(v), v


@pytest.mark.parametrize("expr", ["a * 2.0 + b - a * 2.0", "b + (a * 4.0 - a * 4.0)", "(b - a * 4.0) + a * 4.0",
                                  "b + (a + a) - a - a"])
def test_cancelling_padding_that_overflows_is_violated(expr):
    # the probe's ov2..ov5 and pad_ovf: a padded 3e38, b padded 0 (once coverage followed `b + a - a`,
    # only the padding check stands between these and a proof)
    text = kernel("ov6").replace("other=2e38", "other=0.0").replace("b * 3.0 - a * 2.0", expr)
    v = verdicts(text)
    assert v["padding"] == {"violated"}, v
    ok = verdicts(text.replace("other=3e38", "other=0.0"))
    assert all_proved(ok), ok


def test_max_padding_that_rounds_to_minus_infinity_in_f32_is_proved():
    # -3e38 * 3 is -inf in f32: the padded lanes hold max's identity (over the reals, -9e38, a finite
    # value elements can be below: once reported)
    text = kernel("ov6").replace("contract out[i] = sum(x[i, j] for j)", "contract out[i] = max(x[i, j] * 3.0 for j)")
    text = text.replace("m = reduce_sum(b * 3.0 - a * 2.0", "m = reduce_max(a * 3.0")
    text = text.replace("other=3e38", "other=-3e38")
    text = text.replace("    b = load", "    # b = load")
    v = verdicts(text)
    assert all_proved(v), v
    v = verdicts(text.replace("other=-3e38", "other=-1e38"))  # -1e38 * 3 = -3e38: finite, elements can be below
    assert v["padding"] == {"violated"}, v


# -- 2. padding that the kernel's requires rule out ---------------------------------------------------

def test_padding_that_requires_rule_out_is_no_violation():
    assert all_proved(verdicts(kernel("padreq")))
    assert all_proved(verdicts(kernel("ln2")))


def test_padding_that_requires_allow_is_still_violated():
    v = verdicts(kernel("padreq").replace("requires N == COLS", "requires N <= COLS"))
    assert v["padding"] == {"violated"}, v
    v = verdicts(kernel("ln2").replace("requires N == COLS", "requires N <= COLS"))
    assert v["padding"] == {"violated"}, v
    # N == COLS, but the view starts one column in: its last column is past the end, and padded with 1
    text = kernel("padreq").replace("x[r0 : r0 + ROWS, 0 : COLS]", "x[r0 : r0 + ROWS, 1 : COLS + 1]")
    v = verdicts(text)
    assert v["padding"] == {"violated"}, v


# -- 3. a loop over the reduced dimension from a negative, masked index -------------------------------

def test_loop_from_a_negative_masked_index_is_proved():
    assert all_proved(verdicts(kernel("cs_c2")))
    assert all_proved(verdicts(kernel("cs_c2").replace("range(-RB, M, RB)", "range(-3, M, RB)")))


@pytest.mark.parametrize("change, obligation", [
    (("range(-RB, M, RB)", "range(1, M, RB)"), "reduction-coverage"),       # row 0 skipped
    (("range(-RB, M, RB)", "range(-RB, M - RB, RB)"), "reduction-coverage"),  # the last rows skipped
    (("range(-RB, M, RB)", "range(-RB, M - 1, RB)"), "reduction-coverage"),  # the last row, at M % 4 == 1
    (("mask=True)\n        acc", ")\n        acc"), "bounds"),                 # rows -4 .. -1 read unmasked
    (("mask=True)\n        acc", "mask=True, other=1.0)\n        acc"), "padding"),  # padded with 1
])
def test_loop_from_a_negative_index_that_misses_or_pads_wrongly_is_violated(change, obligation):
    v = verdicts(kernel("cs_c2").replace(*change))
    assert "violated" in v[obligation], v


# -- 4. coverage of b + a - a -------------------------------------------------------------------------

@pytest.mark.parametrize("expr", ["b + a - a", "b - a + a", "b * 2.0 - a", "a + b - b"])
def test_elementwise_cancellation_of_one_element_is_proved(expr):
    v = verdicts(kernel("sub1").replace("b + a - a", expr))
    assert all_proved(v), v


@pytest.mark.parametrize("expr", ["b + a", "b + a - a - a", "b - a", "b + a + a - a"])
def test_elementwise_combination_of_one_element_that_is_not_it_is_violated(expr):
    v = verdicts(kernel("sub1").replace("b + a - a", expr))
    # (a violated operator is the root: coverage is then not reported)
    assert "violated" in v["reduction-operator"] | v.get("reduction-coverage", set()), v


def test_a_register_combine_of_two_elements_still_counts_both():
    # reduce_columns_twice: the same columns in two threads still count twice (layout duplication)
    text = (Path(__file__).resolve().parents[1] / "specs" / "buggy" / "reduce_columns_twice.arg").read_text()
    v = verdicts(text)
    assert v["reduction-coverage"] == {"violated"}, v


# -- 5. a coverage bug at the output it breaks ------------------------------------------------------

def test_coverage_bug_is_reported_at_its_output_only():
    rep = report(kernel("mo_m11"))
    cov = {r.location.line: r.status for r in rep.results if r.obligation == "reduction-coverage"}
    assert cov == {9: "violated", 10: "proved", 11: "proved"}, cov  # s (lanes 0b01111); mx and y are right
    bad = [r for r in rep.results if r.status != "proved" and r.obligation not in ("uncoalesced",)]
    assert {(r.obligation, r.location.line) for r in bad} == {("reduction-coverage", 9)}, bad


def test_every_output_of_a_correct_kernel_is_proved_and_a_max_bug_is_at_max():
    text = kernel("mo_m11").replace("lanes=0b01111", "lanes=0b11111")
    assert all_proved(verdicts(text))
    rep = report(text.replace("b = reduce_max(xm, axis=1, scope=warp, lanes=0b11111)",
                              "b = reduce_max(xm, axis=1, scope=warp, lanes=0b00111)"))
    cov = {r.location.line: r.status for r in rep.results if r.obligation == "reduction-coverage"}
    assert cov == {9: "proved", 10: "violated", 11: "violated"}, cov  # mx and y both read the broken max



TWO_SUMS = """\
kernel two_sums<C=8, BLOCK=128>(x: f32[M, N]) -> (out: f32[M], s2: f32[M]):
    grid(cdiv(M, BLOCK))
    block(BLOCK)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    tag s2[i] = (i,) once
    contract out[i] = sum(x[i, j] for j)
    contract s2[i] = sum(x[i, j] for j)
    r0 = block_id.x * BLOCK
    NF = N // C * C
    acc = full(f32[BLOCK, 1], 0.0, tv=(BLOCK, C):(1, 0))
    for c0 in range(0, NF, C):
        xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True)
        acc = acc + reduce_sum(xs, axis=1)
    xt = load(x[r0 : r0 + BLOCK, TAIL : TAIL + C], tv=(BLOCK, C):(C, 1), mask=True)
    acc = acc + reduce_sum(xt, axis=1)
    store(out[r0 : r0 + BLOCK], reshape(acc, BLOCK), mask=True)
    store(s2[r0 : r0 + BLOCK], reshape(SECOND, BLOCK), mask=True)
"""


@pytest.mark.parametrize("tail, second, want", [
    ("NF", "acc", {7: "proved", 8: "proved"}),
    ("NF", "acc + acc", {7: "proved", 8: "violated"}),  # s2 counts every element twice
    ("NF + 1", "acc", {7: "violated"}),  # the tail chunk leaves a gap: one finding, at the first contract
    # both: the gap must still be found although s2's problem is reported first (it was proved once
    # coverage problems were tied to their outputs, while the check of the tail still stopped at any problem)
    ("NF + 1", "acc + acc", {7: "violated"}),
])
def test_a_problem_of_one_output_does_not_hide_the_tail_gap_of_another(tail, second, want):
    rep = report(TWO_SUMS.replace("TAIL", tail).replace("SECOND", second))
    cov = {r.location.line: r.status for r in rep.results if r.obligation == "reduction-coverage"}
    assert cov == want, cov

# -- 6. witnesses of padding and operator violations ----------------------------------------------

@pytest.mark.parametrize("text, obligation", [
    (kernel("ov6"), "padding"),
    (kernel("ln2").replace("requires N == COLS", "requires N <= COLS"), "padding"),
    ((Path(__file__).resolve().parents[1] / "specs" / "buggy" / "reduce_acc_minus.arg").read_text(),
     "reduction-operator"),
])
def test_padding_and_operator_violations_have_a_witness_with_words(text, obligation):
    rep = report(text)
    (r,) = [r for r in rep.results if r.obligation == obligation and r.status == "violated"]
    rendered = r.render()
    assert "witness: \n" not in rendered and not rendered.rstrip().endswith("witness:")
    line = next(x for x in rendered.splitlines() if x.strip().startswith("witness:"))
    assert len(line.split("witness:", 1)[1].strip()) > 10, rendered


def test_a_witness_with_nothing_to_show_prints_no_line():
    from argus_verify.smt.report import ObligationResult

    r = ObligationResult("padding", "violated", None, "m", witness={"line": 3})
    assert "witness" not in r.render()
