"""What the GPU refuses to launch, found by the `launch` obligation (an outside probe found both
proved for all sizes, with no word):

- a grid extent past what CUDA launches (2**31 - 1 blocks along x, 65535 along y and z): `grid(1, M)`
  with M up to 2**20 (a warning: the runtime refuses such a launch);
- a tensor moved by TMA whose rows are not a multiple of 16 bytes (its tensor map cannot be encoded):
  a bf16 GEMM without `requires K % 8 == 0`. The interpreter faults there too, so the witness
  reproduces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from argus_verify import ir
from argus_verify.diagnostics import ArgusRuntimeError
from argus_verify.frontend import compile_source
from argus_verify.replay import reproduce
from argus_verify.runtime.interp import run
from argus_verify.smt.vacuity import check_launch

KERNEL = """
kernel rows(x: f32[M, N]) -> out: f32[M, N]:
    grid({grid})
{requires}    block(256)
    tag x[i, j] = (i, j)
    tag out[i, j] = (i, j) once
    r = block_id.{axis}
    c0 = block_id.{other} * 256
    xs = load(x[r : r + 1, c0 : c0 + 256], tv=(256, 1):(0, 1), mask=True)
    store(out[r : r + 1, c0 : c0 + 256], xs, mask=True)
"""


def launch(grid: str, axis="y", other="x", requires="") -> list:
    """The launch obligation's results, proved ones included (the report shows only the others)."""
    text = KERNEL.format(grid=grid, axis=axis, other=other, requires=requires)
    return check_launch(compile_source(text, "rows.arg"), {}, 10).results


def test_rows_along_y_past_65535_blocks_are_a_launch_warning():
    """A warning, not a violation: such a launch fails loudly (the runtime refuses it) and never
    computes a wrong result."""
    (r,) = [r for r in launch("cdiv(N, 256), M") if r.status != "proved"]
    assert r.status == "warning" and r.location.line == 3
    assert "grid extent M along y reaches" in r.message and "65535" in r.message
    assert r.witness["sizes"]["M"] > 65535 and r.witness["grid"][1] == r.witness["sizes"]["M"]
    assert "requires M <= 65535" in r.hint


@pytest.mark.parametrize(("grid", "axis", "other", "requires"), [
    ("M, cdiv(N, 256)", "x", "y", "    requires N <= 65535 * 256\n"),  # rows along x: up to 2**31 - 1
    ("cdiv(N, 256), M", "y", "x", "    requires M <= 65535\n"),
])
def test_a_grid_within_the_limits_is_proved(grid, axis, other, requires):
    results = launch(grid, axis, other, requires)
    assert results and all(r.status == "proved" for r in results)


def test_rows_along_x_need_no_requires_within_the_verifiers_size_range():
    # N up to 2**20 gives at most 4096 blocks along y; M up to 2**20 blocks along x is within 2**31 - 1
    results = launch("M, cdiv(N, 256)", "x", "y")
    assert results and all(r.status == "proved" for r in results)


TMA_GEMM = Path(__file__).resolve().parent / "hopper" / "gemm_bf16_wgmma_tma_epilogue.arg"


@pytest.mark.parametrize(("requires", "tensors", "sizes"), [
    ("    requires K % 4 == 0\n    requires N % 8 == 0\n", {"A"}, {"M": 64, "N": 64, "K": 68}),
    ("    requires K % 8 == 0\n    requires N >= 1\n", {"B", "C"}, {"M": 64, "N": 60, "K": 64}),
])
def test_tma_rows_not_a_multiple_of_16_bytes_are_a_launch_violation(requires, tensors, sizes):
    text = TMA_GEMM.read_text()
    assert "    requires K % 8 == 0\n    requires N % 8 == 0\n" in text
    text = text.replace("    requires K % 8 == 0\n    requires N % 8 == 0\n", requires)
    k = compile_source(text, str(TMA_GEMM))
    found = [r for r in check_launch(k, {}, 10).results if r.status == "violated"]
    assert {r.message.split()[2].rstrip(",") for r in found} == tensors
    assert all("not a multiple of 16" in r.message and "% 8 == 0" in r.hint for r in found)
    # the interpreter faults at the first such TMA statement: that witness reproduces, a later one's
    # is unchecked (the run stopped before it), never "not reproduced"
    replays = [reproduce(k, r)["status"] for r in found]
    assert replays[0] == "reproduced" and "not-reproduced" not in replays
    shapes = ir.tensor_shapes(k, sizes)
    arrays = {name: np.ones(shapes[name], np.float32) for name in ("A", "B")}
    with pytest.raises(ArgusRuntimeError, match="a tensor map needs a multiple of 16"):
        run(k, arrays, sizes)


def test_the_spec_with_its_requires_is_proved_at_launch():
    k = compile_source(TMA_GEMM.read_text(), str(TMA_GEMM))
    results = check_launch(k, {}, 10).results
    assert results and all(r.status == "proved" for r in results)
