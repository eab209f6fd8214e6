"""Source spans and user-facing errors.

Every error a user can cause is an `ArgusError` carrying a `Span`; the CLI renders it as
`file:line:col: error: message`, the source line and a caret, and exits with code 2. Nothing a
user writes should reach them as a Python traceback.
"""

from __future__ import annotations

import unicodedata

import attrs


@attrs.frozen
class Span:
    """A region of a source file; lines and columns are 1-based, `end_col` is exclusive."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "col": self.col}


NO_SPAN = Span("<builtin>", 0, 0)


class ArgusError(Exception):
    """A user-facing error at a source position (exit code 2 from the CLI)."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, note: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.note = note


class ArgusSyntaxError(ArgusError):
    pass


class ArgusTypeError(ArgusError):
    pass


class ArgusRuntimeError(ArgusError):
    """A fault found while executing a kernel (out-of-bounds access, barrier deadlock...)."""


class SourceMap:
    """Source texts by file name, so any stage can render a span with its line and caret."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def add(self, name: str, text: str) -> None:
        self._files[name] = text.splitlines()

    def line(self, name: str, line: int) -> str | None:
        lines = self._files.get(name)
        if lines is None or not (1 <= line <= len(lines)):
            return None
        return lines[line - 1]


SOURCES = SourceMap()


TAB = 8  # columns per tab stop in the echoed source line


def _display_width(text: str) -> int:
    """Columns `text` (tabs expanded already) takes in a terminal: wide East Asian characters take
    two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def render_source(span: Span, sources: SourceMap = SOURCES) -> str:
    """The source line of `span` with a gutter and a caret (or a run of carets) under it. Tabs are
    expanded in the line and the caret alike, and wide characters count two columns, so the caret
    stays under the span."""
    text = sources.line(span.file, span.line)
    if text is None:
        return ""
    gutter = f"{span.line:5d} | "
    end = span.col
    if span.end_line == span.line and span.end_col > span.col:
        end = span.end_col
    elif span.end_line > span.line:
        end = max(span.col + 1, len(text.rstrip()) + 1)
    before = _display_width(text[: span.col - 1].expandtabs(TAB))
    width = max(1, _display_width(text[: end - 1].expandtabs(TAB)) - before) if end > span.col else 1
    pad = " " * (len(gutter) - 2) + "| "
    return f"{gutter}{text.expandtabs(TAB)}\n{pad}{' ' * before}{'^' * width}"


def format_error(err: ArgusError, sources: SourceMap = SOURCES) -> str:
    head = f"{err.span}: {err.kind}: {err.message}" if err.span else f"argus: {err.kind}: {err.message}"
    parts = [head]
    if err.span is not None:
        shown = render_source(err.span, sources)
        if shown:
            parts.append(shown)
    if err.note:
        parts.append(f"  note: {err.note}")
    return "\n".join(parts)


def error_json(err: ArgusError) -> dict:
    out: dict = {"status": "error", "kind": type(err).__name__, "message": err.message}
    if err.span is not None:
        out["location"] = err.span.to_json()
        src = SOURCES.line(err.span.file, err.span.line)
        if src is not None:
            out["location"]["source"] = src.strip()
    if err.note:
        out["note"] = err.note
    return out
