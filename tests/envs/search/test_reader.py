"""The reader without privileged knowledge: its parsing, its typing, and what it reaches."""

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.envs.search.reader import (
    ReaderAgent,
    attribute_value,
    guess_type,
    parse_phrase,
    parse_question,
)
from agentgym.harness.evaluate import evaluate

SMALL = "agentgym/Search-Menu-Small-v0"


def test_noun_phrases_unwind_to_their_anchor():
    assert parse_phrase("the founder of the employer of Ada Vance") == (
        "Ada Vance",
        ["works_for", "founded_by"],
    )
    assert parse_phrase("the city where the university attended by Emil Garrow is located") == (
        "Emil Garrow",
        ["educated_at", "located_in"],
    )
    assert parse_phrase("the Marlow Prize") == ("Marlow Prize", [])


def test_every_question_of_the_split_parses_to_its_gold_chain():
    env = gym.make(SMALL, split="test").unwrapped
    for task_id in env.task_ids("test")[:60]:
        env.reset(options={"task_id": task_id})
        question = env.question  # privileged, for the test only: the gold chain
        plan = parse_question(question.text)
        assert plan is not None, question.text
        hops = sum(len(c.relations) + c.value for c in plan.chains)
        assert hops == question.hops, (question.text, plan)
        assert [c.anchor for c in plan.chains] == list(question.mentions)


@pytest.mark.parametrize(
    ("name", "etype"),
    [
        ("Vexyn Pictures", "company"),
        ("Xenium Group (energy company)", "company"),
        ("Whitlock State University", "university"),
        ("Redcliff Conservatory", "university"),
        ("Kingsley Medal", "award"),
        ("Yusuf Tolliver", "person"),
        ("Glass Corridor", "film"),
        ("Orarshire", "city"),
    ],
)
def test_a_mention_is_typed_by_its_name_alone(name, etype):
    assert guess_type(name) == etype


def test_only_attribute_sentences_give_a_value():
    assert attribute_value("Quadis Group was established in 1994.") == "1994"
    assert attribute_value("The population of Halenley is 12,345.") == "12,345"
    assert attribute_value("Halenley was featured in a 1927 exhibition in Halenley.") is None


def test_the_reader_wins_without_the_env_state():
    """The oracle reads the env's state; the reader only the observation and the menu, and
    still wins: the policy's gap to the oracle is not missing information."""
    doc = evaluate(f"{ReaderAgent.__module__}:ReaderAgent", [SMALL], seeds=30, split="test")
    assert not hasattr(ReaderAgent(), "bind")
    assert doc["aggregates"][SMALL]["mean"] >= 0.9
