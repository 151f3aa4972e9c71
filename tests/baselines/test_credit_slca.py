"""SLCA-GRPO: two rewards, two group z-scores, each routed only to its own segment's tokens;
and the token-tag helper on a real tokenizer and real env segments."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect, pick_tasks
from agentgym.baselines.segments import fill_segment_tags, segment_token_tags
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
FREE = "agentgym/Search-Free-Small-v0"
SLCA = get("slca")
EPS = 1e-6

# one response: think, search_query ×2, answer ×2, untagged markup
TAGS = ["think", "search_query", "search_query", "answer", "answer", ""]


def parts(progress, f1, success, fmt=1.0):
    return {
        "progress": progress,
        "reward_components": {"f1": f1, "success": success, "format": fmt, "exact_match": success},
    }


def one_turn_traj(info, group="g", outcome=0.0, tags=TAGS, mask=None):
    L = len(tags)
    turn = Turn(
        prompt_ids=torch.arange(3),
        response_ids=torch.arange(L),
        info=info,
        segment_tags=list(tags),
        policy_mask=None if mask is None else torch.tensor(mask, dtype=torch.float32),
    )
    return Trajectory("t", group, 0, [turn], outcome=outcome, terminated=True)


def disagreeing_group(**kw):
    """r_exec (progress) falls while r_pref (answer quality) rises across the group."""
    return Batch(
        trajectories=[
            one_turn_traj(parts(1.0, 0.0, 0.0), **kw),  # all evidence, wrong: omission
            one_turn_traj(parts(0.5, 0.5, 0.0), **kw),
            one_turn_traj(parts(0.0, 1.0, 1.0), outcome=1.0, **kw),
        ]
    )


def run(batch, config=None, policy=None):
    plan = compose("slca", config)
    ctx = StepContext(policy=policy)
    for hook in ("transform", "score", "advantages", "shape"):
        plan.run(hook, batch, ctx)
    return batch.advantages


# r_exec = (1, .5, 0): mean .5, unbiased std .5
Z_EXEC = [0.5 / (0.5 + EPS), 0.0, -0.5 / (0.5 + EPS)]
# r_pref = (0 − .5 omission, .5, 1): mean 1/3, deviations (−5/6, 1/6, 2/3), std √(7/12)
_STD = (7 / 12) ** 0.5
Z_PREF = [(-5 / 6) / (_STD + EPS), (1 / 6) / (_STD + EPS), (2 / 3) / (_STD + EPS)]


def test_tool_tokens_get_the_execution_z_and_answer_tokens_the_preference_z():
    batch = disagreeing_group()
    adv = run(batch)
    for i in range(3):
        # think and untagged tokens of a turn with tool tokens follow the tool segment
        expected = [Z_EXEC[i]] * 3 + [Z_PREF[i]] * 2 + [Z_EXEC[i]]
        torch.testing.assert_close(adv[(i, 0)], torch.tensor(expected), rtol=0, atol=1e-6)
    assert batch.metrics["slca/omission_rate"] == pytest.approx(1 / 3)
    assert batch.metrics["slca/r_pref_mean"] == pytest.approx(1 / 3)


def test_no_cross_leak_when_only_one_reward_varies():
    # equal answers, different retrieval: answer tokens get exactly 0, tool tokens do not
    batch = Batch(
        trajectories=[one_turn_traj(parts(p, 0.5, 0.0)) for p in (0.0, 0.5, 0.75)],
    )
    adv = run(batch)
    for i in range(3):
        assert (adv[(i, 0)][3:5] == 0).all()
        assert adv[(i, 0)][1] != 0
    # equal retrieval, different answers: tool tokens get exactly 0
    batch = Batch(trajectories=[one_turn_traj(parts(0.5, f1, 0.0)) for f1 in (0.0, 0.6, 0.9)])
    adv = run(batch)
    for i in range(3):
        assert (adv[(i, 0)][:3] == 0).all() and adv[(i, 0)][5] == 0
        assert adv[(i, 0)][3] != 0


@pytest.mark.parametrize(("other", "index"), [("summary", "pref"), ("none", None)])
def test_other_tokens_can_follow_the_summary_or_nothing(other, index):
    adv = run(disagreeing_group(), {"slca": {"other": other}})
    for i in range(3):
        value = 0.0 if index is None else Z_PREF[i]
        assert adv[(i, 0)][0].item() == pytest.approx(value, abs=1e-6)  # think
        assert adv[(i, 0)][5].item() == pytest.approx(value, abs=1e-6)  # untagged
        assert adv[(i, 0)][1].item() == pytest.approx(Z_EXEC[i], abs=1e-6)


def test_a_menu_answer_item_is_credited_by_the_summary_reward_as_a_whole():
    # "answer: Triara Works" + eos: only the argument is tagged; the item's first tokens
    # decide to answer at all, and by default they join their turn's segment (the summary)
    answer_turn = ["", "", "answer", "answer", ""]
    group = Batch(trajectories=disagreeing_group().trajectories)
    for traj in group.trajectories:
        traj.turns[0].segment_tags = list(answer_turn)
        traj.turns[0].response_ids = torch.arange(len(answer_turn))
    adv = run(group)
    for i in range(3):
        torch.testing.assert_close(adv[(i, 0)], torch.full((5,), Z_PREF[i]), rtol=0, atol=1e-6)
    for traj in group.trajectories:
        traj.turns[0].segment_tags = list(answer_turn)
    adv = run(group, {"slca": {"other": "tool"}})  # CREDIT.md's literal rule
    for i in range(3):
        assert adv[(i, 0)][0].item() == pytest.approx(Z_EXEC[i], abs=1e-6)
        assert adv[(i, 0)][2].item() == pytest.approx(Z_PREF[i], abs=1e-6)


def test_observation_tokens_stay_zero():
    batch = disagreeing_group(mask=[1, 1, 0, 1, 0, 1])
    adv = run(batch)
    assert adv[(0, 0)][2] == 0 and adv[(0, 0)][4] == 0
    assert adv[(0, 0)][3].item() == pytest.approx(Z_PREF[0], abs=1e-6)


def test_rewards_follow_the_documented_rule():
    slca = SLCA()
    # HierR when a turn reports it (mean over those turns), else progress, else the outcome
    hier = one_turn_traj({"reward_components": {"hierr": 0.2}})
    hier.turns.append(
        one_turn_traj({"reward_components": {"hierr": 0.6}, "progress": 0.1}).turns[0]
    )
    assert slca.r_exec(hier) == pytest.approx(0.4)
    assert slca.r_exec(one_turn_traj({"progress": 0.25})) == 0.25
    assert slca.r_exec(one_turn_traj({}, outcome=1.0)) == 1.0
    # format gates quality; the omission penalty needs full evidence and a wrong answer
    assert slca.r_pref(one_turn_traj(parts(0.5, 0.8, 0.0, fmt=0.0))) == (0.0, False)
    assert slca.r_pref(one_turn_traj(parts(1.0, 0.8, 0.0))) == (pytest.approx(0.3), True)
    assert slca.r_pref(one_turn_traj(parts(1.0, 1.0, 1.0))) == (1.0, False)
    assert slca.r_pref(one_turn_traj({}, outcome=1.0)) == (1.0, False)
    strict = SLCA({"slca": {"pref_reward": "success", "omission_threshold": 0.5}})
    assert strict.r_pref(one_turn_traj(parts(0.5, 0.8, 0.0))) == (-0.5, True)


def test_groups_are_scored_apart_and_equal_groups_can_be_dropped():
    batch = disagreeing_group()
    batch.trajectories += [one_turn_traj(parts(0.5, 0.5, 0.0), group="h") for _ in range(2)]
    adv = run(batch)
    assert (adv[(3, 0)] == 0).all() and (adv[(4, 0)] == 0).all()
    assert adv[(0, 0)][1].item() == pytest.approx(Z_EXEC[0], abs=1e-6)
    dropped = disagreeing_group()
    dropped.trajectories += [one_turn_traj(parts(0.5, 0.5, 0.0), group="h") for _ in range(2)]
    adv = run(dropped, {"slca": {"zero_std": "drop"}})
    assert {i for i, _ in adv} == {0, 1, 2}


def test_settings_are_checked():
    with pytest.raises(BadInput, match="other"):
        SLCA({"slca": {"other": "think"}})
    with pytest.raises(BadInput, match="answer"):
        SLCA({"slca": {"tool_tags": ["tool_call", "answer"]}})
    assert SLCA({"slca": {"summary_tags": ["answer"]}}).cfg.summary_tags == ("answer",)


# ---------------------------------------------------------------- token tags


PIECES = {0: "", 1: "ab", 2: "c:", 3: " x", 4: "yz", 5: "!"}


class CharTokenizer:
    """Each id decodes to a fixed piece of text (``PIECES``); id 0 is eos (decoded as
    nothing)."""

    eos_id = 0

    def decode(self, ids):
        return "".join(PIECES[int(i)] for i in ids)


def test_token_tags_by_hand():
    # "abc: xyz!" with a query on "xyz": " x" overlaps it by one character, so it is a query
    # token; eos and everything after it are untagged
    segments = [{"tag": "search_query", "start": 5, "end": 8}]
    tags = segment_token_tags(CharTokenizer(), [1, 2, 3, 4, 5, 0, 5], segments, eos_id=0)
    assert tags == ["", "", "search_query", "search_query", "", "", ""]
    both = [{"tag": "think", "start": 0, "end": 3}, {"tag": "answer", "start": 3, "end": 9}]
    # "c:" spans [2, 4): one character of each, the first listed segment wins the tie
    assert segment_token_tags(CharTokenizer(), [1, 2, 3], both, 0) == ["think", "think", "answer"]
    assert segment_token_tags(CharTokenizer(), torch.tensor([1, 0]), [], 0) == ["", ""]


def oracle_actions(env_id, seed=3):
    """(action, info) of every oracle turn of one episode."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    out, done = [], False
    while not done:
        action = env.unwrapped.oracle_action()
        _, _, terminated, truncated, info = env.step(action)
        out.append((action, info))
        done = terminated or truncated
    return out


