"""The lowering reads operator meaning from the semantics table: a new elementwise operator with
a PTX template is lowered, assembled and simulated with no change to the lowering; one without a
template for the compute dtype is refused by name; templates, shuffle modes and conversions in the
PTX are the table's."""

from __future__ import annotations

import re

import attrs
import numpy as np
import pytest

from argus_verify import ir, semantics
from argus_verify.frontend import compile_source
from argus_verify.lowering.emitter import LoweringError
from argus_verify.lowering.ptx import lower
from argus_verify.lowering.ptxas import assemble, ptxas_available
from argus_verify.testing.ptxsim import run_lowered

needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas not found")

PER_ELEMENT = """
kernel k(x: {src}[N]) -> out: {dst}[N]:
    grid(cdiv(N, 256))
    block(128)
    base = block_id.x * 256
    v = load(x[base : base + 256], tv=(128, 2):(2, 1), mask=True)
    store(out[base : base + 256], {expr}, mask=True)
"""


def elementwise_kernel(dt: str, op: str, arity: int = 1) -> ir.Kernel:
    """A kernel applying `op` elementwise. The IR is built with `-v` (or `v * v`) and the operator
    renamed, so an operator the front end does not know (or refuses for `dt`) is still lowered."""
    base, expr = ("neg", "-v") if arity == 1 else ("*", "v * v")
    kernel = compile_source(PER_ELEMENT.format(src=dt, dst=dt, expr=expr), "k.arg")

    def rename(s):
        if isinstance(s, ir.Assign) and isinstance(s.op, ir.Elementwise) and s.op.op == base:
            return attrs.evolve(s, op=attrs.evolve(s.op, op=op))
        return s

    return attrs.evolve(kernel, body=tuple(rename(s) for s in kernel.body))


@pytest.fixture
def new_unary(monkeypatch):
    """A math function that exists only in the table: tanh through PTX's tanh.approx.f32."""
    entry = semantics.FloatUnary("lowering_test_tanh", np.tanh, {"f32": ["tanh.approx.f32 {d}, {a};"]},
                                 {"tanh.approx.f32": np.tanh}, doc="tanh (test entry)")
    monkeypatch.setitem(semantics.FLOAT_UNARY, entry.name, entry)
    return entry.name


def test_a_new_unary_operator_is_lowered_from_the_table(new_unary):
    lk = lower(elementwise_kernel("f32", new_unary))
    assert re.search(r"tanh\.approx\.f32 %f\d+, %f\d+;", lk.ptx)
    if ptxas_available():
        assemble(lk.ptx)
    x = np.linspace(-4, 4, 300, dtype=np.float32)
    got = run_lowered(lk, {"x": x}, {"N": 300})["out"]
    np.testing.assert_array_equal(got, np.tanh(x))


def test_a_new_unary_operator_on_16_bit_floats_computes_in_f32(new_unary):
    ptx = lower(elementwise_kernel("bf16", new_unary)).ptx
    assert "cvt.f32.bf16" in ptx and "tanh.approx.f32" in ptx and "cvt.rn.bf16.f32" in ptx


def test_an_operator_without_a_template_for_the_compute_dtype_is_refused(new_unary):
    with pytest.raises(LoweringError, match="'lowering_test_tanh' on f64 is not supported by the PTX lowering"):
        lower(elementwise_kernel("f64", new_unary))
    with pytest.raises(LoweringError, match="'exp2' on f64"):
        lower(elementwise_kernel("f64", "exp2"))


def test_the_templates_are_the_table_s(monkeypatch):
    exp2 = semantics.FLOAT_UNARY["exp2"]
    monkeypatch.setitem(semantics.FLOAT_UNARY, "exp2",
                        attrs.evolve(exp2, ptx={"f32": ["ex2.approx.f32 {d}, {a};", "mov.f32 {d}, {d};"]}))
    ptx = lower(elementwise_kernel("f32", "exp2")).ptx
    assert re.search(r"ex2\.approx\.f32 (%f\d+), %f\d+;\n\s*mov\.f32 \1, \1;", ptx)
    assert "ex2.approx.ftz" not in ptx


LANES = """
kernel lanes(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    base = block_id.x * 256
    v = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    store(out[base : base + 256], {call}, mask=True)
"""


@pytest.mark.parametrize("name", sorted(semantics.SHUFFLE_MODES))
def test_shuffles_use_the_table_mode_and_clamp(name, monkeypatch):
    mode = semantics.SHUFFLE_MODES[name]
    kernel = compile_source(LANES.format(call=f"shfl_{name}(v, 3)"), "l.arg")
    assert re.search(rf"shfl\.sync\.{mode.ptx}\.b32 %f\d+, %f\d+, 3, {mode.clamp}, -1;", lower(kernel).ptx)
    monkeypatch.setitem(semantics.SHUFFLE_MODES, name, attrs.evolve(mode, clamp=mode.clamp ^ 1))
    assert f", 3, {mode.clamp ^ 1}, -1;" in lower(kernel).ptx


REDUCE = """
kernel r(x: f32[M, 32]) -> out: f32[M, 1]:
    grid(cdiv(M, 4))
    block(128)
    m0 = block_id.x * 4
    v = load(x[m0 : m0 + 4, 0 : 32], tv=((32, 4), 1):((1, 32), 0), mask=True)
    s = reduce_sum(v, axis=1, scope=warp, lanes=0b11111)
    store(out[m0 : m0 + 4, 0 : 1], s, mask=True)
"""


def test_warp_reductions_exchange_with_the_table_xor_mode(monkeypatch):
    kernel = compile_source(REDUCE, "r.arg")
    xor = semantics.SHUFFLE_MODES["xor"]
    assert lower(kernel).ptx.count(f"shfl.sync.{xor.ptx}.b32") == 5
    monkeypatch.setitem(semantics.SHUFFLE_MODES, "xor", attrs.evolve(xor, clamp=30))
    assert lower(kernel).ptx.count(", 30, -1;") == 5


PAIRS = [("f32", "bf16"), ("bf16", "f32"), ("f32", "f64"), ("f64", "f32"), ("f32", "i32"), ("i32", "f32"),
         ("u32", "f64"), ("f16", "f32")]


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_casts_use_the_table_conversion(src, dst):
    ptx = lower(compile_source(PER_ELEMENT.format(src=src, dst=dst, expr=f"cast(v, {dst})"), "c.arg")).ptx
    # two values per thread: converted as a pair where the table has a packed conversion
    want = semantics.cvt_pair_instruction(dst, src) or semantics.cvt_instruction(dst, src)
    assert f"{want} " in ptx


@needs_ptxas
@pytest.mark.parametrize("arity,table", [(1, semantics.FLOAT_UNARY), (2, semantics.FLOAT_BINARY)],
                         ids=["unary", "binary"])
def test_every_table_template_assembles(arity, table):
    """Every elementwise template of the table, for every compute dtype it has, is valid PTX."""
    for op, entry in table.items():
        for dt in entry.ptx:
            assemble(lower(elementwise_kernel(dt, op, arity)).ptx)
