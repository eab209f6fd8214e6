"""Calling an Argus kernel from Python (argus_verify.api.Kernel.__call__): binding arguments,
inferring sizes from shapes, checking arrays, allocating outputs and launching.

Three kinds of arrays, never mixed in one call:

* NumPy arrays: copied to the GPU and back (runtime.cuda_backend.run_cuda), or run in the
  interpreter (runtime.interp.run) where there is no GPU;
* torch tensors on a CUDA device: passed by their data pointer, no copy, on torch's current stream;
* PyCUDA GPUArrays: passed by their allocation, no copy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from argus_verify import ir
from argus_verify.api import CallError

TORCH_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
                "i32": "int32", "u32": "uint32", "i8": "int8", "u8": "uint8"}
_SCALAR_NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "i64": np.int64}


def kind_of(a) -> str | None:
    """"numpy", "torch", "pycuda", or None for a scalar."""
    mod = type(a).__module__
    if isinstance(a, np.ndarray):
        return "numpy"
    if mod.startswith("torch") and hasattr(a, "data_ptr"):
        return "torch"
    if hasattr(a, "gpudata") and hasattr(a, "shape"):
        return "pycuda"
    return None


def bind(k, args: tuple, kwargs: dict) -> tuple[dict, dict, dict]:
    """Arguments -> (tensors by name, scalars by name, sizes given by keyword)."""
    kernel = k.ir
    names = k.inputs
    if len(args) > len(names):
        raise CallError(f"{k.name} takes {len(names)} inputs ({', '.join(names)}), got {len(args)}")
    given = dict(zip(names, args, strict=False))
    sizes = {}
    for key, value in kwargs.items():
        if key in given:
            raise CallError(f"{k.name}: input '{key}' given twice")
        if key in names:
            given[key] = value
        elif key in kernel.sizes:
            sizes[key] = value
        elif key in k.outputs:
            raise CallError(f"{k.name}: '{key}' is an output; pass it as out=")
        else:
            raise CallError(f"{k.name} has no input or size '{key}' (inputs: {', '.join(names)}; sizes: "
                            f"{', '.join(kernel.sizes) or 'none'})")
    missing = [n for n in names if n not in given]
    if missing:
        raise CallError(f"{k.name}: no value for input '{missing[0]}' (inputs: {', '.join(names)})")
    tensors, scalars = {}, {}
    for p in kernel.params:
        if p.name not in given:
            continue
        if isinstance(p, ir.TensorParam):
            if kind_of(given[p.name]) is None:
                raise CallError(f"{k.name}: input '{p.name}' must be an array ({_type(p)}), got "
                                f"{type(given[p.name]).__name__}")
            tensors[p.name] = given[p.name]
        else:
            v = given[p.name]
            if kind_of(v) is not None or not isinstance(v, (int, float, np.integer, np.floating)):
                raise CallError(f"{k.name}: scalar '{p.name}' ({p.dtype}) must be a number, got {type(v).__name__}")
            scalars[p.name] = float(v) if ir.is_float(p.dtype) else int(v)
    return tensors, scalars, sizes


def _dims(t: ir.TensorParam) -> list:
    return [d.value if isinstance(d, ir.IConst) else d.name for d in t.shape]


def _type(t: ir.TensorParam) -> str:
    return f"{t.dtype}[{', '.join(str(d) for d in _dims(t))}]"


def bind_out(k, out) -> dict:
    outs = k.outputs
    if out is None:
        return {}
    if isinstance(out, Mapping):
        unknown = [n for n in out if n not in outs]
        if unknown:
            raise CallError(f"{k.name} has no output '{unknown[0]}' (outputs: {', '.join(outs)})")
        return dict(out)
    if kind_of(out) is not None:
        if len(outs) != 1:
            raise CallError(f"{k.name} has {len(outs)} outputs ({', '.join(outs)}): pass out= as a tuple or dict")
        return {outs[0]: out}
    if isinstance(out, (tuple, list)):
        if len(out) != len(outs):
            raise CallError(f"{k.name} has {len(outs)} outputs ({', '.join(outs)}), out= gives {len(out)}")
        return dict(zip(outs, out, strict=True))
    raise CallError(f"out= must be an array, a tuple of arrays or a dict by output name, not {type(out).__name__}")


def infer_sizes(k, arrays: dict, given: dict) -> dict[str, int]:
    """Sizes from the arrays' shapes (and keywords), each consistent everywhere it appears."""
    kernel = k.ir
    sizes: dict[str, int] = {}
    seen: dict[str, str] = {}
    for name, v in given.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise CallError(f"{k.name}: size {name} must be a positive integer, got {v!r}")
        sizes[name], seen[name] = int(v), f"{name}={v}"
    for t in kernel.tensors:
        if t.name not in arrays:
            continue
        shape = tuple(int(d) for d in arrays[t.name].shape)
        if len(shape) != t.rank:
            raise CallError(f"{k.name}: '{t.name}' must have {t.rank} dimensions ({_type(t)}), got shape "
                            f"{list(shape)}")
        for axis, (d, n) in enumerate(zip(t.shape, shape, strict=True)):
            if isinstance(d, ir.IConst):
                if n != d.value:
                    raise CallError(f"{k.name}: '{t.name}' must have {d.value} in dimension {axis} "
                                    f"({_type(t)}), got shape {list(shape)}")
            elif d.name in sizes and sizes[d.name] != n:
                raise CallError(f"{k.name}: size {d.name} is {sizes[d.name]} from {seen[d.name]} but {n} from "
                                f"'{t.name}' ({_type(t)}, shape {list(shape)})")
            else:
                sizes[d.name], seen[d.name] = n, f"'{t.name}' dimension {axis}"
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise CallError(f"{k.name}: no array shows size {missing[0]}; give it as a keyword ({missing[0]}=...) "
                        "or pass out=")
    zero = [s for s in kernel.sizes if sizes[s] <= 0]
    if zero:
        raise CallError(f"{k.name}: size {zero[0]} is {sizes[zero[0]]}; sizes must be positive")
    big = [s for s in kernel.sizes if sizes[s] >= 2**31]
    if big:
        raise CallError(f"{k.name}: size {big[0]}={sizes[big[0]]} does not fit the kernel's 32-bit size parameters")
    return sizes


