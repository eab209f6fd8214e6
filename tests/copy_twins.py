"""Shared checks of the 1-D copy kernels (out[i] = x[i]) that pin the verifier's output coverage
and shared-memory flow: a correct kernel is proved and copies on ragged sizes; a one-edit twin is
violated, without an internal error, and each violation's witness reproduces in the interpreter."""

from __future__ import annotations

import numpy as np

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.replay import NOT_REPRODUCED, reproduce
from argus_verify.runtime.interp import run

SIZES = (1, 300, 2053)


def copies(kernel, sizes=SIZES) -> bool:
    """The interpreter's result equals x at every size."""
    for n in sizes:
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        if not np.array_equal(run(kernel, {"x": x}, {"N": n})["out"], x):
            return False
    return True


def assert_proved_and_copies(text: str, name: str):
    kernel = compile_source(text, f"{name}.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.exit_code == 0, rep.render_text()
    assert copies(kernel)
    return kernel


def assert_twin_violated(text: str, name: str, edit: tuple, says: str | None = None, obligation="output-once"):
    """The kernel with `edit` (old, new) applied once: violated (with `says` in the first violation of
    `obligation` when given), no internal error, every witness reproduced. Returns the kernel."""
    assert edit[0] in text
    kernel = compile_source(text.replace(edit[0], edit[1], 1), f"{name}.arg")
    rep = smt.verify(kernel, timeout_s=30.0)
    assert rep.violations(), rep.render_text()
    if says is not None:
        found = [r for r in rep.violations() if r.obligation == obligation]
        assert found and says in found[0].message, rep.render_text()
    assert not any("internal" in r.message for r in rep.results), rep.render_text()
    for r in rep.violations():
        assert reproduce(kernel, r)["status"] != NOT_REPRODUCED, r
    return kernel
