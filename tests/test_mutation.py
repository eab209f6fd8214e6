"""The mutation study (bench/mutate.py) on a handful of mutants, and the incoming specs.

Each mutant is picked by its operator, its replacement text and a piece of its source line, so
the tests keep working when lines move. The known false proofs of today's verifier are strict
xfails: they start passing (and so fail as XPASS) once the verifier rejects those mutants.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from argus_verify.frontend import compile_source

ROOT = Path(__file__).resolve().parents[1]
INCOMING = ROOT / "specs" / "incoming"


def _load_mutate():
    spec = importlib.util.spec_from_file_location("argus_bench_mutate", ROOT / "bench" / "mutate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # attrs classes and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


mutate = _load_mutate()
_baselines: dict = {}


def spec(name: str) -> str:
    return str(ROOT / "specs" / f"{name}.arg")


def pick(name: str, operator: str, after: str, line_has: str, before: str | None = None, last: bool = False):
    """The one type-checked mutant of specs/NAME.arg with this operator and replacement on a line
    containing `line_has` (the last of them with `last`)."""
    lines = Path(spec(name)).read_text().splitlines()
    hits = [m for m in mutate.mutants_of(spec(name)) if m.operator == operator and m.after == after
            and line_has in lines[m.line - 1] and (before is None or m.before == before)]
    hits = hits[-1:] if last else hits
    assert len(hits) == 1, [m.description for m in hits]
    assert mutate.type_check(hits[0]) is not None, hits[0].description
    return hits[0]


def evaluate(mutant) -> dict:
    if mutant.spec not in _baselines:
        _baselines[mutant.spec] = mutate.baseline_of(mutant.spec, timeout_s=5.0, seed=0, quick=True)
    base = _baselines[mutant.spec]
    assert (base.verify_status, base.interpreter_status) == ("proved", "ok")
    record = mutate.evaluate(mutant, base, timeout_s=5.0, limit_s=60.0)
    assert "error" not in record, record.get("traceback", record.get("error"))
    return record


def findings(record: dict) -> set:
    return {(f["obligation"], f["status"]) for f in record["verifier"]["findings"]}


# -- the tool itself -----------------------------------------------------------------------------

def test_contract_lines_are_commented_out_in_place():
    text = ("kernel k(x: f32[N]) -> out: f32[N]:\n    tag out[i] = (i,) once\n"
            "    contract out[i] = sum(x[i, j]\n                          for j)\n    pass\n")
    stripped = mutate.strip_contracts(text)
    assert stripped.splitlines()[2].lstrip().startswith("#")
    assert stripped.splitlines()[3].lstrip().startswith("#")
    assert [len(x) for x in stripped.splitlines()] == [len(x) for x in text.splitlines()]
    assert mutate.strip_contracts("    contracted = 1\n") == "    contracted = 1\n"


def test_every_operator_yields_distinct_mutants():
    ms = mutate.mutants_of(spec("gemm_pipelined")) + mutate.mutants_of(spec("reduce_sum")) + \
        mutate.mutants_of(spec("row_softmax")) + mutate.mutants_of(spec("hopper/gemm_bf16_wgmma"))  # (late)
    assert {m.operator for m in ms} == set(mutate.OPERATORS)
    for name in ("gemm_pipelined", "reduce_sum"):
        texts = [m.text for m in ms if m.spec == spec(name)]
        assert len(texts) == len(set(texts))
        assert Path(spec(name)).read_text() not in texts
    dropped = [m for m in ms if m.operator == "sync-dropped" and m.spec == spec("gemm_pipelined")]
    assert sorted(m.before for m in dropped) == ["barrier()", "commit()", "commit()", "wait(STAGES - 2)"]
    assert all(m.after == "pass" for m in dropped)  # line numbers stay


def test_mutants_that_do_not_type_check_are_left_out():
    m = pick("vecadd", "constant", "1023", "kernel vecadd")
    assert mutate.type_check(m) is not None
    rejected = [x for x in mutate.mutants_of(spec("vecadd")) if x.operator == "constant" and x.before == "256"]
    assert rejected and all(mutate.type_check(x) is None for x in rejected)  # block(255) etc.


def test_classification_table():
    proved = {"status": "proved", "new_warnings": []}
    warned = {"status": "proved", "new_warnings": ["bank-conflict@17"]}
    violated = {"status": "violated", "new_warnings": []}
    unknown = {"status": "unknown", "new_warnings": []}
    ok, wrong, fault = {"status": "ok"}, {"status": "wrong"}, {"status": "fault"}
    assert mutate.classify(violated, wrong) == "both"
    assert mutate.classify(unknown, fault) == "both"
    assert mutate.classify(violated, ok) == "verifier-only"
    assert mutate.classify(proved, wrong) == "false-proof"
    assert mutate.classify(warned, wrong) == "false-proof"  # a warning is no rejection
    assert mutate.classify(warned, ok) == "warning-only"
    assert mutate.classify(proved, ok) == "neither"
    assert mutate.classify({"status": "error"}, ok) == "error"
    assert mutate.classify(proved, {"status": "no-reference"}) == "error"


# -- classes of real mutants -----------------------------------------------------------------------

def test_dropped_barrier_in_transpose_is_a_race_and_reads_stale_values():
    record = evaluate(pick("transpose_smem", "sync-dropped", "pass", "barrier()"))
    assert ("race", "violated") in findings(record)
    assert record["interpreter"]["status"] == "wrong"
    assert record["class"] == "both"


def test_a_constant_that_breaks_the_result_is_killed():
    record = evaluate(pick("vecadd", "constant", "1025", "kernel vecadd"))  # BLOCK = 1025: one element per block lost
    assert record["interpreter"]["status"] == "wrong"
    assert record["class"] in ("both", "false-proof")
    assert record["class"] == "both", record["verifier"]


def test_an_accumulation_turned_into_an_assignment_is_killed():
    # the start before the loop dropped and `acc = acc + ...` made `acc = ...`: only the last chunk
    # reaches the output (this was a false proof before coverage followed the loop's last iteration)
    (m,) = [x for x in mutate.mutants_of(spec("reduce_sum")) if x.operator == "accumulate"]
    assert "acc = reduce_sum(xs, axis=1)" in m.text and "acc = zeros" not in m.text
    record = evaluate(m)
    assert record["interpreter"]["status"] == "wrong"
    assert record["class"] == "both", record["verifier"]


def test_an_equivalent_mutant_is_killed_by_nobody():
    record = evaluate(pick("reduce_sum", "constant", "512", "kernel reduce_sum"))  # CHUNK = 512: still right
    assert record["class"] == "neither"


def test_a_benign_write_write_race_is_a_verifier_only_kill():
    # every lane of a warp holds the warp's sum: without where=, all 32 store the same value
    record = evaluate(pick("reduce_sum", "where", "", "store(partial"))
    assert ("race", "violated") in findings(record)
    assert record["class"] == "verifier-only"


@pytest.mark.skipif(not mutate.interpreter_schedules(), reason="the interpreter runs lockstep only")
def test_a_write_after_read_race_shows_under_another_schedule():
    # gemm_simt without its end-of-loop barrier: the next k-tile overwrites sA/sB while slower
    # warps still read them; lockstep cannot show it, the first other schedule does
    record = evaluate(pick("gemm_simt", "sync-dropped", "pass", "barrier()", last=True))
    assert ("race", "violated") in findings(record)
    assert record["interpreter"]["status"] == "wrong"
    assert record["interpreter"]["trial"].endswith(mutate.interpreter_schedules()[0])
    assert record["class"] == "both"


KNOWN_FALSE_PROOFS = [
    ("reduce_sum", "arith", "-", "acc = acc + reduce_sum", None, "acc - reduce_sum: the wrong combining operator"),
    ("reduce_sum", "constant", "1023", "kernel reduce_sum", None, "CHUNK = 1023: 768 of every 1023 columns read"),
    ("reduce_sum", "layout", "7", "parts = load", "8", "the partials load reads 7 of the 8 warps"),
    ("reduce_sum", "layout", "0", "parts = load", "1", "the partials load reads warp 0's slot 8 times"),
    ("reduce_sum", "layout", "(CHUNK // 256) - 1", "xs = load", None,
     "thread stride 3 for 4 values: columns read twice and skipped"),
    ("reduce_sum", "padding", ", other=-inf", "xs = load", None, "masked columns padded with -inf before a sum"),
]


@pytest.mark.parametrize("name,operator,after,line_has,before,why", KNOWN_FALSE_PROOFS,
                         ids=[x[-1].split(":")[0] for x in KNOWN_FALSE_PROOFS])
def test_known_false_proof_is_rejected(name, operator, after, line_has, before, why):
    # last: where a line has the expression twice (a layout's shape and stride), the stride
    record = evaluate(pick(name, operator, after, line_has, before, last=True))
    assert record["interpreter"]["status"] == "wrong", why  # the mutant is wrong in any case
    assert record["class"] == "both", f"{why}: {record['class']}"


def test_command_line_sample(tmp_path):
    assert mutate.main(["--only", spec("vecadd"), "--sample", "2", "--seed", "3", "--out", str(tmp_path),
                        "--operators", "mask,cdiv"]) == 0
    records = [json.loads(x) for x in (tmp_path / "mutants.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert all(r["class"] in mutate.CLASSES and r["diff"] for r in records)
    assert "false proofs" in (tmp_path / "report.txt").read_text()


# -- the incoming specs ------------------------------------------------------------------------------

def _promoted(folder: Path) -> list:
    """Specs of the incoming set already moved into the corpus (they state a contract)."""
    return [p for p in sorted(folder.glob("*.arg"))
            if p.with_name(p.stem + ".ref.py").exists() and re.search(r"^\s*contract ", p.read_text(), re.M)]


CORRECT = sorted((INCOMING / "correct").glob("*.arg")) + _promoted(ROOT / "specs")
BUGGY = sorted((INCOMING / "buggy").glob("*.arg")) + _promoted(ROOT / "specs" / "buggy")


def incoming_verdict(path: Path) -> list:
    """Per quick trial (ragged shapes, one other schedule): None if the result is right."""
    kernel = compile_source(mutate.front_end_text(path.read_text()), str(path))
    ref = mutate.reference_of(str(path))
    return [mutate.run_trial(kernel, ref, t, seed=0) for t in mutate.interpreter_trials(kernel, ref, quick=True)]


def test_incoming_corpus_is_there():
    assert len(CORRECT) >= 8 and len(BUGGY) >= 12
    for p in CORRECT + BUGGY:
        assert p.with_name(p.stem + ".ref.py").exists(), p
        assert re.search(r"^\s*contract ", p.read_text(), re.M), f"{p.name} states no contract"
    for p in BUGGY:
        assert re.match(r"# expect: \S+ line \d+\n", p.read_text()), p


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_incoming_correct_spec_matches_its_reference(path):
    verdict = incoming_verdict(path)
    assert verdict and verdict == [None] * len(verdict)


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_incoming_buggy_spec_is_wrong_somewhere(path):
    assert any(r is not None for r in incoming_verdict(path))


def test_late_protocol_faults_are_generated_and_not_proved():
    # a wait's parity flipped from iteration 40 on, an expect_tx over-count at iteration 40: runs of
    # a few trip counts never reach them (both were proved before the pumping argument)
    from argus_verify import smt
    from argus_verify.smt.protocol import PROTOCOL

    hopper = str(ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg")
    late = [m for m in mutate.mutants_of(hopper) if m.operator == "late"]
    assert [(m.line, m.after) for m in late] == [
        (38, "STAGE_BYTES + 16 * ((s) == 40)"),  # the prologue's 3 trips: an equivalent mutant
        (43, "((kt // STAGES) % 2) + ((kt) >= 40)"),
        (51, "STAGE_BYTES + 16 * ((kt) == 40)")]
    for m in late[1:]:
        rep = smt.verify(compile_source(m.text, "late.arg"), checks=tuple(PROTOCOL))
        assert not [r for r in rep.results if r.obligation in ("mbarrier-tx", "mbarrier-phase")
                    and r.status == "proved"], m.description
