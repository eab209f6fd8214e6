"""Prompts for an LLM planner, and the parsing of its replies.

A reply must hold one fenced code block with one Argus kernel. Malformed replies (no code block,
code in another language, a reply cut off at the token limit) are not errors of the run: they go
back to the model as feedback, like a counterexample does.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["SYSTEM", "build_messages", "parse_reply", "Parsed"]

SYSTEM = """You write GPU kernels in Argus, a tile language that is verified with Z3 before it runs.
Reply with exactly one kernel in one fenced code block marked ```argus, and nothing that is not Argus
(no Python, CUDA or host code: it would not run).

The language in brief:
- `kernel NAME<P=default, ...>(x: f32[M, N], ...) -> out: f32[M, N]:` then an indented body. Sizes (M, N, K)
  stay symbolic; <...> are compile-time constants. One output. Writing an input is an error.
- Required: `grid(x[, y[, z]])` (use cdiv(N, BLOCK)), `block(threads)` (a multiple of 32).
- `tag x[i, j] = (i, j)` on inputs; `tag out[i, j] = (i, j) once` is the output contract: out[i, j] must get
  a value computed from elements tagged (i, ...), exactly once. Reductions drop the reduced tag component.
  A vector broadcast along the rows is tagged `tag bias[j] = (*, j)` (`*` matches any row).
- `contract C[i, j] = max(sum(A[i, k] * B[k, j] for k) + bias[j], 0.0)` states what each output element is
  (operators, reductions over every k exactly once, padding); the verifier checks the kernel computes it.
- `load(x[r0 : r0 + R, c0 : c0 + C], tv=((threads), (values)):(strides), mask=True, other=0.0)` gives a
  fragment: thread t, value v holds the tile element at row-major flat index layout(t, v). mask=True guards
  the ragged edges. `store(out[...], frag, mask=True, where=cond)`.
- Elementwise + - * /, max(a, b), min(a, b), exp, exp2, log, log2, sqrt, rsqrt, recip, tanh, abs, neg;
  scalars broadcast. `reduce_sum/reduce_max(x, axis=1, scope=warp, lanes=0b11111)`, `reshape`, `transpose`.
- `shared(f32[BM, BK], layout=...)`, `barrier()`, `copy_async(dst, src, tv=..., mask=True)`, `commit()`,
  `wait(n)`, `mma(a, b, acc)` (atom=fma), `for kt in range(cdiv(K, BK)):`, `if`,
  `assert tag(a)[1] == kt * BK + coord(a)[1]` (the exact k of each value: it anchors the contract's coverage).
- block_id.x/.y/.z, thread_id, warp_id, lane_id. `requires N <= COLS` states a precondition on sizes.

Every candidate is checked (parse and types), verified for all sizes (bounds, races, barriers, tags,
output written exactly once), run against the PyTorch reference on several seeds and shapes, and
timed against PyTorch eager. Counterexamples name the block, thread, element and line: fix exactly
what they say.

Example (correct and verified):
```argus
kernel vecadd<BLOCK=1024>(x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, BLOCK))
    block(256)
    tag x[i] = (i,)
    tag y[i] = (i,)
    tag out[i] = (i,) once
    RUNS = (256, BLOCK // 256):(BLOCK // 256, 1)
    base = block_id.x * BLOCK
    xs = load(x[base : base + BLOCK], tv=RUNS, mask=True)
    ys = load(y[base : base + BLOCK], tv=RUNS, mask=True)
    store(out[base : base + BLOCK], xs + ys, mask=True)
```
"""


def build_messages(task_source: str, task_name: str, arg_names: list, knowledge: str, start: str | None,
                   memory: str, feedback: str | None) -> list[dict]:
    """The chat messages of one proposal."""
    parts = [f"## Task {task_name}", "Write an Argus kernel computing this PyTorch model's forward. The kernel's "
             f"inputs are the forward's tensors in order ({', '.join(arg_names)}); its one output is the result.",
             "```python", task_source.rstrip("\n"), "```"]
    if knowledge:
        parts += ["## Techniques that apply (knowledge base)", knowledge]
    if start:
        parts += ["## A verified starting point (improve it: faster, still verified)", "```argus",
                  start.rstrip("\n"), "```"]
    if memory:
        parts.append(memory)
    if feedback:
        parts += ["## Feedback on your last candidate (fix this first)", feedback]
    parts.append("Reply with one ```argus code block holding the whole kernel.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


@attrs.define
class Parsed:
    source: str | None
    error: str | None  # the feedback for a malformed reply


_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
_OTHER = {"python", "py", "cuda", "cpp", "c++", "c", "triton", "ptx", "rust", "javascript", "js", "bash", "sh"}


def parse_reply(text: str, finish_reason: str | None = None) -> Parsed:
    """The kernel of a reply, or the reason it has none."""
    if finish_reason == "length":
        return Parsed(None, "your reply was cut off at the token limit (truncated): reply with a shorter, complete "
                            "kernel in one ```argus block")
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text or "")]
    closed = (text or "").count("```") % 2 == 0
    if not blocks:
        return Parsed(None, "your reply has no code block: put the whole kernel in one ```argus block")
    for lang, body in blocks:
        if lang in ("argus", "arg") or (lang == "" and re.search(r"^\s*kernel\s+\w+", body, re.M)):
            if not closed and body is blocks[-1][1]:
                return Parsed(None, "your reply's code block is not closed (truncated?): reply with the complete "
                                    "kernel in one closed ```argus block")
            return Parsed(body.strip("\n") + "\n", None)
    langs = sorted({lang or "unmarked" for lang, _ in blocks})
    other = [lang for lang in langs if lang in _OTHER]
    what = f"in another language ({', '.join(other)})" if other else f"not Argus ({', '.join(langs)})"
    return Parsed(None, f"your code block is {what}: only Argus kernels run here (no host code is ever executed); "
                        "reply with one ```argus block starting with `kernel`")
