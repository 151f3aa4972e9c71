"""The page as text: one line per visible element, from miniwob's own DOM extraction.

``core.getDOMInfo`` (miniwob's ``core.js``) lists the visible elements with their refs; its
tree is parsed by miniwob's :class:`~miniwob.dom.DOMElement`. A line reads
``[ref] tag #id .class "text" value="..." (flags)``, indented by depth. Text nodes beside
elements (miniwob's ``t`` pseudo-elements, split per rendered line box and renumbered on every
read) become one quoted line without a ref, so the text does not depend on the fonts' line
breaks. Coordinates are left out for the same reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from miniwob.dom import DOMElement

_FRAME_IDS = frozenset({"wrap", "area"})
"""The task frame every page shares: not listed (their children are)."""
MAX_TEXT = 300
_EMPTY = {"tag": "BODY", "left": 0, "top": 0, "width": 0, "height": 0, "ref": 1, "children": []}
_WHITE = (1.0, 1.0, 1.0)
_CONTROLS = ("input", "select", "textarea", "button")
_STYLING = re.compile(r"ui-(corner-\w+|helper-[\w-]+|widget(-content|-header)?|front)$")
"""jQuery UI's purely presentational classes, left out (its state classes stay)."""


@dataclass(frozen=True)
class Select:
    """A ``<select>``: its option texts and the selected index (-1 for none)."""

    options: tuple[str, ...]
    selected: int


@dataclass
class View:
    """One reading of the page: the utterance, the element tree and the listed refs."""

    utterance: str
    root: DOMElement
    selects: dict[int, Select] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    refs: list[int] = field(default_factory=list)
    elements: dict[int, DOMElement] = field(default_factory=dict)

    @classmethod
    def read(cls, utterance: str, dom: dict[str, Any] | None, selects: Sequence[Any]) -> View:
        """Parse ``core.getDOMInfo()``'s tree and the select list; render the lines.

        ``dom`` None (the task has ended) gives a page without elements.
        """
        view = cls(utterance, DOMElement(dom or _EMPTY))
        for ref, options, selected in selects:
            if ref is not None:
                view.selects[int(ref)] = Select(tuple(map(str, options)), int(selected))
        view._walk(view.root, 0)
        return view

    def _walk(self, el: DOMElement, depth: int) -> None:
        listed = el.tag != "body" and el.id not in _FRAME_IDS
        if listed:
            self.lines.append("  " * depth + self._describe(el))
            self.refs.append(el.ref)
            self.elements[el.ref] = el
            depth += 1
        texts: list[str] = []
        for child in el.children:
            if child.tag == "t":
                texts.append(child.text or "")
                continue
            self._text_line(texts, depth)
            self._walk(child, depth)
        self._text_line(texts, depth)

    def _text_line(self, texts: list[str], depth: int) -> None:
        if texts:
            self.lines.append("  " * depth + _quote(" ".join(texts)))
            texts.clear()

    def _describe(self, el: DOMElement) -> str:
        parts = [f"[{el.ref}]", el.tag]
        if el.id:
            parts.append(f"#{el.id}")
        classes = [c for c in el.classes.split() if not _STYLING.match(c)]
        if classes and el.classes != "SVG_CLASS":
            parts.append("." + ".".join(classes))
        if el.text:
            parts.append(_quote(el.text))
        flags = []
        if isinstance(el.value, bool):
            flags.append("checked" if el.value else "unchecked")
        elif el.value is not None:
            parts.append(f"value={_quote(str(el.value))}")
        select = self.selects.get(el.ref)
        if select is not None:
            chosen = select.options[select.selected] if select.selected >= 0 else ""
            parts.append(f"value={_quote(chosen)}")
            parts.append("options=" + " | ".join(_quote(o) for o in select.options))
        if _is_swatch(el):
            # a box whose colour is its content (click-color, click-shades)
            r, g, b = (round(c * 255) for c in el.bg_color[:3])
            parts.append(f"color=rgb({r},{g},{b})")
        if el.focused:
            flags.append("focused")
        if flags:
            parts.append(f"({', '.join(flags)})")
        return " ".join(parts)

    # ------------------------------------------------------------------ reading helpers
    @property
    def text(self) -> str:
        """The listed lines, one per element or run of text."""
        return "\n".join(self.lines)

    @property
    def key(self) -> str:
        """sha1 of the utterance and the page's text (equal for equal pages)."""
        return hashlib.sha1(f"{self.utterance}\n{self.text}".encode()).hexdigest()

    def clicks(self) -> list[str]:
        """``click(ref)`` for every listed element, in document order."""
        return [f"click({ref})" for ref in self.refs]

    def listed(self) -> Iterator[DOMElement]:
        """The listed elements in document order."""
        return (self.elements[ref] for ref in self.refs)


def _is_swatch(el: DOMElement) -> bool:
    """An empty, coloured, non-control leaf: a box whose colour is its content."""
    if el.children or el.text or el.tag.startswith(_CONTROLS):
        return False
    return el.bg_color[3] > 0 and el.bg_color[:3] != _WHITE


def _quote(text: str) -> str:
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "..."
    return json.dumps(text, ensure_ascii=False)
