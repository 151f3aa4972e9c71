"""A seeded synthetic world of entities and relations, rendered as encyclopedia pages.

Every entity (person, film, city, company, award, university) has a page of sentences. Each
fact of the world is stated by exactly one sentence on its *subject's* page, and every sentence
states at most one fact, so evidence for multi-hop questions is crisp. Pages also carry inverse
mentions ("Alice Marlow directed Night Harbor.") and filler sentences that link other entities
and years without stating any queried fact. Names are deliberately shared between entities of
the same type (the page titles disambiguate them), and attribute values such as release years
are shared widely, so reading the right page matters.

All randomness flows from ``numpy.random.default_rng(seed)``; the output never depends on set
iteration order or ``hash()``, so it is byte-for-byte identical in every process. The world's
types (:class:`Entity`, :class:`Fact`, :class:`Sentence`, :class:`World`) and relation tables
live in :mod:`agentgym.envs.search.world_types` and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

import numpy as np

from ._lexicon import DESCRIPTORS, ENTITY_TYPES, GENERIC, NAME_SPACES, TEMPLATES
from .world_types import (
    ATTRIBUTE_OF,
    ENTITY_RELATIONS,
    MULTI_RELATIONS,
    Entity,
    Fact,
    Sentence,
    World,
    entity_node,
    value_node,
)

__all__ = [
    "ATTRIBUTE_OF",
    "ENTITY_RELATIONS",
    "ENTITY_TYPES",
    "MULTI_RELATIONS",
    "Entity",
    "Fact",
    "RandomStream",
    "Sentence",
    "World",
    "entity_node",
    "generate_world",
    "value_node",
]

_MIN_PAGES = 2 * len(ENTITY_TYPES)
# Share of each type among the pages, and of each type's entities that reuse another's name.
_TYPE_WEIGHTS = dict(zip(ENTITY_TYPES, (0.38, 0.24, 0.10, 0.13, 0.06, 0.09), strict=True))
_NAME_SHARE = dict(zip(ENTITY_TYPES, (0.15, 0.12, 0.08, 0.10, 0.04, 0.05), strict=True))
_INVERSE = {"directed_by": "directed", "produced_by": "produced", "founded_by": "founded"}
_DIRECTOR_FRACTION = 0.3  # share of people who direct films
_AWARD_COUNT_PROBS = {"person": (0.6, 0.3, 0.1), "film": (0.5, 0.35, 0.15)}  # P(0, 1, 2 won)
_GENERIC_RATE = 0.25  # how often a {S} subject becomes "The film" etc. instead of the name


_T = TypeVar("_T")


class RandomStream:
    """A buffered stream of uniform floats drawn from a ``numpy.random.Generator``.

    Per-item choices (templates, shuffles) are made from this stream, which is much faster
    than one Generator call each and equally deterministic.
    """

    __slots__ = ("_buf", "_chunk", "_pos", "_rng")

    def __init__(self, rng: np.random.Generator, chunk: int = 8192) -> None:
        """Wrap ``rng``; floats are fetched ``chunk`` at a time."""
        self._rng = rng
        self._chunk = chunk
        self._buf: list[float] = []
        self._pos = 0

    def uniform(self) -> float:
        """Return the next float in ``[0, 1)``."""
        if self._pos >= len(self._buf):
            self._buf = self._rng.random(self._chunk).tolist()
            self._pos = 0
        value = self._buf[self._pos]
        self._pos += 1
        return value

    def index(self, k: int) -> int:
        """Return a uniform integer in ``[0, k)``; ``k`` must be positive."""
        i = int(self.uniform() * k)
        return i if i < k else k - 1

    def pick(self, items: Sequence[_T]) -> _T:
        """Return a uniformly chosen element of the non-empty sequence ``items``."""
        return items[self.index(len(items))]

    def shuffled(self, items: Sequence[_T]) -> list[_T]:
        """Return a uniformly shuffled copy of ``items`` (Fisher-Yates)."""
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.index(i + 1)
            out[i], out[j] = out[j], out[i]
        return out


def _roman(n: int) -> str:
    """Return the Roman numeral of a positive integer."""
    out = []
    for value, numeral in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        count, n = divmod(n, value)
        out.append(numeral * count)
    return "".join(out)


def _name(etype: str, index: int, tier: int) -> str:
    """Return name ``index`` of a type's word-list product, varied by ``tier``."""
    word_lists, formats = NAME_SPACES[etype]
    parts: list[str] = []
    for words in reversed(word_lists):
        index, k = divmod(index, len(words))
        parts.append(words[k])
    parts.reverse()
    if tier < len(formats):
        return formats[tier].format(*parts)
    return f"{formats[0].format(*parts)} {_roman(tier - len(formats) + 2)}"


