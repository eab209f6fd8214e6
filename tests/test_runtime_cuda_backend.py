"""The GPU path without a GPU: argus_verify.pipeline lowers and assembles a kernel into the data the
runtime launches (runtime.cuda_backend.GpuProgram), and the runtime passes its arguments in the
program's parameter order. A fake driver runs each launch in the interpreter, so the whole path
(inputs up, poison, launch arguments, grid, outputs down) is checked against a plain interpreter run.
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import numpy as np
import pytest

from argus_verify import ir, pipeline
from argus_verify.frontend import compile_source
from argus_verify.lowering import ptxas
from argus_verify.reference import make_inputs
from argus_verify.runtime import cuda, cuda_backend
from argus_verify.runtime.interp import run

_spec = importlib.util.spec_from_file_location("argus_backend_kernels", Path(__file__).with_name("gpu") / "kernels.py")
KERNELS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(KERNELS)
SAXPY = KERNELS.SAXPY  # scalar, tensor and size parameters


class FakeGpu:
    """Device buffers are host copies; a launch decodes its arguments by the program's parameters
    and runs the kernel in the interpreter."""

    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.images: list = []
        self.launches: list = []
        self.buffers = None
        gpu = self

        class Buffers:
            def __init__(self, host, upload=True):
                self.host = {k: np.array(v, copy=True) for k, v in host.items()}
                gpu.buffers = self

            def __getitem__(self, name):
                return ("device", name)

            def copy_in(self, name):
                pass

            def poison(self, *names):
                for n in names:
                    self.host[n].reshape(-1).view(np.uint8)[:] = 0xFF

            def copy_out(self, name):
                return self.host[name].copy()

            def free(self):
                pass

        class Module:
            def __init__(self, image):
                gpu.images.append(image)

            def function(self, entry):
                return entry

        self.Buffers, self.Module = Buffers, Module

    def launch(self, function, grid, block, args, shared_bytes=0):
        self.launches.append((function, grid, block, args, shared_bytes))
        program = next(iter(cuda_backend._LOADED.values())).program
        host = self.buffers.host
        tensors, sizes, scalars = {}, {}, {}
        for p, a in zip(program.params, args, strict=True):
            if p.kind == "tensor":
                assert a == ("device", p.name)
                tensors[p.name] = host[p.name]
            elif p.kind == "size":
                assert isinstance(a, np.uint32)
                sizes[p.name] = int(a)
            else:
                scalars[p.name] = a
        outputs = run(self.kernel, {t.name: tensors[t.name] for t in self.kernel.inputs}, sizes, scalars)
        for name, value in outputs.items():
            host[name][...] = value

    def install(self, monkeypatch):
        monkeypatch.setattr(cuda, "DeviceBuffers", self.Buffers)
        monkeypatch.setattr(cuda, "CudaModule", self.Module)
        monkeypatch.setattr(cuda, "launch", self.launch)
        monkeypatch.setattr(cuda, "_drv", lambda: types.SimpleNamespace(Context=types.SimpleNamespace(
            synchronize=lambda: None)))
        monkeypatch.setattr(cuda_backend, "_LOADED", {})


def test_gpu_program_carries_what_the_runtime_needs():
    kernel = compile_source(SAXPY, "saxpy.arg")
    program = pipeline.gpu_program(kernel)
    assert program.entry in program.ptx and program.block == 256 and program.dynamic_shared_bytes == 0
    assert [(p.name, p.kind) for p in program.params] == [("x", "tensor"), ("y", "tensor"), ("out", "tensor"),
                                                          ("N", "size"), ("alpha", "scalar")]
    assert (program.cubin is not None) == ptxas.ptxas_available()
    assert pipeline.gpu_program(kernel) is program  # lowered again, assembled once
    assert cuda_backend.grid_of(kernel, {"N": 5000}) == (5, 1, 1)


def test_the_gpu_path_launches_in_parameter_order(monkeypatch):
    kernel = compile_source(SAXPY, "saxpy.arg")
    gpu = FakeGpu(kernel)
    gpu.install(monkeypatch)
    sizes = {"N": 3001}
    inputs = make_inputs(kernel, sizes, np.random.default_rng(0))
    scalars = {"alpha": inputs.pop("alpha")}
    out = pipeline.run_cuda(kernel, inputs, sizes, scalars)["out"]
    np.testing.assert_array_equal(out, run(kernel, inputs, sizes, scalars)["out"])
    ((function, grid, block, args, shared),) = gpu.launches
    assert (function, grid, block, shared) == (pipeline.gpu_program(kernel).entry, (3, 1, 1), (256, 1, 1), 0)
    assert isinstance(args[-1], np.float32)
    with pytest.raises(ValueError, match="size N=0"):
        pipeline.run_cuda(kernel, inputs, {"N": 0}, scalars)


def test_tensors_past_32_bit_indexing_are_refused_before_launch():
    """The generated code indexes tensors with 32-bit integers: a tensor of 2**31 elements or more
    is refused with a clear message, every size being in range (translation validation found the
    wrap of `row * N` in reduce_sum)."""
    kernel = compile_source((Path(__file__).resolve().parents[1] / "specs" / "reduce_sum.arg").read_text(),
                            "reduce_sum.arg")
    assert cuda_backend.check_sizes(kernel, {"M": 2**15, "N": 2**15}, {}) == {"M": 2**15, "N": 2**15}
    with pytest.raises(ValueError, match="32-bit integers"):
        cuda_backend.check_sizes(kernel, {"M": 2**16, "N": 2**15}, {})


def test_a_grid_past_what_cuda_launches_is_refused_before_launch():
    text = (Path(__file__).resolve().parents[1] / "specs" / "xor_swizzle_transpose.arg").read_text()
    kernel = compile_source(text.replace("    requires M <= 65535 * T", "    requires M >= 1"), "x.arg")
    assert cuda_backend.check_sizes(kernel, {"M": 65535 * 16, "N": 16}, {})
    with pytest.raises(ValueError, match="65536 blocks along y; CUDA launches at most 65535"):
        cuda_backend.check_sizes(kernel, {"M": 65536 * 16, "N": 16}, {})
