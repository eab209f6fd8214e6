"""How the analysis speaks about the kernel: the error for constructs beyond its encoding, and the
source text that labels fragments and assertion sides."""

from __future__ import annotations

from argus_verify.diagnostics import SOURCES


class AnalysisError(Exception):
    """A construct beyond the encoding; the verifier reports every obligation as unknown."""


def src_text(span) -> str:
    if span is None or span.line <= 0:
        return ""
    line = SOURCES.line(span.file, span.line)
    if line is None:
        return ""
    if span.end_line == span.line and span.end_col > span.col:
        return line[span.col - 1 : span.end_col - 1].strip()
    return line.strip()
