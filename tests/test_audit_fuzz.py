"""PTX the audit's front end does not understand is reported, never a traceback.

Lines of corpus PTX are mutated (unknown opcodes, dropped or extra operands, garbage tokens, missing
semicolons, wrong state spaces, operands of the wrong kind) and audited through the CLI: each run
ends in a verdict or a bad-input error (exit 0, 1, 2 or 3, valid JSON with --json), never an
internal error (exit 4). An instruction the grammar reads but the lifter does not know is
"not supported: <opcode> at PTX line N"; a line the grammar does not read is
"not supported: `<text>` at line N".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from argus_verify.cli import main

CORPUS = Path(__file__).resolve().parent / "audit" / "corpus"
BASES = ("reduce_tree_ok", "shfl_xor_ok", "hist_shared_atomic_ok")
TEXTS = {b: (CORPUS / f"{b}.ptx").read_text() for b in BASES}
INSTR = re.compile(r"^\s+(@!?%\w+\s+)?[a-z][\w.]*(\s|;)")

TOKENS = ["%r1", "%rd1", "%p1", "%f1", "[%rd1]", "[%r1+4]", "0f3F800000", "17", "-1", "{%r1, %r2}", "_", "%tid.x",
          "$L__BB0_1", "!%p1", "foo", "[]", "{", "}", "|", ",", ";", ".u32", "@%p1", "%nosuchreg"]
OPCODES = ["frobnicate.u32", "ld.global.v8.u32", "st.local.u32", "atom.shared.exch.b32", "bar.red.popc.u32",
           "cp.async.bulk.shared.global", "mbarrier.init.shared.b64", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
           "shfl.down.b32", "red.global.add.f32", "wgmma.fence.sync.aligned", "tex.2d.v4.f32.f32", "call",
           "brx.idx", "setp.xx.s32", "cvt.rn.f16.f32", "vote.sync.ballot.b32", "mov.u32"]


def _instr_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if INSTR.match(line)]


@st.composite
def mutated(draw):
    base = draw(st.sampled_from(BASES))
    lines = TEXTS[base].splitlines()
    idx = draw(st.sampled_from(_instr_lines(TEXTS[base])))
    line = lines[idx]
    head, _, rest = line.strip().partition(" ")
    guard = ""
    if head.startswith("@"):
        guard, (head, _, rest) = head + " ", rest.strip().partition(" ")
    kind = draw(st.sampled_from(["opcode", "drop", "extra", "garbage", "semicolon", "space", "operands",
                                 "insert"]))
    ops = [o.strip() for o in rest.rstrip(";").split(",")] if rest.strip() else []
    if kind == "opcode":
        new = f"\t{guard}{draw(st.sampled_from(OPCODES))} {rest}"
    elif kind == "drop" and ops:
        k = draw(st.integers(0, len(ops) - 1))
        new = f"\t{guard}{head} {', '.join(ops[:k] + ops[k + 1:])};"
    elif kind == "extra":
        new = f"\t{guard}{head} {', '.join(ops + [draw(st.sampled_from(TOKENS))])};"
    elif kind == "garbage":
        toks = line.split()
        k = draw(st.integers(0, len(toks)))
        toks.insert(k, draw(st.sampled_from(TOKENS)))
        new = "\t" + " ".join(toks)
    elif kind == "semicolon":
        new = line.replace(";", "")
    elif kind == "space":
        new = re.sub(r"\.(global|shared|param|local)\b", "." + draw(st.sampled_from(["shared", "global", "local",
                                                                                      "const", "param"])), line)
    elif kind == "operands":
        new = f"\t{guard}{head} {', '.join(draw(st.sampled_from(TOKENS)) for _ in ops)};"
    else:
        extra = draw(st.lists(st.sampled_from(TOKENS), min_size=0, max_size=3))
        new = line + f"\n\t{draw(st.sampled_from(OPCODES))} {', '.join(extra)};"
    lines[idx] = new
    return base, idx + 1, new, "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=mutated())
def test_mutated_ptx_is_reported_never_a_traceback(case, tmp_path, capsys):
    base, line_no, new, text = case
    f = tmp_path / f"{base}_mut.ptx"
    f.write_text(text)
    code = main(["audit", str(f), "--json", "--block-dim", "64", "--grid-dim", "2", "--timeout", "1"])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3), (code, new, err)
    assert "Traceback" not in out + err and "internal error" not in out + err, (new, err)
    payload = json.loads(out)
    if code == 2:
        assert payload["message"], payload
    else:
        assert isinstance(payload, list) and payload


def test_unknown_instruction_is_named_with_its_line(tmp_path, capsys):
    text = TEXTS["reduce_tree_ok"]
    idx = _instr_lines(text)[3]
    lines = text.splitlines()
    lines.insert(idx, "\tfrobnicate.shared.u32 %r1, [%rd1];")
    f = tmp_path / "k.ptx"
    f.write_text("\n".join(lines) + "\n")
    code = main(["audit", str(f), "--json", "--block-dim", "64", "--grid-dim", "2", "--timeout", "1"])
    results = json.loads(capsys.readouterr().out)
    assert code == 3
    assert any(f"not supported: frobnicate.shared.u32 at PTX line {idx + 1}" in r["message"] for r in results)


def test_unreadable_line_is_named_with_its_line(tmp_path, capsys):
    text = TEXTS["reduce_tree_ok"]
    idx = _instr_lines(text)[3]
    lines = text.splitlines()
    lines.insert(idx, "\tadd.s32 %r1, %r1 %r2 ,;")
    f = tmp_path / "k.ptx"
    f.write_text("\n".join(lines) + "\n")
    code = main(["audit", str(f), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 2
    assert payload["message"].startswith(f"not supported: `add.s32 %r1,` at line {idx + 1}"), payload
