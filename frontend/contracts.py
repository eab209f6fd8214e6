"""Output contracts: `contract C[i, j] = sum(A[i, k] * B[k, j] for k)`.

A contract states, for each output element, the input elements it is computed from and the
operators that combine them. It is read by the verifier (every element exactly once, the right
operator, the identity as padding) and generates no code. The contract language is small on
purpose: input elements indexed by variables, the reductions of `semantics.REDUCE_OPS` over one
variable, the float operators of `semantics.FLOAT_BINARY` and the functions of
`semantics.FLOAT_UNARY`, and numeric constants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lark import Tree

from argus_verify import ir, semantics
from argus_verify.frontend import header

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder

_BINARY_CALLS = {"max", "min"}  # max(a, b) / min(a, b) with two arguments: elementwise


def contract_decl(b: KernelBuilder, n: Tree):
    name_tok, names, expr = n.children
    name = str(name_tok)
    tp = b.tensors.get(name)
    if tp is None:
        raise b.err(name_tok, f"'contract' names unknown tensor '{name}'")
    if not tp.output:
        raise b.err(name_tok, f"'{name}' is an input; a contract describes an output")
    if any(c.tensor == name for c in b.contracts):
        raise b.err(name_tok, f"output '{name}' has two contracts")
    idx = header.index_variables(b, names, "contract", name, tp.rank)
    body = _expr(b, expr, set(idx))
    b.contracts.append(ir.Contract(name, tuple(idx), body, b.sp(n)))


def _expr(b: KernelBuilder, n, bound: set) -> ir.CExpr:
    kind = n.data if isinstance(n, Tree) else None
    if kind == "subscript":
        return _element(b, n, bound)
    if kind == "generator_call":
        return _reduction(b, n, bound)
    if kind == "call":
        return _call(b, n, bound)
    if kind == "binop":
        left, op, right = n.children
        if str(op) not in semantics.FLOAT_BINARY:
            raise b.err(op, f"'{op}' is not an operator of contracts (they use "
                            f"{', '.join(o for o in semantics.FLOAT_BINARY if not o.isalpha())})")
        return ir.CBin(str(op), _expr(b, left, bound), _expr(b, right, bound), b.sp(n))
    if kind == "neg":
        return ir.CUn("neg", _expr(b, n.children[0], bound), b.sp(n))
    if kind in ("int_lit", "float_lit"):
        return ir.CConst(float(str(n.children[0]).replace("_", "")) if kind == "float_lit"
                         else float(int(str(n.children[0]).replace("_", ""), 0)), b.sp(n))
    if kind == "name" and str(n.children[0]) in b.consts:
        return ir.CConst(float(b.consts[str(n.children[0])]), b.sp(n))
    if kind == "name":
        p = next((p for p in b.params if p.name == str(n.children[0])), None)
        if isinstance(p, ir.ScalarParam):
            if not ir.is_float(p.dtype):
                raise b.err(n, f"'{p.name}' is an integer parameter; a contract uses floating-point scalars "
                               "(integers index its elements through the contract's variables)")
            return ir.CScalar(p.name, b.sp(n))
    if kind == "name" and str(n.children[0]) in ("inf", "nan"):
        return ir.CConst(float(str(n.children[0])), b.sp(n))
    raise b.err(n, "a contract is built from input elements (x[i, j]), reductions (sum(... for k)), "
                   "operators, math functions and constants")


def _element(b: KernelBuilder, n: Tree, bound: set) -> ir.CElem:
    base, subs = n.children
    if not (isinstance(base, Tree) and base.data == "name"):
        raise b.err(base, "a contract reads elements of an input tensor: x[i, j]")
    name = str(base.children[0])
    tp = b.tensors.get(name)
    if tp is None:
        raise b.err(base, f"unknown tensor '{name}' in a contract")
    if tp.output:
        raise b.err(base, f"'{name}' is an output; a contract reads inputs")
    idx = []
    for item in subs.children:
        inner = item.children[0] if item.data == "sub_index" else None
        if not (isinstance(inner, Tree) and inner.data == "name"):
            raise b.err(item, "contract indices are index variables (out[i] = x[i, j] ...)")
        var = str(inner.children[0])
        if var not in bound:
            raise b.err(item, f"'{var}' is not bound here: bind it in the contract's target "
                              f"(contract out[{var}] = ...) or by a reduction (sum(... for {var}))")
        idx.append(var)
    if len(idx) != tp.rank:
        raise b.err(subs, f"tensor '{name}' has rank {tp.rank}; the contract indexes it with {len(idx)}")
    return ir.CElem(name, tuple(idx), b.sp(n))


def _reduction(b: KernelBuilder, n: Tree, bound: set) -> ir.CReduce:
    fn, body, var_tok = n.children
    op = str(fn.children[0]) if isinstance(fn, Tree) and fn.data == "name" else None
    if op not in semantics.REDUCE_OPS:
        raise b.err(fn, f"a contract reduces with {', '.join(semantics.REDUCE_OPS)}")
    var = str(var_tok)
    if var in bound:
        raise b.err(var_tok, f"'{var}' is already bound; a reduction needs a variable of its own")
    red = ir.CReduce(op, var, _expr(b, body, bound | {var}), b.sp(n))
    if not any(var in e.indices for e in ir.contract_elements(red.body)):
        raise b.err(var_tok, f"the reduction over '{var}' reads no element indexed by '{var}'")
    return red


def _call(b: KernelBuilder, n: Tree, bound: set) -> ir.CExpr:
    fn, args = n.children
    name = str(fn.children[0]) if isinstance(fn, Tree) and fn.data == "name" else None
    argv = list(args.children) if args is not None else []
    if any(isinstance(a, Tree) and a.data == "kwarg" for a in argv):
        raise b.err(n, "contract functions take no keyword arguments")
    argv = [a.children[0] if isinstance(a, Tree) and a.data == "arg" else a for a in argv]
    if name in _BINARY_CALLS and len(argv) == 2:
        return ir.CBin(name, _expr(b, argv[0], bound), _expr(b, argv[1], bound), b.sp(n))
    if name in semantics.FLOAT_UNARY and len(argv) == 1:
        return ir.CUn(name, _expr(b, argv[0], bound), b.sp(n))
    if name in semantics.REDUCE_OPS:
        raise b.err(n, f"write a reduction as {name}(... for k)")
    raise b.err(fn, f"'{name}' is not a function of contracts (they use "
                    f"{', '.join(semantics.FLOAT_UNARY)}, and max/min of two values)")


def outside_contract(b: KernelBuilder, n: Tree):
    """A generator expression in kernel code."""
    raise b.err(n, "'... for k' inside a call belongs to contracts (contract out[i] = sum(x[i, k] for k))")

