"""`argus test` and the hypothesis strategies of argus_verify.testing (issue 11, part 2): the CLI
finds a seeded bug and prints its minimal case with a reproducer; a user's own pytest property
uses the strategies; executors that disagree are reported. Small example counts keep it fast."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from test_reductions import FOUR_WARP_TOTAL

import argus_verify
from argus_verify.cli import main
from argus_verify.reference import load_reference
from argus_verify.testing import KernelFamily, inputs_for, run_case, shapes_for
from argus_verify.testing.check import Case, cases
from argus_verify.testing.strategies import size_candidates

ROOT = Path(__file__).resolve().parent.parent
VECADD = ROOT / "specs" / "vecadd.arg"
SOFTMAX = ROOT / "specs" / "row_softmax.arg"
DROPS_TAIL = ROOT / "specs" / "buggy" / "rowscale_drops_tail.arg"  # skips the last partial chunk of each row


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def drops_tail(tmp_path) -> Path:
    """The seeded bug with a reference whose default SHAPES hide it (N a multiple of CHUNK)."""
    path = tmp_path / "rowscale.arg"
    path.write_text(DROPS_TAIL.read_text())
    (tmp_path / "rowscale.ref.py").write_text('SHAPES = {"M": 4, "N": 2048}\n\n\ndef reference(x):\n'
                                              '    return {"out": 2 * x}\n')
    return path


def test_argus_run_misses_the_seeded_bug_at_default_shapes(capsys, drops_tail):
    code, out, _ = cli(capsys, "run", drops_tail, "--no-verify", "--backend", "interp")
    assert code == 0 and "PASS" in out


def test_argus_test_finds_the_seeded_bug_and_shrinks_it(capsys, drops_tail):
    code, out, _ = cli(capsys, "test", drops_tail, "--max-examples", "20", "--ptxsim", "never")
    assert code == 1
    lines = out.splitlines()
    assert "FAIL" in lines[0] and "minimal failing case" in lines[0]
    assert lines[1].strip().startswith("M=1, N=1; typical values (seed 0); schedule lockstep")
    assert "out differs from the reference" in out and "nan vs" in out
    (command,) = [ln for ln in lines if ln.startswith("reproduce: ")]
    argv = shlex.split(command.removeprefix("reproduce: "))
    assert argv[:3] == ["argus", "test", str(drops_tail)] and "--shape" in argv and "M=1,N=1" in argv
    code2, out2, _ = cli(capsys, *argv[1:])  # the reproducer runs that very case again
    assert code2 == 1 and out2.splitlines()[1] == lines[1]
    code3, out3, _ = cli(capsys, *argv[1:], "--json")
    payload = json.loads(out3)
    assert code3 == 1 and payload["status"] == "fail" and payload["case"]["sizes"] == {"M": 1, "N": 1}
    assert payload["reproduce"] == command.removeprefix("reproduce: ") and payload["problems"]


def test_argus_test_passes_a_correct_kernel(capsys):
    code, out, _ = cli(capsys, "test", VECADD, "--max-examples", "8", "--ptxsim", "always")
    assert code == 0 and "8 cases passed" in out and "PTX simulator 8" in out


@pytest.mark.parametrize("argv, message", [
    (["--max-examples", "0"], "--max-examples must be an integer from 1"),
    (["--schedule", "sideways"], "unknown schedule"),
    (["--values", "nonfinite"], "the reference does not define NaN and inf inputs"),
    (["--shape", "Q=3"], "has no size 'Q'"),
    (["--seed", "-4"], "--seed must be an integer from 0"),
])
def test_argus_test_bad_options(capsys, argv, message):
    code, out, _ = cli(capsys, "test", VECADD, *argv, "--json")
    assert code == 2 and message in json.loads(out)["message"]


def test_disagreeing_executors_are_reported(monkeypatch):
    """A wrong PTX simulator result (standing in for a lowering bug) is a disagreement with the
    interpreter, though the interpreter matches the reference."""
    from argus_verify.testing import ptxsim

    real = ptxsim.run_lowered

    def off_by_one(*a, **kw):
        out = real(*a, **kw)
        return {n: v + np.float32(1) for n, v in out.items()}

    monkeypatch.setattr(ptxsim, "run_lowered", off_by_one)
    family = KernelFamily(str(VECADD))
    case = Case(consts={}, sizes={"N": 1000}, ptxsim=True)
    problems = run_case(family, case, load_reference(VECADD))
    assert problems and all("PTX simulator" in p and "disagree" in p for p in problems)
    monkeypatch.setattr(ptxsim, "run_lowered", real)
    assert run_case(family, case, load_reference(VECADD)) == []


def test_nonfinite_inputs_where_the_reference_defines_them(tmp_path):
    path = tmp_path / "v.arg"
    path.write_text(VECADD.read_text())
    (tmp_path / "v.ref.py").write_text("NONFINITE = True\nSHAPES = {'N': 300}\n\n\ndef reference(x, y):\n"
                                       "    return {'out': x + y}\n")
    ref = load_reference(path)
    case = Case(consts={}, sizes={"N": 300}, values="nonfinite", seed=3)
    inputs = argus_verify.testing.input_arrays(argus_verify.load(path), case.sizes, "nonfinite", 3, ref)
    assert np.isnan(inputs["x"]).any() and np.isinf(inputs["x"]).any()
    assert run_case(KernelFamily(str(path)), case, ref) == []  # NaN where the reference has NaN


def test_size_candidates_hold_tile_edges_and_shapes():
    k = argus_verify.load(VECADD, BLOCK=1024)
    cands = size_candidates(k, load_reference(VECADD), max_elements=200_000)["N"]
    assert {1, 2, 3, 1023, 1024, 1025, 100_000} <= set(cands)


def test_declared_constant_ranges_are_searched(tmp_path):
    path = tmp_path / "v.arg"
    path.write_text(VECADD.read_text())
    (tmp_path / "v.ref.py").write_text("CONSTS = {'BLOCK': [1024, 512]}\n\n\ndef reference(x, y):\n"
                                       "    return {'out': x + y}\n")
    family, ref = KernelFamily(str(path)), load_reference(path)
    assert find(cases(family, ref), lambda c: c.consts["BLOCK"] == 512).consts == {"BLOCK": 512}


# -- a user's own property, with the exported strategies ----------------------------------------------

SOFTMAX_K = argus_verify.load(SOFTMAX, COLS=256)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_users_own_property_row_softmax(data):
    sizes = data.draw(shapes_for(SOFTMAX_K, max_elements=4096))
    assert sizes["N"] <= 256  # the kernel's `requires N <= COLS` holds for every drawn shape
    inputs = data.draw(inputs_for(SOFTMAX_K, sizes))
    got = SOFTMAX_K(**inputs, backend="interp")
    x = inputs["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert np.allclose(got.sum(axis=1), 1.0, atol=1e-5)


def test_a_fault_of_the_lowered_code_is_a_failing_case_not_a_crash(tmp_path, capsys):
    """The PTX simulator faults on an access outside every tensor (here an off-by-one guard that the
    interpreter reports too): `argus test` reports the case, it does not stop with an internal error."""
    path = tmp_path / "offbyone.arg"
    path.write_text("""
