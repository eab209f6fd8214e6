"""A shared tile written and read under `if`s that compare the thread's coordinates (r = thread_id //
T, c = thread_id % T) with the sizes: the writers of the store are named by the thread atoms r and c
(smt/writers.py). Before, a view starting at such a name alone (`s[r : r + 1, ...]`) was "not affine",
its store was left out of the uninitialised-read query, and the correct kernel was unknown (found by
an outside probe, with six more correct variants); the kernel that never writes the tile's last row
is a violation at its read."""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source

TRANSPOSE = """
kernel tguard<T=16>(x: f32[M, N]) -> out: f32[N, M]:
    grid(cdiv(N, T), cdiv(M, T))
    block(T * T)
    tag x[i, j] = (i, j)
    tag out[j, i] = (i, j) once
    contract out[j, i] = x[i, j]
    m0 = block_id.y * T
    n0 = block_id.x * T
    s = shared(f32[T, T + 1])
    r = thread_id // T
    c = thread_id % T
    if {write}:
        a = load(x[m0 + r : m0 + r + 1, n0 + c : n0 + c + 1], tv=(T * T, 1):(0, 0))
        store(s[r : r + 1, c : c + 1], a)
    barrier()
    if n0 + r < N and m0 + c < M:
        b = load(s[c : c + 1, r : r + 1], tv=(T * T, 1):(0, 0))
        store(out[n0 + r : n0 + r + 1, m0 + c : m0 + c + 1], b)
"""


def _statuses(write: str) -> dict:
    rep = smt.verify(compile_source(TRANSPOSE.format(write=write), "t.arg"), timeout_s=10, jobs=1)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


def test_the_guarded_transpose_is_proved():
    got = _statuses("m0 + r < M and n0 + c < N")
    assert all(s <= {"proved", "warning"} for s in got.values()), got


@pytest.mark.parametrize("write", ["m0 + r < M - 1 and n0 + c < N", "m0 + r < M and n0 + c < N - 1"])
def test_a_write_guard_one_short_leaves_the_read_uninitialised(write):
    assert "violated" in _statuses(write)["uninitialised-read"]


def test_an_output_tag_from_an_untagged_input_names_the_missing_declaration():
    text = """
kernel shift<BLOCK=128>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    tag out[i] = (i,) once
    i = block_id.x * BLOCK + thread_id
    a = load(x[i : i + 1], tv=(BLOCK, 1):(0, 0), mask=True)
    if i < N:
        store(out[i : i + 1], a)
"""
    rep = smt.verify(compile_source(text, "s.arg"), timeout_s=10, jobs=1)
    (r,) = [r for r in rep.results if r.obligation == "output-contract" and r.status == "violated"]
    assert "x has no tag declaration" in r.hint
