"""Fixtures shared by the trainer's tests: one intra-op thread and a nano policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and do not fight other test workers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def policy() -> TinyPolicy:
    """An untrained nano policy whose tokenizer is fitted to Search-Menu-Small; its context
    holds a whole concatenated episode."""
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(SMALL, episodes=10), vocab_size=600)
    return TinyPolicy.from_preset("nano", tokenizer, max_len=4096)


def oracle_trajectory(tokenizer, env_id, task, seed, group):
    """A winning rollout of ``env_id``'s oracle, tokenized like the policy's turns (each
    turn records its action and the state key it acted from)."""
    import gymnasium as gym

    from agentgym.baselines.credit import Trajectory, Turn

    env = gym.make(env_id)
    _, info = env.reset(seed=seed, options={"task_id": task})
    out = Trajectory(task, group, seed)
    done = False
    while not done:
        action = env.unwrapped.oracle_action()
        state = info["state_key"]
        _, reward, terminated, truncated, info = env.step(action)
        ids = torch.tensor([*tokenizer.encode(action), tokenizer.eos_id])
        out.turns.append(
            Turn(torch.arange(2), ids, state_key=state, info=info, extras={"action": action})
        )
        done = terminated or truncated
    out.outcome, out.terminated = float(reward), True
    return out


@pytest.fixture
def oracle_rollout():
    """:func:`oracle_trajectory`, for tests that add a winning rollout to a group."""
    return oracle_trajectory


CHAIN = "agentgym/Credit-Chain-v0"


class EndorsingTeacher:
    """A policy whose privileged view knows the best action: after a prompt naming
    ``"Best action now: X."`` (Credit-Chain's privileged text) the logit of every sampled
    token moves by ``+shift`` when the response is X, by ``−shift`` when it is not; on any
    other prompt (the policy's own) it is the wrapped policy."""

    def __init__(self, policy, shift: float = 8.0):
        self.policy, self.shift = policy, shift

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def best_action(self, prompt) -> str | None:
        import re

        found = re.search(r"Best action now: (.+?)\.", self.policy.tokenizer.decode(list(prompt)))
        return None if found is None else found.group(1)

    def said(self, response) -> str:
        tok = self.policy.tokenizer
        return tok.decode([int(t) for t in response if int(t) != tok.eos_id]).strip()

    def response_logits(self, prompts, responses, *, grad=False):
        out = []
        logits = self.policy.response_logits(prompts, responses, grad=grad)
        for p, r, lg in zip(prompts, responses, logits, strict=True):
            best = self.best_action(p)
            if best is not None:
                sign = 1.0 if self.said(r) == best else -1.0
                bump = torch.zeros_like(lg)
                bump[torch.arange(len(r)), torch.as_tensor(r, dtype=torch.long)] = sign * self.shift
                lg = lg + bump
            out.append(lg)
        return out


@pytest.fixture(scope="module")
def chain_rollouts():
    """A nano policy fitted to Credit-Chain, its endorsing teacher and a batch of 4 groups
    of 4 rollouts on the privileged env (menu decoding): some won, most lost."""
    from agentgym.baselines.batch import Batch
    from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect

    torch.manual_seed(0)
    tok = train_tokenizer(collect_env_text(CHAIN, episodes=10), vocab_size=400)
    policy = TinyPolicy.from_preset("nano", tok, max_len=2048)
    pool = EnvPool(CHAIN, 16, split="train", privileged=True)
    ids = pool.envs[0].unwrapped.task_ids()
    torch.manual_seed(0)
    trajs = collect(policy, pool, [(ids[i], i) for i in range(4)], 4, RolloutConfig())
    return policy, EndorsingTeacher(policy), Batch(trajs)
