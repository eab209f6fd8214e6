"""Contracts and the three obligations they bring: reduction-coverage, reduction-operator, padding.

Each bug class has a kernel with that bug beside a correct kernel that must stay proved. The
specs under specs/ and specs/buggy/ are the larger examples (tests/test_expectations.py).
"""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusTypeError
from argus_verify.frontend import compile_source

ROWSUM = """
kernel rowsum<COLS=128, ROWS=16>(x: f32[M, N]) -> out: f32[M]:
    requires N <= COLS
    grid(cdiv(M, ROWS))
    block(16 * ROWS)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = sum(x[i, j] for j)
    r0 = block_id.x * ROWS
    xs = load(x[r0 : r0 + ROWS, 0 : COLS], tv=((16, ROWS), (4, COLS // 64)):((4, COLS), (1, 64)), mask=True{other})
    s = {reduce}(xs, axis=1, scope=warp, lanes={lanes})
    store(out[r0 : r0 + ROWS], reshape({value}, ROWS), mask=True, where=lane_id % 16 == 0)
"""


def row_sum_header(name: str, chunk: int, block: int) -> str:
    """A kernel of one block per row whose contract is the row sum (the start of its text)."""
    return (f"\nkernel {name}<CHUNK={chunk}>(x: f32[M, N]) -> out: f32[M]:\n    grid(M)\n    block({block})\n"
            "    tag x[i, j] = (i, j)\n    tag out[i] = (i,) once\n    contract out[i] = sum(x[i, j] for j)\n"
            "    row = block_id.x\n")


CHUNKED = row_sum_header("chunked", 256, 64) + """    acc = zeros(f32[1, 1], tv=(64, {width} // 64):(0, 0))
    for c0 in range({start}, {stop}, CHUNK):
        xs = load(x[row : row + 1, c0 : c0 + {width}], tv=(64, {width} // 64):({width} // 64, 1), mask=True)
        acc = acc + reduce_sum(xs, axis=1)
    w = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)
    part = shared(f32[1, 2])
    store(part[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)
    barrier()
    parts = load(part, tv=(64, 2):(0, 1))
    store(out[row : row + 1], reshape(reduce_sum(parts, axis=1), 1), where=thread_id == 0)
"""


def verdicts(text: str) -> dict:
    rep = smt.verify(compile_source(text, "k.arg"), timeout_s=10, jobs=1)
    out: dict = {}
    for r in rep.results:
        if r.obligation in ("reduction-coverage", "reduction-operator", "padding"):
            out.setdefault(r.obligation, []).append(r)
    return out


def status(results) -> set:
    return {r.status for r in results}


def rowsum(**kw) -> str:
    args = {"other": "", "reduce": "reduce_sum", "lanes": "0b01111", "value": "s"} | kw
    return ROWSUM.format(**args)


def test_a_correct_row_sum_is_proved():
    v = verdicts(rowsum())
    assert status(v["reduction-coverage"]) == {"proved"}
    assert status(v["reduction-operator"]) == {"proved"}
    assert status(v["padding"]) == {"proved"}


def test_a_butterfly_over_too_few_lanes_skips_elements():
    v = verdicts(rowsum(lanes="0b00111"))
    (r,) = v["reduction-coverage"]
    assert r.status == "violated" and r.location.line == 8  # the contract's line
    assert "is skipped" in r.message and r.witness["count"] == 0


def test_a_butterfly_crossing_rows_is_not_a_coverage_proof():
    # lanes 0b11111 mixes the two rows of a warp: the tags report it; coverage must not prove it
    v = verdicts(rowsum(lanes="0b11111"))
    assert "proved" not in status(v["reduction-coverage"])


def test_max_instead_of_the_contracts_sum_is_an_operator_violation():
    v = verdicts(rowsum(reduce="reduce_max", other=", other=-inf"))
    assert status(v["reduction-operator"]) == {"violated"}


def test_a_scaled_result_is_not_the_contract():
    v = verdicts(rowsum(value="s * 2.0"))
    (r,) = v["reduction-operator"]
    assert r.status == "violated" and "contract says" in r.message and r.witness["values"]


def test_max_padded_with_zero_is_a_padding_violation_at_the_load():
    text = rowsum(reduce="reduce_max", other=", other=0.0").replace("sum(x[i, j] for j)", "max(x[i, j] for j)")
    v = verdicts(text)
    (r,) = v["padding"]
    assert r.status == "violated" and r.location.line == 10  # the masked load
    assert status(v["reduction-coverage"]) == {"proved"}


