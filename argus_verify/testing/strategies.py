"""Hypothesis strategies for Argus kernels: sizes, compile-time constants and inputs.

    from hypothesis import given
    from argus_verify.testing import shapes_for, inputs_for

    k = argus_verify.load("specs/vecadd.arg")

    @given(data=st.data())
    def test_vecadd(data):
        sizes = data.draw(shapes_for(k))
        inputs = data.draw(inputs_for(k, sizes))
        ...

Sizes are drawn from the values where kernels break (1, 2, primes, the tile sizes and bounds the
kernel declares, each +- 1, the reference's SHAPES) and from a range, keeping each tensor small
enough for the interpreter and satisfying the kernel's `requires`. Inputs come in kinds: typical
(standard normal), large magnitude, ties (few distinct values), and NaN / inf sprinkled in
(`nonfinite`, only where the reference says it defines them: `NONFINITE = True` in NAME.ref.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

import numpy as np
from hypothesis import strategies as st

from argus_verify import ir
from argus_verify.reference import make_inputs
from argus_verify.semantics import round_to

__all__ = ["VALUE_KINDS", "consts_for", "input_arrays", "inputs_for", "shapes_for", "size_candidates"]

VALUE_KINDS = ("typical", "large", "ties", "nonfinite")
PRIMES = (2, 3, 5, 7, 13, 31, 97, 251, 1009)
MAX_ELEMENTS = 1 << 16  # per tensor: the interpreter runs every case
_LARGE = {"f64": 1e100, "f32": 1e15, "f16": 1e3, "bf16": 1e15}


def _constants_in(e, out: set) -> None:
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ir.IConst):
            out.add(int(x.value))
        elif attrs_fields := getattr(type(x), "__attrs_attrs__", None):
            for f in attrs_fields:
                v = getattr(x, f.name)
                if isinstance(v, tuple):
                    stack.extend(v)
                elif getattr(type(v), "__attrs_attrs__", None) is not None:
                    stack.append(v)


def _kernel(k):
    return getattr(k, "ir", k)  # an argus_verify.api.Kernel or an ir.Kernel


def size_candidates(kernel, ref: ModuleType | None = None, max_elements: int = MAX_ELEMENTS) -> dict[str, list]:
    """For each size, the values to try first: 1, 2, small primes, every constant the grid and the
    requires mention and every compile-time parameter and the block size, each -1, +0, +1, and the
    reference's SHAPES; at most `max_elements`."""
    k = _kernel(kernel)
    base = {1, 2, *PRIMES}
    for c in tile_constants(k):
        if c > 1:
            base |= {c - 1, c, c + 1}
    shapes = dict(getattr(ref, "SHAPES", None) or {})
    return {s: sorted(v for v in base | ({int(shapes[s])} if s in shapes else set()) if 1 <= v <= max_elements)
            for s in k.sizes}


def tile_constants(k: ir.Kernel) -> set:
    """The sizes a kernel's tiles come in: its compile-time parameters, the block size, and every
    constant its grid and requires mention."""
    out: set = {k.block, *(int(v) for _, v in k.consts if isinstance(v, int))}
    for e in (*k.grid, *k.requires):
        _constants_in(e, out)
    return out


def fits(k: ir.Kernel, sizes: Mapping, max_elements: int) -> bool:
    try:
        shapes = ir.tensor_shapes(k, sizes)
        if any(int(np.prod(s, dtype=np.int64)) > max_elements for s in shapes.values()):
            return False
        return all(ir.eval_int(r, dict(sizes)) for r in k.requires)
    except Exception:  # a requires over scalar parameters: leave it to the run
        return True


