"""The one protocol for everything the harness evaluates."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    """An agent plays episodes: ``reset`` before each, then ``act`` once per turn.

    Optional members the harness uses when present:

    * ``bind(env)``: called after each ``reset`` of the env with the unwrapped env (scripted
      agents such as the oracle read it; learned agents must not).
    * ``finish(info)``: called with the last ``info`` when an episode ends (not when it errs).
    * ``tokens_used``: tokens the agent generated in the current episode.
    * ``compute_used``: counts of extra work in the episode (``{"backward": 3, ...}``).
    * ``blame_used``: a pipeline's blame per call of the episode (see the results schema).
    """

    def reset(self, env_id: str, seed: int) -> None:
        """Prepare for an episode of ``env_id``; ``seed`` seeds the agent's own randomness."""
        ...

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """Return the action for ``observation`` (``info`` is the env's last info)."""
        ...
