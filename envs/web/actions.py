"""BrowserGym-style actions written as calls: ``click('b12')``, ``fill('b3', 'text')``, ...

Parsed with :mod:`ast` (never evaluated): a call of a known name whose arguments are string
literals, with Python's quoting and escapes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from agentgym.core.menu import shorten

USAGE = {
    "click": "click('b12')",
    "fill": "fill('b3', 'text')",
    "press": "press('b3', 'Enter')",
    "scroll": "scroll('down') or scroll('up')",
    "go_back": "go_back()",
}
"""Each action's form, as error messages and docstrings quote it."""
ARITY = {"click": 1, "fill": 2, "press": 2, "scroll": 1, "go_back": 0}
_HEAD = re.compile(r"^\s*([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Call:
    """A parsed action: its name and its string arguments."""

    name: str
    args: tuple[str, ...]


def parse_call(text: str) -> tuple[Call | None, str | None]:
    """Parse ``text`` as one of :data:`USAGE`'s calls.

    Returns:
        ``(call, None)`` for a well-formed call; ``(None, error)`` for a malformed call of a
        known name; ``(None, None)`` when ``text`` is not such a call at all.
    """
    head = _HEAD.match(text)
    if head is None or head.group(1) not in ARITY:
        return None, None
    name = head.group(1)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, f"cannot read {shorten(text)}: write {USAGE[name]}"
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        return None, f"cannot read {shorten(text)}: write {USAGE[name]}"
    args = []
    for arg in node.args:
        if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
            return None, f"{name}: arguments are quoted strings, as in {USAGE[name]}"
        args.append(arg.value)
    if len(args) != ARITY[name]:
        return None, f"{name} takes {ARITY[name]} argument(s): {USAGE[name]}"
    return Call(name, tuple(args)), None
