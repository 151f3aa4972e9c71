"""Batched multi-turn rollouts: many envs stepped in lockstep, one batched generation per turn.

Layout: per-step samples (CREDIT.md §0 (b)): each turn's prompt is the observation (the search
envs' observations carry the episode's state), its response the generated action. Groups are
G rollouts of the same task and seed. ``terminated`` and ``truncated`` stay apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from agentgym.baselines.credit.batch import Trajectory, Turn
from agentgym.baselines.policies.agent import prompt_ids
from agentgym.baselines.policies.base import Policy
from agentgym.baselines.policies.constrained import decoded_action, encode_actions
from agentgym.registry import make


@dataclass(frozen=True)
class RolloutConfig:
    """How actions are generated."""

    max_new_tokens: int = 48
    """Most tokens per action (eos included)."""
    temperature: float = 1.0
    """Sampling temperature."""
    greedy: bool = False
    """Take the most likely token (evaluation)."""
    constrained: bool = True
    """Decode only menu/admissible actions when the env lists them (invalid rate 0)."""
    invalid_penalty: float = 0.1
    """Reward subtracted from a turn whose action the env rejected."""


class EnvPool:
    """``n`` instances of one env id, reused across training steps."""

    def __init__(self, env_id: str, n: int, **env_kwargs: Any):
        """Make the instances (they share the id's world)."""
        self.env_id = env_id
        self.envs = [make(env_id, **env_kwargs) for _ in range(n)]
        self.supports_snapshot = bool(getattr(self.envs[0].unwrapped, "supports_snapshot", False))

    def __len__(self) -> int:
        return len(self.envs)

    def grow(self, n: int) -> None:
        """Make sure the pool holds at least ``n`` instances."""
        first: Any = self.envs[0].unwrapped
        kwargs = {"split": first.split}
        while len(self.envs) < n:
            self.envs.append(make(self.env_id, **kwargs))


def collect(
    policy: Policy,
    pool: EnvPool,
    tasks: list[tuple[str, int]],
    group_size: int,
    cfg: RolloutConfig,
    *,
    gumbel_keys: list[int] | None = None,
) -> list[Trajectory]:
    """Play ``group_size`` rollouts of each (task_id, seed), all envs advancing together.

    Args:
        policy: generates actions.
        pool: envs (grown to ``len(tasks) * group_size`` if needed).
        tasks: (task id, reset seed) per group.
        group_size: G.
        cfg: generation settings.
        gumbel_keys: per rollout, a key that fixes its sampling noise (twins share a key).

    Returns:
        One trajectory per rollout, groups contiguous, in task order.
    """
    slots = [(task, seed) for task, seed in tasks for _ in range(group_size)]
    pool.grow(len(slots))
    trajs, obs, infos = [], [], []
    for (task, seed), env in zip(slots, pool.envs, strict=False):
        o, info = env.reset(seed=seed, options={"task_id": task})
        trajs.append(Trajectory(task_id=task, group_id=f"{task}@{seed}", seed=seed))
        obs.append(o)
        infos.append(info)
    active = list(range(len(slots)))
    while active:
        active = _turn(policy, pool, cfg, trajs, obs, infos, active, gumbel_keys)
    return trajs


def _turn(
    policy: Policy,
    pool: EnvPool,
    cfg: RolloutConfig,
    trajs: list[Trajectory],
    obs: list[Any],
    infos: list[dict[str, Any]],
    active: list[int],
    gumbel_keys: list[int] | None,
) -> list[int]:
    """One generation for every active rollout, one env step each; the still-active ones."""
    prompts = [prompt_ids(policy, obs[i]) for i in active]
    choices = [
        encode_actions(policy.tokenizer, infos[i]["admissible_actions"])
        if cfg.constrained and infos[i].get("admissible_actions")
        else None
        for i in active
    ]
    keys = None
    if gumbel_keys is not None:
        keys = [gumbel_keys[i] * 1_000 + len(trajs[i].turns) for i in active]
    outs = policy.generate(
        prompts,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        greedy=cfg.greedy,
        gumbel_keys=keys,
        allowed=[None if c is None else [list(s) for s in c] for c in choices],
    )
    still = []
    for i, prompt, out, choice in zip(active, prompts, outs, choices, strict=True):
        state_key = infos[i].get("state_key")
        o, reward, terminated, truncated, info = pool.envs[i].step(
            decoded_action(policy.tokenizer, out.ids, choice)
        )
        penalty = 0.0 if info.get("action_valid", True) else cfg.invalid_penalty
        trajs[i].turns.append(
            Turn(
                prompt_ids=torch.tensor(prompt, dtype=torch.long),
                response_ids=torch.tensor(out.ids, dtype=torch.long),
                reward=-penalty,
                terminated=terminated,
                truncated=truncated,
                state_key=state_key,
                info=info,
                logp_old=torch.tensor(out.logps, dtype=torch.float32),
            )
        )
        obs[i], infos[i] = o, info
        if terminated or truncated:
            t = trajs[i]
            t.outcome, t.terminated, t.truncated = float(reward), terminated, truncated
        else:
            still.append(i)
    return still
