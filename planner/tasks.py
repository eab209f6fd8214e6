"""Tasks in the KernelBench convention, read with or without PyTorch.

A task is a Python file with a PyTorch `Model`, `get_inputs()` and `get_init_inputs()`; its sizes
are module-level integer constants (upper-case names). `read_task` reads what a planner needs from
the file's syntax tree alone (no torch): the size constants, the other constants, the shapes
`get_inputs()` builds, the forward's argument names and the declared operator chain `OPS`.
`traced_ops` derives the operator chain from the `torch.fx` graph instead (torch needed), and
`load_module` imports the task with its size constants replaced (scaled-down checks).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import attrs

__all__ = ["Task", "read_task", "load_module", "traced_ops", "task_files", "scaled_sizes", "check_plan"]


@attrs.define
class Task:
    path: Path
    name: str
    sizes: dict  # upper-case integer constants: the task's sizes
    constants: dict  # the other literal constants (floats, tuples)
    input_shapes: list  # per get_inputs() entry: a tuple of size names / ints, or None when unreadable
    args: list  # forward's argument names (after self)
    init_inputs: list  # get_init_inputs() evaluated against the constants
    declared_ops: tuple | None  # the module's OPS, when it declares one
    source: str
    level: str = ""  # the folder's name when it is levelN (the suite's levels)

    def shapes_at(self, sizes: dict) -> list[tuple[int, ...]]:
        """The concrete input shapes for the given size values."""
        out = []
        for shape in self.input_shapes:
            if shape is None:
                raise ValueError(f"{self.path}: cannot read the shape of an input of get_inputs()")
            out.append(tuple(int(sizes[d]) if isinstance(d, str) else int(d) for d in shape))
        return out


def task_files(path: str | Path) -> list[Path]:
    """A task file, or every task file (`*.py`, not starting with '_') under a folder, sorted."""
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.rglob("*.py") if not f.name.startswith("_"))
    return [p]


def _literal(node, env: dict):
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand, env)
    if isinstance(node, ast.BinOp):
        a, b = _literal(node.left, env), _literal(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b, ast.Div: lambda: a / b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    return ast.literal_eval(node)


def _shape_of(call, env) -> tuple | None:
    """`torch.randn(B, D)` (or rand / ones / zeros / empty with sizes as arguments) -> ("B", "D")."""
    if not isinstance(call, ast.Call):
        return None
    dims = []
    for a in call.args:
        if isinstance(a, ast.Name) and isinstance(env.get(a.id), int):
            dims.append(a.id)
        elif isinstance(a, ast.Constant) and isinstance(a.value, int):
            dims.append(a.value)
        elif isinstance(a, ast.Tuple | ast.List):
            return _shape_of(ast.Call(func=call.func, args=list(a.elts), keywords=[]), env)
        else:
            return None
    return tuple(dims)


def _returned_list(fn: ast.FunctionDef) -> list | None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.List | ast.Tuple):
            return list(node.value.elts)
    return None


def read_task(path: str | Path) -> Task:
    """The planner's view of a task file, from its syntax tree (torch is not imported)."""
    path = Path(path)
    source = path.read_text()
    tree = ast.parse(source, str(path))
    sizes, constants, declared = {}, {}, None
    funcs, model = {}, None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            try:
                value = _literal(node.value, {**sizes, **constants})
            except (ValueError, TypeError, SyntaxError, KeyError, ZeroDivisionError):
                continue
            if name == "OPS":
                declared = tuple(value)
            elif name.isupper() and isinstance(value, int) and not isinstance(value, bool):
                sizes[name] = value
            else:
                constants[name] = value
        elif isinstance(node, ast.FunctionDef):
            funcs[node.name] = node
        elif isinstance(node, ast.ClassDef) and node.name == "Model":
            model = node
    env = {**sizes, **constants}
    shapes = [_shape_of(e, env) for e in (_returned_list(funcs["get_inputs"]) or [])] if "get_inputs" in funcs else []
    init = []
    if "get_init_inputs" in funcs:
        for e in _returned_list(funcs["get_init_inputs"]) or []:
            try:
                init.append(_literal(e, env))
            except (ValueError, TypeError, SyntaxError, KeyError):
                init.append(None)
    args = []
    if model is not None:
        for item in model.body:
            if isinstance(item, ast.FunctionDef) and item.name == "forward":
                args = [a.arg for a in item.args.args[1:]]
    return Task(path=path, name=path.stem, sizes=sizes, constants=constants, input_shapes=shapes, args=args,
                init_inputs=init, declared_ops=declared, source=source,
                level=path.parent.name if path.parent.name.startswith("level") else "")


