"""TRACE: the reference's belief in the gold answer, as the share of the gap to the gold
evidence closed, TD-backed up and added to the outcome advantage."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.credit.trace import (
    ANCHORS,
    VALUE,
    gap_closure,
    reduce_logp,
    td_backup,
    td_scale,
)
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect, pick_tasks, replay
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
Trace = get("trace")


# ---------------------------------------------------------------------- formulas by hand
def test_gap_closure_by_hand_clipped_and_guarded():
    # ℓ0 = -4, ℓ⁺ = -2: the gap is 2
    assert gap_closure(-3.0, -4.0, -2.0, 1e-6) == pytest.approx(0.5)
    assert gap_closure(-2.5, -4.0, -2.0, 1e-6) == pytest.approx(0.75)
    assert gap_closure(-5.0, -4.0, -2.0, 1e-6) == 0.0  # below h_0: clipped
    assert gap_closure(-1.0, -4.0, -2.0, 1e-6) == 1.0  # above h⁺: clipped
    # evidence that does not raise the belief: no gap to close, V = 0
    assert gap_closure(-1.0, -2.0, -2.0, 1e-6) == 0.0
    assert gap_closure(-1.0, -2.0, -3.0, 1e-6) == 0.0


def test_reduce_mean_and_sum():
    lp = torch.tensor([-1.0, -2.0, -3.0])
    assert reduce_logp(lp, "mean") == pytest.approx(-2.0)
    assert reduce_logp(lp, "sum") == pytest.approx(-6.0)


def test_td_backup_k1_terminal_is_the_outcome():
    V = [0.0, 0.5, 0.5, 1.0]
    # A_k = V_{k+1} - V_k; after the last turn the target is R = 1
    assert td_backup(V, 1.0, 1, 1.0) == pytest.approx([0.5, 0.0, 0.5, 0.0])
    # a failure: the last turn's target is R = 0
    assert td_backup(V, 0.0, 1, 1.0) == pytest.approx([0.5, 0.0, 0.5, -1.0])
    # γ = 0.5: γ V_{k+1} - V_k, and γ^1 R at the end
    assert td_backup(V, 1.0, 1, 0.5) == pytest.approx([0.25, -0.25, 0.0, -0.5])


def test_td_backup_k2_cut_at_the_terminal():
    V = [0.0, 0.5, 0.5, 1.0]
    # A_k = γ² V_{k+2} − V_k; k = 2, 3: target past the end = γ^{n−k} R
    assert td_backup(V, 1.0, 2, 1.0) == pytest.approx([0.5, 0.5, 0.5, 0.0])
    assert td_backup(V, 1.0, 2, 0.5) == pytest.approx(
        [0.25 * 0.5 - 0.0, 0.25 * 1.0 - 0.5, 0.25 * 1.0 - 0.5, 0.5 * 1.0 - 1.0]
    )


def test_td_scale():
    assert td_scale([1.0, -1.0], "std", 1e-6) == pytest.approx(2**0.5)
    assert td_scale([1.0, -1.0], "none", 1e-6) == 1.0
    assert td_scale([0.3, 0.3], "std", 1e-6) == 1.0  # no spread: left as is
    assert td_scale([0.3], "std", 1e-6) == 1.0


class Scripted:
    """A reference whose ℓ is set by the probe's context: ``ell[context]`` per answer token
    (so "mean" gives ``ell[context]``, "sum" twice that for the 2-token answer)."""

    class Tok:
        eos_id = 1

        def encode(self, text):
            return [ord(c) for c in text]

    def __init__(self, ell):
        self.tokenizer = self.Tok()
        self.ell = ell
        self.calls = 0

    def logprobs(self, prompts, responses):
        self.calls += 1
        out = []
        for p, r in zip(prompts, responses, strict=True):
            text = "".join(chr(c) for c in p.tolist())
            value = next(v for key, v in self.ell.items() if text.startswith(key))
            out.append(torch.full((len(r),), value))
        return out


def scripted_batch():
    """Two rollouts of one group: observations "o0", "o1", ... are the turns' prompts."""

    def traj(obs, outcome, node):
        turns = []
        for o in obs:
            ids = torch.tensor([ord(c) for c in o])
            info = {"gold_answer": "YZ", "gold_evidence": ["E"]}
            extras = {"observation": obs[0], "privileged_context": "E"}
            turns.append(Turn(ids, torch.tensor([5, 1]), info=info, extras=extras))
        return Trajectory("t", "g", 0, turns, outcome=outcome, terminated=True, node_id=node)

    return Batch(trajectories=[traj(["a", "b", "c"], 1.0, "0"), traj(["a", "d"], 0.0, "1")])


