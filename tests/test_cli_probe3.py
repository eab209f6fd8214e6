"""Breaks an outside tester found (probe 3): integer outputs, bad CONSTS, schedule arguments, binary
and unwritable files, agent task syntax errors, references that raise, exit or print, bad `load`
constants, a compile that would overwrite its source, several kernels in a file, duplicate names,
repeated flags, and the messages for Python-only syntax, tabs and a byte order mark. Each ends in a
clear error (exit 2) or the right result, never an internal error, a traceback or broken JSON.

Tests that are not about verification pass --no-verify to stay fast.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_cli_bad_input import cli, cli_json

import argus_verify
from argus_verify.api import ConstantError
from argus_verify.cli import build_parser, main
from argus_verify.diagnostics import ArgusError, ArgusSyntaxError, ArgusTypeError, SourceMap, Span, render_source
from argus_verify.frontend import compile_source
from argus_verify.runtime.schedules import Schedule

ROOT = Path(__file__).resolve().parent.parent
VECADD = (ROOT / "specs" / "vecadd.arg").read_text()
AUDIT_PTX = ROOT / "tests" / "audit" / "corpus" / "barrier_tid_branch.ptx"




def kernel_file(tmp_path, text: str = VECADD, name: str = "k.arg", ref: str | None = None) -> str:
    path = tmp_path / name
    path.write_text(text)
    if ref is not None:
        path.with_name(name[:-4] + ".ref.py").write_text(ref)
    return str(path)


def int_kernel(dtype: str) -> str:
    return f"""kernel addk(x: {dtype}[N], y: {dtype}[N]) -> out: {dtype}[N]:
    grid(cdiv(N, 256))
    block(256)
    tag x[i] = (i,)
    tag y[i] = (i,)
    tag out[i] = (i,) once
    base = block_id.x * 256
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    ys = load(y[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[base : base + 256], xs + ys, mask=True)
"""


INT_REF = """import numpy as np
SHAPES = {{"N": 300}}
def make_inputs(sizes, rng):
    return {{n: rng.integers(0, 50, sizes["N"]).astype(np.{np}) for n in ("x", "y")}}
def reference(x, y):
    return {{"out": x + y{extra}}}
"""
NP = {"i32": "int32", "i64": "int64", "u32": "uint32", "i8": "int8", "u8": "uint8"}


# -- 1a: integer outputs compare exactly ------------------------------------------------------------

@pytest.mark.parametrize("dtype", list(NP))
def test_integer_kernels_run_and_compare_exactly(capsys, tmp_path, dtype):
    path = kernel_file(tmp_path, int_kernel(dtype), ref=INT_REF.format(np=NP[dtype], extra=""))
    code, payload = cli_json(capsys, "run", path, "--backend", "interp", "--seed", "1", "--no-verify")
    assert code == 0 and payload["status"] == "pass"
    assert payload["outputs"]["out"]["tolerance"] == 0 and payload["outputs"]["out"]["rel_error"] == 0
    code, out, _ = cli(capsys, "run", path, "--backend", "interp", "--seed", "1", "--no-verify")
    assert code == 0 and "(exact)" in out


def test_integer_output_off_by_one_fails(capsys, tmp_path):
    path = kernel_file(tmp_path, int_kernel("i32"), ref=INT_REF.format(np="int32", extra=" + (x == 7)"))
    code, payload = cli_json(capsys, "run", path, "--backend", "interp", "--seed", "1", "--no-verify")
    assert code == 1 and payload["status"] == "fail" and not payload["outputs"]["out"]["pass"]


def test_integer_kernel_under_argus_test(capsys, tmp_path):
    path = kernel_file(tmp_path, int_kernel("i32"), ref=INT_REF.format(np="int32", extra=""))
    code, payload = cli_json(capsys, "test", path, "--max-examples", "3", "--ptxsim", "never")
    assert code == 0 and payload["status"] == "pass"


# -- 1b: bad CONSTS in a reference ------------------------------------------------------------------

@pytest.mark.parametrize("consts, message", [
    ("5", "CONSTS must be a dict"),
    ('{"BLOCK": 512}', "non-empty list"),
    ('{"BLOCK": ["a"]}', "contains 'a'"),
    ('{"BLOCK": []}', "non-empty list"),
    ('{"BLOCK": [0, -5, "a"]}', "contains 0"),
    ('{"BLOCK": [True]}', "contains True"),
])
def test_bad_consts_in_reference(capsys, tmp_path, consts, message):
    path = kernel_file(tmp_path, ref=f'SHAPES = {{"N": 1000}}\nCONSTS = {consts}\n'
                                     "def reference(x, y):\n    return {'out': x + y}\n")
    code, _, err = cli(capsys, "test", path, "--max-examples", "3", "--ptxsim", "never")
    assert code == 2 and message in err and "k.ref.py:2:1:" in err and "CONSTS" in err and "^" in err
    code, payload = cli_json(capsys, "test", path, "--max-examples", "3", "--ptxsim", "never")
    assert code == 2 and payload["location"]["line"] == 2


def test_consts_that_do_not_instantiate_are_bad_input_not_a_group(capsys, tmp_path):
    # BLOCK=100 and 200 give vecadd's RUNS layout a zero extent: an ArgusTypeError per value, which
    # hypothesis may report as an ExceptionGroup; it is still bad input, exit 2
    path = kernel_file(tmp_path, ref='SHAPES = {"N": 1000}\nCONSTS = {"BLOCK": [100, 200]}\n'
                                     "def reference(x, y):\n    return {'out': x + y}\n")
    code, _, err = cli(capsys, "test", path, "--max-examples", "5", "--ptxsim", "never")
    assert code == 2 and "bad layout" in err


# -- 1c: schedule arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("schedule, message", [
    ("interleave:-1", "seed must be an integer from 0"),
    ("random:-1", "seed must be an integer from 0"),
    ("random:4294967296", "seed must be an integer from 0"),
    ("random:", "nothing after ':'"),
    ("one-warp-ahead:-1", "from 0"),
    ("one-warp-ahead:99", "a block of 256 threads has 8 units"),
    ("one-warp-ahead:8", "(0 to 7)"),
])
def test_bad_schedule_arguments(capsys, tmp_path, schedule, message):
    path = kernel_file(tmp_path, ref='SHAPES = {"N": 1000}\ndef reference(x, y):\n    return {"out": x + y}\n')
    code, _, err = cli(capsys, "test", path, "--schedule", schedule, "--max-examples", "1", "--ptxsim", "never")
    assert code == 2 and message in err
    k = argus_verify.load(path)
    x = np.ones(300, np.float32)
    with pytest.raises(ArgusError, match=re.escape(message)):
        k(x, x, backend="interp", schedule=schedule)


def test_good_schedule_arguments_still_parse():
    assert Schedule.parse("one-warp-ahead:7").check_block(256).arg == 7
    assert Schedule.parse("one-warp-ahead:15,width=16").check_block(256).arg == 15
    assert Schedule.parse("random:4294967295").arg == 2**32 - 1
    assert Schedule.parse("warpgroups").order == "warpgroups"


# -- 1d, 1e: audit of a binary file, unwritable --sarif ---------------------------------------------

def test_audit_binary_file(capsys, tmp_path):
    path = tmp_path / "bin.ptx"
    path.write_bytes(b"\x7fELF\xf6\x00\x01" * 10)
    code, _, err = cli(capsys, "audit", str(path))
    assert code == 2 and "not a text file" in err
    assert cli_json(capsys, "audit", str(path))[0] == 2


@pytest.mark.parametrize("target, message", [
    ("/nonexistent-argus-dir/x.sarif", "does not exist"),
    ("DIR", "is a directory"),
    ("SELF", "is the audited source itself"),
])
def test_audit_sarif_unwritable(capsys, tmp_path, target, message):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(AUDIT_PTX.read_text())
    target = {"DIR": str(tmp_path), "SELF": str(ptx)}.get(target, target)
    code, _, err = cli(capsys, "audit", str(ptx), "--sarif", target)
    assert code == 2 and message in err
    assert ptx.read_text() == AUDIT_PTX.read_text()
    code, payload = cli_json(capsys, "audit", str(ptx), "--sarif", target)
    assert code == 2 and message in payload["message"]


# -- 1f: a syntax error in an agent task file -------------------------------------------------------

def test_agent_task_with_a_syntax_error(capsys, tmp_path):
    task = tmp_path / "task.py"
    task.write_text("import torch\n\ndef broken(:\n    pass\n")
    code, _, err = cli(capsys, "agent", "run", str(task), "--out", str(tmp_path / "out"))
    assert code == 2 and f"{task}:3:12:" in err and "not valid Python" in err and "^" in err
    code, payload = cli_json(capsys, "agent", "run", str(task), "--out", str(tmp_path / "out"))
    assert code == 2 and payload["location"]["line"] == 3


# -- 1g, 2: references that raise, exit or print ----------------------------------------------------

REF_HEAD = 'SHAPES = {"N": 300}\n'


@pytest.mark.parametrize("ref, message", [
    (REF_HEAD + "class E(BaseException):\n    pass\ndef reference(x, y):\n    raise E()\n", "the reference raised E"),
    (REF_HEAD + "import os\nos._exit(0)\n", "called os._exit(0) while loading"),
    (REF_HEAD + "import os\ndef reference(x, y):\n    os._exit(3)\n", "called os._exit(3)"),
    (REF_HEAD + "import sys\ndef reference(x, y):\n    sys.exit(0)\n", "called sys.exit(0)"),
    (REF_HEAD + "def reference(x, y):\n    raise GeneratorExit('no')\n", "raised GeneratorExit: no"),
    (REF_HEAD + "def reference(x, y:\n", "k.ref.py:2:"),
])
def test_reference_failures_are_clear_errors(capsys, tmp_path, ref, message):
    path = kernel_file(tmp_path, ref=ref)
    code, out, err = cli(capsys, "run", path, "--backend", "interp", "--seed", "1", "--no-verify")
    assert code == 2 and message in err and out == ""
    code, payload = cli_json(capsys, "run", path, "--backend", "interp", "--seed", "1", "--no-verify")
    assert code == 2 and payload["status"] == "error" and message in payload["message"]


def test_interrupt_in_a_reference_keeps_json(capsys, tmp_path):
    path = kernel_file(tmp_path, ref=REF_HEAD + "def reference(x, y):\n    raise KeyboardInterrupt\n")
    code = main(["run", path, "--backend", "interp", "--seed", "1", "--no-verify", "--json"])
    out, _ = capsys.readouterr()
    assert code == 130 and json.loads(out)["kind"] == "interrupted"


def test_reference_prints_go_to_stderr(capsys, tmp_path):
    path = kernel_file(tmp_path, ref='print("loading")\n' + REF_HEAD +
                       "def reference(x, y):\n    print('in reference')\n    return {'out': x + y}\n")
    code, out, err = cli(capsys, "run", path, "--backend", "interp", "--seed", "1", "--no-verify", "--json")
    assert code == 0 and json.loads(out)["status"] == "pass" and "loading" in err and "in reference" in err
    code, out, err = cli(capsys, "test", path, "--max-examples", "2", "--ptxsim", "never", "--json")
    assert code == 0 and json.loads(out)["status"] == "pass" and "in reference" in err


# -- 1h: load's constants must be ints --------------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", None, 1024.7, 1024.0, True])
def test_load_rejects_constants_that_are_not_ints(tmp_path, value):
    path = kernel_file(tmp_path)
    with pytest.raises(ConstantError, match="compile-time parameter BLOCK must be an int") as info:
        argus_verify.load(path, BLOCK=value)
    assert isinstance(info.value, ArgusError) and isinstance(info.value, TypeError)


def test_load_takes_numpy_integers(tmp_path):
    assert argus_verify.load(kernel_file(tmp_path), BLOCK=np.int64(512)).consts == {"BLOCK": 512}


# -- 3a: compile -o onto its own source -------------------------------------------------------------

def test_compile_refuses_to_overwrite_its_source(capsys, tmp_path):
    path = kernel_file(tmp_path)
    code, _, err = cli(capsys, "compile", path, "-o", path, "--no-verify")
    assert code == 2 and "is the kernel source itself" in err
    assert Path(path).read_text() == VECADD


# -- 3b: several kernels in a file ------------------------------------------------------------------

BUGGY_SECOND = VECADD + """
kernel vecadd2_oob<BLOCK=512>(x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(256)
    tag x[i] = (i,)
    tag y[i] = (i,)
    tag out[i] = (i,) once
    base = block_id.x * BLOCK
    xs = load(x[base : base + BLOCK], tv=(256, BLOCK // 256):(BLOCK // 256, 1), mask=True)
    ys = load(y[base : base + BLOCK], tv=(256, BLOCK // 256):(BLOCK // 256, 1), mask=True)
    store(out[base : base + BLOCK], xs + ys)
"""


def test_verify_checks_every_kernel_of_a_file(capsys, tmp_path):
    path = kernel_file(tmp_path, BUGGY_SECOND)
    code, out, _ = cli(capsys, "verify", path, "--jobs", "1")
    assert code == 1
    assert "== kernel vecadd (1 of 2) ==" in out and "== kernel vecadd2_oob (2 of 2) ==" in out
    assert "out-of-bounds store" in out and "verified 2 kernels" in out
    code, payload = cli_json(capsys, "verify", path, "--jobs", "1")
    assert code == 1 and {e["kernel"] for e in payload} == {"vecadd", "vecadd2_oob"}
    assert any(e["kernel"] == "vecadd2_oob" and e["status"] == "violated" for e in payload)
    # --kernel still picks one, and its JSON is the plain list of results
    code, payload = cli_json(capsys, "verify", path, "--kernel", "vecadd", "--jobs", "1")
    assert code == 0 and all("kernel" not in e for e in payload)
    # --const and --shape apply to the kernels that declare them; an unknown name is an error
    assert cli(capsys, "verify", path, "--const", "NOPE=1")[0] == 2
    assert cli(capsys, "verify", path, "--shape", "Q=3")[0] == 2


def test_compile_and_check_name_the_kernel_of_a_file_of_several(capsys, tmp_path):
    path = kernel_file(tmp_path, BUGGY_SECOND)
    code, out, err = cli(capsys, "compile", path, "--no-verify")
    assert code == 0 and "has 2 kernels; compile uses the first, vecadd" in err and "vecadd2_oob" in err
    code, payload = cli_json(capsys, "check", path)
    assert code == 0 and [k["kernel"] for k in payload["kernels"]] == ["vecadd", "vecadd2_oob"]


# -- 3c: duplicate names ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, message, line", [
    (VECADD + "\n" + VECADD, "kernel 'vecadd' is defined twice", 18),
    ("tagfn f(a) = a\ntagfn f(a) = a + 1\n" + VECADD, "tag function 'f' is defined twice", 2),
    ("tagfn cdiv(a) = a\n" + VECADD, "tag function 'cdiv' has the name of a builtin", 1),
])
def test_duplicate_names(text, message, line):
    with pytest.raises(ArgusTypeError, match=message) as info:
        compile_source(text, "dup.arg")
    assert info.value.span.line == line and info.value.span.end_col > info.value.span.col


# -- 3d: repeated flags -----------------------------------------------------------------------------

def test_repeated_flags(capsys, tmp_path):
    path = kernel_file(tmp_path)
    code, _, err = cli(capsys, "check", path, "--const", "BLOCK=2048", "--const", "BLOCK=512")
    assert code == 2 and "BLOCK given twice" in err
    code, payload = cli_json(capsys, "run", path, "--seed", "1", "--seed", "2", "--no-verify")
    assert code == 2 and "--seed given twice" in payload["message"]
    args = build_parser().parse_args(["check", path, "--const", "A=1", "--const", "B=2"])
    assert args.const == "A=1,B=2"


# -- 4: messages ------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, word, col", [
    ("while base < 10:", "while", 5), ("class Foo:", "class", 5), ("def f(q):", "def", 5),
    ("import os", "import", 5), ("f = lambda q: q", "lambda", 9), ("try:", "try", 5),
    ("with foo:", "with", 5), ("global zz", "global", 5), ("return", "return", 5),
    ("q = block_id.x * 2 ** 4", "**", 24),
])
def test_python_only_syntax_is_named(line, word, col):
    lines = VECADD.splitlines()
    lines.insert(11, "    " + line)
    with pytest.raises(ArgusSyntaxError, match=re.escape(f"`{word}` is not supported in kernels")) as info:
        compile_source("\n".join(lines) + "\n", "py.arg")
    assert (info.value.span.line, info.value.span.col) == (12, col)


def test_while_message_says_what_to_use():
    text = VECADD.replace("    base = block_id.x * BLOCK\n",
                          "    while True:\n        pass\n    base = block_id.x * BLOCK\n")
    with pytest.raises(ArgusSyntaxError, match=r"use for \.\.\. in range"):
        compile_source(text, "w.arg")


def test_grid_inside_an_if():
    text = VECADD.replace("    grid(cdiv(N, BLOCK))\n", "    if N > 0:\n        grid(cdiv(N, BLOCK))\n")
    with pytest.raises(ArgusError, match="grid.* belongs at the top level") as info:
        compile_source(text, "g.arg")
    assert (info.value.span.line, info.value.span.col) == (5, 9)


def test_caret_under_a_tabbed_line():
    sources = SourceMap()
    sources.add("t.arg", "\tbase =\tblock_id.x *\tzz\n")
    shown = render_source(Span("t.arg", 1, 22, 1, 24), sources)
    source_line, caret_line = shown.splitlines()
    assert "\t" not in shown
    start = caret_line.index("^")
    assert source_line[start:start + 2] == "zz" and caret_line.count("^") == 2


def test_byte_order_mark_is_accepted(capsys, tmp_path):
    path = tmp_path / "bom.arg"
    path.write_bytes(b"\xef\xbb\xbf" + VECADD.encode())
    assert cli(capsys, "check", str(path))[0] == 0


def test_unknown_kernel_lists_the_kernels_without_a_source_line(capsys, tmp_path):
    path = kernel_file(tmp_path)
    code, _, err = cli(capsys, "check", path, "--kernel", "nope")
    assert code == 2 and "no kernel named 'nope' (this file has: vecadd)" in err and "|" not in err


def test_empty_file_name(capsys):
    code, _, err = cli(capsys, "check", "")
    assert code == 2 and "file name is empty" in err


def test_verify_help_says_shapes_are_symbolic_by_default(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = capsys.readouterr().out
    assert "reference's SHAPES" not in out and "proofs hold" in out
