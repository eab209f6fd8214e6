"""Kernel references: `NAME.ref.py` beside `NAME.arg` gives `SHAPES` and `reference(**inputs)`.

A reference file may also define `make_inputs(sizes, rng) -> dict` for inputs that are not plain
standard-normal floats, `TOLERANCE` to tighten the dtype's default (float outputs: integer outputs
always compare exactly), and `CONSTS = {"NAME": [values]}` for `argus test` to draw constants from.

The file runs inside Argus: whatever it prints goes to stderr (stdout stays the report, valid JSON
with --json), and whatever it raises, `sys.exit` and `os._exit` included, is reported as an error in
the reference (exit 2), never as a crash or a silent exit. (An exit from C code, `posix._exit`, or
a signal cannot be caught in-process.)
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from argus_verify import ir, semantics
from argus_verify.diagnostics import SOURCES, ArgusError, Span
from argus_verify.semantics import round_to


def reference_path(kernel_path: str | Path) -> Path:
    p = Path(kernel_path)
    return p.with_name(p.name[: -len(p.suffix)] + ".ref.py") if p.suffix else p.with_name(p.name + ".ref.py")


def load_reference(kernel_path: str | Path) -> ModuleType | None:
    path = reference_path(kernel_path)
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"argus_ref_{path.stem.replace('.', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    # a reference may import helper modules that sit beside it (specs/gemm_reference.py)
    sys.path.insert(0, str(path.parent))
    try:
        with _guarded():
            spec.loader.exec_module(mod)
    except SystemExit as e:  # a reference that exits would end Argus silently
        raise ArgusError(f"cannot load reference {path}: it called sys.exit({e.code!r}) while loading") from None
    except _OsExit as e:
        raise ArgusError(f"cannot load reference {path}: it called os._exit({e.code!r}) while loading") from None
    except KeyboardInterrupt:
        raise
    except SyntaxError as e:  # a broken reference file is bad input, not a crash
        where = f"{path}:{e.lineno}:{e.offset}" if e.lineno else str(path)
        raise ArgusError(f"cannot load reference {where}: SyntaxError: {e.msg}") from None
    except BaseException as e:
        raise ArgusError(f"cannot load reference {path}: {_describe(e)}") from None
    finally:
        sys.path.remove(str(path.parent))
    if not callable(getattr(mod, "reference", None)):
        raise ArgusError(f"reference file {path} defines no reference(...) function")
    _check_shapes(mod, path)
    _check_tolerance(mod, path)
    _check_consts(mod, path)
    return mod


class _OsExit(BaseException):
    """`os._exit(code)` called by reference code (it would end Argus at once, with no report)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _os_exit(code=0):
    raise _OsExit(code)


@contextlib.contextmanager
def _guarded():
    """While reference code runs: its prints go to stderr (stdout is the report), and `os._exit`
    raises instead of ending the process."""
    real_exit = os._exit
    os._exit = _os_exit
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        os._exit = real_exit


def _check_shapes(mod: ModuleType, path: Path) -> None:
    shapes = getattr(mod, "SHAPES", None)
    if shapes is None:
        return
    if not isinstance(shapes, dict):
        raise ArgusError(f"reference file {path}: SHAPES must be a dict of sizes by name, e.g. {{'N': 1000}}, "
                         f"not {type(shapes).__name__}", _setting_span(path, 'SHAPES'))
    for name, value in shapes.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or value <= 0:
            raise ArgusError(f"reference file {path}: SHAPES[{name!r}] = {value!r}; each size must be a "
                             "positive integer", _setting_span(path, 'SHAPES'))


def _check_tolerance(mod: ModuleType, path: Path) -> None:
    tol = getattr(mod, "TOLERANCE", None)
    if tol is None:
        return
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating, np.integer)) \
            or not np.isfinite(tol) or tol <= 0:
        raise ArgusError(f"reference file {path}: TOLERANCE = {tol!r}; it must be a positive number "
                         "(a relative error, e.g. 1e-5)", _setting_span(path, 'TOLERANCE'))


