"""Menu action spaces: a numbered list of action texts, chosen by index or by text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def shorten(text: str, limit: int = 60) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters, for error messages that echo input."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"... ({len(text):,} characters)"


class Menu:
    """The actions offered this turn, in order; index ``i`` of a ``Discrete(max_size)`` space.

    An action is valid when it is an in-range, unmasked index (``int`` or numpy integer), the
    exact text of an item (surrounding whitespace and letter case ignored), or that index
    written in decimal digits (``"3"``).
    """

    __slots__ = ("_by_text", "items", "max_size")

    def __init__(self, items: Sequence[str], max_size: int):
        """Build the menu.

        Args:
            items: the action texts; at most ``max_size`` of them.
            max_size: size of the ``Discrete`` action space.
        """
        if len(items) > max_size:
            raise ValueError(f"menu of {len(items)} items exceeds max_size={max_size}")
        self.items = tuple(items)
        self.max_size = max_size
        self._by_text = {item.casefold(): i for i, item in reversed(list(enumerate(self.items)))}

    def __len__(self) -> int:
        """The number of items offered."""
        return len(self.items)

    def mask(self) -> np.ndarray:
        """``int8`` array of length ``max_size``: 1 where an item is offered."""
        m = np.zeros(self.max_size, dtype=np.int8)
        m[: len(self.items)] = 1
        return m

    def resolve(self, action: Any) -> tuple[int | None, str | None]:
        """Map an action to an item index.

        Returns:
            ``(index, None)`` for a valid action, else ``(None, error message)``.
        """
        if isinstance(action, (bool, np.bool_)):
            return None, f"invalid action {action!r}: expected a menu index or a menu item's text"
        if isinstance(action, (int, np.integer)):
            return self._index(int(action))
        if isinstance(action, str):
            text = action.strip()
            if not text:
                return None, "empty action: choose a menu item by its number or its text"
            if text.isascii() and text.isdigit():
                return self._index(int(text))
            found = self._by_text.get(text.casefold())
            if found is None:
                return None, f"{shorten(text)} is not on the menu: choose one of the listed items"
            return found, None
        return None, (
            f"invalid action of type {type(action).__name__}: "
            "expected a menu index (int) or a menu item's text (str)"
        )

    def _index(self, i: int) -> tuple[int | None, str | None]:
        if 0 <= i < len(self.items):
            return i, None
        if 0 <= i < self.max_size:
            return None, f"option {i} is not available now (the menu has {len(self.items)} items)"
        return None, f"option {i} is out of range: valid options are 0 to {len(self.items) - 1}"

    def render(self) -> str:
        """The numbered menu as text, one item per line."""
        return "\n".join(f"[{i}] {item}" for i, item in enumerate(self.items))
