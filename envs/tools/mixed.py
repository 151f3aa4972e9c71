"""The three mock-API domains behind one id: one env whose tasks come from all of them."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.spaces import String
from agentgym.envs.tools.env import AccountsEnv, EcommerceEnv, ToolsEnv, TravelEnv

_CLASSES: dict[str, type[ToolsEnv]] = {
    "ecommerce": EcommerceEnv,
    "accounts": AccountsEnv,
    "travel": TravelEnv,
}


class MixedToolsEnv(AgentEnv[str, str]):
    """The e-commerce, accounts and travel tool envs as one: each task is one domain's.

    ## Description
    The union of the three domains' tasks (:class:`~agentgym.envs.tools.env.ToolsEnv`), each
    played on its own domain's env built with the same arguments; ``info["domain"]`` names the
    task's domain. For training one policy across domains (a warm start for per-domain
    teachers, or a student distilled from them by ``grpo+roadmopd``).

    ## Observation
    The task's domain env's observation (its request, tools, results and grammar).

    ## Action
    As in :class:`~agentgym.envs.tools.env.ToolsEnv`.

    ## Rewards
    As in :class:`~agentgym.envs.tools.env.ToolsEnv`: 1.0 at a summary that served the request.

    ## Termination
    As in :class:`~agentgym.envs.tools.env.ToolsEnv` (summary; ``max_turns``, 10 by default).

    ## Registered ids
    ``agentgym/Tools-Mixed-v1``: the ``-v1`` domain ids' tasks together (each split the
    union of the domains' splits, the same number of tasks of each domain); the task ids are
    the domains' own (``ecommerce-single-0000``...).

    ## Version history
    v1: first version, over the ``-v1`` domain envs (the version names the domains' text).
    """

    family = "tools"
    domain = "mixed"
    default_max_turns = 10
    domains: ClassVar[tuple[str, ...]] = tuple(_CLASSES)
    """The domains the tasks come from (``info["domain"]`` takes these values)."""

    def __init__(
        self,
        async_calls: bool = False,
        world_seed: int = 0,
        tool_latency_scale: float = 1.0,
        grammar_in_errors: bool = True,
        overlap: str = "turn",
        clock: str = "virtual",
        clock_scale: float = 1.0,
        schemas: bool = True,
        **kwargs: Any,
    ):
        """Build one env per domain with the same arguments.

        Each argument is :class:`~agentgym.envs.tools.env.ToolsEnv`'s, given to every domain.

        Args:
            async_calls: issue calls as futures on a virtual clock.
            world_seed: seed of each domain's backend, tasks and latencies.
            tool_latency_scale: multiplies every tool's mean latency.
            grammar_in_errors: repeat the grammar after an invalid action's reason.
            overlap: with ``async_calls``, "turn" or "cross".
            clock: "virtual" or "real".
            clock_scale: real seconds slept per virtual second in the real clock mode.
            schemas: list the tools' JSON schemas in the first observation (False: names).
            **kwargs: split, privileged, max_turns, render_mode (see ``AgentEnv``).
        """
        super().__init__(**kwargs)
        inner = {
            "async_calls": async_calls,
            "world_seed": world_seed,
            "tool_latency_scale": tool_latency_scale,
            "grammar_in_errors": grammar_in_errors,
            "overlap": overlap,
            "clock": clock,
            "clock_scale": clock_scale,
            "schemas": schemas,
            **kwargs,
            "max_turns": self.max_turns,
        }
        self._envs = {d: cls(**inner) for d, cls in _CLASSES.items()}
        self._owner = {
            t: d
            for d, env in self._envs.items()
            for s in ("train", "val", "test")
            for t in env.task_ids(s)
        }
        self.observation_space = String()
        self.action_space = String()

    @property
    def current(self) -> ToolsEnv:
        """The env of the current task's domain."""
        return self._envs[self._owner[str(self.task_id)]]

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> tuple[str, ...]:
        """The domains' task ids of ``split``, domain after domain."""
        return tuple(t for env in self._envs.values() for t in env.task_ids(split or self.split))

    def task_type_of(self, task_id: str) -> str:
        """The task's type in its domain."""
        return self._envs[self._owner[task_id]].task_type_of(task_id)

    def _has_task(self, task_id: str) -> bool:
        return task_id in self._owner

    def _config(self) -> dict[str, Any]:
        return {"mixed": {d: env._config() for d, env in self._envs.items()}}

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        return self.current.reset(options={"task_id": task_id})

    def _apply(self, action: Any) -> Transition:
        obs, reward, terminated, _, info = self.current.step(action)
        return Transition(obs, reward, terminated, info)

    def _complete_info(self, info: dict[str, Any]) -> dict[str, Any]:
        info = super()._complete_info(info)
        info["domain"] = self._owner[str(self.task_id)]
        return info

    def _privileged_info(self) -> dict[str, Any]:
        return {}  # the domain env made with privileged=True adds its own keys

    def set_rng(self, key: int | None) -> None:
        """Key the per-turn randomness of this env and of every domain env."""
        super().set_rng(key)
        for env in self._envs.values():
            env.set_rng(key)

    def oracle_action(self) -> str:
        """The domain env's oracle action."""
        return self.current.oracle_action()

    def answer_prefix(self) -> str:
        """The domain env's answer prefix."""
        return self.current.answer_prefix()

    def check_answer(self, text: str) -> float:
        """The domain env's answer check."""
        return self.current.check_answer(text)

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        return {"domain_env": json.loads(self.current.snapshot())}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.current.restore(json.dumps(state["domain_env"]).encode())
