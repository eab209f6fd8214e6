"""Tensor-core mma.sync and ldmatrix end to end on small kernels: the front end's checks, the
interpreter against numpy, the lowered PTX (ptxas, and the PTX simulator's literal ISA rules)
against the interpreter bit for bit, and the verifier's contraction check on a register-level bug."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import semantics, smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_source
from argus_verify.lowering.ptx import lower
from argus_verify.lowering.ptxas import assemble, ptxas_available
from argus_verify.runtime.interp import run
from argus_verify.testing.ptxsim import run_lowered

# one warp per 16 x 16 (m16n8k16: two n instances) or 16 x 8 x 8 (m16n8k8) tile of C, operands
# loaded from global memory straight into the atom layouts (masked: ragged shapes)
GLOBAL = {
    "m16n8k16": """
kernel k(A: {dt}[M, K], B: {dt}[K, N]) -> C: f32[M, N]:
    grid(cdiv(N, 16), cdiv(M, 16))
    block(32)
    tag A[i, k] = (i, k)
    tag B[k, j] = (k, j)
    tag C[i, j] = (i, j) once
    m0 = block_id.y * 16
    n0 = block_id.x * 16
    acc = zeros(f32[16, 16], tv=((4, 8), (2, 2, 2)):((2, 16), (1, 128, 8)))
    for kt in range(cdiv(K, 16)):
        a = load(A[m0 : m0 + 16, kt * 16 : kt * 16 + 16], mask=True, tv=((4, 8), (2, 2, 2)):((2, 16), (1, 128, 8)))
        b = load(B[kt * 16 : kt * 16 + 16, n0 : n0 + 16], mask=True, tv=((4, 8), (2, 2, 2)):((32, 1), {bstride}))
        acc = mma(a, b, acc, atom=m16n8k16)
    store(C[m0 : m0 + 16, n0 : n0 + 16], acc, mask=True)
""",
    "m16n8k8": """
kernel k(A: {dt}[M, K], B: {dt}[K, N]) -> C: f32[M, N]:
    grid(cdiv(N, 8), cdiv(M, 16))
    block(32)
    tag A[i, k] = (i, k)
    tag B[k, j] = (k, j)
    tag C[i, j] = (i, j) once
    m0 = block_id.y * 16
    n0 = block_id.x * 8
    acc = zeros(f32[16, 8], tv=((4, 8), (2, 2)):((2, 8), (1, 64)))
    for kt in range(cdiv(K, 8)):
        a = load(A[m0 : m0 + 16, kt * 8 : kt * 8 + 8], mask=True, tv=((4, 8), (2, 2)):((2, 8), (1, 64)))
        b = load(B[kt * 8 : kt * 8 + 8, n0 : n0 + 8], mask=True, tv=((4, 8), 2):((16, 1), {bstride}))
        acc = mma(a, b, acc, atom=m16n8k8)
    store(C[m0 : m0 + 16, n0 : n0 + 8], acc, mask=True)
""",
}
# the B value strides: (k + 1, k + 8, next n block) as the atom wants them, and a variant whose
# register pairs are swapped (k + 8 first)
B_STRIDES = {"m16n8k16": ("(16, 128, 8)", "(128, 16, 8)"), "m16n8k8": ("8", None)}
SIZES = {"M": 35, "N": 21, "K": 37}


def kernel(atom: str, dt: str, swapped: bool = False):
    stride = B_STRIDES[atom][1 if swapped else 0]
    return compile_source(GLOBAL[atom].format(dt=dt, bstride=stride), f"{atom}.arg")


def inputs(dt: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"A": semantics.round_to(rng.standard_normal((SIZES["M"], SIZES["K"])), dt).astype(np.float32),
            "B": semantics.round_to(rng.standard_normal((SIZES["K"], SIZES["N"])), dt).astype(np.float32)}


@pytest.mark.parametrize("atom", ["m16n8k16", "m16n8k8"])
@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_interpreter_lowering_and_simulator_agree(atom, dt):
    k = kernel(atom, dt)
    x = inputs(dt)
    got = run(k, x, SIZES)["C"]
    want = x["A"].astype(np.float64) @ x["B"].astype(np.float64)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    lk = lower(k)
    assert f"mma.sync.aligned.{atom}.row.col.f32.{dt}.{dt}.f32" in lk.ptx
    if ptxas_available():
        assemble(lk.ptx)
    sim = run_lowered(lk, x, SIZES)["C"]
    np.testing.assert_array_equal(sim, got)
    if atom == "m16n8k8" and dt == "f16":  # one of them through the verifier (the others cost time)
        assert smt.verify(k, timeout_s=10.0).exit_code == 0


def test_swapped_register_pair_runs_wrong_and_is_a_violation_at_the_mma():
    k = kernel("m16n8k16", "bf16", swapped=True)
    x = inputs("bf16")
    want = x["A"].astype(np.float64) @ x["B"].astype(np.float64)
    got = run(k, x, SIZES)["C"]
    assert np.abs(got - want).max() > 1.0  # the interpreter computes what the hardware would
    lk = lower(k)
    np.testing.assert_array_equal(run_lowered(lk, x, SIZES)["C"], got)  # and so does the PTX
    rep = smt.verify(k, timeout_s=10.0)
    bad = [r for r in rep.results if r.status == "violated"]
    assert [(r.obligation, r.location.line) for r in bad] == [("tag-assertion", 14)]
    d = bad[0].detail
    assert {"k", "lane", "c_register", "a_lane", "a_register", "b_lane", "b_register"} <= set(d)
    # the witness names what mma.sync reads: b value v of lane l is k = 2 (l % 4) + (v & 1) + 8 (v // 2 % 2)
    # of the atom (the ISA's figure), the product's k
    v, lane = d["b_register"] % 4, d["b_lane"]
    assert d["k"] % 16 == 2 * (lane % 4) + (v & 1) + 8 * (v // 2 % 2)


LDM = """
kernel k(A: bf16[16, 16]) -> C: bf16[16, 16]:
    grid(1)
    block(32)
    s = shared(bf16[16, 16])
    x = load(A[0:16, 0:16], tv=(32, 8):(8, 1))
    store(s, x)
    barrier()
    a = ldmatrix(s, {count}, rows={rows}{trans})
    store(C[0:16, 0:16], a)
