"""The trainer's data types: the batch every credit hook receives, and the step context.

The batch is the one object of trajectories of turns that every hook receives; the step
context holds the services the trainer offers the hooks.

Layout (CREDIT.md §0): rollout ``i`` of a group has turns ``k = 0..K_i-1``; turn ``k`` is one
training sample (prompt = the history the policy saw, response = its action). Every advantage is
a token array keyed by ``(i, k)``, so the same code serves the per-step layout (one sample per
turn) and the concatenated one (observation tokens inside a response, ``policy_mask`` 0 there).

A new need of a credit variant is a new optional field here, never a special case in the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from torch import Tensor

from agentgym.baselines.policies.base import Policy
from agentgym.baselines.prompt import PromptFormat

if TYPE_CHECKING:
    from agentgym.baselines.rollout import EnvPool, RolloutConfig
    from agentgym.baselines.teachers import Teachers

REWARDS = ("outcome", "return")
"""What an outcome-based variant scores a trajectory by: its terminal outcome or its return."""

Key = tuple[int, int]
"""``(trajectory index, turn index)`` into ``Batch.trajectories``."""


@dataclass
class Turn:
    """One turn of a rollout: what the policy saw, what it emitted, what the env answered.

    Shapes: ``P`` prompt tokens, ``L`` response tokens.
    """

    prompt_ids: Tensor
    """LongTensor [P]: the context the policy conditioned on (history window)."""
    response_ids: Tensor
    """LongTensor [L]: the tokens of this turn's response."""
    reward: float = 0.0
    """the env's reward for this turn's step (TextWorld's score delta, a step penalty), less
    the invalid-action penalty; on the last turn only the penalty, since the last step's env
    reward is ``Trajectory.outcome``."""
    terminated: bool = False
    """the env reported ``terminated`` after this turn."""
    truncated: bool = False
    """the env reported ``truncated`` after this turn (turn limit): not a terminal state."""
    state_key: str | None = None
    """``info["state_key"]`` of the state this turn acted from (GiGPO's anchor state)."""
    info: dict[str, Any] = field(default_factory=dict)
    """the env's ``info`` after this turn's step."""
    logp_old: Tensor | None = None
    """[L] log π_old(y_t) at rollout time."""
    ref_logp: Tensor | None = None
    """[L] log π_ref(y_t) of the frozen reference."""
    values: Tensor | None = None
    """[L] critic values V(s_t) of the state before token t (PPO), at rollout time."""
    policy_mask: Tensor | None = None
    """[L] 1 where the policy generated the token, 0 for env/observation/probe tokens spliced
    into the response (concatenated layout); None means every response token is a policy token."""
    temperature: float = 1.0
    """the temperature the response was sampled at: every score of it (``logp_old``, the
    loss, the reference) is taken under softmax(logits / temperature), the distribution the
    tokens came from."""
    allowed_tokens: list[list[int]] | None = None
    """per response token, the token ids constrained decoding allowed there (None: decoding
    was free); the trainer scores log-probs under that masked distribution."""
    segment_tags: list[str] | None = None
    """one tag per response token (think, tool_call, summary, ...), or None."""
    extras: dict[str, Any] = field(default_factory=dict)
    """anything else a variant attaches: teacher log-probs, probe scores, ``next_value``, ...
    The rollout engine sets ``"action"`` (the text sent to ``env.step``), ``"observation"``
    (what the turn acted from), ``"privileged_context"`` (that state's privileged text, on a
    privileged env) and, with snapshots on, ``"snapshot"`` and ``"observation_info"``. The
    teachers (:mod:`agentgym.baselines.teachers`) cache their scores here, under
    ``"logp/<view>"`` and ``"topk/<view>"``."""

    def mask(self) -> Tensor:
        """Float [L] policy mask on the response's device (ones when ``policy_mask`` is None)."""
        if self.policy_mask is None:
            return torch.ones(self.response_ids.shape, device=self.response_ids.device)
        return self.policy_mask.to(device=self.response_ids.device, dtype=torch.float32)


