"""Credit-assignment SFT (``--sft-mode ca``): rise segments and weights by hand, the
Monte-Carlo V against values known exactly, the mask on real episodes, the weighted loss, and
the CLI end to end (train and bench learning) with its refusals."""

import copy
import csv
import io
import json

import numpy as np
import pytest
import torch
from clirun import cli
from rich.console import Console

from agentgym.baselines import ca_sft
from agentgym.baselines.ca_sft import (
    Episode,
    TurnStart,
    assemble,
    ca_warm_start,
    mc_value,
    rise_segments,
    turn_weights,
)
from agentgym.baselines.config import TrainConfig
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.train import plain_warm_start, sft
from agentgym.core.errors import BadInput
from agentgym.registry import make

CHAIN = "agentgym/Credit-Chain-v0"
HAYSTACK = "agentgym/Credit-Haystack-v0"
KEY_DOOR = "agentgym/Credit-KeyDoor-v0"


@pytest.fixture(scope="module")
def policy():
    """An untrained nano policy whose tokenizer knows the credit envs' text."""
    torch.manual_seed(0)
    texts = [t for env in (CHAIN, HAYSTACK, KEY_DOOR) for t in collect_env_text(env, episodes=4)]
    return TinyPolicy.from_preset("nano", train_tokenizer(texts, vocab_size=400), max_len=1024)


# ------------------------------------------------------------------ rise segments, weights


@pytest.mark.parametrize(
    ("values", "delta", "segments"),
    [
        # rises +.25 +.25 -.5 +.25 0 -.75: two runs
        ([0.5, 0.75, 1.0, 0.5, 0.75, 0.75, 0.0], 0.1, [(0, 2), (3, 4)]),
        # a rise of exactly delta is no rise (strictly greater); binary fractions are exact
        ([0.25, 0.5, 0.625, 0.625], 0.25, []),
        ([0.25, 0.5, 0.625, 0.625], 0.125, [(0, 1)]),
        ([0.25, 0.5, 0.625, 0.625], 0.0, [(0, 2)]),  # a flat turn (0) ends the run
        ([0.75, 0.5, 0.25, 0.0], 0.0, []),  # falling all the way
        ([0.0, 1.0], 0.99, [(0, 1)]),
        ([0.5], 0.1, []),  # no turn
    ],
)
def test_rise_segments_are_the_maximal_runs_of_rises_above_delta(values, delta, segments):
    assert rise_segments(values, delta) == segments


def test_turn_weights_by_hand():
    values = [0.5, 0.75, 1.0, 0.5, 0.75, 0.75, 0.0]
    assert turn_weights(False, values, 6, 0.1, False) == [1, 1, 0, 1, 0, 0]
    assert turn_weights(False, values, 6, 0.1, True) == [0.25, 0.25, 0, 0.25, 0, 0]
    assert turn_weights(False, [0.75, 0.5, 0.25, 0.0], 3, 0.1, True) == [0, 0, 0]  # no rise
    assert turn_weights(True, None, 4, 0.1, True) == [1, 1, 1, 1]  # a won episode: all of it


def _episode(first, values, won):
    """An episode whose turn t's demo is the tensor [first + t] (one id per demo)."""
    n = len(values) - 1 if values is not None else 3
    demos = [(torch.tensor([first + t]), torch.tensor([first + t])) for t in range(n)]
    return Episode(demos=demos, starts=[], won=won, values=values)


def test_the_mask_keeps_all_of_won_episodes_and_only_the_rises_of_failed_ones():
    episodes = [
        _episode(0, None, True),  # turns 0, 1, 2
        _episode(10, [0.5, 0.75, 1.0, 0.5, 0.75, 0.75, 0.0], False),  # rises at 0, 1, 3
        _episode(20, [0.75, 0.5, 0.25, 0.0], False),  # no rise: no loss token at all
    ]
    data = assemble(episodes, delta=0.1, rise_weight=True)
    assert [int(p) for p, _ in data.demos] == [0, 1, 2, 10, 11, 13]
    assert data.weights == [1, 1, 1, 0.25, 0.25, 0.25]
    mean_v = np.mean([0.5, 0.75, 1.0, 0.5, 0.75, 0.75, 0.75, 0.5, 0.25])  # s_0..s_K-1 only
    assert data.metrics == {
        "sft_failed": 2,
        "sft_failed_turns": 9,
        "sft_kept_failed_turns": 3,
        "sft_mean_v": pytest.approx(mean_v),
        "sft_demos": 6,
    }
    assert assemble(episodes, delta=0.1, rise_weight=False).weights == [1] * 6


def test_nothing_left_to_train_on_is_refused():
    with pytest.raises(BadInput, match="kept no turn"):
        assemble([_episode(0, [0.75, 0.5, 0.0], False)], delta=0.1, rise_weight=False)


# ------------------------------------------------------------------ Monte-Carlo V


