"""The flattened-index idiom of hand-written elementwise kernels: one element per thread at
(g // N, g % N), g = block_id.x * 256 + thread_id, guarded by g < M * N. output-once was unknown
there ("the start of dimension 0 of the store is not affine"); the candidate writer now inverts the
index (smt/flat_writer.py) and the store's own starts and guard confirm it. The
correct kernels (row- and column-major) are proved and right; their twins are violated, and the
witnesses reproduce."""

from __future__ import annotations

import numpy as np
import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import NOT_REPRODUCED, REPRODUCED, UNCHECKED, reproduce
from argus_verify.runtime.interp import run

KERNEL = """\
kernel flat(x: f32[M, N]) -> out: f32[M, N]:
    grid(cdiv(N * M, 256))
    block(256)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    contract out[i, j] = x[i, j]

    g = block_id.x * 256 + thread_id
    i = {i}
    j = {j}
    a = load(x[i : i + 1, j : j + 1], tv=(256, 1):(0, 0), mask=True)
    if g < {count}:
        store(out[i : i + 1, j : j + 1], a)
"""

CORRECT = {"row_major": ("g // N", "g % N", "M * N"), "column_major": ("g % M", "g // M", "M * N")}
TWINS = {"last_element_dropped": ("g // N", "g % N", "M * N - 1"),
         "shifted_by_one": ("(g + 1) // N", "(g + 1) % N", "M * N")}


@pytest.mark.parametrize("name", list(CORRECT))
def test_a_flattened_index_copy_is_proved_and_right(name):
    i, j, count = CORRECT[name]
    kernel = compile_source(KERNEL.format(i=i, j=j, count=count), "flat.arg")
    rep = smt.verify(kernel, timeout_s=60.0)
    assert rep.exit_code == 0 and rep.results, rep.render_text()
    x = np.random.default_rng(1).standard_normal((7, 45)).astype(np.float32)
    assert np.array_equal(run(kernel, {"x": x}, {"M": 7, "N": 45})["out"], x)


@pytest.mark.parametrize("name", list(TWINS))
def test_its_twin_is_violated_and_reproduces(name):
    i, j, count = TWINS[name]
    kernel = compile_source(KERNEL.format(i=i, j=j, count=count), "flat.arg")
    rep = smt.verify(kernel, timeout_s=60.0, checks=("output-once",))
    once = [r for r in rep.violations() if r.obligation == "output-once"]
    assert once and "never written" in once[0].message, rep.render_text()
    # (the shifted twin also stores out of bounds, where the interpreter stops first: unchecked)
    want = (REPRODUCED,) if name == "last_element_dropped" else (REPRODUCED, UNCHECKED)
    assert reproduce(kernel, once[0])["status"] in want and NOT_REPRODUCED not in want
