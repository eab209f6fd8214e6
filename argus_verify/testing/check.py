"""One test case of a kernel against its reference, on every executor there is: the interpreter
(under a schedule and lockstep), the PTX simulator (first and last block) and the GPU; and the
search behind `argus test`: hypothesis over cases, shrinking a failure to its minimal case.

A case is compile-time constants, sizes, an input kind and seed, a schedule and whether to
simulate the PTX; `reproducer(case)` is the one-line command that runs exactly that case again.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Callable, Mapping
from types import ModuleType

import attrs
import numpy as np
from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from argus_verify import ir
from argus_verify.diagnostics import ArgusError
from argus_verify.reference import compute_reference, output_error
from argus_verify.runtime.measure import output_tolerance
from argus_verify.testing.ptxsim import PtxSimError
from argus_verify.testing.strategies import VALUE_KINDS, consts_for, fits, input_arrays, shapes_for, tile_constants

__all__ = ["Case", "KernelFamily", "SearchResult", "cases", "reproducer", "run_case", "search", "tile_size_cases"]


@attrs.frozen
class Case:
    consts: dict
    sizes: dict
    values: str = "typical"
    seed: int = 0
    schedule: str = "lockstep"
    ptxsim: bool = False

    def describe(self) -> str:
        parts = [", ".join(f"{k}={v}" for k, v in self.sizes.items())]
        if self.consts:
            parts.append("constants " + ", ".join(f"{k}={v}" for k, v in self.consts.items()))
        parts.append(f"{self.values} values (seed {self.seed})")
        parts.append(f"schedule {self.schedule}")
        if self.ptxsim:
            parts.append("PTX simulated")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return attrs.asdict(self)


class KernelFamily:
    """A kernel file's kernel, instantiated once per set of constants (argus_verify.api.Kernel)."""

    def __init__(self, path: str, kernel: str | None = None, consts: Mapping[str, int] | None = None):
        self.path, self.kernel, self.base = path, kernel, dict(consts or {})
        self._loaded: dict = {}
        self._lowered: dict = {}

    def get(self, consts: Mapping[str, int]):
        from argus_verify.api import load

        key = tuple(sorted({**self.base, **consts}.items()))
        if key not in self._loaded:
            self._loaded[key] = load(self.path, self.kernel, **dict(key))
        return self._loaded[key]

    def lowered(self, consts: Mapping[str, int]):
        from argus_verify.lowering.ptx import lower

        k = self.get(consts)
        if k.key not in self._lowered:
            self._lowered[k.key] = lower(k.ir)
        return self._lowered[k.key]


def _split(inputs: dict) -> tuple[dict, dict]:
    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    return arrays, {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}


def _first_difference(a: np.ndarray, b: np.ndarray, tol: float) -> str:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return f"shapes {list(a64.shape)} and {list(b64.shape)}"
    with np.errstate(all="ignore"):
        scale = np.maximum(np.abs(b64), 1.0)
        bad = ~((np.isnan(a64) & np.isnan(b64)) | (a64 == b64) | (np.abs(a64 - b64) <= tol * 10 * scale))
    idx = np.argwhere(bad)
    if not len(idx):
        return "spread over many elements"
    i = tuple(int(v) for v in idx[0])
    return f"first at {list(i)}: {a64[i]:.6g} vs {b64[i]:.6g} ({len(idx)} of {a64.size} elements differ)"