def check_requires(k, sizes: dict, scalars: dict) -> None:
    env = {**sizes, **{n: v for n, v in scalars.items() if isinstance(v, int)}}
    for req in k.ir.requires:
        if not ir.eval_int(req, env):
            raise CallError(f"{k.name}: the sizes {', '.join(f'{n}={v}' for n, v in sizes.items())} break the "
                            f"kernel's precondition at {req.span} (requires)")


# -- NumPy ---------------------------------------------------------------------------------------------

def _numpy_dtype_ok(t: ir.TensorParam, a: np.ndarray) -> bool:
    return a.dtype == ir.numpy_dtype(t.dtype)


def check_numpy(k, arrays: dict) -> None:
    for t in k.ir.tensors:
        a = arrays.get(t.name)
        if a is None:
            continue
        if not _numpy_dtype_ok(t, a):
            held = " (bf16 is held in float32 on the host)" if t.dtype == "bf16" else ""
            raise CallError(f"{k.name}: '{t.name}' is {t.dtype}: expected a numpy array of {ir.numpy_dtype(t.dtype)}"
                            f"{held}, got {a.dtype}")
        if t.output and not a.flags.writeable:
            raise CallError(f"{k.name}: out= array for '{t.name}' is read-only")


def run_numpy(k, tensors, scalars, sizes, outs, backend: str, schedule: str) -> dict:
    from argus_verify.runtime.cuda import cuda_available

    if backend not in ("auto", "cuda", "interp"):
        raise CallError(f"backend must be 'auto', 'cuda' or 'interp', not {backend!r}")
    use_gpu = backend == "cuda" or (backend == "auto" and cuda_available())
    if backend == "cuda" and not cuda_available():
        raise CallError("backend='cuda': no GPU or pycuda here (install the 'cuda' extra on a GPU machine)")
    if use_gpu:
        from argus_verify.runtime.cuda_backend import run_cuda

        try:
            results = run_cuda(k.ir, k.program(), tensors, sizes, scalars)
        except ValueError as e:
            raise CallError(f"{k.name}: {e}") from None
    else:
        from argus_verify.runtime.interp import run
        from argus_verify.runtime.schedules import Schedule

        if not isinstance(schedule, (str, Schedule)):
            raise CallError("schedule must be a string such as 'lockstep' or 'random:1', not "
                            f"{type(schedule).__name__}")
        Schedule.parse(schedule).check_block(k.ir.block, schedule)
        with np.errstate(all="ignore"):
            results = run(k.ir, tensors, sizes, scalars, schedule=schedule)
    final = {}
    for t in k.ir.outputs:
        r = results[t.name]
        if t.name in outs:
            outs[t.name][...] = r
            final[t.name] = outs[t.name]
        else:
            final[t.name] = np.asarray(r, dtype=ir.numpy_dtype(t.dtype))
    return final


