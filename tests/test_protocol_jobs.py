"""The protocol check in two processes (`jobs` > 1) gives the results of the check in one, and the
helpers it rests on: running a function in a forked child, and coordinate tables of some threads."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_verify import ir
from argus_verify.frontend import compile_file
from argus_verify.layout import Layout
from argus_verify.smt import protocol as P
from argus_verify.smt.forked import in_child

ROOT = Path(__file__).resolve().parents[1]
posix = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _results(kernel, jobs):
    for cache in (P._OFFSETS, P._MASKS, P._EV, P._TMA_TAGS):
        cache.clear()
    out = []
    for r in P.check_protocol(kernel, jobs=jobs):
        out.append((r.obligation, r.status, r.location.line if r.location else None, r.message,
                    repr(sorted(r.detail.items())), repr(r.witness), repr(getattr(r, "explanation", None))))
    return out


@posix
@pytest.mark.parametrize("spec", [
    "specs/hopper/gemm_bf16_wgmma.arg",  # proved for all sizes by the pumping argument
    "specs/buggy/wgmma_wrong_parity.arg",  # the first runs find the bug: the lemmas made beside them are dropped
    "specs/buggy/wgmma_expect_tx_overcount.arg",
])
def test_two_processes_give_the_results_of_one(spec):
    kernel = compile_file(str(ROOT / spec))
    one = _results(kernel, 1)
    assert one and all(x[1] in ("proved", "violated", "unknown") for x in one)
    assert _results(kernel, 2) == one
    if "buggy" in spec:
        assert any(x[1] == "violated" for x in one)
    else:
        assert all(x[1] == "proved" for x in one)


@posix
def test_in_child_runs_the_function_in_another_process():
    assert in_child(os.getpid)() != os.getpid()
    assert in_child(lambda a, b: a * b, 6, 7)() == 42


@posix
def test_in_child_runs_the_function_here_when_its_result_does_not_come_back():
    def unpicklable():
        return os.getpid(), lambda: None  # (a lambda does not pickle)

    pid, _ = in_child(unpicklable)()
    assert pid == os.getpid()

    def fails():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):  # (the child's failure, raised again here)
        in_child(fails)()


@posix
def test_in_child_nests():
    def outer():
        inner = in_child(os.getpid)
        return os.getpid(), inner()

    mine, (child, grandchild) = os.getpid(), in_child(outer)()
    assert len({mine, child, grandchild}) == 3


_TV = ir.TVLayout(Layout(((16, 16), (8, 4)), ((4, 512), (64, 1))), (128, 64))
_BROADCAST = ir.TVLayout(Layout((256, 32768), (0, 1)), (128, 256))  # every thread holds the whole tile
_MAPS = [_TV, _BROADCAST, ir.Projected(_TV, 1), ir.Transposed(_TV), ir.Reshaped(_TV, (64, 128))]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(range(len(_MAPS))), st.lists(st.integers(0, 255), max_size=6))
def test_coordinate_table_of_some_threads_is_those_rows_of_the_whole(which, rows):
    tv = _MAPS[which]
    rows = np.array(rows, dtype=np.int64)
    part = tv.coord_table(rows)
    assert part.shape == (len(rows), tv.values, len(tv.tile))
    if tv is not _BROADCAST:  # (the whole table of that one has 16 M entries)
        assert np.array_equal(part, tv.coord_table()[rows])
    else:
        assert all(np.array_equal(part[i], np.stack(np.unravel_index(np.arange(32768), (128, 256)), -1))
                   for i in range(len(rows)))
