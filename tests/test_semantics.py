"""The semantics table's forms agree with each other.

Every integer operator's Z3 form (as the verifier builds it, in both encodings, with symbolic and
with constant operands) computes its reference meaning; the shuffle rules' Z3 and numpy forms pick
the same source lane; folding refuses what is undefined; conversions round as the GPU does.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_verify import semantics
from argus_verify.smt import zops as Z

OPERAND = st.integers(0, (1 << 12) - 1)
SHIFT = st.integers(0, 20)


def _operands(op):
    if op in ("<<", ">>"):
        return st.tuples(OPERAND, SHIFT)
    if semantics.INT_OPS[op].divides:
        return st.tuples(OPERAND, st.integers(1, 300))
    return st.tuples(OPERAND, OPERAND)


def _z3_value(mode, op, a, b, symbolic: bool) -> int:
    Z.set_mode(mode)
    defs = Z.begin_query()
    x, y = (Z.var("sem_a"), Z.var("sem_b")) if symbolic else (Z.bv(a), Z.bv(b))
    if symbolic:
        # the verifier records value ranges for indices; the bitwise forms rely on them
        Z.set_range(x, 0, (1 << 12) - 1)
        Z.set_range(y, 0, (1 << 12) - 1)
    term = semantics.INT_OPS[op].z3(Z, x, y)
    Z.end_defs()
    s = z3.SolverFor("QF_BV") if mode == "bv" else z3.Solver()
    r = Z.var("sem_r")
    s.add(*defs)
    if symbolic:
        s.add(x == Z.bv(a), y == Z.bv(b))
    s.add(r == term)
    assert s.check() == z3.sat
    v = s.model().eval(r, model_completion=True)
    Z.set_mode("int")
    return v.as_signed_long() if mode == "bv" else v.as_long()


@pytest.mark.parametrize("op", sorted(semantics.INT_OPS))
@pytest.mark.parametrize("mode", ["int", "bv"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_integer_operator_z3_form_computes_the_reference(op, mode, data):
    a, b = data.draw(_operands(op))
    want = int(semantics.INT_OPS[op].ref(a, b))
    for symbolic in (False, True):
        assert _z3_value(mode, op, a, b, symbolic) == want, (op, mode, a, b, symbolic)


@pytest.mark.parametrize("op", sorted(semantics.INT_OPS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_integer_reference_is_the_same_on_ints_and_arrays(op, data):
    pairs = data.draw(st.lists(_operands(op), min_size=1, max_size=8))
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    arr = semantics.int_eval(op, a, b)
    assert [int(x) for x in np.asarray(arr)] == [int(semantics.int_eval(op, int(p), int(q))) for p, q in pairs]


def test_fold_refuses_undefined_results():
    assert semantics.fold("//", 7, 0) is None
    assert semantics.fold("%", 7, 0) is None
    assert semantics.fold("cdiv", 7, 0) is None
    assert semantics.fold("<<", 1, 64) is None
    assert semantics.fold("cdiv", 7, 2) == 4
    assert semantics.fold("//", -7, 2) == -4  # floor division, as Python's
    assert semantics.fold("and", 3, 0) == 0 and semantics.fold("or", 0, 5) == 1


@pytest.mark.parametrize("mode", sorted(semantics.SHUFFLE_MODES))
@pytest.mark.parametrize("arg", [0, 1, 2, 5, 16, 31])
def test_shuffle_source_lanes_agree_between_numpy_and_z3(mode, arg):
    tids = np.arange(64)
    want = semantics.shuffle_source_thread(mode, tids, arg)
    entry = semantics.SHUFFLE_MODES[mode]
    for t in (0, 1, 17, 31, 32, 45, 63):
        Z.set_mode("int")
        term = entry.z3(Z, Z.bv(t), Z.bv(arg))
        got = z3.simplify(term)
        assert got.as_long() == want[t], (mode, arg, t)
        # the PTX rule: source lane j is taken when j is within [0, 31] for down/bfly/idx and
        # j >= clamp for up; otherwise the lane keeps its own value
        lane = t % 32
        j = {"xor": lane ^ arg, "idx": arg, "up": lane - arg, "down": lane + arg}[mode]
        ok = j >= entry.clamp if mode == "up" else j <= entry.clamp
        assert want[t] == t - lane + (j if ok else lane)


def test_reductions_have_their_identity():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(17)
    for name, r in semantics.REDUCE_OPS.items():
        assert semantics.combine(name, x, np.full_like(x, r.identity)).tolist() == x.tolist()
        assert semantics.FLOAT_BINARY[r.binary].combines == name


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_bf16_rounding_is_nearest_even_on_the_upper_half(x):
    got = float(semantics.round_to(np.float32(x), "bf16"))
    bits = int(np.float32(x).view(np.uint32))
    lo, hi = bits & 0xFFFF0000, (bits & 0xFFFF0000) + 0x10000
    cands = [np.uint32(lo & 0xFFFFFFFF).view(np.float32), np.uint32(hi & 0xFFFFFFFF).view(np.float32)]
    # IEEE rounds as if the exponent were unbounded: past the largest bf16 the upper neighbour
    # is 2**128 (which then overflows to infinity), so it competes on distance like any other.
    def magnitude(c):
        return float(c) if math.isfinite(float(c)) else math.copysign(2.0**128, float(c))

    dist = [abs(magnitude(c) - float(np.float32(x))) for c in cands]
    if dist[0] == dist[1]:
        want = cands[0] if not (lo >> 16) & 1 else cands[1]
    else:
        want = cands[int(dist[1] < dist[0])]
    assert got == float(want) or (math.isinf(got) and not math.isfinite(float(want)))


def test_every_float_op_has_an_f32_template_and_simulator_functions_for_approximations():
    sim = semantics.ptx_sim_functions()
    for name, entry in semantics.FLOAT_UNARY.items():
        assert "f32" in entry.ptx, name
        for line in entry.ptx["f32"]:
            ins = line.split()[0]
            if ".approx" in ins:
                assert ins in sim, (name, ins)
    for name, entry in semantics.FLOAT_BINARY.items():
        assert "f32" in entry.ptx, name


def test_conversions():
    assert semantics.cvt_instruction("bf16", "f32") == "cvt.rn.bf16.f32"
    assert semantics.cvt_instruction("f32", "bf16") == "cvt.f32.bf16"
    assert semantics.cvt_instruction("i32", "f32") == "cvt.rni.s32.f32"
    assert semantics.cvt_instruction("f32", "i64") is None
    assert semantics.round_to(np.float32(1.00390625), "bf16") == np.float32(1.0)  # tie to even
    assert semantics.round_to(np.float32(1.01171875), "bf16") == np.float32(1.015625)  # tie to even (up)
