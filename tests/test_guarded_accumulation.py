"""A per-thread accumulation under a guard, as hand-written CUDA reductions do it
(`for (c = tid; c < n; c += blockDim.x) acc += x[c]`): threads whose guard fails keep their
initial zero, and the warp and block reductions combine those untagged partials with tagged ones.
A reduction's value carries the tag of one element of its group, so the output contract used to be
violated for this correct kernel (the untagged partial of thread 128 at N = 64 stood for the
group). Now a violation whose value came through a reduction that may mix the two kinds is unknown;
where the whole group is untagged (the guard never holds) it stays violated."""

from __future__ import annotations

import numpy as np

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.runtime.interp import run

KERNEL = """\
kernel guarded_rowsum(x: f32[M, N]) -> out: f32[M]:
    grid(M)
    block(256)
    contract out[i] = sum(x[i, j] for j)
    r = block_id.x
    acc = zeros(f32[1, 1], tv=(256, 1):(0, 0))
    for c0 in range(0, N, 256):
        if {guard}:
            xs = load(x[r : r + 1, c0 + thread_id : c0 + thread_id + 1], tv=(256, 1):(0, 0))
            acc = acc + xs
    w = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)
    part = shared(f32[1, 8])
    store(part[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)
    barrier()
    ps = load(part, tv=(256, 8):(0, 1))
    total = reduce_sum(ps, axis=1)
    store(out[r : r + 1], reshape(total, 1), where=thread_id == 0)
"""


def contract_result(guard: str):
    kernel = compile_source(KERNEL.format(guard=guard), "guarded_rowsum.arg")
    rep = smt.verify(kernel)
    (res,) = [r for r in rep.results if r.obligation == "output-contract"]
    return kernel, rep, res


def test_a_guarded_accumulation_is_not_reported_violated():
    kernel, rep, res = contract_result("c0 + thread_id < N")
    assert not rep.violations(), rep.render_text()
    assert res.status == "unknown" and res.detail["mixed_reduction"] == 11, res
    x = np.random.default_rng(0).standard_normal((3, 300)).astype(np.float32)
    assert np.allclose(run(kernel, {"x": x}, {"M": 3, "N": 300})["out"], x.sum(axis=1), rtol=1e-5, atol=1e-4)


def test_a_guard_that_never_holds_stays_violated():
    _, rep, res = contract_result("c0 + thread_id < N - N")
    assert res.status == "violated", rep.render_text()
    assert res.detail["lhs"] is None  # the stored value is the constant zero


TREE = """\
kernel tree(x: f32[M, N]) -> out: f32[M]:
    requires N <= 256
    grid(M)
    block(256)
    contract out[i] = sum(x[i, j] for j)
    r = block_id.x
    s = shared(f32[256])
    xs = load(x[r : r + 1, 0 : 256], tv=(256, 1):(1, 0), mask=True)
    store(s, reshape(xs, 256))
    barrier()
    if thread_id < 128:
        a = load(s[0 : 128], tv=(128, 1):(1, 0))
        b = load(s[128 : 256], tv=(128, 1):(1, 0))
        store(s[0 : 128], a + b)
    barrier()
    if thread_id < 32:
        a3 = load(s[0 : 32], tv=((32, 8), 1):((1, 0), 0))
        b3 = load(s[32 : 64], tv=((32, 8), 1):((1, 0), 0))
        c = reduce_sum(reshape(a3 + b3, 1, 32), axis=1, scope=warp, lanes=0b11111)
        store(out[r : r + 1], reshape(c, 1), where=thread_id == 0)
"""


def test_a_tree_reduction_split_by_warpgroup_is_beyond_coverage_not_an_internal_error():
    # `thread_id < 128` in a 256-thread block is warpgroup 0: its fragments span 128 threads, which
    # the coverage pass broadcast against the block's 256 (an internal error for all three checks)
    rep = smt.verify(compile_source(TREE, "tree.arg"), checks=("reduction-coverage", "reduction-operator", "padding"))
    assert not any("internal verifier error" in r.message for r in rep.results), rep.render_text()
    (cov,) = [r for r in rep.results if r.obligation == "reduction-coverage"]
    assert cov.status == "unknown" and "warpgroup role" in cov.message
    assert not rep.violations()
