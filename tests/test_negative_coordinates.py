"""Masked accesses whose view starts before the tensor (`x[base - 1 : ...]`, a halo, a shift): the
verifier and the interpreter read `mask=True` as 0 <= c < extent, and so must the PTX. The lowering
once checked c < extent only, and these kernels read and wrote before their tensors on the GPU
(found by an outside probe). Each kernel is proved, assembles, and the PTX simulator, which faults
on any access outside a tensor, agrees with the interpreter and the reference."""

from __future__ import annotations

import pytest

from argus_verify import smt
from argus_verify.frontend import compile_source
from argus_verify.lowering.ptxas import assemble, ptxas_available
from argus_verify.reference import load_reference
from argus_verify.testing.check import Case, KernelFamily, run_case

KERNELS = {
    "negload": ("""
kernel negload<BLOCK=128>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    base = block_id.x * BLOCK
    xs = load(x[base - 1 : base - 1 + BLOCK], tv=(BLOCK, 1):(1, 0), mask=True)
    store(out[base : base + BLOCK], xs, mask=True)
""", "out = np.zeros(x.shape); out[1:] = x[:-1]", {"N": 300}),
    "negstore": ("""
kernel negstore<BLOCK=128>(x: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(BLOCK)
    base = block_id.x * BLOCK
    xs = load(x[base : base + BLOCK], tv=(BLOCK, 1):(1, 0), mask=True)
    store(out[base - 1 : base - 1 + BLOCK], xs, mask=True, where=base + thread_id < N)
    if block_id.x == 0:
        x0 = load(x[0 : 1], tv=(BLOCK, 1):(0, 0))
        store(out[N - 1 : N], x0, where=thread_id == 0)
""", "out = np.roll(x, -1).astype(np.float64)", {"N": 300}),
    "shiftrow": ("""
kernel shiftrow<COLS=128>(x: f32[M, N]) -> out: f32[M, N]:
    requires N <= COLS
    grid(M)
    block(32)
    r = block_id.x
    xs = load(x[r : r + 1, 0 - 2 : COLS - 2], tv=(32, 4):(4, 1), mask=True)
    store(out[r : r + 1, 0 : COLS], xs, mask=True)
""", "out = np.zeros(x.shape); out[:, 2:] = x[:, :-2]", {"M": 3, "N": 37}),
    # cp.async: element copies, and 16-byte runs (src-size zero-fills a run's tail, never its head)
    "shiftcp": ("""
kernel shiftcp<COLS=128, SHIFT=2>(x: f32[M, N]) -> out: f32[M, N]:
    requires N <= COLS
    grid(M)
    block(32)
    r = block_id.x
    s = shared(f32[1, COLS])
    copy_async(s, x[r : r + 1, 0 - SHIFT : COLS - SHIFT], tv=(32, 4):(4, 1), mask=True)
    commit()
    wait(0)
    barrier()
    xs = load(s, tv=(32, 4):(4, 1))
    store(out[r : r + 1, 0 : COLS], xs, mask=True)
""", "out = np.zeros(x.shape); out[:, SHIFT:] = x[:, :-SHIFT]", {"M": 3, "N": 37}),
}


def _write(tmp_path, name, consts=None):
    text, body, shapes = KERNELS[name]
    path = tmp_path / f"{name}.arg"
    path.write_text(text)
    shift = (consts or {}).get("SHIFT", 2)
    (tmp_path / f"{name}.ref.py").write_text(
        f"import numpy as np\nSHIFT = {shift}\nSHAPES = {shapes!r}\n\n\ndef reference(x):\n    {body}\n"
        "    return {'out': out}\n")
    return path


@pytest.mark.parametrize("name, consts", [("negload", {}), ("negstore", {}), ("shiftrow", {}),
                                          ("shiftcp", {"SHIFT": 2}), ("shiftcp", {"SHIFT": 4})])
