"""Scripted solvers for common MiniWoB++ tasks: the next action from the page as listed.

A solver reads what the agent is shown (the utterance, the listed elements) plus the task's
fields as miniwob's field extractors find them in the utterance, and the episode's actions
so far; it answers with a public text action. Tasks without a solver have no oracle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # miniwob is imported only once a page is read, not at registration
    from miniwob.dom import DOMElement

    from agentgym.envs.web.miniwob.view import View

Fields = dict[str, str]
Solver = Callable[["View", Fields, Sequence[str]], str]


def fields_of(task: str, utterance: str) -> list[tuple[str, str]]:
    """The fields miniwob's extractor of ``task`` finds in ``utterance`` (none without one)."""
    from miniwob.fields import get_field_extractor

    try:
        return [(str(k), str(v)) for k, v in get_field_extractor(task)(utterance)]
    except (KeyError, ValueError):
        return []


def next_action(task: str, view: View, history: Sequence[str]) -> str:
    """The solver of ``task``'s next action on ``view`` after the actions ``history``."""
    return SOLVERS[task](view, dict(fields_of(task, view.utterance)), history)


# ---------------------------------------------------------------------- finding elements
def _find(view: View, pred: Callable[[DOMElement], bool], what: str) -> DOMElement:
    for el in view.listed():
        if pred(el):
            return el
    raise RuntimeError(f"oracle found no {what} on the page: {view.utterance!r}")


def _by_id(view: View, id_: str) -> DOMElement:
    return _find(view, lambda el: el.id == id_, f"element #{id_}")


def _by_text(view: View, tag: str, text: str) -> DOMElement:
    return _find(view, lambda el: el.tag == tag and own_text(el) == text, f"{tag} {text!r}")


def own_text(el: DOMElement) -> str:
    """An element's text: its own, or that of its text children (a label around a box)."""
    if el.text:
        return el.text
    return " ".join(c.text or "" for c in el.children if c.tag == "t")


def _click(el: DOMElement) -> str:
    return f"click({el.ref})"


def _type(ref: int, text: str) -> str:
    return f"type({ref}, {json.dumps(text, ensure_ascii=False)})"


_SELECT_ALL, _DELETE = 'press("C-a")', 'press("<Backspace>")'


def _fill(el: DOMElement, text: str, history: Sequence[str]) -> str | None:
    """The next action to make an input hold ``text`` (None when it does already).

    A wrong value is cleared first: focus the input, select all, delete.
    """
    if el.value == text:
        return None
    if not el.value:
        return _type(el.ref, text)
    if not el.focused:
        return _click(el)
    return _DELETE if history and history[-1] == _SELECT_ALL else _SELECT_ALL


def _form(
    view: View, values: Sequence[tuple[str, str]], submit: str, history: Sequence[str]
) -> str:
    """Fill the inputs ``(id, text)`` in order, then click the element ``#submit``."""
    for id_, text in values:
        action = _fill(_by_id(view, id_), text, history)
        if action is not None:
            return action
    return _click(_by_id(view, submit))


