"""Replay a verifier witness in the numpy interpreter and show the concrete wrong value.

The verifier names a block, thread, value index, loop iteration and sizes; the interpreter runs
the kernel at those sizes on random inputs, records the named fragment at that point, and looks
the value up in the inputs, so the report can say "a[value 3] of thread 37 = 0.7311 = A[21, 0]"
next to what the assertion expected.
"""

from __future__ import annotations

import numpy as np

from argus_verify import ir
from argus_verify.diagnostics import ArgusError
from argus_verify.reference import load_reference, make_inputs

REPLAY_SEED = 20261129


def _witness_fields(result) -> dict:
    w = getattr(result, "witness", None) or {}
    return w if isinstance(w, dict) else {}


def find_in_inputs(value: float, inputs: dict) -> str | None:
    """The input element equal to `value` (random normals do not repeat), as `A[i, j]`."""
    if not np.isfinite(value):
        return None
    for name, arr in inputs.items():
        if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
            continue
        hits = np.argwhere(arr == np.asarray(value, dtype=arr.dtype))
        if len(hits):
            return f"{name}[{', '.join(str(int(i)) for i in hits[0])}]"
    return None


def replay_one(kernel: ir.Kernel, result, path: str) -> dict:
    from argus_verify.runtime.interp import run

    w = _witness_fields(result)
    element = w.get("element") or {}
    frag = element.get("tile") or element.get("fragment")
    if not w or frag is None or "thread" not in w:
        return {"obligation": getattr(result, "obligation", "?"), "replayed": False,
                "text": f"  replay: nothing to replay for {getattr(result, 'obligation', '?')} "
                        "(no fragment element in the witness)"}
    ref = load_reference(path)
    sizes = dict(getattr(ref, "SHAPES", {}) or {})
    sizes.update({k: int(v) for k, v in (w.get("sizes") or {}).items()})
    sizes = {k: v for k, v in sizes.items() if k in kernel.sizes}
    missing = [s for s in kernel.sizes if s not in sizes]
    if missing:
        raise ArgusError(f"cannot replay: no value for size {missing[0]}")
    block = tuple(int(b) for b in (list(w.get("block", [0, 0, 0])) + [0, 0, 0])[:3])
    thread = int(w["thread"])
    value_idx = int(element.get("value", w.get("value", 0)))
    loop = {k: int(v) for k, v in (w.get("loop") or {}).items()}
    line = (getattr(result, "location", None) or {})
    line = getattr(line, "line", None) or (line.get("line") if isinstance(line, dict) else None)
    inputs = make_inputs(kernel, sizes, np.random.default_rng(REPLAY_SEED), ref)
    seen: list = []

    def trace(ev):
        if ev.stmt.name != frag:
            return
        if line is not None and ev.stmt.span.line > line:
            return
        if any(ev.loop.get(k) != v for k, v in loop.items()):
            return
        hit = np.nonzero((ev.blocks == np.array(block)).all(axis=1))[0]
        if len(hit) and 0 <= thread - ev.first_thread < ev.value.shape[1]:
            seen.append((ev.stmt.span.line, float(ev.value[hit[0], thread - ev.first_thread, value_idx])))

    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {n: v for n, v in inputs.items() if not isinstance(v, np.ndarray)}
    run(kernel, arrays, sizes, scalars, trace=trace)
    if not seen:
        return {"obligation": result.obligation, "replayed": False,
                "text": f"  replay: {frag} was not computed for block {block}, thread {thread} at "
                        f"{', '.join(f'{k} = {v}' for k, v in loop.items()) or 'that point'}"}
    at_line, value = seen[-1]
    source = find_in_inputs(value, arrays)
    where = f"block {block}, thread {thread} (warp {thread // 32}, lane {thread % 32})"
    loop_txt = ", ".join(f"{k} = {v}" for k, v in loop.items())
    text = (f"  replay ({', '.join(f'{k}={v}' for k, v in sizes.items())}, seed {REPLAY_SEED}): {frag}[value "
            f"{value_idx}] of {where}{', ' + loop_txt if loop_txt else ''} = {value:.6g}"
            + (f", which is {source}" if source else ("" if np.isfinite(value) else
                                                       " (never written: stale shared memory)")))
    expected = element.get("coord")
    if expected is not None and source:
        text += f"; the tile coordinate it stands for is {list(expected)}"
    return {"obligation": result.obligation, "replayed": True, "fragment": frag, "line": at_line,
            "value": value if np.isfinite(value) else str(value), "source": source, "sizes": sizes,
            "block": list(block), "thread": thread, "value_index": value_idx, "loop": loop, "text": text}


def replay_all(kernel: ir.Kernel, report, path: str) -> list[dict]:
    out = []
    for r in report.results:
        if getattr(r, "status", None) == "violated":
            try:
                out.append(replay_one(kernel, r, path))
            except ArgusError as e:  # the replay itself faults (e.g. the out-of-bounds access the verifier found)
                where = f" at {e.span}" if e.span is not None else ""
                out.append({"obligation": r.obligation, "replayed": False, "error": e.message,
                            "text": f"  replay: the interpreter stopped{where}: {e.message}"})
    return out
