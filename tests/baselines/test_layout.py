"""Sample layouts: history prompts, concat rollouts scored with one sequence per rollout."""

import dataclasses

import pytest
import torch

from agentgym.baselines.batch import Batch
from agentgym.baselines.policies.agent import PolicyAgent
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.prompt import History, PromptFormat, observation_ids, prompt_ids
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.scoring import concat_sequence, context_limit, turn_logprobs, turn_values

SMALL = "agentgym/Search-Menu-Small-v0"
CONCAT = PromptFormat(layout="concat")


def fmt(window, pin_first=False):
    """The format of a history window: W previous pairs (per-step), or None for all (concat,
    where pinning the first observation changes nothing)."""
    if window is None:
        return CONCAT
    return PromptFormat(history=window, pin_first=pin_first)


def history_prompt(policy, observations, responses, window, pin_first=False):
    return History(policy, fmt(window, pin_first), observations, responses).prompt()


@pytest.fixture(scope="module")
def pool():
    return EnvPool(SMALL, 4, max_turns=5)


@pytest.fixture(scope="module")
def tasks(pool):
    return [(pool.envs[0].unwrapped.task_ids()[i], 100 + i) for i in range(2)]


@pytest.fixture(scope="module")
def concat_trajs(policy, pool, tasks):
    cfg = RolloutConfig(prompt=CONCAT, constrained=False, max_new_tokens=12, snapshots=True)
    return collect(policy, pool, tasks, 2, cfg, gumbel_keys=[1, 2, 3, 4])


