"""An outside probe's SIMT findings (tests/probeG): an i32 load padded with -inf (the verifier and the
interpreter took -inf, the PTX pads with 0: a false proof) is refused by the front end; an i32 max
padded with the type's least value is proved (no element can be below it); a column max whose masked
load reads rows `i : i + 1` with i in range(M) pads no row (the loop variable within its range)."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_source

HERE = Path(__file__).resolve().parent / "probeG"
IMAX = (HERE / "imax_ok.arg").read_text()
COLMAX = (HERE / "colmax_ok.arg").read_text()


def _not_proved(text: str) -> list:
    rep = smt.verify(compile_source(text, "k.arg"), timeout_s=20, jobs=1)
    return [(r.obligation, r.status) for r in rep.results if r.status != "proved"]


@pytest.mark.parametrize("other", ["-inf", "inf", "nan", "0.5", "3000000000.0"])
def test_an_integer_load_pads_with_a_value_of_its_type(other):
    with pytest.raises(ArgusError, match="is not a value of i32"):
        compile_source(IMAX.replace("other=-2147483648", f"other={other}"), "k.arg")


def test_an_i32_max_padded_with_the_least_i32_is_proved():
    assert _not_proved(IMAX) == []


def test_an_i32_max_padded_above_the_least_i32_is_violated():
    # a row of INT_MIN elements: the padding -2147483647 would win
    assert ("padding", "violated") in _not_proved(IMAX.replace("other=-2147483648", "other=-2147483647"))


def test_a_load_inside_its_loop_range_pads_no_row():
    assert _not_proved(COLMAX) == []


@pytest.mark.parametrize("loop", ["for i in range(M + 1):", "for i in range(-1, M):"])
def test_a_loop_past_the_rows_pads_them_and_is_violated(loop):
    assert ("padding", "violated") in _not_proved(COLMAX.replace("for i in range(M):", loop))


NEGMAX = (HERE / "rowrange_negmax_ok.arg").read_text()


def test_a_min_written_as_minus_the_max_of_minus_x_is_proved():
    assert _not_proved(NEGMAX) == []


@pytest.mark.parametrize("wrong", [
    "n = reduce_max(-xn, axis=1",  # -min(x), not min(x)
    "n = -reduce_max(xn, axis=1",  # -max(x)
    "n = -reduce_min(-xn, axis=1",  # max(x)
])
def test_the_sign_mistakes_around_it_are_violated(wrong):
    assert any(s == "violated" for _, s in _not_proved(NEGMAX.replace("n = -reduce_max(-xn, axis=1", wrong)))