kernel offbyone<BLOCK=128>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    i = block_id.x * BLOCK + thread_id
    xs = load(x[i : i + 1], tv=(BLOCK, 1):(0, 0), mask=True)
    if i <= N:
        store(out[i : i + 1], xs * 2.0)
""")
    (tmp_path / "offbyone.ref.py").write_text("SHAPES = {'N': 200}\n\n\ndef reference(x):\n    return {'out': 2 * x}\n")
    family = KernelFamily(str(path))
    problems = run_case(family, Case(consts={}, sizes={"N": 100}, ptxsim=True), load_reference(path))
    assert any(p.startswith("PTX simulator:") and "outside every tensor" in p for p in problems), problems
    code, out, _ = cli(capsys, "test", path, "--max-examples", "5", "--ptxsim", "always")
    assert code == 1 and "FAIL" in out


def test_the_default_search_runs_threads_of_one_warp_apart(tmp_path, capsys):
    """Two lanes of one warp write one shared slot (thread 1 overwrites the halo thread 0 stored): in
    lockstep and in every whole-warp schedule the same lane wins; one thread at a time
    (`warps,width=1`, among the searched schedules) shows the race as a wrong result."""
    path = tmp_path / "halo.arg"
    path.write_text("""
kernel halo<BLOCK=128>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    base = block_id.x * BLOCK
    s = shared(f32[BLOCK + 1])
    xs = load(x[base + thread_id : base + thread_id + 1], tv=(BLOCK, 1):(0, 0), mask=True)
    store(s[thread_id + 1 : thread_id + 2], xs)
    if thread_id == 1:
        store(s[0 : 1], xs)
    if thread_id == 0:
        hl = load(x[base - 1 : base], tv=(BLOCK, 1):(0, 0), mask=True)
        store(s[0 : 1], hl)
    barrier()
    l = load(s[thread_id : thread_id + 1], tv=(BLOCK, 1):(0, 0))
    if base + thread_id < N:
        store(out[base + thread_id : base + thread_id + 1], l)
