"""What a kernel stores against its contract, where floating point is not the reals' arithmetic in a
way that is not rounding (an outside probe's false proofs and false alarms):

- a conversion to an integer type rounds and saturates (from a float) or keeps the low bits (from
  an integer): `cast(cast(x, u8), f32)` is not `x`. A conversion to the output's own dtype at the
  store is the contract's value converted too; float-to-float conversions stay the identity (the
  rounding caveat of docs/verify.md).
- a division is compared where no divisor is zero, and the kernel may divide by zero only where the
  contract does: `x / x * x` is NaN at 0, not `x`; `x * recip(y)` is `x / y`.
"""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.runtime.interp import run

KERNEL = """
kernel k(x: {xt}[N], y: f32[N]) -> out: {ot}[N]:
    grid(cdiv(N, 256))
    block(256)
    tag x[i] = (i,)
    tag y[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = {contract}
    base = block_id.x * 256
    xs = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    ys = load(y[base : base + 256], tv=(256, 1):(1, 0), mask=True, other=1.0)
    store(out[base : base + 256], {value}, mask=True)
"""


def operator_status(xt, ot, contract, value) -> tuple[str, str]:
    k = compile_source(KERNEL.format(xt=xt, ot=ot, contract=contract, value=value), "k.arg")
    rep = smt.verify(k, timeout_s=10, jobs=1)
    bad = [r for r in rep.results if r.status != "proved" and r.obligation != "vacuity"]
    assert all(r.obligation == "reduction-operator" for r in bad), [(r.obligation, r.message) for r in bad]
    return (bad[0].status, bad[0].message) if bad else ("proved", "")


@pytest.mark.parametrize(("xt", "ot", "contract", "value", "inputs"), [
    ("f32", "f32", "x[i]", "cast(cast(xs, u8), f32)", [0.5, -3.0, 300.0]),
    ("f32", "f32", "x[i] + y[i]", "cast(cast(xs, i32), f32) + ys", [0.25, 1.75]),
    ("i32", "i32", "x[i]", "cast(cast(xs, u8), i32)", [256, -1]),
    ("i32", "u8", "min(max(x[i], 0), 255)", "cast(xs, u8)", [256, 300]),  # wraps, the contract clamps
    ("f32", "f32", "x[i]", "xs / xs * xs", [0.0]),
    ("f32", "f32", "x[i] * y[i]", "xs * (ys / ys) * ys", None),  # y = 0: NaN where the contract gives 0
    # 255.5 rounds to 256 (ties to even), which wraps to 0 in u8; converted at once it saturates at 255
    ("f32", "u8", "x[i]", "cast(cast(xs, i32), u8)", None),
])
def test_a_value_floating_point_changes_is_not_the_contract(xt, ot, contract, value, inputs):
    status, message = operator_status(xt, ot, contract, value)
    assert status == "violated", message
    if inputs is None:
        return
    # the interpreter computes another value than the contract's at these inputs
    k = compile_source(KERNEL.format(xt=xt, ot=ot, contract=contract, value=value), "k.arg")
    dtype = np.float32 if xt == "f32" else np.int32
    x = np.array(inputs, dtype=dtype)
    y = np.ones(len(inputs), dtype=np.float32)
    got = run(k, {"x": x, "y": y}, {"N": len(inputs)})["out"].astype(np.float64)
    want = {"x[i]": x, "x[i] + y[i]": x + y, "min(max(x[i], 0), 255)": np.clip(x, 0, 255)}[contract]
    assert not np.array_equal(got, want.astype(np.float64))


@pytest.mark.parametrize(("xt", "ot", "contract", "value"), [
    ("f32", "i32", "x[i]", "cast(xs, i32)"),  # the conversion to the output's dtype is the contract's
    ("f32", "i32", "x[i] * 2.0", "cast(xs * 2.0, i32)"),
    ("i32", "f32", "x[i]", "cast(xs, f32)"),
    ("u8", "i32", "x[i]", "cast(xs, i32)"),  # widening
    ("i32", "i32", "x[i] + 1", "xs + 1"),
    ("f32", "bf16", "x[i]", "cast(xs, bf16)"),
    ("f32", "f32", "x[i]", "cast(cast(xs, bf16), f32)"),  # rounding only: outside what is proved
    ("f32", "u8", "min(max(x[i], 0.0), 255.0)", "cast(xs, u8)"),  # saturation is the clamp
    ("f32", "f32", "x[i] / y[i]", "xs * recip(ys)"),
    ("f32", "f32", "x[i] / y[i] / 2.0", "xs / (ys * 2.0)"),
])
def test_an_equal_value_stays_proved(xt, ot, contract, value):
    status, message = operator_status(xt, ot, contract, value)
    assert status == "proved", message