class _Counting:
    """Forwards to a policy and records (rows, tokens) of every scoring call."""

    def __init__(self, policy):
        self.policy, self.config, self.calls = policy, policy.config, []

    def logprobs(self, prompts, responses, *, grad=False):
        tokens = sum(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
        self.calls.append((len(prompts), tokens))
        return self.policy.logprobs(prompts, responses, grad=grad)


def test_history_prompts_window_and_encoding(policy):
    tok = policy.tokenizer
    obs = ["first page", "second page", "third page"]
    acts = [[*tok.encode("search: a"), tok.eos_id], [*tok.encode("read: b"), tok.eos_id]]
    assert history_prompt(policy, obs[:1], [], 0) == prompt_ids(policy, obs[0])
    assert history_prompt(policy, obs, acts, 0) == prompt_ids(policy, obs[2])
    later = [tok.encode("\n" + o) for o in obs]
    assert history_prompt(policy, obs, acts, 1) == [
        *prompt_ids(policy, obs[1]),
        *acts[1],
        *later[2],
    ]
    whole = [*prompt_ids(policy, obs[0]), *acts[0], *later[1], *acts[1], *later[2]]
    assert history_prompt(policy, obs, acts, None) == whole == history_prompt(policy, obs, acts, 5)
    assert observation_ids(policy, obs[1], first=False) == later[1]
    history = History(policy, CONCAT, obs[:1])  # incremental building gives the same prompts
    for k in range(1, 3):
        history.act(torch.tensor(acts[k - 1]))
        history.observe(obs[k])
    assert history.prompt() == whole
    with pytest.raises(ValueError, match="one more observation"):
        history_prompt(policy, obs, acts[:1], 0)
    assert context_limit(policy) == 4096


def test_pinned_first_observation_heads_every_prompt(policy):
    """pin_first keeps the first observation (a text game's task) once the window has left
    it, and changes nothing while the window still holds it."""
    tok = policy.tokenizer
    obs = ["Your task is to: put a mug in the cabinet.", "You see a mug.", "You take the mug."]
    acts = [[*tok.encode("go to shelf 1"), tok.eos_id], [*tok.encode("take mug"), tok.eos_id]]
    later = [tok.encode("\n" + o) for o in obs]
    assert history_prompt(policy, obs, acts, 0, pin_first=True) == [
        *prompt_ids(policy, obs[0]),
        *later[2],
    ]
    assert history_prompt(policy, obs, acts, 1, pin_first=True) == [
        *prompt_ids(policy, obs[0]),
        *later[1],
        *acts[1],
        *later[2],
    ]
    for window in (2, None):
        assert history_prompt(policy, obs, acts, window, pin_first=True) == history_prompt(
            policy, obs, acts, window
        )
    assert history_prompt(policy, obs[:1], [], 0, pin_first=True) == prompt_ids(policy, obs[0])


def test_config_validates_layouts():
    with pytest.raises(ValueError, match="layout"):
        PromptFormat(layout="tree")
    with pytest.raises(ValueError, match="per-step"):
        PromptFormat(layout="concat", history=2)
    with pytest.raises(ValueError, match="per-step"):
        PromptFormat(layout="concat", pin_first=True)
    with pytest.raises(ValueError, match="context"):
        PromptFormat(context=0)
    assert RolloutConfig().prompt.window == 0 and CONCAT.window is None


def test_prompt_format_round_trips_and_reads_old_checkpoints():
    new = PromptFormat(history=2, pin_first=True, context=512)
    assert PromptFormat.from_json(new.to_json()) == new
    assert PromptFormat.from_checkpoint({"prompt": new.to_json(), "history": 0}) == new
    # checkpoints written before the prompt format kept its fields at the top level
    old = {"layout": "per-step", "history": 2, "pin_first": True, "policy_class": "x:Y"}
    assert PromptFormat.from_checkpoint(old) == PromptFormat(history=2, pin_first=True)
    assert PromptFormat.from_checkpoint({"layout": "concat", "history": 0}) == CONCAT
    assert PromptFormat.from_checkpoint({}) == PromptFormat()
    with pytest.raises(ValueError, match="unknown prompt format keys"):
        PromptFormat.from_json({"layout": "per-step", "windw": 3})


def test_context_keeps_the_most_recent_tokens(policy):
    tok = policy.tokenizer
    obs = ["first page", "second page"]
    acts = [[*tok.encode("search: a"), tok.eos_id]]
    whole = History(policy, CONCAT, obs, acts).prompt()
    cut = History(policy, PromptFormat(layout="concat", context=5), obs, acts).prompt()
    assert cut == whole[-5:]


def test_privileged_view_opens_the_prompt_with_the_current_states_context(policy):
    tok = policy.tokenizer
    act = [*tok.encode("search: a"), tok.eos_id]
    opened = prompt_ids(policy, "the answer is Orarshire\nfirst page")
    view = PromptFormat(history=1, privileged=True)
    history = History(policy, view)
    history.observe("first page", {"privileged_context": "the answer is Orarshire"})
    assert history.prompt() == opened
    history.act(act)
    # the state acted from gives the context (a per-state hint, such as the best action)
    history.observe("second page", {"privileged_context": "now search Orarshire"})
    reopened = prompt_ids(policy, "now search Orarshire\nfirst page")
    assert history.prompt() == [*reopened, *act, *tok.encode("\nsecond page")]
    # an env made without privileged=True gives no context: the prompt is the plain one
    blind = History(policy, view)
    blind.observe("first page", {})
    assert blind.prompt() == prompt_ids(policy, "first page")


def test_per_step_history_prompts(policy, pool, tasks):
    cfg = RolloutConfig(prompt=PromptFormat(history=2), max_new_tokens=24, snapshots=True)
    trajs = collect(policy, pool, tasks[:1], 2, cfg, gumbel_keys=[3, 4])
    assert all(t.prompt == PromptFormat(history=2) for t in trajs)
    for traj in trajs:
        obs = [turn.extras["observation"] for turn in traj.turns]
        acts = [turn.response_ids for turn in traj.turns]
        assert traj.turns[0].prompt_ids.tolist() == prompt_ids(policy, obs[0])
        for k, turn in enumerate(traj.turns):
            want = history_prompt(policy, obs[: k + 1], acts[:k], 2)
            assert turn.prompt_ids.tolist() == want
        assert len(traj.turns) >= 4  # the window really slides past the first observation
        assert traj.turns[3].prompt_ids.tolist()[: len(prompt_ids(policy, obs[1]))] == (
            prompt_ids(policy, obs[1])
        )


def test_concat_turns_extend_the_previous_turn(policy, concat_trajs):
    for traj in concat_trajs:
        assert traj.prompt == CONCAT and len(traj.turns) > 1
        first = traj.turns[0]
        assert first.prompt_ids.tolist() == prompt_ids(policy, first.extras["observation"])
        for prev, turn in zip(traj.turns, traj.turns[1:], strict=False):
            obs = observation_ids(policy, turn.extras["observation"], first=False)
            want = [*prev.prompt_ids.tolist(), *prev.response_ids.tolist(), *obs]
            assert turn.prompt_ids.tolist() == want


def test_concat_logprobs_match_per_turn_scoring_and_behaviour(policy, concat_trajs):
    batch = Batch(trajectories=concat_trajs)
    keys = batch.keys()
    counting = _Counting(policy)
    got = turn_logprobs(counting, batch, keys, grad=True)
    per_turn = policy.logprobs(
        [batch.turn(k).prompt_ids for k in keys], [batch.turn(k).response_ids for k in keys]
    )
    assert got[0].requires_grad
    for key, lp, ref in zip(keys, got, per_turn, strict=True):
        assert lp.shape == batch.turn(key).response_ids.shape
        torch.testing.assert_close(lp.detach(), ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(lp.detach(), batch.turn(key).logp_old, atol=1e-5, rtol=0)
    # one sequence per rollout, and far fewer tokens than one sequence per turn
    assert counting.calls and [rows for rows, _ in counting.calls] == [len(concat_trajs)]
    per_turn_tokens = sum(
        len(batch.turn(k).prompt_ids) + len(batch.turn(k).response_ids) for k in keys
    )
    assert counting.calls[0][1] < per_turn_tokens / 2
    values = turn_values(policy, batch, keys[:3], grad=False)
    ref_values = policy.values(
        [batch.turn(k).prompt_ids for k in keys[:3]], [batch.turn(k).response_ids for k in keys[:3]]
    )
    for v, r in zip(values, ref_values, strict=True):
        torch.testing.assert_close(v, r, atol=1e-5, rtol=0)


def test_concat_logprobs_on_a_subset_and_fallbacks(policy, concat_trajs):
    batch = Batch(trajectories=list(concat_trajs))
    keys = [(0, 3), (0, 1), (1, 2), (2, 0), (0, 2)]  # any order, gaps, a single turn
    counting = _Counting(policy)
    got = turn_logprobs(counting, batch, keys, grad=False)
    ref = policy.logprobs(
        [batch.turn(k).prompt_ids for k in keys], [batch.turn(k).response_ids for k in keys]
    )
    for lp, r in zip(got, ref, strict=True):
        torch.testing.assert_close(lp, r, atol=1e-5, rtol=0)
    assert counting.calls[0][0] == 3
    assert concat_sequence(concat_trajs[0], [1, 3])[1] == len(concat_trajs[0].turns[1].prompt_ids)

    # an edited turn breaks the prefix property: that rollout falls back to per-turn rows
    edited = dataclasses.replace(concat_trajs[0], turns=list(concat_trajs[0].turns))
    turn = edited.turns[1]
    edited.turns[1] = dataclasses.replace(turn, response_ids=turn.response_ids.flip(0))
    batch = Batch(trajectories=[edited, concat_trajs[1]])
    keys = batch.keys()
    counting = _Counting(policy)
    got = turn_logprobs(counting, batch, keys, grad=False)
    assert concat_sequence(edited, range(len(edited.turns))) is None
    assert counting.calls[0][0] == len(edited.turns) + 1
    ref = policy.logprobs(
        [batch.turn(k).prompt_ids for k in keys], [batch.turn(k).response_ids for k in keys]
    )
    for lp, r in zip(got, ref, strict=True):
        torch.testing.assert_close(lp, r, atol=1e-5, rtol=0)
    assert turn_logprobs(policy, batch, [], grad=False) == []


def test_per_step_batches_use_the_plain_call(policy, pool, tasks):
    trajs = collect(policy, pool, tasks[:1], 2, RolloutConfig(max_new_tokens=24, constrained=False))
    batch = Batch(trajectories=trajs)
    keys = batch.keys()
    counting = _Counting(policy)
    got = turn_logprobs(counting, batch, keys, grad=False)
    ref = policy.logprobs(
        [batch.turn(k).prompt_ids for k in keys], [batch.turn(k).response_ids for k in keys]
    )
    assert counting.calls == [(len(keys), counting.calls[0][1])]
    for lp, r in zip(got, ref, strict=True):
        assert torch.equal(lp, r)


def test_concat_refuses_histories_beyond_the_context(policy, pool, tasks):
    short = TinyPolicy.from_preset("nano", policy.tokenizer, max_len=300)
    cfg = RolloutConfig(prompt=CONCAT, constrained=False, max_new_tokens=12)
    with pytest.raises(ValueError, match=r"context limit of 300 .*per-step"):
        collect(short, pool, tasks[:1], 1, cfg)


def test_concat_rollouts_replay_under_gumbel_keys(policy, pool, tasks, concat_trajs):
    cfg = RolloutConfig(prompt=CONCAT, constrained=False, max_new_tokens=12)
    again = collect(policy, pool, tasks, 2, cfg, gumbel_keys=[1, 2, 3, 4])
    ids = lambda trajs: [[t.prompt_ids.tolist() for t in tr.turns] for tr in trajs]  # noqa: E731
    assert ids(again) == ids(concat_trajs)


@pytest.mark.parametrize(
    ("layout", "history", "pin_first"),
    [("concat", 0, False), ("per-step", 2, False), ("per-step", 1, True), ("per-step", 0, True)],
)
def test_policy_agent_sees_the_rollout_prompts(policy, pool, tasks, layout, history, pin_first):
    seen_format = PromptFormat(layout=layout, history=history, pin_first=pin_first)
    cfg = RolloutConfig(prompt=seen_format, greedy=True, max_new_tokens=24)
    (traj,) = collect(policy, pool, tasks[:1], 1, cfg)
    assert traj.prompt.pin_first is pin_first
    agent = PolicyAgent(policy, greedy=True, prompt=seen_format)
    seen = []
    generate = policy.generate

    def spy(prompts, **kwargs):
        seen.extend(prompts)
        return generate(prompts, **kwargs)

    env = pool.envs[0]
    task, seed = tasks[0]
    agent.reset(SMALL, seed)
    obs, info = env.reset(seed=seed, options={"task_id": task})
    policy.generate = spy
    try:
        for _ in traj.turns:
            obs, _, _, _, info = env.step(agent.act(obs, info))
    finally:
        del policy.generate
    assert seen == [turn.prompt_ids.tolist() for turn in traj.turns]


@pytest.mark.parametrize("layout", ["per-step", "concat"])
def test_constrained_rollouts_score_their_behaviour_logps(policy, pool, tasks, layout):
    """Training scores a constrained turn under the mask decoding used, so the PPO ratio of
    an unchanged policy is exactly 1 (and without the mask it would not be)."""
    cfg = RolloutConfig(prompt=PromptFormat(layout=layout), constrained=True, max_new_tokens=40)
    trajs = collect(policy, pool, tasks[:1], 2, cfg)
    batch = Batch(trajectories=trajs)
    keys = batch.keys()
    assert all(batch.turn(k).allowed_tokens is not None for k in keys)
    new = torch.cat(turn_logprobs(policy, batch, keys, grad=False))
    old = torch.cat([batch.turn(k).logp_old for k in keys])
    torch.testing.assert_close(new, old, atol=1e-5, rtol=0)
    free = torch.cat(
        policy.logprobs(
            [batch.turn(k).prompt_ids for k in keys], [batch.turn(k).response_ids for k in keys]
        )
    )
    assert bool((free < old - 1e-3).any())


def test_a_checkpoint_saved_before_the_prompt_format_plays_with_its_old_window(
    policy, pool, tasks, tmp_path
):
    """Checkpoints written before the prompt format kept layout, history and pin_first at
    the top level of their manifest: they load with that window and play the same prompts."""
    from agentgym.agents import load_agent
    from agentgym.baselines.policies.agent import save_policy_checkpoint

    old = {"layout": "per-step", "history": 1, "pin_first": True, "train": {"history": 1}}
    save_policy_checkpoint(policy, tmp_path / "old", metadata=old)
    agent = load_agent(str(tmp_path / "old"))
    assert agent.prompt == PromptFormat(history=1, pin_first=True)
    cfg = RolloutConfig(prompt=agent.prompt, greedy=True, max_new_tokens=24)
    (traj,) = collect(policy, pool, tasks[:1], 1, cfg)
    env, (task, seed) = pool.envs[0], tasks[0]
    agent.reset(SMALL, seed)
    obs, info = env.reset(seed=seed, options={"task_id": task})
    for turn in traj.turns:
        assert agent.act(obs, info) == turn.extras["action"]
        obs, _, _, _, info = env.step(turn.extras["action"])


@pytest.mark.parametrize("temperature", [0.5, 1.7])
@pytest.mark.parametrize("layout", ["per-step", "concat"])
def test_turns_are_scored_at_the_temperature_they_were_sampled_at(
    policy, pool, tasks, layout, temperature
):
    """Before any update the PPO ratio is exactly 1 at any sampling temperature, for the
    sampled rollouts and for the same actions replayed (dre's edits); scoring at T = 1
    instead gave ratios from 0.14 to 38 at T = 0.5."""
    from agentgym.baselines.rollout import replay

    cfg = RolloutConfig(
        prompt=PromptFormat(layout=layout), temperature=temperature, max_new_tokens=40
    )
    trajs = collect(policy, pool, tasks[:1], 2, cfg, gumbel_keys=[5, 6])
    batch = Batch(trajectories=trajs)
    keys = batch.keys()
    assert {batch.turn(k).temperature for k in keys} == {temperature}
    new = torch.cat(turn_logprobs(policy, batch, keys, grad=False))
    old = torch.cat([batch.turn(k).logp_old for k in keys])
    torch.testing.assert_close(new, old, atol=1e-5, rtol=0)
    at_one = torch.cat(
        policy.logprobs(
            [batch.turn(k).prompt_ids for k in keys],
            [batch.turn(k).response_ids for k in keys],
            allowed_tokens=[batch.turn(k).allowed_tokens for k in keys],
        )
    )
    assert float((at_one - old).abs().max()) > 1e-2  # the bug this guards against
    task, seed = tasks[0]
    played = trajs[0]
    again = replay(policy, pool, task, seed, [t.extras["action"] for t in played.turns], cfg)
    for a, b in zip(again.turns, played.turns, strict=True):
        torch.testing.assert_close(a.logp_old, b.logp_old, atol=1e-5, rtol=0)
