"""Every elementwise math function of the semantics table works in every stage, with no stage
naming it: the front end accepts it, the interpreter computes the table's reference, the verifier
proves the kernel, ptxas assembles its PTX, and the PTX simulator runs that PTX to the same values.

Adding an entry to `semantics.FLOAT_UNARY` (as `tanh` was) extends this test automatically.
"""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import semantics, smt
from argus_verify.frontend import compile_source
from argus_verify.lowering import ptxas
from argus_verify.lowering.ptx import lower
from argus_verify.runtime.interp import run
from argus_verify.testing.ptxsim import run_lowered

# inputs inside each function's domain, away from the approximations' weak spots
DOMAIN = {"log": (0.1, 4.0), "log2": (0.1, 4.0), "sqrt": (0.1, 4.0), "rsqrt": (0.1, 4.0), "recip": (0.5, 3.0)}
# ex2/lg2/rsqrt/tanh.approx are within a few ulps on the GPU; the simulator computes them exactly
APPROX_RTOL = 2e-6


def kernel_text(op: str) -> str:
    return f"""
kernel unary_{op}(x: f32[N]) -> y: f32[N]:
    grid(cdiv(N, 128))
    block(128)
    tag x[i] = (i,)
    tag y[i] = (i,) once
    b = block_id.x * 128
    v = load(x[b : b + 128], tv=(128, 1):(1, 1), mask=True)
    store(y[b : b + 128], {op}(v), mask=True)
"""


def inputs(op: str, n: int) -> np.ndarray:
    lo, hi = DOMAIN.get(op, (-3.0, 3.0))
    return np.random.default_rng(7).uniform(lo, hi, n).astype(np.float32)


UNARY = sorted(semantics.FLOAT_UNARY)


@pytest.mark.parametrize("op", UNARY)
def test_unary_op_in_interpreter_and_verifier(op):
    k = compile_source(kernel_text(op), f"{op}.arg")
    x = inputs(op, 200)
    y = run(k, {"x": x}, {"N": 200})["y"]
    want = semantics.FLOAT_UNARY[op].ref(x.astype(np.float32))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=0)
    rep = smt.verify(k, timeout_s=10)
    assert rep.exit_code == 0, rep.render_text()


@pytest.mark.parametrize("op", UNARY)
def test_unary_op_lowers_assembles_and_simulates(op):
    k = compile_source(kernel_text(op), f"{op}.arg")
    lk = lower(k)
    if ptxas.ptxas_available():
        ptxas.assemble(lk.ptx)
    x = inputs(op, 130)
    got = run_lowered(lk, {"x": x}, {"N": 130}, blocks=None)["y"]
    want = run(k, {"x": x}, {"N": 130})["y"]
    np.testing.assert_allclose(got, want, rtol=APPROX_RTOL, atol=1e-7)
