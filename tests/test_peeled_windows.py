"""reduction-coverage of a reduced dimension walked by one loop plus windows read outside it.

A loop over whole chunks and a masked tail chunk after it (or a prologue chunk before it) is
proved when, for every size, the loop's windows and the extra windows cover each element of the
dimension exactly once (sum) or at least once (max). Every correct kernel here has buggy
neighbours that must never be proved: overlaps and gaps are found by the solver (violated, with the
sizes that show them, which the interpreter reproduces), wrong counts per window by the concrete
pass (violated). A window read outside the loop that never enters the reduction is unknown: it may
have been read for another purpose.
"""

from __future__ import annotations

import types

import pytest

from argus_verify import replay, smt
from argus_verify.frontend import compile_source
from argus_verify.smt.coverage import Coverage, WindowsDoNotTile

HEAD = """
kernel k<C=8, BLOCK=128>(x: f32[M, N]) -> out: f32[M]:
    grid(cdiv(M, BLOCK))
    block(BLOCK)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = {op}(x[i, j] for j)
    r0 = block_id.x * BLOCK
    NF = N // C * C
    acc = full(f32[BLOCK, 1], {init}, tv=(BLOCK, C):(1, 0))
"""
STORE = "    store(out[r0 : r0 + BLOCK], reshape(acc, BLOCK), mask=True)\n"


def tail_kernel(stop="NF", at="NF", adds=1, op="sum", loop=True, combine=None) -> str:
    """Row sums (or maxima), one thread per row: chunks [c0, c0 + C) for c0 in range(0, stop, C),
    then a tail chunk [at, at + C), both masked to the row."""
    red, other, init = ("reduce_sum", "", "0.0") if op == "sum" else ("reduce_max", ", other=-inf", "-inf")
    add = (lambda v: f"acc + reduce_sum({v}, axis=1)") if op == "sum" else \
        (lambda v: f"max(acc, reduce_max({v}, axis=1))")
    text = HEAD.format(op=op, init=init)
    if loop:
        text += (f"    for c0 in range(0, {stop}, C):\n"
                 f"        xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True{other})\n"
                 f"        acc = {add('xs')}\n")
    text += f"    xt = load(x[r0 : r0 + BLOCK, {at} : {at} + C], tv=(BLOCK, C):(C, 1), mask=True{other})\n"
    text += f"    acc = {combine or add('xt')}\n" * adds
    return text + STORE


def prologue_kernel(start: str) -> str:
    """A chunk [0, C) before the loop, then chunks from `start` to N."""
    return HEAD.format(op="sum", init="0.0") + f"""\
    xp = load(x[r0 : r0 + BLOCK, 0 : C], tv=(BLOCK, C):(C, 1), mask=True)
    acc = acc + reduce_sum(xp, axis=1)
    for c0 in range({start}, N, C):
        xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True)
        acc = acc + reduce_sum(xs, axis=1)
""" + STORE


def narrow_tail_kernel(width: int) -> str:
    """A tail `width` columns wide, summed through shared memory into the accumulator's layout."""
    return HEAD.format(op="sum", init="0.0") + f"""    for c0 in range(0, NF, C):
        xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True)
        acc = acc + reduce_sum(xs, axis=1)
    xt = load(x[r0 : r0 + BLOCK, NF : NF + {width}], tv=(BLOCK, {width}):({width}, 1), mask=True)
    sm = shared(f32[BLOCK, 1])
    store(sm, reduce_sum(xt, axis=1))
    barrier()
    acc = acc + load(sm, tv=(BLOCK, C):(1, 0))
""" + STORE


def two_tails_kernel(second: str) -> str:
    """Chunks up to a multiple of 2C, then two tail chunks at N16 and N16 + second."""
    return HEAD.format(op="sum", init="0.0") + f"""    N16 = N // 16 * 16
    for c0 in range(0, N16, C):
        xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True)
        acc = acc + reduce_sum(xs, axis=1)
    xa = load(x[r0 : r0 + BLOCK, N16 : N16 + C], tv=(BLOCK, C):(C, 1), mask=True)
    xb = load(x[r0 : r0 + BLOCK, N16 + {second} : N16 + {second} + C], tv=(BLOCK, C):(C, 1), mask=True)
    acc = acc + reduce_sum(xa, axis=1) + reduce_sum(xb, axis=1)
""" + STORE


