import pytest

import agentgym
from agentgym.envs.search.base import hidden_sentences
from agentgym.harness.ablate import ablate

SMALL_IDS = ["agentgym/Search-Menu-Small-v0", "agentgym/Search-Free-Small-v0"]


def test_hidden_sentences_per_mode():
    everything = ["s:1:0", "s:1:1", "s:2:0", "s:3:0"]
    visited, cited = ["e:1", "s:1:0", "s:1:1", "s:2:0"], ["s:1:1"]
    assert hidden_sentences("keep_cited", everything, visited, cited) == {"s:1:0", "s:2:0", "s:3:0"}
    assert hidden_sentences("remove_cited", everything, visited, cited) == {"s:1:1"}
    assert hidden_sentences("remove_uncited_visited", everything, visited, cited) == {
        "s:1:0",
        "s:2:0",
    }
    with pytest.raises(agentgym.BadInput):
        hidden_sentences("remove_everything", everything, visited, cited)


@pytest.mark.parametrize("env_id", SMALL_IDS)
def test_oracle_needs_exactly_its_cited_evidence(env_id):
    doc = ablate("oracle", env_id, seeds=20)
    assert doc["baseline"]["mean"] == 1.0
    assert doc["ablations"]["keep_cited"]["mean"] == 1.0
    assert doc["ablations"]["remove_uncited_visited"]["mean"] == 1.0
    assert doc["ablations"]["remove_cited"]["mean"] == 0.0
    assert doc["ablations"]["remove_cited"]["delta"] == -1.0


def test_removed_sentences_are_never_shown():
    env = agentgym.make("agentgym/Search-Free-Small-v0", privileged=True)
    _, info = env.reset(seed=7)
    gold = info["gold_evidence"]
    task = info["task_id"]
    prov = {task: {"visited": gold, "cited": gold}}
    ablated = agentgym.make(
        "agentgym/Search-Free-Small-v0", ablation="remove_cited", provenance=prov, privileged=True
    )
    ablated.reset(options={"task_id": task})
    texts = [ablated.unwrapped._data.world.sentences[s].text for s in gold]
    for _ in range(6):
        obs, _, term, trunc, _ = ablated.step(ablated.unwrapped.oracle_action())
        assert not any(t in obs for t in texts)
        if term or trunc:
            break


def test_unknown_ablation_is_bad_input():
    with pytest.raises(agentgym.BadInput, match="unknown ablation"):
        agentgym.make("agentgym/Search-Free-Small-v0", ablation="shuffle")
