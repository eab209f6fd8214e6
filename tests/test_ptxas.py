"""ptxas wrapper: real assembly of hand-written PTX (skipped without ptxas) plus report parsing."""

from __future__ import annotations

import pytest

from argus_verify.lowering.ptxas import (
    PtxasError,
    PtxStats,
    assemble,
    assemble_cubin,
    parse_report,
    ptxas_available,
)

needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas not found on PATH or $CUDA_HOME/bin")

# A block-stride loop (so ptxas keeps live registers): out[i] = in[i] + 1 for i = tid, tid+ntid, ... < n.
LOOP_PTX = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry add_one_loop(
    .param .u64 p_in,
    .param .u64 p_out,
    .param .u32 p_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [p_in];
    ld.param.u64 %rd2, [p_out];
    ld.param.u32 %r1, [p_n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %tid.x;
$L_loop:
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra $L_done;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd5], %f2;
    mov.u32 %r3, %ntid.x;
    add.u32 %r2, %r2, %r3;
    bra.uni $L_loop;
$L_done:
    ret;
}
"""

SMEM_BYTES = 1024

# Each thread writes tile[tid], barrier, then reads its neighbour tile[tid ^ 1].
SMEM_PTX = f"""\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry swap_neighbours(
    .param .u64 p_out
)
{{
    .reg .b32 %r<4>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 tile[{SMEM_BYTES}];

    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, tile;
    add.u32 %r3, %r3, %r2;
    cvt.rn.f32.u32 %f1, %r1;
    st.shared.f32 [%r3], %f1;
    bar.sync 0;
    xor.b32 %r2, %r2, 4;
    mov.u32 %r3, tile;
    add.u32 %r3, %r3, %r2;
    ld.shared.f32 %f1, [%r3];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f1;
    ret;
}}
"""

# Line 11 is an unknown instruction; line 12 uses an undeclared register.
BAD_PTX = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry broken(
    .param .u64 p
)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    bogus.op %rd1, %rd1;
    mov.u32 %r9, 1;
    ret;
}
"""


@needs_ptxas
def test_loop_kernel_stats() -> None:
    stats = assemble(LOOP_PTX)
    assert set(stats) == {"add_one_loop"}
    s = stats["add_one_loop"]
    assert isinstance(s, PtxStats)
    assert s.registers > 0
    assert s.shared_bytes == 0
    assert s.spill_stores == 0 and s.spill_loads == 0
    assert s.stack_frame == 0
    assert s.barriers == 0
    assert "add_one_loop" in s.raw


@needs_ptxas
def test_shared_kernel_stats_and_cubin() -> None:
    cubin, stats = assemble_cubin(SMEM_PTX, "sm_90a")
    assert cubin[:4] == b"\x7fELF"  # a cubin is an ELF image
    s = stats["swap_neighbours"]
    assert s.registers > 0
    assert s.shared_bytes == SMEM_BYTES
    assert s.barriers == 1
    assert s.spill_stores == 0 and s.spill_loads == 0


@needs_ptxas
def test_two_entries_in_one_module() -> None:
    both = SMEM_PTX + LOOP_PTX.split(".address_size 64\n", 1)[1]
    stats = assemble(both)
    assert set(stats) == {"add_one_loop", "swap_neighbours"}
    assert stats["swap_neighbours"].shared_bytes == SMEM_BYTES
    assert stats["add_one_loop"].shared_bytes == 0


@needs_ptxas
def test_invalid_ptx_reports_line() -> None:
    with pytest.raises(PtxasError) as info:
        assemble(BAD_PTX)
    err = info.value
    assert err.line == 11
    assert err.lines == (11, 12)
    assert "bogus" in err.stderr
    assert err.returncode not in (None, 0)


@needs_ptxas
def test_extra_flags_are_passed() -> None:
    # -O0 keeps the loop; stats must still parse. A bad flag must surface as PtxasError.
    assert assemble(LOOP_PTX, extra=("-O0",))["add_one_loop"].registers > 0
    with pytest.raises(PtxasError):
        assemble(LOOP_PTX, extra=("--no-such-flag",))


def test_bad_arch_rejected() -> None:
    with pytest.raises(ValueError):
        assemble(LOOP_PTX, arch="90a")


def test_missing_ptxas_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from argus_verify.lowering import ptxas as mod
    monkeypatch.setattr(mod, "find_ptxas", lambda: None)
    assert not mod.ptxas_available()
    with pytest.raises(PtxasError):
        mod.assemble(LOOP_PTX)


def test_find_ptxas_uses_cuda_home(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from argus_verify.lowering import ptxas as mod
    fake = tmp_path / "bin" / "ptxas"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert mod.find_ptxas() == str(fake)


# Older ptxas (CUDA 12.x) format, with cmem, spills and a non-entry .func in between.
OLD_REPORT = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
ptxas info    : Function properties for gemm
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 48 bytes cumulative stack size, \
49152 bytes smem, 384 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Function properties for helper
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'tiny' for 'sm_90a'
ptxas info    : Function properties for tiny
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 360 bytes cmem[0]
ptxas /tmp/k.ptx, line 3; warning : Double is not supported. Demoting to float
"""


def test_parse_old_report_format() -> None:
    stats = parse_report(OLD_REPORT)
    assert set(stats) == {"gemm", "tiny"}
    g = stats["gemm"]
    assert (g.registers, g.shared_bytes, g.barriers) == (255, 49152, 1)
    assert (g.stack_frame, g.spill_stores, g.spill_loads) == (48, 40, 36)
    assert g.cmem == "384 bytes cmem[0], 8 bytes cmem[2]"
    t = stats["tiny"]
    assert (t.registers, t.shared_bytes, t.barriers, t.stack_frame) == (8, 0, 0, 0)
    assert t.cmem == "360 bytes cmem[0]"
    assert t.warnings == ("line 3: Double is not supported. Demoting to float",)


def test_error_parsing_without_ptxas() -> None:
    stderr = (
        "ptxas /tmp/argus-ptxas-x/kernel.ptx, line 40; error   : Unknown symbol 'x'\n"
        "ptxas /tmp/argus-ptxas-x/kernel.ptx, line 7; warning : something\n"
        "ptxas /tmp/argus-ptxas-x/kernel.ptx, line 40; error   : Arguments mismatch for instruction 'mov'\n"
        "ptxas /tmp/argus-ptxas-x/kernel.ptx, line 52; error   : Unknown symbol 'y'\n"
        "ptxas fatal   : Ptx assembly aborted due to errors\n"
    )
    err = PtxasError("ptxas failed", stderr, 255)
    assert err.line == 40
    assert err.lines == (40, 52)
    assert [d.severity for d in err.diagnostics] == ["error", "warning", "error", "error", "fatal"]
    assert err.diagnostics[-1].line is None
    assert "Unknown symbol 'x'" in str(err)
