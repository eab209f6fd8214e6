"""A corpus of correct copy kernels (out[i] = x[i]) that differ in how they compute indices, for the
mutation study (bench/mutate.py) to mutate:

    python bench/copy_corpus.py --out DIR [--count 40 --seed 0]
    python bench/mutate.py --only DIR/*.arg --jobs J --out DIR/mutation

The specs exercise a few index patterns each; the verifier is measured on kernels it has not seen.
These vary what decides which element a thread touches: the thread-value layout (contiguous or
strided values), whole-tile or per-thread views, the ragged tail's guard (a mask, an `if` on the
thread, a `where=`), a grid of tiles or a grid-stride loop over them, and a round trip through
shared memory with the warps permuted; and 2-D tiles on a 2-D grid or a persistent grid walking the tiles in
row- or column-major order; and per-thread copies through a permutation of the threads (the writer of an
element is unique only because the index map is a bijection); and row sums (a chunk loop, the warp's
shuffle reduction, partials through shared memory; one block per row or a grid-stride loop over rows).
Every kernel is generated correct: `--check` verifies each
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


REFERENCE_2D = '''"""Reference of a generated 2-D copy kernel (bench/copy_corpus.py)."""

SHAPES = {"M": 200, "N": 136}


def reference(x):
    return {"out": x.copy()}
'''


def kernel_text_2d(name: str, bm: int, bn: int, block: int, order: str, schedule: str, staging: str,
                   grid: int) -> str:
    """A 2-D copy of BM x BN tiles: a 2-D grid, or a persistent 1-D grid walking the tiles in row-
    or column-major order (the tile -> (m0, n0) map the schedule lemma must invert)."""
    vals = bm * bn // block
    head = [f"kernel {name}(x: f32[M, N]) -> out: f32[M, N]:"]
    if schedule == "grid2d":
        head.append(f"    grid(cdiv(N, {bn}), cdiv(M, {bm}))")
    else:
        head.append(f"    grid({grid})")
    head += [f"    block({block})", "    tag x[i, j] = (i, j)", "    tag out[i, j] = (i, j) once",
             "    contract out[i, j] = x[i, j]", ""]
    body = []
    if staging == "shared":
        body.append(f"s = shared(f32[{bm}, {bn}])")
    ind = ""
    if schedule == "grid2d":
        body += [f"m0 = block_id.y * {bm}", f"n0 = block_id.x * {bn}"]
    else:
        body += [f"TM = cdiv(M, {bm})", f"TN = cdiv(N, {bn})",
                 f"for tile in range(block_id.x, TM * TN, {grid}):"]
        ind = "    "
        if order == "rows":
            body += [f"{ind}m0 = (tile // TN) * {bm}", f"{ind}n0 = (tile % TN) * {bn}"]
        else:
            body += [f"{ind}m0 = (tile % TM) * {bm}", f"{ind}n0 = (tile // TM) * {bn}"]
    tv = f"({block}, {vals}):(1, {block})"
    body.append(f"{ind}a = load(x[m0 : m0 + {bm}, n0 : n0 + {bn}], tv={tv}, mask=True)")
    if staging == "shared":
        tv2 = f"({block}, {vals}):({vals}, 1)"  # the other threads read what was stored
        body += [f"{ind}store(s, a)", f"{ind}barrier()", f"{ind}b = load(s, tv={tv2})", f"{ind}barrier()"]
    value = "b" if staging == "shared" else "a"
    body.append(f"{ind}store(out[m0 : m0 + {bm}, n0 : n0 + {bn}], {value}, mask=True)")
    return "\n".join(head + ["    " + b for b in body]) + "\n"


def configurations_2d():
    for (bm, bn), block, order, schedule, staging in itertools.product(
            ((32, 32), (16, 64), (64, 16)), (128, 256), ("rows", "columns"), ("grid2d", "persistent"),
            ("direct", "shared")):
        if schedule == "grid2d" and order == "columns":
            continue
        yield dict(bm=bm, bn=bn, block=block, order=order, schedule=schedule, staging=staging)


# permutations of the block's threads (B a power of two): element base + p(thread_id) is the thread's
PERMUTATIONS = (
    "(thread_id * 5) % {B}",
    "(thread_id * 3 + 7) % {B}",
    "{B} - 1 - thread_id",
    "(thread_id % 32) * ({B} // 32) + thread_id // 32",
    "thread_id ^ 5",
    "thread_id ^ (thread_id // 32)",
    "(lane_id ^ warp_id) + 32 * warp_id",
)


def kernel_text_perm(name: str, block: int, perm: str, guard: str) -> str:
    """Each thread copies the element its permutation names: output-once and the contract hold only
    because p is a bijection of [0, B) (the per-thread writer tabulation must see it)."""
    p = perm.format(B=block)
    store = "    store(out[base + p : base + p + 1], xs)"
    lines = [f"kernel {name}(x: f32[N]) -> out: f32[N]:", f"    grid(cdiv(N, {block}))", f"    block({block})",
             "    tag x[i] = (i,)", "    tag out[i] = (i,) once", "    contract out[i] = x[i]", "",
             f"    base = block_id.x * {block}", f"    p = {p}",
             f"    xs = load(x[base + p : base + p + 1], tv=({block}, 1):(0, 0), mask=True)"]
    if guard == "if":
        lines += ["    if base + p < N:", "    " + store]
    else:
        lines.append("    store(out[base + p : base + p + 1], xs, where=base + p < N)")
    return "\n".join(lines) + "\n"


def configurations_perm():
    for block, perm, guard in itertools.product((64, 128, 256), PERMUTATIONS, ("if", "where")):
        yield dict(block=block, perm=perm, guard=guard)


REFERENCE_ROWSUM = '''"""Reference of a generated row-sum kernel (bench/copy_corpus.py)."""

SHAPES = {"M": 37, "N": 1500}
TOLERANCE = 1e-4


def reference(x):
    return {"out": x.sum(axis=1, dtype="float64").astype(x.dtype)}
'''


def kernel_text_rowsum(name: str, chunk: int, block: int, schedule: str, grid: int) -> str:
    """out[i] = sum(x[i, j] for j): a chunk loop accumulating per thread, the warp's shuffle
    reduction, then (for several warps) the partials through shared memory."""
    vals = chunk // block
    warps = block // 32
    head = [f"kernel {name}(x: f32[M, N]) -> out: f32[M]:",
            "    grid(M)" if schedule == "rows" else f"    grid({grid})", f"    block({block})",
            "    tag x[i, j] = (i, j)", "    tag out[i] = (i,) once", "    contract out[i] = sum(x[i, j] for j)", ""]
    body = []
    if warps > 1:
        body.append(f"partial = shared(f32[1, {warps}])")
    ind = ""
    if schedule == "rows":
        body.append("row = block_id.x")
    else:
        body.append(f"for row in range(block_id.x, M, {grid}):")
        ind = "    "
    body += [f"{ind}acc = zeros(f32[1, 1], tv=({block}, {vals}):(0, 0))",
             f"{ind}for c0 in range(0, N, {chunk}):",
             f"{ind}    xs = load(x[row : row + 1, c0 : c0 + {chunk}], tv=({block}, {vals}):({vals}, 1), mask=True)",
             f"{ind}    acc = acc + reduce_sum(xs, axis=1)",
             f"{ind}w = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)"]
    if warps > 1:
        body += [f"{ind}store(partial[0 : 1, warp_id : warp_id + 1], w, where=lane_id == 0)", f"{ind}barrier()",
                 f"{ind}parts = load(partial, tv=({block}, {warps}):(0, 1))",
                 f"{ind}total = reduce_sum(parts, axis=1)",
                 f"{ind}store(out[row : row + 1], reshape(total, 1), where=thread_id == 0)"]
        if schedule != "rows":
            body.append(f"{ind}barrier()")
    else:
        body.append(f"{ind}store(out[row : row + 1], reshape(w, 1), where=thread_id == 0)")
    return "\n".join(head + ["    " + b for b in body]) + "\n"


def configurations_rowsum():
    for chunk, block, schedule in itertools.product((256, 512, 1024), (32, 128, 256), ("rows", "stride")):
        if chunk % block == 0:
            yield dict(chunk=chunk, block=block, schedule=schedule)


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
    shapes = [{"N": n} for n in (1, 31, 257, 1000, 2053)] if len(kernel.sizes) == 1 else \
        [{"M": m, "N": n} for m, n in ((1, 1), (33, 70), (200, 136), (64, 64), (9, 1500))]
    reduces = len(kernel.outputs[0].shape) < len(kernel.params[0].shape)
    for sizes in shapes:
        shape = tuple(sizes.values())
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        out = run(kernel, {"x": x}, sizes)["out"]
        want = x.sum(axis=1) if reduces else x
        if not (np.allclose(out, want, rtol=1e-4, atol=1e-4) if reduces else np.array_equal(out, want)):
            return f"wrong at {sizes}"
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
    configs2 = list(configurations_2d())
    rng.shuffle(configs2)
    configs3 = list(configurations_perm())
    rng.shuffle(configs3)
    configs4 = list(configurations_rowsum())
    # the families in proportion to their sizes
    total = len(configs) + len(configs2) + len(configs3)
    n2 = round(args.count * len(configs2) / total)
    n3 = round(args.count * len(configs3) / total)
    chosen = [(c, "1d") for c in configs[: args.count - n2 - n3]] + [(c, "2d") for c in configs2[:n2]] + \
        [(c, "perm") for c in configs3[:n3]] + [(c, "rowsum") for c in configs4]  # (all of the few row sums)
    dropped = 0
    for i, (c, family) in enumerate(chosen):
        if family == "rowsum":
            name = f"rowsum_{i:03d}_{c['schedule']}_{c['block']}"
            text, ref = kernel_text_rowsum(name, grid=rng.choice((3, 4, 7)), **c), REFERENCE_ROWSUM
        elif family == "perm":
            name = f"copyperm_{i:03d}_{c['guard']}"
            text, ref = kernel_text_perm(name, **c), REFERENCE
        elif family == "2d":
            name = f"copy2d_{i:03d}_{c['schedule']}_{c['order']}_{c['staging']}"
            text, ref = kernel_text_2d(name, grid=rng.choice((3, 5, 8)), **c), REFERENCE_2D
        else:
            name = f"copy_{i:03d}_{c['view']}_{c['guard']}_{c['schedule']}_{c['staging']}"
            text, ref = kernel_text(name, grid=rng.choice((3, 4, 7)), **c), REFERENCE
        path = args.out / f"{name}.arg"
        path.write_text(text)
        (args.out / f"{name}.ref.py").write_text(ref)
        why = check(path) if args.check else ""
        if why:
            dropped += 1
            print(f"{path.name}: dropped, {why}", file=sys.stderr)
            path.unlink()
            (args.out / f"{name}.ref.py").unlink()
    print(f"{len(chosen) - dropped} kernels in {args.out} ({dropped} dropped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
