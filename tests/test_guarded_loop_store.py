"""A store inside a loop its view does not move with, guarded to one iteration (`if t == 1:`).

The coverage encoding takes such a loop at its first iteration, where the guard is false: it used to
report the output "never written", a counterexample the interpreter refutes (an internal error for the
user). Now that is unknown with its reason, for the correct kernel; the kernel whose guard names an
iteration the loop never reaches must still not be proved."""

from __future__ import annotations

import numpy as np

from argus_verify import smt
from argus_verify.frontend import compile_source
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
    assert once and all(r.status in ("proved", "unknown") for r in once), [r.message for r in once]
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    assert np.array_equal(interp.run(kernel, {"x": x}, {"N": 100})["out"], x)  # and it is right


def test_store_guarded_to_an_iteration_that_never_comes_is_not_proved():
    kernel, once = _once(2)
    assert any(r.status in ("violated", "unknown") for r in once), [r.message for r in once]
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    assert np.isnan(interp.run(kernel, {"x": x}, {"N": 100})["out"]).all()  # nothing written
