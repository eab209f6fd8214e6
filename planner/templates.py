"""Parametric Argus templates for the task families the offline policy can express.

`plan(task_ops, task)` maps an operator chain (from the torch.fx graph or the task's `OPS`) to a
`Family`: which template, the epilogue, and the knobs the bandit may turn, each knob's values
named after the knowledge-base technique that justifies it. `render(family, knobs)` writes the
`.arg` text. Every rendered kernel still goes through the front end, the verifier and the
numerical test: a template is a starting point, never trusted.

A chain no template expresses gives `NotExpressible` with the reason.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["Family", "NotExpressible", "plan", "render", "ACTIVATIONS"]


class NotExpressible(Exception):
    """The offline templates cannot express this task (the message says why)."""


# elementwise epilogues, as statements on the fragment variable `{v}`; each gives one expression
ACTIVATIONS = {
    "relu": "max({v}, 0.0)",
    "leaky_relu": "max({v}, {v} * 0.01)",
    "sigmoid": "recip(exp(-{v}) + 1.0)",
    "tanh": "tanh({v})",
    "silu": "{v} * recip(exp(-{v}) + 1.0)",
    "gelu_tanh": "{v} * (tanh(({v} + {v} * {v} * {v} * 0.044715) * 0.7978845608028654) + 1.0) * 0.5",
    "hardtanh": "min(max({v}, -1.0), 1.0)",
}
# operators no template expresses, with the reason (none at present: a GEMM followed by a row
# operation is refused in `plan`, with its reason)
UNSUPPORTED_REASONS: dict[str, str] = {}
POOLS = {"avg_pool1d": 1, "max_pool2d": 2}  # the pooling operators the pool template expresses: pooled axes
# exact (erf) GELU: the language has no erf, so erf(|x| / sqrt 2) is Abramowitz and Stegun's 7.1.26
# (absolute error at most 1.5e-7, under the f32 tolerance of the numerical test, which still checks
# every candidate against torch's exact GELU); gelu(x) = (x + |x| erf(|x| / sqrt 2)) / 2
GELU_ERF = [
    "g1 = abs({v})",
    "g2 = recip(g1 * 0.23164188826636045 + 1.0)",  # t = 1 / (1 + p z), z = |x| / sqrt 2, p = 0.3275911
    "g3 = ((((g2 * 1.061405429 - 1.453152027) * g2 + 1.421413741) * g2 - 0.284496736) * g2 + 0.254829592) * g2",
    "g4 = ({v} + g1 * (1.0 - g3 * exp({v} * {v} * -0.5))) * 0.5",  # exp(-z^2) = exp(-x^2 / 2)
]
GEMM_ROW_OPS = ("sum", "mean", "layer_norm", "rms_norm")  # row operations after a GEMM that padding zeros leave right
ROW_OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "amax", "mean")
MATMULS = ("matmul", "matmul_ta", "matmul_tb", "bmm")
EPILOGUE = (*ACTIVATIONS, "gelu", "bias", "add", "scale")

DEFAULT_TILE = [128, 64, 16, 8, 4]  # (BM, BN, BK, TM, TN): gemm_simt's, the fastest measured on the H200


@attrs.define
class Family:
    name: str  # elementwise | rowwise | colreduce | gemm | transpose
    kernel: str  # the kernel's name
    args: list  # the kernel's input names, in the task's forward order
    ranks: list  # each input's rank
    ops: tuple  # the operator chain
    scale: float | None = None
    defaults: dict = attrs.field(factory=dict)  # the knobs this template turns, with their default values
    restrict: dict = attrs.field(factory=dict)  # knob -> the only values this instance supports
    window: int = 0  # pooling: the window, equal to the stride

    def knobs(self, kb=None) -> dict[str, tuple[str, list]]:
        """knob -> (knowledge-base technique, values): the bandit's arms for this family."""
        from argus_verify.planner.knowledge import knobs_for

        out = {}
        for name, (tech, values) in knobs_for(self.name, kb).items():
            if name not in self.defaults:
                continue
            if name in self.restrict:
                values = [v for v in values if v in self.restrict[name]]
            if values:
                out[name] = (tech, values)
        return out


# names the templates use inside kernels: a task argument of one of these names is renamed
RESERVED = {"a", "b", "acc", "ga", "gb", "bv", "dv", "xs", "ys", "m0", "n0", "r0", "kt", "k0", "z", "r", "c0",
            "sA", "sB", "s", "nk", "KT", "VEC", "A_COPY", "B_COPY", "STAGES", "e", "m", "mean", "var", "ms",
            "out", "C", "M", "N", "K", "Bt", "RUNS", "BLOCK",
            "COLS", "ROWS", "BM", "BN", "BK", "TM", "TN", "T", "V", "CH", "i0", "j0", "bb", "v", "carry",
            "LANES", "ROW"} | {f"y{i}" for i in range(1, 10)} | {f"g{i}" for i in range(1, 5)}


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return "k_" + s if not s[:1].isalpha() else s


