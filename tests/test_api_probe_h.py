"""What an outside user of the Python API and `argus test` found (probe H): two threads verifying at
once crashed the process inside Z3; a verdict found under a short solver limit was kept on disk for
every limit (and under another file's path); a reference or make_inputs missing a name was an
internal error of `argus test`; a NaN solver limit became an internal-error result."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

import argus_verify
from argus_verify import smt
from argus_verify.cli import main
from argus_verify.frontend import compile_file

ROOT = Path(__file__).resolve().parents[1]
VECADD = ROOT / "specs" / "vecadd.arg"


def test_two_threads_verifying_at_once_take_turns():
    kernels = [compile_file(str(VECADD), {"BLOCK": b}) for b in (512, 1024)]
    reports, errors = [None, None], []

    def work(i):
        try:
            reports[i] = smt.verify(kernels[i], timeout_s=20)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(r.exit_code == 0 for r in reports), (errors, [r.render_text() for r in reports if r])


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_solver_limit_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        smt.verify(compile_file(str(VECADD)), timeout_s=bad)


def test_a_verdict_kept_on_disk_is_per_solver_limit_and_path(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        shutil.copy(VECADD, d / "vecadd.arg")
    ka = argus_verify.load(a / "vecadd.arg")
    assert ka._verdict_path(0.5) != ka._verdict_path(10.0)
    assert ka._verdict_path(10.0) != argus_verify.load(b / "vecadd.arg")._verdict_path(10.0)


def test_a_reference_without_an_output_is_bad_input(tmp_path, capsys):
    shutil.copy(VECADD, tmp_path / "k.arg")
    (tmp_path / "k.ref.py").write_text("def reference(x, y):\n    return {'o': x + y}\n")
    assert main(["test", str(tmp_path / "k.arg"), "--json", "--max-examples", "2"]) == 2
    assert "the reference returns no 'out'" in json.loads(capsys.readouterr().out)["message"]


def test_make_inputs_without_an_input_is_bad_input(tmp_path, capsys):
    shutil.copy(VECADD, tmp_path / "k.arg")
    (tmp_path / "k.ref.py").write_text(
        "def make_inputs(sizes, rng):\n    return {'x': rng.standard_normal(sizes['N']).astype('float32')}\n"
        "def reference(x, y):\n    return {'out': x + y}\n")
    assert main(["test", str(tmp_path / "k.arg"), "--json", "--max-examples", "2"]) == 2
    assert "make_inputs(sizes, rng) returns no 'y'" in json.loads(capsys.readouterr().out)["message"]


def test_a_launch_with_no_blocks_is_refused_not_run():
    # CUDA refuses an empty grid; the interpreter ran it and returned the poisoned output (probe H)
    import numpy as np

    from argus_verify.diagnostics import ArgusRuntimeError

    k = argus_verify.load(ROOT / "specs" / "buggy" / "launch_empty_grid.arg")
    with pytest.raises(ArgusRuntimeError, match="has no blocks along x"):
        k(np.arange(1, dtype=np.float32), verify=False)
    out = k(np.arange(3000, dtype=np.float32), verify=False)  # sizes with blocks run as before
    assert np.isfinite(out).all()


def test_argus_test_fails_a_kernel_whose_grid_is_empty(capsys):
    rc = main(["test", str(ROOT / "specs" / "buggy" / "launch_empty_grid.arg"), "--shape", "N=1", "--json",
               "--max-examples", "3"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["status"] == "fail", out


@pytest.mark.parametrize("fixed, words", [
    ({"N": 3.5}, "must be an int of at least 1"), ({"N": "3"}, "must be an int of at least 1"),
    ({"N": 0}, "must be an int of at least 1"), ({"Z": 3}, "has no size 'Z'"),
])
def test_shapes_for_refuses_sizes_it_would_convert_or_drop(fixed, words):
    from argus_verify.testing import shapes_for

    with pytest.raises(ValueError, match=words):
        shapes_for(argus_verify.load(VECADD), fixed=fixed)


@pytest.mark.parametrize("ranges", [{"BLOCK": []}, {"BLOCK": 512}, {"BLOCK": [512, 1.5]}])
def test_consts_for_refuses_what_is_not_a_list_of_ints(ranges):
    from argus_verify.testing import consts_for

    with pytest.raises(ValueError, match="needs a non-empty list of ints"):
        consts_for(ranges)
