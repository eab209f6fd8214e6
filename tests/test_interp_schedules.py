"""The interpreter's schedules: every correct spec is right under every schedule on ragged shapes,
every race and wait bug of specs/buggy is wrong under at least one, out-of-range indices fault, and
warp collectives, async-copy groups and narrow scheduling units behave as on the GPU."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import numpy as np
import pytest

from argus_verify import ir, semantics
from argus_verify.diagnostics import ArgusError, ArgusRuntimeError
from argus_verify.frontend import compile_file, compile_source
from argus_verify.reference import compute_reference, load_reference, make_inputs
from argus_verify.runtime.interp import SCHEDULES, ThreadGroup, run, run_schedules
from argus_verify.runtime.measure import rel_error, tolerance
from argus_verify.runtime.schedules import Schedule

SPECS = Path(__file__).resolve().parent.parent / "specs"
BUGGY = SPECS / "buggy"
# ragged: partial tiles in every dimension, several blocks, several k-tiles
RAGGED = {"M": 37, "N": 45, "K": 35}
# the correct spec whose reference a buggy spec is wrong against
CORRECT_OF = {"gemm": "gemm_simt", "transpose": "transpose_smem", "reduce": "reduce_sum", "softmax": "row_softmax",
              "vecadd": "vecadd", "mma": "gemm_bf16_mma", "hopper": "gemm_bf16_mma"}
SYNC_BUGS = ("race", "uninitialised-read")


def ragged(kernel: ir.Kernel) -> dict:
    """RAGGED, or the nearest smaller odd sizes that the kernel's `requires` admit."""
    import itertools

    # (then multiples of 8, for TMA's 16-byte row strides; 264: more k tiles than a 4-stage ring)
    choices = [[RAGGED[s], 13, 7, 3, 264, 72, 8] for s in kernel.sizes]
    for combo in itertools.product(*choices):
        sizes = dict(zip(kernel.sizes, combo, strict=True))
        if all(ir.eval_int(r, sizes) for r in kernel.requires):
            return sizes
    raise AssertionError(f"no ragged shape satisfies the requires of {kernel.name}")


def expectations(path: Path) -> list[str]:
    """The obligations of a buggy spec's '# expect:' and '# also:' header lines."""
    return re.findall(r"^# (?:expect|also): (\S+)", path.read_text(), re.MULTILINE)


def inputs_for(kernel: ir.Kernel, ref, sizes: dict, seed: int = 0) -> dict:
    return make_inputs(kernel, sizes, np.random.default_rng(seed), ref)


def wrong(kernel: ir.Kernel, outputs: dict, expected: dict) -> bool:
    return any(not rel_error(outputs[t.name], expected[t.name]) <= tolerance(t.dtype) for t in kernel.outputs)


def test_schedule_strings():
    assert str(Schedule.parse("random:7,width=8,copies=early")) == "random:7,width=8,copies=early"
    assert Schedule.parse("lockstep") == Schedule()
    for bad in ("sideways", "random:x", "warps,width=3", "lockstep,width=8", "warps,copies=never", "warps:2",
                "reverse,speed=2"):
        with pytest.raises(ArgusError, match="schedule"):
            Schedule.parse(bad)


def test_the_interpreter_has_a_handler_for_every_node():
    assert ThreadGroup.missing == ()


CORRECT = [pytest.param(p, {}, id=p.stem) for p in sorted(SPECS.glob("*.arg"))]
CORRECT.append(pytest.param(SPECS / "gemm_pipelined.arg", {"STAGES": 3}, id="gemm_pipelined-3-stages"))


@pytest.mark.parametrize("path,consts", CORRECT)
def test_correct_specs_are_right_under_every_schedule(path, consts):
    kernel = compile_file(path, consts)
    ref = load_reference(path)
    sizes = ragged(kernel)
    inputs = inputs_for(kernel, ref, sizes)
    expected = compute_reference(ref, inputs)
    for schedule, outputs in run_schedules(kernel, inputs, sizes).items():
        assert not wrong(kernel, outputs, expected), f"{path.stem} under {schedule}"


