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
    with pytest.raises(SystemExit) as info:
        main(["frobnicate", VECADD])
    assert info.value.code == 2
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
    assert "argus: verified gemm_simt: 25 obligations proved, 0 performance warnings, 0 unknown" in err


def test_verify_replay_shows_the_stale_tile(capsys):
    code, out, _ = run_cli(capsys, "verify", BUGGY, "--replay", "--json")
    payload = json.loads(out)
    assert code == 1
    replays = [r for r in payload["replay"] if r["obligation"] == "tag-assertion"]
    (rep,) = replays
    # the witness's a[value] holds an element of an earlier k-tile of A, found by value in the inputs
    assert rep["replayed"] and rep["source"].startswith("A[")
    k = int(rep["source"].split(",")[1].rstrip("]"))
    assert k // 16 != rep["loop"]["kt"]
