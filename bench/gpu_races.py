"""What the GPU does with the bugs the new race and warp-collective obligations report.

For each kernel of tests/test_global_races.py and tests/test_warp_collectives.py: the verifier's
verdict (the obligation and status of every result that is not proved), then LAUNCHES launches on
the GPU, each in a child process with a time limit (a partial warp collective may hang), compared
with each other and with the interpreter in lockstep. A race shows as launches that disagree, or
as a result other than lockstep's; a hang as a timeout.

    python3 bench/gpu_races.py --out DIR [--launches 20]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def kernels() -> dict:
    import test_global_races as R
    import test_warp_collectives as W

    return {
        "copy_own_tiles": (R.COPY.format(start="i0"), {"N": 100_000}),
        "copy_overlapping_tiles": (R.COPY.format(start="i0 // 2"), {"N": 100_000}),
        "readback_own": (R.READ_BACK.format(barrier="    barrier()\n", start="i0", tv=R.SAME_THREAD), {"N": 100_000}),
        "readback_next_block": (R.READ_BACK.format(barrier="    barrier()\n", start="i0 + 1", tv=R.SAME_THREAD),
                                {"N": 100_000}),
        "readback_other_thread_no_barrier": (R.READ_BACK.format(barrier="", start="i0", tv=R.OTHER_THREAD),
                                             {"N": 100_000}),
        "shuffle_whole_warps": (W.SHUFFLE.format(cond="warp_id == 1"), {"N": 100_000}),
        "shuffle_half_warp": (W.SHUFFLE.format(cond="lane_id < 16"), {"N": 100_000}),
        "warp_sum_ragged": (W.ROW_TOTAL.format(cond="row * 32 + lane_id < M * 32 - 5"), {"M": 4096}),
    }


def _launches(text: str, sizes: dict, launches: int, q) -> None:
    """In a child: `launches` launches of the kernel on the same inputs, each result sent back."""
    try:
        from argus_verify import api
        from argus_verify.reference import make_inputs
        from argus_verify.runtime.cuda_backend import run_cuda

        path = Path("/tmp/gpu_races_gpu.arg")
        path.write_text(text)
        k = api.load(str(path))
        inputs = make_inputs(k.ir, sizes, np.random.default_rng(7))
        arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
        program = k.program()
        for _ in range(launches):
            out = run_cuda(k.ir, program, arrays, sizes, {})
            q.put(("ok", {n: np.asarray(v) for n, v in out.items()}))
    except Exception as e:  # noqa: BLE001 - reported per kernel
        q.put(("error", f"{type(e).__name__}: {e}"))
    q.put(("done", None))


def on_gpu(text: str, sizes: dict, launches: int, timeout: float) -> dict:
    """The launches in a child process with a time limit: a partial warp collective may hang."""
    import queue

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_launches, args=(text, sizes, launches, q))
    p.start()
    results, errors, hung = [], [], 0
    while True:
        try:
            kind, got = q.get(timeout=timeout)
        except queue.Empty:
            hung = 1
            p.kill()
            break
        if kind == "done":
            break
        (results if kind == "ok" else errors).append(got)
    p.join(5)
    return {"results": results, "errors": errors, "hung": hung}


def interp(text: str, sizes: dict) -> dict | str:
    from argus_verify import api
    from argus_verify.reference import make_inputs
    from argus_verify.runtime import interp as I

    path = Path("/tmp/gpu_races_interp.arg")
    path.write_text(text)
    k = api.load(str(path))
    inputs = make_inputs(k.ir, sizes, np.random.default_rng(7))
    arrays = {n: v for n, v in inputs.items() if isinstance(v, np.ndarray)}
    try:
        return I.run(k.ir, arrays, sizes, {})
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:120]}"


def verdict(text: str) -> list:
    from argus_verify import api

    path = Path("/tmp/gpu_races_verify.arg")
    path.write_text(text)
    rep = api.load(str(path)).verify()
    return sorted({(r.obligation, r.status) for r in rep.results if r.status not in ("proved", "warning")})


def same(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[n], b[n], equal_nan=True) for n in a)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/gpu_races")
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds without a launch finishing: a hang")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (text, sizes) in kernels().items():
        v = verdict(text)
        ref = interp(text, sizes)
        g = on_gpu(text, sizes, args.launches, args.timeout)
        distinct = []
        for r in g["results"]:
            if not any(same(r, d) for d in distinct):
                distinct.append(r)
        vs_interp = "interpreter stops: " + ref if isinstance(ref, str) else (
            "all equal lockstep" if distinct and all(same(d, ref) for d in distinct) else
            f"{sum(not same(d, ref) for d in distinct)} of {len(distinct)} distinct results differ from lockstep")
        row = {"kernel": name, "verdict": v, "launches": len(g["results"]), "distinct": len(distinct),
               "hung": g["hung"], "errors": g["errors"][:2], "vs_interpreter": vs_interp}
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "gpu_races.json").write_text(json.dumps(rows, indent=1))
    print("\n| kernel | verdict | launches | distinct results | hung | against the interpreter |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['kernel']} | {r['verdict'] or 'all proved'} | {r['launches']} | {r['distinct']} | {r['hung']} | "
              f"{r['vs_interpreter']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