def run_case(family: KernelFamily, case: Case, ref: ModuleType | None, gpu: bool = False) -> list[str]:
    """Run `case` on each executor and compare: each with the reference (within its tolerance),
    and the executors with each other. Returns the problems found (empty: the case passes)."""
    from argus_verify.runtime import interp
    k = family.get(case.consts)
    kernel = k.ir
    inputs = input_arrays(k, case.sizes, case.values, case.seed, ref)
    arrays, scalars = _split(inputs)
    results: dict[str, dict] = {}
    problems: list[str] = []

    def attempt(name: str, fn: Callable[[], dict]) -> None:
        try:
            with np.errstate(all="ignore"):
                results[name] = fn()
        except ArgusError as e:  # a fault in the kernel (out of bounds, deadlock ...) or a refused launch
            where = f" at {e.span}" if e.span is not None else ""
            problems.append(f"{name}: {e.message}{where}")
        except PtxSimError as e:  # the lowered code faulted (an access outside every tensor ...)
            problems.append(f"{name}: {e}")

    for schedule in dict.fromkeys(["lockstep", case.schedule]):
        attempt(f"interpreter ({schedule})",
                lambda s=schedule: interp.run(kernel, arrays, case.sizes, scalars, schedule=s))
    if case.ptxsim:
        attempt("PTX simulator", lambda: _simulate(family, case, arrays, scalars))
    if gpu:
        from argus_verify.runtime.cuda_backend import run_cuda

        def on_gpu():
            try:
                return run_cuda(kernel, k.program(), arrays, case.sizes, scalars)
            except ValueError as e:
                raise ArgusError(str(e)) from None

        attempt("GPU", on_gpu)
    tol_of = {t.name: output_tolerance(ref, t.dtype) for t in kernel.outputs}
    if ref is not None:
        shapes = ir.tensor_shapes(kernel, case.sizes)
        expected = compute_reference(ref, inputs, {t.name: shapes[t.name] for t in kernel.outputs})
        for name, res in results.items():
            for t in kernel.outputs:
                got = res[t.name] if name != "PTX simulator" else None
                if got is None:
                    continue
                err = output_error(got, expected[t.name])
                if not err <= tol_of[t.name]:
                    problems.append(f"{name}: {t.name} differs from the reference: rel error {err:.3g} > "
                                    f"{tol_of[t.name]:g}; {_first_difference(got, expected[t.name], tol_of[t.name])}")
    for (na, ra), (nb, rb) in itertools.combinations(results.items(), 2):
        for t in kernel.outputs:
            a, b = ra[t.name], rb[t.name]
            if "PTX simulator" in (na, nb):  # only the simulated blocks' elements
                sim, other = (a, b) if na == "PTX simulator" else (b, a)
                written = ~np.isnan(np.asarray(sim, np.float64)) if ir.is_float(t.dtype) else sim != _poison(t)
                a, b = np.asarray(sim)[written], np.asarray(other)[written]
            err = output_error(a, b)
            if not err <= tol_of[t.name]:
                problems.append(f"{na} and {nb} disagree on {t.name}: rel error {err:.3g}; "
                                f"{_first_difference(a, b, tol_of[t.name])}")
    return problems


def _poison(t) -> int:
    return np.array(-1).astype(ir.numpy_dtype(t.dtype)).item()


def _simulate(family: KernelFamily, case: Case, arrays: dict, scalars: dict) -> dict:
    """The PTX simulator on the first and the last block (the ragged one)."""
    from argus_verify.testing.ptxsim import run_lowered

    lk = family.lowered(case.consts)
    gx, gy, gz = lk.grid(case.sizes, scalars)
    if gx * gy * gz == 0:
        return {t.name: np.full(ir.tensor_shapes(lk.kernel, case.sizes)[t.name], np.nan) for t in lk.kernel.outputs}
    blocks = list(dict.fromkeys([(0, 0, 0), (gx - 1, gy - 1, gz - 1)]))
    return run_lowered(lk, arrays, case.sizes, scalars, blocks=blocks)


# -- the search ------------------------------------------------------------------------------------

# (warps,width=1: one thread at a time, so that threads of one warp race: two writers of one shared slot;
#  blocks=serial/reverse: one block at a time, so that blocks race on global memory)
SCHEDULES = ("lockstep", "warps", "reverse", "random:1", "interleave:1", "one-warp-ahead", "reverse,width=8",
             "warps,width=1", "warps,copies=early", "warps,blocks=serial", "warps,blocks=reverse")


@st.composite
def cases(draw, family: KernelFamily, ref: ModuleType | None, *, consts: Mapping | None = None,
          sizes: Mapping | None = None, values: str | None = None, seed: int | None = None,
          schedule: str | None = None, ptxsim: bool | None = None, max_elements: int = 1 << 16):
    """Cases for `family`'s kernel; every keyword given pins that part of the case."""
    const_ranges = {n: vs for n, vs in (getattr(ref, "CONSTS", None) or {}).items() if n not in (consts or {})}
    chosen = {**draw(consts_for(const_ranges)), **dict(consts or {})}
    k = family.get(chosen)
    drawn_sizes = draw(shapes_for(k, ref, max_elements, fixed=sizes))
    kinds = [kd for kd in VALUE_KINDS if kd != "nonfinite" or getattr(ref, "NONFINITE", False)]
    return Case(
        consts=chosen, sizes=drawn_sizes,
        values=values if values is not None else draw(st.sampled_from(kinds)),
        seed=seed if seed is not None else draw(st.integers(0, 2**32 - 1)),
        schedule=schedule if schedule is not None else draw(st.sampled_from(SCHEDULES)),
        ptxsim=ptxsim if ptxsim is not None else draw(st.sampled_from([False, False, False, True])))


