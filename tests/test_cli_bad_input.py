"""Bad input from outside (issue 11, part 3 and 4): every case ends in exit 2 (or 1 where the kernel
is at fault) with a clear message, a location where there is one, and valid JSON under --json; never
exit 4 (internal error) or a traceback. Ends with a hypothesis fuzzer over the CLI's arguments (the
fuzzer over sources is tests/test_frontend_errors.py::test_mutated_specs_give_argus_errors_only).

Tests that are not about verification pass --no-verify to stay fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus_verify.cli import main
from argus_verify.frontend import compile_source
from argus_verify.frontend.parser import MAX_NESTING

ROOT = Path(__file__).resolve().parent.parent
VECADD_PATH = ROOT / "specs" / "vecadd.arg"
VECADD = VECADD_PATH.read_text()
LAST = VECADD.splitlines()[-1].strip()  # store(out[...], xs + ys, mask=True)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return code, out, err


def cli_json(capsys, *argv: str) -> tuple[int, dict]:
    code, out, _ = cli(capsys, *argv, "--json")
    return code, json.loads(out)


def kernel_file(tmp_path, text: str, name: str = "k.arg", ref: str | None = None) -> str:
    path = tmp_path / name
    path.write_text(text)
    if ref is not None:
        path.with_name(name[:-4] + ".ref.py").write_text(ref)
    return str(path)


# -- source files: not UTF-8, endless, deeply nested ------------------------------------------------

def test_source_not_utf8(capsys, tmp_path):
    path = tmp_path / "bad.arg"
    path.write_bytes(VECADD.encode()[:40] + b"\n\xff\xfe\n")
    code, err = cli(capsys, "check", str(path))[::2]
    assert code == 2 and "is not UTF-8 text: byte 0xff cannot be decoded" in err
    assert f"{path}:2:1:" in err
    code, payload = cli_json(capsys, "check", str(path))
    assert code == 2 and payload["location"]["line"] == 2


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_source_endless(capsys):
    code, _, err = cli(capsys, "check", "/dev/zero")
    assert code == 2 and "larger than 4 MiB: not a kernel source" in err
    assert cli_json(capsys, "check", "/dev/zero")[1]["status"] == "error"


def nest_blocks(header: str, n: int) -> str:
    lines = VECADD.splitlines()[:-1]
    lines += ["    " * (i + 1) + header.format(i=i) for i in range(n)]
    return "\n".join(lines + ["    " * (n + 1) + LAST]) + "\n"


DEEP = {
    "long sum": VECADD.replace("xs + ys", " + ".join(["xs"] * 3000)),
    "long product": VECADD.replace("xs + ys", "(" + " * ".join(["xs"] * 600) + ") + ys"),
    "unary chain": VECADD.replace("xs + ys", "-" * 3000 + "xs + ys"),
    "deep if": nest_blocks("if N > {i}:", 300),
    "deep for": nest_blocks("for v{i} in range(0, 1):", 300),
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_nesting_is_a_clear_error(capsys, tmp_path, name):
    path = kernel_file(tmp_path, DEEP[name])
    code, _, err = cli(capsys, "check", path)
    assert code == 2 and f"nested too deeply: more than {MAX_NESTING} levels" in err
    assert err.startswith(f"{path}:") and "^" in err
    assert cli_json(capsys, "check", path)[1]["location"]["line"] >= 13


def test_deepest_accepted_nesting_goes_through_every_stage(capsys, tmp_path):
    """Just under the bound, a kernel is checked, verified, lowered and run without a RecursionError."""
    n = 1
    while True:  # the longest sum the front end accepts
        try:
            compile_source(VECADD.replace("xs + ys", " + ".join(["xs"] * (n + 1))), "k.arg")
        except Exception:
            break
        n += 1
    assert n > MAX_NESTING // 2
    text = VECADD.replace("xs + ys", " + ".join(["xs"] * n))
    text = text.replace("contract out[i] = x[i] + y[i]", f"contract out[i] = {n} * x[i]")  # what it computes
    path = kernel_file(tmp_path, text,
                       ref="SHAPES = {'N': 1000}\n\ndef reference(x, y):\n    return {'out': " + f"{n} * x" + "}\n")
    assert cli(capsys, "verify", path)[0] == 0
    assert cli(capsys, "compile", path, "--no-verify")[0] == 0
    code, out, _ = cli(capsys, "run", path, "--no-verify", "--backend", "interp")
    assert code == 0 and "PASS" in out


# -- output paths -------------------------------------------------------------------------------

@pytest.mark.parametrize("output, message", [
    ("/nonexistent-argus-dir/x.ptx", "the folder /nonexistent-argus-dir does not exist"),
    ("/tmp", "cannot write /tmp: it is a directory"),
    ("", "-o/--output is empty"),
    ("/dev/full", "cannot write /dev/full: No space left on device"),
])
def test_bad_output_path(capsys, output, message):
    if output == "/dev/full" and not Path(output).exists():
        pytest.skip("no /dev/full")
    code, _, err = cli(capsys, "compile", str(VECADD_PATH), "--no-verify", "-o", output)
    assert code == 2 and message in err
    code, payload = cli_json(capsys, "compile", str(VECADD_PATH), "--no-verify", "-o", output)
    assert code == 2 and message in payload["message"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_output_not_writable(capsys, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    code, _, err = cli(capsys, "compile", str(VECADD_PATH), "--no-verify", "-o", str(folder / "x.ptx"))
    assert code == 2 and "permission denied" in err


# -- option values and sizes --------------------------------------------------------------------

@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999", "1.5", "x"])
def test_seed_out_of_range(capsys, seed):
    code, payload = cli_json(capsys, "run", str(VECADD_PATH), "--no-verify", "--seed", seed)
    assert code == 2 and "--seed must be an integer from 0 to 4294967295" in payload["message"]


def test_size_over_32_bits(capsys):
    code, payload = cli_json(capsys, "run", str(VECADD_PATH), "--no-verify", "--shape", "N=100000000000")
    assert code == 2 and "sizes are 32-bit kernel parameters, at most 2147483647" in payload["message"]


def test_sizes_too_large_to_allocate(capsys, monkeypatch):
    # this machine's free memory, pinned at 1 GiB so the test means the same everywhere
    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: 2**18 if name == "SC_AVPHYS_PAGES" else
                        4096 if name == "SC_PAGE_SIZE" else real(name))
    code, _, err = cli(capsys, "run", str(VECADD_PATH), "--no-verify", "--shape", "N=2000000000")
    assert code == 2 and "need about 134.1 GiB of host memory" in err and "1.0 GiB free" in err


# -- broken reference files ---------------------------------------------------------------------

REFS = {
    "wrong output shape": ("SHAPES = {'N': 1000}\ndef reference(x, y):\n    return {'out': (x + y)[:10]}\n",
                           "the reference's output 'out' has shape [10], but the kernel's out has shape [1000]"),
    "SHAPES not a dict": ("SHAPES = [1, 2]\ndef reference(x, y):\n    return {'out': x + y}\n",
                          "SHAPES must be a dict of sizes by name"),
    "SHAPES text": ("SHAPES = {'N': 'many'}\ndef reference(x, y):\n    return {'out': x + y}\n",
                    "SHAPES['N'] = 'many'; each size must be a positive integer"),
    "SHAPES float": ("SHAPES = {'N': 1.5}\ndef reference(x, y):\n    return {'out': x + y}\n",
                     "SHAPES['N'] = 1.5; each size must be a positive integer"),
    "raising": ("SHAPES = {'N': 1000}\ndef reference(x, y):\n    raise ValueError('nope')\n",
                "the reference raised ValueError: nope"),
    "sys.exit in reference": ("SHAPES = {'N': 1000}\ndef reference(x, y):\n    import sys\n    sys.exit(3)\n",
                              "the reference called sys.exit(3)"),
    "sys.exit on load": ("import sys\nsys.exit(0)\n", "it called sys.exit(0) while loading"),
    "not numbers": ("SHAPES = {'N': 1000}\ndef reference(x, y):\n    return {'out': 'abc'}\n",
                    "the reference's output 'out' is not an array of numbers"),
    "bad TOLERANCE": ("SHAPES = {'N': 1000}\nTOLERANCE = 'x'\ndef reference(x, y):\n    return {'out': x + y}\n",
                      "TOLERANCE = 'x'; it must be a positive number"),
    "make_inputs not a dict": ("SHAPES = {'N': 1000}\ndef make_inputs(sizes, rng):\n    return 1\n"
                               "def reference(x, y):\n    return {'out': x + y}\n",
                               "make_inputs(sizes, rng) must return a dict"),
    "syntax error": ("SHAPES = {\n", "cannot load reference"),
}


@pytest.mark.parametrize("case", sorted(REFS))
def test_broken_reference(capsys, tmp_path, case):
    text, message = REFS[case]
    path = kernel_file(tmp_path, VECADD, ref=text)
    code, _, err = cli(capsys, "run", path, "--no-verify", "--backend", "interp")
    assert code == 2 and message in err
    code, payload = cli_json(capsys, "run", path, "--no-verify", "--backend", "interp")
    assert code == 2 and message in payload["message"]


# -- kernel names that PTX reserves ---------------------------------------------------------------

PTX_WORDS = ["_", "WARP_SZ", "add", "ret", "mov", "ld", "st", "bra", "exit", "reg", "param", "entry", "func",
             "shared", "global", "version", "target", "b32", "u64", "f32", "pred", "texref", "sm_90a", "call"]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_ptx_reserved_kernel_names_assemble(capsys, tmp_path):
    from argus_verify.lowering.ptxas import assemble

    for name in PTX_WORDS:
        path = kernel_file(tmp_path, VECADD.replace("kernel vecadd", f"kernel {name}"), f"{name}_k.arg")
        out_file = tmp_path / f"{name}.ptx"
        assert cli(capsys, "compile", path, "--no-verify", "-o", str(out_file))[0] == 0
        assemble(out_file.read_text())  # raises on a PTX syntax error


# -- shared memory over the per-block limit across allocations ----------------------------------

def test_shared_memory_total_over_the_limit(capsys, tmp_path):
    lines = VECADD.splitlines()
    allocs = [f"    s{i} = shared(f32[16384])" for i in range(4)]  # 64 KB each, 256 KB together
    path = kernel_file(tmp_path, "\n".join(lines[:9] + allocs + lines[9:]) + "\n")
    code, _, err = cli(capsys, "check", path)
    assert code == 2 and "reaches 262144 bytes with this allocation, over the 227 KB (232448 bytes)" in err
    assert f"{path}:13:5:" in err  # the fourth allocation, which crosses the limit
    assert cli_json(capsys, "check", path)[1]["location"]["line"] == 13


# -- argparse errors under --json, a missing ptxas ------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["run"], "the following arguments are required: file"),
    (["run", str(VECADD_PATH), "--bogus"], "unrecognized arguments: --bogus"),
    (["bogus"], "invalid choice: 'bogus'"),
    (["run", str(VECADD_PATH), "--backend", "gpu"], "invalid choice: 'gpu'"),
    ([], "unrecognized arguments: --json"),
])
def test_argparse_errors_under_json(capsys, argv, message):
    code, payload = cli_json(capsys, *argv)
    assert code == 2 and payload["status"] == "error" and message in payload["message"]


def test_argparse_error_without_json_shows_usage(capsys):
    code, _, err = cli(capsys, "run", str(VECADD_PATH), "--bogus")
    assert code == 2 and err.startswith("usage: argus") and "argus: error: unrecognized arguments: --bogus" in err


def test_missing_ptxas(capsys, monkeypatch):
    from argus_verify.lowering import ptxas

    monkeypatch.setattr(ptxas, "find_ptxas", lambda: None)
    code, payload = cli_json(capsys, "compile", str(VECADD_PATH), "--no-verify", "--stats")
    assert code == 2 and "--stats needs ptxas" in payload["message"]


# -- newcomer frictions (part 4) ------------------------------------------------------------------

def test_compile_json_without_output_gives_the_ptx(capsys):
    code, payload = cli_json(capsys, "compile", str(VECADD_PATH), "--no-verify")
    assert code == 0 and payload["ptx"].count(".entry vecadd(") == 1


def test_no_numpy_warnings_in_the_output(capsys, tmp_path):
    # a reference that overflows (inf - inf) would make numpy warn; the CLI says FAIL and nothing else
    ref = "import numpy as np\nSHAPES = {'N': 1000}\ndef reference(x, y):\n" \
          "    return {'out': np.float32(3e38) * 10 + x - np.float32(3e38) * 10}\n"
    path = kernel_file(tmp_path, VECADD, ref=ref)
    code, out, err = cli(capsys, "run", path, "--no-verify", "--backend", "interp")
    assert code == 1 and "FAIL" in out and "Warning" not in out + err


def test_readme_example_does_not_write_into_the_repository():
    readme = (ROOT / "README.md").read_text()
    for line in readme.splitlines():
        if "argus compile" in line and " -o " in line:
            assert line.split(" -o ")[1].split()[0].startswith("/tmp/"), line


# -- a fuzzer over the CLI's arguments ------------------------------------------------------------

FUZZ_FILES = [str(VECADD_PATH), str(ROOT / "specs" / "reduce_sum.arg"), "/nonexistent.arg", "/tmp", ""]
OPTION_VALUES = ["", "0", "-1", "1", "3", "2048", "1e9", "99999999999999999999", "nan", "x", "N=0", "N=-3",
                 "N=1000", "M=7,N=9", "BLOCK=512", "BLOCK=3", "BLOCK=0", "BLOCK=1024,BLOCK=1", "N", "=", ",,", "é"]
OPTIONS = {
    "check": ["--kernel", "--const"],
    "ir": ["--kernel", "--const"],
    "compile": ["--kernel", "--const", "-o", "--timeout"],
    "run": ["--kernel", "--const", "--shape", "--seed", "--backend", "--timeout"],
    "verify": ["--kernel", "--const", "--shape", "--timeout", "--jobs"],
    "test": ["--kernel", "--const", "--shape", "--seed", "--schedule", "--values", "--search-seed"],
}
FLAGS = {"compile": ["--no-verify", "--allow-unknown"], "run": ["--no-verify", "--allow-unknown"],
         "verify": [], "check": [], "ir": ["--source"], "test": []}


@st.composite
def cli_arguments(draw):
    command = draw(st.sampled_from(sorted(OPTIONS)))
    argv = [command]
    if draw(st.booleans()) or command in ("verify", "test"):  # keep verification and tests small: vecadd
        argv.append(FUZZ_FILES[0] if command in ("verify", "test") else draw(st.sampled_from(FUZZ_FILES)))
    for _ in range(draw(st.integers(0, 3))):
        option = draw(st.sampled_from(OPTIONS[command] + ["--bogus"]))
        if option == "-o":
            argv += [option, draw(st.sampled_from(["", "/tmp", "/nonexistent-dir/x.ptx", "/dev/null"]))]
        else:
            argv += [option, draw(st.sampled_from(OPTION_VALUES))]
    argv += [f for f in FLAGS[command] if draw(st.booleans())]
    if command == "run":
        argv += ["--backend", "interp", "--no-verify", "--shape", draw(st.sampled_from(["N=1000", "N=0", "N=x"]))]
    if command == "compile":
        argv.append("--no-verify")
    if command == "test":
        argv += ["--max-examples", "2", "--ptxsim", "never", "--backend", "interp"]
    return argv + (["--json"] if draw(st.booleans()) else [])


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.nested_given])
@given(argv=cli_arguments())
def test_fuzz_cli_arguments(capsys, argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3), (argv, err)
    assert "Traceback" not in out + err and "internal error" not in err, (argv, err)
    if "--json" in argv:
        json.loads(out)  # always valid JSON
    if code == 2 and "--json" not in argv:
        assert "error" in err, (argv, err)


def test_module_entry_point_on_bad_input():
    """Outside pytest too: `python -m argus_verify` on a directory is exit 2 with a message."""
    proc = subprocess.run([sys.executable, "-m", "argus_verify", "check", "/tmp", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and json.loads(proc.stdout)["status"] == "error"


def test_replay_prints_the_report_even_when_the_replay_faults(capsys):
    """--replay on an out-of-bounds witness: the verifier's report, then the replay's own stop."""
    oob = str(ROOT / "specs" / "buggy" / "vecadd_store_oob.arg")
    code, out, _ = cli(capsys, "verify", oob, "--replay")
    assert code == 1 and "error: out-of-bounds store of out [bounds]" in out and "1 violated" in out
    assert "replay: the interpreter stopped at" in out
    code, payload = cli_json(capsys, "verify", oob, "--replay")
    (violated,) = [r for r in payload if r["status"] == "violated"]
    assert code == 1 and violated["replay"]["replayed"] is False and "out-of-bounds" in violated["replay"]["error"]


def test_internal_error_under_json_is_still_json(capsys, monkeypatch):
    """A bug in Argus (here: a planted exception in the verifier) exits 4, and under --json prints a
    JSON error object, never nothing or a traceback."""
    import argus_verify.smt as smt

    def broken(*args, **kwargs):
        raise RuntimeError("planted")

    monkeypatch.setattr(smt, "verify", broken)
    code = main(["verify", str(VECADD_PATH), "--json"])
    out, err = capsys.readouterr()
    assert code == 4 and "Traceback" not in out + err
    doc = json.loads(out)
    assert doc["status"] == "error" and doc["kind"] == "internal" and "planted" in doc["message"]
