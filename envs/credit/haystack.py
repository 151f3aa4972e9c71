"""Haystack: many actions, few of which matter, over several turns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.credit.base import CreditEnv, State, Step, int_option
from agentgym.envs.credit.values import Outcome

HELPFUL = ("herb", "honey", "berry", "bread", "tea", "soup", "fig", "nut")
HARMFUL = ("toadstool", "hemlock", "venom", "mould", "tar", "bleach", "rust", "soot")
IRRELEVANT = (
    "pebble", "feather", "leaf", "twig", "shell", "string",
    "button", "cork", "bead", "pin", "coin", "sand",
)  # fmt: skip
EFFECT = {"helpful": 1, "harmful": -1, "irrelevant": 0}


@dataclass(frozen=True)
class HaystackTask:
    """One task: the items in menu order and each item's effect on the energy meter."""

    items: tuple[str, ...]
    effects: tuple[int, ...]


class HaystackEnv(CreditEnv):
    """Raise an energy meter to a threshold with a menu where most items do nothing.

    ## Description
    Each turn offers the same ``n_items`` items ``use <thing>``, drawn per task in a random
    order: ``n_helpful`` foods (energy +1), ``n_harmful`` poisons (energy -1), the rest
    irrelevant objects (no effect). The word is a consistent cue of the class across tasks
    (foods from one list, poisons from another); the next observation also states the effect.
    After ``turns`` uses the episode ends, a success iff energy is at least ``threshold``.

    ## Observation
    Text: the turn, the energy and the threshold, the last effect, and the numbered menu.

    ## Action
    ``Discrete(n_items)`` with ``info["action_mask"]``; the item's text or its number as a
    string is accepted too.

    ## Rewards
    1.0 at the last use iff energy >= threshold, else 0.0. Privileged
    ``info["credit_values"]`` holds each item's exact value under the uniform and the optimal
    policy.

    ## Termination
    Terminates after ``turns`` valid actions; truncates after ``turns + 4`` turns by default.

    ## Registered ids
    ``agentgym/Credit-Haystack-v0`` (10 items: 2 helpful, 2 harmful; 6 turns; threshold 2).

    ## Version history
    v0: first version.
    """

    task_prefix = "haystack"
    task_type = "haystack"
    salt = 3

    def __init__(
        self,
        n_items: int = 10,
        n_helpful: int = 2,
        n_harmful: int = 2,
        turns: int = 6,
        threshold: int = 2,
        **kwargs: Any,
    ):
        """Create the env.

        Args:
            n_items: items on the menu (3 to 28).
            n_helpful: items that add 1 to the energy (1 to 8).
            n_harmful: items that take 1 from it (0 to 8).
            turns: uses per episode (1 to 50).
            threshold: the energy needed at the end (1 to ``turns``).
            **kwargs: as :class:`~agentgym.core.env.AgentEnv` (split, privileged, max_turns,
                render_mode).
        """
        self.n_items = int_option("n_items", n_items, 3, 28)
        self.n_helpful = int_option("n_helpful", n_helpful, 1, len(HELPFUL))
        self.n_harmful = int_option("n_harmful", n_harmful, 0, len(HARMFUL))
        irrelevant = self.n_items - self.n_helpful - self.n_harmful
        int_option("n_items - n_helpful - n_harmful", irrelevant, 0, len(IRRELEVANT))
        self.turns = int_option("turns", turns, 1, 50)
        self.threshold = int_option("threshold", threshold, 1, self.turns)
        super().__init__(**kwargs)

    def _episode_length(self) -> int:
        return self.turns

    def _max_menu(self) -> int:
        return self.n_items

    def _options(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_helpful": self.n_helpful,
            "n_harmful": self.n_harmful,
            "turns": self.turns,
            "threshold": self.threshold,
        }

    def _generate(self, rng: np.random.Generator) -> HaystackTask:
        counts = {
            "helpful": self.n_helpful,
            "harmful": self.n_harmful,
            "irrelevant": self.n_items - self.n_helpful - self.n_harmful,
        }
        pool: list[tuple[str, int]] = []
        for words, kind in ((HELPFUL, "helpful"), (HARMFUL, "harmful"), (IRRELEVANT, "irrelevant")):
            chosen = rng.permutation(len(words))[: counts[kind]]
            pool += [(words[i], EFFECT[kind]) for i in chosen]
        order = rng.permutation(len(pool))
        return HaystackTask(
            tuple(f"use {pool[i][0]}" for i in order), tuple(pool[i][1] for i in order)
        )

    # ------------------------------------------------------------------ the MDP
    # A state is (uses so far, energy).
    def _initial(self) -> State:
        return (0, 0)

    def _actions(self, s: State) -> tuple[str, ...]:
        return self._task.items if s[0] < self.turns else ()

    def _outcomes(self, s: State, a: str) -> list[Outcome]:
        used, energy = s
        energy += self._task.effects[self._task.items.index(a)]
        done = used + 1 == self.turns
        return [(1.0, (used + 1, energy), float(done and energy >= self.threshold), done)]

    def _transition(self, s: State, a: str, rng: np.random.Generator) -> Step:
        used, energy = s
        effect = self._task.effects[self._task.items.index(a)]
        energy, used = energy + effect, used + 1
        message = f"You used {a.removeprefix('use ')}: energy {effect:+d}."
        node = f"use:{used - 1}"
        if used < self.turns:
            return Step((used, energy), 0.0, False, False, message, produced=(node,))
        won = energy >= self.threshold
        verdict = "enough: success." if won else "too little: failure."
        return Step(
            (used, energy),
            float(won),
            True,
            won,
            f"{message} Energy {energy}: {verdict}",
            produced=(node,),
            consumed=tuple(f"use:{i}" for i in range(used - 1)),
        )

    # ------------------------------------------------------------------ text
    def _observe(self, s: State, message: str) -> str:
        used, energy = s
        lead = f"{message}\n" if message else ""
        if used >= self.turns:
            return f"{lead}The episode is over."
        head = (
            f"Turn {used + 1} of {self.turns}. Energy {energy}; "
            f"{self.threshold} needed at the end.\nUse one item:"
        )
        return f"{lead}{head}\n{self._choices(s)}"

    def _state_text(self, s: State) -> str:
        return f"used={s[0]}|energy={s[1]}"

    def _progress(self, s: State) -> float:
        return min(1.0, max(0.0, s[1] / self.threshold))

    def _plan(self) -> str:
        helpful = [i for i, e in zip(self._task.items, self._task.effects, strict=True) if e > 0]
        return f"Foods raise energy: {', '.join(helpful)}; reach {self.threshold} by the end."

    def _tie_break(self, s: State, best: list[str]) -> str:
        return max(best, key=lambda a: self._task.effects[self._task.items.index(a)])