# The interpreter runs mbarriers, TMA and wgmma under the lockstep schedule only, where every warp
# has stored before the warpgroup's wgmma reads: a race of generic stores with a wgmma cannot show.
LOCKSTEP_ONLY = {"hopper_generic_write_race": "Hopper kernels run under the lockstep schedule only"}


def buggy_specs(kinds) -> list:
    out = []
    for p in sorted(BUGGY.glob("*.arg")):
        if p.stem.startswith(("wgmma_store_", "tma_store_")):
            continue  # bf16 C through a TMA store: tests/test_hopper.py runs them against their own reference
        if set(expectations(p)) & set(kinds):
            why = LOCKSTEP_ONLY.get(p.stem) if set(kinds) == set(SYNC_BUGS) else None
            marks = [pytest.mark.xfail(strict=True, raises=ArgusError, reason=why)] if why else []
            out.append(pytest.param(p, id=p.stem, marks=marks))
    return out


@pytest.mark.parametrize("path", buggy_specs(SYNC_BUGS))
def test_race_and_wait_bugs_are_wrong_under_some_schedule(path):
    kernel = compile_file(path)
    ref = load_reference(SPECS / f"{CORRECT_OF[path.stem.split('_')[0]]}.arg")
    sizes = ragged(kernel)
    inputs = inputs_for(kernel, ref, sizes)
    expected = compute_reference(ref, inputs)
    results = run_schedules(kernel, inputs, sizes)
    assert any(wrong(kernel, outputs, expected) for outputs in results.values()), path.stem


def test_a_write_after_read_race_needs_a_warp_running_ahead():
    """Lockstep cannot show gemm_war_race (every thread finishes reading before anyone stores); a
    warp that runs into the next k-tile's stores first does."""
    kernel = compile_file(BUGGY / "gemm_war_race.arg")
    ref = load_reference(SPECS / "gemm_simt.arg")
    sizes = {"M": 33, "N": 40, "K": 40}
    inputs = inputs_for(kernel, ref, sizes)
    expected = compute_reference(ref, inputs)
    assert not wrong(kernel, run(kernel, inputs, sizes), expected)
    for schedule in ("warps", "reverse", "one-warp-ahead", "random:3"):
        assert wrong(kernel, run(kernel, inputs, sizes, schedule=schedule), expected), schedule


@pytest.mark.parametrize("path", buggy_specs(("barrier-divergence", "bounds")))
def test_divergent_barriers_and_bad_indices_fault_under_every_schedule(path):
    kernel = compile_file(path)
    sizes = ragged(kernel)
    inputs = inputs_for(kernel, None, sizes)
    line = int(re.search(r"line (\d+)", path.read_text()).group(1))
    # Hopper kernels run under the lockstep schedule only (the interpreter refuses the others)
    for schedule in SCHEDULES if not ir.uses_hopper(kernel.body) else ("lockstep",):
        with pytest.raises(ArgusRuntimeError) as err:
            run(kernel, inputs, sizes, schedule=schedule)
        assert err.value.span.line == line, (schedule, str(err.value))


STAGE = """
kernel stage(x: f32[N]) -> y: f32[N]:
    grid(1)
    block(32)
    s = shared(f32[1, 2, 32])
    v = load(x[0 : 32], tv=(32, 1):(1, 0), mask=True)
    store(s[{stage}, 0, 0 : 32], v)
    barrier()
    w = load(s[0, 0, 0 : 32], tv=(32, 1):(1, 0))
    store(y[0 : 32], w, mask=True)
"""


def test_a_stage_index_past_a_size_one_dimension_faults():
    x = np.arange(32, dtype=np.float32)
    assert np.array_equal(run(compile_source(STAGE.format(stage=0), "s.arg"), {"x": x}, {"N": 32})["y"], x)
    with pytest.raises(ArgusRuntimeError, match=r"out-of-bounds access s\[1, 0, 0\] \(shared, shape \[1, 2, 32\]\) "
                                                r"by block \(0, 0, 0\), thread 0") as err:
        run(compile_source(STAGE.format(stage=1), "s.arg"), {"x": x}, {"N": 32})
    assert err.value.span.line == 7