# ℓ: h_0 = "a" -4, h⁺ = "E\na" -2; "b" -3 (V .5), "c" -2.5 (V .75), "d" -5 (V 0)
ELL = {"E\n": -2.0, "a": -4.0, "b": -3.0, "c": -2.5, "d": -5.0}


def test_values_td_and_final_advantage_by_hand():
    batch = scripted_batch()
    ref = Scripted(ELL)
    plan = compose("grpo+trace", {"trace": {"lam": 0.5}})
    ctx = StepContext(policy=ref, ref=ref)
    for hook in ("score", "advantages", "shape"):
        plan.run(hook, batch, ctx)
    assert ref.calls == 1  # every probe in one reference forward
    assert batch.metrics["trace/probes"] == 5  # h_0 and h⁺ shared by the group
    values = [[t.extras[VALUE] for t in traj.turns] for traj in batch.trajectories]
    assert values == [pytest.approx([0.0, 0.5, 0.75]), pytest.approx([0.0, 0.0])]
    assert batch.trajectories[0].extras[ANCHORS] == pytest.approx((-4.0, -2.0))
    # K = 1, γ = 1: [0.5, 0.25, 1 − 0.75] and [0 − 0, 0 − 0]
    td = [0.5, 0.25, 0.25, 0.0, 0.0]
    std = float(torch.tensor(td).std())
    grpo = [2**-0.5] * 3 + [-(2**-0.5)] * 2  # z-scores of R = (1, 0), unbiased std
    keys = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    for key, g, a in zip(keys, grpo, td, strict=True):
        expected = g + 0.5 * a / std
        assert batch.advantages[key].tolist() == pytest.approx([expected, expected], abs=1e-5)


def test_sum_reduce_k2_no_norm_and_degenerate_gap():
    batch = scripted_batch()
    ref = Scripted(ELL)
    cfg = {"trace": {"k": 2, "norm": "none", "lam": 1.0, "reduce": "sum"}}
    plan = compose("grpo+trace", cfg)
    ctx = StepContext(policy=ref, ref=ref)
    for hook in ("advantages", "shape"):  # shape probes by itself when score did not run
        plan.run(hook, batch, ctx)
    # sum over the 2-token answer doubles every ℓ: V is a ratio, unchanged;
    # K = 2: [V2 − V0, R − V1, R − V2]
    td0 = [0.75, 0.5, 0.25]
    for k, a in enumerate(td0):
        assert batch.advantages[(0, k)][0].item() == pytest.approx(2**-0.5 + a, abs=1e-5)
    # the evidence does not help: every V is 0, TD carries the outcome only
    batch = scripted_batch()
    ref = Scripted({**ELL, "E\n": -4.5})
    plan = compose("trace", {"trace": {"norm": "none", "lam": 1.0}})
    for hook in ("advantages", "shape"):
        plan.run(hook, batch, StepContext(policy=ref, ref=ref))
    assert batch.metrics["trace/degenerate_rollouts"] == 2
    assert all(t.extras[VALUE] == 0.0 for traj in batch.trajectories for t in traj.turns)
    assert batch.advantages[(0, 2)][0].item() == pytest.approx(2**-0.5 + 1.0)  # R − 0


def test_bad_settings_refused():
    for bad in ({"norm": "mad"}, {"reduce": "max"}, {"k": 0}, {"gamma": 0.0}, {"lam2": 1}):
        with pytest.raises(BadInput):
            Trace({"trace": bad})


# ---------------------------------------------------------------------- real rollouts
def test_values_in_unit_interval_on_real_rollouts(policy):
    pool = EnvPool(SMALL, 4, privileged=True)
    tasks = pick_tasks(pool, 2, np.random.default_rng(0))
    batch = Batch(trajectories=collect(policy, pool, tasks, 2, RolloutConfig(max_new_tokens=16)))
    plan = compose("grpo+trace")
    ctx = StepContext(policy=policy, ref=policy)
    for hook in ("score", "advantages", "shape"):
        plan.run(hook, batch, ctx)
    values = [t.extras[VALUE] for traj in batch.trajectories for t in traj.turns]
    assert values and all(0.0 <= v <= 1.0 for v in values)
    assert batch.metrics["trace/probes"] >= 2 * len(tasks)
    assert set(batch.advantages) == set(batch.keys())


class EvidenceReader:
    """A reference that believes the answer as much as the gold evidence its context shows:
    ℓ = −(1 + gold items missing), per answer token. An item is shown by its sentence's text
    (the Notes of an observation) or its gold fact line (what h⁺ puts first)."""

    def __init__(self, policy, items):
        self.tokenizer = policy.tokenizer
        self.items = items

    def logprobs(self, prompts, responses):
        out = []
        for p, r in zip(prompts, responses, strict=True):
            missing = len(self.items) - self.shown(p)
            out.append(torch.full((len(r),), -1.0 - missing))
        return out

    def shown(self, ids):
        text = _squash(self.tokenizer.decode(ids.tolist()))
        return sum(any(_squash(x) in text for x in item) for item in self.items)


