import pickle

import numpy as np
import pytest

import agentgym
from agentgym.core.errors import ResetNeeded, SnapshotMismatch

SMALL = "agentgym/Search-Menu-Small-v0"


def play_oracle(env, **reset_kwargs):
    obs, info = env.reset(**reset_kwargs)
    actions = []
    while True:
        action = env.unwrapped.oracle_action()
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return obs, reward, terminated, truncated, info, actions


def test_reset_info_has_the_menu_mask_and_the_task():
    env = agentgym.make(SMALL)
    obs, info = env.reset(seed=3)
    assert info["action_mask"].dtype == np.int8
    assert info["action_mask"].sum() == len(info["admissible_actions"]) >= 1
    assert info["task_id"] in env.unwrapped.task_ids("train")
    assert info["task_type"] in ("bridge", "comparison", "compositional")
    assert obs.startswith("Question: ")
    assert "[0] search: " in obs


def test_split_decides_the_tasks_seeds_draw_from():
    test_env = agentgym.make(SMALL, split="test")
    test_ids = set(test_env.unwrapped.task_ids("test"))
    drawn = {test_env.reset(seed=s)[1]["task_id"] for s in range(40)}
    assert drawn <= test_ids and len(drawn) > 10


def test_v1_holds_every_question_of_small_s_world_in_stratified_splits():
    v0 = agentgym.make(SMALL).unwrapped
    v1 = agentgym.make("agentgym/Search-Menu-Small-v1").unwrapped
    assert v1._data.world.data_hash() == v0._data.world.data_hash()  # the same 50 pages
    # v0's questions are v1's first ones, and v0's splits are unchanged by v1
    assert v1._data.questions[: len(v0._data.questions)] == v0._data.questions
    assert v0.task_ids("test") == tuple(f"q{i:05d}" for i in range(240, 300))
    splits = {s: v1.task_ids(s) for s in ("train", "val", "test")}
    assert sum(map(len, splits.values())) == len(v1._data.questions) > 5 * 300
    assert len(set().union(*map(set, splits.values()))) == len(v1._data.questions)  # disjoint
    for s, ids in splits.items():  # stratified: each split holds the types in one proportion
        shares = {
            t: sum(v1._data.by_id[i].task_type == t for i in ids) / len(ids)
            for t in ("bridge", "comparison", "compositional")
        }
        whole = {
            t: sum(q.task_type == t for q in v1._data.questions) / len(v1._data.questions)
            for t in shares
        }
        assert all(abs(shares[t] - whole[t]) < 0.02 for t in shares), (s, shares, whole)
    again = agentgym.make("agentgym/Search-Free-Small-v1").unwrapped
    assert again.task_ids("test") == splits["test"]


def test_task_id_option_picks_the_task_directly():
    env = agentgym.make(SMALL)
    tid = env.unwrapped.task_ids("val")[0]
    assert env.reset(options={"task_id": tid})[1]["task_id"] == tid
    with pytest.raises(agentgym.BadInput):
        env.reset(options={"task_id": "q99999"})


@pytest.mark.parametrize("env_id", [SMALL, "agentgym/Search-Menu-Medium-v0"])
def test_oracle_wins_every_test_task_with_reward_one_and_full_progress(env_id):
    env = agentgym.make(env_id, split="test", privileged=True)
    for tid in env.unwrapped.task_ids("test"):
        _, reward, terminated, _, info, _ = play_oracle(env, options={"task_id": tid})
        assert terminated and info["won"] and reward == 1.0
        assert info["progress"] == 1.0
        assert set(info["gold_evidence"]) <= set(info["provenance"]["cited"])
        assert info["reward_components"]["f1"] == 1.0


def test_wrong_answer_ends_the_episode_without_reward():
    env = agentgym.make(SMALL, privileged=True)
    obs, info = env.reset(seed=0)
    gold = info["gold_answer"]
    while not any(
        a.startswith("answer: ") and a != f"answer: {gold}" for a in info["admissible_actions"]
    ):
        obs, _, term, trunc, info = env.step(env.unwrapped.oracle_action())
        assert not (term or trunc)
    wrong = next(
        a for a in info["admissible_actions"] if a.startswith("answer: ") and a != f"answer: {gold}"
    )
    obs, reward, term, trunc, info = env.step(wrong)
    assert term and not trunc and reward == 0.0 and not info["won"]
    assert "wrong" in obs
    with pytest.raises(ResetNeeded):
        env.step(0)