class _Item(NamedTuple):
    """A rendered sentence before it gets its id."""

    text: str
    mentions: tuple[int, ...]
    values: tuple[str, ...]
    relation: str | None
    obj: str | None


@dataclass
class _Plan:
    """The world's structure before rendering."""

    etypes: list[str]
    ids_by_type: dict[str, np.ndarray]
    names: list[str]
    values: list[str]
    links: list[list[tuple[str, int]]]
    inverse: list[list[tuple[str, int]]] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    descriptors: list[str] = field(default_factory=list)


def generate_world(n_pages: int, seed: int) -> World:
    """Generate a world of ``n_pages`` entities (one page each) deterministically from ``seed``.

    Args:
        n_pages: Number of entities and pages; at least 12.
        seed: Non-negative integer seed.

    Returns:
        The generated world.

    Raises:
        ValueError: If ``n_pages`` or ``seed`` is out of range.
    """
    if isinstance(n_pages, bool) or not isinstance(n_pages, int) or n_pages < _MIN_PAGES:
        raise ValueError(f"n_pages must be an int >= {_MIN_PAGES}, got {n_pages!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng(seed)
    draws = RandomStream(rng.spawn(1)[0])
    etypes = _allocate_types(n_pages, rng)
    ids_by_type = {t: np.flatnonzero(etypes == t) for t in ENTITY_TYPES}
    links = _assign_links(ids_by_type, n_pages, rng)
    plan = _Plan(
        etypes=etypes.tolist(),
        ids_by_type=ids_by_type,
        names=_assign_names(ids_by_type, n_pages, rng),
        values=_assign_values(ids_by_type, links, n_pages, rng),
        links=links,
    )
    plan.inverse = [[] for _ in range(n_pages)]
    for subject, subject_links in enumerate(links):
        for relation, obj in subject_links:
            if relation in _INVERSE:
                plan.inverse[obj].append((_INVERSE[relation], subject))
    _assign_titles(plan, draws)
    return _render(plan, draws, seed)


def _allocate_types(n: int, rng: np.random.Generator) -> np.ndarray:
    """Return the entity type of each id: counts by weight (at least 2 each), shuffled."""
    weights = np.array([_TYPE_WEIGHTS[t] for t in ENTITY_TYPES])
    raw = weights / weights.sum() * n
    counts = np.maximum(np.floor(raw).astype(np.int64), 2)
    while counts.sum() < n:
        counts[int(np.argmax(raw - counts))] += 1
    while counts.sum() > n:
        counts[int(np.argmax(counts))] -= 1
    return rng.permutation(np.repeat(np.array(ENTITY_TYPES), counts))


def _distinct_names(etype: str, k: int, rng: np.random.Generator) -> list[str]:
    """Draw ``k`` distinct names of type ``etype`` from its combinatorial name space."""
    base = math.prod(len(words) for words in NAME_SPACES[etype][0])
    tiers = max(1, math.ceil(1.5 * k / base))
    picks = rng.choice(base * tiers, size=k, replace=False).tolist()
    return [_name(etype, i % base, i // base) for i in picks]


def _assign_names(
    ids_by_type: dict[str, np.ndarray], n: int, rng: np.random.Generator
) -> list[str]:
    """Name every entity; a type-specific fraction reuse a name (groups of 2 or 3)."""
    names = [""] * n
    for etype in ENTITY_TYPES:
        ids = ids_by_type[etype]
        m = len(ids)
        n_dup = min(round(m * _NAME_SHARE[etype]), m // 2)
        pool = _distinct_names(etype, m - n_dup, rng)
        targets = rng.choice(m - n_dup, size=n_dup, replace=False)
        n3 = n_dup // 4
        targets[:n3] = targets[n3 : 2 * n3]  # these names get a third holder
        chosen = pool + [pool[t] for t in targets.tolist()]
        for j, pos in enumerate(rng.permutation(m).tolist()):
            names[int(ids[pos])] = chosen[j]
    return names


def _assign_links(
    ids_by_type: dict[str, np.ndarray], n: int, rng: np.random.Generator
) -> list[list[tuple[str, int]]]:
    """Draw every entity-valued fact: functional relations, then awards won."""
    links: list[list[tuple[str, int]]] = [[] for _ in range(n)]
    persons = ids_by_type["person"]
    directors = rng.permutation(persons)[: max(1, math.ceil(_DIRECTOR_FRACTION * len(persons)))]
    for etype in ENTITY_TYPES:
        subjects = ids_by_type[etype].tolist()
        for relation, otype in ENTITY_RELATIONS[etype]:
            pool = directors if relation == "directed_by" else ids_by_type[otype]
            objs = pool[rng.integers(0, len(pool), size=len(subjects))].tolist()
            for subject, obj in zip(subjects, objs, strict=True):
                links[subject].append((relation, obj))
    awards = ids_by_type["award"]
    for etype, probs in _AWARD_COUNT_PROBS.items():
        subjects = ids_by_type[etype].tolist()
        counts = rng.choice(len(probs), size=len(subjects), p=probs).tolist()
        picks = awards[rng.integers(0, len(awards), size=(len(subjects), 2))].tolist()
        for subject, count, (first, second) in zip(subjects, counts, picks, strict=True):
            for award in sorted({first, second} if count == 2 else {first})[:count]:
                links[subject].append(("won", award))
    return links


def _assign_values(
    ids_by_type: dict[str, np.ndarray],
    links: list[list[tuple[str, int]]],
    n: int,
    rng: np.random.Generator,
) -> list[str]:
    """Draw each entity's numeric attribute, returned as display text."""
    years = np.zeros(n, dtype=np.int64)

    def draw(etype: str, low: int, high: int) -> None:
        ids = ids_by_type[etype]
        years[ids] = rng.integers(low, high, size=len(ids))

    draw("person", 1925, 2001)
    draw("university", 1636, 1996)
    draw("award", 1895, 2016)
    # A company is founded 22-55 years after its founder's birth, a film released 24-60 years
    # after its director's, and neither later than the cap.
    for etype, relation, low, high, cap in (
        ("company", "founded_by", 22, 55, 2022),
        ("film", "directed_by", 24, 60, 2024),
    ):
        ids = ids_by_type[etype]
        born = years[[dict(links[i])[relation] for i in ids.tolist()]]
        first, last = born + low, np.minimum(born + high, cap)
        years[ids] = first + np.floor(rng.random(len(ids)) * (last - first + 1)).astype(np.int64)
    cities = ids_by_type["city"]
    population = np.round(10.0 ** rng.uniform(3.6, 6.7, size=len(cities)), -3).astype(np.int64)
    values = [str(y) for y in years.tolist()]
    for city, people in zip(cities.tolist(), population.tolist(), strict=True):
        values[city] = f"{people:,}"
    return values


def _assign_titles(plan: _Plan, draws: RandomStream) -> None:
    """Give every entity a descriptor and a unique title ``name (descriptor)`` when shared."""
    plan.descriptors = [draws.pick(DESCRIPTORS[t]) for t in plan.etypes]
    groups: dict[str, list[int]] = {}
    for eid, name in enumerate(plan.names):
        groups.setdefault(name, []).append(eid)
    plan.titles = list(plan.names)
    for group in groups.values():
        if len(group) < 2:
            continue
        for etype in ENTITY_TYPES:
            members = [eid for eid in group if plan.etypes[eid] == etype]
            options = draws.shuffled(DESCRIPTORS[etype]) if members else []
            for k, eid in enumerate(members):
                plan.descriptors[eid] = options[k % len(options)]
        for eid in group:
            plan.titles[eid] = f"{plan.names[eid]} ({plan.descriptors[eid]})"
    taken: set[str] = set()
    for eid, title in enumerate(plan.titles):
        k = 1
        while title in taken:
            k += 1
            title = f"{plan.names[eid]} ({plan.descriptors[eid]} {k})"
        plan.titles[eid] = title
        taken.add(title)


def _surface(plan: _Plan, eid: int) -> str:
    """How an entity is written mid-sentence ("the Marlow Prize" for awards)."""
    name = plan.names[eid]
    return f"the {name}" if plan.etypes[eid] == "award" else name


def _fill(
    template: str, plan: _Plan, draws: RandomStream, eid: int, **slots: str
) -> tuple[str, bool]:
    """Format a template for page ``eid``; return the text and whether it names ``eid``."""
    named = "{N}" in template
    name = subject = _surface(plan, eid)
    if "{S}" in template:
        etype = plan.etypes[eid]
        named = etype not in GENERIC or draws.uniform() >= _GENERIC_RATE
        subject = name if named else GENERIC[etype]
    text = template.format(S=subject, N=name, **slots)
    return text[0].upper() + text[1:], named


def _render_link(plan: _Plan, draws: RandomStream, eid: int, relation: str, obj: int) -> _Item:
    """Render one entity-valued fact of page ``eid``."""
    text, named = _fill(draws.pick(TEMPLATES[relation]), plan, draws, eid, O=_surface(plan, obj))
    mentions = (min(eid, obj), max(eid, obj)) if named else (obj,)
    return _Item(text, mentions, (), relation, entity_node(obj))


def _render_attribute(plan: _Plan, draws: RandomStream, eid: int) -> _Item:
    """Render the numeric attribute fact of page ``eid``."""
    relation = ATTRIBUTE_OF[plan.etypes[eid]]
    value = plan.values[eid]
    text, named = _fill(draws.pick(TEMPLATES[relation]), plan, draws, eid, V=value)
    return _Item(text, (eid,) if named else (), (value,), relation, value)


def _render_filler(plan: _Plan, draws: RandomStream, eid: int) -> _Item:
    """Render a sentence naming other entities or a year but stating no fact."""
    n = len(plan.names)
    other = (eid + 1 + draws.index(n - 1)) % n
    cities = plan.ids_by_type["city"]
    city = int(cities[draws.index(len(cities))])
    year = str(1900 + draws.index(124))
    template = draws.pick(TEMPLATES["filler"])
    text, _ = _fill(
        template, plan, draws, eid, O=_surface(plan, other), C=_surface(plan, city), Y=year
    )
    mentions = {eid}
    mentions.update(x for slot, x in (("{O}", other), ("{C}", city)) if slot in template)
    values = (year,) if "{Y}" in template else ()
    return _Item(text, tuple(sorted(mentions)), values, None, None)


def _render_intro(plan: _Plan, draws: RandomStream, eid: int) -> _Item:
    """Render the first sentence of page ``eid``: its name and descriptor."""
    descriptor = plan.descriptors[eid]
    article = "an" if descriptor[0] in "aeiou" else "a"
    text, _ = _fill(draws.pick(TEMPLATES["intro"]), plan, draws, eid, d=f"{article} {descriptor}")
    return _Item(text, (eid,), (), None, None)


def _page_items(plan: _Plan, draws: RandomStream, eid: int) -> list[_Item]:
    """Render page ``eid``: the intro, then facts, inverse mentions and fillers shuffled."""
    body = [_render_link(plan, draws, eid, rel, obj) for rel, obj in plan.links[eid]]
    body.append(_render_attribute(plan, draws, eid))
    body.extend(_render_link(plan, draws, eid, rel, obj) for rel, obj in plan.inverse[eid])
    body.extend(_render_filler(plan, draws, eid) for _ in range(1 + draws.index(2)))
    return [_render_intro(plan, draws, eid), *draws.shuffled(body)]


def _render(plan: _Plan, draws: RandomStream, seed: int) -> World:
    """Render every page and assemble the world."""
    sentences: dict[str, Sentence] = {}
    pages: list[tuple[str, ...]] = []
    facts: list[Fact] = []
    entities = []
    for eid, etype in enumerate(plan.etypes):
        entities.append(
            Entity(
                eid,
                etype,
                plan.names[eid],
                plan.titles[eid],
                ((ATTRIBUTE_OF[etype], plan.values[eid]),),
            )
        )
        ids = []
        for k, item in enumerate(_page_items(plan, draws, eid)):
            sid = f"s:{eid}:{k}"
            fact = None
            if item.relation is not None and item.obj is not None:
                fact = Fact(item.relation, eid, item.obj, sid)
                facts.append(fact)
            sentences[sid] = Sentence(sid, eid, item.text, item.mentions, item.values, fact)
            ids.append(sid)
        pages.append(tuple(ids))
    return World(
        seed=seed,
        entities=tuple(entities),
        sentences=sentences,
        pages=tuple(pages),
        facts=tuple(facts),
    )