def test_max_padded_with_minus_infinity_is_proved():
    text = rowsum(reduce="reduce_max", other=", other=-inf").replace("sum(x[i, j] for j)", "max(x[i, j] for j)")
    v = verdicts(text)
    assert all(status(v[k]) == {"proved"} for k in v)


@pytest.mark.parametrize("start,stop,width,want", [
    ("0", "N", "CHUNK", "proved"),
    ("0", "N - 1", "CHUNK", "violated"),  # the last element is never read when N % CHUNK == 1
    ("1", "N", "CHUNK", "violated"),  # starts one element in
    ("0", "N", "128", "violated"),  # half of every chunk is read
])
def test_a_chunk_loop_must_tile_the_row(start, stop, width, want):
    v = verdicts(CHUNKED.format(start=start, stop=stop, width=width))
    assert want in status(v["reduction-coverage"]), [r.message for r in v["reduction-coverage"]]


def test_the_loop_gap_names_the_sizes():
    v = verdicts(CHUNKED.format(start="0", stop="N - 1", width="CHUNK"))
    (r,) = [r for r in v["reduction-coverage"] if r.status == "violated"]
    n = r.witness["sizes"]["N"]
    assert n % 256 == 1 and "skipped" in r.message


def test_an_accumulator_combined_with_minus_is_an_operator_violation():
    text = CHUNKED.format(start="0", stop="N", width="CHUNK")
    text = text.replace("acc = acc + reduce_sum", "acc = acc - reduce_sum")
    v = verdicts(text)
    assert status(v["reduction-operator"]) == {"violated"}


def test_what_the_analysis_cannot_follow_is_unknown_never_proved():
    # the accumulator is rescaled each iteration (as an online softmax does): not a plain accumulator
    text = CHUNKED.format(start="0", stop="N", width="CHUNK").replace(
        "acc = acc + reduce_sum(xs, axis=1)", "acc = acc * 0.5 + reduce_sum(xs, axis=1)")
    v = verdicts(text)
    assert "proved" not in status(v["reduction-coverage"])
    assert "proved" not in status(v["reduction-operator"])


def test_kernels_without_a_contract_get_none_of_these_obligations():
    text = rowsum().replace("    contract out[i] = sum(x[i, j] for j)\n", "")
    assert verdicts(text) == {}


@pytest.mark.parametrize("line,message", [
    ("contract y[i] = x[i]", "unknown tensor 'y'"),
    ("contract x[i, j] = x[i, j]", "is an input"),
    ("contract out[i] = x[i, k]", "'k' is not bound"),
    ("contract out[i] = sum(x[i, i] for k)", "reads no element indexed by 'k'"),
    ("contract out[i] = sum(x[i] for j)", "rank 2"),
    ("contract out[i] = prod(x[i, j] for j)", "a contract reduces with sum, max, min"),
    ("contract out[i, j] = x[i, j]", "rank 1 but the contract binds 2"),
])
def test_contract_errors_point_at_the_mistake(line, message):
    text = rowsum().replace("    contract out[i] = sum(x[i, j] for j)", "    " + line)
    with pytest.raises(ArgusTypeError, match=message) as e:
        compile_source(text, "k.arg")
    assert e.value.span.line == 8


def test_a_generator_outside_a_contract_is_an_error():
    text = rowsum(value="sum(s for k)")
    with pytest.raises(ArgusTypeError, match="belongs to contracts"):
        compile_source(text, "k.arg")


ROWDOT = """
kernel rowdot<COLS=128, ROWS=16>(x: f32[M, N], y: f32[M, N]) -> out: f32[M]:
    requires N <= COLS
    grid(cdiv(M, ROWS))
    block(16 * ROWS)
    tag x[i, j] = (i, j)
    tag y[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = sum(x[i, j] * y[i, j] for j)
    r0 = block_id.x * ROWS
    xs = load(x[r0 : r0 + ROWS, 0 : COLS], tv=((16, ROWS), (4, COLS // 64)):((4, COLS), (1, 64)), mask=True{px})
    ys = load(y[r0 : r0 + ROWS, 0 : COLS], tv=((16, ROWS), (4, COLS // 64)):((4, COLS), (1, 64)), mask=True{py})
    s = reduce_sum(xs * ys, axis=1, scope=warp, lanes=0b01111)
    store(out[r0 : r0 + ROWS], reshape(s, ROWS), mask=True, where=lane_id % 16 == 0)
"""


