"""Key-to-door: a key chosen at the first turn decides the reward many turns later."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.envs.credit.base import CreditEnv, State, Step, float_option, int_option
from agentgym.envs.credit.values import Outcome

COLOURS = ("red", "blue", "green", "yellow", "purple", "orange", "white", "black")
APPLES = 3
MEAN_MAX = 0.1
"""Each apple's mean reward is drawn per task from ``[0, MEAN_MAX]``."""


@dataclass(frozen=True)
class KeyDoorTask:
    """One task: the keys in menu order, the door's colour, each apple's mean reward."""

    keys: tuple[str, ...]
    door: str
    means: tuple[float, ...]


class KeyDoorEnv(CreditEnv):
    """Take the key whose colour matches a door that is opened only after a distractor phase.

    After Hung et al. (2019) and Mesnard et al. (2021), as in bsuite's umbrella tasks.

    ## Description
    Turn 0: a room with ``n_keys`` keys of different colours; the observation names the
    colour of the door at the far end, and the agent takes one key. Then ``horizon``
    distractor turns in an orchard: each offers three apples whose rewards are small (each
    apple's mean is drawn per task from [0, 0.1], plus zero-mean Gaussian noise of scale
    ``noise`` drawn per turn). Last turn: the agent opens the door.

    ## Observation
    Text: turn 0 shows the door's colour and the keys; the orchard turns show which key is
    carried (not the door); then the door. Each ends with the numbered menu.

    ## Action
    ``Discrete(max(n_keys, 3))`` with ``info["action_mask"]``; the item's text or its number
    as a string is accepted too: ``take the <colour> key``, ``pick apple <k>``,
    ``open the door``.

    ## Rewards
    Each apple's reward; 1.0 at the door iff the carried key matches its colour. Success
    (``won``) is the door alone. Privileged ``info["credit_values"]`` holds the exact values:
    the key choice's advantage is the door term whatever the horizon.

    ## Termination
    Terminates when the door is opened (turn ``horizon + 2``); truncates after
    ``horizon + 6`` turns by default (room for four invalid actions).

    ## Registered ids
    ``agentgym/Credit-KeyDoor-v0`` (horizon 6), ``agentgym/Credit-KeyDoor-Long-v0``
    (horizon 24).

    ## Version history
    v0: first version.
    """

    task_prefix = "keydoor"
    task_type = "key_door"
    salt = 1

    def __init__(self, horizon: int = 6, noise: float = 0.05, n_keys: int = 5, **kwargs: Any):
        """Create the env.

        Args:
            horizon: distractor turns between the key and the door (0 to 200).
            noise: standard deviation of the zero-mean noise on apple rewards (0 to 1).
            n_keys: keys offered at turn 0 (2 to 8); a random key opens the door with
                probability ``1 / n_keys``.
            **kwargs: as :class:`~agentgym.core.env.AgentEnv` (split, privileged, max_turns,
                render_mode).
        """
        self.horizon = int_option("horizon", horizon, 0, 200)
        self.noise = float_option("noise", noise, 0.0, 1.0)
        self.n_keys = int_option("n_keys", n_keys, 2, len(COLOURS))
        super().__init__(**kwargs)

    def _episode_length(self) -> int:
        return self.horizon + 2

    def _max_menu(self) -> int:
        return max(self.n_keys, APPLES)

    def _options(self) -> dict[str, Any]:
        return {"horizon": self.horizon, "noise": self.noise, "n_keys": self.n_keys}

    def _generate(self, rng: np.random.Generator) -> KeyDoorTask:
        order = rng.permutation(len(COLOURS))[: self.n_keys]
        keys = tuple(COLOURS[i] for i in order)
        door = keys[int(rng.integers(self.n_keys))]
        means = tuple(round(float(m), 3) for m in rng.uniform(0.0, MEAN_MAX, APPLES))
        return KeyDoorTask(keys, door, means)

    # ------------------------------------------------------------------ the MDP
    # A state is (phase, key): phase 0 the key room, 1..horizon the orchard, horizon + 1
    # the door, horizon + 2 over; key "" until one is taken.
    def _initial(self) -> State:
        return (0, "")

    def _actions(self, s: State) -> tuple[str, ...]:
        phase = s[0]
        if phase == 0:
            return tuple(f"take the {c} key" for c in self._task.keys)
        if phase <= self.horizon:
            return tuple(f"pick apple {i + 1}" for i in range(APPLES))
        if phase == self.horizon + 1:
            return ("open the door",)
        return ()

    def _outcomes(self, s: State, a: str) -> list[Outcome]:
        phase, key = s
        if phase == 0:
            taken = self._task.keys[self._actions(s).index(a)]
            return [(1.0, (1, taken), 0.0, False)]
        if phase <= self.horizon:
            mean = self._task.means[self._actions(s).index(a)]
            return [(1.0, (phase + 1, key), mean, False)]
        return [(1.0, (phase + 1, key), float(key == self._task.door), True)]

    def _transition(self, s: State, a: str, rng: np.random.Generator) -> Step:
        phase, key = s
        index = self._actions(s).index(a)
        if phase == 0:
            taken = self._task.keys[index]
            return Step(
                (1, taken),
                0.0,
                False,
                False,
                f"You took the {taken} key.",
                produced=(f"key:{taken}",),
                visited="room:keys",
            )
        if phase <= self.horizon:
            reward = self._task.means[index] + self.noise * float(rng.standard_normal())
            message = f"Apple {index + 1} gave {reward:.2f}."
            return Step((phase + 1, key), reward, False, False, message, visited="room:orchard")
        won = key == self._task.door
        verdict = "opens the door: you win" if won else "does not fit the door"
        return Step(
            (phase + 1, key),
            float(won),
            True,
            won,
            f"The {key} key {verdict}.",
            produced=("door:open",) if won else (),
            consumed=(f"key:{key}",),
            visited="room:door",
        )

    # ------------------------------------------------------------------ text
    def _observe(self, s: State, message: str) -> str:
        phase, key = s
        task, lead = self._task, f"{message}\n" if message else ""
        if phase == 0:
            head = (
                f"A room with {self.n_keys} keys. The door at the far end is {task.door}.\n"
                "Take one key:"
            )
        elif phase <= self.horizon:
            head = f"Orchard, turn {phase} of {self.horizon}. You carry the {key} key.\nPick:"
        elif phase == self.horizon + 1:
            head = f"You reach the door. You carry the {key} key.\nChoose:"
        else:
            return f"{lead}The episode is over."
        return f"{lead}{head}\n{self._choices(s)}"

    def _state_text(self, s: State) -> str:
        return f"phase={s[0]}|key={s[1] or '-'}"

    def _progress(self, s: State) -> float:
        return min(1.0, s[0] / (self.horizon + 2))

    def _plan(self) -> str:
        best = max(range(APPLES), key=lambda i: self._task.means[i])
        return (
            f"The door is {self._task.door}: take the {self._task.door} key, pick apple "
            f"{best + 1} (the highest mean) in the orchard, then open the door."
        )
