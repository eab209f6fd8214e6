#!/usr/bin/env python3
"""Which way of launching a kernel that takes TMA tensor maps gives the right answer on the GPU:
`python bench/tma_launch_check.py VARIANT [SPEC] [MxNxK]`, VARIANT one of

  driver-ptx    cuda-python cuModuleLoadData(PTX) + cuLaunchKernel(kernelParams) (what `argus run` uses)
  driver-cubin  the same with the cubin of the local ptxas
  pycuda-cubin  PyCUDA with the maps as 128-byte by-value arguments (one packed parameter buffer), cubin
  pycuda-ptx    the same, PTX JIT-compiled by the driver

Prints one line: the variant, the relative error against float64 and the NaN count. One variant per
process: a launch that goes wrong must not leave the next one a broken context."""

from __future__ import annotations

import sys

import numpy as np


def main() -> int:
    variant = sys.argv[1]
    spec = sys.argv[2] if len(sys.argv) > 2 else "specs/hopper/gemm_bf16_wgmma.arg"
    m, n, k = (int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "257x264x200").split("x"))
    from argus_verify import ir
    from argus_verify.frontend import compile_file
    from argus_verify.pipeline import gpu_program
    from argus_verify.runtime import cuda, cuda_backend
    from argus_verify.runtime.tma import DriverProgram, encode_tensor_map, param_buffers
    from argus_verify.semantics import round_to

    kernel = compile_file(spec)
    program = gpu_program(kernel)
    sizes = {"M": m, "N": n, "K": k}
    rng = np.random.default_rng(0)
    a = round_to(rng.standard_normal((m, k)).astype(np.float32), "bf16")
    b = round_to(rng.standard_normal((k, n)).astype(np.float32), "bf16")
    shapes = ir.tensor_shapes(kernel, sizes)
    cuda.ensure_context()
    host = cuda_backend._host_sets(kernel, {"A": a, "B": b}, shapes)
    bufs = cuda.DeviceBuffers(host, upload=False)
    bufs.copy_in("A")
    bufs.copy_in("B")
    bufs.poison("C")
    grid = cuda_backend.grid_of(kernel, sizes)
    addresses = {name: int(bufs[name]) for name in bufs}
    if variant.startswith("driver"):
        prog = DriverProgram(program, cubin=variant == "driver-cubin")
        prog.launch(grid, param_buffers(program, addresses, sizes, shapes))
    else:
        image = program.cubin if variant == "pycuda-cubin" else program.ptx
        func = cuda.CudaModule(image).function(program.entry)
        cuda.CudaModule.set_max_dynamic_shared(func, program.dynamic_shared_bytes)
        maps = {t.param: t for t in program.tmaps}
        args = []
        for p in program.params:
            if p.kind == "tmap":
                t = maps[p.name]
                raw = encode_tensor_map(t, addresses[t.tensor], *shapes[t.tensor])
                args.append(np.frombuffer(raw, dtype=np.dtype((np.void, 128)))[0])
            elif p.kind == "tensor":
                args.append(bufs[p.name])
            else:
                args.append(np.uint32(sizes[p.name]))
        func(*args, grid=grid, block=(program.block, 1, 1), shared=program.dynamic_shared_bytes)
    cuda._drv().Context.synchronize()
    c = cuda_backend.from_device_array(bufs.copy_out("C"), kernel.param("C").dtype).reshape(m, n)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.linalg.norm(np.nan_to_num(c, nan=1e30) - ref) / np.linalg.norm(ref))
    print(f"{variant} {spec} {m}x{n}x{k}: rel err {err:.2e}, NaN {int(np.isnan(c).sum())}", flush=True)
    return 0 if err < 4e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
