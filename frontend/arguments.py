"""A builtin's arguments, checked against its declaration (`argus_verify.instructions`).

`call_site` does the checks every builtin shares (keywords it does not take, how many positional
arguments, required keywords, builtins refused for now) and hands the handler a `CallSite`, which
reads the arguments with the declared defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lark import Tree

from argus_verify.instructions import Builtin

if TYPE_CHECKING:
    from argus_verify.frontend.builder import KernelBuilder


def split_args(b: KernelBuilder, args_node) -> tuple[list, dict]:
    """Positional argument nodes, and keyword arguments as {key: (key token, value node)}."""
    args, kwargs = [], {}
    if args_node is None:
        return args, kwargs
    for a in args_node.children:
        if a.data == "kwarg":
            k = str(a.children[0])
            if k in kwargs:
                raise b.err(a.children[0], f"keyword '{k}' given twice")
            kwargs[k] = (a.children[0], a.children[1])
        else:
            if kwargs:
                raise b.err(a, "positional argument after a keyword argument")
            args.append(a.children[0])
    return args, kwargs


def call_site(b: KernelBuilder, decl: Builtin, node, args_node) -> CallSite:
    """The call of `decl` at `node` (errors about the call as a whole point there)."""
    args, kwargs = split_args(b, args_node)
    for k, (knode, _) in kwargs.items():
        if decl.keyword(k) is None:
            allowed = ", ".join(p.name for p in decl.keywords) or "none"
            raise b.err(knode, f"{decl.name}() got an unexpected keyword '{k}' (allowed: {allowed})")
    if not decl.min_positional <= len(args) <= decl.max_positional:
        raise b.err(node, f"{decl.name}() takes {_arity(decl)}, got {len(args)}", note=decl.help)
    for p in decl.keywords:
        if p.required and p.name not in kwargs:
            raise b.err(node, f"{decl.name}() needs {p.name}=: {p.what}", note=decl.help)
    if decl.pending:
        raise b.err(node, f"{decl.name} is not available yet: {decl.pending}")
    return CallSite(b, decl, node, args, kwargs)


def _arity(decl: Builtin) -> str:
    lo, hi = decl.min_positional, decl.max_positional
    if hi == 0:
        return "keyword arguments only" if decl.keywords else "no arguments"
    if lo == hi:
        return f"{lo} positional argument{'s' if lo != 1 else ''}"
    if hi == float("inf"):
        return f"at least {lo} positional argument{'s' if lo != 1 else ''}"
    return f"{lo} to {hi} positional arguments"


class CallSite:
    """One checked call: positional argument nodes in `args`, keywords by name."""

    def __init__(self, b: KernelBuilder, decl: Builtin, node, args: list, kwargs: dict):
        self.b, self.decl, self.node, self.args, self.kwargs = b, decl, node, args, kwargs

    @property
    def name(self) -> str:
        return self.decl.name

    def given(self, key: str) -> bool:
        return key in self.kwargs

    def arg(self, key: str):
        """The value node of keyword `key` (given)."""
        return self.kwargs[key][1]

    def key(self, key: str):
        """The token naming keyword `key` (given)."""
        return self.kwargs[key][0]

    def at(self, key: str):
        """Where an error about keyword `key` points: its value if given, else the call."""
        return self.kwargs[key][1] if key in self.kwargs else self.node

    def flag(self, key: str) -> bool:
        """A True/False keyword, or its declared default."""
        if key not in self.kwargs:
            return bool(self.decl.keyword(key).default)
        node = self.arg(key)
        if isinstance(node, Tree) and node.data in ("true_lit", "false_lit"):
            return node.data == "true_lit"
        raise self.b.err(node, f"{key}= takes True or False")

    def const(self, key: str, what: str | None = None):
        """A compile-time integer keyword, or its declared default."""
        if key not in self.kwargs:
            return self.decl.keyword(key).default
        return self.b.const_int(self.arg(key), what or key)

    def word(self, key: str, message) -> str:
        """A keyword that takes one of a few bare words (scope=warp, atom=fma), or its default;
        `message(word or None)` says what is wrong otherwise."""
        param = self.decl.keyword(key)
        if key not in self.kwargs:
            return param.default
        node = self.arg(key)
        word = str(node.children[0]) if node.data == "name" and self.b.lookup(str(node.children[0])) is None \
            else None
        if word not in param.choices:
            raise self.b.err(node, message(word))
        return word