def tail_in_every_iteration() -> str:
    """The tail, loaded before the loop, is added at every iteration instead of once."""
    return tail_kernel(adds=0).replace(
        "    for c0", "    xt0 = load(x[r0 : r0 + BLOCK, NF : NF + C], tv=(BLOCK, C):(C, 1), mask=True)\n    for c0"
    ).replace("        acc = acc + reduce_sum(xs, axis=1)\n",
              "        acc = acc + reduce_sum(xs, axis=1)\n        acc = acc + reduce_sum(xt0, axis=1)\n")


LAST_ITERATION_ONLY = HEAD.format(op="sum", init="0.0") + """    for c0 in range(0, NF, C):
        xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True)
        part = reduce_sum(xs, axis=1)
    xt = load(x[r0 : r0 + BLOCK, NF : NF + C], tv=(BLOCK, C):(C, 1), mask=True)
    tot = part + reduce_sum(xt, axis=1)
    store(out[r0 : r0 + BLOCK], reshape(tot, BLOCK), mask=True)
"""

PERSISTENT = """
kernel k<C=8, BLOCK=128>(x: f32[M, N]) -> out: f32[M]:
    grid(cdiv(M, 2 * BLOCK))
    block(BLOCK)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = sum(x[i, j] for j)
    NF = N // C * C
    for rr in range(0, 2, 1):
        r0 = (block_id.x * 2 + rr) * BLOCK
        acc = full(f32[BLOCK, 1], 0.0, tv=(BLOCK, C):(1, 0))
        for c0 in range(0, NF, C):
            xs = load(x[r0 : r0 + BLOCK, c0 : c0 + C], tv=(BLOCK, C):(C, 1), mask=True)
            acc = acc + reduce_sum(xs, axis=1)
        xt = load(x[r0 : r0 + BLOCK, {at} : {at} + C], tv=(BLOCK, C):(C, 1), mask=True)
        acc = acc + reduce_sum(xt, axis=1)
        store(out[r0 : r0 + BLOCK], reshape(acc, BLOCK), mask=True)
"""

CORRECT = {
    "tail": tail_kernel(),
    "tail_of_c_minus_1": narrow_tail_kernel(7),  # N % C <= C - 1: the narrower tail still reaches N
    "prologue_then_loop_from_c": prologue_kernel("C"),
    "two_tails": two_tails_kernel("C"),
    "max_with_overlapping_tail": tail_kernel(op="max", at="NF - 1"),  # max may see an element twice
    "in_a_loop_over_row_blocks": PERSISTENT.format(at="NF"),  # the tail in the loop around the chunk loop
}

# name -> (kernel, what reduction-coverage must be: a counterexample of the solver's (violated, with
# sizes), a wrong count of the concrete pass (violated), or another reason it is not proved)
BUGGY = {
    "tail_at_nf_minus_1": (tail_kernel(at="NF - 1"), "sizes"),  # element NF - 1 twice
    "tail_at_nf_plus_1": (tail_kernel(at="NF + 1"), "sizes"),  # element NF never
    "tail_of_c_minus_2": (narrow_tail_kernel(6), "sizes"),  # element N - 1 never when N % C == C - 1
    "main_loop_to_n": (tail_kernel(stop="N"), "sizes"),  # the last chunk twice when N % C != 0
    "main_loop_to_n_minus_1": (tail_kernel(stop="(N - 1) // C * C"), "sizes"),  # a chunk never when N % C == 0
    "prologue_then_loop_from_0": (prologue_kernel("0"), "sizes"),  # [0, C) twice
    "two_tails_overlapping": (two_tails_kernel("C - 1"), "sizes"),
    "max_tail_with_gap": (tail_kernel(op="max", at="NF + 1"), "sizes"),
    "last_iteration_only": (LAST_ITERATION_ONLY, "sizes"),  # earlier chunks are lost
    "tail_added_twice": (tail_kernel(adds=2), "violated"),
    "tail_not_added": (tail_kernel(adds=0), "unknown"),  # (output-contract is violated)
    "tail_combined_with_max": (tail_kernel(combine="max(acc, reduce_sum(xt, axis=1))"), "operator"),
    "main_loop_missing": (tail_kernel(loop=False), "unknown"),  # one window at a start that depends on N
    "tail_in_every_iteration": (tail_in_every_iteration(), "unknown"),
    "tail_added_in_a_loop_of_two": (tail_kernel().replace(
        "    acc = acc + reduce_sum(xt, axis=1)\n",
        "    for rr in range(0, 2, 1):\n        acc = acc + reduce_sum(xt, axis=1)\n"), "unknown"),
    "tail_loaded_in_another_loop": (tail_kernel().replace(
        "    xt = load(", "    for rr in range(0, 1, 1):\n        xt = load("), "unknown"),
    "in_a_loop_over_row_blocks_overlapping": (PERSISTENT.format(at="NF - 1"), "sizes"),
}


