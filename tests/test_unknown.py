"""Every documented source of "unknown" (docs/verify.md, "Sources of unknown"), reproduced.

Each entry is a small kernel and the reason the verifier gives for it today. When a limit is
lifted, its test fails here, and the table in docs/verify.md is updated with it: the list cannot
silently go stale. The docs table and SOURCES, HOPPER_SOURCES below must name the same cases.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from argus_verify import smt
from argus_verify.diagnostics import ArgusError
from argus_verify.frontend import compile_file, compile_source

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 10.0

HEAD = """\
kernel {name}(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 256))
    block(256)
    tag x[i] = (i,)
    tag out[i] = (i,) once
    base = block_id.x * 256
"""

# case -> (body after HEAD, obligation, the reason's text). Line numbers count HEAD's 6 lines.
SOURCES = {
    # a correct kernel: the coverage encoding takes the t loop, whose trip count is not a constant, at
    # its first iteration, where the guard is false (a constant trip count of at most 32 is searched:
    # tests/test_guarded_loop_store.py, also the twin whose guard never holds)
    "store_guarded_to_a_later_iteration": ("""\
    for t in range(cdiv(N, 256) + 1):
        v = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
        if t == 1:
            store(out[base : base + 256], v, mask=True)
""", "output-once", "only that loop's first iteration was checked for the element"),
    # a real bug (no wait before the read) that the verifier cannot decide
    "commit_under_if": ("""\
    sx = shared(f32[256])
    copy_async(sx[0 : 256], x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    if N > 0:
        commit()
    barrier()
    v = load(sx[0 : 256], tv=(256, 1):(1, 1))
    store(out[base : base + 256], v, mask=True)
""", "uninitialised-read", "async-copy groups cannot be counted exactly (commit() under an if at line 9)"),
    "commit_in_loop_with_dependent_bounds": ("""\
    sx = shared(f32[256])
    for i in range(2):
        for j in range(i, 2):
            copy_async(sx[0 : 256], x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
            commit()
            wait(0)
            barrier()
    v = load(sx[0 : 256], tv=(256, 1):(1, 1))
    store(out[base : base + 256], v, mask=True)
""", "uninitialised-read", "a loop whose bounds depend on an outer loop contains commit() (line 9)"),
    "output_start_not_affine": ("""\
    b2 = (block_id.x // 2) * 512 + (block_id.x % 2) * 256
    xs = load(x[b2 : b2 + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[b2 : b2 + 256], xs, mask=True)
""", "output-once", "the start of dimension 0 of the store is not affine (line 9)"),
    "output_start_mixes_block_ids": ("""\
    b2 = block_id.x * 512 + block_id.y * 256
    xs = load(x[b2 : b2 + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[b2 : b2 + 256], xs, mask=True)
""", "output-once", "dimension 0 of the store mixes several block ids / loop variables"),
    "output_blocks_in_reverse": ("""\
    b2 = N - 256 - block_id.x * 256
    xs = load(x[b2 : b2 + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[b2 : b2 + 256], xs, mask=True)
""", "output-once", "a block id or loop variable is used in several dimensions (or negatively)"),
    "overlapping_output_tiles": ("""\
    b2 = block_id.x * 128
    xs = load(x[b2 : b2 + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[b2 : b2 + 256], xs, mask=True, where=thread_id < 128)
""", "output-once", "tiles overlap, so the element may be written by another block"),
    "loop_carried_value_widened": ("""\
    v = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    for i in range(N):
        if i == 5:
            v = shfl_xor(v, 1)
    store(out[base : base + 256], v, mask=True)
""", "output-contract", "loop-carried 'v' (line 8) is followed 2 iterations back; older values are unknown"),
    "value_of_a_loop_that_may_not_run": ("""\
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    for i in range(N - 1):
        k = base
    store(out[k : k + 256], xs, mask=True)
""", "output-contract", "integer 'i'-loop value used after a loop that may run zero times"),
    "reduction_mixes_tagged_and_untagged": ("""\
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    sx = shared(f32[2, 256])
    store(sx[0, 0 : 256], xs)
    store(sx[1, 0 : 256], zeros(f32[256], tv=(256, 1):(1, 1)))
    barrier()
    both = load(sx[0 : 2, 0 : 256], tv=(256, (1, 2)):(1, (1, 256)))
    s = reduce_sum(both, axis=0)
    store(out[base : base + 256], reshape(s, 256), mask=True)
""", "tag-assertion", "the combined elements agree but mix tagged and untagged (or `*`) elements"),
    "smem_loop_deeper_than_the_encoding": ("""\
    sx = shared(f32[256])
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(sx[0 : 256], xs)
    barrier()
    for i in range(N):
        v = load(sx[0 : 256], tv=(256, 1):(1, 1))
        barrier()
        store(sx[0 : 256], v)
        barrier()
    w = load(sx[0 : 256], tv=(256, 1):(1, 1))
    store(out[base : base + 256], w, mask=True)
""", "output-contract", "through more stores and loads in a row than the encoding follows"),
    # two reads of what the previous iteration wrote: the candidate writes double at every level (a
    # shared-memory tree reduction has the same shape). Without a limit on the reads resolved per
    # query, building the formula took minutes, past any solver limit
    "smem_combined_along_many_paths": ("""\
    sx = shared(f32[256])
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(sx[0 : 256], xs)
    barrier()
    for i in range(N):
        a = load(sx[0 : 256], tv=(256, 1):(1, 1))
        b = load(sx[0 : 256], tv=(256, 1):(1, 1))
        barrier()
        store(sx[0 : 256], a + b)
        barrier()
    w = load(sx[0 : 256], tv=(256, 1):(1, 1))
    store(out[base : base + 256], w, mask=True)
""", "output-contract", "data flows through shared memory along more paths than the encoding follows"),
    # an accumulator defined before an outer loop and carried through an inner one (its tags refer to
    # the previous iteration of both, without end: Python's recursion limit ends the encoding)
    "value_carried_through_nested_loops": ("""\
    acc = zeros(f32[256], tv=(256, 1):(1, 0))
    for t in range(2):
        for u in range(N):
            xs = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
            acc = acc + xs
        store(out[base : base + 256], acc, mask=True)
""", "output-contract", "a value carried through nested loops refers to its earlier iterations too deeply"),
    # (a condition on the thread is followed: tests/test_division_by_zero.py)
    "launch_division_under_unfollowed_condition": ("""\
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    j = 0
    if thread_id < 128:
        j = 1
    if j == 1:
        q = thread_id // (N - 3)
    store(out[base : base + 256], xs, mask=True)
""", "launch", "where the division may not run: it is under the condition or loop at line 11"),
}

# Hopper sources: a 64 x 64 bf16 tile per block in shared memory, moved by TMA. case -> (kernel,
# the obligations verified, the obligation that ends unknown, the reason's text)
TILE_HEAD = """\
kernel {name}<BM=64, BN=64>(A: bf16[M, N]) -> C: bf16[M, N]:
    requires N % 8 == 0
    grid(cdiv(N, BN), cdiv(M, BM))
    block(128)
    sC = shared(bf16[BM, BN], layout=Swizzle(3, 3, 3) o row_major(BM, BN))
    m0 = block_id.y * BM
    n0 = block_id.x * BN
"""
TMA_LOAD = """\
    full = mbarrier(1)
    if thread_id == 0:
        mbarrier_init(full[0], 1)
        fence_mbarrier_init()
    barrier()
    if thread_id == 0:
        mbarrier_expect_tx(full[0], BM * BN * 2)
        tma_load(sC[0 : BM, 0 : BN], A[m0 : m0 + BM, n0 : n0 + BN], full[0])
    mbarrier_wait(full[0], 0)
"""
TMA_STORE = """\
    if thread_id == 0:
        tma_store(C[m0 : m0 + BM, n0 : n0 + BN], sC[0 : BM, 0 : BN])
        bulk_commit()
"""
MULTICAST = """\
kernel tma_multicast_not_encoded<BM=64, BN=64>(A: bf16[M, N]) -> C: bf16[M, N]:
    requires N % 8 == 0
    grid(2 * cdiv(N, 2 * BN), cdiv(M, BM))
    block(128)
    cluster(2, 1)
    sC = shared(bf16[BM, BN], layout=Swizzle(3, 3, 3) o row_major(BM, BN))
    full = mbarrier(1)
    if thread_id == 0:
        mbarrier_init(full[0], 1)
        fence_mbarrier_init()
    cluster_sync()
    m0 = block_id.y * BM
    if thread_id == 0:
        mbarrier_expect_tx(full[0], BM * BN * 2)
        if cluster_rank == 0:
            tma_load_multicast(sC[0 : BM, 0 : BN], A[m0 : m0 + BM, block_id.x * BN : block_id.x * BN + BN], full[0], 3)
    mbarrier_wait(full[0], 0)
    v = load(sC[0 : BM, 0 : BN], tv=(128, 32):(1, 128))
    store(C[m0 : m0 + BM, block_id.x * BN : block_id.x * BN + BN], v, mask=True)
    cluster_sync()
"""
HOPPER_SOURCES = {
    # the cluster GEMM at its defaults (2 warpgroups per CTA); tests/test_cluster.py has the mutant that
    # releases from warpgroup 0 alone, which must not be proved either
    "cluster_several_warpgroups_per_cta": (ROOT / "tests" / "hopper" / "gemm_bf16_wgmma_cluster.arg", ("stage-reuse",),
                                           "stage-reuse", "runs each CTA's warpgroups in lockstep"),
    "tma_multicast_not_encoded": (MULTICAST, ("uninitialised-read",), "uninitialised-read",
                                  "tma_load_multicast at line 16 writes the shared memory of other CTAs of the "
                                  "cluster: data multicast between CTAs is not encoded"),
    "generic_read_of_tma_written_tile": (TILE_HEAD + TMA_LOAD + """\
    v = load(sC[0 : BM, 0 : BN], tv=(128, 32):(1, 128))
    store(C[m0 : m0 + BM, n0 : n0 + BN], v, mask=True)
""", ("uninitialised-read",), "uninitialised-read",
        "the read of sC at line 17 by ordinary threads of data a TMA copy writes: its ordering through the "
        "mbarrier is not encoded"),
    "tma_store_of_tma_written_tile": (TILE_HEAD + TMA_LOAD + TMA_STORE + "        bulk_wait(0)\n",
                                      ("uninitialised-read",), "uninitialised-read",
                                      "the TMA store at line 18 reads sC, which a TMA copy writes: that the copy has "
                                      "landed before the store reads it is neither encoded nor a protocol obligation"),
    # a real bug: the block may exit while the TMA store still reads sC (bulk-group violated)
    "protocol_obligation_not_proved": (TILE_HEAD + """\
    v = load(A[m0 : m0 + BM, n0 : n0 + BN], tv=(128, 32):(1, 128), mask=True)
    store(sC[0 : BM, 0 : BN], v)
    fence_proxy_async()
    barrier()
""" + TMA_STORE, ("uninitialised-read", "bulk-group"), "uninitialised-read",
        "relies on async-proxy-fence and bulk-group — not established: bulk-group is violated"),
    # the wait's parity flips from k tile 40 on: runs of up to 10 trips never reach it, and the loop does
    # not repeat within them (smt/protocol_pump.py); with K = 2688 it is violated (tests/test_protocol_pump.py)
    "protocol_beyond_the_runs": ((ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg").read_text().replace(
        "(kt // STAGES) % 2)", "(kt // STAGES + kt // 40) % 2)"), ("mbarrier-phase",), "mbarrier-phase",
        "not established beyond the sizes run: the loop at line 42 does not repeat with period 8"),
    # coverage through a wgmma needs each operand's k window, a fact of tag-assertion's proofs: not run here
    "wgmma_k_window_not_proved": (ROOT / "specs" / "hopper" / "gemm_bf16_wgmma.arg", ("reduction-coverage",),
                                  "reduction-coverage", "the k window of the wgmma's a operand (sA) is not proved"),
}

# the verifier's own limits that no small kernel states: (case, how it is reproduced)
SOLVER_LIMIT = "solver_time_limit"
INTERNAL_ERROR = "internal_verifier_error"
PROVED_NOW = {  # sources of unknown / false alarms lifted: proved exactly (issue 8)
    "thread_dependent_output_view": ("""\
    xs = load(x[base + thread_id : base + thread_id + 1], tv=(256, 1):(0, 0), mask=True)
    store(out[base + thread_id : base + thread_id + 1], xs, mask=True)
""", None),
    "store_under_thread_and_size_condition": ("""\
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    if base + thread_id < N:
        store(out[base : base + 256], xs, mask=True)
""", None),
    "where_mixes_thread_and_size": ("""\
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(out[base : base + 256], xs, mask=True, where=base + thread_id < N)
""", None),
    "wait_under_thread_condition": ("""\
    sx = shared(f32[256])
    copy_async(sx[0 : 256], x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    commit()
    if thread_id < 256:
        wait(0)
    barrier()
    v = load(sx[0 : 256], tv=(256, 1):(1, 1))
    store(out[base : base + 256], v, mask=True)
""", None),
    "broadcast_shared_layout": ("""\
    sx = shared(f32[2, 256], layout=(2, 256):(0, 1))
    xs = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    store(sx[0, 0 : 256], xs)
    barrier()
    v = load(sx[1, 0 : 256], tv=(256, 1):(1, 1))
    store(out[base : base + 256], v, mask=True)
""", ("uninitialised-read",)),
}
# sources handled before the verifier: the front end refuses the construct
FRONT_END = {
    "layout_changes_in_a_branch": ("""\
    v = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    if N > 5:
        v = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    store(out[base : base + 256], v, mask=True)
""", "cannot reassign it with another thread-value layout"),
    "layout_changes_in_a_loop": ("""\
    v = load(x[base : base + 256], tv=(256, 1):(1, 1), mask=True)
    for i in range(N):
        v = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    store(out[base : base + 256], v, mask=True)
""", "cannot reassign it with another thread-value layout"),
}


def kernel(name: str, body: str):
    return compile_source(HEAD.format(name=name) + body, f"{name}.arg")


def unknown_reasons(rep, obligation) -> list[str]:
    return [r.message for r in rep.unknowns() if r.obligation == obligation]


@pytest.mark.parametrize("case", list(SOURCES))
def test_source_of_unknown_is_reproduced_with_its_reason(case):
    body, obligation, reason = SOURCES[case]
    rep = smt.verify(kernel(case, body), timeout_s=TIMEOUT, checks=(obligation,))
    reasons = unknown_reasons(rep, obligation)
    assert any(reason in m for m in reasons), rep.render_text()
    assert rep.exit_code in (1, 3)



@pytest.mark.parametrize("case", list(HOPPER_SOURCES))
def test_hopper_source_of_unknown_is_reproduced_with_its_reason(case):
    text, checks, obligation, reason = HOPPER_SOURCES[case]
    k = compile_file(text) if isinstance(text, Path) else compile_source(text.format(name=case), f"{case}.arg")
    rep = smt.verify(k, timeout_s=TIMEOUT, checks=checks)
    assert any(reason in m for m in unknown_reasons(rep, obligation)), rep.render_text()
    assert not any(r.status == "proved" for r in rep.results if r.obligation == obligation)
    if case == "protocol_obligation_not_proved":  # the violation that the proof relied on is reported
        assert [r.obligation for r in rep.results if r.status == "violated"] == ["bulk-group"]

# whole kernels whose contract reads an input that no tag names: (text, obligation, reason)
CONTRACT_SOURCES = {
    # x[j] is read at the reduction's variable, so y's tag implies none for it (a bias b[j] beside
    # out[i, j] takes (*, j): tests/test_broadcast_tags.py)
    "contract_input_without_tag": ("""\
kernel {name}(A: f32[M, N], x: f32[N]) -> y: f32[M]:
    requires N <= 256
    grid(M)
    block(256)
    tag A[i, j] = (i, j)
    tag y[i] = (i,) once
    contract y[i] = sum(A[i, j] * x[j] for j)
    a = load(A[block_id.x : block_id.x + 1, 0 : 256], tv=(256, 256):(0, 1), mask=True)
    v = load(x[0 : 256], tv=(256, 256):(0, 1), mask=True)
    s = reduce_sum(a * reshape(v, 1, 256), axis=1)
    store(y[block_id.x : block_id.x + 1], reshape(s, 1), where=thread_id == 0)
""", "output-contract", "the contract reads x, which no tag names, so which of its elements reach y is not checked: "
        "declare tag x[j] = (*, j)"),
    # A and B are multiplied at the same k, and their tags star it: a kernel pairing A[i, k] with
    # B[k + 8, j] would carry these tags too (tests/test_paired_tags.py has that kernel)
    "contract_factor_pairing_untagged": ("""\
kernel {name}(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N]:
    requires K <= 16
    grid(cdiv(N, 16), cdiv(M, 16))
    block(256)
    tag A[i, k] = (i, *)
    tag B[k, j] = (*, j)
    tag C[i, j] = (i, j) once
    contract C[i, j] = sum(A[i, k] * B[k, j] for k)
    m0 = block_id.y * 16
    n0 = block_id.x * 16
    a = load(A[m0 : m0 + 16, 0 : 16], tv=((16, 16), 16):((0, 16), 1), mask=True)
    b = load(B[0 : 16, n0 : n0 + 16], tv=((16, 16), 16):((1, 0), 16), mask=True)
    acc = mma(a, b, zeros(f32[16, 16], tv=((16, 16), 1):((1, 16), 0)))
    store(C[m0 : m0 + 16, n0 : n0 + 16], acc, mask=True)
""", "output-contract", "the contract multiplies elements of A and B read at 'k', and the tag of A does not carry "
        "its index k"),
}


@pytest.mark.parametrize("case", list(CONTRACT_SOURCES))
def test_contract_source_of_unknown_is_reproduced_with_its_reason(case):
    text, obligation, reason = CONTRACT_SOURCES[case]
    rep = smt.verify(compile_source(text.format(name=case), f"{case}.arg"), timeout_s=TIMEOUT)
    assert any(reason in m for m in unknown_reasons(rep, obligation)), rep.render_text()
    assert rep.exit_code == 3


def test_solver_time_limit_is_named_with_its_value():
    rep = smt.verify(compile_file(ROOT / "specs" / "gemm_simt.arg"), timeout_s=0.001, checks=("output-contract",))
    assert any("solver gave up after 0.001 s" in m for m in unknown_reasons(rep, "output-contract")), rep.render_text()


def test_internal_error_is_unknown_never_proved(monkeypatch):
    from argus_verify.smt import analysis

    def broken(self, timeout_s):
        raise RuntimeError("boom")

    monkeypatch.setattr(analysis.Analysis, "finish", broken)
    rep = smt.verify(compile_file(ROOT / "specs" / "vecadd.arg"), timeout_s=TIMEOUT)
    assert rep.exit_code == 3 and rep.unknowns()
    # the contract obligations do not use the analysis (smt/coverage.py, smt/reduction_flow.py)
    independent = ("launch", "reduction-coverage", "reduction-operator", "padding")
    assert all(r.status == "unknown" for r in rep.results if r.obligation not in independent)
    assert all(r.message == "internal verifier error: RuntimeError: boom" for r in rep.unknowns())


def test_internal_error_in_the_contract_obligations_is_unknown_never_proved(monkeypatch):
    from argus_verify.smt.obligations import reductions

    def broken(kernel):
        raise RuntimeError("boom")

    monkeypatch.setattr(reductions, "Coverage", broken)
    rep = smt.verify(compile_file(ROOT / "specs" / "vecadd.arg"), timeout_s=TIMEOUT)
    mine = [r for r in rep.results if r.obligation in ("reduction-coverage", "reduction-operator", "padding")]
    assert mine and all(r.status == "unknown" for r in mine) and rep.exit_code == 3


@pytest.mark.parametrize("case", list(PROVED_NOW))
def test_lifted_source_is_proved(case):
    body, checks = PROVED_NOW[case]
    rep = smt.verify(kernel(case, body), timeout_s=TIMEOUT, checks=checks)
    assert rep.exit_code == 0 and not rep.unknowns(), rep.render_text()


@pytest.mark.parametrize("case", list(FRONT_END))
def test_source_handled_by_the_front_end(case):
    body, message = FRONT_END[case]
    with pytest.raises(ArgusError, match=re.escape(message)):
        kernel(case, body)


def test_docs_list_exactly_these_sources():
    text = (ROOT / "docs" / "verify.md").read_text()
    section = text.split("## Sources of unknown", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    cases = {*SOURCES, *HOPPER_SOURCES, *CONTRACT_SOURCES, *FRONT_END, SOLVER_LIMIT, INTERNAL_ERROR}
    assert listed == cases
