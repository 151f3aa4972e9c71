"""TACO: differential answer probes around each call (DAPR) and outcome-gated routing (OGAR)."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.credit.taco import SCORES, UTILITY, call_utility, ogar_keep
from agentgym.baselines.policies.base import GenOut
from agentgym.baselines.rollout import EnvPool, RolloutConfig, replay
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
Taco = get("taco")


# ---------------------------------------------------------------------- tables by hand
def test_the_probe_utility_table():
    # Score(before), Score(after) -> u: useful, redundant, misleading
    assert call_utility(0.0, 1.0) == 1.0
    assert call_utility(1.0, 1.0) == 0.0 and call_utility(0.0, 0.0) == 0.0
    assert call_utility(1.0, 0.0) == -1.0
    assert call_utility(0.2, 0.5) == 1.0  # a partial (token F1) gain is still useful
    assert call_utility(0.2, 0.5, "diff") == pytest.approx(0.3)


def test_the_ogar_routing_table():
    # the answer always keeps the outcome advantage; a call only when u agrees in sign
    assert ogar_keep("answer", 1.0, 0.0) and ogar_keep("answer", -1.0, 0.0)
    assert ogar_keep("call", 1.0, 1.0) and not ogar_keep("call", 1.0, -1.0)
    assert ogar_keep("call", -1.0, -1.0) and not ogar_keep("call", -1.0, 1.0)
    assert not ogar_keep("call", 1.0, 0.0) and not ogar_keep("call", -1.0, 0.0)  # redundant
    assert not ogar_keep("other", 1.0, 1.0)


def _turn(tags, u=None):
    t = Turn(torch.zeros(2, dtype=torch.long), torch.ones(len(tags), dtype=torch.long))
    t.segment_tags = list(tags)
    if u is not None:
        t.extras[UTILITY] = u
    return t


def test_shape_routes_the_outcome_and_adds_dapr_on_call_spans_by_hand():
    call, answer = ["tool_call", "tool_call", ""], ["answer", "answer"]
    # rollout a (won): a useful call, a redundant call, the answer
    a = Trajectory("t", "g", 0, turns=[_turn(call, 1.0), _turn(call, 0.0), _turn(answer)])
    # rollout b (lost): a misleading call, the answer
    b = Trajectory("t", "g", 0, turns=[_turn(call, -1.0), _turn(answer)])
    a.outcome, b.outcome = 1.0, 0.0
    batch = Batch(trajectories=[a, b])
    plan = compose("grpo+taco", {"taco": {"lam": 1.0}})
    plan.run("advantages", batch, StepContext())
    won = float(batch.advantages[(0, 0)][0])  # GRPO's z-score of (1, 0): 1/√2
    assert won == pytest.approx(1 / np.sqrt(2), abs=1e-5)
    A = won
    plan.run("shape", batch, StepContext())
    # the group's utilities (1, 0, −1): mean 0, std 1 -> z = (1, 0, −1)
    want = {
        (0, 0): [A + 1.0, A + 1.0, A],  # useful call: keeps A, +1 on its call tokens
        (0, 1): [0.0, 0.0, 0.0],  # redundant: no outcome credit, z = 0
        (0, 2): [A, A],  # the answer keeps A
        (1, 0): [-A - 1.0, -A - 1.0, -A],  # misleading call of a loss: keeps −A, −1 on calls
        (1, 1): [-A, -A],
    }
    for key, values in want.items():
        torch.testing.assert_close(batch.advantages[key], torch.tensor(values), atol=1e-5, rtol=0)


class KnowingPolicy:
    """Answers the gold answer once the prompt shows it, else "nothing": a policy whose probe
    scores are known (the call that first reveals the answer is the useful one)."""

    def __init__(self, policy, gold):
        self.policy, self.gold, self.prompts = policy, gold, []

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def generate(self, prompts, *, max_new_tokens, greedy=False, **kw):
        self.prompts += prompts
        assert greedy  # probes take the policy's best answer
        texts = [self.gold if self.gold in self.tokenizer.decode(p) else "nothing" for p in prompts]
        return [GenOut(ids=[], logps=[], text=t) for t in texts]


def test_the_call_that_reveals_the_answer_is_the_useful_one(policy):
    env = gym.make(SMALL, privileged=True)
    _, info = env.reset(seed=3)
    task, gold = info["task_id"], info["gold_answer"]
    actions, done = [], False
    while not done:
        actions.append(env.unwrapped.oracle_action())
        _, _, term, trunc, _ = env.step(actions[-1])
        done = term or trunc
    pool = EnvPool(SMALL, 1)
    traj = replay(policy, pool, task, 3, actions, RolloutConfig(), score=False)
    knowing = KnowingPolicy(policy, gold)
    batch = Batch(trajectories=[traj])
    Taco().score(batch, StepContext(policy=knowing, envs=pool))
    utilities = [t.extras.get(UTILITY) for t in traj.turns]
    assert utilities[-1] is None  # the answer turn is no call
    revealed = [gold in policy.tokenizer.decode(t.prompt_ids.tolist()) for t in traj.turns]
    first = revealed.index(True)  # the first prompt that shows the answer
    assert utilities[first - 1] == 1.0 and traj.turns[first - 1].extras[SCORES] == (0.0, 1.0)
    assert all(u == 0.0 for j, u in enumerate(utilities[:-1]) if j != first - 1)
    assert batch.metrics["taco/useful"] == 1 and batch.metrics["taco/calls"] == len(actions) - 1
    # probes are deduplicated: one per distinct state around the calls
    assert len(knowing.prompts) == len({tuple(p) for p in knowing.prompts}) == len(actions)


def test_a_misfitting_env_is_refused():
    with pytest.raises(BadInput) as e:
        compose("grpo+taco").check(gym.make("agentgym/Credit-KeyDoor-v0"))
    assert "taco needs" in str(e.value)
    with pytest.raises(BadInput, match="utility"):
        Taco({"taco": {"utility": "ratio"}})


def test_the_tools_family_fits():
    compose("grpo+taco").check(gym.make("agentgym/Tools-Ecommerce-v1", schemas=False))


def test_cli_trains_grpo_plus_taco_and_refuses_a_misfitting_env(tmp_path):
    out = tmp_path / "run"
    args = ["--env", SMALL, "--credit", "grpo+taco", "--preset", "nano", "--max-len", "2048"]
    r = cli("train", *TINY_RUN, *args, "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(rl_rows(out)[-1]["taco/calls"]) > 0
    env = "agentgym/Credit-KeyDoor-v0"
    r = cli("train", *TINY_RUN, "--env", env, "--credit", "grpo+taco", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "taco needs" in lines[0] and env in lines[0]