def _check_consts(mod: ModuleType, path: Path) -> None:
    """`CONSTS = {"NAME": [values, ...]}`: each a non-empty list of positive integers (whether the
    kernel has those parameters is checked when they are used)."""
    consts = getattr(mod, "CONSTS", None)
    if consts is None:
        return
    example = "e.g. {'BLOCK': [256, 512]}"
    if not isinstance(consts, dict):
        raise ArgusError(f"reference file {path}: CONSTS must be a dict of value lists by parameter name, {example}, "
                         f"not {type(consts).__name__}", _setting_span(path, 'CONSTS'))
    for name, values in consts.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgusError(f"reference file {path}: CONSTS key {name!r} is not a parameter name",
                             _setting_span(path, 'CONSTS'))
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, range)) or not len(values):
            raise ArgusError(f"reference file {path}: CONSTS[{name!r}] = {values!r}; it must be a non-empty list of "
                             f"the values to try, {example}", _setting_span(path, 'CONSTS'))
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ArgusError(f"reference file {path}: CONSTS[{name!r}] contains {v!r}; each value must be a "
                                 "positive integer", _setting_span(path, 'CONSTS'))


def _call(ref: ModuleType, what: str, *args, **kwargs):
    """Call a function of the reference file; whatever it raises (a sys.exit, an os._exit, any
    BaseException but an interrupt) is the file's fault. Its prints go to stderr."""
    who = "the reference" if what == "reference" else f"the reference's {what}(...)"
    try:
        with _guarded():
            return getattr(ref, what)(*args, **kwargs)
    except SystemExit as e:
        raise ArgusError(f"{who} called sys.exit({e.code!r})") from None
    except _OsExit as e:
        raise ArgusError(f"{who} called os._exit({e.code!r})") from None
    except KeyboardInterrupt:  # Ctrl-C while the reference runs is the user's: the CLI stops (exit 130)
        raise
    except BaseException as e:
        raise ArgusError(f"{who} raised {_describe(e)}") from None


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _setting_span(path: Path, name: str) -> Span | None:
    """Where the reference file assigns `name` (its last top-level assignment), for a caret."""
    import ast

    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, ValueError, SyntaxError):
        return None
    span = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            span = Span(str(path), node.lineno, node.col_offset + 1, node.lineno, node.col_offset + 1 + len(name))
    if span is not None:
        SOURCES.add(str(path), text)
    return span


def default_sizes(kernel: ir.Kernel, ref: ModuleType | None) -> dict[str, int]:
    shapes = dict(getattr(ref, "SHAPES", {}) or {})
    return {s: int(shapes[s]) for s in kernel.sizes if s in shapes}


def make_inputs(kernel: ir.Kernel, sizes: dict, rng: np.random.Generator, ref: ModuleType | None = None) -> dict:
    """Fresh random inputs (standard normal; never zeros), or the reference's own generator."""
    if ref is not None and hasattr(ref, "make_inputs"):
        made = _call(ref, "make_inputs", dict(sizes), rng)
        if not isinstance(made, dict):
            raise ArgusError("the reference's make_inputs(sizes, rng) must return a dict of inputs by name, not "
                             f"{type(made).__name__}")
        wanted = [t.name for t in kernel.inputs] + [p.name for p in kernel.params if isinstance(p, ir.ScalarParam)]
        missing = [n for n in wanted if n not in made]
        if missing:
            raise ArgusError(f"the reference's make_inputs(sizes, rng) returns no {missing[0]!r} (the kernel takes: "
                             f"{', '.join(wanted)})")
        return made
    shapes = ir.tensor_shapes(kernel, sizes)
    out: dict = {}
    for t in kernel.inputs:
        if ir.is_float(t.dtype):
            out[t.name] = round_to(rng.standard_normal(shapes[t.name]), t.dtype)
        else:
            out[t.name] = rng.integers(0, 100, size=shapes[t.name]).astype(ir.numpy_dtype(t.dtype))
    for p in kernel.params:
        if isinstance(p, ir.ScalarParam):
            out[p.name] = float(rng.standard_normal()) if ir.is_float(p.dtype) else int(rng.integers(1, 8))
    return out


def compute_reference(ref: ModuleType, inputs: dict, shapes: dict | None = None) -> dict:
    """The reference's outputs as float64 arrays; `shapes` (output name -> shape) checks them."""
    result = _call(ref, "reference", **inputs)
    if not isinstance(result, dict):
        raise ArgusError("reference(...) must return a dict of output arrays by name, not "
                         f"{type(result).__name__}")
    out = {}
    for name, value in result.items():
        try:
            out[name] = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ArgusError(f"the reference's output {name!r} is not an array of numbers: {e}") from None
        want = (shapes or {}).get(name)
        if want is not None and tuple(out[name].shape) != tuple(want):
            raise ArgusError(f"the reference's output {name!r} has shape {list(out[name].shape)}, but the "
                             f"kernel's {name} has shape {list(want)} at these sizes")
    missing = [name for name in (shapes or {}) if name not in out]
    if missing:
        returned = ", ".join(map(repr, out)) or "nothing"
        raise ArgusError(f"the reference returns no {missing[0]!r} (it returns: {returned})")
    return out