@dataclass
class Trajectory:
    """One rollout: a list of turns plus the terminal outcome ``R``.

    ``terminated`` and ``truncated`` stay apart all the way into the credit code: a truncated
    rollout bootstraps from a value, a terminated one does not (CleanRL #457).
    """

    task_id: str
    group_id: str
    """rollouts with the same group id share task and reset seed (a GRPO group)."""
    seed: int | None = None
    turns: list[Turn] = field(default_factory=list)
    outcome: float = 0.0
    """terminal outcome R_i: the env's reward for the last step (e.g. 1.0 if won)."""
    terminated: bool = False
    truncated: bool = False
    node_id: str | None = None
    """tree samplers: this node's id."""
    parent_id: str | None = None
    branch_turn: int | None = None
    """tree samplers: the turn this rollout branched from its parent at."""
    twin_of: str | None = None
    """twin rollouts: the node id of the twin sharing the env-side noise."""
    sample_weight: float = 1.0
    """Horvitz-Thompson / importance weight of this rollout."""
    edited: bool = False
    """edited off-policy (DRE): ``logp_old`` must be recomputed."""
    auxiliary: bool = False
    """a rollout a variant played to estimate credit at a state of the batch (a twin, a
    nested continuation): its tokens count as generated, but it is no member of its GRPO
    group (:meth:`Batch.groups` leaves it out) and no rollout whose credit is measured."""
    prompt: PromptFormat | None = None
    """the prompt format its turns' prompts were built with (None: built elsewhere)."""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def total_return(self) -> float:
        """The return: every turn's reward plus the outcome (each step's env reward, once)."""
        return sum(t.reward for t in self.turns) + self.outcome

    def step_returns(self, gamma: float) -> list[float]:
        """Discounted step returns ``G_k = Σ_{k'≥k} γ^{k'−k} r_{k'}``, one per turn.

        The outcome ``R`` counts in the last turn's reward (GiGPO's ``R^s_{i,k}``).
        """
        G, running = [0.0] * len(self.turns), 0.0
        for k in reversed(range(len(self.turns))):
            r = self.turns[k].reward + (self.outcome if k == len(self.turns) - 1 else 0.0)
            running = r + gamma * running
            G[k] = running
        return G


def generated_tokens(trajectories: list[Trajectory]) -> int:
    """Tokens the policy sampled in ``trajectories``.

    Edited copies, the shared prefixes of branches and teacher-forced turns are not new
    samples and are left out.
    """
    return sum(
        len(turn.response_ids)
        for traj in trajectories
        if not traj.edited
        for turn in traj.turns
        if not turn.extras.get("shared") and not turn.extras.get("forced")
    )


