"""`argus ir --source` (issue 11, part 4): the instantiated IR written as .arg source that `argus
check` accepts back, and that checks to the same kernel (the IR printer gives the same text for
both, and printing the re-checked kernel gives the same source: a fixed point)."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus_verify.cli import main
from argus_verify.frontend import compile_file, compile_source
from argus_verify.printer import format_kernel
from argus_verify.source import format_source

ROOT = Path(__file__).resolve().parent.parent
# every spec, and the buggy ones except the gemm variants that only repeat gemm_simt's forms (time)
FILES = sorted((ROOT / "specs").glob("*.arg")) + [
    p for p in sorted((ROOT / "specs" / "buggy").glob("*.arg"))
    if not p.name.startswith("gemm_") or p.name == "gemm_prefetch_wrong_tile.arg"]


def _without_line_numbers(text: str) -> list[str]:
    # format_kernel puts each statement's source line in a 4-column gutter; the lines differ
    return [ln[5:] if ln[:4].strip().isdigit() or (ln[:4] == "    " and ln[4:5] == " ") else ln
            for ln in text.splitlines()]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_source_checks_back_to_the_same_kernel(path):
    k = compile_file(path)
    text = format_source(k)
    again = compile_source(text, f"{path.name}.src", dict(k.consts))
    assert _without_line_numbers(format_kernel(again)) == _without_line_numbers(format_kernel(k))
    assert format_source(again).splitlines()[1:] == text.splitlines()[1:]


def test_ir_source_on_the_command_line(capsys, tmp_path):
    assert main(["ir", str(ROOT / "specs" / "transpose_smem.arg"), "--source"]) == 0
    text = capsys.readouterr().out
    assert "Swizzle(5,0,5) o (32,32):(32,1)" in text and "transpose(" in text
    path = tmp_path / "again.arg"
    path.write_text(text)
    assert main(["check", str(path)]) == 0
    assert "ok: kernel transpose_smem" in capsys.readouterr().out
