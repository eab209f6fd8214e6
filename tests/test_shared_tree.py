"""A reduction tree unrolled over shared memory (`s[t] = s[t] + s[t + h]` under `if t < h`, for h =
32, 16, ..., 1), as hand-written CUDA does it (an outside probe's r43). Every level's store
overwrites the previous level's slot, but the general resolution followed each read into every
earlier level's store and its two reads: the terms grew exponentially with the depth and the tag
queries gave up (unknown). Now the write statements that are never a read's last writer are
dropped once, by a tag-free query per statement (smt/last_writer.py `never_last`), and the tree is
proved; a wrong offset or a missing barrier stays a violation."""

from __future__ import annotations

import pytest

from argus_verify import ir, smt
from argus_verify.frontend import compile_source
from argus_verify.smt.analysis import Analysis

HEAD = """
kernel tree(x: f32[M, N]) -> out: f32[M]:
    requires N <= 256
    grid(M)
    block({T})
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = sum(x[i, j] for j)
    row = block_id.x
    xs = load(x[row : row + 1, 0 : 256], tv=({T}, {V}):(1, {T}), mask=True)
    sdata = shared(f32[1, {T}])
    store(sdata[0 : 1, thread_id : thread_id + 1], reduce_sum(reduce_sum(xs, axis=1), axis=1))
    barrier()
"""
LEVEL = """    if thread_id < {h}:
        a = load(sdata[0 : 1, thread_id : thread_id + 1], tv=({T}, 1):(0, 0))
        b = load(sdata[0 : 1, thread_id + {o} : thread_id + {o} + 1], tv=({T}, 1):(0, 0))
        store(sdata[0 : 1, thread_id : thread_id + 1], a + b)
{barrier}"""
TAIL = """    r = load(sdata[0 : 1, 0 : 1], tv=({T}, 1):(0, 0))
    store(out[row : row + 1], reshape(r, 1), where=thread_id == 0)
"""


