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
