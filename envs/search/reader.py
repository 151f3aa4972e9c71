"""A reader without privileged knowledge for the menu envs: what a policy could learn to do.

:class:`ReaderAgent` parses the question into its chain of relations, opens the page of the
entity the question names, and at each hop reads the sentences whose mention fits the object
type of the relation it needs (a company for "the employer of", a university for "the
university attended by", ...), typing each mention by its name alone (the word lists names are
made from, and the descriptor of a disambiguated title). Once a sentence has stated the
relation, the menu offers to follow it, and it follows. For a year or a population it reads
the page's sentences that mention nobody, where such facts are stated. It sees only the
observation and ``info["admissible_actions"]``, never the env's state: unlike the oracle it
must guess which sentence holds a relation, and pays a turn for every wrong guess.

    agentgym eval --agent agentgym.envs.search.reader:ReaderAgent --seeds 100 ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.search import _lexicon as lex
from agentgym.envs.search.questions import _ASK_ENTITY, _ASK_VALUE, _COMPARE, _NOUN_PHRASE
from agentgym.envs.search.world_types import ENTITY_RELATIONS

OBJECT_TYPE = {rel: obj for pairs in ENTITY_RELATIONS.values() for rel, obj in pairs}
"""The type of entity each relation points to (``works_for`` -> ``company``)."""

_READ = re.compile(r"^read: (.+) #(\d+)(?: \(mentions (.+)\))?$")
_FOLLOW = re.compile(r"^follow: (\w+) from (.+) to (.+)$")
_TITLED = re.compile(r"^(.*) \((.+)\)$")
ATTRIBUTE_SENTENCES = tuple(
    re.compile(
        "^"
        + re.escape(template)
        .replace(r"\{S\}", ".+")
        .replace(r"\{N\}", ".+")
        .replace(r"\{V\}", r"(\d[\d,]*)")
        + "$"
    )
    for attribute in sorted(set(_ASK_VALUE))
    for template in lex.TEMPLATES[attribute]
)
"""Sentences stating a year or a population (a filler's year, "a 1927 exhibition", is not)."""


@dataclass
class Chain:
    """One path the question asks about: an anchor, relations out of it, what ends it.

    Attributes:
        anchor: the anchor's name as the question writes it.
        relations: relations from the anchor outward.
        value: whether the chain ends in a number (a year, a population) rather than at the
            entity the last relation reaches.
    """

    anchor: str
    relations: list[str]
    value: bool


@dataclass
class Plan:
    """The question, parsed: its chains, and for a comparison which value wins."""

    chains: list[Chain]
    lower_wins: bool | None = None


def _template(text: str) -> tuple[str, str]:
    prefix, _, suffix = text.partition("{X}")
    return prefix, suffix


def parse_phrase(text: str) -> tuple[str, list[str]]:
    """The anchor of a noun phrase and the relations from it outward.

    ``"the founder of the employer of Ada Vance"`` -> ``("Ada Vance", ["works_for",
    "founded_by"])``.
    """
    relations: list[str] = []
    while True:
        for relation, phrase in _NOUN_PHRASE.items():
            prefix, suffix = _template(phrase)
            fits = len(text) > len(prefix) + len(suffix)
            if fits and text.startswith(prefix) and text.endswith(suffix):
                relations.append(relation)
                text = text[len(prefix) : len(text) - len(suffix)]
                break
        else:
            return text.removeprefix("the "), relations[::-1]


def parse_question(question: str) -> Plan | None:
    """The chains of a bridge, compositional or comparison question, or None if unknown."""
    for lows_and_highs in _COMPARE.values():
        for direction, lead in enumerate(lows_and_highs):
            if question.startswith(lead + ", ") and " or " in question:
                left, right = question[len(lead) + 2 : -1].split(" or ", 1)
                chains = [Chain(*parse_phrase(p), value=True) for p in (left, right)]
                return Plan(chains, lower_wins=direction == 0)
    for template in _ASK_VALUE.values():
        found = _match(template, question)
        if found is not None:
            return Plan([Chain(*parse_phrase(found), value=True)])
    for relation, template in _ASK_ENTITY.items():
        found = _match(template, question)
        if found is not None:
            anchor, relations = parse_phrase(found)
            return Plan([Chain(anchor, [*relations, relation], value=False)])
    return None


def _match(template: str, text: str) -> str | None:
    prefix, suffix = _template(template)
    if text.startswith(prefix) and text.endswith(suffix) and len(text) > len(prefix + suffix):
        return text[len(prefix) : len(text) - len(suffix)]
    return None


def guess_type(title: str) -> str:
    """The entity type a name suggests, from the word lists names are made of.

    A disambiguated title's descriptor decides (``"Xenium Group (energy company)"``).
    """
    found = _TITLED.match(title)
    if found:
        for etype, descriptors in lex.DESCRIPTORS.items():
            if found.group(2) in descriptors:
                return etype
        title = found.group(1)
    words = title.split()
    if words[-1] in ("International", "Global") or set(words) & set(lex._CO_KINDS):
        return "company"
    if any(kind in title for kind in lex._UNI_KINDS):
        return "university"
    if set(words) & set(lex._AWARD_KINDS):
        return "award"
    if words[0] in lex._FIRST:
        return "person"
    if set(words) & (set(lex._FILM_NOUN) | set(lex._FILM_ADJ)):
        return "film"
    return "city"


def attribute_value(sentence: str) -> str | None:
    """The year or population a sentence states, as written; None for any other sentence."""
    for pattern in ATTRIBUTE_SENTENCES:
        found = pattern.match(sentence)
        if found:
            return found.group(1)
    return None


def _plain(title: str) -> str:
    found = _TITLED.match(title)
    return found.group(1) if found else title


@dataclass
class _State:
    """Where the reader is: the chain and hop it works on, the page it stands on."""

    plan: Plan | None = None
    chain: int = 0
    hop: int = 0
    page: str | None = None
    values: list[int] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)