def test_inactive_threads_do_not_fault():
    """Only threads that run an access are checked: the guarded store stays inside the buffer."""
    guarded = "if lane_id < 16:\n        store(s[lane_id // 16, 0, 0 : 32], v)"
    text = STAGE.format(stage="lane_id // 16").replace("store(s[lane_id // 16, 0, 0 : 32], v)", guarded)
    x = np.arange(32, dtype=np.float32)
    y = run(compile_source(text, "s.arg"), {"x": x}, {"N": 32})["y"]
    assert np.array_equal(y[:16], x[:16]) and np.isnan(y[16:]).all()


ONE_WARP = """
kernel exchange(x: f32[N]) -> y: f32[N]:
    grid(1)
    block(32)
    s = shared(f32[32])
    v = load(x[0 : 32], tv=(32, 1):(1, 0), mask=True)
    store(s, v)
    {sync}
    w = load(s, tv=((4, 8), 1):((8, 1), 0))
    store(y[0 : 32], w, mask=True)
"""


def test_lanes_of_one_warp_race_under_independent_thread_scheduling():
    """Without a barrier the lanes of a warp read each other's stores through shared memory: a
    whole-warp unit hides it, units of 8 lanes in reverse order show it."""
    x = np.arange(32, dtype=np.float32)
    racy = compile_source(ONE_WARP.format(sync="pass"), "r.arg")
    assert np.array_equal(run(racy, {"x": x}, {"N": 32}, schedule="warps")["y"], x)
    assert np.isnan(run(racy, {"x": x}, {"N": 32}, schedule="reverse,width=8")["y"]).any()
    fixed = compile_source(ONE_WARP.format(sync="barrier()"), "f.arg")
    for schedule in ("reverse,width=8", "interleave:2,width=1", "random:1,width=4"):
        assert np.array_equal(run(fixed, {"x": x}, {"N": 32}, schedule=schedule)["y"], x), schedule


def test_warp_collectives_meet_across_narrow_units():
    path = SPECS / "row_softmax.arg"
    kernel = compile_file(path, {"ROWS": 2})
    ref = load_reference(path)
    sizes = {"M": 5, "N": 300}
    inputs = inputs_for(kernel, ref, sizes)
    expected = compute_reference(ref, inputs)
    for schedule in ("interleave:5,width=1", "reverse,width=4"):
        assert not wrong(kernel, run(kernel, inputs, sizes, schedule=schedule), expected), schedule


SHUFFLE = """
kernel swap(x: f32[N]) -> y: f32[N]:
    grid(1)
    block(32)
    v = load(x[0 : 32], tv=(32, 1):(1, 0), mask=True)
    r = v
    if lane_id < {lanes}:
        r = shfl_xor(v, 1)
    store(y[0 : 32], r, mask=True)
"""


def test_a_shuffle_in_divergent_code_faults_under_every_schedule():
    """`shfl.sync` is for the whole warp: run by half of it, it is undefined (barrier-divergence in the
    verifier). Whole-warp units see the half-active mask; narrower units, lanes that never arrive."""
    x = np.arange(32, dtype=np.float32)
    converged = compile_source(SHUFFLE.format(lanes=32), "c.arg")
    assert np.array_equal(run(converged, {"x": x}, {"N": 32}, schedule="warps,width=8")["y"], x[np.arange(32) ^ 1])
    diverged = compile_source(SHUFFLE.format(lanes=16), "d.arg")
    for schedule in ("lockstep", "warps", "warps,width=8", "reverse,width=8"):
        with pytest.raises(ArgusRuntimeError, match="only some lanes of warp 0"):
            run(diverged, {"x": x}, {"N": 32}, schedule=schedule)