# -- device arrays: torch CUDA tensors, PyCUDA GPUArrays --------------------------------------------------

def check_torch(k, arrays: dict):
    import torch

    device = None
    for t in k.ir.tensors:
        a = arrays.get(t.name)
        if a is None:
            continue
        if not a.is_cuda:
            raise CallError(f"{k.name}: '{t.name}' is on {a.device}; pass CUDA tensors (.cuda()), or NumPy arrays "
                            "(.numpy()) for the copying path")
        if device is None:
            device = a.device
        elif a.device != device:
            raise CallError(f"{k.name}: '{t.name}' is on {a.device} but the other arrays are on {device}")
        want = getattr(torch, TORCH_DTYPES[t.dtype])
        if a.dtype != want:
            raise CallError(f"{k.name}: '{t.name}' is {t.dtype}: expected {want}, got {a.dtype}")
        if not a.is_contiguous():
            raise CallError(f"{k.name}: '{t.name}' is not contiguous (strides {list(a.stride())}); pass "
                            f"{t.name}.contiguous()")
    return device


def check_pycuda(k, arrays: dict) -> None:
    for t in k.ir.tensors:
        a = arrays.get(t.name)
        if a is None:
            continue
        want = np.dtype(np.uint16) if t.dtype == "bf16" else ir.numpy_dtype(t.dtype)
        if np.dtype(a.dtype) != want:
            held = " (bf16 travels as uint16 bit patterns)" if t.dtype == "bf16" else ""
            raise CallError(f"{k.name}: '{t.name}' is {t.dtype}: expected a GPUArray of {want}{held}, got {a.dtype}")
        if not a.flags.c_contiguous:
            raise CallError(f"{k.name}: '{t.name}' is not C-contiguous")


