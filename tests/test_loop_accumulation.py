"""A sum over a dimension taken by accumulating across the iterations of the loop that walks it,
with no reduce_* at all: `acc = acc + x[r, c : c + 256]` over the rows r is the column sum. The
reduction-operator obligation knew only reduce_* and mma as reductions, so this correct kernel was
violated ("the contract's sum over x's dimension 0 is not computed"). The loop's accumulation now
counts as the reduction along every input dimension its loads walk with the loop variable, and the
padding entering along it must be the identity. Each correct kernel is beside buggy twins."""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

ROWS = """\
kernel colsum_rows(x: f32[M, N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    contract out[j] = sum(x[i, j] for i)
    c = block_id.x * 256
    acc = zeros(f32[1, 256], tv=(256, 1):(1, 0))
    for r in range({range}):
        xs = load(x[r : r + 1, c : c + 256], tv=(256, 1):(1, 0), mask=True)
        acc = {update}
    store(out[c : c + 256], reshape(acc, 256), mask=True)
"""

CHUNKS = """\
kernel colsum_chunks(x: f32[M, N]) -> out: f32[N]:
    grid(cdiv(N, 64))
    block(64)
    contract out[j] = sum(x[i, j] for i)
    c = block_id.x * 64
    acc = zeros(f32[4, 64], tv=(64, 4):(1, 64))
    for r in range(0, M, 4):
        xs = load(x[r : r + 4, c : c + 64], tv=(64, 4):(1, 64), mask=True{other})
        acc = acc + xs
    s = reduce_sum(acc, axis=0)
    store(out[c : c + 64], reshape(s, 64), mask=True)
"""


def statuses(src: str) -> dict:
    rep = smt.verify(compile_source(src, "k.arg"))
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


def test_a_column_sum_accumulated_over_the_row_loop_is_proved():
    by = statuses(ROWS.format(range="M", update="acc + xs"))
    assert all(v == {"proved"} for v in by.values()), by


@pytest.mark.parametrize("range_, update, obligation", [
    ("1, M", "acc + xs", "reduction-coverage"),  # the first row is skipped
    ("0, M, 2", "acc + xs", "reduction-coverage"),  # every other row
    ("M - 1", "acc + xs", "reduction-coverage"),  # the last row
    ("M", "acc * xs", "reduction-operator"),
    ("M", "max(acc, xs)", "reduction-operator"),
])
def test_its_twins_are_violated(range_, update, obligation):
    by = statuses(ROWS.format(range=range_, update=update))
    assert "violated" in by[obligation], by


def test_chunks_of_rows_accumulated_then_reduced_are_proved_and_their_padding_checked():
    assert all(v == {"proved"} for v in statuses(CHUNKS.format(other="")).values())
    by = statuses(CHUNKS.format(other=", other=1.0"))  # rows past M enter the sum as 1
    assert by["padding"] == {"violated"}, by


SOFTMAX = """\
kernel softmax3<CH=256>(x: f32[M, N]) -> out: f32[M, N]:
    grid(M)
    block(32)
    contract out[i, j] = exp(x[i, j] - max(x[i, k] for k)) / sum(exp(x[i, l] - max(x[i, k] for k)) for l)
    r = block_id.x
    L = (32, CH // 32):(1, 32)
    m = full(f32[1, CH], -inf, tv=L)
    for c in range(0, N, CH):
        xs = load(x[r : r + 1, c : c + CH], tv=L, mask=True, other=-inf)
        m = max(m, reduce_max(xs, axis=1, scope=warp, lanes=0b11111))
    s = zeros(f32[1, CH], tv=L)
    for c in range(0, N, CH):
        ys = load(x[r : r + 1, c : c + CH], tv=L, mask=True, other=-inf)
        s = s + reduce_{op}(exp(ys - m), axis=1, scope=warp, lanes=0b11111)
    for c in range(0, N, CH):
        zs = load(x[r : r + 1, c : c + CH], tv=L, mask=True, other=-inf)
        store(out[r : r + 1, c : c + CH], exp(zs - m) / s, mask=True)
"""


def test_a_complete_max_inside_a_later_sum_loop_is_no_operator_error():
    # the three-pass softmax: m is the whole row's max when the second loop sums exp(x - m); the
    # max family it carries is complete, not a partial max combined with '+' (a false violation)
    by = statuses(SOFTMAX.format(op="sum"))
    assert by["reduction-operator"] == {"proved"}, by
    assert "violated" not in set().union(*by.values()), by
    by = statuses(SOFTMAX.format(op="max"))  # a partial max of this loop summed across iterations
    assert "violated" in by["reduction-operator"], by