@pytest.mark.parametrize("px,py,want", [
    ("", "", "proved"),  # 0 * 0
    (", other=-inf", "", "violated"),  # -inf * 0 = NaN
    ("", ", other=-inf", "violated"),  # the second operand's padding: once missed (only x's was checked)
    (", other=2.0", ", other=3.0", "violated"),
])
def test_padding_of_every_operand_along_the_reduced_axis_is_checked(px, py, want):
    """A reduction of x * y combines the padding of both operands (each its own input dimension
    along the reduced axis), and IEEE products: -inf * 0 is NaN, never the sum's identity."""
    v = verdicts(ROWDOT.format(px=px, py=py))
    assert status(v["padding"]) == {want}


@pytest.mark.parametrize("pa,want", [("", "proved"), (", other=-inf", "violated"), (", other=1.0", "violated")])
def test_mma_padding_products_must_vanish(pa, want):
    """The SIMT GEMM with its A tile padded with pa (B with 0): past K the products are pa * 0, NaN
    for -inf (a false proof of the mutation study). Padding 1.0 is flagged too: the pass does not
    know that both operands' padding falls on the same k, and 1.0 * x is not 0 for every x."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "specs" / "gemm_simt.arg").read_text()
    old = "(1, 256 * min(4, BM * BK // 256))), mask=True)"
    assert text.count(old) == 1
    v = verdicts(text.replace(old, old[:-1] + pa + ")"))
    assert status(v["padding"]) == {want}


BIAS = """
kernel bias(x: f32[M, N], b: f32[N]) -> out: f32[M, N]:
    grid(cdiv(N, 128), M)
    requires M <= 65535
    block(128)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    contract out[i, j] = x[i, j] + b[j]
    r = block_id.y
    c0 = block_id.x * 128
    xs = load(x[r : r + 1, c0 : c0 + 128], tv=(128, 1):(1, 1), mask=True)
    bs = load(b[c0 : c0 + 128], tv=(128, 1):(1, 1), mask=True)
    store(out[r : r + 1, c0 : c0 + 128], {value}, mask=True)
