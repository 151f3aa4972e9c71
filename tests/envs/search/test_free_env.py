import pytest

import agentgym
from agentgym.envs.search.agents import FreeHeuristicAgent, MenuHeuristicAgent
from agentgym.harness.evaluate import evaluate

FREE = "agentgym/Search-Free-Small-v0"


def oracle_episode(env, **reset):
    env.reset(**reset)
    while True:
        _, reward, term, trunc, info = env.step(env.unwrapped.oracle_action())
        if term or trunc:
            return reward, info


def test_search_returns_passages_and_provenance():
    env = agentgym.make(FREE)
    obs, info = env.reset(seed=0)
    assert "<search>" in obs and info["provenance"]["visited"] == []
    obs, reward, term, _trunc, info = env.step("<think>start</think><search>film director</search>")
    assert info["action_valid"] and not term and reward == 0.0
    assert "<information>" in obs and "Doc 1 (Title: " in obs
    prov = info["provenance"]
    assert prov["produced"] and set(prov["produced"]) <= set(prov["visited"])
    assert info["tool_calls"] == [{"name": "search", "arguments": {"query": "film director"}}]
    assert [s["tag"] for s in info["segments"]] == ["think", "search_query"]


@pytest.mark.parametrize("env_id", [FREE, "agentgym/Search-Free-Medium-v0"])
def test_oracle_wins_every_test_task_and_cites_the_evidence(env_id):
    env = agentgym.make(env_id, split="test", privileged=True)
    for tid in env.unwrapped.task_ids("test"):
        reward, info = oracle_episode(env, options={"task_id": tid})
        assert reward == 1.0 and info["won"], tid
        assert set(info["gold_evidence"]) <= set(info["provenance"]["cited"]), tid
        assert info["progress"] == 1.0


def test_naming_a_value_cites_the_sentence_that_showed_it():
    env = agentgym.make(FREE, privileged=True)
    _, info = env.reset(
        options={
            "task_id": next(
                t
                for t in env.unwrapped.task_ids("train")
                if env.unwrapped.task_type_of(t) == "compositional"
            )
        }
    )
    while info["progress"] < 1.0:
        _, _, _, _, info = env.step(env.unwrapped.oracle_action())
    gold = info["gold_answer"]
    _, _, _term, _, info = env.step(f"<think>it is {gold}</think><search>more</search>")
    assert f"v:{gold}" in info["provenance"]["consumed"]
    assert info["gold_evidence"][-1] in info["provenance"]["cited"]


def test_wrong_answer_and_invalid_format():
    env = agentgym.make(FREE)
    env.reset(seed=1)
    obs, reward, term, _, info = env.step("<answer")
    assert not info["action_valid"] and not term and "Invalid action" in obs
    assert info["reward_components"]["format"] == 0.0
    obs, reward, term, _, info = env.step("<answer>certainly not this</answer>")
    assert term and reward == 0.0 and not info["won"] and "wrong" in obs
    assert [s["tag"] for s in info["segments"]] == ["answer"]


def test_dense_and_reference_bm25_are_env_options():
    ref = agentgym.make(FREE, retriever="bm25-reference")
    fast = agentgym.make(FREE)
    for env in (ref, fast):
        env.reset(seed=3)
    a = ref.step("<search>Which company produced the film?</search>")[0]
    b = fast.step("<search>Which company produced the film?</search>")[0]
    assert a == b  # identical rankings
    with pytest.raises(agentgym.BadInput, match="unknown retriever"):
        agentgym.make(FREE, retriever="tfidf")


def test_official_ids_need_a_path():
    with pytest.raises(agentgym.BadInput, match="path="):
        agentgym.make("agentgym/Search-Free-HotpotQA-Official-v0")


@pytest.mark.parametrize(
    "env_id, agent",
    [
        ("agentgym/Search-Free-Small-v0", "FreeHeuristicAgent"),
        ("agentgym/Search-Free-Medium-v0", "FreeHeuristicAgent"),
        ("agentgym/Search-Menu-Small-v0", "MenuHeuristicAgent"),
        ("agentgym/Search-Menu-Medium-v0", "MenuHeuristicAgent"),
    ],
)
def test_heuristic_agents_score_between_random_and_oracle(env_id, agent):
    spec = f"agentgym.envs.search.agents:{agent}"
    scores = {
        name: evaluate(name, [env_id], seeds=50)["aggregates"][env_id]["mean"]
        for name in ("random", spec, "oracle")
    }
    assert scores["random"] < scores[spec] < scores["oracle"] == 1.0, scores
    assert scores["random"] <= 0.3


def test_heuristic_agents_follow_the_protocol():
    assert isinstance(FreeHeuristicAgent(), agentgym.agents.Agent)
    assert isinstance(MenuHeuristicAgent(), agentgym.agents.Agent)


def test_dense_retriever_env_is_winnable_and_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGYM_HOME", str(tmp_path))
    env = agentgym.make(FREE, retriever="dense", split="test")
    tasks = env.unwrapped.task_ids("test")[:10]
    for tid in tasks:
        reward, _ = oracle_episode(env, options={"task_id": tid})
        assert reward == 1.0, tid
    again = agentgym.make(FREE, retriever="dense")
    query = "<search>who directed the film</search>"
    for e in (env, again):
        e.reset(options={"task_id": tasks[0]})
    assert env.step(query)[0] == again.step(query)[0]
    assert list((tmp_path / "cache" / "dense").glob("*.npy"))