def verify(text: str):
    kernel = compile_source(text, "k.arg")
    return kernel, smt.verify(kernel, timeout_s=10, jobs=1)


def of(report, obligation: str) -> list:
    return [r for r in report.results if r.obligation == obligation]


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_loop_with_windows_outside_it_that_tile_the_dimension_is_proved(name):
    _, rep = verify(CORRECT[name])
    for ob in ("reduction-coverage", "reduction-operator", "padding"):
        assert {r.status for r in of(rep, ob)} == {"proved"}, [r.message for r in of(rep, ob)]


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_windows_that_miss_or_repeat_an_element_are_never_proved(name):
    text, how = BUGGY[name]
    kernel, rep = verify(text)
    cov = of(rep, "reduction-coverage")
    assert "proved" not in {r.status for r in cov}, [r.message for r in cov]
    if how == "sizes":
        (r,) = cov
        assert r.status == "violated" and " at " in r.message and "N = " in r.message, r.message
        assert r.witness["sizes"] == {k: v for k, v in r.witness["sizes"].items() if k in kernel.sizes}
    elif how == "violated":
        assert "violated" in {r.status for r in cov}, [r.message for r in cov]
    elif how == "operator":
        assert {r.status for r in of(rep, "reduction-operator")} == {"violated"}
    else:
        assert {r.status for r in cov} == {"unknown"}
    for r in rep.results:
        if r.status == "violated":
            assert replay.reproduce(kernel, r)["status"] != "not reproduced", (r.obligation, r.message)


@pytest.mark.parametrize("name", sorted(n for n, (_, how) in BUGGY.items() if how == "sizes"))
def test_the_solvers_counterexample_sizes_show_the_bug_in_the_interpreter(name):
    kernel = compile_source(BUGGY[name][0], "k.arg")
    with pytest.raises(WindowsDoNotTile) as err:
        Coverage(kernel)
    witness = types.SimpleNamespace(obligation="reduction-coverage", location=None,
                                    witness={"sizes": err.value.sizes})
    got = replay.reproduce(kernel, witness)["status"]
    if name.startswith("max"):  # a row of no element is -inf, which replay leaves unchecked
        assert got != "not reproduced", err.value.reason
    else:
        assert got == "reproduced", err.value.reason


def test_the_counterexample_names_the_element_and_the_windows():
    with pytest.raises(WindowsDoNotTile) as err:
        Coverage(compile_source(BUGGY["main_loop_to_n"][0], "k.arg"))
    e = err.value
    assert e.sizes["N"] % 8 != 0 and e.count == 2 and e.element >= e.sizes["N"] // 8 * 8
    assert "the loop at line" in e.reason and "the window read at line" in e.reason


def test_a_tail_read_before_the_loop_and_added_after_it_is_proved():
    text = tail_kernel()
    lines = text.splitlines(keepends=True)
    load = next(ln for ln in lines if "xt = load" in ln)
    lines.remove(load)
    lines.insert(next(i for i, ln in enumerate(lines) if "for c0" in ln), load)
    _, rep = verify("".join(lines))
    assert {r.status for r in of(rep, "reduction-coverage")} == {"proved"}