def test_a_masked_access_before_the_tensor_stays_inside_it_in_the_ptx(tmp_path, name, consts):
    path = _write(tmp_path, name, consts)
    family = KernelFamily(str(path), consts=consts)
    k = family.get({})
    assert smt.verify(k.ir, jobs=1).exit_code == 0
    if ptxas_available():
        assemble(k.ptx)
    ref = load_reference(path)
    two_d = "M" in KERNELS[name][2]
    sizes = [{"M": 3, "N": 37}, {"M": 1, "N": 1}, {"M": 2, "N": 128}] if two_d else [{"N": 300}, {"N": 1}, {"N": 129}]
    for shape in sizes:
        assert run_case(family, Case(consts={}, sizes=shape, ptxsim=True), ref) == []


MIRROR = """
kernel mirror<C=128>(x: f32[M, N]) -> out: f32[M, N]:
    grid(M)
    block(C)
    r = block_id.x
    s = shared(f32[2, C])
    for c0 in range(0, N, C):
        b = (c0 // C) % 2
        xs = load(x[r : r + 1, c0 : c0 + C], tv=(C, 1):(1, 0), mask=True)
        store(s[b : b + 1, 0 : C], xs)
        barrier()
        m = C - 1 - thread_id
        ys = load(s[b : b + 1, m : m + 1], tv=(C, 1):(0, 0))
        store(out[r : r + 1, c0 + m : c0 + m + 1], ys * 2.0, mask=True)
"""


def test_a_shared_address_register_below_zero_wraps_in_the_simulator(tmp_path):
    """The lowering folds C - 1 - t into a register -4 t and an immediate +508 (`[%r + 508]`): the
    32-bit shared address wraps to the right byte, as on the GPU (the simulator once faulted)."""
    path = tmp_path / "mirror.arg"
    path.write_text(MIRROR)
    (tmp_path / "mirror.ref.py").write_text("SHAPES = {'M': 3, 'N': 300}\n\n\ndef reference(x):\n"
                                            "    return {'out': 2.0 * x}\n")
    family = KernelFamily(str(path))
    assert "+508]" in family.get({}).ptx
    assert run_case(family, Case(consts={}, sizes={"M": 3, "N": 300}, ptxsim=True), load_reference(path)) == []


NEGATIVE_QUOTIENT = """
kernel negdiv(x: f32[N], y: f32[D]) -> out: f32[N]:
    requires D == 24
    grid(cdiv(N, 3))
    block(96)
    tag x[i] = (i,)
    tag out[i] = (i,)
    base = block_id.x * 3
    slot = (thread_id - 12) // D
    w = thread_id // 24 - 1
    if slot >= 0 and thread_id % 24 == 0 and base + slot < N:
        v = load(x[base + w : base + w + 1], tv=(96, 1):(0, 0))
        store(out[base + slot : base + slot + 1], v)
"""


def test_a_negative_quotient_by_a_size_rounds_down_in_the_ptx(tmp_path):
    """`(thread_id - 12) // D` is -1 for threads 0..11 (floor division, as the verifier and the
    interpreter compute it). The PTX used `div.s32`, which gives 0: thread 0 passed `slot >= 0` and
    loaded x[-1] (an outside probe's false proof). Now the PTX simulator agrees with the interpreter."""
    path = tmp_path / "negdiv.arg"
    path.write_text(NEGATIVE_QUOTIENT)
    (tmp_path / "negdiv.ref.py").write_text("SHAPES = {'N': 30, 'D': 24}\n\n\ndef reference(x, y):\n"
                                           "    return {'out': x.copy()}\n")
    rep = smt.verify(compile_source(NEGATIVE_QUOTIENT, "negdiv.arg"), timeout_s=10, jobs=1)
    assert all(r.status in ("proved", "warning") for r in rep.results), [(r.obligation, r.status) for r in rep.results]
    family = KernelFamily(str(path))
    for n in (1, 3, 30):
        problems = run_case(family, Case(consts={}, sizes={"N": n, "D": 24}, ptxsim=True), load_reference(path))
        assert problems == [], problems