def test_copies_landing_early_show_a_prefetch_into_a_buffer_still_read():
    """gemm_pipelined with its barrier moved after the prefetch: the copy into the stage other warps
    still read is only harmless if it lands late. Both ends are legal on the GPU."""
    text = (SPECS / "gemm_pipelined.arg").read_text()
    sync, prefetched = "        barrier()\n", "        commit()\n"
    text = text.replace("        wait(STAGES - 2)\n" + sync, "        wait(STAGES - 2)\n", 1)
    text = text.replace(prefetched + "        a = load", prefetched + sync + "        a = load", 1)
    kernel = compile_source(text, "p.arg")
    ref = load_reference(SPECS / "gemm_pipelined.arg")
    sizes = {"M": 40, "N": 30, "K": 50}
    inputs = inputs_for(kernel, ref, sizes)
    expected = compute_reference(ref, inputs)
    for schedule in ("lockstep", "warps", "reverse", "one-warp-ahead"):
        assert not wrong(kernel, run(kernel, inputs, sizes, schedule=schedule), expected), schedule
    assert wrong(kernel, run(kernel, inputs, sizes, schedule="warps,copies=early"), expected)


GROUPS = """
kernel groups(x: f32[N]) -> y: f32[N]:
    grid(1)
    block(64)
    s = shared(f32[64])
    copy_async(s, x[0 : 64], tv=(64, 1):(1, 0), mask=True)
    if thread_id < 32:
        commit()
    wait(0)
    barrier()
    v = load(s, tv=(64, 1):(1, 0))
    store(y[0 : 64], v, mask=True)
"""


@pytest.mark.parametrize("schedule", ["lockstep", "reverse"])
def test_commit_groups_are_per_thread(schedule):
    """Threads 32..63 never commit their copy, so wait(0) does not retire it: it never lands."""
    x = np.arange(64, dtype=np.float32)
    y = run(compile_source(GROUPS, "g.arg"), {"x": x}, {"N": 64}, schedule=schedule)["y"]
    assert np.array_equal(y[:32], x[:32]) and np.isnan(y[32:]).all()


CUBE = """
kernel cube(x: f32[N]) -> y: f32[N]:
    grid(cdiv(N, 128))
    block(128)
    v = load(x[block_id.x * 128 : block_id.x * 128 + 128], tv=(128, 1):(1, 0), mask=True)
    store(y[block_id.x * 128 : block_id.x * 128 + 128], exp(v), mask=True)
"""


def test_a_unary_op_added_to_the_table_runs_unchanged(monkeypatch):
    monkeypatch.setitem(semantics.FLOAT_UNARY, "cube", semantics.FloatUnary("cube", lambda a: a * a * a, {}))
    kernel = compile_source(CUBE, "c.arg")
    kernel = attrs.evolve(kernel, body=tuple(
        attrs.evolve(s, op=ir.Elementwise("cube", s.op.args)) if isinstance(s, ir.Assign)
        and isinstance(s.op, ir.Elementwise) else s for s in kernel.body))
    x = np.linspace(-2, 2, 200, dtype=np.float32)
    for schedule in ("lockstep", "reverse"):
        np.testing.assert_allclose(run(kernel, {"x": x}, {"N": 200}, schedule=schedule)["y"], x ** 3, rtol=1e-6)


def test_traces_name_the_threads_of_their_unit():
    """Replay looks values up by thread: a unit's trace events carry where its threads start."""
    path = SPECS / "reduce_sum.arg"
    kernel = compile_file(path)
    sizes = {"M": 3, "N": 100}
    inputs = inputs_for(kernel, load_reference(path), sizes)
    seen: dict = {}

    def record(schedule):
        def trace(ev):
            if ev.stmt.name == "w":
                seen.setdefault(schedule, {})[ev.first_thread] = ev.value
        return trace

    for schedule in ("lockstep", "reverse"):
        run(kernel, inputs, sizes, schedule=schedule, trace=record(schedule))
    whole = seen["lockstep"][0]
    assert sorted(seen["reverse"]) == list(range(0, 256, 32))
    for first, value in seen["reverse"].items():
        assert np.array_equal(value, whole[:, first:first + 32])
