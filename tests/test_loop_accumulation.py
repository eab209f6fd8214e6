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