def shapes_for(kernel, ref: ModuleType | None = None, max_elements: int = MAX_ELEMENTS,
               fixed: Mapping[str, int] | None = None) -> st.SearchStrategy[dict]:
    """Sizes for `kernel` (dict name -> int) that satisfy its requires, each tensor at most
    `max_elements`; `fixed` pins some sizes. Shrinks toward small values."""
    k = _kernel(kernel)
    fixed = dict(fixed or {})
    for name, value in fixed.items():  # (never truncated or converted, as the API's constants)
        if name not in k.sizes:
            raise ValueError(f"fixed={{{name!r}: ...}}: kernel {k.name} has no size {name!r} (its sizes: "
                             f"{', '.join(k.sizes) or 'none'})")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"fixed size {name} must be an int of at least 1, not {value!r}")
    if fixed:  # sizes the user pinned are searched as given, even past the default tensor limit
        try:
            least = ir.tensor_shapes(k, {n: int(fixed.get(n, 1)) for n in k.sizes})
            max_elements = max([max_elements] + [int(np.prod(x, dtype=np.int64)) for x in least.values()])
        except Exception:  # noqa: BLE001 - shapes over parameters: the default limit stands
            pass
    cands = size_candidates(k, ref, max_elements)
    parts = {}
    for s in k.sizes:
        if s in fixed:
            parts[s] = st.just(int(fixed[s]))
        else:
            parts[s] = st.one_of(st.sampled_from(cands[s]), st.integers(1, min(4096, max_elements)))
    return st.fixed_dictionaries(parts).filter(lambda sz: fits(k, sz, max_elements))


def consts_for(ranges: Mapping[str, list] | None) -> st.SearchStrategy[dict]:
    """Compile-time parameters from their declared values (`CONSTS = {"BLOCK": [512, 1024]}` in a
    reference file); shrinks toward the first value of each."""
    for name, values in (ranges or {}).items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or not list(values) or \
                any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in values):
            raise ValueError(f"consts_for: {name} needs a non-empty list of ints (e.g. {{{name!r}: [128, 256]}}), "
                             f"not {values!r}")
    return st.fixed_dictionaries({n: st.sampled_from(list(vs)) for n, vs in (ranges or {}).items()})


def input_arrays(kernel, sizes: Mapping[str, int], kind: str = "typical", seed: int = 0,
                 ref: ModuleType | None = None) -> dict:
    """Inputs of one kind, reproducible from `seed`. A reference's own `make_inputs` decides the
    values of its kernel (its domain), whatever the kind."""
    k = _kernel(kernel)
    rng = np.random.default_rng(seed)
    if ref is not None and hasattr(ref, "make_inputs"):
        return make_inputs(k, dict(sizes), rng, ref)
    out = make_inputs(k, dict(sizes), rng)
    for t in k.inputs:
        if not ir.is_float(t.dtype):
            continue
        x = np.asarray(out[t.name], dtype=np.float64)
        if kind == "large":
            x = x * _LARGE[t.dtype]
        elif kind == "ties":
            x = rng.integers(-2, 3, size=x.shape).astype(np.float64)
        elif kind == "nonfinite":
            special = rng.random(x.shape) < 0.05
            x = np.where(special, rng.choice([np.nan, np.inf, -np.inf], size=x.shape), x)
        elif kind != "typical":
            raise ValueError(f"unknown input kind {kind!r} (one of {', '.join(VALUE_KINDS)})")
        out[t.name] = round_to(x, t.dtype)
    return out


def inputs_for(kernel, sizes: Mapping[str, int], ref: ModuleType | None = None,
               nonfinite: bool | None = None) -> st.SearchStrategy[dict]:
    """Input arrays (and scalars) for `kernel` at `sizes`: a kind (typical, large, ties, and
    nonfinite when `nonfinite` or the reference's NONFINITE is true) and a seed; shrinks toward
    typical values and seed 0."""
    allow = bool(getattr(ref, "NONFINITE", False)) if nonfinite is None else nonfinite
    kinds = [kd for kd in VALUE_KINDS if allow or kd != "nonfinite"]
    return st.builds(lambda kd, seed: input_arrays(kernel, sizes, kd, seed, ref), st.sampled_from(kinds),
                     st.integers(0, 2**32 - 1))
