"""The action grammar of the tool-call envs.

An action is ``<think>`` blocks, then ``<tool_call>`` blocks, or one ``<summary>``, or one
``<ask>``.

:func:`parse_action` never raises: a malformed action comes back with kind ``"invalid"`` and a
short error that says what breaks the grammar (:func:`reason` is how an env shows it); a call
block whose JSON is malformed keeps the kind ``"tool_calls"`` and carries its own error, so
that the env can report each block.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

GRAMMAR = (
    "Write optional <think>...</think> blocks, then either one or more "
    '<tool_call>{"name": "<function>", "arguments": {...}}</tool_call> blocks (one JSON object '
    "each; several blocks are issued together), or exactly one <summary>...</summary> with "
    "your final answer, or exactly one <ask>...</ask> with a question for the user. "
    "Nothing may appear outside the tags."
)

_TAG = re.compile(r"<(/?)(think|tool_call|summary|ask)\s*>", re.IGNORECASE)
_NON_SPACE = re.compile(r"\S")
_SEGMENT_TAG = {"think": "think", "tool_call": "tool_call", "summary": "summary", "ask": "summary"}
_KIND = {"tool_call": "tool_calls", "summary": "summary", "ask": "ask"}
_KIND_TAG = {kind: tag for tag, kind in _KIND.items()}
_CALL_KEYS = frozenset(("name", "arguments"))
_EXCERPT = 40


@dataclass(frozen=True)
class CallBlock:
    """One ``<tool_call>…</tool_call>`` block of an action."""

    start: int
    end: int
    raw: str
    name: str | None
    arguments: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class ParsedAction:
    """A parsed action: its kind, call blocks, text and tagged spans (see :func:`parse_action`)."""

    kind: str
    calls: tuple[CallBlock, ...]
    text: str
    segments: tuple[dict[str, Any], ...]
    error: str | None


class _NotJSON(ValueError):
    """A constant (NaN, Infinity) that JSON does not have."""


def _reject_constant(name: str) -> Any:
    raise _NotJSON(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…")


def gold_calls_line(calls: list[dict[str, Any]]) -> str:
    """The privileged context's line of gold calls: ``Gold calls: <compact JSON list>``.

    ``calls`` are ``{"name", "arguments"}`` dicts in the order they should be made; with none,
    the line says that no tool serves the request.
    """
    if not calls:
        return "Gold calls: none (no tool serves this request)."
    return "Gold calls: " + json.dumps(calls, separators=(",", ":"), ensure_ascii=False)


def reason(error: str, grammar: bool) -> str:
    """An invalid action's reason as an env shows it: ``error``, then :data:`GRAMMAR` if asked.

    The v0 ids repeat the grammar after every reason (their text must not change); the v1 ids
    give the reason alone, since their observations state the grammar elsewhere already.

    Args:
        error: the short error, e.g. :attr:`ParsedAction.error`.
        grammar: append :data:`GRAMMAR` (the v0 ids).

    Returns:
        The reason text.
    """
    return f"{error} {GRAMMAR}" if grammar else error


def _invalid(message: str) -> ParsedAction:
    return ParsedAction("invalid", (), "", (), f"{message}.")


def _decode_call(raw: str) -> tuple[str, dict[str, Any]] | str:
    """The name and arguments in a call block's JSON, or why the block is malformed."""
    try:
        obj = _DECODER.decode(raw)
    except json.JSONDecodeError as e:
        return f"malformed JSON at char {e.pos}: {e.msg}"
    except _NotJSON as e:
        return f"malformed JSON: {e}"
    except RecursionError:
        return "malformed JSON: nested too deeply"
    if not isinstance(obj, dict):
        return f"a call must be a JSON object, got {type(obj).__name__}"
    if not _CALL_KEYS.issuperset(obj):
        extra = min(k for k in obj if k not in _CALL_KEYS)
        return f'unexpected key "{extra}": a call has only "name" and "arguments"'
    if "name" not in obj:
        return 'missing "name"'
    name = obj["name"]
    if not isinstance(name, str) or not name.strip():
        return '"name" must be a non-empty string'
    arguments = obj.get("arguments", {})
    if not isinstance(arguments, dict):
        return '"arguments" must be an object'
    return name, arguments


