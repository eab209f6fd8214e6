"""Tag functions may use the kernel's compile-time parameters (folded in as constants, after
`--const` overrides); a parameter of the function that shadows one is refused."""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_source

COLUMN_SUM = """\
{top}kernel colsum<BN=256, RB=4>(x: f32[M, N]) -> out: f32[N]:
    grid(cdiv(N, BN))
    block(256)
    tag x[i, j] = (i, j)
    tag out[j] = (j,) once
{inline}    contract out[j] = sum(x[i, j] for i)

    n0 = block_id.x * BN
    acc = zeros(f32[1, BN], tv=(256, RB):(1, 0))
    for r in range(0, M, RB):
        xs = load(x[r : r + RB, n0 : n0 + BN], tv=(256, RB):(1, BN), mask=True)
        assert rowof(tag(xs)[0]) == r
        acc = acc + reduce_sum(xs, axis=0)
    store(out[n0 : n0 + BN], reshape(acc, BN), mask=True)
"""


def _assertion(src: str, **consts) -> str:
    k = compile_source(src, "colsum.arg", consts)
    report = smt.verify(k, timeout_s=20, jobs=1)
    return next(r.status for r in report.results if r.obligation == "tag-assertion")


@pytest.mark.parametrize("where", ["inline", "top"])
def test_tag_function_uses_a_compile_time_parameter(where):
    fn = "tagfn rowof(a) = a // RB * RB\n"
    src = COLUMN_SUM.format(top=fn if where == "top" else "", inline="    " + fn if where == "inline" else "")
    assert _assertion(src) == "proved"
    assert _assertion(src, RB=8) == "proved"  # the override reaches the function too


def test_tag_function_with_a_wrong_use_of_the_parameter_is_violated():
    src = COLUMN_SUM.format(top="", inline="    tagfn rowof(a) = a // RB * RB + 1\n")
    assert _assertion(src) == "violated"


def test_a_tag_function_built_for_another_value_of_the_parameter_is_violated():
    # the function rounds to multiples of 4 while the kernel's rows step by RB = 8: rows 4..7 of a chunk
    src = COLUMN_SUM.format(top="", inline="    tagfn rowof(a) = a // 4 * 4\n")
    assert _assertion(src, RB=4) == "proved"
    assert _assertion(src, RB=8) == "violated"


def test_a_parameter_shadowing_a_compile_time_parameter_is_refused():
    src = COLUMN_SUM.format(top="tagfn rowof(RB) = RB\n", inline="")
    with pytest.raises(ArgusError, match="has the name of a compile-time parameter"):
        compile_source(src, "colsum.arg")
