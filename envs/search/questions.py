"""Multi-hop questions over a generated :class:`~.world.World`.

Three task types, each answerable only by reading a chain of evidence sentences:

* ``bridge``: from an anchor entity follow 2-4 functional relations to an entity answer
  ("In which city was the director of Night Harbor born?").
* ``compositional``: follow 1-3 relations, then read a numeric attribute of the entity reached
  ("In what year was the company that produced Night Harbor founded?").
* ``comparison``: compare two anchors (2 hops) or the entities one relation away from two
  anchors (4 hops) on a numeric attribute; ties are never generated.

Every evidence sentence is the ``Fact.sentence_id`` of a fact on the chain, which lives on the
fact's subject page, so an agent can search the anchor, open its page, read, follow the stated
relation and repeat. Anchors always have a name no other entity shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .world import RandomStream
from .world_types import (
    ATTRIBUTE_OF,
    ENTITY_RELATIONS,
    ENTITY_TYPES,
    Fact,
    World,
    entity_node,
    value_node,
)

__all__ = ["TASK_TYPES", "Question", "generate_questions"]

TASK_TYPES: tuple[str, ...] = ("bridge", "comparison", "compositional")

_HOPS = {"bridge": (2, 3, 4), "comparison": (2, 4), "compositional": (2, 3, 4)}
_MAX_HOPS = 4
# A (task, hops) kind is abandoned after this many consecutive failed or duplicate draws.
_MAX_FAILURES = 3000

# Noun phrase for "the object of relation R of X".
_NOUN_PHRASE = {
    "directed_by": "the director of {X}",
    "produced_by": "the company that produced {X}",
    "born_in": "the birthplace of {X}",
    "works_for": "the employer of {X}",
    "educated_at": "the university attended by {X}",
    "headquartered_in": "the city where {X} is headquartered",
    "founded_by": "the founder of {X}",
    "located_in": "the city where {X} is located",
}
# Question asking for the object of relation R of X.
_ASK_ENTITY = {
    "directed_by": "Who directed {X}?",
    "produced_by": "Which company produced {X}?",
    "born_in": "In which city was {X} born?",
    "works_for": "Which company does {X} work for?",
    "educated_at": "Which university did {X} attend?",
    "headquartered_in": "In which city is {X} headquartered?",
    "founded_by": "Who founded {X}?",
    "located_in": "In which city is {X} located?",
}
# Question asking for attribute A of X.
_ASK_VALUE = {
    "birth_year": "In what year was {X} born?",
    "release_year": "In what year was {X} released?",
    "founded_year": "In what year was {X} founded?",
    "population": "What is the population of {X}?",
    "established_year": "In what year was {X} established?",
}
# Comparison lead by the compared entities' type: (lower value wins, higher value wins).
_COMPARE = {
    "person": ("Who was born earlier", "Who was born later"),
    "film": ("Which film was released earlier", "Which film was released later"),
    "city": ("Which city has the smaller population", "Which city has the larger population"),
    "company": ("Which company was founded earlier", "Which company was founded later"),
    "award": ("Which award was established earlier", "Which award was established later"),
    "university": ("Which university was founded earlier", "Which university was founded later"),
}
# Verb phrase of a reasoning step "<subject> <verb> <object>".
_STEP = {
    "directed_by": "was directed by",
    "produced_by": "was produced by",
    "born_in": "was born in",
    "works_for": "works for",
    "educated_at": "was educated at",
    "headquartered_in": "is headquartered in",
    "founded_by": "was founded by",
    "located_in": "is located in",
    "birth_year": "was born in",
    "release_year": "was released in",
    "founded_year": "was founded in",
    "population": "has a population of",
    "established_year": "was established in",
}


@dataclass(frozen=True, slots=True)
class Question:
    """A multi-hop question with its gold answer and evidence.

    Attributes:
        id: ``"q<index:05d>"``.
        task_type: One of ``TASK_TYPES``.
        hops: Number of evidence sentences needed, 2 to 4.
        text: The question.
        answer: Gold answer text: an entity name or a value text.
        aliases: Other accepted answers (the page title when it differs from the name, "the X"
            for awards, the comma-free form of a population).
        answer_node: ``"e:<id>"`` or ``"v:<text>"``.
        anchors: Ids of the entities the question names; each has a unique name in the world.
        mentions: Substrings of ``text`` naming the anchors, in the same order.
        evidence: Gold sentence ids in reasoning order.
        chain: One short human-readable reasoning step per evidence sentence.
    """

    id: str
    task_type: str
    hops: int
    text: str
    answer: str
    aliases: tuple[str, ...]
    answer_node: str
    anchors: tuple[int, ...]
    mentions: tuple[str, ...]
    evidence: tuple[str, ...]
    chain: tuple[str, ...]


@dataclass(frozen=True)
class _Context:
    """Per-world lookups shared by the question builders."""

    world: World
    anchors: dict[str, tuple[int, ...]]  # unique-name entities by type, ascending
    reach: dict[str, int]  # longest relation chain (capped) from each type


_Built = tuple[tuple[object, ...], Question]


def generate_questions(world: World, n: int, seed: int) -> tuple[Question, ...]:
    """Generate up to ``n`` distinct questions about ``world``, deterministically from ``seed``.

    Task types are balanced (the least-produced type is drawn next) and hop counts are drawn
    uniformly per type. Fewer than ``n`` questions are returned only when the world cannot
    yield more distinct ones.

    Args:
        world: The world to ask about.
        n: Number of questions wanted (>= 0).
        seed: Non-negative integer seed.

    Returns:
        The questions, with ids ``q00000``, ``q00001``, ... in generation order.

    Raises:
        ValueError: If ``n`` or ``seed`` is out of range.
    """
    for label, number in (("n", n), ("seed", seed)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{label} must be a non-negative int, got {number!r}")
    ctx = _context(world)
    draws = RandomStream(np.random.default_rng(seed))
    failures = {(task, hops): 0 for task in TASK_TYPES for hops in _HOPS[task]}
    counts = dict.fromkeys(TASK_TYPES, 0)
    seen_keys: set[tuple[object, ...]] = set()
    seen_texts: set[str] = set()
    out: list[Question] = []
    while len(out) < n:
        live = [t for t in TASK_TYPES if any(failures[t, h] < _MAX_FAILURES for h in _HOPS[t])]
        if not live:
            break
        task = min(live, key=lambda t: counts[t])
        hops = draws.pick([h for h in _HOPS[task] if failures[task, h] < _MAX_FAILURES])
        built = _BUILDERS[task](ctx, draws, hops)
        if built is None or built[0] in seen_keys or built[1].text in seen_texts:
            failures[task, hops] += 1
            continue
        failures[task, hops] = 0
        counts[task] += 1
        seen_keys.add(built[0])
        seen_texts.add(built[1].text)
        out.append(replace(built[1], id=f"q{len(out):05d}"))
    return tuple(out)


def _context(world: World) -> _Context:
    """Collect the unique-name anchors by type and the reach of each type."""
    anchors: dict[str, list[int]] = {t: [] for t in ENTITY_TYPES}
    for entity in world.entities:
        if len(world.by_name(entity.name)) == 1:
            anchors[entity.etype].append(entity.id)
    reach = dict.fromkeys(ENTITY_TYPES, 0)
    for _ in range(_MAX_HOPS):
        reach = {t: max([0] + [1 + reach[o] for _, o in ENTITY_RELATIONS[t]]) for t in ENTITY_TYPES}
    return _Context(world, {t: tuple(ids) for t, ids in anchors.items()}, reach)


def _target(fact: Fact) -> int:
    """Return the entity id an entity-valued fact points to."""
    return int(fact.obj[2:])


def _walk(ctx: _Context, draws: RandomStream, start: int, steps: int) -> list[Fact] | None:
    """Follow ``steps`` random functional relations from ``start`` without revisiting."""
    world = ctx.world
    facts: list[Fact] = []
    visited = {start}
    current = start
    for step in range(steps):
        remaining = steps - step - 1
        options = [
            rel
            for rel, otype in ENTITY_RELATIONS[world.entities[current].etype]
            if ctx.reach[otype] >= remaining
        ]
        if not options:
            return None
        fact = world.fact_of(current, draws.pick(options))
        if fact is None or _target(fact) in visited:
            return None
        facts.append(fact)
        current = _target(fact)
        visited.add(current)
    return facts


def _pick_anchor(ctx: _Context, draws: RandomStream, min_reach: int) -> int | None:
    """Draw an anchor of a uniformly drawn type from which ``min_reach`` hops are possible."""
    types = [t for t in ENTITY_TYPES if ctx.anchors[t] and ctx.reach[t] >= min_reach]
    return draws.pick(ctx.anchors[draws.pick(types)]) if types else None


def _surface(world: World, eid: int) -> str:
    """How an anchor is written in a question ("the Marlow Prize" for awards)."""
    entity = world.entities[eid]
    return f"the {entity.name}" if entity.etype == "award" else entity.name


def _noun_phrase(world: World, anchor: int, relations: Sequence[str]) -> str:
    """Describe the entity reached from ``anchor`` by ``relations``."""
    text = _surface(world, anchor)
    for relation in relations:
        text = _NOUN_PHRASE[relation].format(X=text)
    return text


def _step(world: World, fact: Fact) -> str:
    """Render one reasoning step, naming entities by their unique titles."""
    subject = world.entities[fact.subject].title
    obj = fact.obj if fact.relation in _ASK_VALUE else world.entities[_target(fact)].title
    return f"{subject} {_STEP[fact.relation]} {obj}"


def _question(
    world: World,
    task: str,
    text: str,
    answer_node: str,
    anchors: tuple[int, ...],
    facts: Sequence[Fact],
) -> Question:
    """Assemble a question (id left empty) with its answer, aliases and evidence."""
    if answer_node.startswith("e:"):
        entity = world.entities[int(answer_node[2:])]
        answer = entity.name
        forms = {entity.title, f"the {entity.name}" if entity.etype == "award" else entity.name}
    else:
        answer = answer_node[2:]
        forms = {answer.replace(",", "")}
    return Question(
        id="",
        task_type=task,
        hops=len(facts),
        text=text,
        answer=answer,
        aliases=tuple(sorted(forms - {answer})),
        answer_node=answer_node,
        anchors=anchors,
        mentions=tuple(world.entities[a].name for a in anchors),
        evidence=tuple(f.sentence_id for f in facts),
        chain=tuple(_step(world, f) for f in facts),
    )


def _bridge(ctx: _Context, draws: RandomStream, hops: int) -> _Built | None:
    """Anchor -> ``hops`` relations -> entity answer."""
    anchor = _pick_anchor(ctx, draws, hops)
    facts = None if anchor is None else _walk(ctx, draws, anchor, hops)
    if anchor is None or facts is None:
        return None
    relations = [f.relation for f in facts]
    text = _ASK_ENTITY[relations[-1]].format(X=_noun_phrase(ctx.world, anchor, relations[:-1]))
    question = _question(ctx.world, "bridge", text, facts[-1].obj, (anchor,), facts)
    return ("bridge", anchor, tuple(relations)), question


def _compositional(ctx: _Context, draws: RandomStream, hops: int) -> _Built | None:
    """Anchor -> ``hops - 1`` relations -> numeric attribute answer."""
    anchor = _pick_anchor(ctx, draws, hops - 1)
    facts = None if anchor is None else _walk(ctx, draws, anchor, hops - 1)
    if anchor is None or facts is None:
        return None
    last = _target(facts[-1])
    attribute = ATTRIBUTE_OF[ctx.world.entities[last].etype]
    value = ctx.world.fact_of(last, attribute)
    if value is None:
        return None
    relations = [f.relation for f in facts]
    text = _ASK_VALUE[attribute].format(X=_noun_phrase(ctx.world, anchor, relations))
    question = _question(
        ctx.world, "compositional", text, value_node(value.obj), (anchor,), [*facts, value]
    )
    return ("compositional", anchor, tuple(relations)), question


def _measure(
    world: World, anchor: int, relations: Sequence[str]
) -> tuple[list[Fact], int, int] | None:
    """Follow ``relations`` from ``anchor``; return the facts, the entity reached and its value."""
    facts: list[Fact] = []
    current = anchor
    for relation in relations:
        fact = world.fact_of(current, relation)
        if fact is None:
            return None
        facts.append(fact)
        current = _target(fact)
    value = world.fact_of(current, ATTRIBUTE_OF[world.entities[current].etype])
    if value is None:
        return None
    return [*facts, value], current, int(value.obj.replace(",", ""))


def _comparison(ctx: _Context, draws: RandomStream, hops: int) -> _Built | None:
    """Two same-type anchors (or the entities one relation away) compared on an attribute."""
    world = ctx.world
    depth = hops // 2 - 1
    types = [
        t for t in ENTITY_TYPES if len(ctx.anchors[t]) >= 2 and (depth == 0 or ENTITY_RELATIONS[t])
    ]
    if not types:
        return None
    etype = draws.pick(types)
    a, b = draws.pick(ctx.anchors[etype]), draws.pick(ctx.anchors[etype])
    relations = (draws.pick(ENTITY_RELATIONS[etype])[0],) if depth else ()
    left, right = _measure(world, a, relations), _measure(world, b, relations)
    if a == b or left is None or right is None:
        return None
    (facts_a, x, value_x), (facts_b, y, value_y) = left, right
    names = {world.entities[e].name for e in (x, y)}
    if value_x == value_y or len(names) < 2 or {x, y} & ({a, b} if depth else set()):
        return None
    direction = draws.index(2)  # 0: the lower value wins, 1: the higher value wins
    winner = x if (value_x < value_y) == (direction == 0) else y
    lead = _COMPARE[world.entities[x].etype][direction]
    text = f"{lead}, {_noun_phrase(world, a, relations)} or {_noun_phrase(world, b, relations)}?"
    question = _question(
        world, "comparison", text, entity_node(winner), (a, b), [*facts_a, *facts_b]
    )
    return ("comparison", min(a, b), max(a, b), relations, direction), question


_BUILDERS = {"bridge": _bridge, "comparison": _comparison, "compositional": _compositional}
