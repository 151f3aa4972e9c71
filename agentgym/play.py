"""``agentgym play``: a person plays an episode in the terminal.

Where the env lists its actions (``info["admissible_actions"]``: a menu, or a text game's
admissible commands), they are shown numbered and a line is matched against them before
anything is sent: a number, an item's text, a unique prefix of it, or the item without its
trailing parenthetical. A line that matches nothing or several items is answered here and
costs no turn. Envs without such a list get each line as it is.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from agentgym.core.menu import Menu, shorten
from agentgym.core.spaces import String
from agentgym.registry import make

_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
_ENDS_EPISODE = re.compile(
    r"\s*(answer|buy)\b|.*<answer>|\s*click\[\s*buy now\s*\]", re.IGNORECASE | re.DOTALL
)
"""Actions that end the episode: menu answers (``answer: ...``), a shop's ``buy`` or
``click[Buy Now]``, and a free-form ``<answer>...</answer>``."""
_NO_MATCH = "no action matches"
"""How the message about a line that matches no listed action starts."""
_SHOWN_AT_MOST = 6
"""How many items a message about an ambiguous line names."""


def _key(text: str) -> str:
    """``text`` for comparison: letter case and runs of whitespace ignored."""
    return " ".join(text.split()).casefold()


def _numbered(items: Sequence[str], indices: Sequence[int]) -> str:
    shown = ", ".join(f"[{i}] {items[i]}" for i in indices[:_SHOWN_AT_MOST])
    more = len(indices) - _SHOWN_AT_MOST
    return shown + (f" and {more} more" if more > 0 else "")


def match_action(line: str, items: Sequence[str] | None) -> tuple[str | None, str | None]:
    """Turn a typed line into the action to send, or say why there is none.

    Without ``items`` (an env with free-form actions) the stripped line is the action.
    With them, in this order: a number chooses that item (numbered from 0, as menus are);
    the item's text (letter case and extra spaces ignored); the item's text without its
    trailing parenthetical (``read: Orarshire #3`` for ``read: Orarshire #3 (mentions
    Mareminster)``); a prefix of exactly one item's text.

    Args:
        line: what the person typed.
        items: the env's admissible actions, or None where it has none.

    Returns:
        ``(action, None)`` with the item's own text, or ``(None, message)`` when the line is
        empty or matches no item or several.
    """
    text = line.strip()
    if not text:
        return None, ""
    if not items:
        return text, None
    if text.isascii() and text.isdigit():
        if int(text) < len(items):
            return items[int(text)], None
        return None, f"no action is numbered {text}; {_how_to_choose(items)}"
    key = _key(text)
    exact = [item for item in items if _key(item) == key]
    if exact:
        return exact[0], None
    for tier in (
        lambda item: _key(_PARENTHETICAL.sub("", item)) == key,
        lambda item: _key(item).startswith(key),
    ):
        found = [i for i, item in enumerate(items) if tier(item)]
        if len(found) == 1:
            return items[found[0]], None
        if found:
            return None, (
                f"{shorten(text)} matches {len(found)} actions: {_numbered(items, found)}; "
                "type more of it or its number"
            )
    return None, f"{_NO_MATCH} {shorten(text)}; {_how_to_choose(items)}"


def _how_to_choose(items: Sequence[str]) -> str:
    return f"type a number from 0 to {len(items) - 1} or an action's text"


def ends_episode(action: str) -> bool:
    """Whether ``action`` ends the episode by its kind: an answer or a purchase."""
    return _ENDS_EPISODE.match(action) is not None


def _listing(observation: str, items: Sequence[str] | None) -> str:
    """The numbered actions, unless the observation already shows them so."""
    if not items:
        return ""
    menu = Menu(items, len(items)).render()
    return "" if menu in observation else f"\nActions:\n{menu}\n"


def _read_action(
    stdin: TextIO, stdout: TextIO, items: Sequence[str] | None, confirm: bool, free: bool
) -> str | None:
    """Ask until a line names an action (and, if it ends the episode, it is confirmed).

    With ``free`` (the env takes any text), a line that matches no listed action at all is
    sent as typed: the list is then a help, not the whole action set (a shop's search box);
    an ambiguous prefix or an unknown number still gets its message.
    Returns None when input ends.
    """
    while True:
        stdout.write("> ")
        stdout.flush()
        line = stdin.readline()
        if not line:
            return None
        action, message = match_action(line, items)
        if action is None and free and (message or "").startswith(_NO_MATCH):
            action = line.strip()
        if action is None:
            if message:
                stdout.write(f"{message}\n")
            continue
        if not confirm or not ends_episode(action):
            return action
        stdout.write(f"{action!r}: this ends the episode; sure? [y/N] ")
        stdout.flush()
        answer = stdin.readline()
        if not answer:
            return None
        if answer.strip().casefold() in ("y", "yes"):
            return action
        stdout.write("Not sent; choose an action.\n")


def play_episode(
    env_id: str,
    *,
    seed: int = 0,
    split: str = "train",
    env_kwargs: dict[str, Any] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    confirm: bool = True,
) -> float:
    """Show each observation, read one action per line, until the episode ends or input does.

    Lines are matched as :func:`match_action` says; only a line that names an action is sent
    to the env, so only those cost a turn. An action that ends the episode (an answer, a
    purchase) is sent after a ``y`` to a question, unless ``confirm`` is False or the input
    is not a terminal (moves piped from a file are a script, not a person to ask).

    Returns:
        The episode's return (the sum of its rewards so far when input ends).
    """
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    env = make(env_id, split=split, render_mode="ansi", **(env_kwargs or {}))
    obs, info = env.reset(seed=seed)
    free = isinstance(env.action_space, String)
    total = 0.0
    stdout.write(f"{env_id}, seed {seed}, task {info['task_id']} ({info['task_type']})\n")
    while True:
        items = info.get("admissible_actions")
        stdout.write(f"\n{obs}\n{_listing(str(obs), items)}")
        action = _read_action(stdin, stdout, items, confirm and stdin.isatty(), free)
        if action is None:
            stdout.write("\n(input ended)\n")
            break
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        if not info["action_valid"]:
            stdout.write("(that action was not valid)\n")
        if terminated or truncated:
            why = "turn limit reached" if truncated else ("you won" if info["won"] else "you lost")
            stdout.write(f"\n{obs}\n\nEpisode over: {why}. Return {total:g}.\n")
            break
    env.close()
    return total
