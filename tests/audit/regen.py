"""Regenerate the corpus PTX: `python tests/audit/regen.py [NAME ...]` (needs nvcc).

Each corpus/NAME.cu is compiled with `nvcc -ptx -lineinfo -arch=sm_90a` in the corpus folder and
the `.file` paths are made relative (nvcc writes absolute ones), so the checked-in PTX does not
depend on where the repository lives."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"


def ptx_for(cu: Path, nvcc: str) -> str:
    out = cu.with_suffix(".ptx.tmp")
    subprocess.run([nvcc, "-ptx", "-lineinfo", "-arch=sm_90a", cu.name, "-o", out.name], cwd=cu.parent, check=True,
                   capture_output=True)
    text = out.read_text()
    out.unlink()
    folder = str(cu.parent.resolve()) + "/"
    text = text.replace(f'"{folder}', '"')
    return re.sub(r'"[^"]*/(?:cuda[^"/]*|targets)/[^"]*/include/', '"<cuda>/include/', text)


def main(names) -> None:
    nvcc = shutil.which("nvcc") or "/usr/local/bin/nvcc"
    for cu in sorted(CORPUS.glob("*.cu")):
        if names and cu.stem not in names:
            continue
        cu.with_suffix(".ptx").write_text(ptx_for(cu, nvcc))
        print("wrote", cu.with_suffix(".ptx").name)


if __name__ == "__main__":
    main(set(sys.argv[1:]))
