"""Tensor maps and launches of kernels that take them, through NVIDIA's cuda-python driver binding.

A kernel lowered with TMA loads takes, before its other parameters, one 128-byte tensor map per
distinct box (`LoweredKernel.tmaps`). `encode_tensor_map` builds each from the tensor's device
address and sizes with `cuda.bindings.driver.cuTensorMapEncodeTiled` (the `cuda` extra: never a
hand-packed map); elements outside the tensor read as zero. `TmaKernel` loads the PTX and launches
it with every parameter passed by pointer, so the driver lays them out by the entry's own
declaration. Device arrays are torch tensors (the primary context, torch's current stream).

cuda-python is imported lazily: importing this module needs neither it nor a GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError

TMAP_BYTES = 128


class TmaError(RuntimeError):
    pass


class TmaUnavailable(ArgusError):
    """The kernel takes tensor maps and NVIDIA's cuda-python, which builds them, is not installed."""


def _driver():
    try:
        try:
            from cuda.bindings import driver
        except ImportError:  # older cuda-python
            from cuda import cuda as driver  # type: ignore[no-redef]
    except ImportError:
        raise TmaUnavailable("this kernel takes TMA tensor maps, which Argus builds with NVIDIA's cuda-python "
                             "(cuTensorMapEncodeTiled): install it (pip install 'argus-verify[cuda]' or "
                             "pip install cuda-python)") from None
    return driver


def _check(res, what: str):
    err, *rest = res if isinstance(res, tuple) else (res,)
    drv = _driver()
    if err != drv.CUresult.CUDA_SUCCESS:
        raise TmaError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


_DTYPES = {"bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
           "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"}
_SWIZZLE = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B", 64: "CU_TENSOR_MAP_SWIZZLE_64B",
            128: "CU_TENSOR_MAP_SWIZZLE_128B"}


def encode_tensor_map(spec, address: int, rows: int, cols: int) -> bytes:
    """The 128 bytes of a tensor map over a row-major [rows, cols] tensor at `address`, moving
    boxes of spec.box_rows x spec.box_cols with spec.swizzle; out-of-bounds elements read zero."""
    drv = _driver()
    esize = ir.DTYPE_BYTES[spec.dtype]
    if (cols * esize) % ir.TMA_ROW_BYTES:
        raise TmaError(f"TMA needs row strides of a multiple of {ir.TMA_ROW_BYTES} bytes: {spec.tensor} has rows "
                       f"of {cols * esize}")
    u32, u64 = drv.cuuint32_t, drv.cuuint64_t  # the binding takes its own integer types here
    tmap = _check(drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, _DTYPES[spec.dtype]), u32(2), address,
        [u64(cols), u64(rows)], [u64(cols * esize)], [u32(spec.box_cols), u32(spec.box_rows)], [u32(1), u32(1)],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, _SWIZZLE[spec.swizzle]),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), f"cuTensorMapEncodeTiled({spec.tensor})")
    opaque = getattr(tmap, "opaque", None)
    if opaque is not None:
        return np.asarray(list(opaque), dtype=np.uint64).tobytes()
    return ctypes.string_at(int(tmap.getPtr()), 128)


_SCALAR_C = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i32": ctypes.c_int32, "u32": ctypes.c_uint32,
             "i64": ctypes.c_int64, "u64": ctypes.c_uint64}


def param_buffers(program, addresses: Mapping[str, int], sizes: Mapping[str, int], shapes: Mapping[str, tuple],
                  scalars: Mapping | None = None) -> tuple:
    """(buffers, pointer array) of one launch of `program` (a GpuProgram or LoweredKernel) that
    takes tensor maps: every parameter in its own ctypes buffer, in `program.params` order, the
    maps encoded over the tensors at device `addresses` with `shapes`."""
    scalars = scalars or {}
    maps = {m.param: m for m in program.tmaps}
    bufs = []
    for p in program.params:
        if p.kind == "tmap":
            m = maps[p.name]
            rows, cols = shapes[m.tensor]
            raw = encode_tensor_map(m, int(addresses[m.tensor]), int(rows), int(cols))
            buf = (ctypes.c_uint8 * TMAP_BYTES).from_buffer_copy(raw)
        elif p.kind == "tensor":
            buf = ctypes.c_uint64(int(addresses[p.name]))
        elif p.kind == "size":
            buf = ctypes.c_uint32(int(sizes[p.name]))
        elif p.dtype in _SCALAR_C and p.name in scalars:
            buf = _SCALAR_C[p.dtype](scalars[p.name])
        else:
            raise TmaError(f"scalar parameter {p.name} ({p.dtype}): no value, or not passable yet")
        bufs.append(buf)
    ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
    return bufs, ptrs


_DRIVER_PROGRAMS: dict = {}


