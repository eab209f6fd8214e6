"""A contract read at an index of the output's own (the batch l of `C[l, i, j] = sum(A[l, i, k] *
B[l, k, j] for k)`) is checked only where the tags carry that index: tagged (i, k), (k, j) and (i, j),
a batched GEMM that refills B from batch 0 carries the right tags, and its output contract is
unknown (not proved). With the batch as a third component, the mma rule makes the factors agree on
it, along k, and with the result: the right kernel is proved and the batch mistakes are violated.
The kernel is an outside probe's (tests/batched/batched_mma.arg)."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

SPEC = Path(__file__).resolve().parent / "batched" / "batched_mma.arg"
TWO_COMPONENTS = {
    "tag A[l, i, k] = (i, k, l)": "tag A[l, i, k] = (i, k)",
    "tag B[l, k, j] = (k, j, l)": "tag B[l, k, j] = (k, j)",
    "tag C[l, i, j] = (i, j, l) once": "tag C[l, i, j] = (i, j) once",
}
MUTANTS = {  # one batch mistake each
    "B refilled from batch 0": ("B[bz, nk * BK", "B[0, nk * BK"),
    "A's first tile from batch 0": ("copy_async(sA[0], A[bz,", "copy_async(sA[0], A[0,"),
    "C stored to batch 0": ("store(C[bz,", "store(C[0,"),
}


def _verdicts(text: str) -> dict:
    rep = smt.verify(compile_source(text, str(SPEC)), timeout_s=30, jobs=1)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out, rep


def _edit(text: str, pairs) -> str:
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_batch_in_the_tags_proves_the_right_kernel():
    verdicts, rep = _verdicts(SPEC.read_text())
    assert all(v == {"proved"} for v in verdicts.values()), [(r.obligation, r.status, r.message)
                                                               for r in rep.results if r.status != "proved"]


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_batch_in_the_tags_finds_each_batch_mistake(mutant):
    verdicts, rep = _verdicts(_edit(SPEC.read_text(), [MUTANTS[mutant]]))
    assert "violated" in verdicts.get("tag-assertion", set()) | verdicts.get("output-contract", set()), \
        [(r.obligation, r.status, r.message) for r in rep.results if r.status != "proved"]


@pytest.mark.parametrize("mutant", [None, *MUTANTS])
def test_tags_without_the_batch_leave_the_contract_unknown(mutant):
    text = _edit(SPEC.read_text(), TWO_COMPONENTS.items())
    if mutant is not None:
        text = _edit(text, [MUTANTS[mutant]])
    verdicts, rep = _verdicts(text)
    (r,) = [r for r in rep.results if r.obligation == "output-contract"]
    assert r.status == "unknown" and "output's index 'l'" in r.message, r.message
    assert ["A", "l"] in r.detail["untracked"] and ["C", "l"] in r.detail["untracked"]


def test_the_output_must_carry_the_batch_too():
    # the factors agree on l, but C's declared tag has no l: never proved (the result's tag carries l,
    # which the declared (i, j) does not: the tags of one contract must agree in width)
    text = _edit(SPEC.read_text(), [("tag C[l, i, j] = (i, j, l) once", "tag C[l, i, j] = (i, j) once")])
    _, rep = _verdicts(text)
    (r,) = [r for r in rep.results if r.obligation == "output-contract"]
    assert r.status == "violated" and "the contract says (" in r.explanation[0], r.message
    from argus_verify import ir
    assert ir.untracked_indices(compile_source(text, str(SPEC)), "C") == [("C", "l")]
