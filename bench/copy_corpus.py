"""A corpus of correct copy kernels (out[i] = x[i]) that differ in how they compute indices, for the
mutation study (bench/mutate.py) to mutate:

    python bench/copy_corpus.py --out DIR [--count 40 --seed 0]
    python bench/mutate.py --only DIR/*.arg --jobs J --out DIR/mutation

The specs exercise a few index patterns each; the verifier is measured on kernels it has not seen.
These vary what decides which element a thread touches: the thread-value layout (contiguous or
strided values), whole-tile or per-thread views, the ragged tail's guard (a mask, an `if` on the
thread, a `where=`), a grid of tiles or a grid-stride loop over them, and a round trip through
shared memory with the warps permuted. Every kernel is generated correct: `--check` verifies each
one and runs it in the interpreter on ragged sizes, and drops (and reports) any that is not both
proved and right, so that a false alarm of the verifier shows up here too.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from pathlib import Path

REFERENCE = '''"""Reference of a generated copy kernel (bench/copy_corpus.py)."""

SHAPES = {"N": 1000}


def reference(x):
    return {"out": x.copy()}
'''


def kernel_text(name: str, block: int, vals: int, layout: str, view: str, guard: str, schedule: str,
                staging: str, grid: int) -> str:
    """One copy kernel. Per-thread views take one value per thread (vals is 1 there)."""
    tile = block * vals
    head = [f"kernel {name}(x: f32[N]) -> out: f32[N]:"]
    if schedule == "tiles":
        head += [f"    grid(cdiv(N, {tile}))", f"    block({block})"]
    else:
        head += [f"    grid({grid})", f"    block({block})"]
    head += ["    tag x[i] = (i,)", "    tag out[i] = (i,) once", "    contract out[i] = x[i]"]
    body = []
    if staging == "shared":
        body.append(f"s = shared(f32[{tile}])")
    ind = ""
    if schedule == "stride":
        body.append(f"for t in range(block_id.x, cdiv(N, {tile}), {grid}):")
        ind = "    "
        body.append(f"{ind}base = t * {tile}")
    else:
        body.append(f"base = block_id.x * {tile}")
    tv = f"({block}, {vals}):({vals}, 1)" if layout == "contiguous" else f"({block}, {vals}):(1, {block})"
    if view == "tile":
        src, dst, tv_in = f"x[base : base + {tile}]", f"out[base : base + {tile}]", tv
    else:
        src = "x[base + thread_id : base + thread_id + 1]"
        dst = "out[base + thread_id : base + thread_id + 1]"
        tv_in = f"({block}, 1):(0, 0)"
    inside = "base + thread_id < N" if view == "thread" else None
    body.append(f"{ind}xs = load({src}, tv={tv_in}, mask=True)")
    value = "xs"
    if staging == "shared":
        # through shared memory, each warp reading what another warp wrote (a permutation of warps)
        if view == "thread":
            body.append(f"{ind}if {inside}:")
            body.append(f"{ind}    store(s[thread_id : thread_id + 1], xs)")
        else:
            body.append(f"{ind}store(s[0 : {tile}], xs)")
        body.append(f"{ind}barrier()")
        warps = block // 32
        e = f"lane_id + 32 * ((warp_id + 1) % {warps})"
        if view == "thread":
            body.append(f"{ind}e = {e}")
            body.append(f"{ind}if base + e < N:")
            body.append(f"{ind}    ys = load(s[e : e + 1], tv=({block}, 1):(0, 0))")
            body.append(f"{ind}    store(out[base + e : base + e + 1], ys)")
        else:
            body.append(f"{ind}ys = load(s[0 : {tile}], tv={tv})")
            body.append(f"{ind}store({dst}, ys, mask=True)")
        body.append(f"{ind}barrier()")
    elif view == "thread" and guard == "if":
        body.append(f"{ind}if {inside}:")
        body.append(f"{ind}    store({dst}, {value})")
    elif view == "thread" and guard == "where":
        body.append(f"{ind}store({dst}, {value}, where={inside})")
    else:
        body.append(f"{ind}store({dst}, {value}, mask=True)")
    return "\n".join(head + [""] + ["    " + b for b in body]) + "\n"


def configurations():
    for block, vals, layout, view, guard, schedule, staging in itertools.product(
            (64, 128, 256), (1, 2, 4), ("contiguous", "strided"), ("tile", "thread"), ("mask", "if", "where"),
            ("tiles", "stride"), ("direct", "shared")):
        if view == "thread" and (vals != 1 or layout != "contiguous"):
            continue  # a per-thread view holds one value
        if view == "tile" and guard != "mask":
            continue  # a whole-tile view is guarded by its mask
        if staging == "shared" and guard == "where":
            continue
        yield dict(block=block, vals=vals, layout=layout, view=view, guard=guard, schedule=schedule,
                   staging=staging)


def check(path: Path) -> str:
    """"" when the kernel is proved and right on ragged sizes, else why not."""
    import numpy as np

    from argus_verify import smt
    from argus_verify.frontend import compile_file
    from argus_verify.runtime.interp import run

    kernel = compile_file(path)
    rep = smt.verify(kernel, timeout_s=10.0)
    if rep.exit_code != 0:
        return "not proved: " + "; ".join(f"{r.obligation}: {r.message}" for r in rep.results
                                          if r.status != "proved")[:400]
    for n in (1, 31, 257, 1000, 2053):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        out = run(kernel, {"x": x}, {"N": n})["out"]
        if not np.array_equal(out, x):
            return f"wrong at N = {n}"
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for NAME.arg and NAME.ref.py")
    ap.add_argument("--count", type=int, default=40, help="how many kernels (a random sample of the configurations)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="verify and run each kernel; drop those not proved and right")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    configs = list(configurations())
    rng.shuffle(configs)
    args.out.mkdir(parents=True, exist_ok=True)
    dropped = 0
    for i, c in enumerate(configs[: args.count]):
        name = f"copy_{i:03d}_{c['view']}_{c['guard']}_{c['schedule']}_{c['staging']}"
        path = args.out / f"{name}.arg"
        path.write_text(kernel_text(name, grid=rng.choice((3, 4, 7)), **c))
        (args.out / f"{name}.ref.py").write_text(REFERENCE)
        why = check(path) if args.check else ""
        if why:
            dropped += 1
            print(f"{path.name}: dropped, {why}", file=sys.stderr)
            path.unlink()
            (args.out / f"{name}.ref.py").unlink()
    print(f"{min(args.count, len(configs)) - dropped} kernels in {args.out} ({dropped} dropped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
