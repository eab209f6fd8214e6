"""Parsing `.arg` source with lark into a parse tree with positions.

Syntax errors become `ArgusSyntaxError` with the exact line, column and a message that says what
was expected, never a lark traceback.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import tempfile
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import DedentError, Indenter

from argus_verify.diagnostics import SOURCES, ArgusSyntaxError, Span

GRAMMAR = Path(__file__).with_name("argus.lark")


class _ArgusIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def process(self, stream):
        return super().process(self._comparisons(stream))

    @staticmethod
    def _comparisons(stream):
        """'>' closes the compile-time parameter list `kernel name<A=1, B=2>` and is a comparison
        everywhere else; the lexer cannot tell them apart (the expression states of both contexts are
        merged), so decide here by position."""
        prev: list = [None, None]
        in_params, depth = False, 0
        for tok in stream:
            if tok.type == "LESSTHAN" and prev[0] is not None and prev[0].type == "NAME" and \
                    prev[1] is not None and prev[1].type == "KERNEL":
                in_params, depth = True, 0
            elif in_params and tok.type in ("LPAR", "LSQB"):
                depth += 1
            elif in_params and tok.type in ("RPAR", "RSQB"):
                depth -= 1
            elif tok.type in ("MORETHAN", "COMP_OP") and tok.value == ">":
                closes = in_params and depth == 0
                tok = Token.new_borrow_pos("MORETHAN" if closes else "COMP_OP", tok.value, tok)
                in_params = in_params and not closes
            prev = [tok, prev[0]]
            yield tok

    def handle_NL(self, token: Token):
        try:
            yield from super().handle_NL(token)
        except DedentError:
            raise _BadDedent(token) from None


class _BadDedent(Exception):
    """A line indented less than its block but more than the enclosing one."""

    def __init__(self, token: Token):
        super().__init__("unindent does not match any outer indentation level")
        self.token = token


def _edit_terminal(t) -> None:
    # '<<' and '>>' must win over the comparison '<' / '>' (same priority and width otherwise, and the
    # lexer would take '1 << 2' as '1 < < 2').
    if t.name == "SHIFT_OP":
        t.priority = max(t.priority, 1)


def _cache_file(grammar: str) -> str:
    """Where lark keeps the analysed grammar between processes: building the LALR tables takes about
    half a second, loading them a few milliseconds. The name changes with the grammar, with this
    module (the terminal edits and the indenter live here), and with lark's and Python's versions
    (lark checks its own key inside the file too, and rebuilds when the file is unreadable)."""
    import lark

    key = hashlib.sha256(
        "\0".join([grammar, Path(__file__).read_text(), lark.__version__, sys.version]).encode()
    ).hexdigest()[:24]
    return str(Path(tempfile.gettempdir()) / f".argus-lark-{key}.cache")


@functools.cache
def _parser() -> Lark:
    grammar = GRAMMAR.read_text()
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        postlex=_ArgusIndenter(),
        propagate_positions=True,
        maybe_placeholders=True,
        edit_terminals=_edit_terminal,
        cache=_cache_file(grammar),
    )


# Human names for the grammar's terminals, for "expected ..." messages (keywords and punctuation
# are named by their text, taken from the grammar).
_TERMINAL_NAMES = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "DTYPE": "a dtype (f32, bf16, ...)",
    "_NL": "end of line", "_INDENT": "an indented block", "_DEDENT": "end of block",
    "COMP_OP": "a comparison", "ADD_OP": "'+'", "MUL_OP": "'*'", "SHIFT_OP": "'<<'", "$END": "end of file",
    "an expression": "an expression",
}
# The most helpful alternatives first: what closes or continues the construct being written.
_PRIORITY = ["RPAR", "RSQB", "COMMA", "COLON", "_INDENT", "_NL", "EQUAL", "an expression", "NAME", "DTYPE",
             "ARROW"]


def _terminal_name(name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    for t in _parser().terminals:
        if t.name == name and t.pattern.type == "str":
            return f"'{t.pattern.value}'"
    return f"'{name.lower()}'"


_EXPR_START = {"NAME", "INT", "FLOAT", "LPAR", "MINUS", "PLUS", "TRUE", "FALSE", "NOT", "STAR"}


def _describe_expected(expected) -> str:
    expected = set(expected)
    if {"NAME", "INT", "LPAR"} <= expected:  # anything that starts an expression
        expected = (expected - _EXPR_START) | {"an expression"}
    terms = sorted((e for e in expected if not e.startswith("__")),
                   key=lambda e: (_PRIORITY.index(e) if e in _PRIORITY else len(_PRIORITY), e))
    names = list(dict.fromkeys(_terminal_name(e) for e in terms))
    if not names:
        return ""
    if len(names) > 5:
        names = names[:5] + ["..."]
    return ", expected " + " or ".join(names) if len(names) <= 2 else ", expected one of " + ", ".join(names)


def _expected(e: UnexpectedInput) -> set:
    """What the parser could take at the error (the lexer's own guess is coarser)."""
    ip = getattr(e, "interactive_parser", None)
    if ip is not None:
        try:
            return {k for k in ip.choices() if k.isupper() or k == "$END"}
        except Exception:  # pragma: no cover - fall back to lark's set
            pass
    return set(getattr(e, "expected", None) or getattr(e, "allowed", None) or ())


_CLOSE = {")": "(", "]": "[", "}": "{"}


def _unclosed_bracket(text: str) -> tuple[str, int, int, int] | None:
    """The innermost bracket still open at the end of `text` as (char, line, col, offset), or None
    (also when the brackets are mismatched: the parser's own message says more then)."""
    stack: list[tuple[str, int, int, int]] = []
    line, col, i = 1, 1, 0
    while i < len(text):
        ch = text[i]
        if ch == "#":
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            col += j - i
            i = j
            continue
        if ch in "([{":
            stack.append((ch, line, col, i))
        elif ch in _CLOSE:
            if not stack or stack[-1][0] != _CLOSE[ch]:
                return None
            stack.pop()
        if ch == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1
    return stack[-1] if stack else None


# Python statements and operators the language does not have: a message at the keyword that says
# what to write instead, rather than the parser's "unexpected ..." one token later.
_UNSUPPORTED = {
    "while": "use for ... in range(...)",
    "class": "a .arg file holds kernels and tag functions only",
    "def": "for an integer helper write `tagfn name(a, b) = expression`",
    "lambda": "for an integer helper write `tagfn name(a, b) = expression`",
    "import": "builtins such as load, store and exp need no import",
    "from": "builtins such as load, store and exp need no import",
    "try": "a kernel raises no exceptions; use assert for what must hold",
    "except": "a kernel raises no exceptions; use assert for what must hold",
    "finally": "a kernel raises no exceptions; use assert for what must hold",
    "raise": "use assert for what must hold",
    "with": "kernels have no context managers",
    "global": "names are local to their kernel; compile-time constants go in `kernel name<C=...>`",
    "nonlocal": "names are local to their kernel; compile-time constants go in `kernel name<C=...>`",
    "return": "a kernel's results are what it stores to its outputs",
    "yield": "a kernel's results are what it stores to its outputs",
    "del": "names live to the end of their kernel",
    "async": "kernels have no coroutines",
    "await": "kernels have no coroutines",
    "**": "write the product, or 1 << n for a power of two",
}
_STATEMENT_KEYWORD = re.compile(r"^[ \t]*(" + "|".join(k for k in _UNSUPPORTED if k.isalpha()) +
                                r")(?=[ \t:(]|$)(?![ \t]*=[^=])")


def _code(line: str) -> str:
    """A line without its comment (a '#' outside a string literal)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _unsupported(text: str, filename: str, upto: int | None = None) -> ArgusSyntaxError | None:
    """The first Python-only statement keyword that starts a line (through line `upto`), or, on
    line `upto`, a `lambda` or `**`: an error at it, or None."""
    for i, raw in enumerate(text.splitlines(), 1):
        if upto is not None and i > upto:
            break
        line = _code(raw)
        m = _STATEMENT_KEYWORD.match(line)
        if m is None and i == upto:
            m = re.search(r"\b(lambda)\b|(\*\*)", line)
        if m is not None:
            word = next(g for g in m.groups() if g)
            col = m.start(m.lastindex) + 1
            return ArgusSyntaxError(f"`{word}` is not supported in kernels ({_UNSUPPORTED[word]})",
                                    Span(filename, i, col, i, col + len(word)))
    return None


def parse(text: str, filename: str = "<string>") -> Tree:
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark (some editors write one)
    SOURCES.add(filename, text)
    if not text.endswith("\n"):
        text += "\n"
    bare = _unsupported(text, filename) if re.search(r"^[ \t]*(return|yield)\b", text, re.M) else None
    if bare is not None:  # a bare `return` parses (as a name); nothing else Python-only does
        raise bare
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        line = getattr(e, "line", None)
        raise (_unsupported(text, filename, line if isinstance(line, int) and line > 0 else None)
               or _syntax_error(e, text, filename)) from None
    except _BadDedent as e:
        tok = e.token
        line = tok.end_line or tok.line
        raise ArgusSyntaxError(str(e), Span(filename, line, tok.end_column or 1)) from None
    _check_depth(tree, filename)
    return tree


# How deeply a parse tree may nest (expressions and blocks together). Every stage walks the IR
# recursively; this bound keeps each walk far from Python's recursion limit, so a long chain such as
# `x + x + ... + x` or deeply nested `if`s is a clear error, not a RecursionError somewhere later.
MAX_NESTING = 100


def _check_depth(tree: Tree, filename: str) -> None:
    """Refuse a parse tree deeper than MAX_NESTING (an iterative walk: it cannot overflow itself)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            meta = node.meta
            line, col = getattr(meta, "line", 1) or 1, getattr(meta, "column", 1) or 1
            raise ArgusSyntaxError(
                f"nested too deeply: more than {MAX_NESTING} levels of expressions and blocks (a long chain "
                "of operators counts one level per operator); split it with intermediate names",
                Span(filename, line, col, line, col + 1))
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, Tree))


