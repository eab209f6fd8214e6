"""The `argus` command line, run in-process through `argus_verify.cli.main` (and once as
`python -m argus_verify`): exit codes, text and JSON output, and error rendering.

Tests that are not about verification pass `--no-verify`, so they do not depend on the verifier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_unknown import HEAD as UNKNOWN_HEAD
from test_unknown import SOURCES as UNKNOWN_SOURCES

from argus_verify.cli import main

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
SPEC_FILES = sorted(SPECS.glob("*.arg"))
GEMM = str(SPECS / "gemm_simt.arg")
VECADD = str(SPECS / "vecadd.arg")
GEMM_SHAPE = ["--shape", "M=128,N=96,K=64"]

BROKEN = """\
kernel k(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    xs = load(x[0 : 256], tv=(256, 1):(1, 0)
"""

# out = x + y, but the reference below says x - y: every run must be reported as wrong
ADD = """\
kernel add(x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    base = block_id.x * 256
    xs = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    ys = load(y[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    store(out[base : base + 256], xs + ys, mask=True)
"""
WRONG_REF = """\
SHAPES = {"N": 1000}


def reference(x, y):
    return {"out": x - y}
"""


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def broken_file(tmp_path) -> Path:
    path = tmp_path / "broken.arg"
    path.write_text(BROKEN)
    return path


# -- check --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", SPEC_FILES, ids=[p.stem for p in SPEC_FILES])
def test_check_every_spec(capsys, path):
    code, out, err = run_cli(capsys, "check", str(path))
    assert code == 0, err
    assert out.startswith(f"{path}: ok: kernel {path.stem} (")


def test_check_json(capsys):
    code, out, _ = run_cli(capsys, "check", GEMM, "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["status"] == "ok" and payload["kernel"] == "gemm_simt"
    assert payload["block"] == 256 and payload["sizes"] == ["M", "K", "N"]
    assert payload["consts"] == {"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4}
    assert payload["statements"] > 10


def test_check_const_override(capsys):
    code, out, _ = run_cli(capsys, "check", VECADD, "--const", "BLOCK=2048", "--json")
    assert code == 0 and json.loads(out)["consts"] == {"BLOCK": 2048}


def test_check_syntax_error(capsys, broken_file):
    code, out, err = run_cli(capsys, "check", str(broken_file))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"{broken_file}:4:14: error: '(' was never closed"
    assert lines[1] == "    4 |     xs = load(x[0 : 256], tv=(256, 1):(1, 0)"
    assert lines[2] == "      |              ^"


def test_check_type_error_with_note(capsys, tmp_path):
    path = tmp_path / "typo.arg"
    path.write_text(ADD.replace("xs + ys", "xs + yz"))
    code, _, err = run_cli(capsys, "check", str(path))
    assert code == 2
    lines = err.splitlines()
    assert lines[0] == f"{path}:7:40: error: unknown name 'yz'"
    assert lines[2] == "      |" + " " * 40 + "^^"
    assert lines[3] == "  note: did you mean 'ys'?"


def test_check_error_as_json(capsys, broken_file):
    code, out, _ = run_cli(capsys, "check", str(broken_file), "--json")
    assert code == 2
    payload = json.loads(out)
    assert payload["status"] == "error" and payload["kind"] == "ArgusSyntaxError"
    assert payload["message"] == "'(' was never closed"
    assert payload["location"] == {"file": str(broken_file), "line": 4, "col": 14,
                                   "source": "xs = load(x[0 : 256], tv=(256, 1):(1, 0)"}


def test_check_missing_file(capsys, tmp_path):
    code, _, err = run_cli(capsys, "check", str(tmp_path / "nope.arg"))
    assert code == 2 and "error: cannot read" in err


def test_check_unknown_const(capsys):
    code, _, err = run_cli(capsys, "check", VECADD, "--const", "BLOK=2048")
    assert code == 2
    assert "error: kernel 'vecadd' has no compile-time parameter 'BLOK' (it has: BLOCK)" in err


def test_check_bad_const_text(capsys):
    code, _, err = run_cli(capsys, "check", VECADD, "--const", "BLOCK=lots")
    assert code == 2 and "bad compile-time parameter 'BLOCK=lots': 'lots' is not an integer" in err


# -- ir -----------------------------------------------------------------------------------------------------

def test_ir_text(capsys):
    code, out, _ = run_cli(capsys, "ir", VECADD, "--const", "BLOCK=2048")
    assert code == 0
    assert "kernel vecadd<BLOCK=2048>" in out and "body:" in out
    assert "x8/thread" in out  # 2048 values over 256 threads
    assert "load(x[base : base + 2048], tv=(256,8):(8,1), mask=True)" in out


def test_ir_json(capsys):
    code, out, _ = run_cli(capsys, "ir", GEMM, "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["kernel"] == "gemm_simt" and payload["block"] == 256
    assert [p["name"] for p in payload["params"]] == ["A", "B", "C"]
    assert payload["consts"]["BK"] == 16


# -- run ----------------------------------------------------------------------------------------------------

def test_run_gemm_on_the_interpreter(capsys):
    code, out, err = run_cli(capsys, "run", GEMM, *GEMM_SHAPE, "--backend", "interp", "--no-verify",
                             "--seed", "0")
    assert code == 0, out + err
    assert out.splitlines()[-1] == "PASS"
    assert "C: rel error" in out and "M=128" in out and "on interp" in out


def test_run_json_fields(capsys):
    code, out, _ = run_cli(capsys, "run", GEMM, *GEMM_SHAPE, "--backend", "interp", "--no-verify", "--json",
                           "--seed", "1")
    assert code == 0
    payload = json.loads(out)
    assert payload["status"] == "pass" and payload["kernel"] == "gemm_simt" and payload["backend"] == "interp"
    assert payload["sizes"] == {"M": 128, "N": 96, "K": 64}
    c = payload["outputs"]["C"]
    assert c["pass"] is True and c["nan_elements"] == 0
    assert 0 <= c["rel_error"] <= c["tolerance"]
    assert set(c) >= {"rel_error", "max_abs_error", "tolerance", "pass", "nan_elements"}
    assert payload["seconds"] >= 0


def test_no_verify_warns_loudly(capsys):
    code, _, err = run_cli(capsys, "run", VECADD, "--shape", "N=3000", "--backend", "interp", "--no-verify")
    assert code == 0
    assert "WARNING" in err and "--no-verify" in err and "NOT checked" in err


def test_run_wrong_result_exits_1(capsys, tmp_path):
    (tmp_path / "add.arg").write_text(ADD)
    (tmp_path / "add.ref.py").write_text(WRONG_REF)
    code, out, _ = run_cli(capsys, "run", str(tmp_path / "add.arg"), "--backend", "interp", "--no-verify",
                           "--seed", "0")
    assert code == 1
    assert out.splitlines()[-1] == "FAIL" and "out: rel error" in out and ": FAIL" in out
    code, out, _ = run_cli(capsys, "run", str(tmp_path / "add.arg"), "--backend", "interp", "--no-verify",
                           "--json", "--seed", "0")
    assert code == 1
    payload = json.loads(out)
    assert payload["status"] == "fail" and payload["outputs"]["out"]["pass"] is False


def test_run_without_reference(capsys, tmp_path):
    (tmp_path / "add.arg").write_text(ADD)
    code, out, _ = run_cli(capsys, "run", str(tmp_path / "add.arg"), "--shape", "N=700",
                           "--backend", "interp", "--no-verify")
    assert code == 0 and "no reference file" in out


@pytest.mark.parametrize("shape, message", [
    ("M=abc,N=96,K=64", "bad shape 'M=abc': 'abc' is not an integer"),
    ("M128", "bad shape 'M128': expected NAME=INTEGER, e.g. M=128"),
    ("=5", "bad shape '=5': expected NAME=INTEGER, e.g. M=128"),
    ("M=1.5", "bad shape 'M=1.5': '1.5' is not an integer"),
])
def test_run_bad_shape_text(capsys, shape, message):
    code, _, err = run_cli(capsys, "run", GEMM, "--shape", shape, "--backend", "interp", "--no-verify")
    assert code == 2
    assert f"argus: error: {message}" in err


def test_run_unknown_size_name(capsys):
    code, _, err = run_cli(capsys, "run", GEMM, "--shape", "M=128,Q=3", "--backend", "interp", "--no-verify")
    assert code == 2
    assert "argus: error: kernel gemm_simt has no size 'Q' (its sizes: M, K, N)" in err


def test_run_zero_size(capsys):
    code, _, err = run_cli(capsys, "run", VECADD, "--shape", "N=0", "--backend", "interp", "--no-verify")
    assert code == 2 and "size N must be positive, got 0" in err


def test_run_negative_size(capsys):
    code, _, err = run_cli(capsys, "run", VECADD, "--shape", "N=-5", "--backend", "interp", "--no-verify")
    assert code == 2 and "size N must be positive, got -5" in err and "internal error" not in err


def test_run_repeated_size(capsys):
    code, _, err = run_cli(capsys, "run", VECADD, "--shape", "N=1,N=2", "--backend", "interp", "--no-verify")
    assert code == 2 and "shape N given twice" in err


def test_run_missing_size(capsys, tmp_path):
    (tmp_path / "add.arg").write_text(ADD)
    code, _, err = run_cli(capsys, "run", str(tmp_path / "add.arg"), "--backend", "interp", "--no-verify")
    assert code == 2 and "no value for size N: give --shape N=..." in err


def test_run_syntax_error(capsys, broken_file):
    code, _, err = run_cli(capsys, "run", str(broken_file), "--backend", "interp", "--no-verify")
    assert code == 2 and err.startswith(f"{broken_file}:4:14: error: ")


# -- help and usage -----------------------------------------------------------------------------------------

def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "argus run specs/gemm_simt.arg --shape M=128,N=96,K=64" in out
    assert "exit codes:" in out


@pytest.mark.parametrize("command", ["check", "ir", "run", "verify", "compile", "bench"])
def test_subcommand_help_shows_an_example(capsys, command):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and f"argus {command} specs/" in out


def test_no_command_prints_help_and_exits_2(capsys):
    code = main([])
    assert code == 2 and "examples:" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["frobnicate", VECADD]) == 2
    assert "invalid choice" in capsys.readouterr().err


# -- as a program -------------------------------------------------------------------------------------------

def test_python_dash_m_reports_a_syntax_error_without_a_traceback(broken_file):
    proc = subprocess.run([sys.executable, "-m", "argus_verify", "check", str(broken_file)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"{broken_file}:4:14: error: '(' was never closed"
    assert lines[1:] == ["    4 |     xs = load(x[0 : 256], tv=(256, 1):(1, 0)", "      |              ^"]


# -- verify first: compile / run refuse a kernel with a violated obligation ------------------------------

BUGGY = str(SPECS / "buggy" / "gemm_stage_off_by_one.arg")


def test_compile_refuses_a_violated_kernel(capsys, tmp_path):
    out_file = tmp_path / "k.ptx"
    code, _, err = run_cli(capsys, "compile", BUGGY, "-o", str(out_file))
    assert code == 1 and not out_file.exists()
    assert "error: tag assertion failed [tag-assertion]" in err
    assert "refusing to compile" in err and "--no-verify" in err


def test_compile_refusal_json(capsys):
    code, out, _ = run_cli(capsys, "compile", BUGGY, "--json")
    payload = json.loads(out)
    assert code == 1 and payload["status"] == "refused"
    assert {r["obligation"] for r in payload["verification"] if r["status"] == "violated"} == {
        "tag-assertion", "uninitialised-read"}


def test_run_refuses_a_violated_kernel(capsys):
    code, _, err = run_cli(capsys, "run", BUGGY, "--shape", "M=64,N=64,K=64", "--backend", "interp")
    assert code == 1 and "refusing to run" in err and "PASS" not in err


def test_no_verify_compiles_it_anyway_and_says_so(capsys, tmp_path):
    out_file = tmp_path / "k.ptx"
    code, _, err = run_cli(capsys, "compile", BUGGY, "-o", str(out_file), "--no-verify")
    assert code == 0 and out_file.read_text().count(".entry") == 1
    assert "WARNING: --no-verify" in err and "NOT checked" in err


def test_run_reports_what_was_verified(capsys):
    code, out, err = run_cli(capsys, "run", GEMM, "--shape", "M=64,N=64,K=32", "--backend", "interp")
    assert code == 0 and "PASS" in out
    assert "argus: verified gemm_simt: 28 obligations proved, 0 performance warnings, 0 unknown" in err


def test_verify_replay_shows_the_stale_tile(capsys):
    code, out, _ = run_cli(capsys, "verify", BUGGY, "--replay", "--json")
    payload = json.loads(out)
    assert code == 1
    # the same shape as without --replay: the list of results, each violated one with its replay
    _, plain, _ = run_cli(capsys, "verify", BUGGY, "--json")
    assert [r["obligation"] for r in json.loads(plain)] == [r["obligation"] for r in payload]
    replays = [r["replay"] for r in payload if r["obligation"] == "tag-assertion" and r.get("replay")]
    (rep,) = replays
    # the witness's a[value] holds an element of an earlier k-tile of A, found by value in the inputs
    assert rep["replayed"] and rep["source"].startswith("A[")
    k = int(rep["source"].split(",")[1].rstrip("]"))
    assert k // 16 != rep["loop"]["kt"]


def test_verify_replay_runs_a_coverage_witness_against_the_contract(capsys):
    """A coverage witness names its element in words and carries no sizes: the replay runs the
    reference's SHAPES and shows the output against the contract (it was an internal error)."""
    code, out, _ = run_cli(capsys, "verify", str(SPECS / "buggy" / "reduce_columns_twice.arg"), "--replay", "--json")
    assert code == 1
    (cov,) = [r for r in json.loads(out) if r["obligation"] == "reduction-coverage"]
    assert cov["replay"]["replayed"] and "where the contract gives" in cov["replay"]["text"]


def test_verify_replay_finds_a_stored_expression_by_its_source(capsys, tmp_path):
    path = tmp_path / "shifted.arg"
    path.write_text("""kernel shifted(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    contract out[i] = x[i] * 2.0
    base = block_id.x * 256
    xs = load(x[base + 1 : base + 257], tv=(256, 1):(1, 0), mask=True)
    store(out[base : base + 256], xs * 2.0, mask=True)
""")
    (tmp_path / "shifted.ref.py").write_text("SHAPES = {'N': 64}\n\n\ndef reference(x):\n    return {'out': 2 * x}\n")
    code, out, _ = run_cli(capsys, "verify", str(path), "--replay")
    assert code == 1
    assert "replay (N=64, seed" in out and "(xs * 2.0)[value 0]" in out and "was not computed" not in out


# -- bad option values: exit 2, a clear message, valid JSON with --json ------------------------------

def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code, out, _ = run_cli(capsys, *argv, "--json")
    return code, json.loads(out)


@pytest.mark.parametrize("option, value, message", [
    ("--timeout", "-1", "--timeout must be a number of seconds greater than 0 and at most 4294967, got '-1'"),
    ("--timeout", "0", "--timeout must be a number of seconds greater than 0"),
    ("--timeout", "nan", "got 'nan'"),
    ("--timeout", "inf", "got 'inf'"),
    ("--timeout", "1e10", "at most 4294967, got '1e10'"),
    ("--timeout", "soon", "got 'soon'"),
    ("--jobs", "0", "--jobs must be an integer at least 1, got '0'"),
    ("--jobs", "2.5", "--jobs must be an integer at least 1, got '2.5'"),
])
def test_verify_rejects_bad_solver_options(capsys, option, value, message):
    code, _, err = run_cli(capsys, "verify", VECADD, option, value)
    assert code == 2 and err.startswith(f"argus: error: {option} must be ") and message in err
    code, payload = run_json(capsys, "verify", VECADD, option, value)
    assert code == 2 and payload["status"] == "error" and message in payload["message"]


@pytest.mark.parametrize("seed, ok", [("-1", False), ("4294967296", False), ("lucky", False), ("4294967295", True),
                                      ("0", True)])
def test_run_seed_is_in_numpys_range(capsys, seed, ok):
    code, payload = run_json(capsys, "run", VECADD, "--shape", "N=300", "--backend", "interp", "--no-verify",
                             "--seed", seed)
    if ok:
        assert code == 0 and payload["status"] == "pass"
    else:
        assert code == 2 and payload["message"] == (
            f"--seed must be an integer from 0 to 4294967295 (numpy's seed range), got '{seed}'")


@pytest.mark.parametrize("command", ["run", "compile", "bench"])
def test_timeout_is_checked_before_anything_runs(capsys, command):
    code, _, err = run_cli(capsys, command, VECADD, "--timeout", "-1")
    assert code == 2 and "--timeout must be a number of seconds greater than 0" in err


def test_bench_reps_must_be_positive(capsys):
    code, payload = run_json(capsys, "bench", VECADD, "--reps", "0")
    assert code == 2 and payload["message"] == "--reps must be an integer at least 1, got '0'"


@pytest.mark.parametrize("shape, message", [("N=0", "size N must be positive, got 0"),
                                            ("N=-1", "size N must be positive, got -1"),
                                            ("Q=3", "kernel vecadd has no size 'Q' (its sizes: N)")])
def test_verify_rejects_bad_shapes(capsys, shape, message):
    code, _, err = run_cli(capsys, "verify", VECADD, "--shape", shape)
    assert code == 2 and f"argus: error: {message}" in err
    code, payload = run_json(capsys, "verify", VECADD, "--shape", shape)
    assert code == 2 and payload["message"] == message


SOFTMAX = str(SPECS / "row_softmax.arg")


def test_verify_shape_against_the_requires(capsys):
    code, _, err = run_cli(capsys, "verify", SOFTMAX, "--shape", "N=2000")
    assert code == 2
    lines = err.splitlines()
    assert lines[0] == (f"{SOFTMAX}:5:14: error: N=2000 (--shape) does not satisfy the kernel's precondition "
                        "`requires N <= COLS` (line 5)")
    assert lines[1] == "    5 |     requires N <= COLS"
    code, payload = run_json(capsys, "verify", SOFTMAX, "--shape", "N=2000")
    assert code == 2 and payload["location"]["line"] == 5 and payload["location"]["source"] == "requires N <= COLS"


def test_run_shape_against_the_requires(capsys):
    code, _, err = run_cli(capsys, "run", SOFTMAX, "--shape", "M=4,N=1025", "--backend", "interp", "--no-verify")
    assert code == 2 and "N=1025 (--shape, or SHAPES in the reference file) does not satisfy" in err
    code, _, _ = run_cli(capsys, "run", SOFTMAX, "--shape", "M=4,N=1024", "--backend", "interp", "--no-verify")
    assert code == 0


# -- vacuous verification ----------------------------------------------------------------------------

EMPTY_GRID = ADD.replace("grid(cdiv(N, 256))", "grid(N - 1000)")
CONTRADICTION = ADD.replace("    block(256)\n", "    requires N > 100\n    requires N < 50\n    block(256)\n")


def test_verify_reports_a_contradiction_and_vacuous_obligations(capsys, tmp_path):
    path = tmp_path / "add.arg"
    path.write_text(CONTRADICTION)
    code, out, _ = run_cli(capsys, "verify", str(path))
    assert code == 1
    assert f"{path}:4:14: error: no launch is admissible: `requires N > 100` (line 3) and `requires N < 50` " \
           "(line 4) contradict each other [launch]" in out
    assert f"{path}: vacuous: no launch is admissible" in out and " proved" not in out.replace("0 proved", "")
    code, payload = run_json(capsys, "verify", str(path))
    assert code == 1 and {o["status"] for o in payload} == {"violated", "vacuous"}


def test_run_refuses_an_empty_grid(capsys, tmp_path):
    path = tmp_path / "add.arg"
    path.write_text(EMPTY_GRID)
    code, _, err = run_cli(capsys, "run", str(path), "--shape", "N=2000", "--backend", "interp")
    assert code == 0, err  # these sizes launch 1000 blocks: proved for them
    code, _, err = run_cli(capsys, "run", str(path), "--shape", "N=1000", "--backend", "interp")
    assert code == 1 and "grid extent N - 1000 is 0: the launch has no blocks [launch]" in err


def test_run_refuses_sizes_beyond_the_verifiers_range_unless_allowed(capsys):
    code, _, err = run_cli(capsys, "run", VECADD, "--shape", "N=2000000", "--backend", "interp")
    assert code == 3
    assert "N <= 1048576 (the verifier's size range) and N = 2000000 (the given shape) contradict each other" in err
    assert "--allow-unknown" in err and "PASS" not in err


# -- unknown blocks: run, compile and bench refuse it (3) unless --allow-unknown ---------------------

# a real bug (no wait before reading the async copy) that the verifier cannot decide: commit() under an if
COMMIT_UNDER_IF = UNKNOWN_HEAD.format(name="copy") + UNKNOWN_SOURCES["commit_under_if"][0]
UNKNOWN_REASON = ("12:5: uninitialised-read unknown: async-copy completion could not be proved: possible "
                  "violation under an approximation: async-copy groups cannot be counted exactly (commit() under "
                  "an if at line 9)")


@pytest.fixture
def unknown_file(tmp_path) -> Path:
    path = tmp_path / "copy.arg"
    path.write_text(COMMIT_UNDER_IF)
    return path


@pytest.mark.parametrize("command", ["run", "compile", "bench"])
def test_an_unknown_obligation_is_refused_with_its_true_reason(capsys, unknown_file, command):
    extra = ["--shape", "N=1000"] if command != "compile" else []
    code, out, err = run_cli(capsys, command, str(unknown_file), *extra)
    assert code == 3 and out == ""
    assert f"argus: refusing to {command} {unknown_file}: these obligations are not proved:" in err
    assert f"  {unknown_file}:{UNKNOWN_REASON}" in err
    assert "solver time limit" not in err and "--allow-unknown" in err


def test_an_unknown_refusal_as_json(capsys, unknown_file):
    code, payload = run_json(capsys, "run", str(unknown_file), "--shape", "N=1000", "--backend", "interp")
    assert code == 3 and payload["status"] == "refused"
    (unproved,) = payload["unproved"]
    assert unproved["obligation"] == "uninitialised-read" and unproved["line"] == 12
    assert "commit() under an if at line 9" in unproved["reason"]
    assert any(o["status"] == "unknown" for o in payload["verification"])


def test_allow_unknown_goes_on_and_says_why(capsys, unknown_file):
    code, out, err = run_cli(capsys, "run", str(unknown_file), "--shape", "N=1000", "--backend", "interp",
                             "--allow-unknown")
    assert code == 0 and "ran copy on interp" in out
    assert "argus: warning: --allow-unknown: going on although these obligations are not proved:" in err
    assert UNKNOWN_REASON in err


def test_a_violation_is_refused_even_with_allow_unknown(capsys):
    code, _, err = run_cli(capsys, "run", BUGGY, "--shape", "M=64,N=64,K=64", "--backend", "interp",
                           "--allow-unknown")
    assert code == 1 and "refusing to run" in err and "--no-verify" in err


def test_verify_progress_goes_to_stderr_and_leaves_the_json_alone(capsys):
    code = main(["verify", VECADD, "--json", "--jobs", "1", "--progress", "always"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)  # stdout: the report alone
    steps = [line.split("] ")[0].split("[")[1] for line in err.splitlines()]
    done = [int(s.split("/")[0]) for s in steps]
    total = {int(s.split("/")[1]) for s in steps}
    assert len(total) == 1 and done == sorted(done) and done[0] == 0 and done[-1] == total.pop()
    assert err.splitlines()[-1].split("] ")[1].startswith("done")
    # auto (the default): nothing off a terminal
    assert main(["verify", VECADD, "--json", "--jobs", "1"]) == 0
    assert capsys.readouterr().err == ""


def test_status_line_rewrites_one_line_on_a_terminal():
    import io

    from argus_verify.cli import StatusLine

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    line = StatusLine(term, "auto", "argus verify k.arg")
    line(0, 3, "analysing the kernel")
    line(3, 3, "done")
    line.close()
    text = term.getvalue()
    assert "\n" not in text and text.count("\r\x1b[K") == 3 and text.endswith("\r\x1b[K")
    quiet = Terminal()
    off = StatusLine(quiet, "never", "x")
    off(0, 1, "analysing the kernel")
    off.close()
    assert quiet.getvalue() == ""
