"""``agentgym bench credit``: the Monte-Carlo truth against analytic values, and the command."""

import itertools
import json

import pytest
from clirun import cli
from rich.console import Console

from agentgym.baselines.bench import credit as bench_credit
from agentgym.baselines.credit import names
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.policies.uniform import UniformPolicy
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.truth import analytic, monte_carlo, scored_turns


def _gap(values: dict) -> float:
    """The smallest difference between two distinct advantages of one state (inf if none)."""
    distinct = sorted(set(round(a, 9) for a in values["advantage"].values()))
    return min((b - a for a, b in itertools.pairwise(distinct)), default=float("inf"))


@pytest.mark.parametrize(
    ("env_id", "kwargs", "k"),
    [
        ("agentgym/Credit-KeyDoor-v0", {"horizon": 1}, 512),
        ("agentgym/Credit-Chain-v0", {"length": 3}, 64),
        ("agentgym/Credit-Haystack-v0", {"turns": 2, "threshold": 1}, 512),
    ],
)
def test_monte_carlo_truth_agrees_with_the_analytic_advantages(env_id, kwargs, k):
    """Under the uniform policy, every turn's estimate holds the env's exact advantage within
    four standard errors, and K is large enough that its error is under a tenth of the
    smallest gap between two actions' advantages at that state."""
    tokenizer = train_tokenizer(collect_env_text(env_id, episodes=5, env_kwargs=kwargs), 600)
    policy = UniformPolicy(tokenizer, seed=1)
    pool = EnvPool(env_id, 1, split="train", privileged=True, **kwargs)
    cfg = RolloutConfig(snapshots=True)
    task = pool.envs[0].unwrapped.task_ids()[3]
    trajs = collect(policy, pool, [(task, 5)], 2, cfg, gumbel_keys=[1, 2])
    keys = scored_turns(trajs)
    exact = analytic(trajs, keys, "uniform")
    estimate, cost = monte_carlo(policy, pool, trajs, keys, k, cfg, seed=2)
    assert set(estimate) == set(exact) == set(keys) and cost.rollouts == 2 * k * len(keys)
    nonzero = 0
    for key in keys:
        truth, mc = exact[key], estimate[key]
        assert abs(mc.advantage - truth.advantage) <= 4 * mc.se + 1e-9, (key, mc, truth)
        i, t = key
        values = trajs[i].turns[t].extras["observation_info"]["credit_values"]["uniform"]
        assert mc.se < _gap(values) / 10, (key, mc.se, _gap(values))
        nonzero += abs(truth.advantage) > 1e-9
    assert nonzero > 0  # the case has credit to find, not only zeros


def test_quick_bench_lists_every_variant_with_its_fidelity_or_a_reason(tmp_path):
    out, figure = tmp_path / "credit.json", tmp_path / "credit.png"
    result = cli("bench", "credit", "--quick", "--json", str(out), "--plot", str(figure))
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["part"] == "credit" and doc["env"] == "agentgym/Credit-KeyDoor-v0"
    assert doc["policy"] == "uniform" and doc["truth"]["kind"].startswith("analytic")
    check = doc["truth"]["check"]
    assert 0.0 <= check["within_95"] <= 1.0 and check["turns"] == doc["truth"]["turns"]
    assert check["bias_ci"][0] <= check["bias"] <= check["bias_ci"][1]
    assert [row["variant"] for row in doc["rows"]] == names()
    for row in doc["rows"]:
        if row["status"] == "ok":
            assert -1.0 <= row["ci_low"] <= row["spearman"] <= row["ci_high"] <= 1.0
            assert row["rollouts"] > 0 and row["seconds"] > 0
            # paired with grpo on the same turns: the shared batch, or the variant's own with
            # grpo's credit computed on it
            assert ("vs_grpo" in row) == (row["variant"] != "grpo")
            assert ("grpo_on_own_batch" in row) == row["own_sampler"]
        else:
            assert row["status"] == "n/a" and row["reason"]
    # the default sampler alone is grpo; trace and isa need a gold answer the Credit envs lack,
    # taco an answer checker, rubric tool calls, gbc a policy with block hooks (the uniform
    # policy has no blocks); the other teacher-signal variants add a loss term and leave the
    # advantages to grpo
    not_applicable = {
        row["variant"]: row["reason"] for row in doc["rows"] if row["status"] == "n/a"
    }
    losses = {"sdar", "pivot_sd", "roadmopd"}
    assert set(not_applicable) == {"group", "trace", "isa", "taco", "rubric", "gbc", *losses}
    assert "block hooks" in not_applicable["gbc"]
    assert "gold_answer" in not_applicable["trace"] and "gold_answer" in not_applicable["isa"]
    assert "check_answer" in not_applicable["taco"]
    assert "tool_calls" in not_applicable["rubric"]
    assert all("a loss term, no per-turn advantage" in not_applicable[n] for n in losses)
    assert figure.stat().st_size > 0
    assert "credit fidelity on agentgym/Credit-KeyDoor-v0" in result.stdout


def test_a_policy_without_analytic_values_is_measured_by_monte_carlo():
    doc = bench_credit.run(
        Console(quiet=True),
        quick=True,
        env="agentgym/Search-Menu-Small-v0",
        variants=("grpo", "gigpo", "trace"),
    )
    assert doc["truth"]["kind"] == "monte carlo" and not doc["truth"]["check"]
    assert doc["policy"].startswith("warm start")
    assert doc["truth"]["turns"] > 0 and doc["truth"]["monte_carlo"]["rollouts"] > 0
    assert [row["variant"] for row in doc["rows"]] == ["grpo", "gigpo", "trace"]
    # trace reads the gold answer: the bench plays on the privileged env, and measures it
    trace = doc["rows"][-1]
    assert trace["status"] == "ok" and trace["plan"] == "group+grpo+trace"
    assert trace["vs_grpo"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--k", "1"], "--k must be at least 2"),
        (["--checkpoint", "no/such/dir"], "no/such/dir"),
        (["--variants", "grpo,nope"], "unknown credit variant 'nope'"),
        (["--seeds", "2"], "--seeds applies to bench learning only"),
    ],
)
def test_bad_options_exit_2_with_one_line(args, message):
    result = cli("bench", "credit", "--quick", *args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_same_seed_gives_the_same_measurement(tmp_path):
    """A checkpoint policy samples from torch's generator: the bench seeds it."""
    import torch

    from agentgym.baselines.policies.agent import save_policy_checkpoint
    from agentgym.baselines.policies.tiny import TinyPolicy

    env_id = "agentgym/Credit-Chain-v0"
    torch.manual_seed(3)
    tokenizer = train_tokenizer(collect_env_text(env_id, episodes=5), 600)
    save_policy_checkpoint(TinyPolicy.from_preset("nano", tokenizer), tmp_path / "ckpt")
    docs = [
        bench_credit.run(
            Console(quiet=True),
            quick=True,
            env=env_id,
            variants=("grpo", "gigpo", "tsbpo"),
            checkpoint=str(tmp_path / "ckpt"),
        )
        for _ in range(2)
    ]
    rows = [  # JSON text: NaN (no batch noise for an own sampler) equals itself there
        json.dumps([{k: v for k, v in r.items() if "seconds" not in k} for r in doc["rows"]])
        for doc in docs
    ]
    assert rows[0] == rows[1]
    assert docs[0]["truth"]["kind"] == "monte carlo"  # a trained policy's values are not stated