""")
    (tmp_path / "halo.ref.py").write_text(
        "import numpy as np\nSHAPES = {'N': 200}\n\n\ndef reference(x):\n"
        "    out = np.zeros(x.shape)\n    out[1:] = x[:-1]\n    return {'out': out}\n")
    code, out, _ = cli(capsys, "test", path, "--max-examples", "40", "--ptxsim", "never", "--search-seed", "1")
    assert code == 1 and "width=1" in out


def test_sizes_that_are_whole_tiles_are_tried(tmp_path, capsys):
    """A view shifted one column left (`c0 - 1`, masked) drops a row's last element only when N is
    a multiple of CHUNK (an outside probe's r31): random sizes rarely hit it; the search ends with
    each size set to the kernel's tile sizes. The unshifted kernel passes the same search."""
    text = """
kernel rsum<CHUNK=512>(x: f32[M, N]) -> out: f32[M]:
    grid(M)
    block(128)
    row = block_id.x
    acc = zeros(f32[1, 1], tv=(128, CHUNK // 128):(0, 0))
    for c0 in range(0, N, CHUNK):
        xs = load(x[row : row + 1, {start} : {start} + CHUNK], tv=(128, CHUNK // 128):(1, 128), mask=True)
        acc = acc + reduce_sum(xs, axis=1)
""" + FOUR_WARP_TOTAL
    ref = "SHAPES = {'M': 4, 'N': 700}\n\n\ndef reference(x):\n    return {'out': x.sum(axis=1)}\n"
    for name, start, want in (("shifted", "c0 - 1", 1), ("right", "c0", 0)):
        (tmp_path / f"{name}.arg").write_text(text.format(start=start))
        (tmp_path / f"{name}.ref.py").write_text(ref)
        code, out, _ = cli(capsys, "test", tmp_path / f"{name}.arg", "--max-examples", "10", "--ptxsim", "never")
        assert code == want, out
        if want:
            assert "N=512" in out


def test_pinned_sizes_past_the_default_tensor_limit_are_searched(capsys):
    # M=64, N=4000 is 256000 elements, past the 65536 the search draws by default (an outside probe:
    # the filter rejected every case and hypothesis's Unsatisfiable came out as an internal error)
    from argus_verify.cli import main

    spec = Path(__file__).resolve().parents[1] / "specs" / "reduce_sum.arg"
    rc = main(["test", str(spec), "--shape", "M=64,N=4000", "--max-examples", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["status"] == "pass" and out["examples"] == 2, out


def test_pinned_sizes_the_requires_refuse_are_a_usage_error(capsys):
    from argus_verify.cli import main

    spec = Path(__file__).resolve().parents[1] / "specs" / "xor_swizzle_transpose.arg"
    rc = main(["test", str(spec), "--shape", "M=70000000", "--max-examples", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["kind"] == "UsageError" and "admit no case" in out["message"], out