def load_module(path: str | Path, sizes: dict | None = None) -> ModuleType:
    """Import the task (torch needed) with its size constants replaced by `sizes`."""
    path = Path(path)
    name = f"argus_task_{abs(hash((str(path), tuple(sorted((sizes or {}).items())))))}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    for k, v in (sizes or {}).items():
        setattr(mod, k, int(v))
    return mod


def scaled_sizes(task: Task, caps=(19, 70)) -> list[dict]:
    """Sizes scaled down from the task's for the interpreter: each size capped at each of `caps`
    (odd and no multiple of a tile, so ragged edges are exercised), smallest first, no repeats."""
    out = []
    for cap in caps:
        s = {k: min(v, cap) for k, v in task.sizes.items()}
        if s not in out:
            out.append(s)
    return out


def check_plan(task: Task, backend: str, seeds: int = 2) -> list:
    """(sizes, seed) pairs to check a candidate on, smallest first: sizes scaled down from the task's
    in the interpreter; on the GPU one scaled-down shape (small failures are found cheaply) and then
    the task's own sizes. The first shape gets `seeds` seeds."""
    shapes = scaled_sizes(task)
    if backend == "cuda":
        shapes = shapes[:1] + [dict(task.sizes)]
    plan, seed = [], 0
    for i, s in enumerate(shapes):
        for _ in range(seeds if i == 0 else 1):
            plan.append((s, seed))
            seed += 1
    return plan


# torch.fx node targets -> the operator names that `OPS` uses
_FUNCTION_OPS = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu", "softmax": "softmax",
    "log_softmax": "log_softmax", "layer_norm": "layer_norm", "cumsum": "cumsum", "amax": "amax",
    "bmm": "bmm", "hardtanh": "hardtanh", "leaky_relu": "leaky_relu", "avg_pool1d": "avg_pool1d",
    "max_pool2d": "max_pool2d", "rsqrt": "rsqrt",
}


def traced_ops(path: str | Path) -> tuple[str, ...]:
    """The operator chain of the task's forward, from its torch.fx graph (torch needed).

    Names as in `OPS`: matmul (matmul_ta / matmul_tb when an operand is a transposed input), bmm,
    bias (add of a 1-D input), add (add of a same-shape input), scale (multiply by a constant),
    activations, row operations and reductions (sum0 for a sum over axis 0), transpose, pooling.
    """
    import torch
    import torch.fx

    task = read_task(path)
    mod = load_module(path)
    model = mod.Model(*mod.get_init_inputs())
    graph = torch.fx.symbolic_trace(model).graph
    rank = {a: len(s) if s is not None else None for a, s in zip(task.args, task.input_shapes, strict=False)}
    transposed: set = set()
    ops: list[str] = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
        args = list(node.args)
        if target in ("T", "t") or (target == "transpose" and node.op == "call_method"):
            if node.op == "call_method" and args and getattr(args[0], "op", "") == "placeholder":
                transposed.add(node)
                continue
            ops.append("transpose")
            continue
        if target == "getattr" and len(args) == 2 and args[1] == "T":
            transposed.add(node)
            continue
        if target in ("contiguous", "getattr", "size", "getitem"):
            continue
        if target in ("matmul", "mm"):
            if args[0] in transposed:
                ops.append("matmul_ta")
            elif args[1] in transposed:
                ops.append("matmul_tb")
            else:
                ops.append("matmul")
            continue
        if target in ("add", "iadd"):
            other = next((a for a in args if getattr(a, "op", "") == "placeholder"), None)
            if other is not None:
                ops.append("bias" if rank.get(other.name) == 1 else "add")
                continue
            ops.append("add_const")
            continue
        if target in ("mul", "imul"):
            if any(isinstance(a, int | float) for a in args):
                ops.append("scale")
                continue
            if len(args) == 2 and args[0] is args[1]:
                ops.append("square")
                continue
            ops.append("mul")
            continue
        if target == "gelu":
            ops.append("gelu_tanh" if node.kwargs.get("approximate") == "tanh" else "gelu")
            continue
        if target in ("sum", "mean"):
            dim = node.kwargs.get("dim", args[1] if len(args) > 1 else None)
            ops.append(f"{target}0" if dim == 0 else target)
            continue
        ops.append(_FUNCTION_OPS.get(target, target))
    if not ops and transposed:
        ops.append("transpose")
    return _canonical(tuple(ops))


def _canonical(ops: tuple) -> tuple:
    """Folds patterns the graph spells in several nodes: x * rsqrt(mean(x * x) + eps) is rms_norm."""
    if ops == ("square", "mean", "add_const", "rsqrt", "mul"):
        return ("rms_norm",)
    return ops