def ascii_spans(tokenizer, ids):
    """Character spans of ASCII tokens, from each token decoded alone."""
    spans, end = [], 0
    for t in ids:
        n = len(tokenizer.decode([t]))
        spans.append((end, end + n))
        end += n
    return spans


@pytest.mark.parametrize("env_id", [SMALL, FREE])
def test_token_tags_on_a_real_tokenizer_and_real_segments(policy, env_id):
    tok = policy.tokenizer
    seen = set()
    for action, info in oracle_actions(env_id):
        ids = [*tok.encode(action), tok.eos_id]
        tags = segment_token_tags(tok, ids, info["segments"], tok.eos_id)
        assert len(tags) == len(ids) and tags[-1] == ""
        for (a, b), tag in zip(ascii_spans(tok, ids[:-1]), tags, strict=False):
            inside = [s["tag"] for s in info["segments"] if s["start"] <= a and b <= s["end"]]
            outside = all(b <= s["start"] or a >= s["end"] for s in info["segments"])
            if inside:
                assert tag == inside[0]
            if outside:
                assert tag == ""
        # the tagged tokens decode to the segment's text, give or take a boundary space
        for seg in info["segments"]:
            text = tok.decode([t for t, g in zip(ids, tags, strict=True) if g == seg["tag"]])
            assert text.strip() == action[seg["start"] : seg["end"]].strip()
            seen.add(seg["tag"])
    expected = {"search_query", "tool_call", "answer"} if env_id == SMALL else {"think"}
    assert expected <= seen