def _subscript_statement(text: str, pos: int) -> bool:
    """Whether the line before `pos` is a statement that starts with a subscripted name (`y[i] `)."""
    start = text.rfind("\n", 0, pos) + 1
    return re.fullmatch(r"\s*[A-Za-z_]\w*\s*\[.*\]\s*", text[start:pos]) is not None


def _syntax_error(e: UnexpectedInput, text: str, filename: str) -> ArgusSyntaxError:
    # long: one branch per kind of parse failure, each with its own position and wording; they share
    # the position of the error and of an unclosed bracket computed at the top
    line, col = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    tok = getattr(e, "token", None)
    at_end = isinstance(e, UnexpectedEOF) or (tok is not None and tok.type in ("$END", "_DEDENT"))
    err_pos = len(text) if at_end or tok is None else (tok.start_pos or 0)
    if at_end or isinstance(e, UnexpectedToken):
        # an unclosed bracket makes the parser fail far away from it: point at the bracket
        open_ = _unclosed_bracket(text)
        if open_ is not None and open_[3] < err_pos and (at_end or open_[1] < line):
            ch, bline, bcol, _ = open_
            return ArgusSyntaxError(f"'{ch}' was never closed", Span(filename, bline, bcol, bline, bcol + 1))
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "end of file"
        return ArgusSyntaxError(f"unexpected character {ch!r}", Span(filename, line, col, line, col + 1))
    expected = _describe_expected(_expected(e))
    if isinstance(e, UnexpectedEOF) or (tok is not None and tok.type == "$END"):
        lines = text.rstrip("\n").splitlines() or [""]
        return ArgusSyntaxError("unexpected end of file" + expected,
                                Span(filename, len(lines), len(lines[-1]) + 1))
    if isinstance(e, UnexpectedToken):
        if tok.type == "_INDENT":
            return ArgusSyntaxError("unexpected indentation",
                                    Span(filename, tok.end_line or line, tok.end_column or 1))
        if tok.type == "_DEDENT":
            return ArgusSyntaxError("unexpected end of block" + expected, Span(filename, line, col))
        if tok.type == "_NL":
            if "COLON" in _expected(e):  # a block header (kernel, for, if, else) without its ':'
                expected = ", expected ':'"
            return ArgusSyntaxError("unexpected end of line" + expected, Span(filename, line, col))
        width = max(1, len(str(tok.value)))
        if str(tok.value) == "=" and _subscript_statement(text, tok.start_pos or 0):
            # Python's `y[i] = v`: the language writes memory through store()
            return ArgusSyntaxError("cannot assign to an element or slice; write memory with "
                                    "store(y[i], value) (names are bound with `name = value`)",
                                    Span(filename, line, col, line, col + width))
        return ArgusSyntaxError(f"unexpected {str(tok.value)!r}" + expected,
                                Span(filename, line, col, line, col + width))
    return ArgusSyntaxError(str(e).splitlines()[0], Span(filename, line, col))
