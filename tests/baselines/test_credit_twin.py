"""Twin-world credit: keyed twins of selected turns, Horvitz–Thompson weights, added to A."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.credit import twin as twin_module
from agentgym.baselines.credit.twin import (
    CREDIT,
    INDEPENDENT,
    KEY,
    PROB,
    ht_credit,
    inclusion_probabilities,
)
from agentgym.baselines.rollout import EnvPool, RolloutConfig
from agentgym.core.errors import BadInput

KEYDOOR = "agentgym/Credit-KeyDoor-v0"
Twin = get("twin")


# ---------------------------------------------------------------------- formulas by hand
def test_inclusion_probabilities_fill_the_budget_and_cap_at_one():
    # c·w with Σ = 2 over w = (1, 1, 2): (0.5, 0.5, 1.0), nothing over one
    np.testing.assert_allclose(
        inclusion_probabilities(np.array([1.0, 1.0, 2.0]), 2.0), [0.5, 0.5, 1]
    )
    # w = (1, 9), budget 1.5: (0.15, 1.35) caps the second at 1, the first takes the 0.5 left
    np.testing.assert_allclose(inclusion_probabilities(np.array([1.0, 9.0]), 1.5), [0.5, 1.0])
    # a zero weight gets the floor; a budget of every turn selects every turn
    np.testing.assert_allclose(inclusion_probabilities(np.array([0.0, 1.0]), 1.0, 0.1), [0.1, 1])
    np.testing.assert_allclose(inclusion_probabilities(np.array([3.0, 1.0]), 2.0), [1.0, 1.0])


def test_horvitz_thompson_is_unbiased_for_each_turn():
    # E[1[selected] · Â / π] = π · Â / π + (1 − π) · 0 = Â
    for credit, prob in [(0.7, 0.25), (-1.0, 0.05), (0.0, 1.0)]:
        expected = prob * ht_credit(credit, True, prob) + (1 - prob) * ht_credit(
            credit, False, prob
        )
        assert expected == pytest.approx(credit)
    assert ht_credit(0.5, False, 0.2) == 0.0


def _turn(n=2):
    return Turn(torch.zeros(3, dtype=torch.long), torch.ones(n, dtype=torch.long))


def _traj(outcome, turns=2, group="g"):
    t = Trajectory("task", group, 0, turns=[_turn() for _ in range(turns)], outcome=outcome)
    t.node_id = f"{group}:{outcome}:{id(t)}"
    return t


def test_shape_adds_the_scaled_ht_term_to_the_slot_advantage_by_hand():
    a, b = _traj(1.0), _traj(0.0)
    # rollout a: turn 0 twinned with π = 0.5 and Â = 1, turn 1 not selected (π = 0.25)
    a.turns[0].extras.update({PROB: 0.5, CREDIT: 1.0})
    a.turns[1].extras[PROB] = 0.25
    # rollout b: turn 1 twinned with π = 1 and Â = −1
    b.turns[0].extras[PROB] = 0.5
    b.turns[1].extras.update({PROB: 1.0, CREDIT: -1.0})
    twin = _traj(0.0)
    twin.auxiliary = True
    batch = Batch(trajectories=[a, b, twin])
    plan = compose("grpo+twin", {"twin": {"omega": 0.5}})
    plan.run("advantages", batch, StepContext())
    assert (2, 0) not in batch.advantages  # no group holds the twin: GRPO gives it no key
    before = {k: v.clone() for k, v in batch.advantages.items()}
    plan.run("shape", batch, StepContext())
    # Â^HT = (2, 0, 0, −1); unbiased std over the four turns
    ht = np.array([2.0, 0.0, 0.0, -1.0])
    sigma = ht.std(ddof=1)
    for key, value in zip([(0, 0), (0, 1), (1, 0), (1, 1)], ht, strict=True):
        want = before[key] + 0.5 * value / sigma
        torch.testing.assert_close(batch.advantages[key], want)
    assert set(batch.advantages) == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_twin_credit_is_the_return_difference_from_the_turn_on(monkeypatch):
    """Two two-turn rollouts: the twins' returns are set, Â_t = G_t(τ) − mean_j G_t(τ′_j)."""
    a, b = _traj(1.0), _traj(0.0)
    a.turns[0].reward = 0.25  # G_0(a) = 1.25, G_1(a) = 1.0
    a.extras[KEY], b.extras[KEY] = 7, 8  # the sampler gives each rollout its own key
    batch = Batch(trajectories=[a, b])
    made = []

    def branch(policy, pool, parents, m, cfg, *, gumbel_keys, env_keys, first_keys):
        assert gumbel_keys == env_keys == [p.extras[KEY] for p, _ in parents for _ in range(m)]
        assert len(set(first_keys)) == len(first_keys)  # a fresh key for each twin's first draw
        out = []
        for parent, k in parents:
            for j in range(m):
                # twin j of a turn: a return of 0.5 · j from there
                kid = Trajectory(
                    "task", parent.group_id, 0, turns=list(parent.turns), outcome=0.5 * j
                )
                kid.turns = [*parent.turns[:k], *[_turn() for _ in parent.turns[k:]]]
                kid.branch_turn = k
                out.append(kid)
        made.extend(out)
        return out

    monkeypatch.setattr(twin_module, "branch", branch)
    variant = Twin({"twin": {"budget": 1.0, "m": 2}})
    ctx = StepContext(
        policy=object(),
        envs=object(),
        rollout=RolloutConfig(),
        rng=np.random.default_rng(0),
    )
    variant.twin(batch, ctx)
    # every turn selected (budget 1.0): twins' mean return from the turn is (0 + 0.5) / 2
    assert a.turns[0].extras[CREDIT] == pytest.approx(1.25 - 0.25)
    assert a.turns[1].extras[CREDIT] == pytest.approx(1.0 - 0.25)
    assert b.turns[0].extras[CREDIT] == pytest.approx(-0.25)
    assert all(t.extras[PROB] == 1.0 for t in (*a.turns, *b.turns))
    assert len(made) == 8 and all(t.auxiliary for t in made)
    assert batch.trajectories[2:] == made and batch.metrics["twin/rollouts"] == 8
    assert len(batch.groups()["g"]) == 2  # twins belong to no group
    # discordance of turn 0 (depth bin 0): a's twins return 0 and 0.5 against 1.25 (both
    # differ), b's return 0 and 0.5 against 0 (one differs): 3 of 4
    assert variant.predicted_discordance()[0] == pytest.approx(0.75)
    assert variant.predicted_discordance()[1] == 0.5  # no turn in bin 1: the prior


