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