CONTRACT_CELLS = 1 << 24  # the (output x reduction) cells evaluate_contract computes at once
CONTRACT_TOTAL = 1 << 30  # the most it computes in all (slice by slice of the first output index)


def evaluate_contract(kernel: ir.Kernel, contract: ir.Contract, inputs: dict, sizes: dict) -> np.ndarray | None:
    """What `contract` says every element of its output is, in float64, through the shared semantics
    table: each index variable is an axis of one broadcast array, each reduction reduces its own.
    Slices of the first output index are computed one after another, so that no array exceeds
    CONTRACT_CELLS; None when the whole index space is larger than CONTRACT_TOTAL."""
    shapes = ir.tensor_shapes(kernel, sizes)
    extent = dict(zip(contract.index_vars, shapes[contract.tensor], strict=True))
    for red in contract.reductions():
        elem = next(e for e in ir.contract_elements(red.body) if red.var in e.indices)
        extent[red.var] = shapes[elem.tensor][elem.indices.index(red.var)]
    cells = int(np.prod([float(n) for n in extent.values()]))
    if cells > CONTRACT_TOTAL:
        return None
    axes = list(contract.index_vars)
    if not axes:
        return _contract_slice(contract, inputs, extent, {})
    first = axes[0]
    step = max(1, CONTRACT_CELLS // max(1, cells // max(1, extent[first])))
    parts = [_contract_slice(contract, inputs, extent, {first: (lo, min(lo + step, extent[first]))})
             for lo in range(0, extent[first], step)]
    return np.concatenate(parts, axis=0) if parts else _contract_slice(contract, inputs, extent, {})


def _contract_slice(contract: ir.Contract, inputs: dict, extent: dict, ranges: dict) -> np.ndarray:
    """The contract's output over index ranges {var: (lo, hi)} (the whole extent elsewhere)."""

    def span(v):
        return ranges.get(v, (0, extent[v]))

    def ev(e, axes: list):
        if isinstance(e, ir.CElem):
            idx = tuple(np.arange(*span(v)).reshape([-1 if a == v else 1 for a in axes]) for v in e.indices)
            return np.asarray(inputs[e.tensor], dtype=np.float64)[idx]
        if isinstance(e, ir.CReduce):
            inner = axes + [e.var]
            body = np.broadcast_to(ev(e.body, inner), [span(a)[1] - span(a)[0] for a in inner])
            return semantics.REDUCE_OPS[e.op].ref(body, axis=len(axes))
        if isinstance(e, ir.CBin):
            return semantics.FLOAT_BINARY[e.op].ref(ev(e.a, axes), ev(e.b, axes))
        if isinstance(e, ir.CUn):
            return semantics.FLOAT_UNARY[e.op].ref(ev(e.a, axes))
        if isinstance(e, ir.CScalar):
            return np.float64(inputs[e.name])
        return np.float64(e.value)

    axes = list(contract.index_vars)
    with np.errstate(all="ignore"):
        return np.broadcast_to(ev(contract.expr, axes), [span(a)[1] - span(a)[0] for a in axes]).copy()


def output_error(out: np.ndarray, expected: np.ndarray) -> float:
    """Relative 2-norm error of `out` against the reference over the elements the reference gives as
    finite numbers; where the reference gives NaN or an infinity, `out` must give the same (NaN, or
    the infinity of the same sign), else the error is inf. A NaN or inf in `out` where the reference
    is finite is inf too. Computed in float64, without numpy warnings."""
    o = np.asarray(out).astype(np.float64, copy=False)
    r = np.asarray(expected).astype(np.float64, copy=False)
    if o.shape != r.shape:
        return float("inf")
    finite = np.isfinite(r)
    with np.errstate(all="ignore"):
        same_special = np.where(np.isnan(r), np.isnan(o), o == r)
        if not np.all(same_special[~finite]) or not np.all(np.isfinite(o[finite])):
            return float("inf")
        diff = float(np.linalg.norm((o[finite] - r[finite]).ravel()))
        denom = float(np.linalg.norm(r[finite].ravel()))
    return diff / denom if denom else diff
