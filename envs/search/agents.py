"""Scripted baselines for the search envs, between the random agent and the oracle.

Use them with ``--agent agentgym.envs.search.agents:MenuHeuristicAgent`` (or
``FreeHeuristicAgent``). They read only observations and the public ``info`` keys.
"""

from __future__ import annotations

import re
from typing import Any

from agentgym.envs.search.answers import normalize

# Question words that point at a relation, used to pick which link to follow.
RELATION_CUES = {
    "directed_by": ("direct",),
    "produced_by": ("produc",),
    "born_in": ("born", "birthplace"),
    "works_for": ("employ", "work"),
    "educated_at": ("attend", "universit", "stud"),
    "headquartered_in": ("headquarter",),
    "founded_by": ("founder", "founded by"),
    "located_in": ("located",),
}
_OPTIONS = re.compile(r",\s*(.+?)\s+or\s+(.+?)\?\s*$")
_QUESTION = re.compile(r"^Question: (.*)$", re.MULTILINE)
_DOC = re.compile(r"^Doc \d+ \(Title: (.*?)\) (.*)$", re.MULTILINE)


def _question(observation: str) -> str:
    found = _QUESTION.search(observation)
    return found.group(1) if found else ""


def _comparison_options(question: str) -> tuple[str, str] | None:
    """The two options of "Which ..., X or Y?", if the question is a comparison."""
    found = _OPTIONS.search(question)
    return (found.group(1), found.group(2)) if found else None


class MenuHeuristicAgent:
    """Greedy keyword agent for the menu envs.

    It searches the named pages, reads every sentence, follows links whose relation the
    question names, then answers the newest candidate (or the first option of a comparison).
    """

    def reset(self, env_id: str, seed: int) -> None:
        """Nothing is kept between episodes."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The first applicable rule's menu item."""
        items: list[str] = info["admissible_actions"]
        question = _question(observation).lower()
        by_kind: dict[str, list[str]] = {}
        for item in items:
            by_kind.setdefault(item.split(":", 1)[0], []).append(item)
        options = _comparison_options(_question(observation))
        if options:
            wanted = f"answer: {options[0]}"
            if wanted in items:
                return wanted
        for kind in ("search", "read"):
            if by_kind.get(kind):
                return by_kind[kind][0]
        for item in by_kind.get("follow", []):
            relation = item.split()[1]
            if any(cue in question for cue in RELATION_CUES.get(relation, ())):
                return item
        if "Current page: none" in observation and by_kind.get("expand"):
            return by_kind["expand"][0]
        if by_kind.get("answer"):
            return by_kind["answer"][-1]
        return items[0]


class FreeHeuristicAgent:
    """BM25 agent for the free-form envs: search the question, then answer.

    The answer is the first option of a comparison, or the title of the best retrieved page
    the question does not name.
    """

    def __init__(self) -> None:
        """Start with no search made."""
        self._searched = False

    def reset(self, env_id: str, seed: int) -> None:
        """Start a new episode."""
        self._searched = False

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Search once, then answer."""
        question = _question(observation)
        if not self._searched:
            self._searched = True
            return f"<search>{question}</search>"
        options = _comparison_options(question)
        if options:
            return f"<answer>{options[0]}</answer>"
        asked = normalize(question)
        for title, _ in _DOC.findall(observation):
            name = re.sub(r"\s*\(.*\)$", "", title)
            if normalize(name) not in asked:
                return f"<answer>{name}</answer>"
        return "<answer>unknown</answer>"