"""


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_x4_moves_what_the_isa_says(trans):
    # lanes 8q + r supply row r of quadrant q = (top-left, bottom-left, top-right, bottom-right)
    src = LDM.format(count="x4", rows="((8, 2, 2), 1):((16, 128, 8), 0)", trans=", trans=True" if trans else "")
    k = compile_source(src, "ldm.arg")
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    got = run(k, {"A": a}, {})["C"]
    np.testing.assert_array_equal(got, a)  # a store of the fragment puts every element back
    lk = lower(k)
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in lk.ptx) == trans
    if ptxas_available():
        assemble(lk.ptx)
    np.testing.assert_array_equal(run_lowered(lk, {"A": a}, {})["C"], a)


def test_front_end_errors_point_at_the_call():
    bad_count = LDM.format(count="x3", rows="((8, 2, 2), 1):((16, 128, 8), 0)", trans="")
    with pytest.raises(ArgusError, match="x1, x2 or x4") as e:
        compile_source(bad_count, "ldm.arg")
    assert e.value.span.line == 9
    past_row = LDM.format(count="x4", rows="((8, 2, 2), 1):((16, 128, 12), 0)", trans="")
    with pytest.raises(ArgusError, match="runs past the end of a tile row"):
        compile_source(past_row, "ldm.arg")
    foreign_acc = GLOBAL["m16n8k8"].format(dt="bf16", bstride="8").replace(
        "tv=((4, 8), (2, 2)):((2, 8), (1, 64)))\n    for", "tv=(32, 4):(4, 1))\n    for")
    with pytest.raises(ArgusError, match="accumulator layout") as e:
        compile_source(foreign_acc, "acc.arg")
    assert e.value.span.line == 14


STM = """
kernel k(A: bf16[16, 16]) -> C: bf16[16, 16]:
    grid(1)
    block(32)
    s = shared(bf16[16, 16])
    x = load(A[0:16, 0:16], tv={tv})
    stmatrix(s, x, x4, rows=((8, 2, 2), 1):((16, 128, 8), 0){trans})
    barrier()
    y = load(s, tv=(32, 8):(8, 1))
    store(C[0:16, 0:16], y)
"""


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_x4_writes_each_value_at_its_coordinate(trans):
    from argus_verify import atoms

    rows = atoms.ir.TVLayout(atoms.Layout(((8, 2, 2), 1), ((16, 128, 8), 0)), (16, 16))
    tv = atoms.ldmatrix_result(rows, 4, trans).layout  # the fragment layout stmatrix moves as is
    k = compile_source(STM.format(tv=tv, trans=", trans=True" if trans else ""), "stm.arg")
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    np.testing.assert_array_equal(run(k, {"A": a}, {})["C"], a)
    lk = lower(k)
    assert ("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in lk.ptx) == trans
    if ptxas_available():
        assemble(lk.ptx)
    np.testing.assert_array_equal(run_lowered(lk, {"A": a}, {})["C"], a)
    assert smt.verify(k, timeout_s=10.0).exit_code == 0


def test_stmatrix_refuses_a_fragment_that_would_move():
    src = STM.format(tv="(32, 8):(8, 1)", trans="")
    with pytest.raises(ArgusError, match="stmatrix puts value"):
        compile_source(src, "stm.arg")
