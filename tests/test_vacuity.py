"""No vacuous proof: empty grids, impossible preconditions, sizes out of range and divisions by zero
in size expressions are reported (the `launch` obligation, the `vacuous` status), never proved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusError, Span
from argus_verify.frontend import compile_file, compile_source
from argus_verify.smt import vacuity
from argus_verify.smt.report import ObligationResult, VerifyReport

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 10.0


def copy_kernel(grid="cdiv(N, 256)", requires=(), body="", block="256", params="x: f32[N]") -> str:
    """A tagged copy x -> out; line 2 is the grid, the requires follow it (lines 3, 4, ...)."""
    lines = [f"kernel copy({params}) -> out: f32[N]:", f"    grid({grid})"]
    lines += [f"    requires {r}" for r in requires]
    lines += [f"    block({block})", "    tag x[i] = (i,)", "    tag out[i] = (i,) once",
              "    base = block_id.x * 256"]
    lines += ["    " + b for b in body.splitlines()]
    lines += ["    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)",
              "    store(out[base : base + 256], xs, mask=True)"]
    return "\n".join(lines) + "\n"


def check(src: str, shapes=None, **kw) -> VerifyReport:
    return smt.verify(compile_source(src, "copy.arg"), timeout_s=TIMEOUT, shapes=shapes, **kw)


def launch_results(rep, status=None) -> list:
    return [r for r in rep.results if r.obligation == "launch" and status in (None, r.status)]


def assert_everything_vacuous(rep):
    others = [r for r in rep.results if r.obligation != "launch"]
    assert others and all(r.status == "vacuous" for r in others), rep.render_text()
    assert rep.exit_code == 1 and not any(r.status == "proved" for r in rep.results)


# -- empty grids ------------------------------------------------------------------------------------

@pytest.mark.parametrize("grid", ["0", "-1"])
def test_a_grid_empty_for_every_size_is_a_violation_and_nothing_is_proved(grid):
    rep = check(copy_kernel(grid=grid))
    (bad,) = launch_results(rep, "violated")
    assert bad.location.line == 2 and bad.message == f"grid extent {grid} is less than 1: no launch has any block"
    assert bad.witness["grid"][0] < 1
    assert_everything_vacuous(rep)
    assert all(r.message == "the grid is empty for every admissible size" for r in rep.vacuous())


def test_a_grid_empty_for_some_sizes_names_them():
    rep = check(copy_kernel(grid="N - 100"))
    (bad,) = launch_results(rep, "violated")
    assert bad.location.line == 2 and bad.location.col == 10
    assert bad.witness["sizes"]["N"] <= 100 and bad.witness["grid"][0] == bad.witness["sizes"]["N"] - 100
    assert "requires N - 100 >= 1" in bad.hint
    # the other obligations hold for the launches that have blocks
    assert all(r.status == "proved" for r in rep.results if r.obligation != "launch")
    assert rep.exit_code == 1


def test_the_requires_that_excludes_empty_grids_proves_the_launch(monkeypatch):
    monkeypatch.setattr(smt, "SHOW_PROVED_LAUNCH", True)
    rep = check(copy_kernel(grid="N - 100", requires=["N > 100"]))
    (ok,) = launch_results(rep)
    assert ok.status == "proved" and ok.message == "every grid extent is at least 1 for every admissible size"
    assert rep.exit_code == 0


def test_an_integer_scalar_in_the_grid_must_be_positive():
    params = "x: f32[N], n: i32"
    (bad,) = launch_results(check(copy_kernel(grid="n", params=params)), "violated")
    assert bad.witness["scalars"]["n"] < 1
    assert not launch_results(check(copy_kernel(grid="n", requires=["n >= 1"], params=params)), "violated")


@pytest.mark.parametrize("block", ["0", "-32", "48", "2048"])
def test_an_empty_or_bad_block_is_refused_by_the_front_end(block):
    with pytest.raises(ArgusError, match="block size must be a multiple of 32 between 32 and 1024"):
        compile_source(copy_kernel(block=block), "copy.arg")


# -- preconditions ----------------------------------------------------------------------------------

def test_requires_that_contradict_each_other():
    rep = check(copy_kernel(requires=["N > 100", "N < 50"]))
    (bad,) = launch_results(rep, "violated")
    assert bad.location.line == 4  # the later of the two
    assert "`requires N > 100` (line 3) and `requires N < 50` (line 4) contradict each other" in bad.message
    assert [r["line"] for r in bad.witness["requires"]] == [3, 4]
    assert_everything_vacuous(rep)
    assert all("no launch is admissible" in r.message and "(line 3)" in r.message for r in rep.vacuous())


def test_a_requires_that_contradicts_positive_sizes():
    rep = check(copy_kernel(requires=["N < 1"]))
    (bad,) = launch_results(rep, "violated")
    assert bad.location.line == 3
    assert bad.message == ("no launch is admissible: N >= 1 (every size is at least 1) and `requires N < 1` (line 3) "
                           "contradict each other")
    assert_everything_vacuous(rep)


def test_the_contradiction_names_only_the_requires_it_needs():
    rep = check(copy_kernel(requires=["N % 2 == 0", "N <= 4096", "N % 2 == 1"]))
    (bad,) = launch_results(rep, "violated")
    assert [r["line"] for r in bad.witness["requires"]] == [3, 5]


def test_vacuous_results_are_one_line_in_the_text_and_never_proved_in_json():
    rep = check(copy_kernel(requires=["N > 100", "N < 50"]))
    text = rep.render_text()
    assert text.count("vacuous: no launch is admissible") == 1
    assert "[output-contract, output-once, bounds, uncoalesced]" in text
    assert f", {len(rep.vacuous())} vacuous (" in text.splitlines()[-1]
    objs = json.loads(json.dumps(rep.to_json()))
    assert {o["status"] for o in objs} == {"violated", "vacuous"}
    assert all(o["detail"]["checked"] for o in objs if o["status"] == "vacuous")


# -- sizes out of range (the API; the CLI refuses them before) ------------------------------------

@pytest.mark.parametrize("n", [-1, 0, vacuity.Z.MAX_SIZE + 1])
def test_a_shape_out_of_range_makes_everything_vacuous(n):
    rep = smt.verify(compile_file(ROOT / "specs" / "vecadd.arg"), timeout_s=TIMEOUT, shapes={"N": n})
    (launch,) = launch_results(rep)
    assert launch.status == "vacuous" and f"N = {n} (the given shape)" in launch.message
    assert_everything_vacuous(rep)


def test_a_shape_outside_the_requires_makes_everything_vacuous():
    rep = smt.verify(compile_file(ROOT / "specs" / "row_softmax.arg"), timeout_s=TIMEOUT, shapes={"N": 2000})
    (launch,) = launch_results(rep)
    assert launch.status == "vacuous" and launch.location.line == 5
    assert "`requires N <= COLS` (line 5)" in launch.message and "N = 2000 (the given shape)" in launch.message
    assert_everything_vacuous(rep)


def test_admissibility_without_the_size_cap():
    k = compile_file(ROOT / "specs" / "row_softmax.arg")
    assert vacuity.admissibility(k, {"N": 1000}, TIMEOUT).status == "sat"
    adm = vacuity.admissibility(k, {"N": 2000}, TIMEOUT, size_cap=False)
    assert adm.status == "unsat" and adm.shapes() == ["N"] and [p.span.line for p in adm.requires()] == [5]
    assert vacuity.admissibility(k, {"M": 2**21}, TIMEOUT, size_cap=False).status == "sat"
    assert vacuity.admissibility(k, {"M": 2**21}, TIMEOUT).status == "unsat"


# -- division by zero in size expressions -----------------------------------------------------------

@pytest.mark.parametrize("grid, requires, body, line", [
    ("N // (N // 5)", [], "", 2),
    ("cdiv(N, 256)", ["N % (N - 4) == 0"], "", 3),
    ("cdiv(N, 256)", [], "for i in range(0, N // (N - 7)):\n    pass", 7),
    ("cdiv(N, 256)", [], "nk = N - 9\nfor i in range(0, 4, 1):\n    q = i // nk", 9),
    ("cdiv(N, 256)", [], "y = load(x[N // (N - 3) : N // (N - 3) + 1], tv=(256, 1):(0, 0), mask=True)", 7),
    ("cdiv(N, 256)", [], "if N > 2:\n    q = N // (N - 2)\nelse:\n    q = N // (N - 1)", 10),
])
def test_a_divisor_that_may_be_zero_is_a_violation(grid, requires, body, line):
    rep = check(copy_kernel(grid=grid, requires=requires, body=body))
    (bad,) = launch_results(rep, "violated")
    assert bad.location.line == line and bad.message.startswith("division by zero: the divisor ")
    assert 1 <= bad.witness["sizes"]["N"] <= 9
    assert rep.exit_code == 1


def test_a_division_guarded_by_a_size_condition_is_proved(monkeypatch):
    monkeypatch.setattr(smt, "SHOW_PROVED_LAUNCH", True)
    body = "if N > 5:\n    q = N // (N - 5)\nfor i in range(0, N - 7):\n    r = i // (N - 7)"
    rep = check(copy_kernel(body=body))
    divisions = [r for r in launch_results(rep) if "divisor" in r.message]
    assert [(r.status, r.location.line) for r in divisions] == [("proved", 8), ("proved", 10)]
    assert rep.exit_code == 0


def test_constant_divisors_are_not_checked(monkeypatch):
    monkeypatch.setattr(smt, "SHOW_PROVED_LAUNCH", True)
    rep = smt.verify(compile_file(ROOT / "specs" / "gemm_pipelined.arg"), timeout_s=TIMEOUT, checks=("launch",))
    assert [r.message for r in rep.results] == ["every grid extent is at least 1 for every admissible size"]


# -- the driver -------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", sorted((ROOT / "specs").glob("*.arg")), ids=lambda p: p.stem)
def test_every_spec_has_a_proved_launch(spec):
    launch = vacuity.check_launch(compile_file(spec), {}, TIMEOUT)
    assert not launch.vacuous and [r.status for r in launch.results] == ["proved"]


def test_proved_launch_results_say_their_shapes(monkeypatch):
    monkeypatch.setattr(smt, "SHOW_PROVED_LAUNCH", True)
    rep = smt.verify(compile_file(ROOT / "specs" / "vecadd.arg"), timeout_s=TIMEOUT, shapes={"N": 1000})
    (launch,) = launch_results(rep)
    assert launch.status == "proved" and launch.message.endswith("(proved for N=1000 only)")


def test_proved_launch_results_are_hidden_until_the_golden_outputs_show_them():
    rep = smt.verify(compile_file(ROOT / "specs" / "vecadd.arg"), timeout_s=TIMEOUT)
    assert not launch_results(rep) and rep.exit_code == 0


def test_a_subset_of_checks_is_still_never_vacuously_proved():
    rep = check(copy_kernel(grid="0"), checks=("bounds",))
    assert {r.obligation for r in rep.results} == {"bounds"}
    assert all(r.status == "vacuous" for r in rep.results) and rep.exit_code == 1


def test_vacuous_is_exit_code_1_and_never_counted_as_proved():
    span = Span("f.arg", 1, 1)
    rep = VerifyReport("k", "f.arg", [ObligationResult("bounds", "proved", span)])
    assert rep.exit_code == 0
    rep.results.append(ObligationResult("race", "vacuous", span, "no launch is admissible"))
    assert rep.exit_code == 1 and rep.counts()["proved"] == 1 and rep.counts()["vacuous"] == 1


def test_an_internal_error_of_the_launch_check_is_unknown(monkeypatch):
    def broken(kernel, shapes, timeout_s):
        raise RuntimeError("boom")

    monkeypatch.setattr(vacuity, "check_launch", broken)
    rep = smt.verify(compile_file(ROOT / "specs" / "vecadd.arg"), timeout_s=TIMEOUT)
    (launch,) = launch_results(rep)
    assert launch.status == "unknown" and launch.message == "internal verifier error: RuntimeError: boom"
    assert rep.exit_code == 3