@dataclass
class Batch:
    """The batch of one training step; every hook of every variant sees this same object.

    ``advantages`` and ``returns`` map ``(i, k)`` to a float token array [L] aligned with
    ``trajectories[i].turns[k].response_ids``; tokens outside the policy mask hold 0. The policy
    loss covers exactly the keys present in ``advantages`` (a variant drops a sample by leaving
    its key out).
    """

    trajectories: list[Trajectory] = field(default_factory=list)
    advantages: dict[Key, Tensor] | None = None
    returns: dict[Key, Tensor] | None = None
    """value targets G_t (PPO), keyed like ``advantages``."""
    metrics: dict[str, float] = field(default_factory=dict)
    """scalars hooks report for logging, named ``"<variant>/<what>"``."""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        """The device of the first response (cpu for an empty batch)."""
        for traj in self.trajectories:
            for turn in traj.turns:
                return turn.response_ids.device
        return torch.device("cpu")

    def groups(self) -> dict[str, list[int]]:
        """Group id -> trajectory indices, both in order of first appearance.

        Auxiliary rollouts (``Trajectory.auxiliary``) belong to no group.
        """
        out: dict[str, list[int]] = {}
        for i, traj in enumerate(self.trajectories):
            if not traj.auxiliary:
                out.setdefault(traj.group_id, []).append(i)
        return out

    def keys(self) -> list[Key]:
        """Every ``(i, k)`` of the batch, trajectory by trajectory, turn by turn."""
        return [(i, k) for i, traj in enumerate(self.trajectories) for k in range(len(traj.turns))]

    def turn(self, key: Key) -> Turn:
        """The turn at ``key = (i, k)``."""
        i, k = key
        return self.trajectories[i].turns[k]

    def outcomes(self, reward: str = "outcome") -> Tensor:
        """Float [N]: one score per trajectory, on ``self.device``.

        Args:
            reward: "outcome" (the terminal outcome R_i) or "return" (``total_return``: every
                step's reward, intermediate ones and penalties included).
        """
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        scores = [t.outcome if reward == "outcome" else t.total_return for t in self.trajectories]
        return torch.tensor(scores, dtype=torch.float32, device=self.device)

    def broadcast(self, A: Tensor, indices: list[int] | None = None) -> dict[Key, Tensor]:
        """Token advantages from one scalar per trajectory: ``A_{i,k,t} = A_i · m_t``.

        Args:
            A: float [N], one advantage per trajectory.
            indices: the trajectories to include (all if None); the others get no key.
        """
        chosen = range(len(self.trajectories)) if indices is None else indices
        out: dict[Key, Tensor] = {}
        for i in chosen:
            for k, turn in enumerate(self.trajectories[i].turns):
                m = turn.mask()
                out[(i, k)] = A[i].to(m.device) * m
        return out

    def flat(self, per_turn: dict[Key, Tensor], keys: list[Key] | None = None) -> Tensor:
        """Concatenate a ``(i, k)``-keyed dict of [L] arrays into one [T] array.

        The arrays follow ``keys`` order (default ``self.keys()``).
        """
        keys = self.keys() if keys is None else keys
        if not keys:
            return torch.zeros(0, device=self.device)
        return torch.cat([per_turn[key] for key in keys])

    def token_index(self, keys: list[Key] | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Flat [T] ``(mask, seq_ids, turn_ids)`` for :func:`agentgym.baselines.losses.aggregate`.

        They are aligned with :meth:`flat` over the same ``keys``: the policy mask, the
        trajectory index of each token, and a batch-unique turn number of each token.
        """
        keys = self.keys() if keys is None else keys
        masks, seq_ids, turn_ids = [], [], []
        for n, key in enumerate(keys):
            m = self.turn(key).mask()
            masks.append(m)
            seq_ids.append(torch.full(m.shape, key[0], dtype=torch.long, device=m.device))
            turn_ids.append(torch.full(m.shape, n, dtype=torch.long, device=m.device))
        if not keys:
            empty = torch.zeros(0, dtype=torch.long, device=self.device)
            return empty.float(), empty, empty
        return torch.cat(masks), torch.cat(seq_ids), torch.cat(turn_ids)

    def subset(self, indices: list[int]) -> Batch:
        """A batch of the trajectories at ``indices`` (renumbered 0..), with their advantages.

        Their returns come along too; ``metrics`` and ``extras`` are shared, not copied.
        """
        renumber = {old: new for new, old in enumerate(indices)}

        def pick(d: dict[Key, Tensor] | None) -> dict[Key, Tensor] | None:
            if d is None:
                return None
            return {(renumber[i], k): v for (i, k), v in d.items() if i in renumber}

        return Batch(
            trajectories=[self.trajectories[i] for i in indices],
            advantages=pick(self.advantages),
            returns=pick(self.returns),
            metrics=self.metrics,
            extras=self.extras,
        )


@dataclass
class StepContext:
    """The services a hook gets besides the batch; variants use only what they need.

    The trainer fills every field; a test builds one with just the fields its hooks read.
    The ``need_*`` methods give a field that a hook cannot do without, or say which one is
    missing.

    Attributes:
        config: the run's configuration (:class:`~agentgym.baselines.config.TrainConfig` in
            the trainer; any object with attributes elsewhere).
        policy: the model being trained (its ``values`` head serves PPO).
        ref: the frozen reference model, or None when no KL/reference is configured.
        envs: the env pool (snapshot/restore, privileged instances), or None in unit tests.
        step: the index of the current training step.
        rollout: how to generate, for the ``sample`` slot and any variant that generates more.
        rng: the run's generator for sampling choices (tasks, seeds).
        tasks_per_step: groups the ``sample`` slot plays per step.
        group_size: rollouts per group (G).
        teachers: second opinions on the sampled tokens (privileged view, reference, named
            teacher checkpoints; :mod:`agentgym.baselines.teachers`).
    """

    config: Any = None
    policy: Policy | None = None
    ref: Policy | None = None
    envs: EnvPool | None = None
    step: int = 0
    rollout: RolloutConfig | None = None
    rng: np.random.Generator | None = None
    tasks_per_step: int = 0
    group_size: int = 0
    teachers: Teachers | None = None

    def need_policy(self) -> Policy:
        """``policy``, or ValueError naming it when it is missing."""
        return _need(self.policy, "policy")

    def need_envs(self) -> EnvPool:
        """``envs``, or ValueError naming it when it is missing."""
        return _need(self.envs, "envs")

    def need_rollout(self) -> RolloutConfig:
        """``rollout``, or ValueError naming it when it is missing."""
        return _need(self.rollout, "rollout")

    def need_rng(self) -> np.random.Generator:
        """``rng``, or ValueError naming it when it is missing."""
        return _need(self.rng, "rng")

    def need_teachers(self) -> Teachers:
        """``teachers``, or ValueError naming it when it is missing."""
        return _need(self.teachers, "teachers")


Context = StepContext
"""The hook context's type (the name hooks annotate ``ctx`` with)."""

T = TypeVar("T")


def _need(value: T | None, name: str) -> T:
    if value is None:
        raise ValueError(f"this hook needs ctx.{name}, which the step context does not set")
    return value