def run_device(k, kind: str, tensors, scalars, sizes, outs) -> dict:
    from argus_verify.runtime import cuda, cuda_backend

    shapes = ir.tensor_shapes(k.ir, sizes)
    if kind == "torch":
        import torch

        device = check_torch(k, {**tensors, **outs})
        for t in k.ir.outputs:
            if t.name not in outs:
                outs[t.name] = torch.empty(shapes[t.name], dtype=getattr(torch, TORCH_DTYPES[t.dtype]), device=device)
        stream = torch.cuda.current_stream(device)
        ctx = torch.cuda.device(device)
    else:
        import pycuda.gpuarray as gpuarray

        check_pycuda(k, {**tensors, **outs})
        for t in k.ir.outputs:
            if t.name not in outs:
                dt = np.uint16 if t.dtype == "bf16" else ir.numpy_dtype(t.dtype)
                outs[t.name] = gpuarray.empty(shapes[t.name], dtype=dt)
        stream = ctx = None
    cuda.ensure_context()
    program = k.program()
    arrays = {**tensors, **outs}
    if program.tmaps:  # tensor maps over the arrays' addresses, launched through the driver (runtime.tma)
        address = {name: a.data_ptr() if kind == "torch" else int(getattr(a, "ptr", a.gpudata))
                   for name, a in arrays.items()}
        grid = cuda_backend.grid_of(k.ir, sizes, scalars)
        if min(grid) > 0 and all(math.prod(shapes[t.name]) > 0 for t in k.ir.outputs):
            try:
                if kind == "torch":
                    with ctx:
                        cuda_backend.tma_launch(program, address, sizes, scalars, shapes, int(stream.cuda_stream))(grid)
                else:
                    cuda_backend.tma_launch(program, address, sizes, scalars, shapes)(grid)
            except ValueError as e:
                raise CallError(f"{k.name}: {e}") from None
        return {t.name: outs[t.name] for t in k.ir.outputs}
    loaded = cuda_backend.load(program)
    args = []
    for p in program.params:
        if p.kind == "tensor":
            a = arrays[p.name]
            # a 64-bit device address for the .u64 parameter: no copy
            args.append(np.uint64(a.data_ptr() if kind == "torch" else int(getattr(a, "ptr", a.gpudata))))
        elif p.kind == "size":
            args.append(np.uint32(sizes[p.name]))
        else:
            if p.dtype not in _SCALAR_NP:
                raise CallError(f"{k.name}: scalar parameters of type {p.dtype} cannot be passed yet")
            args.append(_SCALAR_NP[p.dtype](scalars[p.name]))
    grid = cuda_backend.grid_of(k.ir, sizes, scalars)
    if min(grid) > 0 and all(math.prod(shapes[t.name]) > 0 for t in k.ir.outputs):
        if kind == "torch":
            with ctx:
                _launch_on_torch_stream(loaded, program, grid, args, stream)
        else:
            cuda.launch(loaded.function, grid, (program.block, 1, 1), args, shared_bytes=program.dynamic_shared_bytes)
    return {t.name: outs[t.name] for t in k.ir.outputs}


def _launch_on_torch_stream(loaded, program, grid, args, stream) -> None:
    """Launch in order with torch's current stream. PyCUDA launches on its own Stream objects or
    on the legacy default stream (handle 0); when torch's current stream is the default one, that
    is the same stream and the launch is asynchronous like any torch operation. On another torch
    stream, the launch waits for that stream's work and torch's later work waits for the launch
    (both through synchronisation: correct, not overlapped)."""
    from argus_verify.runtime import cuda

    default = int(stream.cuda_stream) == 0
    if not default:
        stream.synchronize()
    cuda.launch(loaded.function, grid, (program.block, 1, 1), args, shared_bytes=program.dynamic_shared_bytes)
    if not default:
        cuda._drv().Context.synchronize()


# -- the call ------------------------------------------------------------------------------------------

def run_call(k, args: tuple, kwargs: dict, out, backend: str, schedule: str, verified=lambda: None):
    tensors, scalars, given_sizes = bind(k, args, kwargs)
    outs = bind_out(k, out)
    arrays = {**tensors, **outs}
    kinds = {n: kind_of(a) for n, a in arrays.items()}
    distinct = sorted(set(kinds.values()))
    if len(distinct) > 1:
        first = {kd: next(n for n, v in kinds.items() if v == kd) for kd in distinct}
        raise CallError(f"{k.name}: arrays of different kinds in one call ("
                        + ", ".join(f"'{n}' is {kd}" for kd, n in first.items())
                        + "): pass all NumPy arrays, all torch CUDA tensors, or all PyCUDA GPUArrays")
    kind = distinct[0] if distinct else "numpy"
    sizes = infer_sizes(k, arrays, given_sizes)
    check_requires(k, sizes, scalars)
    shapes = ir.tensor_shapes(k.ir, sizes)
    for name, a in outs.items():
        if tuple(a.shape) != shapes[name]:
            raise CallError(f"{k.name}: out= for '{name}' has shape {list(a.shape)}, the sizes give "
                            f"{list(shapes[name])}")
    if kind == "numpy":
        check_numpy(k, arrays)
        if backend not in ("auto", "cuda", "interp"):
            raise CallError(f"backend must be 'auto', 'cuda' or 'interp', not {backend!r}")
    verified()
    if kind == "numpy":
        results = run_numpy(k, tensors, scalars, sizes, outs, backend, schedule)
    else:
        results = run_device(k, kind, tensors, scalars, sizes, outs)
    values = tuple(results[t.name] for t in k.ir.outputs)
    return values[0] if len(values) == 1 else values