# ---------------------------------------------------------------------- on a real env
def _keydoor_step(budget=0.5, independent=True, seed=0):
    from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
    from agentgym.baselines.policies.uniform import UniformPolicy

    tokenizer = train_tokenizer(collect_env_text(KEYDOOR, episodes=5), 600)
    plan = compose("grpo+twin", {"twin": {"budget": budget, "independent": independent}})
    ctx = StepContext(
        tasks_per_step=4,
        group_size=4,
        policy=UniformPolicy(tokenizer, seed=seed),
        envs=EnvPool(KEYDOOR, 2),
        rollout=RolloutConfig(),
        rng=np.random.default_rng(seed),
    )
    batch = Batch()
    for hook in ("sample", "advantages", "shape"):
        plan.run(hook, batch, ctx)
    return batch


def test_a_twin_that_draws_the_same_action_replays_its_rollout_exactly():
    batch = _keydoor_step()
    originals = {t.node_id: t for t in batch.trajectories if not t.auxiliary}
    twins = [t for t in batch.trajectories if t.auxiliary and not t.extras.get(INDEPENDENT)]
    same = 0
    for twin in twins:
        parent, k = originals[twin.twin_of], twin.branch_turn
        assert twin.turns[k].state_key == parent.turns[k].state_key  # restored there
        if twin.turns[k].extras["action"] == parent.turns[k].extras["action"]:
            same += 1
            actions = [t.extras["action"] for t in twin.turns]
            assert actions == [t.extras["action"] for t in parent.turns]
            assert twin.outcome == parent.outcome
    assert same > 0 and len(twins) == batch.metrics["twin/selected"]
    independent = [t for t in batch.trajectories if t.extras.get(INDEPENDENT)]
    assert len(independent) == len(twins) and "twin/var_ratio" in batch.metrics
    # only the original rollouts are trained on
    assert {i for i, _ in batch.advantages} == {
        i for i, t in enumerate(batch.trajectories) if not t.auxiliary
    }


def test_the_same_seed_gives_the_same_twins():
    one, two = _keydoor_step(independent=False), _keydoor_step(independent=False)
    credit = [[t.extras.get(CREDIT) for t in tr.turns] for tr in one.trajectories]
    assert credit == [[t.extras.get(CREDIT) for t in tr.turns] for tr in two.trajectories]


# ---------------------------------------------------------------------- refusals and the CLI
class NoRngEnv(gym.Env):
    """Snapshots, but no keyed env-side noise."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)
    supports_snapshot = True

    def snapshot(self):
        return b""

    def restore(self, snapshot):
        pass


def test_an_env_without_set_rng_or_snapshots_is_refused_by_name():
    with pytest.raises(BadInput) as e:
        compose("grpo+twin").check(NoRngEnv())
    assert "twin" in str(e.value) and "set_rng" in str(e.value)
    with pytest.raises(BadInput, match="budget"):
        Twin({"twin": {"budget": 0.0}})


def test_cli_trains_grpo_plus_twin_and_counts_the_twins_tokens(tmp_path):
    out = tmp_path / "run"
    args = ["--env", "agentgym/Search-Menu-Small-v0", "--credit", "grpo+twin"]
    settings = '{"twin": {"budget": 1.0}}'
    r = cli(
        "train",
        *TINY_RUN,
        *args,
        "--credit-settings",
        settings,
        "--preset",
        "nano",
        "--max-len",
        "2048",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    row = rl_rows(out)[-1]
    assert float(row["twin/selected"]) > 0 and float(row["twin/rollouts"]) > 0
