"""The text actions of the MiniWoB++ envs and their parser (which never raises).

``click(ref)``, ``type(ref, "text")`` (or ``type(ref, text)`` unquoted), ``press("key")`` and
``wait()``. They are miniwob's CLICK_ELEMENT, FOCUS_ELEMENT_AND_TYPE_TEXT, PRESS_KEY and NONE
actions on the refs of the last observation. Keys are miniwob's safe set
(``miniwob.constants.DEFAULT_ALLOWED_KEYS``): letters, digits, punctuation, ``C-a``,
``C-c``, ``C-x``, ``C-v`` and named keys written ``<Enter>`` or just ``Enter``.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from miniwob.constants import DEFAULT_ALLOWED_KEYS

from agentgym.core.menu import shorten

MAX_TYPED = 256
"""The longest text one ``type`` action may type (miniwob's TEXT_MAX_LENGTH)."""
ACTION_HELP = 'click(ref) | type(ref, "text") | press("key") | wait()'

_CALL = re.compile(r"\s*([A-Za-z_]+)\s*\((.*)\)\s*", re.S)
_REF = re.compile(r"\[?\s*(?:ref\s*=\s*)?[\"']?(-?\d+)[\"']?\s*\]?")
_KEYS = {k.casefold(): k for k in DEFAULT_ALLOWED_KEYS if k.startswith("<")}


@dataclass(frozen=True)
class Action:
    """A parsed action; ``text`` is the canonical form (what the history records)."""

    kind: str
    ref: int | None = None
    arg: str | None = None

    @property
    def text(self) -> str:
        """The canonical text of the action (``type(5, "abc")``)."""
        if self.kind == "click":
            return f"click({self.ref})"
        if self.kind == "type":
            return f"type({self.ref}, {json.dumps(self.arg, ensure_ascii=False)})"
        if self.kind == "press":
            return f"press({json.dumps(self.arg)})"
        return "wait()"

    @property
    def tool_call(self) -> dict[str, Any]:
        """The action as ``{name, arguments}`` (``info["tool_calls"]``)."""
        arguments: dict[str, Any] = {}
        if self.ref is not None:
            arguments["ref"] = self.ref
        if self.kind == "type":
            arguments["text"] = self.arg
        if self.kind == "press":
            arguments["key"] = self.arg
        return {"name": self.kind, "arguments": arguments}


def parse(action: Any) -> tuple[Action | None, str | None]:
    """``(action, None)`` for a well-formed action, else ``(None, why not)``."""
    if not isinstance(action, str):
        return None, f"an action is text such as {ACTION_HELP}, not {type(action).__name__}"
    if not action.strip():
        return None, f"empty action: write one of {ACTION_HELP}"
    match = _CALL.fullmatch(action)
    if match is None:
        return None, f"{shorten(action.strip())} is not an action: write one of {ACTION_HELP}"
    name, args = match.group(1).casefold(), match.group(2).strip()
    if name == "click":
        ref, error = _ref(args)
        return (None, error) if ref is None else (Action("click", ref), None)
    if name == "type":
        return _type(args)
    if name == "press":
        return _press(args)
    if name == "wait":
        if args:
            return None, "wait() takes no argument"
        return Action("wait"), None
    return None, f"unknown action {name!r}: write one of {ACTION_HELP}"


def _ref(text: str) -> tuple[int | None, str | None]:
    match = _REF.fullmatch(text.strip())
    if match is None:
        return None, f"{shorten(text)} is not an element ref: use a number shown as [ref]"
    return int(match.group(1)), None


def _type(args: str) -> tuple[Action | None, str | None]:
    head, comma, rest = args.partition(",")
    if not comma:
        return None, 'type needs an element ref and a text: type(ref, "text")'
    ref, error = _ref(head)
    if ref is None:
        return None, error
    text = _unquote(rest.strip().removeprefix("text=").strip())
    if not text:
        return None, 'type needs a non-empty text: type(ref, "text")'
    if len(text) > MAX_TYPED:
        return None, f"type takes at most {MAX_TYPED} characters, got {len(text)}"
    if not all(ch.isprintable() and ord(ch) < 0x10000 for ch in text):
        return None, "type takes printable characters only (press keys such as Enter separately)"
    return Action("type", ref, text), None


def _press(args: str) -> tuple[Action | None, str | None]:
    key = _unquote(args.strip().removeprefix("key=").strip())
    if key in DEFAULT_ALLOWED_KEYS:
        return Action("press", None, key), None
    named = _KEYS.get(key.casefold()) or _KEYS.get(f"<{key}>".casefold())
    if named is not None:
        return Action("press", None, named), None
    return None, (
        f"{shorten(key)} is not a key press allows: a letter, a digit, punctuation, C-a, C-c, "
        "C-x, C-v or a named key (Enter, Tab, Backspace, Delete, Space, ArrowUp, PageDown...)"
    )


def _unquote(text: str) -> str:
    """The string a quoted literal spells (``"ab"`` or ``'ab'``), else ``text`` as is."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text[1:-1]
        return value if isinstance(value, str) else text[1:-1]
    return text