class DriverProgram:
    """A GpuProgram that takes tensor maps, loaded through the driver API (cuda-python) into the
    context current on this thread, and launched with every parameter passed by pointer (the
    driver lays them out by the entry's declaration), as `TmaKernel` does on torch tensors. The
    image is the PTX (JIT-compiled by the driver) unless `cubin` is asked for."""

    def __init__(self, program, cubin: bool = False):
        drv = _driver()
        self.program = program
        data = program.cubin if cubin and program.cubin is not None else program.ptx.encode() + b"\0"
        self.module = _check(drv.cuModuleLoadData(data), "cuModuleLoadData")
        self.func = _check(drv.cuModuleGetFunction(self.module, program.entry.encode()), "cuModuleGetFunction")
        if program.dynamic_shared_bytes:
            _check(drv.cuFuncSetAttribute(
                self.func, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                program.dynamic_shared_bytes), "cuFuncSetAttribute")

    @classmethod
    def of(cls, program) -> DriverProgram:
        """The program loaded once per process (the context is the device's primary one)."""
        hit = _DRIVER_PROGRAMS.get(program.ptx)
        if hit is None:
            hit = _DRIVER_PROGRAMS[program.ptx] = cls(program)
        return hit

    def launch(self, grid: tuple, prepared: tuple, stream: int = 0) -> None:
        drv = _driver()
        _, ptrs = prepared
        gx, gy, gz = (int(g) for g in grid)
        _check(drv.cuLaunchKernel(self.func, gx, gy, gz, self.program.block, 1, 1,
                                  self.program.dynamic_shared_bytes, stream, ctypes.addressof(ptrs), 0),
               "cuLaunchKernel")


class TmaKernel:
    """A lowered kernel loaded into the current (primary) context, launched with tensor maps."""

    def __init__(self, lowered, image: bytes | None = None):
        import torch

        torch.cuda.init()
        torch.zeros(1, device="cuda")  # make the primary context current
        drv = _driver()
        self.lk = lowered
        data = image if image is not None else lowered.ptx.encode() + b"\0"
        self.module = _check(drv.cuModuleLoadData(data), "cuModuleLoadData")
        self.func = _check(drv.cuModuleGetFunction(self.module, lowered.entry.encode()), "cuModuleGetFunction")
        if lowered.dynamic_shared_bytes:
            _check(drv.cuFuncSetAttribute(
                self.func, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                lowered.dynamic_shared_bytes), "cuFuncSetAttribute")
        self._keep: list = []

    def registers(self) -> int:
        drv = _driver()
        return int(_check(drv.cuFuncGetAttribute(drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, self.func),
                          "cuFuncGetAttribute"))

    def prepare(self, tensors: Mapping, sizes: Mapping[str, int]):
        """The parameter buffers for one launch on torch tensors `tensors` (by name)."""
        lk = self.lk
        shapes = ir.tensor_shapes(lk.kernel, dict(sizes))
        bufs = []
        tmaps = {m.param: m for m in lk.tmaps}
        for p in lk.params:
            if p.kind == "tmap":
                m = tmaps[p.name]
                rows, cols = shapes[m.tensor]
                raw = encode_tensor_map(m, int(tensors[m.tensor].data_ptr()), rows, cols)
                buf = (ctypes.c_uint8 * 128).from_buffer_copy(raw)
            elif p.kind == "tensor":
                buf = ctypes.c_uint64(int(tensors[p.name].data_ptr()))
            elif p.kind == "size":
                buf = ctypes.c_uint32(int(sizes[p.name]))
            else:
                raise TmaError(f"scalar parameter {p.name}: not supported by the TMA launcher yet")
            bufs.append(buf)
        ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
        return bufs, ptrs

    def launch(self, prepared, sizes: Mapping[str, int], stream: int | None = None) -> None:
        import torch

        drv = _driver()
        bufs, ptrs = prepared
        gx, gy, gz = self.lk.grid(sizes)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        cluster = self.lk.kernel.cluster
        if cluster != (1, 1, 1):
            launch_cluster(self.func, (gx, gy, gz), self.lk.block, cluster, self.lk.dynamic_shared_bytes, stream,
                           ptrs)
            return
        _check(drv.cuLaunchKernel(self.func, gx, gy, gz, self.lk.block, 1, 1, self.lk.dynamic_shared_bytes,
                                  stream, ctypes.addressof(ptrs), 0), "cuLaunchKernel")

    def __call__(self, tensors: Mapping, sizes: Mapping[str, int]) -> None:
        self.launch(self.prepare(tensors, sizes), sizes)


def launch_cluster(func, grid: tuple, block: int, cluster: tuple, shared_bytes: int, stream, ptrs) -> None:
    """cuLaunchKernelEx with the cluster-dimension attribute (the same shape as the entry's
    `.reqnctapercluster`). Clusters tile the grid, so each extent must be a multiple of the cluster's."""
    bad = [(g, c) for g, c in zip(grid, cluster, strict=True) if g % c]
    if bad:
        raise TmaError(f"grid {tuple(grid)} is not a multiple of the cluster shape {tuple(cluster)}")
    drv = _driver()
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (int(g) for g in grid)
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = int(block), 1, 1
    cfg.sharedMemBytes = int(shared_bytes)
    try:
        cfg.hStream = stream
    except TypeError:  # bindings that take only their own handle type here
        cfg.hStream = drv.CUstream(int(stream))
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = (int(c) for c in cluster)
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    _check(drv.cuLaunchKernelEx(cfg, func, ctypes.addressof(ptrs), 0), "cuLaunchKernelEx")