def _start(env, seed, actions):
    """Where the turn after ``actions`` acts from (the chain's task is the seed's)."""
    _, info = env.reset(seed=seed)
    for action in actions:
        *_, info = env.step(action)
    return TurnStart(
        seed, tuple(actions), tuple(info["admissible_actions"]), env.unwrapped.snapshot()
    )


def _chain_with_hidden_at(env, position):
    """A reset seed whose chain task hides the deciding pick at ``position``."""
    for seed in range(100):
        env.reset(seed=seed)
        if env.unwrapped._task.hidden == position:
            return seed
    raise AssertionError("no such seed")


def test_mc_value_matches_the_values_known_exactly_on_the_chain():
    """Before the hidden pick the noisy expert wins with 1 - ε (1 - 1/5) (ε = 1: the uniform
    policy, whose value the env states); after a right pick 1 and after a wrong one 0, whatever
    ε; the oracle alone (ε = 0) always wins."""
    env = make(CHAIN)
    seed = _chain_with_hidden_at(env, 2)
    task = env.unwrapped._task
    right = f"pick {task.clues[2]}"
    wrong = next(f"pick {w}" for w in task.options[2] if w != task.clues[2])
    first = [f"pick {task.options[0][0]}", f"pick {task.options[1][0]}"]
    s0 = _start(env, seed, [])
    uniform = env.unwrapped.credit_values()["uniform"]["value"]
    assert uniform == pytest.approx(0.2)
    rng = np.random.default_rng(0)
    assert mc_value(env, s0, 400, 1.0, rng) == pytest.approx(uniform, abs=0.08)
    assert mc_value(env, s0, 400, 0.3, rng) == pytest.approx(1 - 0.3 * 0.8, abs=0.08)
    for t in range(5):  # along the oracle's own path
        assert mc_value(env, _start(env, seed, first[:t]), 20, 0.0, rng) == 1.0
    after_wrong = _start(env, seed, [*first, wrong])
    after_right = _start(env, seed, [*first, right])
    for eps in (0.0, 0.5, 1.0):
        assert mc_value(env, after_wrong, 50, eps, rng) == 0.0
        assert mc_value(env, after_right, 50, eps, rng) == 1.0


def test_without_snapshots_the_prefix_is_replayed_to_the_same_value():
    env = make(CHAIN)
    seed = _chain_with_hidden_at(env, 1)
    task = env.unwrapped._task
    wrong = next(f"pick {w}" for w in task.options[1] if w != task.clues[1])
    for actions in ([], [f"pick {task.options[0][0]}", wrong]):
        start = _start(env, seed, actions)
        replay = TurnStart(start.seed, start.actions, start.admissible, None)
        a = mc_value(env, start, 64, 0.5, np.random.default_rng(1))
        b = mc_value(env, replay, 64, 0.5, np.random.default_rng(1))
        assert a == b
    assert a == 0.0  # the replayed prefix held the wrong pick


# ------------------------------------------------------------------ on real episodes


def _ca(env, **options):
    return TrainConfig.from_options(env=env, sft_mode="ca", sft_episodes=24, **options)


def test_ca_data_keeps_exactly_the_rise_turns_of_the_failed_episodes(policy):
    cfg = _ca(HAYSTACK, sft_ca_epsilon=0.9, sft_ca_rise_weight=True)
    data = ca_warm_start(cfg, policy)
    env = make(HAYSTACK, split="train")
    want, weights, kept, dropped = [], [], 0, 0
    for seed in range(24):
        episode = ca_sft.play(cfg, env, policy, seed)
        if episode.won:
            want += episode.demos
            weights += [1.0] * len(episode.demos)
            continue
        values = ca_sft.estimate_values(cfg, env, episode)
        assert len(values) == len(episode.demos) + 1 and values[-1] == 0.0
        rises = {t for a, b in rise_segments(values, 0.1) for t in range(a, b)}
        for t, demo in enumerate(episode.demos):
            if t in rises:
                want.append(demo)
                weights.append(values[t + 1] - values[t])
        kept, dropped = kept + len(rises), dropped + len(episode.demos) - len(rises)
    assert kept > 0 and dropped > 0  # both cases occurred
    assert data.metrics["sft_kept_failed_turns"] == kept
    assert len(data.demos) == len(want)
    for (p, r), (wp, wr) in zip(data.demos, want, strict=True):
        assert torch.equal(p, wp) and torch.equal(r, wr)
    assert data.weights == pytest.approx(weights)