class ReaderAgent:
    """Reads by relation type, follows, answers; see the module docstring."""

    name = "reader"

    def __init__(self) -> None:
        """Start with no plan."""
        self._s = _State()

    def reset(self, env_id: str, seed: int) -> None:
        """Forget the last episode."""
        self._s = _State()

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next menu item of the plan."""
        items: list[str] = list(info.get("admissible_actions") or [])
        s = self._s
        if s.plan is None:
            question = re.search(r"^Question: (.*)$", observation, re.MULTILINE)
            s.plan = parse_question(question.group(1) if question else "")
        if s.plan is None or s.chain >= len(s.plan.chains):
            return self._answer(items)
        chain = s.plan.chains[s.chain]
        if s.page is None:
            return self._open(chain.anchor, items)
        if s.hop < len(chain.relations):
            return self._hop(chain, items)
        return self._value(observation, items)

    # -- the steps -------------------------------------------------------------------------

    def _open(self, anchor: str, items: list[str]) -> str:
        """Search the anchor, then expand its page (the title that is exactly its name)."""
        for item in items:
            if item.startswith("expand: ") and _plain(item[8:]) == anchor:
                self._s.page = item[8:]
                return item
        searches = [i for i in items if i.startswith("search: ")]
        exact = [i for i in searches if i[8:] == anchor]
        near = [i for i in searches if i[8:] in anchor or anchor in i[8:]]
        return (exact or near or searches or items)[0]

    def _hop(self, chain: Chain, items: list[str]) -> str:
        """Follow the relation once read; else read the sentence most likely to state it."""
        s = self._s
        relation = chain.relations[s.hop]
        last = s.hop == len(chain.relations) - 1
        for item in items:
            found = _FOLLOW.match(item)
            if found and found.group(1) == relation and found.group(2) == s.page:
                target = found.group(3)
                if last and not chain.value:
                    s.ends.append(target)
                    s.chain += 1
                    return self._answer(items, target)
                s.page, s.hop = target, s.hop + 1
                return item
        return self._read(items, OBJECT_TYPE.get(relation))

    def _value(self, observation: str, items: list[str]) -> str:
        """At the chain's last entity: read unmentioning sentences until a number appears."""
        s = self._s
        result = re.search(r"^Last result: (.*)$", observation, re.MULTILINE)
        text = result.group(1) if result else ""
        mine = text.startswith(f"{s.page} #")
        number = attribute_value(text.split(": ", 1)[-1]) if mine else None
        if number is None:
            return self._read(items, None)
        if s.plan is None or s.page is None:  # act() only gets here with both set
            return self._answer(items)
        s.values.append(int(number.replace(",", "")))
        s.ends.append(_plain(s.page))
        s.chain, s.hop, s.page = s.chain + 1, 0, None
        if len(s.plan.chains) == 1:
            return self._answer(items, number)
        if s.chain < len(s.plan.chains):  # the comparison's other side
            return self._open(s.plan.chains[s.chain].anchor, items)
        return self._answer(items)

    def _read(self, items: list[str], wanted: str | None) -> str:
        """The first unread sentence of the current page that may state what is wanted.

        That is a sentence whose mention is of type ``wanted`` (``None``: one that mentions
        nobody), else any other sentence of the page.
        """
        page = self._s.page
        reads = [(item, _READ.match(item)) for item in items]
        mine = [(item, m) for item, m in reads if m and m.group(1) == page]
        typed = [i for i, m in mine if (m.group(3) and guess_type(m.group(3)) == wanted)]
        bare = [i for i, m in mine if not m.group(3)]
        preferred = typed if wanted is not None else bare
        rest = [i for i, _ in mine]
        if preferred or rest:
            return (preferred or rest)[0]
        return self._answer(items)

    def _answer(self, items: list[str], text: str | None = None) -> str:
        """Answer ``text``, or the comparison's winner, or the latest candidate offered."""
        s = self._s
        answers = [i for i in items if i.startswith("answer: ")]
        lower_wins = None if s.plan is None else s.plan.lower_wins
        if text is None and lower_wins is not None and len(s.values) == 2:
            low = 0 if s.values[0] < s.values[1] else 1
            text = s.ends[low if lower_wins else 1 - low]
        if text is not None and f"answer: {_plain(text)}" in answers:
            return f"answer: {_plain(text)}"
        return (answers or items)[-1]
