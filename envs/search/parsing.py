"""Parsing free-form actions in the Search-R1 format, with character spans for the segments.

The format is ``<think>…</think>`` then ``<search>…</search>`` or ``<answer>…</answer>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentgym.core.info import Segment

_TAG = re.compile(r"<(/?)(think|search|answer)\s*>", re.IGNORECASE)
_SEGMENT_TAG = {"think": "think", "search": "search_query", "answer": "answer"}
MAX_QUERY_CHARS = 1000
MAX_ANSWER_CHARS = 500


@dataclass
class ParsedAction:
    """One free-form action: its kind ("search" or "answer"), argument and tagged spans."""

    kind: str | None = None
    argument: str = ""
    thoughts: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    error: str | None = None


def parse_action(text: str) -> ParsedAction:
    """Parse an action; ``error`` says what is wrong when it is not one valid action.

    Text outside the tags is ignored. Tags may not nest, every tag must close, and exactly one
    ``search`` or ``answer`` block must be present, with non-empty content.
    """
    out = ParsedAction()
    open_tag, open_end, actions = None, 0, []
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if not closing:
            if open_tag is not None:
                return _fail(out, f"<{name}> opened inside <{open_tag}>: tags cannot nest")
            open_tag, open_end = name, m.end()
            continue
        if open_tag != name:
            return _fail(
                out, f"</{name}> closes {'nothing' if open_tag is None else f'<{open_tag}>'}"
            )
        start, end = _strip_span(text, open_end, m.start())
        out.segments.append({"tag": _SEGMENT_TAG[name], "start": start, "end": end})
        if name == "think":
            out.thoughts.append(text[start:end])
        else:
            actions.append((name, text[start:end]))
        open_tag = None
    if open_tag is not None:
        return _fail(out, f"<{open_tag}> is never closed")
    return _check_action(out, actions)


def _check_action(out: ParsedAction, actions: list[tuple[str, str]]) -> ParsedAction:
    if not actions:
        return _fail(out, "no action: write <search>query</search> or <answer>answer</answer>")
    if len(actions) > 1:
        return _fail(out, f"{len(actions)} actions in one turn: give exactly one")
    out.kind, out.argument = actions[0]
    if not out.argument:
        return _fail(out, f"empty <{out.kind}>")
    limit = MAX_QUERY_CHARS if out.kind == "search" else MAX_ANSWER_CHARS
    if len(out.argument) > limit:
        return _fail(out, f"<{out.kind}> longer than {limit} characters")
    return out


def _fail(out: ParsedAction, error: str) -> ParsedAction:
    out.kind, out.error = None, error
    return out


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The span ``[start, end)`` without surrounding whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