def _arg(name: str) -> str:
    s = _ident(name)
    return s + "_in" if s in RESERVED else s


def _scale_of(task) -> float | None:
    vals = [v for v in task.init_inputs if isinstance(v, int | float) and not isinstance(v, bool)]
    return float(vals[0]) if vals else None


def plan(ops: tuple, task) -> Family:
    """The template family for the chain `ops` of `task` (a `tasks.Task`)."""
    ops = tuple(ops)
    for op in ops:
        if op in UNSUPPORTED_REASONS:
            raise NotExpressible(f"{op}: {UNSUPPORTED_REASONS[op]}")
    args = [_arg(a) for a in task.args]
    ranks = [len(s) if s is not None else 0 for s in task.input_shapes]
    name = _ident(task.name)
    scale = _scale_of(task)
    if ops and ops[0] in MATMULS:
        rest = ops[1:]
        if ops[0] == "matmul" and len(rest) == 1 and rest[0] in GEMM_ROW_OPS:
            n = task.input_shapes[1][1]
            cols = _pow2_at_least(max(128, int(task.sizes.get(n, 0) if isinstance(n, str) else n)))
            if cols > 1024:
                raise NotExpressible(f"matmul followed by {rest[0]}: rows of {cols} columns; the GEMM-then-row "
                                     "template keeps a whole row of C in one warp's registers (at most 1024)")
            return Family("gemmrow", name, args, ranks, ops, scale, defaults={"cols": cols})
        if ops[0] == "matmul" and len(rest) == 1 and rest[0] in ("softmax", "log_softmax", "amax"):
            raise NotExpressible(f"matmul followed by {rest[0]}: the GEMM-then-row template holds whole rows of C "
                                 "padded to a power of two, and the padding (zeros) would enter the row's sum of "
                                 "exponentials (softmax) or its max (amax); the language has no per-value select to "
                                 "exclude it (the plain row template loads with "
                                 "other=-inf, which a GEMM result cannot)")
        bad = [o for o in rest if o not in EPILOGUE]
        if bad:
            raise NotExpressible(f"{ops[0]} followed by {bad[0]}: a row reduction or normalisation after a GEMM "
                                 "needs whole rows of C in one block, but the GEMM template tiles N across "
                                 "blocks, and no fused GEMM-then-row template exists yet")
        if ops[0] == "bmm" and any(o in ("bias", "add") for o in rest):
            raise NotExpressible("bias or residual after a batched matmul: no template yet")
        plain = ops[0] == "matmul"
        return Family("gemm", name, args, ranks, ops, scale,
                      defaults={"tile": DEFAULT_TILE, "unroll": 0, "stages": 0},
                      restrict={} if plain else {"stages": [0]})
    if ops and all(o in ACTIVATIONS or o in ("scale", "add", "gelu") for o in ops):
        if not all(r == ranks[0] for r in ranks) or ranks[0] != 2:
            raise NotExpressible("the elementwise template takes 2-D inputs of one shape")
        return Family("elementwise", name, args, ranks, ops, scale, defaults={"vec": 4})
    if len(ops) == 1 and ops[0] in ROW_OPS:
        if ranks != [2]:
            raise NotExpressible("the row template takes one 2-D input")
        cols = max(128, _pow2_at_least(task.sizes.get(task.input_shapes[0][1], 0)
                                       if isinstance(task.input_shapes[0][1], str) else task.input_shapes[0][1]))
        if cols > 8192:
            raise NotExpressible(f"rows of {cols} elements do not fit one warp's registers (the row template "
                                 "holds a whole row per warp, at most 8192)")
        return Family("rowwise", name, args, ranks, ops, scale, defaults={"rows": 4, "cols": cols})
    if ops == ("sum0",):
        if ranks != [2]:
            raise NotExpressible("the column template takes one 2-D input")
        return Family("colreduce", name, args, ranks, ops, scale, defaults={"vec": 1})
    if len(ops) == 1 and ops[0] in POOLS:
        window = _pool_window(task, ops[0])
        if ranks != [POOLS[ops[0]] + 2]:
            axes = "length" if POOLS[ops[0]] == 1 else "H, W"
            raise NotExpressible(f"the pool template takes one [batch, channels, {axes}] input")
        return Family("pool", name, args, ranks, ops, scale, defaults={"threads": 128}, window=window)
    if ops == ("cumsum",):
        _scan_axis(task, ranks)
        return Family("scan", name, args, ranks, ops, scale, defaults={"rows": 4})
    if ops == ("transpose",):
        return Family("transpose", name, args, ranks, ops, scale, defaults={"swizzle": 1})
    raise NotExpressible(f"no template for the operator chain {' -> '.join(ops) or '(empty)'}")


