"""Exact action values of a small finite MDP under the uniform and the optimal policy.

A credit env describes its MDP by two pure functions: the admissible actions of a state, and
the outcomes of an action (probability, next state, expected reward, done). The values are
undiscounted expected returns on the finite horizon the turn limit sets: a step that reaches
``max_turns`` without ending the episode is truncated, and nothing follows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

State = Hashable
"""A family's state: a hashable value (the families use flat tuples)."""
Outcome = tuple[float, State, float, bool]
"""One outcome of an action: ``(probability, next state, expected reward, done)``."""

POLICIES = ("uniform", "optimal")
"""``uniform``: uniform over the admissible actions at every later state; ``optimal``: the
return-maximising policy (``V* = max_a Q*``)."""


def _mean(values: Sequence[float]) -> float:
    """The mean, exactly the common value when all are equal (so advantages are exactly 0)."""
    if max(values) == min(values):
        return values[0]
    return math.fsum(values) / len(values)


class Values:
    """Memoised ``Q`` and ``V`` of one task's MDP for both policies.

    Args:
        actions: ``state -> admissible action texts`` (empty where the episode is over).
        outcomes: ``(state, action) -> list of (probability, next state, expected reward,
            done)``; probabilities sum to 1.
        max_turns: the turn limit; ``t`` in the methods below counts turns already taken.
    """

    def __init__(
        self,
        actions: Callable[[Any], Sequence[str]],
        outcomes: Callable[[Any, str], list[Outcome]],
        max_turns: int,
    ):
        """Keep the MDP's description; values are computed on demand and memoised."""
        self._actions = actions
        self._outcomes = outcomes
        self.max_turns = max_turns
        self._memo: dict[tuple[str, State, int], float] = {}

    def q(self, policy: str, state: State, t: int, action: str) -> float:
        """Expected return of ``action`` in ``state`` after ``t`` turns, then of ``policy``."""
        total = 0.0
        for p, nxt, reward, done in self._outcomes(state, action):
            follow = 0.0 if done or t + 1 >= self.max_turns else self.v(policy, nxt, t + 1)
            total += p * (reward + follow)
        return total

    def v(self, policy: str, state: State, t: int) -> float:
        """Expected return of ``policy`` from ``state`` after ``t`` turns (0 with no action)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}: choose one of {POLICIES}")
        key = (policy, state, t)
        if key not in self._memo:
            qs = [self.q(policy, state, t, a) for a in self._actions(state)]
            if not qs:
                self._memo[key] = 0.0
            else:
                self._memo[key] = max(qs) if policy == "optimal" else _mean(qs)
        return self._memo[key]

    def table(self, state: State, t: int) -> dict[str, dict[str, Any]]:
        """``{policy: {"value": V, "q": {action: Q}, "advantage": {action: Q - V}}}``.

        Actions are the admissible ones of ``state``, in their order.
        """
        out: dict[str, dict[str, Any]] = {}
        for policy in POLICIES:
            q = {a: self.q(policy, state, t, a) for a in self._actions(state)}
            value = self.v(policy, state, t)
            out[policy] = {
                "value": value,
                "q": q,
                "advantage": {a: qa - value for a, qa in q.items()},
            }
        return out

    def best(self, state: State, t: int) -> list[str]:
        """The optimal actions of ``state`` (``Q* = V*``), in the admissible order."""
        value = self.v("optimal", state, t)
        return [a for a in self._actions(state) if self.q("optimal", state, t, a) == value]