def _squash(text):
    return "".join(text.lower().split())


def _oracle_actions(task, seed):
    env = gym.make(SMALL)
    env.reset(seed=seed, options={"task_id": task})
    actions, done = [], False
    while not done:
        actions.append(env.unwrapped.oracle_action())
        *_, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    return actions


def test_turns_that_reveal_evidence_get_the_larger_td(policy):
    """A reference whose ℓ counts the gold lines in view: on the oracle's replayed rollouts
    (winning, so GRPO gives every turn 0) plus the nano policy's own, the turns after which
    a gold line appears get a positive TD term, every other non-final turn 0 or less."""
    pool = EnvPool(SMALL, 2, privileged=True)
    task, seed = pick_tasks(pool, 1, np.random.default_rng(3))[0]
    cfg = RolloutConfig(max_new_tokens=16)
    actions = _oracle_actions(task, seed)
    trajs = [replay(policy, pool, task, seed, actions, cfg, node_id=f"o{j}") for j in range(2)]
    trajs += collect(policy, pool, [(task, seed)], 2, cfg)
    batch = Batch(trajectories=trajs)
    chain = list(trajs[0].turns[0].info["gold_facts"])  # what h⁺ puts first
    sentences = pool.envs[0].unwrapped._data.world.sentences
    gold = [sentences[s].text.rstrip(".") for s in trajs[0].turns[0].info["gold_evidence"]]
    ref = EvidenceReader(policy, list(zip(chain, gold, strict=True)))
    plan = compose("grpo+trace")
    for hook in ("score", "advantages", "shape"):
        plan.run(hook, batch, StepContext(policy=policy, ref=ref))
    td = plan.variants[-1].td(batch)
    revealing, other = [], []
    for i, traj in enumerate(trajs):
        for k in range(len(traj.turns) - 1):
            before = ref.shown(traj.turns[k].prompt_ids)
            after = ref.shown(traj.turns[k + 1].prompt_ids)
            (revealing if after > before else other).append(td[(i, k)])
    assert len(revealing) >= len(chain)  # the oracle reads every gold line
    assert min(revealing) > 0.0 >= max(other)
    assert min(revealing) > max(other)
    # winning oracle group members: GRPO's term cancels, what is left is TRACE's
    assert trajs[0].outcome == 1.0
    first_read = next(k for k in range(len(actions)) if td[(0, k)] > 0)
    assert batch.advantages[(0, first_read)].abs().sum() > 0


# ---------------------------------------------------------------------- fit and CLI
@pytest.mark.parametrize(
    "env_id",
    [
        "agentgym/Credit-KeyDoor-v0",
        "agentgym/Credit-Chain-v0",
        "agentgym/Credit-Haystack-v0",
        "agentgym/Tools-Ecommerce-v0",
        "agentgym/ALFWorld-Small-v0",
    ],
)
def test_envs_without_gold_answer_and_evidence_are_refused(env_id):
    with pytest.raises(BadInput) as e:
        compose("grpo+trace").check(gym.make(env_id, privileged=True))
    assert "trace needs info keys" in str(e.value) and "gold_evidence" in str(e.value)


def test_the_search_env_fits():
    compose("grpo+trace").check(gym.make(SMALL, privileged=True))


def _train(*args):
    return cli("train", *TINY_RUN, *args)


def test_cli_trains_one_step_with_the_tiny_policy(tmp_path):
    out = tmp_path / "run"
    settings = '{"trace": {"k": 2}}'
    args = ["--env", SMALL, "--credit", "grpo+trace", "--credit-settings", settings]
    r = _train(*args, "--preset", "nano", "--max-len", "2048", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert _probes(out) > 0


def test_cli_trains_one_step_with_an_hf_model(tmp_path):
    from hf_model import write_hf_model

    from agentgym.baselines.policies.tokenizer import collect_env_text

    model = write_hf_model(tmp_path / "m", collect_env_text(SMALL, episodes=4))
    args = ["--env", SMALL, "--credit", "grpo+trace", "--policy", str(model)]
    r = _train(*args, "--max-new-tokens", "8", "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert _probes(tmp_path / "run") > 0


def _probes(out):
    """The reference probes the run's last step made (its metrics.csv)."""
    return float(rl_rows(out)[-1]["trace/probes"])


def test_cli_refuses_a_misfitting_env_with_exit_2_and_one_line(tmp_path):
    env = "agentgym/Credit-KeyDoor-v0"
    r = _train("--env", env, "--credit", "grpo+trace", "--out", str(tmp_path / "run"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "trace needs info keys" in lines[0] and env in lines[0]
