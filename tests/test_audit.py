"""`argus audit`: the PTX front end, the lifter, the two-thread obligations, reports and the corpus.

The corpus test audits the checked-in PTX of tests/audit/corpus (no nvcc needed) and compares each
kernel with the expectation in its .cu header. Kernels that take several seconds run only with
ARGUS_AUDIT_FULL=1 (`python tests/audit/harness.py` prints the whole table); the kernels where the
audit does not (yet) give the expected answer are strict xfails with the reason, so a change in
either direction is noticed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from argus_verify import thread_ir as T
from argus_verify.cli import main
from argus_verify.frontend.ptx import lift_module, parse_ptx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "audit"))
import harness  # noqa: E402

CORPUS = HERE / "audit" / "corpus"
FULL = os.environ.get("ARGUS_AUDIT_FULL") == "1"

# several seconds each on 2 cores: run with ARGUS_AUDIT_FULL=1
SLOW = {"matmul_tiled_ok", "matmul_tiled_missing_sync", "scan_blelloch_ok", "scan_double_buffer_ok",
        "scan_inplace_racy", "transpose_naive_ok", "transpose_naive_swapped_oob", "transpose_tile_oob",
        "transpose_tiled_nosync", "transpose_tiled_ok", "stencil2d_ok", "rowsum_ok", "rowsum_racy",
        "gridstride_ok", "hist_shared_racy", "reduce_sync_in_branch", "gridstride_fixed_grid_ok",
        "gridstride_le_oob"}
# kernels whose audit result differs from the header, and why (see docs/audit.md, Limits)
KNOWN = {
    "gridstride_ok": "grid-stride loop with no bound on n: i + stride may wrap for n near INT_MAX, and with a "
                     "symbolic grid the no-wrap query is a product of symbolic sizes (unknown)",
    "hist_shared_atomic_ok": "grid-stride loop: the loop summary allows a wrapped induction variable (unknown)",
    "rowsum_ok": "loop over columns: bounds need an iteration the summary cannot confirm (unknown)",
    "stencil2d_ok": "products of symbolic sizes: the solver times out (unknown)",
    "transpose_naive_ok": "products of symbolic sizes: the solver times out (unknown)",
}


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------- front end


def test_every_corpus_ptx_parses_and_lifts_without_unsupported_parts():
    kernels = 0
    for ptx in sorted(CORPUS.glob("*.ptx")):
        module = parse_ptx(ptx.read_text(), str(ptx))
        for k, problems in lift_module(module, str(ptx), str(ptx.with_suffix(".cu"))):
            kernels += 1
            assert not problems, (ptx.name, problems)
            bad = [s.reason for s in T.walk(k.body) if isinstance(s, T.Unsupported)]
            assert not bad, (ptx.name, bad)
    assert kernels >= 40


def test_natural_loops_and_source_lines_are_recovered():
    ptx = CORPUS / "gridstride_ok.ptx"
    (k, _), = lift_module(parse_ptx(ptx.read_text(), str(ptx)), str(ptx), str(ptx.with_suffix(".cu")))
    loops = [s for s in T.walk(k.body) if isinstance(s, T.Loop)]
    assert len(loops) == 1
    body = list(T.walk(loops[0].body))
    assert any(isinstance(s, T.Break) for s in body) or any(isinstance(s, T.Continue) for s in body)
    stores = [s for s in body if isinstance(s, T.Access) and s.kind == "store"]
    assert stores and stores[0].space == "global" and stores[0].loc.line == 7
    assert stores[0].loc.file.endswith("gridstride_ok.cu")


def test_ptx_syntax_error_is_bad_input_with_a_location(tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry k(\n{\n  ret;\n}\n")
    code, out, err = run("audit", str(bad))
    assert code == 2
    assert "bad.ptx:5:1" in err and "Traceback" not in err


def test_an_instruction_the_lifter_does_not_know_makes_memory_obligations_unknown(tmp_path):
    text = (CORPUS / "vecadd_ok.ptx").read_text()
    text = text.replace("\tret;", "\tmbarrier.arrive.shared.b64 \t%rd1, [%rd1];\n\tret;", 1)
    f = tmp_path / "vecadd_mbarrier.ptx"
    f.write_text(text)
    code, out, _ = run("audit", str(f), "--block-dim", "256", "--json")
    assert code == 3
    results = json.loads(out)
    races = [r for r in results if r["obligation"] == "race"]
    assert races and races[0]["status"] == "unknown"
    assert "not supported: mbarrier.arrive.shared.b64 at PTX line" in races[0]["message"]
    assert not any(r["status"] == "proved" and r["obligation"] in ("race", "bounds") for r in results)


# ---------------------------------------------------------------- CLI and reports


def test_clean_kernel_exits_0_and_racy_kernel_exits_1_with_a_two_thread_witness():
    code, out, _ = run("audit", str(CORPUS / "vecadd_ok.ptx"), "--json")
    assert code == 0, out
    assert all(r["status"] == "proved" for r in json.loads(out))
    code, out, _ = run("audit", str(CORPUS / "two_phase_nosync.ptx"), "--json")
    assert code == 1
    race = next(r for r in json.loads(out) if r["obligation"] == "race" and r["status"] == "violated")
    w = race["witness"]
    assert len(w["threads"]) == 2 and w["threads"][0] != w["threads"][1] and len(w["block"]) == 3
    assert race["location"]["file"].endswith("two_phase_nosync.cu") and race["location"]["line"] in (8, 9)
    code, text, _ = run("audit", str(CORPUS / "two_phase_nosync.ptx"))
    assert "error: data race on shared s:" in text and "(warp " in text and ", lane " in text and "hint:" in text


def test_launch_flags_override_and_bad_values_are_usage_errors():
    code, out, _ = run("audit", str(CORPUS / "vecadd_ok.ptx"), "--block-dim", "0", "--json")
    assert code == 2 and json.loads(out)["status"] == "error"
    code, out, _ = run("audit", str(CORPUS / "vecadd_ok.ptx"), "--block-dim", "128", "--grid-dim", "1..100")
    assert code == 0, out


def test_bad_directive_is_reported_at_its_line(tmp_path):
    src = (CORPUS / "vecadd_ok.cu").read_text().replace("// argus: size c = n", "// argus: sise c = n")
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.ptx").write_text((CORPUS / "vecadd_ok.ptx").read_text())
    code, _, err = run("audit", str(tmp_path / "k.ptx"))
    assert code == 2 and "k.cu:5:" in err and "unknown argus directive 'sise'" in err


def test_missing_size_is_unknown_not_proved(tmp_path):
    src = (CORPUS / "vecadd_ok.cu").read_text().replace("// argus: size c = n\n", "")
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.ptx").write_text((CORPUS / "vecadd_ok.ptx").read_text())
    code, out, _ = run("audit", str(tmp_path / "k.ptx"), "--json")
    assert code == 3
    unknown = [r for r in json.loads(out) if r["status"] == "unknown"]
    assert unknown and "no size declared for c" in unknown[0]["message"]


def test_cu_without_nvcc_is_a_clear_error(tmp_path, monkeypatch):
    import argus_verify.cli_audit as cli_audit

    monkeypatch.setattr(cli_audit.shutil, "which", lambda name: None)
    monkeypatch.setattr(cli_audit.os.path, "exists", lambda p: False)
    (tmp_path / "k.cu").write_text((CORPUS / "vecadd_ok.cu").read_text())
    code, _, err = run("audit", str(tmp_path / "k.cu"))
    assert code == 2 and "needs nvcc" in err


def _check_sarif(log: dict) -> None:
    """The fields SARIF 2.1.0 requires (and the types and values it allows) for what we write."""
    assert log["version"] == "2.1.0" and isinstance(log["runs"], list) and log["runs"]
    assert log.get("$schema", "").endswith("sarif-2.1.0.json")
    for run_ in log["runs"]:
        driver = run_["tool"]["driver"]
        assert isinstance(driver["name"], str) and driver["name"]
        rules = driver.get("rules", [])
        ids = [r["id"] for r in rules]
        assert len(ids) == len(set(ids)) and all(isinstance(i, str) and i for i in ids)
        for r in rules:
            assert isinstance(r["shortDescription"]["text"], str)
        for res in run_["results"]:
            assert isinstance(res["message"]["text"], str) and res["message"]["text"]
            assert res["level"] in ("none", "note", "warning", "error")
            if "ruleIndex" in res:
                assert 0 <= res["ruleIndex"] < len(rules) and rules[res["ruleIndex"]]["id"] == res["ruleId"]
            for loc in res.get("locations", []):
                phys = loc["physicalLocation"]
                assert isinstance(phys["artifactLocation"]["uri"], str) and phys["artifactLocation"]["uri"]
                region = phys.get("region")
                if region is not None:
                    assert isinstance(region["startLine"], int) and region["startLine"] >= 1
                    assert region.get("startColumn", 1) >= 1


def test_sarif_output_has_the_required_structure(tmp_path):
    out = tmp_path / "findings.sarif"
    code, _, _ = run("audit", str(CORPUS / "shfl_partial_branch.ptx"), "--sarif", str(out))
    assert code == 1
    log = json.loads(out.read_text())
    _check_sarif(log)
    results = log["runs"][0]["results"]
    assert any(r["ruleId"] == "shuffle" and r["level"] == "error"
               and r["locations"][0]["physicalLocation"]["region"]["startLine"] == 10 for r in results)
    bad = json.loads(out.read_text())
    bad["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(AssertionError):
        _check_sarif(bad)


# ---------------------------------------------------------------- the corpus


def _corpus_params():
    for cu in sorted(CORPUS.glob("*.cu")):
        marks = []
        if cu.stem in SLOW and not FULL:
            marks.append(pytest.mark.skip(reason="slow: ARGUS_AUDIT_FULL=1"))
        if cu.stem in KNOWN:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[cu.stem]))
        yield pytest.param(cu.stem, marks=marks, id=cu.stem)


@pytest.mark.parametrize("name", list(_corpus_params()))
def test_corpus_kernel_matches_its_header(name):
    (row,) = harness.run_corpus({name})
    assert row["verdict"] == "correct", row
    if row["expected"] != "clean":
        assert row["exit"] == 1
    else:
        assert row["exit"] == 0


def test_corpus_is_large_enough_and_every_kernel_has_an_expectation():
    cus = sorted(CORPUS.glob("*.cu"))
    assert len(cus) >= 40
    kinds = set()
    for cu in cus:
        assert "// expect:" in cu.read_text(), cu.name
        assert cu.with_suffix(".ptx").exists(), cu.name
        kinds |= {o for o, _ in harness.expectations(cu)}
    assert {"race", "barrier-divergence", "bounds", "uninitialised-read", "shuffle", "cp-async"} <= kinds


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/bin/nvcc"),
                    reason="no nvcc here")
def test_checked_in_ptx_is_what_nvcc_generates():
    import regen

    nvcc = shutil.which("nvcc") or "/usr/local/bin/nvcc"
    cu = CORPUS / "two_phase_ok.cu"
    assert regen.ptx_for(cu, nvcc) == cu.with_suffix(".ptx").read_text()


IRREDUCIBLE = """.version 9.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
  .reg .pred %p<3>;
  .reg .b32 %r<3>;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $B;
$A:
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p2, %r1, 10;
  @%p2 bra $B;
  ret;
$B:
  add.s32 %r1, %r1, 2;
  bra.uni $A;
}
"""


def test_irreducible_control_flow_is_unknown_with_the_reason(tmp_path):
    f = tmp_path / "irr.ptx"
    f.write_text(IRREDUCIBLE)
    code, out, err = run("audit", str(f), "--block-dim", "64", "--json")
    assert code == 3, (out, err)
    results = json.loads(out)
    assert results and all(r["status"] == "unknown" for r in results)
    assert "irreducible control flow" in results[0]["message"]
