"""Parsing `.arg` source with lark into a parse tree with positions.

Syntax errors become `ArgusSyntaxError` with the exact line, column and a message that says what
was expected, never a lark traceback.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import Indenter

from argus_verify.diagnostics import SOURCES, ArgusSyntaxError, Span

GRAMMAR = Path(__file__).with_name("argus.lark")


class _ArgusIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8


@functools.cache
def _parser() -> Lark:
    return Lark(
        GRAMMAR.read_text(),
        parser="lalr",
        lexer="contextual",
        postlex=_ArgusIndenter(),
        propagate_positions=True,
        maybe_placeholders=True,
    )


# Human names for the grammar's terminals, for "expected ..." messages.
_TERMINAL_NAMES = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "DTYPE": "a dtype (f32, bf16, ...)",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COLON": "':'", "COMMA": "','",
    "EQUAL": "'='", "_NL": "end of line", "_INDENT": "an indented block", "_DEDENT": "end of block",
    "ARROW": "'->'", "LESSTHAN": "'<'", "MORETHAN": "'>'", "DOT": "'.'", "COMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/', '//' or '%'", "COMPOSE": "'o'", "KERNEL": "'kernel'",
    "MINUS": "'-'", "PLUS": "'+'", "$END": "end of file",
}


def _describe_expected(expected) -> str:
    names = sorted({_TERMINAL_NAMES.get(e, f"'{e.lower()}'") for e in expected if not e.startswith("__")})
    if not names:
        return ""
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", expected " + " or ".join(names) if len(names) <= 2 else ", expected one of " + ", ".join(names)


def parse(text: str, filename: str = "<string>") -> Tree:
    SOURCES.add(filename, text)
    if not text.endswith("\n"):
        text += "\n"
    try:
        return _parser().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, filename) from None


def _syntax_error(e: UnexpectedInput, text: str, filename: str) -> ArgusSyntaxError:
    line, col = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "end of file"
        return ArgusSyntaxError(f"unexpected character {ch!r}", Span(filename, line, col, line, col + 1))
    if isinstance(e, UnexpectedEOF):
        last = text.rstrip("\n").count("\n") + 1
        return ArgusSyntaxError("unexpected end of file" + _describe_expected(e.expected),
                                Span(filename, last, 1))
    if isinstance(e, UnexpectedToken):
        tok: Token = e.token
        if tok.type == "$END":
            last = text.rstrip("\n").count("\n") + 1
            return ArgusSyntaxError("unexpected end of file" + _describe_expected(e.expected),
                                    Span(filename, last, len(text.rstrip("\n").splitlines()[-1]) + 1))
        if tok.type == "_INDENT":
            return ArgusSyntaxError("unexpected indentation", Span(filename, tok.end_line or line, 1))
        if tok.type == "_DEDENT":
            return ArgusSyntaxError("unexpected end of block" + _describe_expected(e.expected),
                                    Span(filename, line, col))
        if tok.type == "_NL":
            return ArgusSyntaxError("unexpected end of line" + _describe_expected(e.expected),
                                    Span(filename, line, col))
        width = max(1, len(str(tok.value)))
        return ArgusSyntaxError(f"unexpected {str(tok.value)!r}" + _describe_expected(e.expected),
                                Span(filename, line, col, line, col + width))
    return ArgusSyntaxError(str(e).splitlines()[0], Span(filename, line, col))
