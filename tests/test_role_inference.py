"""`if thread_id < 128` in a 256-thread block selects whole warpgroups, so it was always taken for a
warpgroup role, whose fragments span the role's 128 threads. The classic shared-memory tree means it
per thread, with block-wide fragments, and was rejected by the front end (an outside probe's note).
Now such a split stays a role unless a block-wide fragment (or an elif) inside it says otherwise;
a condition naming warpgroup_id is always a role."""

from __future__ import annotations

import pytest

from argus_verify import roles, smt
from argus_verify.diagnostics import ArgusTypeError
from argus_verify.frontend import compile_source
from argus_verify.lowering.ptxas import assemble, ptxas_available
from argus_verify.reference import load_reference
from argus_verify.testing.check import Case, KernelFamily, run_case

TREE = """
kernel tree(x: f32[M, N]) -> out: f32[M]:
    requires N <= 256
    grid(M)
    block(256)
    tag x[i, j] = (i, j)
    tag out[i] = (i,) once
    contract out[i] = sum(x[i, j] for j)
    row = block_id.x
    xs = load(x[row : row + 1, 0 : 256], tv=(256, 1):(1, 256), mask=True)
    sdata = shared(f32[1, 256])
    store(sdata[0 : 1, thread_id : thread_id + 1], reduce_sum(reduce_sum(xs, axis=1), axis=1))
    barrier()
    if COND128:
        a = load(sdata[0 : 1, thread_id : thread_id + 1], tv=(256, 1):(0, 0))
        b = load(sdata[0 : 1, thread_id + 128 : thread_id + 129], tv=(256, 1):(0, 0))
        store(sdata[0 : 1, thread_id : thread_id + 1], a + b)
    barrier()
    if thread_id < 64:
        a = load(sdata[0 : 1, thread_id : thread_id + 1], tv=(256, 1):(0, 0))
        b = load(sdata[0 : 1, thread_id + 64 : thread_id + 65], tv=(256, 1):(0, 0))
        store(sdata[0 : 1, thread_id : thread_id + 1], a + b)
    barrier()
    r = load(sdata[0 : 1, 0 : 64], tv=(256, 64):(0, 1))
    store(out[row : row + 1], reshape(reduce_sum(r, axis=1), 1), where=thread_id == 0)
"""
GOOD = TREE.replace("COND128", "thread_id < 128")


def statuses(text: str) -> dict:
    rep = smt.verify(compile_source(text, "tree.arg"), timeout_s=10, jobs=1)
    out: dict = {}
    for r in rep.results:
        out.setdefault(r.obligation, set()).add(r.status)
    return out


@pytest.mark.parametrize("cond", ["thread_id < 128", "thread_id // 128 == 0", "128 > thread_id"])
def test_a_per_thread_tree_level_over_whole_warpgroups_is_an_ordinary_branch(cond):
    k = compile_source(TREE.replace("COND128", cond), "tree.arg")
    assert roles.roles(k) == []
    got = statuses(TREE.replace("COND128", cond))
    assert all(s <= {"proved", "warning"} for s in got.values()), got


def test_the_tree_computes_the_row_sums(tmp_path):
    path = tmp_path / "tree.arg"
    path.write_text(GOOD)
    (tmp_path / "tree.ref.py").write_text("import numpy as np\nSHAPES = {'M': 3, 'N': 200}\n\n\n"
                                          "def reference(x):\n    return {'out': x.sum(axis=1)}\n")
    family = KernelFamily(str(path))
    if ptxas_available():
        assemble(family.get({}).ptx)
    for shape in ({"M": 3, "N": 200}, {"M": 1, "N": 1}, {"M": 2, "N": 256}):
        assert run_case(family, Case(consts={}, sizes=shape, ptxsim=True), load_reference(path)) == []


@pytest.mark.parametrize(("old", "new", "obligation"), [
    ("thread_id + 64 : thread_id + 65", "thread_id + 32 : thread_id + 33", "reduction-coverage"),
    ("    barrier()\n    if thread_id < 64:", "    if thread_id < 64:", "race"),
])
def test_a_broken_per_thread_tree_is_still_a_violation(old, new, obligation):
    assert old in GOOD
    assert "violated" in statuses(GOOD.replace(old, new))[obligation]


def test_a_split_naming_warpgroup_id_is_always_a_role():
    with pytest.raises(ArgusTypeError, match="spans 256 threads but the role") as e:
        compile_source(TREE.replace("COND128", "warpgroup_id == 0"), "tree.arg")
    assert e.value.span.line == 15


def test_a_split_whose_fragments_span_the_role_stays_a_role():
    level = """        a = load(sdata[0 : 1, thread_id : thread_id + 1], tv=(256, 1):(0, 0))
        b = load(sdata[0 : 1, thread_id + 128 : thread_id + 129], tv=(256, 1):(0, 0))
        store(sdata[0 : 1, thread_id : thread_id + 1], a + b)"""
    assert level in GOOD
    text = GOOD.replace(level, level.replace("(256, 1)", "(128, 1)").replace("a = ", "a1 = ")
                        .replace("b = ", "b1 = ").replace("a + b", "a1 + b1"))
    k = compile_source(text, "tree.arg")
    assert [r.warpgroups for r in roles.roles(k)] == [(0,), (1,)]


def test_mixed_spans_name_the_fragment_that_fits_neither():
    text = GOOD.replace("thread_id + 129], tv=(256, 1):(0, 0))", "thread_id + 129], tv=(128, 1):(0, 0))")
    with pytest.raises(ArgusTypeError, match="spans 128 threads but the block has 256") as e:
        compile_source(text, "tree.arg")
    assert e.value.span.line == 16


def test_an_elif_on_whole_warpgroups_is_an_ordinary_branch():
    text = GOOD.replace("    barrier()\n    if thread_id < 64:", """    barrier()
    if thread_id < 128:
        pass
    elif thread_id < 256:
        q = load(sdata[0 : 1, thread_id : thread_id + 1], tv=(256, 1):(0, 0))
    barrier()
    if thread_id < 64:""", 1)
    got = statuses(text)
    assert all(s <= {"proved", "warning"} for s in got.values()), got