def tree(offset=lambda h: h, barrier=lambda h: True, threads=64) -> str:
    """log2(threads) levels, h = threads / 2 .. 1."""
    halves = [threads >> k for k in range(1, threads.bit_length())]
    levels = [LEVEL.format(T=threads, h=h, o=offset(h), barrier="    barrier()\n" if barrier(h) else "")
              for h in halves]
    return HEAD.format(T=threads, V=256 // threads) + "".join(levels) + TAIL.format(T=threads)


def statuses(text: str) -> dict:
    rep = smt.verify(compile_source(text, "k.arg"), timeout_s=10, jobs=1)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


def test_the_unrolled_tree_is_proved():
    got = statuses(tree())
    assert all(s <= {"proved", "warning"} for s in got.values()), got


@pytest.mark.parametrize(("text", "obligation"), [
    (tree(offset=lambda h: h // 2 if h == 8 else h), "reduction-coverage"),  # s[t + 4] where s[t + 8] is meant
    (tree(barrier=lambda h: h != 16), "race"),  # the level of 8 reads what the level of 16 may still write
])
def test_a_broken_tree_is_a_violation(text, obligation):
    assert "violated" in statuses(text)[obligation]


def test_the_writers_a_read_never_sees_are_dropped():
    """For the threads that run it, each read of level h sees the store of the level before (the
    first level: the initial store), the final read the last level's: one writer each."""
    an = Analysis(compile_source(tree(), "k.arg"), None)
    an.finish(10)
    writes, reads = an.sh_writes["sdata"], an.sh_reads["sdata"]
    assert len(writes) == 7 and len(reads) == 13
    for rd in reads:
        kept = [W for W in writes if id(W) not in an.never_last[id(rd)]]
        assert len(kept) == 1, rd.node.span.line


def test_a_tree_of_seven_levels_is_proved():
    got = statuses(tree(threads=128))
    assert all(s <= {"proved", "warning"} for s in got.values()), got


LOOP_TREE = """
kernel looptree(x: f32[M, N]) -> out: f32[M]:
    requires N <= 256
    grid(M)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = {contract}(x[i, j] for j)
    row = block_id.x
    s = shared(f32[1, 256])
    xs = load(x[row : row + 1, 0 : 256], tv=(256, 1):(1, 0), mask=True, other={pad})
    store(s, xs)
    barrier()
    for k in range(8):
        h = 128 >> k
        if thread_id < h:
            a = load(s[0 : 1, thread_id : thread_id + 1], tv=(256, 1):(0, 0))
            b = load(s[0 : 1, thread_id + h : thread_id + h + 1], tv=(256, 1):(0, 0))
            store(s[0 : 1, thread_id : thread_id + 1], {combine})
        barrier()
    t = load(s[0 : 1, 0 : 1], tv=(256, 1):(0, 0))
    store(out[row : row + 1], reshape(t, 1), where=thread_id == 0)
"""


@pytest.mark.parametrize(("contract", "combine", "pad", "want"), [
    ("sum", "a + b", "0.0", "unknown"),  # a tree in a loop: not counted as a sum, so not a proof either way
    ("max", "max(a, b)", "-inf", "unknown"),
    ("sum", "a * b", "0.0", "violated"),  # no sum anywhere: the contract's sum is not computed
])
def test_a_tree_in_a_loop_is_not_called_a_missing_reduction(contract, combine, pad, want):
    """An outside probe's r1 (the classic tree with `h = 128 >> k`) was violated: "the contract's sum
    over x's dimension 1 is not computed", on a correct kernel. Elements of the reduced dimension
    combined by `+` (max, min) of two shared slots may be that reduction: unknown, not violated."""
    from argus_verify.smt.obligations.reductions import _flow_results

    kernel = compile_source(LOOP_TREE.format(contract=contract, combine=combine, pad=pad), "k.arg")
    results = _flow_results(kernel, kernel.contracts[0].span, 10)
    got = {r.status for r in results if r.obligation == "reduction-operator"}
    assert got == {want}, got


# The same tree written as a loop (`for k in range(1, L): h = T >> k`), as CUDA's classic reduction
# does it: coverage did not follow shared memory between iterations (unknown after 111 s). The
# verifier now unrolls such small constant-trip loops (smt/unroll.py) into the tree above.
LOOP = HEAD + """    for k in range(1, {levels}):
        h = {T} >> k
        if thread_id < h:
            a = load(sdata[0 : 1, thread_id : thread_id + 1], tv=({T}, 1):(0, 0))
            b = load(sdata[0 : 1, thread_id + h : thread_id + h + 1], tv=({T}, 1):(0, 0))
            store(sdata[0 : 1, thread_id : thread_id + 1], a + b)
        barrier()
""" + TAIL


def loop_tree(threads=128, levels=None, **edits) -> str:
    text = LOOP.format(T=threads, V=256 // threads, levels=levels or threads.bit_length())
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    return text


def test_the_tree_in_a_loop_is_proved():
    got = statuses(loop_tree())
    assert all(s <= {"proved", "warning"} for s in got.values()), got


@pytest.mark.parametrize(("text", "obligation"), [
    (loop_tree(levels=7), "reduction-coverage"),  # one level short: s[0] + s[1] never combined
    (loop_tree(**{"thread_id + h : thread_id + h + 1": "thread_id + h + 1 : thread_id + h + 2"}), "bounds"),
    (loop_tree(**{"if thread_id < h:": "if thread_id <= h:"}), "race"),
])
def test_a_broken_tree_in_a_loop_is_a_violation(text, obligation):
    assert "violated" in statuses(text)[obligation]


def test_the_unrolled_copies_are_new_statements_with_the_level_as_a_constant():
    from argus_verify.smt.unroll import unroll_shared_loops

    k = compile_source(loop_tree(), "k.arg")
    u = unroll_shared_loops(k)
    assert not any(isinstance(s, ir.For) for s in ir.walk_stmts(u.body))
    lets = [s.value for s in ir.walk_stmts(u.body) if isinstance(s, ir.Let) and s.name == "h"]
    assert [ir.eval_int(v, {}) for v in lets] == [64, 32, 16, 8, 4, 2, 1]
    stmts = list(ir.walk_stmts(u.body))
    assert len({id(s) for s in stmts}) == len(stmts)
    # a loop without a barrier between its levels, or with a size for a bound, stays a loop
    for edits in ({"        barrier()\n": ""}, {"range(1, 8)": "range(1, N)"}):
        k = compile_source(loop_tree(**edits), "k.arg")
        assert unroll_shared_loops(k) is k
