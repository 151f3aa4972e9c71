"""The search envs' privileged view: the answer and gold sentences as ``privileged_context``,
``gold_facts``, and an ``evidence_hint`` that follows what the episode has retrieved."""

import json

import pytest

import agentgym
from agentgym.core.info import PRIVILEGED_KEYS, info_problems

IDS = ["agentgym/Search-Menu-Small-v0", "agentgym/Search-Free-Small-v0"]


def oracle_infos(env, seed):
    _, info = env.reset(seed=seed)
    infos = [info]
    while True:
        *_, term, trunc, info = env.step(env.unwrapped.oracle_action())
        infos.append(info)
        if term or trunc:
            return infos


@pytest.mark.parametrize("env_id", IDS)
def test_context_names_the_answer_and_the_gold_sentences(env_id):
    env = agentgym.make(env_id, privileged=True)
    _, info = env.reset(seed=1)
    assert not info_problems(info, privileged=True)
    world = env.unwrapped._data.world
    texts = [world.sentences[s].text for s in info["gold_evidence"]]
    assert len(info["gold_facts"]) == len(texts) >= 2
    assert all(fact.endswith(text) for fact, text in zip(info["gold_facts"], texts, strict=True))
    lines = info["privileged_context"].split("\n")
    assert lines[0] == f"Answer: {info['gold_answer']}" and lines[1] == "Evidence:"
    assert lines[2:] == [f"- {fact}" for fact in info["gold_facts"]]
    _, plain = agentgym.make(env_id).reset(seed=1)
    assert not set(PRIVILEGED_KEYS) & set(plain)


@pytest.mark.parametrize("env_id", IDS)
def test_evidence_hint_drops_each_page_once_its_evidence_is_retrieved(env_id):
    env = agentgym.make(env_id, privileged=True)
    world = env.unwrapped._data.world
    for seed in range(5):
        infos = oracle_infos(env, seed)
        titles = [world.entities[world.sentences[s].page].title for s in infos[0]["gold_evidence"]]
        hints = [i["evidence_hint"] for i in infos]
        assert hints[0] == f"Still missing: evidence about {'; '.join(dict.fromkeys(titles))}."
        assert hints[-1] == "All evidence found." and infos[-1]["won"]
        changes = [k for k in range(1, len(hints)) if hints[k] != hints[k - 1]]
        assert len(changes) == len(dict.fromkeys(titles)), hints
        for k in changes:  # it changes exactly when the progress over the evidence rises
            assert infos[k]["progress"] > infos[k - 1]["progress"]
            gone = [t for t in dict.fromkeys(titles) if t in hints[k - 1] and t not in hints[k]]
            assert gone, (hints[k - 1], hints[k])


@pytest.mark.parametrize("env_id", IDS)
def test_privileged_keys_are_deterministic(env_id):
    keys = ("privileged_context", "gold_facts", "evidence_hint")

    def run():
        infos = oracle_infos(agentgym.make(env_id, privileged=True), 3)
        return json.dumps([{k: i[k] for k in keys} for i in infos])

    assert run() == run()
