"""PTX lowering on the CPU: every spec lowers and assembles (ptxas, sm_90a) at default and other
compile-time constants; the emitter's index arithmetic equals numpy's layout evaluation (property
tests); the generated PTX *runs* correctly in `argus_verify.testing.ptxsim` against the interpreter; and the
performance-relevant shape of the code (vector widths, no spills, loop bodies free of invariant
address arithmetic) does not regress."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus_verify import ir
from argus_verify.frontend import compile_file, compile_source
from argus_verify.layout import ComposedLayout, Layout, Swizzle
from argus_verify.lowering.emitter import Aff, Emitter, LoweringError
from argus_verify.lowering.ptx import lower
from argus_verify.lowering.ptxas import assemble, ptxas_available
from argus_verify.reference import make_inputs
from argus_verify.runtime.interp import run as interp_run
from argus_verify.runtime.measure import rel_error
from argus_verify.testing.ptxsim import PtxSimError, run_lowered, simulate

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas not found")
# ARGUS_HYPOTHESIS_EXAMPLES=2000 for a long local run
SETTINGS = settings(max_examples=int(os.environ.get("ARGUS_HYPOTHESIS_EXAMPLES", 60)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

_spec = importlib.util.spec_from_file_location("argus_lowering_kernels", ROOT / "tests" / "gpu" / "kernels.py")
KERNELS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(KERNELS)

# the 64x64x16 instantiation with a 4x4 micro-tile, one block per SM (the spec's own defaults are
# 128x64x16 8x4 with policy(min_blocks_per_sm=2)); the tests of code shape below use it
SMALL_GEMM = {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}
SMALL_OPTS = {"min_blocks_per_sm": 0}

SPEC_CONSTS = [
    ("vecadd", {}), ("vecadd", {"BLOCK": 2048}), ("vecadd", {"BLOCK": 512}), ("vecadd", {"BLOCK": 256}),
    ("transpose_smem", {}),
    ("row_softmax", {}), ("row_softmax", {"COLS": 2048, "ROWS": 4}), ("row_softmax", {"COLS": 256}),
    ("reduce_sum", {}), ("reduce_sum", {"CHUNK": 2048}), ("reduce_sum", {"CHUNK": 256}),
    ("gemm_simt", {}), ("gemm_simt", SMALL_GEMM),
    ("gemm_simt", {"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4}),
    ("gemm_simt", {"BM": 32, "BN": 64, "BK": 8, "TM": 2, "TN": 4}),
    ("gemm_pipelined", {}), ("gemm_pipelined", {"STAGES": 3}), ("gemm_pipelined", {"STAGES": 4}),
    ("gemm_simt_db", {}), ("gemm_simt_db", SMALL_GEMM),
]


def spec_kernel(name: str, consts: dict | None = None) -> ir.Kernel:
    return compile_file(f"specs/{name}.arg" if (Path.cwd() / "specs").is_dir() else SPECS / f"{name}.arg",
                        consts)


# ---------------------------------------------------------------------------------------------
# every spec lowers and assembles


@needs_ptxas
@pytest.mark.parametrize("name,consts", SPEC_CONSTS, ids=[f"{n}{c or ''}" for n, c in SPEC_CONSTS])
def test_spec_lowers_and_assembles(name, consts):
    kernel = spec_kernel(name, consts)
    lk = lower(kernel, check=True)  # check: every thread's coordinates against the layout tables
    stats = assemble(lk.ptx)[lk.entry]
    print(f"{name} {consts}: {stats.registers} registers, spills {stats.spill_stores}/{stats.spill_loads}, "
          f"{'; '.join(lk.notes)}")
    assert stats.registers > 0
    assert stats.spill_stores == 0 and stats.spill_loads == 0, f"{name} {consts} spills"
    assert lk.ptx.count(".entry") == 1
    assert ".target sm_90a" in lk.ptx and ".address_size 64" in lk.ptx


@needs_ptxas
@pytest.mark.parametrize("name", sorted(KERNELS.KERNELS))
def test_feature_kernels_lower_and_assemble(name):
    src, consts, _ = KERNELS.KERNELS[name]
    lk = lower(compile_source(src, f"{name}.arg", consts), check=True)
    stats = assemble(lk.ptx)[lk.entry]
    assert stats.spill_stores == 0


@needs_ptxas
def test_gemm_defaults_register_budget():
    lk = lower(spec_kernel("gemm_simt"))
    stats = assemble(lk.ptx)[lk.entry]
    # an 8x4 micro-tile under policy(min_blocks_per_sm=2): two blocks of 256 threads fit 128 registers
    assert ".minnctapersm 2" in lk.ptx
    assert stats.registers <= 128 and stats.spill_stores == 0
    small = lower(spec_kernel("gemm_simt", SMALL_GEMM), **SMALL_OPTS)
    stats = assemble(small.ptx)[small.entry]
    # a 4x4 micro-tile: 16 accumulators + one k-slice of a and b + addresses; 4 blocks of 256 per SM
    assert ".minnctapersm" not in small.ptx
    assert stats.registers <= 80 and stats.spill_stores == 0


@needs_ptxas
def test_policy_changes_code_not_meaning():
    big = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
    two = assemble(lower(spec_kernel("gemm_simt", big)).ptx)["gemm_simt"]
    one = assemble(lower(spec_kernel("gemm_simt", big), min_blocks_per_sm=0).ptx)["gemm_simt"]
    # the register cap of two resident blocks makes the 8x8 micro-tile spill; without it, it fits
    assert two.registers <= 128 and one.spill_stores == 0 and one.registers > 128


def test_source_line_comments():
    kernel = spec_kernel("vecadd")
    lk = lower(kernel)
    text = (SPECS / "vecadd.arg").read_text().splitlines()
    for s in ir.walk_stmts(kernel.body):
        line = f"// {s.span.file}:{s.span.line}  {text[s.span.line - 1].strip()}"
        assert line in lk.ptx, line
    # the comment precedes that statement's instructions
    store_at = lk.ptx.index("vecadd.arg:14  store(out[")
    assert "st.global.v4.f32" in lk.ptx[store_at:]


def test_params_grid_and_shared():
    lk = lower(spec_kernel("gemm_simt", SMALL_GEMM), **SMALL_OPTS)
    assert [(p.name, p.kind, p.ptx_type) for p in lk.params] == [
        ("A", "tensor", ".u64"), ("B", "tensor", ".u64"), ("C", "tensor", ".u64"),
        ("M", "size", ".u32"), ("K", "size", ".u32"), ("N", "size", ".u32")]
    assert lk.grid({"M": 130, "N": 64, "K": 5}) == (1, 3, 1)
    assert lk.block == 256 and lk.shared_bytes == 2 * 64 * 16 * 4 and lk.dynamic_shared_bytes == 0
    big = lower(compile_source(KERNELS.BIGSMEM, "b.arg"))
    assert big.dynamic_shared_bytes == 65536 and ".extern .shared" in big.ptx
    sax = lower(compile_source(KERNELS.SAXPY, "s.arg"))
    assert [(p.name, p.kind, p.ptx_type) for p in sax.params] == [
        ("x", "tensor", ".u64"), ("y", "tensor", ".u64"), ("out", "tensor", ".u64"), ("N", "size", ".u32"),
        ("alpha", "scalar", ".f32")]


def test_vector_widths():
    notes = lambda name, c=None: "\n".join(lower(spec_kernel(name, c)).notes)  # noqa: E731
    assert "load x: 1 x v4 (masked)" in notes("vecadd")
    assert "store out: 1 x v4 (masked)" in notes("vecadd")
    assert "load x: 1 x v2" in notes("vecadd", {"BLOCK": 512})
    assert "load x: 8 x v4, run-time row alignment check (masked)" in notes("row_softmax")
    assert "store out: 8 x v4, run-time row alignment check (masked)" in notes("row_softmax")
    g = "\n".join(lower(spec_kernel("gemm_simt", SMALL_GEMM), **SMALL_OPTS).notes)
    assert "load A: 1 x v4, run-time row alignment check (masked), prefetched one iteration ahead" in g
    assert "store sA: 1 x v4" in g and "store C: 4 x v4" in g
    ptx = lower(spec_kernel("gemm_simt", SMALL_GEMM), **SMALL_OPTS).ptx
    # the mma reads its a and b operands from shared memory k-slice by k-slice, 16 bytes at a time
    assert ptx.count("ld.shared.v4.f32") == 32 and "ld.shared.f32" not in ptx  # 4 k-slices x (4 + 4)
    t = notes("transpose_smem")
    assert "load x: 4 scalar (masked)" in t  # rows 8 apart: nothing to vectorise per thread


def loop_body(ptx: str, label_prefix: str = "$L_loop_") -> list[str]:
    lines = ptx.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(label_prefix))
    label = lines[start][:-1]
    end = next(i for i, ln in enumerate(lines) if f"bra {label};" in ln)
    return [ln.strip() for ln in lines[start + 1:end] if ln.strip() and not ln.strip().startswith("//")]


def test_loop_invariant_address_arithmetic_is_hoisted():
    body = loop_body(lower(spec_kernel("gemm_simt", SMALL_GEMM), **SMALL_OPTS).ptx)
    ints = [ln for ln in body if re.match(r"(@!?%p\w+ )?(add|sub|mul|mad|shr|shl|and|or|xor|div|rem)\.", ln)
            and not re.search(r"\.(f32|pred) ", ln)]
    # per iteration: the two prefetch addresses and mask columns, the loop test; nothing per thread
    assert len(ints) <= 10, ints
    assert sum(1 for ln in body if ln.startswith("fma.rn.f32")) == 64 * 64 * 16 // 256


# ---------------------------------------------------------------------------------------------
# the emitter's arithmetic against numpy


@st.composite
def layouts(draw, max_size=512):
    rank = draw(st.integers(1, 3))
    shape, stride, size = [], [], 1
    for _ in range(rank):
        if draw(st.booleans()) and size * 4 <= max_size:
            sub = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
            shape.append(sub)
            stride.append((draw(st.integers(0, 40)), draw(st.integers(0, 40))))
            size *= sub[0] * sub[1]
        else:
            n = draw(st.integers(1, max(1, min(16, max_size // size))))
            shape.append(n)
            stride.append(draw(st.integers(0, 64)))
            size *= n
    return Layout(tuple(shape), tuple(stride))


def emitter_with_input(hi: int):
    em = Emitter()
    x = em.input("b32", "x", "mov.u32 {d}, %tid.x;", lo=0, hi=hi)
    return em, x


@SETTINGS
@given(layouts())
def test_layout_apply_through_emitter(layout):
    em, x = emitter_with_input(layout.size - 1)
    expr = layout.apply(x, em)
    want = layout.map_all()
    got = [em.evaluate(expr, {"x": i}) for i in range(layout.size)]
    assert got == list(want)


@SETTINGS
@given(layouts(max_size=256), st.integers(0, 4), st.integers(0, 4), st.integers(-6, 6))
def test_swizzled_layout_through_emitter(layout, bits, base, shift):
    if abs(shift) < bits:
        shift = bits if shift >= 0 else -bits
    comp = ComposedLayout(Swizzle(bits, base, shift), layout)
    em, x = emitter_with_input(layout.size - 1)
    expr = comp.apply(x, em)
    assert [em.evaluate(expr, {"x": i}) for i in range(layout.size)] == list(comp.map_all())


@SETTINGS
@given(st.sampled_from([(4, 8), (8, 8), (16, 4), (2, 64), (32, 32), (1, 128)]), st.data())
def test_tv_coordinates_through_emitter(tile, data):
    n = tile[0] * tile[1]
    threads = data.draw(st.sampled_from([t for t in (32, 64, 128, 256) if t <= n] or [32]))
    values = max(1, n // threads)
    # a random bijection-ish TV layout: thread part and value part as two strided modes
    t_stride = data.draw(st.sampled_from([1, values, 2, 4]))
    v_stride = data.draw(st.sampled_from([1, threads, t_stride * threads]))
    layout = Layout((threads, values), (t_stride, v_stride))
    tv = ir.TVLayout(layout, tile)
    if tv.flat_table().max() >= n:
        return
    em, t = emitter_with_input(threads - 1)
    table = tv.coord_table()
    for v in range(values):
        coords = tv.coords(t, v, em)
        for thread in range(0, threads, 3):
            assert [em.evaluate(c, {"x": thread}) for c in coords] == list(table[thread, v])


@SETTINGS
@given(st.lists(st.tuples(st.integers(-5, 40), st.integers(0, 31)), min_size=1, max_size=3),
       st.integers(-50, 50), st.integers(-96, 96).filter(bool), st.sampled_from(["div", "mod", "and", "xor", "shr"]))
def test_affine_algebra(terms, const, c, op):
    """Floor division and modulo for either sign of the value and of the constant (a probe found
    `(i - N) // -1` proved and then refused by the lowering)."""
    if op in ("and", "xor", "shr"):
        c = abs(c)
    em = Emitter()
    regs = [em.input("b32", f"r{i}", "mov.u32 {d}, %tid.x;", lo=0, hi=hi) for i, (_, hi) in enumerate(terms)]
    expr = const
    for r, (k, _) in zip(regs, terms, strict=True):
        expr = em.add(expr, em.mul(r, k))
    if op == "div":
        out, fn = em.floordiv(expr, c), lambda v: v // c
    elif op == "mod":
        out, fn = em.mod(expr, c), lambda v: v % c
    elif op == "and":
        out, fn = em.and_(expr, c), lambda v: v & c
    elif op == "shr":
        out, fn = em.shr(expr, c % 5), lambda v: v >> (c % 5)
    else:
        out, fn = em.xor(expr, c), lambda v: v ^ c
    rng = np.random.default_rng(abs(c))
    for _ in range(20):
        env = {f"r{i}": int(rng.integers(0, hi + 1)) for i, (_, hi) in enumerate(terms)}
        value = const + sum(k * env[f"r{i}"] for i, (k, _) in enumerate(terms))
        assert em.evaluate(out, env) == fn(value), (expr, op, c, env)


def test_affine_simplification_needs_no_instructions():
    em, t = emitter_with_input(255)
    tx, ty = em.mod(t, 16), em.floordiv(t, 16)
    flat = em.add(em.add(em.mul(tx, 4), em.mul(ty, 256)), 64 * 3 + 2)
    before = len(em.buffers[0])
    assert em.mod(flat, 64) == em.add(em.mul(tx, 4), 2)  # (4 tx + 256 ty + 194) % 64
    assert em.floordiv(flat, 64) == em.add(em.mul(ty, 4), 3)
    assert len(em.buffers[0]) == before
    assert isinstance(em.mod(flat, 64), Aff)


@needs_ptxas
@settings(max_examples=8, deadline=None)
@given(layouts(max_size=256), st.integers(0, 3), st.integers(0, 3), st.integers(0, 5))
def test_layout_arithmetic_as_ptx(layout, bits, base, shift):
    """End to end through the PTX text: each thread stores L(thread) and the simulator runs it."""
    shift = max(shift, bits)
    comp = ComposedLayout(Swizzle(bits, base, shift), layout)
    threads = max(32, -(-layout.size // 32) * 32)
    em, x = emitter_with_input(threads - 1)
    valid = em.cmp("lt", x, layout.size)
    value = em.mat(comp.apply(em.minmax(x, layout.size - 1, "min"), em))
    out = em.input("b64", "out", "ld.param.u64 {d}, [k_param_out];")
    addr = em.pure("b64", "mad.wide.s32", [x, 4, out])
    pred = "" if valid is True else f"@{valid} "
    em.emit(f"{pred}st.global.u32 [{addr}], {value};")
    em.emit("ret;")
    ptx = "\n".join([".version 8.0", ".target sm_90a", ".address_size 64", "",
                     ".visible .entry k(", "    .param .u64 k_param_out", ")", "{", *em.declarations(),
                     *em.prologue, *em.buffers[0], "}"])
    assemble(ptx)
    res = simulate(ptx, "k", (1, 1, 1), threads, {}, {"out": np.zeros(threads, dtype=np.uint32)})
    assert list(res["out"][: layout.size]) == list(comp.map_all())


# ---------------------------------------------------------------------------------------------
# the PTX runs: simulator against the interpreter


SIM_CASES = [
    ("vecadd", {}, {"N": 3000}, True),
    ("vecadd", {"BLOCK": 512}, {"N": 1030}, True),
    ("transpose_smem", {}, {"M": 40, "N": 70}, True),
    ("row_softmax", {}, {"M": 9, "N": 1000}, False),
    ("row_softmax", {}, {"M": 3, "N": 999}, False),  # row length not a multiple of 4: scalar path
    ("reduce_sum", {}, {"M": 2, "N": 3000}, False),
    ("gemm_simt", {}, {"M": 64, "N": 64, "K": 32}, False),
    ("gemm_simt", {}, {"M": 65, "N": 33, "K": 17}, False),  # ragged: masks, scalar fallbacks, prefetch edge
    ("gemm_simt", {"BM": 32, "BN": 64, "BK": 8, "TM": 2, "TN": 4}, {"M": 40, "N": 70, "K": 20}, False),
    ("gemm_pipelined", {}, {"M": 64, "N": 33, "K": 70}, False),  # cp.async stages, zero-fill, waits
    ("gemm_simt_db", SMALL_GEMM, {"M": 64, "N": 40, "K": 50}, False),  # loads under if, two stages
    # ldmatrix (.trans), mma.sync, bf16 cp.async with misaligned rows; the simulator's ISA rules
    # against the interpreter's atom layouts, bit for bit
    ("gemm_bf16_mma", {}, {"M": 33, "N": 20, "K": 37}, True),
]


def compare(kernel, lk, sizes, seed, exact, blocks=None):
    inputs = make_inputs(kernel, sizes, np.random.default_rng(seed))
    scalars = {p.name: inputs.pop(p.name) for p in kernel.params if isinstance(p, ir.ScalarParam)}
    got = run_lowered(lk, inputs, sizes, scalars, blocks)
    want = interp_run(kernel, inputs, sizes, scalars)
    for t in kernel.outputs:
        a, b = got[t.name].astype(np.float64), want[t.name].astype(np.float64)
        assert np.array_equal(np.isnan(a), np.isnan(b)), f"{t.name}: different elements written"
        m = ~np.isnan(b)
        if exact:
            np.testing.assert_array_equal(a[m], b[m])
        else:
            assert rel_error(a[m], b[m]) <= 1e-6, t.name


@pytest.mark.parametrize("name,consts,sizes,exact", SIM_CASES,
                         ids=[f"{n}{c or ''}{s}" for n, c, s, _ in SIM_CASES])
def test_spec_ptx_runs(name, consts, sizes, exact):
    kernel = spec_kernel(name, consts)
    compare(kernel, lower(kernel), sizes, 0, exact)


@pytest.mark.parametrize("name", sorted(KERNELS.KERNELS))
def test_feature_kernel_ptx_runs(name):
    src, consts, shapes = KERNELS.KERNELS[name]
    kernel = compile_source(src, f"{name}.arg", consts)
    lk = lower(kernel)
    for i, sizes in enumerate(shapes[:2]):
        compare(kernel, lk, sizes, i, exact=name not in ("casts",))


def test_prefetch_off_gives_the_same_result():
    kernel = spec_kernel("gemm_simt")
    compare(kernel, lower(kernel, prefetch=False), {"M": 64, "N": 40, "K": 33}, 2, False)


def test_simulator_catches_out_of_bounds_and_missing_barriers():
    text = (SPECS / "vecadd.arg").read_text().replace(", mask=True)", ")")
    kernel = compile_source(text, "v.arg")
    x = np.ones(1000, dtype=np.float32)
    with pytest.raises(PtxSimError, match="outside every tensor"):
        run_lowered(lower(kernel), {"x": x, "y": x}, {"N": 1000})
    text = (SPECS / "transpose_smem.arg").read_text().replace("barrier()", "pass")
    kernel = compile_source(text, "t.arg")
    x = np.ones((32, 32), dtype=np.float32)
    out = run_lowered(lower(kernel), {"x": x}, {"M": 32, "N": 32})["out"]
    assert np.isnan(out).any()  # reads of shared memory nobody had written yet


# ---------------------------------------------------------------------------------------------
# what is not lowered yet


def _with_mma_atom(body, atom: str) -> tuple:
    out = []
    for s in body:
        if isinstance(s, ir.For):
            s = attrs.evolve(s, body=_with_mma_atom(s.body, atom))
        elif isinstance(s, ir.If):
            s = attrs.evolve(s, then=_with_mma_atom(s.then, atom), orelse=_with_mma_atom(s.orelse, atom))
        elif isinstance(s, ir.Assign) and isinstance(s.op, ir.Mma):
            s = attrs.evolve(s, op=attrs.evolve(s.op, atom=atom))
        out.append(s)
    return tuple(out)


def test_tensor_core_atoms_on_foreign_layouts_are_reported():
    # the front end refuses them too; the lowering must not emit mma.sync on registers that are not
    # the atom's fragments (here the SIMT GEMM's layouts)
    kernel = spec_kernel("gemm_simt", SMALL_GEMM)
    tc = attrs.evolve(kernel, body=_with_mma_atom(kernel.body, "m16n8k16"))
    with pytest.raises(LoweringError, match="mma atom m16n8k16: .* not the m16n8k16 accumulator layout"):
        lower(tc)


@SETTINGS
@given(st.integers(-300, 300), st.integers(-40, 40).filter(lambda b: b != 0), st.sampled_from(["div", "rem"]),
       st.booleans())
def test_division_by_a_register_rounds_towards_minus_infinity(a, b, op, known_sign):
    """`//` and `%` by a run-time value mean Python's floor division and modulo (semantics.INT_OPS);
    `div.s32` / `rem.s32` truncate, so the lowering corrects them unless the ranges show a >= 0 and
    b > 0 (an outside probe's kernel computed `(thread_id - 12) // D`: -1 in the verifier, 0 on the
    GPU, and a load at x[-1]). With both signs known the plain instruction is kept."""
    em = Emitter()
    lo_a, lo_b = (0, 1) if known_sign else (-300, -40)
    x = em.input("b32", "a", "mov.u32 {d}, %tid.x;", lo=lo_a, hi=300)
    y = em.input("b32", "b", "mov.u32 {d}, %ntid.x;", lo=lo_b, hi=40)
    out = em.int_div(x, y) if op == "div" else em.int_rem(x, y)
    if known_sign and (a < 0 or b < 0):
        return
    want = a // b if op == "div" else a % b
    assert em.evaluate(out, {"a": a, "b": b}) == want
    emitted = "\n".join(line for buf in em.buffers for line in buf)
    assert ("selp" in emitted) == (not known_sign), emitted
