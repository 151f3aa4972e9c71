"""GradCuit: latent offsets move decoding the way the verifier wants, and never leak a trial."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import torch

from agentgym.baselines.gradcuit import (
    GradCuitAgent,
    GradCuitSettings,
    hooked,
    latent_offset,
    reinforce_step,
)
from agentgym.baselines.policies.agent import save_policy_checkpoint
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.prompt import act, action_choices
from agentgym.harness.episode import run_episode
from tests.clirun import cli
from tests.hf_model import write_hf_model

SMALL = "agentgym/Search-Menu-Small-v0"
KEY_DOOR = "agentgym/Credit-KeyDoor-v0"
CHOICES = ["take the red key", "open the blue door", "go north"]


@pytest.fixture(scope="module")
def tiny() -> TinyPolicy:
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(KEY_DOOR, episodes=5) + CHOICES, 600)
    return TinyPolicy.from_preset("nano", tokenizer, max_len=512)


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    from agentgym.baselines.policies.hf import HFPolicy

    out = tmp_path_factory.mktemp("hf")
    write_hf_model(out, collect_env_text(KEY_DOOR, episodes=5) + CHOICES)
    return HFPolicy.from_pretrained(out, value_head=False)


def _logp(policy, hook, acted):
    with hooked(policy, hook):
        (lp,) = policy.logprobs(
            [torch.tensor(acted.prompt)],
            [torch.tensor(acted.out.ids)],
            allowed_tokens=[_mask(policy, acted)],
        )
    return float(lp.sum())


def _mask(policy, acted):
    from agentgym.baselines.policies.constrained import allowed_tokens

    return allowed_tokens(acted.out.ids, list(acted.choices), policy.tokenizer.eos_id)


@pytest.mark.parametrize("kind", ["tiny", "hf"])
@pytest.mark.parametrize("reward", [-1.0, 1.0])
def test_one_step_moves_the_answers_logprob_with_the_rewards_sign(kind, reward, request):
    """REINFORCE on the latents: a failing answer (r < 0) gets less likely, a good one more."""
    policy = request.getfixturevalue(kind)
    prompt = policy.encode_prompt("You are in a hall. " * 3)
    choices = action_choices(policy, {"admissible_actions": CHOICES}, True)
    layer = policy.num_blocks // 2
    delta = torch.zeros(4, _width(policy), requires_grad=True)
    hook = latent_offset(layer, len(prompt) - 4, delta)
    adam = torch.optim.Adam([delta], lr=0.05)
    with hooked(policy, hook):
        (acted,) = act(policy, [prompt], [choices], max_new_tokens=16, greedy=True)
    before = _logp(policy, hook, acted)
    reinforce_step(policy, acted, hook, adam, reward=reward)
    after = _logp(policy, hook, acted)
    assert delta.detach().abs().sum() > 0
    assert (after - before) * reward > 0, (before, after)
    assert all(p.grad is None for p in policy.parameters())  # the weights are not touched


def _width(policy):
    config = getattr(policy, "config", None)
    return getattr(config, "n_embd", None) or policy.model.config.hidden_size


@pytest.mark.parametrize("kind", ["tiny", "hf"])
def test_the_agent_moves_to_the_answer_the_verifier_prefers(kind, request):
    policy = request.getfixturevalue(kind)
    info = {"admissible_actions": CHOICES}
    plain = GradCuitAgent(policy, GradCuitSettings(steps=0, prefix=""))
    plain.reset("x", 0)
    first = plain.act("You are in a hall.", info)
    assert plain.compute_used == {
        "generations": 1,
        "forward": 0,
        "backward": 0,
        "verifier": 1,
        "updates": 0,
    }
    agent = GradCuitAgent(policy, GradCuitSettings(steps=20, lr=0.5, prefix=""))
    agent.reset("x", 0)
    agent._verify = lambda text: 0.0 if text == first else 1.0
    moved = agent.act("You are in a hall.", info)
    assert moved != first
    used = agent.compute_used
    assert 1 <= used["updates"] == used["backward"] == used["generations"] - 1 <= 20
    accepting = GradCuitAgent(policy, GradCuitSettings(steps=20, lr=0.5, prefix=""))
    accepting.reset("x", 0)
    accepting._verify = lambda text: 1.0
    assert accepting.act("You are in a hall.", info) == first
    assert accepting.compute_used["updates"] == 0


class _Replay:
    """Plays the actions of a recorded transcript."""

    def __init__(self, actions):
        self.actions = list(actions)

    def reset(self, env_id, seed):
        self.left = iter(self.actions)

    def act(self, observation, info):
        return next(self.left)


@pytest.mark.parametrize("verifier", ["step", "rollout"])
@pytest.mark.parametrize("env_id", [KEY_DOOR, SMALL])
def test_trial_steps_never_leak_into_the_episode(tiny, env_id, verifier):
    """The transcript is the one a plain agent playing the same actions gets."""
    if env_id == SMALL:  # its own tokenizer: the menu's words
        torch.manual_seed(1)
        policy = TinyPolicy.from_preset(
            "nano", train_tokenizer(collect_env_text(SMALL, episodes=5), 600)
        )
    else:
        policy = tiny
    agent = GradCuitAgent(policy, GradCuitSettings(steps=3, lr=0.5, verifier=verifier))
    env = gym.make(env_id)
    for seed in range(3):
        transcript: list = []
        record = run_episode(env, agent, env_id=env_id, run=0, episode=0, seed=seed,
                             transcript=transcript)  # fmt: skip
        assert record["error"] is None
        assert record["compute"]["verifier"] >= record["steps"]
        if verifier == "rollout":  # every turn's candidates were played out to the end
            assert record["compute"]["verifier_generations"] > 0
        replay = _Replay(step[0] for step in transcript[1:])
        again = run_episode(gym.make(env_id), replay, env_id=env_id, run=0, episode=0, seed=seed)
        assert again["transcript_sha256"] == record["transcript_sha256"]


@pytest.mark.parametrize("kind", ["tiny", "hf"])
def test_eval_plays_gradcuit_from_the_cli_and_records_its_work(kind, request, tmp_path):
    ckpt = save_policy_checkpoint(request.getfixturevalue(kind), tmp_path / "ckpt")
    out = tmp_path / "r.json"
    result = cli(
        *("eval", "--agent", f"gradcuit:{ckpt}", "--env", KEY_DOOR, "--seeds", "2"),
        *("--agent-option", "steps=2", "--agent-option", "lr=0.1", "--out", str(out)),
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["agent"]["name"] == "gradcuit:ckpt"
    assert doc["agent"]["options"] == {"steps": 2, "lr": 0.1}
    assert "extra work of" in result.stdout  # the report's line
    for episode in doc["episodes"]:
        used = episode["compute"]
        assert used["generations"] >= episode["steps"] and used["updates"] <= 2 * episode["steps"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("nonsense=1", "gradcuit has no option nonsense"),
        ("steps=-1", "gradcuit needs steps"),
        ("layer=top", "gradcuit option layer takes an int or null, got 'top'"),
        ("lr=fast", "gradcuit option lr takes a number"),
    ],
)
def test_bad_gradcuit_options_exit_2_with_one_line(tiny, tmp_path, option, message):
    ckpt = save_policy_checkpoint(tiny, tmp_path / "ckpt")
    result = cli(
        *("eval", "--agent", f"gradcuit:{ckpt}", "--env", KEY_DOOR, "--seeds", "1"),
        *("--agent-option", option, "--out", str(tmp_path / "r.json")),
    )
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_only_the_rollout_verifier_judges_the_decisive_first_turn(tiny):
    """On Credit-KeyDoor the key (turn 0) decides, but only the door step ends the episode: a
    one-step trial has no verdict on the key, a rollout to the end has one."""
    verdicts = {}
    for verifier in ("step", "rollout"):
        agent = GradCuitAgent(tiny, GradCuitSettings(steps=1, verifier=verifier))
        env = gym.make(KEY_DOOR)
        obs, info = env.reset(seed=0)
        agent.reset(KEY_DOOR, 0)
        agent.bind(env.unwrapped)
        seen: list = []

        def spy(acted, score=agent._score, seen=seen):
            seen.append(score(acted))
            return seen[-1]

        agent._score = spy
        agent.act(obs, info)
        verdicts[verifier] = seen[0]
    assert verdicts["step"] is None
    assert verdicts["rollout"] in (0.0, 1.0)
