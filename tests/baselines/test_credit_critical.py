"""Critical-state RL: nested samples at candidate turns, the ANOVA estimate, local RL."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows

from agentgym.baselines.credit import Batch, StepContext, compose, get
from agentgym.baselines.credit.critical import ADVANTAGE, V_ACT, anova
from agentgym.baselines.rollout import EnvPool, RolloutConfig
from agentgym.core.errors import BadInput

KEYDOOR = "agentgym/Credit-KeyDoor-v0"
Critical = get("critical")


# ---------------------------------------------------------------------- the ANOVA by hand
def test_anova_worked_by_hand():
    # n = 2 actions, m = 2 continuations: returns (1, 0) and (0, 0)
    # Ḡ = (0.5, 0), grand 0.25; S²_b = ((0.25)² + (0.25)²) / 1 = 0.125
    # S²_w = ((0.5)² + (0.5)² + 0 + 0) / (2 · 1) = 0.25; V_act = 0.125 − 0.25 / 2 = 0
    r = anova(np.array([[1.0, 0.0], [0.0, 0.0]]))
    assert r.means == [0.5, 0.0] and r.grand == pytest.approx(0.25)
    assert r.between == pytest.approx(0.125) and r.within == pytest.approx(0.25)
    assert r.v_act == pytest.approx(0.0)
    # a decisive state: action 1 always wins, action 2 always loses, no noise
    # Ḡ = (1, 0): S²_b = 0.5, S²_w = 0, V_act = 0.5 = Var_a Q (unbiased, n − 1)
    r = anova(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    assert r.v_act == pytest.approx(0.5) and r.within == 0.0
    # an indifferent state: both actions win half the time; V_act is negative
    r = anova(np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert r.between == 0.0 and r.v_act == pytest.approx(-0.25)
    with pytest.raises(ValueError, match="n, m >= 2"):
        anova(np.array([[1.0, 0.0]]))


def test_anova_is_unbiased_for_the_variance_of_action_values():
    # Q = (0.2, 0.8): Var_a Q (n − 1 denominator) = 0.18; Bernoulli returns, m = 4
    rng = np.random.default_rng(0)
    q = np.array([0.2, 0.8])
    draws = [anova((rng.random((2, 4)) < q[:, None]).astype(float)).v_act for _ in range(20000)]
    assert np.mean(draws) == pytest.approx(0.18, abs=0.01)


def test_selection_by_threshold_and_by_top_q():
    v = [0.3, -0.1, 0.05, 0.2]
    assert Critical({"critical": {"select": "threshold", "tau": 0.1}}).select(v) == {0, 3}
    assert Critical({"critical": {"select": "topq", "q": 0.5}}).select(v) == {0, 3}
    assert Critical({"critical": {"select": "topq", "q": 1.0}}).select(v) == {0, 2, 3}  # > 0
    assert Critical({"critical": {"select": "topq", "q": 0.1}}).select([-1.0, -2.0]) == set()


# ---------------------------------------------------------------------- on a real env
def _keydoor(prefilter="entropy", **settings):
    from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
    from agentgym.baselines.policies.uniform import UniformPolicy

    tokenizer = train_tokenizer(collect_env_text(KEYDOOR, episodes=5), 600)
    plan = compose("critical", {"critical": {"prefilter": prefilter, **settings}})
    ctx = StepContext(
        tasks_per_step=2,
        group_size=4,
        policy=UniformPolicy(tokenizer, seed=0),
        envs=EnvPool(KEYDOOR, 2),
        rollout=RolloutConfig(),
        rng=np.random.default_rng(0),
    )
    batch = Batch()
    for hook in ("sample", "advantages"):
        plan.run(hook, batch, ctx)
    return plan, batch


@pytest.mark.parametrize("prefilter", ["entropy", "bucket", "random"])
def test_only_the_action_responses_of_trained_occurrences_get_a_loss(prefilter):
    plan, batch = _keydoor(prefilter, n=3, m=2, candidates=2, select="threshold", tau=-1.0)
    assert plan.names == ["critical"]
    originals = [t for t in batch.trajectories if not t.auxiliary]
    nested = [t for t in batch.trajectories if t.auxiliary]
    candidates = int(batch.metrics["critical/candidates"])
    assert 1 <= candidates <= 2 and len(originals) == 8
    assert len(nested) == candidates * 3 * 2  # n · m continuations per candidate
    # tau = −1 trains every candidate: the rollout's own turn and the n − 1 fresh draws
    assert len(batch.advantages) == candidates * 3
    for (i, k), adv in batch.advantages.items():
        turn = batch.trajectories[i].turns[k]
        assert not turn.extras.get("shared")
        assert adv.shape == turn.response_ids.shape and torch.isfinite(adv).all()
        assert float(adv[0]) == pytest.approx(turn.extras[ADVANTAGE])
    # each occurrence's A_j = Ḡ_j − Ḡ sums to zero over its n actions
    assert sum(float(a[0]) for a in batch.advantages.values()) == pytest.approx(0.0, abs=1e-6)
    assert sum(V_ACT in t.extras for tr in originals for t in tr.turns) == candidates


def test_a_high_threshold_trains_nothing():
    _, batch = _keydoor(n=2, m=2, candidates=1, select="threshold", tau=10.0)
    assert batch.advantages == {} and batch.metrics["critical/trained"] == 0


class NoSnapshotEnv(gym.Env):
    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)
    supports_snapshot = False


def test_refusals():
    with pytest.raises(BadInput, match="critical needs the env ability 'snapshot'"):
        compose("critical").check(NoSnapshotEnv())
    with pytest.raises(BadInput, match="advantages"):
        compose("grpo+critical")  # it owns the advantages slot and stands alone
    with pytest.raises(BadInput, match="n and m"):
        Critical({"critical": {"m": 1}})


def test_cli_trains_critical_from_its_nested_samples(tmp_path):
    out = tmp_path / "run"
    settings = '{"critical": {"n": 2, "m": 2, "candidates": 2, "select": "threshold", "tau": -1}}'
    args = ["--env", "agentgym/Search-Menu-Small-v0", "--credit", "critical"]
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
    assert float(row["critical/candidates"]) == 2 and float(row["critical/rollouts"]) == 8
    assert float(row["critical/trained_samples"]) == 4
