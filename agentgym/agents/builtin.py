"""Built-in agents: ``random`` and ``oracle``."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym.core.env import AgentEnv
from agentgym.core.spaces import SAMPLE_ALPHABET


class RandomAgent:
    """Uniform over the listed actions where the env lists them, else a short random string.

    The listed actions are the menu (``info["action_mask"]``) or ``info["admissible_actions"]``
    where given. Seeded by ``reset``.
    """

    name = "random"

    def __init__(self) -> None:
        """Seed the generator with 0 until ``reset`` reseeds it."""
        self._rng = np.random.default_rng(0)
        self.tokens_used = 0

    def reset(self, env_id: str, seed: int) -> None:
        """Reseed the agent's generator."""
        self._rng = np.random.default_rng(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """A uniformly random valid action where the env lists them."""
        mask = info.get("action_mask")
        if mask is not None and mask.any():
            return int(self._rng.choice(np.flatnonzero(mask)))
        admissible = info.get("admissible_actions")
        if admissible:
            return admissible[int(self._rng.integers(len(admissible)))]
        n = int(self._rng.integers(1, 17))
        return "".join(self._rng.choice(SAMPLE_ALPHABET, size=n))


class OracleAgent:
    """Plays the env's scripted expert (``env.unwrapped.oracle_action()``)."""

    name = "oracle"

    def __init__(self) -> None:
        """Start unbound: ``bind`` gives the env before ``act``."""
        self._env: AgentEnv[Any, Any] | None = None
        self.tokens_used = 0

    def reset(self, env_id: str, seed: int) -> None:
        """Nothing to prepare: the env holds the state."""

    def bind(self, env: AgentEnv[Any, Any]) -> None:
        """Remember the (unwrapped) env the oracle reads."""
        self._env = env

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """The expert's next action."""
        if self._env is None:
            raise RuntimeError("the oracle agent needs bind(env) before act()")
        return self._env.oracle_action()