def test_token_tags_split_multibyte_characters_with_their_segment(policy):
    tok = policy.tokenizer
    text = "<think>Zoë</think><answer>Zoë Ŧ</answer>"
    segments = [{"tag": "think", "start": 7, "end": 10}, {"tag": "answer", "start": 26, "end": 31}]
    ids = tok.encode(text)
    tags = segment_token_tags(tok, ids, segments, tok.eos_id)
    for tag, piece in (("think", "Zoë"), ("answer", "Zoë Ŧ")):
        chosen = [t for t, g in zip(ids, tags, strict=True) if g == tag]
        assert len(chosen) > len(piece)  # ë and Ŧ take two byte tokens each
        assert tok.decode(chosen) == piece


def test_transform_fills_missing_tags_and_keeps_given_ones(policy):
    tok = policy.tokenizer
    action, info = oracle_actions(SMALL)[-1]  # "answer: ..."
    ids = torch.tensor([*tok.encode(action), tok.eos_id])
    fresh = Turn(prompt_ids=torch.arange(2), response_ids=ids, info=info)
    given = Turn(
        prompt_ids=torch.arange(2), response_ids=ids, info=info, segment_tags=["x"] * len(ids)
    )
    batch = Batch(trajectories=[Trajectory("t", "g", 0, [fresh, given])])
    compose("slca").run("transform", batch, StepContext(policy=policy))
    assert fresh.segment_tags == segment_token_tags(tok, ids, info["segments"], tok.eos_id)
    assert "answer" in fresh.segment_tags
    assert given.segment_tags == ["x"] * len(ids)
    assert batch.metrics["slca/tagged_turns"] == 1.0
    assert fill_segment_tags([fresh, given], tok) == 0