@attrs.define
class SearchResult:
    examples: int = 0
    failure: Case | None = None
    problems: list = attrs.field(factory=list)
    ran: dict = attrs.field(factory=dict)  # executor -> number of cases


class _CaseFailed(AssertionError):
    pass


def tile_size_cases(family: KernelFamily, ref: ModuleType | None, limit: int, max_elements: int = 1 << 16,
                    **pinned) -> list[Case]:
    """Cases that set one size to exactly a tile size the kernel names (a compile-time constant, the
    block size, a constant of the grid or the requires) and the others to 3: bugs that need a size
    to be a whole number of tiles (a view shifted by one that drops the last tile's last element)
    show only there, and random draws hit one value of a size in a thousand. At most `limit`, the
    largest constants first; the parts of a case that `pinned` names are kept."""
    if pinned.get("consts") is None and (getattr(ref, "CONSTS", None) or {}):
        return []  # the constants are drawn: their tile sizes are not known ahead
    consts = dict(pinned.get("consts") or {})
    k = family.get(consts).ir
    tiles = tile_constants(k)
    fixed = dict(pinned.get("sizes") or {})
    free = [s for s in k.sizes if s not in fixed]
    out: list[Case] = []
    for c in sorted((c for c in tiles if 2 < c <= max_elements), reverse=True):
        for s in free:
            sizes = {n: fixed.get(n, c if n == s else 3) for n in k.sizes}
            if not fits(k, sizes, max_elements) or len(out) >= limit:
                continue
            out.append(Case(consts=consts, sizes=sizes, values=pinned.get("values") or "typical",
                            seed=pinned.get("seed") if pinned.get("seed") is not None else len(out),
                            schedule=pinned.get("schedule") or SCHEDULES[len(out) % len(SCHEDULES)],
                            ptxsim=bool(pinned.get("ptxsim"))))
    return out


def search(family: KernelFamily, ref: ModuleType | None, *, max_examples: int = 50, search_seed: int = 0,
           gpu: bool = False, **pinned) -> SearchResult:
    """Hypothesis over `cases(...)`, then the sizes that are whole tiles (`tile_size_cases`, at
    most a fifth of `max_examples`, the rest hypothesis's): stops at the first failing case; one
    that hypothesis found is shrunk, so the result holds the minimal case and its problems (the last
    failing case hypothesis ran is the minimal one: it replays it at the end)."""
    result = SearchResult()

    def check(case):
        result.examples += 1
        for name in ["interpreter"] + (["PTX simulator"] if case.ptxsim else []) + (["GPU"] if gpu else []):
            result.ran[name] = result.ran.get(name, 0) + 1
        problems = run_case(family, case, ref, gpu)
        if problems:
            result.failure, result.problems = case, problems
            raise _CaseFailed("; ".join(problems))

    first = tile_size_cases(family, ref, max_examples // 5, **pinned)

    @hypothesis_seed(search_seed)
    @settings(max_examples=max(1, max_examples - len(first)), database=None, deadline=None,
              verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck), print_blob=False)
    @given(case=cases(family, ref, **pinned))
    def prop(case):
        check(case)

    try:
        prop()
        for case in first:
            check(case)
    except _CaseFailed:
        pass
    except BaseExceptionGroup as group:  # hypothesis found several distinct errors: bad input is reported as such
        argus, rest = group.split(ArgusError)
        if argus is None or rest is not None:
            raise
        raise _leaves(argus)[0] from None
    return result


def _leaves(group: BaseExceptionGroup) -> list:
    out = []
    for e in group.exceptions:
        out += _leaves(e) if isinstance(e, BaseExceptionGroup) else [e]
    return out


def reproducer(path: str, case: Case, kernel: str | None = None) -> str:
    """The one-line command that runs exactly `case` again."""
    words = ["argus", "test", path]
    if kernel:
        words += ["--kernel", kernel]
    if case.consts:
        words += ["--const", ",".join(f"{k}={v}" for k, v in case.consts.items())]
    words += ["--shape", ",".join(f"{k}={v}" for k, v in case.sizes.items()), "--values", case.values,
              "--seed", str(case.seed), "--schedule", case.schedule, "--ptxsim", "always" if case.ptxsim else "never"]
    return " ".join(shlex.quote(w) for w in words)
