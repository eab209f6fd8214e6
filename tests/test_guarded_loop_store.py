"""A store inside a loop its view does not move with, guarded to one iteration (`if t == 1:`).

The coverage encoding took such a loop at its first iteration, where the guard is false: it reported
the output "never written", a counterexample the interpreter refutes (an internal error for the user),
then "unknown". With a constant trip count (at most 32) the candidate iteration is now the least whose
uniform conditions hold: the correct kernel is proved, and the kernel whose guard names an iteration
the loop never reaches is violated (its witness reproduces). A symbolic trip count stays unknown
(tests/test_unknown.py)."""

from __future__ import annotations

import numpy as np

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import REPRODUCED, reproduce
from argus_verify.runtime import interp

KERNEL = """
kernel last_pass<BLOCK=32>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i]

    base = block_id.x * BLOCK
    s = shared(f32[BLOCK])
    xs = load(x[base : base + BLOCK], tv=(BLOCK, 1):(1, 0), mask=True)
    store(s, xs)
    barrier()
    for t in range(2):
        zs = load(s[0 : BLOCK], tv=(BLOCK, 1):(1, 0))
        if t == GUARD:
            store(out[base : base + BLOCK], zs, mask=True)
        barrier()
"""


def _once(guard: int):
    kernel = compile_source(KERNEL.replace("GUARD", str(guard)), "last_pass.arg")
    rep = smt.verify(kernel, shapes={"N": 100}, checks=("output-once",))
    return kernel, [r for r in rep.results if r.obligation == "output-once"]


def test_store_guarded_to_a_later_iteration_is_not_reported_unwritten():
    kernel, once = _once(1)
    assert once and all(r.status == "proved" for r in once), [r.message for r in once]
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    assert np.array_equal(interp.run(kernel, {"x": x}, {"N": 100})["out"], x)  # and it is right


def test_store_guarded_to_an_iteration_that_never_comes_is_not_proved():
    kernel, once = _once(2)
    assert any(r.status == "violated" and "never written" in r.message for r in once), [r.message for r in once]
    assert all(reproduce(kernel, r)["status"] == REPRODUCED for r in once if r.status == "violated")
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    assert np.isnan(interp.run(kernel, {"x": x}, {"N": 100})["out"]).all()  # nothing written