def _scan_axis(task, ranks: list) -> None:
    """The scan template takes one 2-D input scanned along its last axis (`torch.cumsum(x, dim=1)`)."""
    import ast

    calls = [n for n in ast.walk(ast.parse(task.source)) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", None)) == "cumsum"]
    dims = []
    for c in calls:
        given = c.args[1:2] + [kw.value for kw in c.keywords if kw.arg == "dim"]
        try:
            dims.append(ast.literal_eval(given[0]) if given else None)
        except ValueError:
            dims.append(None)
    if ranks != [2] or len(dims) != 1 or dims[0] not in (1, -1):
        raise NotExpressible("the scan template takes one 2-D input scanned along its last axis "
                             "(torch.cumsum(x, dim=1))")


def _pool_window(task, op: str) -> int:
    """The window of the task's pooling call (`F.avg_pool1d(x, 4, 4)`), read from its syntax tree: it
    must equal the stride (no overlap) and have no padding, dilation or ceil mode."""
    import ast

    calls = [n for n in ast.walk(ast.parse(task.source)) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", None)) == op]
    if len(calls) != 1:
        raise NotExpressible(f"{op}: the pool template reads the window from one {op}(...) call in the task")
    call = calls[0]
    names = ["input", "kernel_size", "stride", "padding"]
    given = {names[i]: a for i, a in enumerate(call.args[:4])}
    given.update({kw.arg: kw.value for kw in call.keywords})
    try:
        vals = {k: ast.literal_eval(v) for k, v in given.items() if k != "input"}
    except ValueError:
        raise NotExpressible(f"{op}: the window, stride and padding must be literal integers") from None
    k = vals.get("kernel_size")
    s = vals.get("stride", k)
    if (not isinstance(k, int) or s != k or vals.get("padding", 0) != 0 or vals.get("dilation", 1) != 1
            or any(o in vals and vals[o] is not False for o in ("ceil_mode", "return_indices"))):
        raise NotExpressible(f"{op}: the pool template takes square non-overlapping windows (stride = window, no "
                             f"padding, dilation or ceil mode); the task has {vals}")
    if not 1 < k <= 8:
        raise NotExpressible(f"{op}: windows of 2 to 8 elements per axis (the task has {k})")
    return k


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _epilogue(ops, scale, v: str, lines: list, extra: dict, indent="    ") -> str:
    """Statements applying the elementwise chain to fragment `v`; returns the result's name."""
    for n, op in enumerate(ops, 1):
        *steps, expr = _formula(op, v, extra, scale)
        lines += [f"{indent}{st}" for st in steps]
        lines.append(f"{indent}y{n} = {expr}")
        v = f"y{n}"
    return v


def _formula(op: str, v: str, operands: dict, scale) -> list:
    """`op` applied to `v` as the kernels compute it: the statements it needs first (`g1 = ...`,
    GELU's steps) and then its expression. Kernels and contracts (`_chain_contract`) share it."""
    if op in ("bias", "add"):
        return [f"{v} + {operands[op]}"]
    if op == "scale":
        return [f"{v} * {scale!r}"]
    if op == "gelu":
        *steps, last = (g.format(v=v) for g in GELU_ERF)
        return [*steps, last.split(" = ", 1)[1]]
    return [ACTIVATIONS[op].format(v=v)]


def render(f: Family, knobs: dict | None = None) -> str:
    k = {**f.defaults, **(knobs or {})}
    return {"elementwise": _elementwise, "rowwise": _rowwise, "gemm": _gemm, "transpose": _transpose,
            "colreduce": _colreduce, "pool": _pool, "scan": _scan, "gemmrow": _gemmrow}[f.name](f, k)


def _gemmrow(f: Family, k: dict) -> str:
    """A GEMM whose block computes whole rows of C (8 rows, one warp each, a row padded to COLS
    columns held as the row template holds it), then the row operation on the registers. The
    padding columns are zeros (B's masked loads), which sums and squares ignore."""
    a, b = f.args[0], f.args[1]
    op = f.ops[1]
    reduce_out = op in ("sum", "mean")
    warp = "scope=warp, lanes=0b11111"
    lines = [
        f"# matmul -> {op}: each block computes 8 whole rows of C (one warp per row, lane l holds columns"
        " 4 l + 128 c + e), k-tiles of B staged through shared memory, then the row operation in registers",
        f"kernel {f.kernel}<COLS={int(k['cols'])}, BK=8>({a}: f32[M, K], {b}: f32[K, N]) -> out: "
        f"{'f32[M]' if reduce_out else 'f32[M, N]'}:",
        "    requires N <= COLS",
        "    grid(cdiv(M, 8))",
        "    block(256)",
        f"    tag {a}[i, k] = (i, k)",
        f"    tag {b}[k, j] = (k, j)",
        "    tag out[i] = (i,) once" if reduce_out else "    tag out[i, j] = (i, j) once",
        "    r0 = block_id.x * 8",
        "    sB = shared(f32[BK, COLS])",
        "    ROW = ((32, 8), (4, COLS // 128)):((4, COLS), (1, 128))",
        "    acc = zeros(f32[8, COLS], tv=ROW)",
        "    for kt in range(cdiv(K, BK)):",
        "        k0 = kt * BK",
        f"        gb = load({b}[k0 : k0 + BK, 0 : COLS], tv=(256, (4, BK * COLS // 1024)):(4, (1, 1024)), mask=True)",
        "        store(sB, gb)",
        "        barrier()",
        f"        a = load({a}[r0 : r0 + 8, k0 : k0 + BK], tv=((32, 8), BK):((0, BK), 1), mask=True)",
        "        b = load(sB, tv=((32, 8), (4, COLS // 128, BK)):((4, 0), (1, 128, COLS)))",
        "        acc = mma(a, b, acc)",
        "        barrier()",
    ]
    lines += _row_op(op, "acc", "8", warp)
    return "\n".join(lines) + "\n"


def _scan(f: Family, k: dict) -> str:
    """Inclusive prefix sum of each row: one warp per row walks it 32 columns at a time; a
    Hillis-Steele scan over the lanes (shfl_up by 1, 2, 4, 8, 16; a lane below the distance adds
    nothing: its shuffled value is multiplied by min(lane_id // d, 1) = 0), then the running total of
    the earlier chunks (lane 31's sum, broadcast by shfl_idx) is added."""
    x = f.args[0]
    lines = [
        "# inclusive prefix sum of each row: one warp per row, 32 columns per step, a shuffle scan over the lanes",
        f"kernel {f.kernel}<ROWS={int(k['rows'])}>({x}: f32[M, N]) -> out: f32[M, N]:",
        "    grid(cdiv(M, ROWS))",
        "    block(32 * ROWS)",
        f"    tag {x}[i, j] = (i,)                 # a scan combines a row's elements: the row is the tag",
        "    tag out[i, j] = (i,) once",
        "    r0 = block_id.x * ROWS",
        "    LANES = ((32, ROWS), 1):((1, 32), 0)",
        "    carry = zeros(f32[ROWS, 32], tv=LANES)",
        "    for c0 in range(0, N, 32):",
        f"        v = load({x}[r0 : r0 + ROWS, c0 : c0 + 32], tv=LANES, mask=True)",
    ]
    for d in (1, 2, 4, 8, 16):
        lines.append(f"        v = v + shfl_up(v, {d}) * min(lane_id // {d}, 1)")
    lines += [
        "        v = v + carry",
        "        store(out[r0 : r0 + ROWS, c0 : c0 + 32], v, mask=True)",
        "        carry = shfl_idx(v, 31)",
    ]
    return "\n".join(lines) + "\n"


def _pool(f: Family, k: dict) -> str:
    """Non-overlapping pooling: thread t owns output element j0 + t; its window's values are one run
    (1-D) or K runs of one row each (2-D) of the loaded tile, reshaped so the window is its own axes."""
    t, w, x = int(k["threads"]), f.window, f.args[0]
    if f.ops[0] == "avg_pool1d":
        return "\n".join([
            f"# average pooling, window {w} = stride: thread t averages the {w} consecutive inputs of output j0 + t",
            f"kernel {f.kernel}<T={t}, K={w}>({x}: f32[B, C, L]) -> out: f32[B, C, LO]:",
            "    requires K * LO <= L and L < K * LO + K        # LO = floor(L / K), as PyTorch (a tail is dropped)",
            "    grid(cdiv(LO, T), C, B)",
            "    requires C <= 65535 and B <= 65535   # CUDA launches at most 65535 blocks along y and z",
            "    block(T)",
            f"    tag {x}[b, c, l] = (l // K, l % K, b, c)",
            "    tag out[b, c, j] = (j, b, c) once",
            "    j0 = block_id.x * T",
            f"    xs = load({x}[block_id.z, block_id.y, K * j0 : K * j0 + K * T], tv=(T, K):(K, 1), mask=True)",
            "    s = reduce_sum(reshape(xs, T, K), axis=1)",
            f"    store(out[block_id.z, block_id.y, j0 : j0 + T], reshape(s / {float(w)!r}, T), mask=True)",
        ]) + "\n"
    return "\n".join([
        f"# max pooling, {w}x{w} windows = stride: thread t owns output column j0 + t of output row block_id.y,"
        " one batch after another",
        f"kernel {f.kernel}<T={t}, K={w}>({x}: f32[B, C, H, W]) -> out: f32[B, C, HO, WO]:",
        "    requires K * HO <= H and H < K * HO + K and K * WO <= W and W < K * WO + K   # floor, as PyTorch",
        "    grid(cdiv(WO, T), HO, C)",
        "    requires HO <= 65535 and C <= 65535   # CUDA launches at most 65535 blocks along y and z",
        "    block(T)",
        f"    tag {x}[b, c, h, w] = (h % K, w // K, w % K, h // K, b, c)",
        "    tag out[b, c, i, j] = (j, i, b, c) once",
        "    i0 = block_id.y",
        "    j0 = block_id.x * T",
        "    for bb in range(B):",
        f"        xs = load({x}[bb, block_id.z, K * i0 : K * i0 + K, K * j0 : K * j0 + K * T], "
        "tv=(T, (K, K)):(K, (1, K * T)), mask=True, other=-inf)",
        "        m = reduce_max(reduce_max(reshape(xs, K, T, K), axis=2), axis=0)",
        "        store(out[bb, block_id.z, i0, j0 : j0 + T], reshape(m, T), mask=True)",
    ]) + "\n"


def _colreduce(f: Family, k: dict) -> str:
    vec = int(k["vec"])
    x = f.args[0]
    return "\n".join([
        f"# sum along axis 0: thread t owns {vec} consecutive columns and walks the rows CH at a time",
        f"kernel {f.kernel}<V={vec}, CH=8>({x}: f32[M, N]) -> out: f32[N]:",
        "    grid(cdiv(N, 256 * V))",
        "    block(256)",
        f"    tag {x}[i, j] = (i, j)",
        "    tag out[j] = (j,) once",
        f"    contract out[j] = sum({x}[i, j] for i)",
        "    c0 = block_id.x * (256 * V)",
        "    acc = zeros(f32[1, 256 * V], tv=(256, (V, CH)):(V, (1, 0)))",
        "    for r0 in range(0, M, CH):",
        f"        xs = load({x}[r0 : r0 + CH, c0 : c0 + 256 * V], tv=(256, (V, CH)):(V, (1, 256 * V)), mask=True)",
        "        acc = acc + reduce_sum(xs, axis=0)",
        "    store(out[c0 : c0 + 256 * V], reshape(acc, 256 * V), mask=True)",
    ]) + "\n"


def _elementwise(f: Family, k: dict) -> str:
    vec = int(k["vec"])
    block = 256 * vec
    x = f.args[0]
    params = ", ".join(f"{a}: f32[M, N]" for a in f.args)
    lines = [
        f"# {' -> '.join(f.ops)}, elementwise: each thread holds {vec} consecutive elements of one row",
        f"kernel {f.kernel}<BLOCK={block}>({params}) -> out: f32[M, N]:",
        "    grid(M, cdiv(N, BLOCK))  # rows along x: CUDA takes 2**31 - 1 blocks there, 65535 along y",
        "    block(256)",
        *[f"    tag {a}[i, j] = (i, j)" for a in f.args],
        "    tag out[i, j] = (i, j) once",
        f"    contract out[i, j] = {_chain_contract(f.ops, f.scale, f'{x}[i, j]', {'add': f'{f.args[-1]}[i, j]'})}",
        "    RUNS = (256, BLOCK // 256):(BLOCK // 256, 1)",
        "    r = block_id.x",
        "    c0 = block_id.y * BLOCK",
        f"    xs = load({x}[r : r + 1, c0 : c0 + BLOCK], tv=RUNS, mask=True)",
    ]
    extra = {}
    if "add" in f.ops:
        lines.append(f"    ys = load({f.args[1]}[r : r + 1, c0 : c0 + BLOCK], tv=RUNS, mask=True)")
        extra["add"] = "ys"
    v = _epilogue(f.ops, f.scale, "xs", lines, extra)
    lines.append(f"    store(out[r : r + 1, c0 : c0 + BLOCK], {v}, mask=True)")
    return "\n".join(lines) + "\n"


def _row_op(op: str, x: str, rows: str, warp: str) -> list:
    """The lines that finish a row operation on fragment `x` (`rows` rows of the block from r0,
    one warp per row) and store it: softmax, log_softmax, layer_norm, rms_norm in place; sum,
    mean, amax as one value per row, from each row's first lane."""
    full = f"out[r0 : r0 + {rows}, 0 : COLS]"
    if op in ("softmax", "log_softmax"):
        res = "e / s" if op == "softmax" else f"({x} - m) - log(s)"
        return [f"    m = reduce_max({x}, axis=1, {warp})",
                f"    e = exp2(({x} - m) * 1.4426950408889634)",
                f"    s = reduce_sum(e, axis=1, {warp})",
                f"    store({full}, {res}, mask=True)"]
    if op == "layer_norm":
        return [f"    mean = reduce_sum({x}, axis=1, {warp}) / N",
                f"    var = reduce_sum({x} * {x}, axis=1, {warp}) / N - mean * mean",
                f"    store({full}, ({x} - mean) * rsqrt(var + 0.00001), mask=True)"]
    if op == "rms_norm":
        return [f"    ms = reduce_sum({x} * {x}, axis=1, {warp}) / N",
                f"    store({full}, {x} * rsqrt(ms + 0.00001), mask=True)"]
    fn = "reduce_max" if op == "amax" else "reduce_sum"
    res = "s / N" if op == "mean" else "s"
    return [f"    s = {fn}({x}, axis=1, {warp})",
            f"    store(out[r0 : r0 + {rows}], reshape({res}, {rows}), mask=True, where=lane_id == 0)"]


def _rowwise(f: Family, k: dict) -> str:
    rows, cols = int(k["rows"]), int(k["cols"])
    op = f.ops[0]
    x = f.args[0]
    reduce_out = op in ("sum", "amax", "mean")
    out_type = "f32[M]" if reduce_out else "f32[M, N]"
    other = ", other=-inf" if op in ("softmax", "log_softmax", "amax") else ""
    lines = [
        f"# {op} of each row: one warp per row, {rows} rows per block; lane l holds columns 4 l + 128 c + e",
        f"kernel {f.kernel}<COLS={cols}, ROWS={rows}>({x}: f32[M, N]) -> out: {out_type}:",
        "    requires N <= COLS",
        "    grid(cdiv(M, ROWS))",
        "    block(32 * ROWS)",
        f"    tag {x}[i, j] = (i, j)",
        "    tag out[i] = (i,) once" if reduce_out else "    tag out[i, j] = (i, j) once",
        "    r0 = block_id.x * ROWS",
        f"    xs = load({x}[r0 : r0 + ROWS, 0 : COLS], tv=((32, ROWS), (4, COLS // 128)):((4, COLS), (1, 128)),"
        f" mask=True{other})",
    ]
    lines += _row_op(op, "xs", "ROWS", "scope=warp, lanes=0b11111")
    return "\n".join(lines) + "\n"


def _gemm(f: Family, k: dict) -> str:
    bm, bn, bk, tm, tn = (int(v) for v in k["tile"])
    if int(k.get("stages", 0)) >= 2:
        return _gemm_pipelined(f, k)
    kind = f.ops[0]
    a, b = f.args[0], f.args[1]
    batched = kind == "bmm"
    ta, tb = kind == "matmul_ta", kind == "matmul_tb"
    ashape = "Bt, M, K" if batched else ("K, M" if ta else "M, K")
    bshape = "Bt, K, N" if batched else ("N, K" if tb else "K, N")
    cshape = "Bt, M, N" if batched else "M, N"
    params = [f"{a}: f32[{ashape}]", f"{b}: f32[{bshape}]"]
    extra = {}
    for name, op in zip(f.args[2:], [o for o in f.ops if o in ("bias", "add")], strict=False):
        params.append(f"{name}: f32[N]" if op == "bias" else f"{name}: f32[M, N]")
        extra[op] = name
    lines = [
        f"# {' -> '.join(f.ops)}: {bm}x{bn} tiles of C per block, a {tm}x{tn} micro-tile per thread, k-tiles of"
        f" {bk} staged through shared memory",
        f"kernel {f.kernel}<BM={bm}, BN={bn}, BK={bk}, TM={tm}, TN={tn}>({', '.join(params)}) -> C: f32[{cshape}]:",
        f"    grid(cdiv(N, BN), cdiv(M, BM){', Bt' if batched else ''})",
        f"    requires M <= 65535 * BM{' and Bt <= 65535' if batched else ''}   # CUDA: 65535 blocks along y and z",
        "    block((BM // TM) * (BN // TN))",
    ]
    lines.append("    policy(min_blocks_per_sm=2)        # two resident blocks per SM (as gemm_simt)")
    if batched:
        lines += [f"    tag {a}[z, i, k] = (z * M + i, z * K + k)", f"    tag {b}[z, k, j] = (z * K + k, z * N + j)",
                  "    tag C[z, i, j] = (z * M + i, z * N + j) once", "    z = block_id.z"]
    else:
        lines += [f"    tag {a}[{'k, i' if ta else 'i, k'}] = (i, k)",
                  f"    tag {b}[{'j, k' if tb else 'k, j'}] = (k, j)",
                  *_epilogue_tags(extra),
                  "    tag C[i, j] = (i, j) once",
                  _gemm_contract(f, f"{a}[{'k, i' if ta else 'i, k'}]", f"{b}[{'j, k' if tb else 'k, j'}]", extra)]
    zi = "z, " if batched else ""
    lines += [
        "    m0 = block_id.y * BM",
        "    n0 = block_id.x * BN",
        "    sA = shared(f32[BM, BK])",
        "    sB = shared(f32[BK, BN])",
        "    acc = zeros(f32[BM, BN], tv=((BN // TN, BM // TM), (TN, TM)):((TN, TM * BN), (1, BN)))",
    ]
    unroll = int(k.get("unroll", 0))
    lines.append(f"    for kt in range(cdiv(K, BK){f', unroll={unroll}' if unroll else ''}):")
    lines.append("        k0 = kt * BK")
    va = BM_BK = bm * bk // 256
    vb = bk * bn // 256
    if ta:
        lines.append(f"        ga = load({a}[k0 : k0 + BK, m0 : m0 + BM], tv=(256, {va}):({va}, 1), mask=True)")
        lines.append("        store(sA, transpose(ga))")
    else:
        w = min(4, BM_BK)
        lines.append(f"        ga = load({a}[{zi}m0 : m0 + BM, k0 : k0 + BK], tv=(256, ({w}, {va // w})):"
                     f"({w}, (1, {256 * w})), mask=True)")
        lines.append("        store(sA, ga)")
    if tb:
        lines.append(f"        gb = load({b}[n0 : n0 + BN, k0 : k0 + BK], tv=(256, {vb}):({vb}, 1), mask=True)")
        lines.append("        store(sB, transpose(gb))")
    else:
        lines.append(f"        gb = load({b}[{zi}k0 : k0 + BK, n0 : n0 + BN], tv=(256, {vb}):({vb}, 1), mask=True)")
        lines.append("        store(sB, gb)")
    lines += [
        "        barrier()",
        "        a = load(sA, tv=((BN // TN, BM // TM), (BK, TM)):((0, TM * BK), (1, BK)))",
        "        b = load(sB, tv=((BN // TN, BM // TM), (TN, BK)):((TN, 0), (1, BN)))",
        "        acc = mma(a, b, acc)",
        "        barrier()",
    ]
    _gemm_epilogue(f, extra, lines, zi)
    return "\n".join(lines) + "\n"


def _gemm_contract(f: Family, a: str, b: str, extra: dict) -> str:
    """`contract C[i, j] = ...`: the product, then the epilogue's chain."""
    operands = {"bias": f"{extra.get('bias')}[j]", "add": f"{extra.get('add')}[i, j]"}
    return f"    contract C[i, j] = {_chain_contract(f.ops[1:], f.scale, f'sum({a} * {b} for k)', operands)}"


def _chain_contract(ops, scale, v: str, operands: dict) -> str:
    """The elementwise chain `ops` applied to the contract expression `v`, with the formulas the
    kernel uses (`_formula`), so that the verifier checks the operators, not only the tags. A
    contract has no statements: GELU's steps are substituted into its expression."""
    for op in ops:
        *steps, expr = _formula(op, v if op in ("bias", "add") else f"({v})", operands, scale)
        named = {}
        for st in steps:
            name, e = st.split(" = ", 1)
            named[name] = _substituted(e, named)
        v = _substituted(expr, named)
    return v


def _substituted(expr: str, named: dict) -> str:
    for name, e in named.items():
        expr = re.sub(rf"\b{name}\b", f"({e})", expr)
    return expr


def _epilogue_tags(extra: dict) -> list:
    """Tags of a GEMM epilogue's operands, so that the verifier checks which elements reach C[i, j]:
    a bias varies along the columns only (`*` matches every row), a residual is C-shaped."""
    out = []
    if "bias" in extra:
        out.append(f"    tag {extra['bias']}[j] = (*, j)")
    if "add" in extra:
        out.append(f"    tag {extra['add']}[i, j] = (i, j)")
    return out


def _gemm_epilogue(f: Family, extra: dict, lines: list, zi: str) -> None:
    if "bias" in extra:
        lines.append(f"    bv = load({extra['bias']}[n0 : n0 + BN], "
                     "tv=((BN // TN, BM // TM), (TN, TM)):((TN, 0), (1, 0)), mask=True)")
        extra["bias"] = "bv"
    if "add" in extra:
        lines.append(f"    dv = load({extra['add']}[m0 : m0 + BM, n0 : n0 + BN], tv=((BN // TN, BM // TM), (TN, TM)):"
                     "((TN, TM * BN), (1, BN)), mask=True)")
        extra["add"] = "dv"
    v = _epilogue(f.ops[1:], f.scale, "acc", lines, extra)
    lines.append(f"    store(C[{zi}m0 : m0 + BM, n0 : n0 + BN], {v}, mask=True)")


def _transpose(f: Family, k: dict) -> str:
    x = f.args[0]
    layout = "layout=Swizzle(5, 0, 5) o (T, T):(T, 1)" if int(k["swizzle"]) else "layout=row_major(T, T)"
    return "\n".join([
        "# out = x^T through a T x T shared tile; the swizzle makes the column walk conflict-free",
        f"kernel {f.kernel}<T=32>({x}: f32[M, N]) -> out: f32[N, M]:",
        "    grid(cdiv(N, T), cdiv(M, T))",
        "    requires M <= 65535 * T   # CUDA launches at most 65535 blocks along y",
        "    block(256)",
        f"    tag {x}[i, j] = (i, j)",
        "    tag out[j, i] = (i, j) once",
        f"    contract out[j, i] = {x}[i, j]",
        "    m0 = block_id.y * T",
        "    n0 = block_id.x * T",
        f"    s = shared(f32[T, T], {layout})",
        f"    a = load({x}[m0 : m0 + T, n0 : n0 + T], tv=(256, 4):(1, 256), mask=True)",
        "    store(s, a)",
        "    barrier()",
        "    b = load(s, tv=((T, 8), 4):((T, 1), 8))",
        "    store(out[n0 : n0 + T, m0 : m0 + T], transpose(b), mask=True)",
    ]) + "\n"


def _gemm_pipelined(f: Family, k: dict) -> str:
    """Plain GEMM (and its epilogues) with a STAGES-deep cp.async pipeline (gemm_pipelined's schedule)."""
    bm, bn, bk, tm, tn = (int(v) for v in k["tile"])
    stages = int(k["stages"])
    a, b = f.args[0], f.args[1]
    params = [f"{a}: f32[M, K]", f"{b}: f32[K, N]"]
    extra = {}
    for name, op in zip(f.args[2:], [o for o in f.ops if o in ("bias", "add")], strict=False):
        params.append(f"{name}: f32[N]" if op == "bias" else f"{name}: f32[M, N]")
        extra[op] = name
    unroll = int(k.get("unroll", 0))
    lines = [
        f"# {' -> '.join(f.ops)}: {bm}x{bn} tiles, {stages}-stage cp.async pipeline over k-tiles of {bk}",
        f"kernel {f.kernel}<BM={bm}, BN={bn}, BK={bk}, TM={tm}, TN={tn}, STAGES={stages}>({', '.join(params)})"
        " -> C: f32[M, N]:",
        "    grid(cdiv(N, BN), cdiv(M, BM))",
        "    requires M <= 65535 * BM   # CUDA launches at most 65535 blocks along y",
        "    block((BM // TM) * (BN // TN))",
        "    policy(min_blocks_per_sm=2)",
        f"    tag {a}[i, k] = (i, k)",
        f"    tag {b}[k, j] = (k, j)",
        *_epilogue_tags(extra),
        "    tag C[i, j] = (i, j) once",
        _gemm_contract(f, f"{a}[i, k]", f"{b}[k, j]", extra),
        "    m0 = block_id.y * BM",
        "    n0 = block_id.x * BN",
        "    KT = cdiv(K, BK)",
        "    sA = shared(f32[STAGES, BM, BK])",
        "    sB = shared(f32[STAGES, BK, BN])",
        "    VEC = min(4, BM * BK // 256)",
        "    A_COPY = (256, (VEC, BM * BK // 256 // VEC)):(VEC, (1, 256 * VEC))",
        "    B_COPY = (256, BK * BN // 256):(BK * BN // 256, 1)",
        "    acc = zeros(f32[BM, BN], tv=((BN // TN, BM // TM), (TN, TM)):((TN, TM * BN), (1, BN)))",
        "    for s in range(STAGES - 1):",
        "        if s < KT:",
        f"            copy_async(sA[s], {a}[m0 : m0 + BM, s * BK : s * BK + BK], mask=True, tv=A_COPY)",
        f"            copy_async(sB[s], {b}[s * BK : s * BK + BK, n0 : n0 + BN], mask=True, tv=B_COPY)",
        "        commit()",
        f"    for kt in range(KT{f', unroll={unroll}' if unroll else ''}):",
        "        wait(STAGES - 2)",
        "        barrier()",
        "        nk = kt + STAGES - 1",
        "        if nk < KT:",
        f"            copy_async(sA[nk % STAGES], {a}[m0 : m0 + BM, nk * BK : nk * BK + BK], mask=True, tv=A_COPY)",
        f"            copy_async(sB[nk % STAGES], {b}[nk * BK : nk * BK + BK, n0 : n0 + BN], mask=True, tv=B_COPY)",
        "        commit()",
        "        a = load(sA[kt % STAGES], tv=((BN // TN, BM // TM), (BK, TM)):((0, TM * BK), (1, BK)))",
        "        b = load(sB[kt % STAGES], tv=((BN // TN, BM // TM), (TN, BK)):((TN, 0), (1, BN)))",
        # anchors: the exact k of every operand value, from which coverage of the contract's sum counts
        "        assert tag(a)[1] == kt * BK + coord(a)[1]",
        "        assert tag(b)[0] == kt * BK + coord(b)[0]",
        "        acc = mma(a, b, acc)",
    ]
    _gemm_epilogue(f, extra, lines, "")
    return "\n".join(lines) + "\n"