# ---------------------------------------------------------------------- solvers
def _click_button(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _click(_by_text(view, "button", fields["target"]))


def _click_link(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _click(_by_text(view, "span", fields["target"]))


def _click_test(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _click(_by_id(view, "subbtn"))


def _click_button_sequence(view: View, fields: Fields, history: Sequence[str]) -> str:
    one = _by_id(view, "subbtn")
    return _click(_by_id(view, "subbtn2") if _click(one) in history else one)


def _enter_text(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _form(view, [("tt", fields["target"])], "subbtn", history)


def _enter_text_2(view: View, fields: Fields, history: Sequence[str]) -> str:
    text = fields["text"].upper() if fields["case"] == "upper" else fields["text"].lower()
    return _form(view, [("tt", text)], "subbtn", history)


def _login_user(view: View, fields: Fields, history: Sequence[str]) -> str:
    values = [("username", fields["username"]), ("password", fields["password"])]
    return _form(view, values, "subbtn", history)


def _enter_password(view: View, fields: Fields, history: Sequence[str]) -> str:
    password = fields["target"]
    return _form(view, [("password", password), ("verify", password)], "subbtn", history)


def _boxes(view: View, wanted: set[str], kind: str) -> str:
    """Toggle each ``kind`` box whose checked state differs from wanted, then submit."""
    for el in view.listed():
        if el.tag != "label":
            continue
        box = next((c for c in el.children if c.tag == f"input_{kind}"), None)
        if box is not None and bool(box.value) != (own_text(el) in wanted):
            return _click(box)
    return _click(_by_id(view, "subbtn"))


def _click_checkboxes(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _boxes(view, {v for k, v in fields.items() if k.startswith("target")}, "checkbox")


def _click_option(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _boxes(view, {fields["target"]}, "radio")


def _choose_list(view: View, fields: Fields, history: Sequence[str]) -> str:
    target = fields["target"]
    for ref, select in view.selects.items():
        if 0 <= select.selected < len(select.options) and select.options[select.selected] == target:
            return _click(_by_text(view, "button", "Submit"))
        return _type(ref, target)
    raise RuntimeError("oracle found no list on the page")


def _focus_text(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _click(_by_id(view, "tt"))


def _focus_text_2(view: View, fields: Fields, history: Sequence[str]) -> str:
    match = re.search(r"(\d)(st|nd|rd|th) input", view.utterance)
    if match is None:
        raise RuntimeError(f"oracle cannot read {view.utterance!r}")
    return _click(_by_id(view, f"tt{match.group(1)}"))


def _click_dialog(view: View, fields: Fields, history: Sequence[str]) -> str:
    return _click(_find(view, lambda el: "ui-dialog-titlebar-close" in el.classes, "close x"))


def _click_dialog_2(view: View, fields: Fields, history: Sequence[str]) -> str:
    if fields["target"] == "x":
        return _click_dialog(view, fields, history)
    return _click(_by_text(view, "button", fields["target"]))


def _click_tab(view: View, fields: Fields, history: Sequence[str]) -> str:
    match = re.search(r"Tab #(\d)", view.utterance)
    if match is None:
        raise RuntimeError(f"oracle cannot read {view.utterance!r}")
    return _click(_by_text(view, "a", f"Tab #{match.group(1)}"))


def _click_collapsible(view: View, fields: Fields, history: Sequence[str]) -> str:
    header = _find(view, lambda el: el.tag == "h3", "section header")
    if "ui-state-active" not in header.classes:
        return _click(header)
    return _click(_by_id(view, "subbtn"))


def _find_link(
    view: View, target: str, sections: Sequence[DOMElement], history: Sequence[str]
) -> str:
    """Click the link ``target`` if shown, else open the next closed section in order.

    Sections are opened in document order: the next is the first closed one after the last
    one clicked (the one shown at the start has been seen too).
    """
    for el in view.listed():
        if el.tag == "span" and "alink" in el.classes.split() and el.text == target:
            return _click(el)
    clicked = [i for i, s in enumerate(sections) if _click(s) in history]
    for section in sections[max(clicked) + 1 if clicked else 0 :]:
        # an open tab marks its <li>, an open accordion section its header
        active = [section.classes, section.parent.classes if section.parent else ""]
        if not any("active" in c for c in active):
            return _click(section)
    raise RuntimeError(f"oracle opened every section and found no link {target!r}")


def _click_tab_2(view: View, fields: Fields, history: Sequence[str]) -> str:
    tabs = [el for el in view.listed() if el.tag == "a" and "ui-tabs-anchor" in el.classes]
    return _find_link(view, fields["target"], tabs, history)


def _click_collapsible_2(view: View, fields: Fields, history: Sequence[str]) -> str:
    headers = [el for el in view.listed() if el.tag == "h3"]
    return _find_link(view, fields["target"], headers, history)


def _copy_paste(view: View, fields: Fields, history: Sequence[str]) -> str:
    text = str(_by_id(view, "to-copy").value)
    return _form(view, [("answer-input", text)], "subbtn", history)


_WIDGETS = {
    "radio": "input_radio",
    "checkbox": "input_checkbox",
    "text": "input_text",
    "textarea": "textarea",
    "button": "button",
}


def _click_widget(view: View, fields: Fields, history: Sequence[str]) -> str:
    tag = _WIDGETS[fields["target"]]
    return _click(_find(view, lambda el: el.tag == tag, f"{tag} widget"))


SOLVERS: dict[str, Solver] = {
    "click-button": _click_button,
    "click-button-sequence": _click_button_sequence,
    "click-checkboxes": _click_checkboxes,
    "click-checkboxes-large": _click_checkboxes,
    "click-checkboxes-transfer": _click_checkboxes,
    "click-collapsible": _click_collapsible,
    "click-collapsible-nodelay": _click_collapsible,
    "click-collapsible-2": _click_collapsible_2,
    "click-collapsible-2-nodelay": _click_collapsible_2,
    "click-dialog": _click_dialog,
    "click-dialog-2": _click_dialog_2,
    "click-link": _click_link,
    "click-option": _click_option,
    "click-tab": _click_tab,
    "click-tab-2": _click_tab_2,
    "click-tab-2-easy": _click_tab_2,
    "click-tab-2-hard": _click_tab_2,
    "click-tab-2-medium": _click_tab_2,
    "click-test": _click_test,
    "click-test-2": _click_button,
    "click-test-transfer": _click_button,
    "click-widget": _click_widget,
    "choose-list": _choose_list,
    "copy-paste": _copy_paste,
    "enter-password": _enter_password,
    "enter-text": _enter_text,
    "enter-text-2": _enter_text_2,
    "enter-text-dynamic": _enter_text,
    "focus-text": _focus_text,
    "focus-text-2": _focus_text_2,
    "login-user": _login_user,
    "unicode-test": _click_button,
}
"""The tasks with a scripted solver (their ids have an oracle)."""