def test_turn_limit_truncates_inside_the_env():
    env = agentgym.make(SMALL, max_turns=3)
    env.reset(seed=0)
    flags = [env.step("not an action")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_invalid_action_costs_a_turn_and_says_why():
    env = agentgym.make(SMALL)
    env.reset(seed=0)
    obs, reward, term, _trunc, info = env.step(200)
    assert not info["action_valid"] and reward == 0.0 and not term
    assert "Invalid action: option 200 is not available" in obs
    assert info["reward_components"]["invalid_action"] == 1.0
    assert env.unwrapped.turn == 1


def test_menu_text_index_and_digit_string_are_the_same_action():
    outcomes = []
    for action in (0, "0", None):
        env = agentgym.make(SMALL)
        _, info = env.reset(seed=4)
        action = info["admissible_actions"][0] if action is None else action
        obs, *_, info = env.step(action)
        outcomes.append((obs, info["state_key"]))
    assert outcomes[0] == outcomes[1] == outcomes[2]


def test_segments_and_tool_calls_describe_the_action():
    env = agentgym.make(SMALL)
    _, info = env.reset(seed=0)
    item = info["admissible_actions"][0]
    raw = "  " + item
    _, _, _, _, info = env.step(raw)
    (seg,) = info["segments"]
    assert seg["tag"] == "search_query"
    assert raw[seg["start"] : seg["end"]] == item.removeprefix("search: ")
    assert info["tool_calls"] == [
        {"name": "search", "arguments": {"query": item.removeprefix("search: ")}}
    ]


def test_state_key_ignores_the_path_but_not_the_state():
    env = agentgym.make(SMALL)
    _, info0 = env.reset(seed=0)
    _, _, _, _, info1 = env.step("bogus")  # an invalid action changes nothing
    assert info1["state_key"] == info0["state_key"]
    _, _, _, _, info2 = env.step(env.unwrapped.oracle_action())
    assert info2["state_key"] != info0["state_key"]


def test_privileged_keys_appear_only_when_asked():
    _, plain = agentgym.make(SMALL).reset(seed=1)
    _, priv = agentgym.make(SMALL, privileged=True).reset(seed=1)
    for key in ("privileged_context", "gold_answer", "gold_evidence"):
        assert key not in plain and key in priv
    assert priv["gold_answer"] not in agentgym.make(SMALL).reset(seed=1)[0]


def test_check_answer_gives_partial_credit():
    env = agentgym.make(SMALL, privileged=True)
    for seed in range(30):
        _, info = env.reset(seed=seed)
        gold = info["gold_answer"]
        if len(gold.split()) >= 2:
            break
    else:
        pytest.fail("no multi-word gold answer among 30 seeds")
    base = env.unwrapped
    assert base.check_answer(gold) == 1.0
    assert base.check_answer(gold.upper() + ".") == 1.0
    assert 0.0 < base.check_answer(gold.split()[0]) < 1.0
    assert base.check_answer("zzz qqq") == 0.0


def test_snapshot_restores_into_a_fresh_instance_and_refuses_another_preset():
    env = agentgym.make(SMALL)
    env.reset(seed=2)
    env.step(env.unwrapped.oracle_action())
    snap = env.unwrapped.snapshot()
    fresh = agentgym.make(SMALL)
    fresh.unwrapped.restore(snap)
    a = env.step(env.unwrapped.oracle_action())
    b = fresh.step(fresh.unwrapped.oracle_action())
    assert a[0] == b[0] and a[4]["state_key"] == b[4]["state_key"]
    with pytest.raises(SnapshotMismatch):
        agentgym.make("agentgym/Search-Menu-Medium-v0").unwrapped.restore(snap)
    with pytest.raises(SnapshotMismatch):
        fresh.unwrapped.restore(b"not json")


def test_pickle_before_reset_and_in_the_middle():
    env = agentgym.make(SMALL, split="val")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.reset(seed=9)[0] == env.reset(seed=9)[0]
    env.step(0)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.unwrapped.split == "val"
    assert clone.step(0)[0] == env.step(0)[0]


def test_provenance_records_what_the_action_produced_and_consumed():
    env = agentgym.make(SMALL)
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.unwrapped.oracle_action())  # search
    assert info["provenance"]["produced"] and all(
        n.startswith("e:") for n in info["provenance"]["produced"]
    )
    _, _, _, _, info = env.step(env.unwrapped.oracle_action())  # expand
    page = info["provenance"]["consumed"]
    assert page and page[0].startswith("e:") and page[0] in info["provenance"]["visited"]
    _, _, _, _, info = env.step(env.unwrapped.oracle_action())  # read
    (sid,) = info["provenance"]["consumed"]
    assert sid.startswith("s:") and info["provenance"]["cited"] == [sid]


def test_render_ansi_returns_the_last_observation():
    env = agentgym.make(SMALL, render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.render() == obs


def test_the_world_is_fixed_per_id():
    a = agentgym.make(SMALL).unwrapped.data_hash
    b = agentgym.make(SMALL, split="test").unwrapped.data_hash
    c = agentgym.make("agentgym/Search-Menu-Medium-v0").unwrapped.data_hash
    assert a == b != c