def test_ca_data_is_deterministic_and_a_wrong_key_leaves_nothing_to_rise(policy):
    """On Credit-KeyDoor an episode fails only by a wrong key at turn 0, after which V is 0:
    its failed episodes give no demo, the won ones all their turns."""
    cfg = _ca(KEY_DOOR)
    data = ca_warm_start(cfg, policy)
    again = ca_warm_start(cfg, policy)
    assert len(data.demos) == len(again.demos) and data.weights == again.weights
    for (p, r), (p2, r2) in zip(data.demos, again.demos, strict=True):
        assert torch.equal(p, p2) and torch.equal(r, r2)
    m = data.metrics
    assert 0 < m["sft_failed"] < 24 and m["sft_kept_failed_turns"] == 0
    assert m["sft_demos"] == 8 * (24 - m["sft_failed"])  # 8 turns an episode
    assert 0 < m["sft_mean_v"] < 1


def test_plain_mode_is_the_oracle_demonstrations_unweighted(policy):
    cfg = TrainConfig.from_options(env=CHAIN, sft_episodes=3)
    data = plain_warm_start(cfg, policy)
    assert data.weights is None and data.metrics == {} and len(data.demos) == 15


def test_a_demo_weight_scales_its_share_of_the_loss(policy):
    """One demo: weight 0.5 halves the first step's NLL; weight 1 is the unweighted loss."""
    cfg = TrainConfig.from_options(env=CHAIN, sft_steps=1)
    demos = plain_warm_start(cfg.with_options(sft_episodes=1), policy).demos[:1]
    plain = sft(copy.deepcopy(policy), demos, cfg)
    assert sft(copy.deepcopy(policy), demos, cfg, [1.0]) == pytest.approx(plain, rel=1e-6)
    assert sft(copy.deepcopy(policy), demos, cfg, [0.5]) == pytest.approx(plain / 2, rel=1e-6)


# ------------------------------------------------------------------ the command line


def test_train_with_sft_mode_ca_runs_end_to_end_and_records_its_settings(tmp_path):
    ckpt = tmp_path / "ckpt"
    out = cli(
        "train",
        *("--env", KEY_DOOR, "--out", str(ckpt), "--preset", "nano", "--sft-mode", "ca"),
        *("--sft-steps", "3", "--sft-episodes", "6", "--sft-ca-rollouts", "4"),
        *("--steps", "1", "--tasks-per-step", "1", "--group-size", "2", "--eval-every", "0"),
    )
    assert out.returncode == 0, out.stderr
    assert "warm start (ca)" in out.stderr
    assert (ckpt / "agentgym_agent.json").exists() and (ckpt / "sft" / "model.safetensors").exists()
    saved = json.loads((ckpt / "train_config.json").read_text())
    assert (saved["sft_mode"], saved["sft_ca_epsilon"], saved["sft_ca_rollouts"]) == ("ca", 0.3, 4)
    assert (saved["sft_ca_delta"], saved["sft_ca_rise_weight"]) == (0.1, False)
    with (ckpt / "metrics.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["phase"] == "sft")
    assert float(row["sft_failed"]) >= 0 and float(row["sft_demos"]) > 0
    assert {"sft_failed_turns", "sft_kept_failed_turns", "sft_mean_v"} <= set(row)
    manifest = json.loads((ckpt / "agentgym_agent.json").read_text())
    assert manifest["config"]["train"]["sft_mode"] == "ca"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--sft-mode", "foo"), "--sft-mode must be one of plain, ca, got 'foo'"),
        (("--sft-mode", "ca", "--sft-noise", "0.2"), "--sft-noise is the plain mode's"),
        (("--sft-ca-epsilon", "1.5"), "--sft-ca-epsilon is a probability in [0, 1], got 1.5"),
        (("--sft-ca-rollouts", "0"), "--sft-ca-rollouts must be at least 1"),
        (("--sft-ca-delta", "1"), "--sft-ca-delta must be in [0, 1)"),
        (("--sft-mode", "ca", "--sft-teacher", "random"), "--sft-mode ca plays the env's oracle"),
    ],
)
def test_bad_ca_options_exit_2_with_one_line(tmp_path, args, words):
    out = cli("train", "--out", str(tmp_path / "ckpt"), *args)
    assert out.returncode == 2, out.stderr
    assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ckpt").exists()


def test_bench_learning_with_sft_mode_ca_keeps_its_runs_apart(tmp_path):
    from agentgym.bench import run_bench

    console = Console(file=io.StringIO(), width=300)
    doc = run_bench(
        "learning", console, quick=True, env=KEY_DOOR, variants="grpo", seeds=1,
        work=str(tmp_path), curve=False, sft_mode="ca",
    )  # fmt: skip
    assert doc["budget"]["sft_mode"] == "ca" and doc["budget"]["sft_noise"] == 0.0
    assert "SFT steps (ca)" in console.file.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grpo-ca-0", "warm-ca-0"]
    with (tmp_path / "warm-ca-0" / "metrics.csv").open() as f:
        assert "sft_failed" in next(csv.DictReader(f))
    refused = cli("bench", "learning", "--quick", "--sft-mode", "foo", timeout=300)
    assert refused.returncode == 2 and "--sft-mode must be one of plain, ca" in refused.stderr
