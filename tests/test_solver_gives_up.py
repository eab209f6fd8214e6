"""A solver that gives up on a re-check (machine load, a wall-clock limit) must never turn into an
internal error: the verifier keeps the model it already has.

CI once saw "internal verifier error: Z3Exception: model is not available" on a loaded machine: the
counterexample search re-checked a sat query to get a model back, and the re-check gave up. Here the
give-up is forced: after the first check of each solver, every check answers unknown."""

from __future__ import annotations

import pytest
import z3
from test_unknown import SOURCES, kernel

from argus_verify import smt
from argus_verify.smt import query, vacuity


class GivesUpAfterFirstCheck:
    """A z3 solver whose checks after the first give up, as a loaded machine's may."""

    def __init__(self, inner):
        self.inner, self.checks = inner, 0

    def check(self, *a):
        self.checks += 1
        if self.checks == 1:
            return self.inner.check(*a)
        return z3.unknown

    def reason_unknown(self):
        return "timeout (forced by the test)" if self.checks > 1 else self.inner.reason_unknown()

    def __getattr__(self, name):
        return getattr(self.inner, name)


# (the solver factory that gives up after its first check, the documented source of unknown verified)
CASES = {
    "counterexample_search": (query.Query, "smem_loop_deeper_than_the_encoding"),
    "launch_witness": (vacuity._Launcher, "launch_division_under_unfollowed_condition"),
}


@pytest.mark.parametrize("where", list(CASES))
def test_a_search_keeps_its_model_when_a_recheck_gives_up(where, monkeypatch):
    owner, name = CASES[where]
    real = owner.solver
    monkeypatch.setattr(owner, "solver", lambda self, *a: GivesUpAfterFirstCheck(real(self, *a)))
    body, obligation, reason = SOURCES[name]
    rep = smt.verify(kernel(name, body), timeout_s=10.0, checks=(obligation,))
    messages = [r.message for r in rep.results if r.obligation == obligation]
    assert messages and all("internal verifier error" not in m for m in messages), rep.render_text()
    # the source's own reason is still the one given
    assert any(reason in m for m in messages), rep.render_text()
