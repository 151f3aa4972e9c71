"""Tests of the synthetic search world and its multi-hop questions."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from agentgym.envs.search import questions as questions_mod
from agentgym.envs.search import world as world_mod

LOADER = """
from agentgym.envs.search import questions, world
"""


def _digest(qs) -> str:
    payload = json.dumps([dataclasses.asdict(q) for q in qs], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _target(obj: str) -> int:
    assert obj.startswith("e:"), obj
    return int(obj[2:])


@pytest.fixture(scope="module")
def small():
    return world_mod.generate_world(50, 1001)


@pytest.fixture(scope="module")
def small_questions(small):
    return questions_mod.generate_questions(small, 300, 2001)


@pytest.fixture(scope="module")
def mid():
    return world_mod.generate_world(600, 7)


@pytest.fixture(scope="module")
def mid_questions(mid):
    return questions_mod.generate_questions(mid, 300, 3)


# ---------------------------------------------------------------- determinism


def test_same_seed_same_world_and_questions(mid, mid_questions):
    again = world_mod.generate_world(600, 7)
    assert again.data_hash() == mid.data_hash()
    assert again == mid
    assert questions_mod.generate_questions(again, 300, 3) == mid_questions


def test_same_seed_same_output_in_another_process(mid, mid_questions):
    script = LOADER + (
        "w = world.generate_world(600, 7)\n"
        "qs = questions.generate_questions(w, 300, 3)\n"
        "import dataclasses, hashlib, json\n"
        "payload = json.dumps([dataclasses.asdict(q) for q in qs], sort_keys=True)\n"
        "print(w.data_hash(), hashlib.sha256(payload.encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == [mid.data_hash(), _digest(mid_questions)]


def test_different_seeds_differ(mid, mid_questions):
    other = world_mod.generate_world(600, 8)
    assert other.data_hash() != mid.data_hash()
    assert [e.name for e in other.entities] != [e.name for e in mid.entities]
    reseeded = questions_mod.generate_questions(mid, 300, 4)
    assert [q.text for q in reseeded] != [q.text for q in mid_questions]


def test_data_hash_is_sha256_hex(small):
    assert re.fullmatch(r"[0-9a-f]{64}", small.data_hash())


def test_invalid_arguments_raise(small):
    with pytest.raises(ValueError):
        world_mod.generate_world(5, 0)
    with pytest.raises(ValueError):
        world_mod.generate_world(100, -1)
    with pytest.raises(ValueError):
        questions_mod.generate_questions(small, -1, 0)


# ---------------------------------------------------------------- world structure


@pytest.mark.parametrize("n_pages", [50, 600])
def test_every_entity_has_a_page_and_unique_title(n_pages, small, mid):
    world = small if n_pages == 50 else mid
    assert len(world.entities) == len(world.pages) == n_pages
    assert [e.id for e in world.entities] == list(range(n_pages))
    titles = [e.title for e in world.entities]
    assert len(set(titles)) == n_pages
    assert all(world.by_title(e.title) == e.id for e in world.entities)
    assert {e.etype for e in world.entities} == set(world_mod.ENTITY_TYPES)
    with pytest.raises(KeyError):
        world.by_title("No Such Page")


def test_shared_names_are_disambiguated_by_title():
    world = world_mod.generate_world(200, 3)
    by_name = Counter(e.name for e in world.entities)
    shared = [e for e in world.entities if by_name[e.name] > 1]
    assert len(shared) >= 10
    for e in shared:
        assert e.title != e.name and e.title.startswith(e.name + " (")
        assert e.id in world.by_name(e.name)
        assert e.etype in {world.entities[i].etype for i in world.by_name(e.name) if i != e.id}
    films = Counter(e.attributes for e in world.entities if e.etype == "film")
    assert max(films.values()) >= 2  # release years are shared


def test_sentences_ids_pages_and_facts(mid):
    assert list(mid.sentences) == [sid for page in mid.pages for sid in page]
    stated = []
    for eid, page in enumerate(mid.pages):
        assert len(page) >= 3
        for k, sentence in enumerate(mid.page(eid)):
            assert sentence.id == f"s:{eid}:{k}" and sentence.page == eid
            assert list(sentence.mentions) == sorted(set(sentence.mentions))
            assert list(sentence.values) == sorted(sentence.values)
            assert all(v in sentence.text for v in sentence.values)
            if sentence.fact is not None:
                assert sentence.fact.subject == eid and sentence.fact.sentence_id == sentence.id
                stated.append(sentence.fact)
        assert mid.page(eid)[0].fact is None  # the intro
    assert stated == list(mid.facts)


def test_functional_facts_are_findable_and_linked(mid):
    for entity in mid.entities:
        for relation, otype in world_mod.ENTITY_RELATIONS[entity.etype]:
            fact = mid.fact_of(entity.id, relation)
            assert fact is not None and mid.objects(entity.id, relation) == (fact.obj,)
            obj = _target(fact.obj)
            assert mid.entities[obj].etype == otype
            sentence = mid.sentences[fact.sentence_id]
            assert obj in sentence.mentions and mid.entities[obj].name in sentence.text
        attribute = world_mod.ATTRIBUTE_OF[entity.etype]
        fact = mid.fact_of(entity.id, attribute)
        assert entity.attributes == ((attribute, fact.obj),)
        assert mid.sentences[fact.sentence_id].values == (fact.obj,)
    assert mid.fact_of(0, "no_such_relation") is None and mid.objects(0, "nope") == ()


def test_node_helpers():
    assert world_mod.entity_node(12) == "e:12"
    assert world_mod.value_node("412,000") == "v:412,000"


# ---------------------------------------------------------------- questions


def test_fifty_pages_yield_three_hundred_distinct_questions(small_questions):
    assert len(small_questions) == 300
    assert [q.id for q in small_questions] == [f"q{i:05d}" for i in range(300)]
    assert len({q.text for q in small_questions}) == 300
    counts = Counter(q.task_type for q in small_questions)
    assert set(counts) == set(questions_mod.TASK_TYPES)
    assert min(counts.values()) >= 80
    for task in ("bridge", "compositional"):
        assert {q.hops for q in small_questions if q.task_type == task} == {2, 3, 4}
    assert {q.hops for q in small_questions if q.task_type == "comparison"} == {2, 4}


def _walk(world, start: int, evidence) -> tuple[int, str]:
    """Follow evidence sentences from ``start`` with fact_of; return the last entity and node."""
    current, node = start, world_mod.entity_node(start)
    for sid in evidence:
        fact = world.sentences[sid].fact
        assert fact is not None and fact.subject == current
        assert fact.relation not in world_mod.MULTI_RELATIONS
        assert world.fact_of(current, fact.relation) == fact
        if fact.obj.startswith("e:"):
            assert _target(fact.obj) in world.sentences[sid].mentions  # followable
            current, node = _target(fact.obj), fact.obj
        else:
            node = world_mod.value_node(fact.obj)
    return current, node


@pytest.mark.parametrize("which", ["small", "mid"])
def test_questions_are_grounded_and_unambiguous(which, small, small_questions, mid, mid_questions):
    world, qs = (small, small_questions) if which == "small" else (mid, mid_questions)
    for q in qs:
        assert 2 <= q.hops <= 4 and len(q.evidence) == len(q.chain) == q.hops
        assert len(q.anchors) == len(q.mentions) == (2 if q.task_type == "comparison" else 1)
        for anchor, mention in zip(q.anchors, q.mentions, strict=True):
            assert mention in q.text and mention == world.entities[anchor].name
            assert world.by_name(mention) == (anchor,) and world.by_title(mention) == anchor
        assert all(sid in world.sentences for sid in q.evidence)
        if q.task_type == "comparison":
            _check_comparison(world, q)
            continue
        end, node = _walk(world, q.anchors[0], q.evidence)
        assert node == q.answer_node and end != q.anchors[0]
        if q.task_type == "bridge":
            answer = world.entities[end]
            assert q.answer == answer.name and answer.title in (q.answer, *q.aliases)
        else:
            assert q.answer_node == world_mod.value_node(q.answer)


def _check_comparison(world, q) -> None:
    half = q.hops // 2
    ends, values = [], []
    for anchor, evidence in zip(q.anchors, (q.evidence[:half], q.evidence[half:]), strict=True):
        end, node = _walk(world, anchor, evidence)
        ends.append(end)
        values.append(int(node[2:].replace(",", "")))
    assert values[0] != values[1]  # no ties
    assert world.entities[ends[0]].etype == world.entities[ends[1]].etype
    assert world.entities[ends[0]].name != world.entities[ends[1]].name
    lower_wins = any(word in q.text for word in (" earlier,", " smaller "))
    winner = ends[values.index(min(values) if lower_wins else max(values))]
    assert q.answer_node == world_mod.entity_node(winner)
    assert q.answer == world.entities[winner].name


def test_answer_aliases(mid_questions, mid):
    populations = [q for q in mid_questions if "population of" in q.text and "," in q.answer]
    assert populations
    for q in populations:
        assert q.answer.replace(",", "") in q.aliases
    titled = [
        q
        for q in mid_questions
        if q.answer_node.startswith("e:") and mid.entities[_target(q.answer_node)].title != q.answer
    ]
    assert titled
    for q in titled:
        assert mid.entities[_target(q.answer_node)].title in q.aliases
        assert q.answer not in q.aliases


def test_returns_fewer_only_when_exhausted():
    world = world_mod.generate_world(12, 0)
    qs = questions_mod.generate_questions(world, 10_000, 0)
    assert 0 < len(qs) < 10_000
    assert len({q.text for q in qs}) == len(qs)
    assert questions_mod.generate_questions(world, 0, 0) == ()
