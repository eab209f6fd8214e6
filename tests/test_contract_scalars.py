"""Floating-point scalar parameters in contracts: `contract out[i] = alpha * x[i] + y[i]`.

Before, a contract could name constants only, so a kernel scaled by a parameter could not state
what it computes. The parameter is a real of its own in the operator check (smt/contract_expr.py),
so a kernel that uses it in another place, twice, or not at all is an operator violation.
"""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_source
from argus_verify.printer import format_kernel

AXPY = """\
kernel axpy<BLOCK=1024>(x: f32[N], y: f32[N], alpha: f32, n: i32) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(256)
    tag x[i] = (i,)
    tag y[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = {contract}
    RUNS = (256, BLOCK // 256):(BLOCK // 256, 1)
    base = block_id.x * BLOCK
    xs = load(x[base : base + BLOCK], tv=RUNS, mask=True)
    ys = load(y[base : base + BLOCK], tv=RUNS, mask=True)
    store(out[base : base + BLOCK], {value}, mask=True)
"""


def operator(contract: str, value: str) -> str:
    rep = smt.verify(compile_source(AXPY.format(contract=contract, value=value), "axpy.arg"))
    (res,) = [r for r in rep.results if r.obligation == "reduction-operator"]
    return res.status


@pytest.mark.parametrize("value", ["xs * alpha + ys", "alpha * xs + ys", "ys + xs * alpha"])
def test_the_scaled_sum_is_proved(value):
    assert operator("alpha * x[i] + y[i]", value) == "proved"


@pytest.mark.parametrize("value", [
    "xs * alpha * alpha + ys",  # scaled twice
    "xs + alpha + ys",  # added, not multiplied
    "xs * 2.0 + ys",  # a constant for the parameter
    "(xs + ys) * alpha",  # y scaled too
])
def test_a_wrong_use_of_the_parameter_is_an_operator_violation(value):
    assert operator("alpha * x[i] + y[i]", value) == "violated"


def test_an_integer_parameter_used_as_a_float_is_not_followed():
    assert operator("alpha * x[i] + y[i]", "xs * n + ys") == "unknown"


def test_the_contract_prints_the_parameter():
    kernel = compile_source(AXPY.format(contract="alpha * x[i] + y[i]", value="xs * alpha + ys"), "axpy.arg")
    assert "contract out[i] = alpha * x[i] + y[i]" in format_kernel(kernel)


def test_an_integer_parameter_in_a_contract_is_an_error():
    with pytest.raises(ArgusError, match="'n' is an integer parameter"):
        compile_source(AXPY.format(contract="x[i] * n + y[i]", value="xs + ys"), "axpy.arg")