def test_a_division_by_zero_the_floating_point_result_hides_is_unknown():
    """1 / (1 / x) is x at 0 too in IEEE arithmetic (1 / inf = 0), and not otherwise decided: unknown."""
    status, message = operator_status("f32", "f32", "x[i]", "recip(recip(xs))")
    assert status == "unknown" and "divides by zero at x = 0" in message


# Reductions and math functions are uninterpreted in Z3, so a model where two of them differ says
# nothing about real rows: `max(x) * 2` against `max(x * 2)` was "violated with x = 2437" (a probe's
# false alarm). Such a difference is checked on random rows (float64); only a difference there is a
# violation, with the rows as witness.
ROWMAX = """
kernel k<COLS=128, ROWS=8>(x: f32[M, N]) -> out: f32[M]:
    requires N <= COLS
    grid(cdiv(M, ROWS))
    block(32 * ROWS)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = {contract}
    r0 = block_id.x * ROWS
    xs = load(x[r0 : r0 + ROWS, 0 : COLS], tv=((32, ROWS), (4, COLS // 128)):((4, COLS), (1, 128)),
              mask=True, other=-inf)
    m = reduce_max(xs, axis=1, scope=warp, lanes=0b11111) * {factor}
    store(out[r0 : r0 + ROWS], reshape(m, ROWS), mask=True, where=lane_id == 0)
"""


def operator_results(text: str) -> list:
    rep = smt.verify(compile_source(text, "k.arg"), timeout_s=10, jobs=1)
    return [r for r in rep.results if r.obligation == "reduction-operator"]


def test_a_scale_moved_through_a_max_is_not_a_violation():
    (r,) = operator_results(ROWMAX.format(contract="max(x[i, j] * 2.0 for j)", factor="2.0"))
    assert r.status == "unknown" and "agree on random rows" in r.message


def test_a_negative_scale_moved_through_a_max_is_violated_on_rows():
    (r,) = operator_results(ROWMAX.format(contract="max(x[i, j] * -1.0 for j)", factor="-1.0"))
    assert r.status == "violated" and "on the rows x = [" in r.message and "the kernel gives" in r.message


def test_the_variance_as_a_difference_of_means_is_not_a_violation():
    """E[x^2] - E[x]^2 is the variance over exactly 128 elements (the mean's factor 1/128)."""
    text = (ROWMAX.replace("-> out: f32[M]:", "-> out: f32[M, N]:").replace("tag out[i] = (i,) once",
            "tag out[i, j] = (i, j) once").replace("N <= COLS", "N == COLS").replace(", other=-inf", ""))
    body = text.split("    m = reduce_max")[0]
    contract = ("(x[i, j] - sum(x[i, k] for k) * 0.0078125) * rsqrt(sum((x[i, l] - sum(x[i, k] for k) * 0.0078125)"
                " * (x[i, l] - sum(x[i, k] for k) * 0.0078125) for l) * 0.0078125 + 0.00001)")
    text = body.format(contract=contract).replace("contract out[i] =", "contract out[i, j] =") + """\
    mean = reduce_sum(xs, axis=1, scope=warp, lanes=0b11111) * 0.0078125
    d = xs - mean
    var = reduce_sum(xs * xs, axis=1, scope=warp, lanes=0b11111) * 0.0078125 - mean * mean
    store(out[r0 : r0 + ROWS, 0 : COLS], d * rsqrt(var + 0.00001), mask=True)
"""
    (r,) = operator_results(text)
    assert r.status == "unknown" and "rows of 128 elements" in r.message
    wrong = text.replace("- mean * mean", "- mean")  # E[x^2] - E[x]: no variance at any length
    (r,) = operator_results(wrong)
    assert r.status == "violated"