def test_untagged_turns_without_a_tokenizer_are_refused():
    batch = disagreeing_group()
    batch.trajectories[0].turns[0].segment_tags = None
    with pytest.raises(BadInput, match="tokenizer"):
        run(batch)


# ---------------------------------------------------------------- real rollouts


SUMMARY, TOOL = {"summary", "answer", "conclusion"}, {"tool_call", "search_query"}


def _read_then_miss(tokenizer, env_id, task, seed, group):
    """The oracle's reading, then a wrong answer: the evidence was retrieved (high execution
    reward) but left out of the answer (low preference reward)."""
    env = gym.make(env_id)
    _, info = env.reset(seed=seed, options={"task_id": task})
    out = Trajectory(task, group, seed)
    while True:
        action = env.unwrapped.oracle_action()
        if "answer" in action.split(":")[0] or action.startswith(("<think>", "<answer>")):
            menu = info.get("admissible_actions") or []
            wrong = [a for a in menu if a.startswith("answer:") and a != action]
            action = wrong[0] if wrong else "<answer>nobody at all</answer>"
        state = info["state_key"]
        _, reward, terminated, truncated, info = env.step(action)
        ids = torch.tensor([*tokenizer.encode(action), tokenizer.eos_id])
        out.turns.append(
            Turn(torch.arange(2), ids, state_key=state, info=info, extras={"action": action})
        )
        if terminated or truncated:
            out.outcome, out.terminated = float(reward), True
            return out


@pytest.mark.parametrize("env_id", [SMALL, FREE])
def test_slca_on_real_rollouts(policy, oracle_rollout, env_id):
    pool = EnvPool(env_id, 4, max_turns=4)
    tasks = pick_tasks(pool, 2, np.random.default_rng(0))
    trajs = collect(policy, pool, tasks, 2, RolloutConfig(max_new_tokens=48))
    # per group: an oracle win, and the oracle's reading with a wrong answer, so that the two
    # rewards rank the group differently and a routing mix-up shows
    batch = Batch(trajectories=[])
    for g, (task, seed) in enumerate(tasks):
        group = trajs[2 * g].group_id
        batch.trajectories += trajs[2 * g : 2 * g + 2]
        batch.trajectories.append(oracle_rollout(policy.tokenizer, env_id, task, seed, group))
        batch.trajectories.append(_read_then_miss(policy.tokenizer, env_id, task, seed, group))
    adv = run(batch, policy=policy)
    slca = SLCA()
    assert set(adv) == set(batch.keys())
    for idx in batch.groups().values():
        r_exec = torch.tensor([slca.r_exec(batch.trajectories[i]) for i in idx])
        r_pref = torch.tensor([slca.r_pref(batch.trajectories[i])[0] for i in idx])
        z_exec = (r_exec - r_exec.mean()) / (r_exec.std() + EPS)
        z_pref = (r_pref - r_pref.mean()) / (r_pref.std() + EPS)
        assert float((z_exec - z_pref).abs().max()) > 0.5  # the test can tell routes apart
        for j, i in enumerate(idx):
            for k, turn in enumerate(batch.trajectories[i].turns):
                assert len(turn.segment_tags) == len(turn.response_ids)
                tags = set(turn.segment_tags)
                # default other="turn": untagged tokens join their turn's segment
                summary_turn = bool(tags & SUMMARY) and not tags & TOOL
                for a, tag in zip(adv[(i, k)].tolist(), turn.segment_tags, strict=True):
                    is_sum = tag in SUMMARY or (tag not in TOOL and summary_turn)
                    want = z_pref[j] if is_sum else z_exec[j]
                    assert a == pytest.approx(want.item(), abs=1e-5)
    oracle_turns = [t for i in (2, 6) for t in batch.trajectories[i].turns]
    assert any("answer" in t.segment_tags for t in oracle_turns)
    assert batch.metrics["slca/summary_token_share"] > 0