"""


def test_a_bias_add_is_proved_and_a_doubled_bias_is_an_operator_violation():
    # the doubled bias once crashed the padding pass (an operand whose padding is unknown)
    assert smt.verify(compile_source(BIAS.format(value="xs + reshape(bs, 1, 128)"), "b.arg")).exit_code == 0
    rep = smt.verify(compile_source(BIAS.format(value="xs + reshape(bs, 1, 128) + reshape(bs, 1, 128)"), "b.arg"))
    assert [(r.obligation, r.status) for r in rep.results if r.status != "proved"] == \
        [("reduction-operator", "violated")], rep.render_text()
    assert "but the contract says (x + b)" in rep.violations()[0].message


GEMV = """
kernel gemv(A: f32[M, N], x: f32[N]) -> y: f32[M]:
    grid(M)
    block(128)
    tag A[i, j] = (i, j)
    tag y[i] = (i,) once
    contract y[i] = sum(A[i, j] * x[j] for j)
    row = block_id.x
    acc = zeros(f32[1, 1], tv=(128, 2):(0, 0))
    for c0 in range(0, N, 256):
        a = load(A[row : row + 1, c0 : c0 + 256], tv=(128, 2):(2, 1), mask=True)
        v = load(x[{window}], tv=(128, 2):(2, 1), mask=True)
        acc = acc + reduce_sum(a * reshape(v, 1, 256), axis=1)
    w = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)
    part = shared(f32[1, 4])
    store(part[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)
    barrier()
    ps = load(part, tv=(128, 4):(0, 1))
    total = reduce_sum(ps, axis=1)
    store(y[row : row + 1], reshape(total, 1), where=thread_id == 0)
"""


def test_a_vector_reshaped_into_a_row_keeps_its_origin_through_the_reduction():
    # the reshape of x's [256] tile to [1, 256] dropped x's origin, so the contract's sum over x's
    # dimension 0 was "not computed": a false violation of every matrix-vector product
    v = verdicts(GEMV.format(window="c0 : c0 + 256"))
    assert status(v["reduction-operator"]) == {"proved"}
    assert status(v["padding"]) == {"proved"}
    assert "violated" not in status(v["reduction-coverage"])
    # the x window one element off: never proved
    v = verdicts(GEMV.format(window="c0 + 1 : c0 + 257"))
    assert "proved" not in status(v["reduction-coverage"])


MEAN = """
kernel mean<COLS=256, ROWS=4>(x: f32[M, N], inv_n: f32) -> out: f32[M]:
    requires N <= COLS
    grid(cdiv(M, ROWS))
    block(32 * ROWS)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = {contract}
    r0 = block_id.x * ROWS
    xs = load(x[r0 : r0 + ROWS, 0 : COLS], tv=((32, ROWS), COLS // 32):((1, COLS), 32), mask=True)
{body}
    s = reduce_sum(p, axis=1, scope=warp, lanes=0b11111)
    store(out[r0 : r0 + ROWS], reshape(s, ROWS), mask=True, where=lane_id == 0)
"""
SCALED_SUM = "sum(x[i, j] for j) * inv_n"


@pytest.mark.parametrize("body, contract", [
    ("    p = reduce_sum(xs * inv_n, axis=1)", SCALED_SUM),  # scaled before the sum
    ("    p = reduce_sum(xs, axis=1) * inv_n", SCALED_SUM),  # between its two levels
    ("    p = reduce_sum(xs, axis=1) * 0.5", "sum(x[i, j] for j) * 0.5"),
    ("    p = reduce_sum(xs, axis=1) * inv_n", "sum(x[i, j] * inv_n for j)"),  # the contract scales inside
])
def test_a_constant_factor_moves_through_a_sum(body, contract):
    """sum(c * x) = c * sum(x) over the reals, for c the same in every thread: a constant or a scalar
    parameter (an element of another tensor may vary along the sum: never taken out)."""
    v = verdicts(MEAN.format(body=body, contract=contract))
    assert all(status(v[k]) == {"proved"} for k in ("reduction-coverage", "reduction-operator", "padding"))


@pytest.mark.parametrize("body", [
    "    p = reduce_sum(xs * inv_n, axis=1) * inv_n",  # scaled twice
    "    p = reduce_sum(xs, axis=1)\n    if lane_id < 8:\n        p = p * inv_n",  # only some lanes' partials
    "    p = reduce_sum(xs, axis=1) * 2.0",  # another factor
])
def test_a_factor_the_contract_does_not_have_is_never_proved(body):
    v = verdicts(MEAN.format(body=body, contract=SCALED_SUM))
    found = {r.status for k in ("reduction-coverage", "reduction-operator") for r in v.get(k, [])}
    assert found - {"proved"}, found




@pytest.mark.parametrize("reduce, f, g, pad, want", [
    ("max", "abs(xs)", "abs(x[i, j])", "0.0", "proved"),  # |x| >= 0 = |0|: the padding never wins
    ("max", "abs(xs)", "abs(x[i, j])", "-1.0", "violated"),  # |-1| = 1 exceeds a row of |x| < 1
    ("max", "abs(xs)", "abs(x[i, j])", "-inf", "violated"),  # |-inf| = inf wins every row
    ("max", "max(xs, 0.0)", "max(x[i, j], 0.0)", "-3.0", "proved"),  # relu: max(-3, 0) = 0, the floor
    ("max", "xs", "x[i, j]", "0.0", "violated"),  # a row of negatives loses to 0
    ("min", "abs(xs)", "abs(x[i, j])", "0.0", "violated"),  # a min: 0 is below every |x|, it wins
    ("min", "neg(abs(xs))", "neg(abs(x[i, j]))", "0.0", "proved"),  # -|x| <= 0 = -|0|: never below
])
def test_padding_of_a_max_may_be_any_value_no_element_loses_to(reduce, f, g, pad, want):
    text = rowsum(reduce=f"reduce_{reduce}", other=f", other={pad}").replace("(xs, axis=1", f"({f}, axis=1")
    v = verdicts(text.replace("sum(x[i, j] for j)", f"{reduce}({g} for j)"))
    assert status(v["padding"]) == {want}


# 128 threads' partial row sums `acc` -> out[row]: each warp's total through shared memory, then thread 0
FOUR_WARP_TOTAL = """    w = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)
    partial = shared(f32[1, 4])
    store(partial[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)
    barrier()
    p = load(partial, tv=((4, 32), 1):((1, 0), 0))
    total = reduce_sum(p, axis=1, scope=warp, lanes=0b00011)
    store(out[row : row + 1], reshape(total, 1), where=thread_id == 0)
"""
UNROLLED = row_sum_header("unrolled", 512, 128) + """    acc = full(f32[1, 1], {init}, tv=(128, CHUNK // 128):(0, 0))
    for c0 in range(0, N, 2 * CHUNK):
        xs = load(x[row : row + 1, c0 : c0 + CHUNK], tv=(128, CHUNK // 128):(1, 128), mask=True)
        ys = load(x[row : row + 1, c0 + {second} : c0 + {second} + CHUNK], tv=(128, CHUNK // 128):(1, 128), mask=True)
{update}
""" + FOUR_WARP_TOTAL
CHAIN = "        acc = acc + reduce_sum(xs, axis=1) + reduce_sum(ys, axis=1)"
TWO_UPDATES = "        acc = acc + reduce_sum(xs, axis=1)\n        acc = acc + reduce_sum(ys, axis=1)"


def unrolled(update=CHAIN, init="0.0", second="CHUNK") -> dict:
    return {k: status(v) for k, v in verdicts(UNROLLED.format(update=update, init=init, second=second)).items()}


@pytest.mark.parametrize("update", [CHAIN, TWO_UPDATES,
                                    "        acc = acc + (reduce_sum(xs, axis=1) + reduce_sum(ys, axis=1))"])
def test_an_accumulator_updated_by_a_chain_of_sums_is_proved(update):
    """`acc = acc + a + b` is `_t = acc + a; acc = _t + b` after the front end: the old value enters
    once, through sums only (coverage.accumulation_chain); the same as two updates or `acc + (a + b)`."""
    assert all(v == {"proved"} for v in unrolled(update).values())


@pytest.mark.parametrize("update, second, init, want", [
    (CHAIN, "CHUNK - 1", "0.0", ("reduction-coverage", "violated")),  # the second load overlaps the first
    (TWO_UPDATES, "CHUNK - 1", "0.0", ("reduction-coverage", "violated")),
    (CHAIN, "CHUNK", "1.0", ("padding", "violated")),  # a chain's start is checked as a direct one's
    ("        acc = acc + reduce_sum(xs, axis=1) + acc", "CHUNK", "0.0", None),  # the old value twice
    ("        acc = max(acc + reduce_sum(xs, axis=1), reduce_sum(ys, axis=1))", "CHUNK", "0.0", None),
])
def test_a_chain_that_is_not_an_accumulation_is_never_proved(update, second, init, want):
    got = unrolled(update, init, second)
    if want is not None:
        assert want[1] in got[want[0]], got
    assert any(v - {"proved"} for v in got.values()), got


COLCHAIN = """
kernel colsum<COLS=128>(x: f32[M, N]) -> out: f32[N]:
    requires N <= COLS
    grid(1)
    block(128)
    tag x[i, j] = (i, j)
    tag out[j] = (j,) once
    contract out[j] = sum(x[i, j] for i)
    acc = zeros(f32[1, COLS], tv=(128, 1):(1, 0))
    for r0 in range(0, M, 2):
        xs = load(x[r0 : r0 + 1, 0 : COLS], tv=(128, 1):(1, 0), mask=True{pad})
        ys = load(x[r0 + 1 : r0 + 2, 0 : COLS], tv=(128, 1):(1, 0), mask=True{pad})
        acc = acc + xs + ys
    store(out[0 : COLS], reshape(acc, COLS), mask=True)
"""


@pytest.mark.parametrize("pad, want", [("", "proved"), (", other=-inf", "violated")])
def test_a_chain_checks_the_padding_of_its_addends_along_the_loop(pad, want):
    """A column sum over a row loop, two rows an iteration: the second row past M is padded, and that
    padding enters the sum through the chain as it would through `acc = acc + ys`."""
    v = verdicts(COLCHAIN.format(pad=pad))
    assert status(v["padding"]) == {want} and status(v["reduction-coverage"]) == {"proved"}


SHIFTED_MAX = """
kernel shifted<COLS=16, BLOCK=128>(x: f32[M, N]) -> out: f32[M]:
    requires N <= COLS
    grid(cdiv(M, BLOCK))
    block(BLOCK)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = {op}(x[i, j] for j) - 1.0
    row = block_id.x * BLOCK + thread_id
    xs = load(x[row : row + 1, 0 : COLS], tv=(BLOCK, COLS):(0, 1), mask=True, other={pad})
    m = reduce_{op}({value}, axis=1)
    store(out[row : row + 1], reshape(m, 1), mask=True)
"""


@pytest.mark.parametrize(("op", "value", "pad", "want"), [
    ("max", "xs - 1.0", "-inf", "proved"),  # max(x - 1) = max(x) - 1 (an outside probe's m1_ok was violated)
    ("min", "xs - 1.0", "inf", "proved"),
    ("max", "xs + -1.0", "-inf", "proved"),
    ("max", "1.0 - xs", "inf", "violated"),  # 1 - min(x), not max(x) - 1
    ("max", "xs * 2.0", "-inf", "violated"),  # a scale is not a shift
])
def test_a_max_takes_out_a_constant_shift(op, value, pad, want):
    rep = smt.verify(compile_source(SHIFTED_MAX.format(op=op, value=value, pad=pad), "k.arg"), timeout_s=10, jobs=1)
    got = {r.status for r in rep.results if r.obligation == "reduction-operator"}
    assert got == {want}, [(r.obligation, r.status, r.message) for r in rep.results if r.status != "proved"]