@dataclass
class _Blocks:
    """The closed blocks of an action, in order, as the tag scan meets them."""

    segments: list[dict[str, Any]] = field(default_factory=list)
    calls: list[CallBlock] = field(default_factory=list)
    bodies: list[tuple[str, int, int]] = field(default_factory=list)
    """(tag, content start, content end) of each ``<summary>`` or ``<ask>`` block."""
    kind: str | None = None

    def close(
        self, text: str, tag: str, start: int, inner: int, inner_end: int, end: int
    ) -> str | None:
        """Record the block ``text[start:end]`` (content ``text[inner:inner_end]``).

        Returns:
            Why the block breaks the grammar, or None when it fits.
        """
        self.segments.append({"tag": _SEGMENT_TAG[tag], "start": start, "end": end})
        if tag == "think":
            if self.kind is not None:
                return "<think> after the action: think before acting"
            return None
        if self.kind is not None and self.kind != _KIND[tag]:
            return f"<{tag}> mixed with <{_KIND_TAG[self.kind]}>: give one kind of action"
        self.kind = _KIND[tag]
        if tag == "tool_call":
            raw = text[inner:inner_end]
            decoded = _decode_call(raw)
            if isinstance(decoded, str):
                self.calls.append(CallBlock(start, end, raw, None, None, decoded))
            else:
                self.calls.append(CallBlock(start, end, raw, *decoded, None))
        else:
            self.bodies.append((tag, inner, inner_end))
        return None


def _scan(text: str) -> _Blocks | str:
    """The blocks of ``text``, or why its tags or the text outside them break the grammar."""
    blocks = _Blocks()
    pos = 0  # end of the last closed block
    open_tag: str | None = None
    open_start = open_inner = 0
    for m in _TAG.finditer(text):
        closing, tag = m.group(1) == "/", m.group(2).lower()
        if open_tag is None:
            stray = _NON_SPACE.search(text, pos, m.start())
            if stray:
                return f"text outside the tags: {_excerpt(text[stray.start() :])}"
            if closing:
                return f"</{tag}> closes nothing"
            open_tag, open_start, open_inner = tag, m.start(), m.end()
            continue
        if not closing:
            return f"<{tag}> opened inside <{open_tag}>: tags cannot nest"
        if tag != open_tag:
            return f"</{tag}> closes <{open_tag}>"
        open_tag, pos = None, m.end()
        problem = blocks.close(text, tag, open_start, open_inner, m.start(), m.end())
        if problem is not None:
            return problem
    if open_tag is not None:
        return f"<{open_tag}> is never closed"
    stray = _NON_SPACE.search(text, pos)
    if stray:
        return f"text outside the tags: {_excerpt(text[stray.start() :])}"
    return blocks


def _assemble(text: str, blocks: _Blocks) -> ParsedAction:
    """The action that the well-nested ``blocks`` of ``text`` make, or an ``"invalid"`` one."""
    if blocks.kind is None:
        return _invalid("no action: write <tool_call>, <summary> or <ask> blocks")
    if blocks.kind == "tool_calls":
        return ParsedAction(blocks.kind, tuple(blocks.calls), "", tuple(blocks.segments), None)
    if len(blocks.bodies) > 1:
        return _invalid(f"{len(blocks.bodies)} <{blocks.bodies[0][0]}> blocks: give exactly one")
    tag, inner, inner_end = blocks.bodies[0]
    body = text[inner:inner_end].strip()
    if not body:
        return _invalid(f"empty <{tag}>")
    return ParsedAction(blocks.kind, (), body, tuple(blocks.segments), None)


def parse_action(text: object) -> ParsedAction:
    """Parse one action of the tool-call grammar (:data:`GRAMMAR`); never raises.

    Whitespace may surround every block; any other text outside the tags, nested or unclosed
    tags, a ``<think>`` after the action, mixed kinds, several ``<summary>`` or ``<ask>``
    blocks and empty ones make the action ``"invalid"``. Segment spans cover whole blocks,
    tags included; a ``<summary>`` or ``<ask>`` block is tagged ``"summary"``.
    """
    if not isinstance(text, str):
        return _invalid(f"an action is text, got {type(text).__name__}")
    if not text.strip():
        return _invalid("empty action")
    blocks = _scan(text)
    if isinstance(blocks, str):
        return _invalid(blocks)
    return _assemble(text, blocks)
