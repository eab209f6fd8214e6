"""The Python API (issue 11, part 1): argus_verify.load -> a kernel with .verify(), .ptx, .stats
and a call on NumPy arrays (here in the interpreter; tests/gpu/test_api_gpu.py covers the GPU,
torch and PyCUDA paths), argument checks with clear errors, the verification cache and the disk
cache of compiled modules (hit from a second process)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import argus_verify
from argus_verify import api
from argus_verify.api import CallError, VerificationError

ROOT = Path(__file__).resolve().parent.parent
VECADD = ROOT / "specs" / "vecadd.arg"
SOFTMAX = ROOT / "specs" / "row_softmax.arg"
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None and not Path("/usr/local/cuda/bin/ptxas").exists(),
                                 reason="needs ptxas")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_load_verify_and_the_cli_report():
    k = argus_verify.load(VECADD, BLOCK=2048)
    assert k.name == "vecadd" and k.consts == {"BLOCK": 2048} and k.inputs == ["x", "y"] and k.outputs == ["out"]
    report = k.verify()
    assert report.exit_code == 0 and report.counts()["proved"] > 0 and report.counts()["violated"] == 0
    assert "obligations" in report.render_text() or report.render_text()  # the text `argus verify` prints
    assert k.verify() is report  # once per (source, constants)
    seen = []
    again = argus_verify.load(VECADD, BLOCK=1024).verify(progress=lambda done, total, what: seen.append((done, total)))
    assert again.exit_code == 0 and seen[0][0] == 0 and seen[-1][0] == seen[-1][1]  # the stages, to the last


def test_load_reports_errors_with_their_place(tmp_path):
    bad = tmp_path / "bad.arg"
    bad.write_text(VECADD.read_text().replace("xs + ys", "xs + zs"))
    with pytest.raises(argus_verify.api.ArgusError) as info:
        argus_verify.load(bad)
    assert info.value.span.line == 14 and "zs" in info.value.message


def test_call_numpy_in_the_interpreter():
    k = argus_verify.load(VECADD)
    x, y = rand(1000), rand(1000, seed=1)
    out = k(x, y, backend="interp")
    assert out.dtype == np.float32 and np.array_equal(out, x + y)
    given = np.empty(1000, np.float32)
    assert k(x, y=y, out=given, backend="interp") is given and np.array_equal(given, x + y)


def test_call_2d_ragged_shape_against_numpy():
    k = argus_verify.load(SOFTMAX)
    x = rand(37, 1000)
    got = k(x, backend="interp")
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert np.abs(got - e / e.sum(axis=1, keepdims=True)).max() < 1e-6


@pytest.mark.parametrize("call, message", [
    (lambda k, x, y: k(x), "no value for input 'y' (inputs: x, y)"),
    (lambda k, x, y: k(x, y[:10]), "size N is 1000 from 'x' dimension 0 but 10 from 'y' (f32[N], shape [10])"),
    (lambda k, x, y: k(x, y.astype(np.float64)), "'y' is f32: expected a numpy array of float32, got float64"),
    (lambda k, x, y: k(x, y, z=1), "vecadd has no input or size 'z' (inputs: x, y; sizes: N)"),
    (lambda k, x, y: k(x, 3.0), "input 'y' must be an array (f32[N]), got float"),
    (lambda k, x, y: k(x, y, y), "vecadd takes 2 inputs (x, y), got 3"),
    (lambda k, x, y: k(x, y, out=np.empty(5, np.float32)), "but 5 from 'out'"),
    (lambda k, x, y: k(x, y, out=(np.empty(1000, np.float32),) * 2), "vecadd has 1 outputs (out), out= gives 2"),
    (lambda k, x, y: k(x.reshape(10, 100), y), "'x' must have 1 dimensions (f32[N]), got shape [10, 100]"),
    (lambda k, x, y: k(x, y, backend="tpu"), "backend must be 'auto', 'cuda' or 'interp'"),
    (lambda k, x, y: k(x, y, out=np.empty(1000, np.float32)[::1].copy().view(np.int32)),
     "'out' is f32: expected a numpy array of float32, got int32"),
])
def test_call_errors_are_clear(call, message):
    k = argus_verify.load(VECADD)
    with pytest.raises(CallError) as info:
        call(k, rand(1000), rand(1000, seed=1))
    assert message in str(info.value)


def test_call_checks_requires():
    k = argus_verify.load(SOFTMAX, COLS=256)
    with pytest.raises(CallError, match="break the kernel's precondition"):
        k(rand(4, 300), backend="interp")


def test_a_kernel_with_a_violated_obligation_is_not_run():
    k = argus_verify.load(ROOT / "specs" / "buggy" / "vecadd_store_oob.arg")
    with pytest.raises(VerificationError) as info:
        k(rand(1000), rand(1000), backend="interp")
    assert "verification failed" in str(info.value) and info.value.report.exit_code == 1


@needs_ptxas
def test_ptx_and_stats():
    k = argus_verify.load(VECADD)
    assert k.ptx.count(".entry vecadd(") == 1
    assert k.stats.registers > 0 and k.stats.spill_stores == 0


@needs_ptxas
def test_disk_cache_hit_in_a_second_process(private_cache):
    """The first process lowers, assembles and verifies; the second finds the module and the
    verdict on disk (no lowering, no ptxas, no solver)."""
    script = ("import sys, time, numpy as np, argus_verify\n"
              "t = time.perf_counter()\n"
              f"k = argus_verify.load({str(VECADD)!r}, BLOCK=2048)\n"
              "k.program(); v = k.verdict()\n"
              "print(k.cache_hit, v['counts']['proved'], round(time.perf_counter() - t, 3))\n")
    env = {**os.environ, "ARGUS_CACHE_DIR": str(private_cache)}
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    (hit1, proved1, t1), (hit2, proved2, t2) = [r.stdout.split() for r in runs]
    assert (hit1, hit2) == ("False", "True") and proved1 == proved2 != "0"
    modules = list((private_cache / "modules").iterdir())
    assert len(modules) == 1 and {p.name for p in modules[0].iterdir()} == {"kernel.ptx", "kernel.cubin",
                                                                           "module.json"}
    assert float(t2) < float(t1)


def test_cache_key_covers_constants_and_tool_versions(monkeypatch):
    a, b = argus_verify.load(VECADD, BLOCK=1024), argus_verify.load(VECADD, BLOCK=2048)
    assert a.key != b.key and a._module_dir() != b._module_dir()
    assert argus_verify.load(VECADD).key == a.key  # BLOCK=1024 is the default
    before = a._module_dir()
    monkeypatch.setattr(api, "ptxas_version", lambda: "Cuda compilation tools, release 99.9")
    assert a._module_dir() != before
    monkeypatch.setattr(api, "argus_version", lambda: "99.0")
    assert a._module_dir() != before


def test_default_cache_folder_is_the_user_cache(monkeypatch):
    import platformdirs

    monkeypatch.delenv("ARGUS_CACHE_DIR")
    assert api.cache_dir() == Path(platformdirs.user_cache_dir("argus-verify", appauthor=False))


def test_verification_runs_once_per_source_and_constants(monkeypatch):
    from argus_verify import smt

    api._VERIFIED.clear()
    calls = []
    real = smt.verify
    monkeypatch.setattr(smt, "verify", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    x, y = rand(300), rand(300)
    for _ in range(3):
        argus_verify.load(VECADD)(x, y, backend="interp")
    assert len(calls) == 1
    argus_verify.load(VECADD, BLOCK=512)(x, y, backend="interp")
    assert len(calls) == 2


def test_no_stage_or_core_module_imports_the_api():
    """The API sits above the stages, like the CLI."""
    offenders = []
    folders = [ROOT / s for s in ("frontend", "smt", "lowering", "runtime", "planner")]
    core = [ROOT / "argus_verify" / f"{n}.py" for n in ("ir", "layout", "diagnostics", "semantics", "visitor",
                                                        "instructions", "printer", "reference")]
    for path in [p for f in folders for p in f.rglob("*.py")] + core:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.startswith(("argus_verify.api", "argus_verify.cli", "argus_verify.torch")) for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders


def test_timing_of_a_cached_call_is_small():
    k = argus_verify.load(VECADD)
    x, y = rand(1000), rand(1000)
    k(x, y, backend="interp")
    t = time.perf_counter()
    k(x, y, backend="interp")
    assert time.perf_counter() - t < 1.0  # no re-verification


def test_json_module_metadata(private_cache):
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas")
    k = argus_verify.load(VECADD)
    k.program()
    (folder,) = (private_cache / "modules").iterdir()
    meta = json.loads((folder / "module.json").read_text())
    assert meta["entry"] == "vecadd" and meta["consts"] == {"BLOCK": 1024} and meta["ptxas"] == api.ptxas_version()
