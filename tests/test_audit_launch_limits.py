"""`argus audit` refuses launch sizes CUDA cannot launch (more than 1024 threads per block, or per
axis more than 1024, 1024, 64 threads and 2**31 - 1, 65535, 65535 blocks): exit 2 with the limit,
instead of an audit of a launch that never runs (an outside probe ran 2000 and 33 x 33 threads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argus_verify.cli import main

PTX = str(Path(__file__).resolve().parent / "audit" / "corpus" / "reduce_tree_ok.ptx")


@pytest.mark.parametrize("flag, value, words", [
    ("--block-dim", "2000", "at most 1024 threads along x"),
    ("--block-dim", "1024,2", "at most 1024 threads (here 2048)"),
    ("--block-dim", "33,33", "at most 1024 threads (here 1089)"),
    ("--block-dim", "32..2048", "at most 1024 threads along x"),
    ("--block-dim", "1,1,65", "at most 64 threads along z"),
    ("--grid-dim", "1,70000", "at most 65535 blocks along y"),
])
def test_a_launch_cuda_refuses_is_a_usage_error(flag, value, words, capsys):
    assert main(["audit", PTX, flag, value]) == 2
    assert words in capsys.readouterr().err


def test_contradictory_requires_are_a_launch_violation_not_a_vacuous_proof(tmp_path, capsys):
    # an outside probe: `requires n > 0 && n < 0` proved every obligation (nothing was launched)
    ptx = Path(PTX).read_text()
    bad = tmp_path / "vacuous.ptx"
    bad.write_text("// argus: block-dim 256\n// argus: requires param_2 > 0 && param_2 < 0\n" + ptx)
    assert main(["audit", str(bad), "--json"]) == 1
    results = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in results if r["obligation"] == "launch"] == ["violated"]
    assert not [r for r in results if r["status"] == "proved"]
    ok = tmp_path / "admissible.ptx"  # the same kernel with requires it can meet
    ok.write_text("// argus: block-dim 256\n// argus: requires param_2 > 0\n// argus: size param_0 = 4 * param_2\n"
                  "// argus: size param_1 = 4 * grid_dim.x\n" + ptx)
    main(["audit", str(ok), "--json"])
    assert not [r for r in json.loads(capsys.readouterr().out) if r["obligation"] == "launch"]


def test_an_array_size_is_a_true_count_not_one_modulo_2_64(capsys):
    # `size a = 8 * n` with a 64-bit n: the witness n = 2**61 + ... made 8 * n wrap to a small array,
    # a bounds violation on a correct kernel (an outside probe's); a size too small stays violated
    ptx = Path(__file__).resolve().parent / "audit" / "sizes" / "scale64.ptx"
    assert main(["audit", str(ptx), "--json"]) == 0
    assert all(r["status"] == "proved" for r in json.loads(capsys.readouterr().out))


def test_a_size_too_small_is_still_a_bounds_violation(tmp_path, capsys):
    ptx = Path(__file__).resolve().parent / "audit" / "sizes" / "scale64.ptx"
    half = tmp_path / "half.ptx"
    half.write_text(ptx.read_text().replace("= 8 * _Z7scale64PKdPdx_param_2", "= 4 * _Z7scale64PKdPdx_param_2"))
    assert main(["audit", str(half), "--json"]) == 1
    assert "violated" in {r["status"] for r in json.loads(capsys.readouterr().out) if r["obligation"] == "bounds"}
