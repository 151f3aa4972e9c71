"""Delayed chain: a row of decisions of which one hidden position decides the outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.credit.base import CreditEnv, State, Step, int_option
from agentgym.envs.credit.values import Outcome

WORDS = ("owl", "fox", "elk", "bee", "cat", "dog", "ant", "yak", "eel", "ram", "cod", "hen")


@dataclass(frozen=True)
class ChainTask:
    """One task: each position's options (in menu order) and clue, and the hidden position."""

    options: tuple[tuple[str, ...], ...]
    clues: tuple[str, ...]
    hidden: int


class ChainEnv(CreditEnv):
    """A chain of decisions, each with a clue; only one hidden position counts.

    ## Description
    ``length`` decisions, each among ``options`` animals. The observation at every decision
    shows a sign naming one of them: picking the animal on the sign is "right". One position,
    drawn per task and never revealed, decides the outcome: success iff the pick there was
    right; the picks elsewhere change nothing.

    ## Observation
    Text: the step number, the sign, and the options (numbered in the menu form, one per line
    without numbers in the free-text form).

    ## Action
    Menu form: ``Discrete(options)`` with ``info["action_mask"]``; the item's text or its
    number as a string is accepted too. Free-text form: any string; it must be one option's
    text (``pick <animal>``; letter case and extra spaces ignored), anything else is an
    invalid action that costs a turn and repeats the decision. Both list
    ``info["admissible_actions"]``.

    ## Rewards
    1.0 at the last decision iff the hidden position's pick was right, else 0.0. Privileged
    ``info["credit_values"]``: only the hidden position has non-zero advantages.

    ## Termination
    Terminates after the last decision; truncates after ``length + 4`` turns (menu) or
    ``2 * length`` turns (free text) by default.

    ## Registered ids
    ``agentgym/Credit-Chain-v0`` (menu), ``agentgym/Credit-Chain-Free-v0`` (free text).

    ## Version history
    v0: first version.
    """

    task_prefix = "chain"
    task_type = "chain"
    salt = 2

    def __init__(self, length: int = 5, options: int = 5, **kwargs: Any):
        """Create the env.

        Args:
            length: decisions per episode (1 to 50).
            options: options per decision (2 to 12); a random pick is right with
                probability ``1 / options``.
            **kwargs: as :class:`~agentgym.core.env.AgentEnv` (split, privileged, max_turns,
                render_mode).
        """
        self.length = int_option("length", length, 1, 50)
        self.n_options = int_option("options", options, 2, len(WORDS))
        super().__init__(**kwargs)

    def _episode_length(self) -> int:
        return self.length

    def _max_menu(self) -> int:
        return self.n_options

    def _options(self) -> dict[str, Any]:
        return {"length": self.length, "options": self.n_options}

    def _generate(self, rng: np.random.Generator) -> ChainTask:
        options, clues = [], []
        for _ in range(self.length):
            picked = tuple(WORDS[i] for i in rng.permutation(len(WORDS))[: self.n_options])
            options.append(picked)
            clues.append(picked[int(rng.integers(self.n_options))])
        return ChainTask(tuple(options), tuple(clues), int(rng.integers(self.length)))

    # ------------------------------------------------------------------ the MDP
    # A state is (position, hit): hit is 1 once the hidden position's pick was right.
    def _initial(self) -> State:
        return (0, 0)

    def _actions(self, s: State) -> tuple[str, ...]:
        pos = s[0]
        if pos >= self.length:
            return ()
        return tuple(f"pick {w}" for w in self._task.options[pos])

    def _outcomes(self, s: State, a: str) -> list[Outcome]:
        pos, hit = s
        if pos == self._task.hidden:
            hit = int(a == f"pick {self._task.clues[pos]}")
        done = pos + 1 == self.length
        return [(1.0, (pos + 1, hit), float(done and hit == 1), done)]

    def _transition(self, s: State, a: str, rng: np.random.Generator) -> Step:
        pos, hit = s
        word = a.split()[-1]
        if pos == self._task.hidden and word == self._task.clues[pos]:
            hit = 1
        if pos + 1 < self.length:
            return Step(
                (pos + 1, hit),
                0.0,
                False,
                False,
                f"You picked {word}.",
                produced=(f"choice:{pos}",),
                visited=f"step:{pos}",
            )
        won = hit == 1
        verdict = "The chain holds: success." if won else "The chain breaks: failure."
        return Step(
            (pos + 1, hit),
            float(won),
            True,
            won,
            f"You picked {word}. {verdict}",
            produced=(f"choice:{pos}",),
            consumed=tuple(f"choice:{i}" for i in range(pos)),
            visited=f"step:{pos}",
        )

    # ------------------------------------------------------------------ text
    def _observe(self, s: State, message: str) -> str:
        pos = s[0]
        lead = f"{message}\n" if message else ""
        if pos >= self.length:
            return f"{lead}The episode is over."
        ask = "Type one option:" if self.free_text else "Choose:"
        clue = self._task.clues[pos]
        head = f"Step {pos + 1} of {self.length}. The sign shows {clue}.\n{ask}"
        return f"{lead}{head}\n{self._choices(s)}"

    def _state_text(self, s: State) -> str:
        # what the agent can know: the decision it faces. Whether the hidden pick was right
        # stays latent (it is in the privileged values only), so same-state credit methods
        # meet the aliasing a real observation leaves them.
        return f"pos={s[0]}"

    def _progress(self, s: State) -> float:
        return s[0] / self.length

    def _plan(self) -> str:
        return (
            f"Only step {self._task.hidden + 1} counts: pick the animal on its sign "
            f"({self._task.clues[self._task.hidden]})."
        )

    def _tie_break(self, s: State, best: list[str]) -> str:
        right = f"pick {self._task.clues[s[0]]}"
        return right if right in best else best[0]


class ChainFreeEnv(ChainEnv):
    """:class:`ChainEnv` with free-text actions (see its docstring)."""

    free_text = True

    def _slack_turns(self) -> int:
        return self.length
