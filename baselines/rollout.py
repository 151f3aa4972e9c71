"""Batched multi-turn rollouts: many envs stepped in lockstep, one batched generation per turn.

Both sample layouts of CREDIT.md §0 are produced (prompts are built by
:mod:`agentgym.baselines.prompt`, turns scored by :mod:`agentgym.baselines.scoring`); every
turn is stored as its own ``Turn`` either way:

* ``per-step`` (default): turn ``k``'s prompt is the last ``history`` (observation, action)
  pairs and the current observation (``history=0``: the observation alone; the search envs'
  observations carry the episode's state); its response the generated action.
* ``concat``: turn ``k``'s prompt is the whole episode so far, so it equals turn ``k-1``'s
  prompt + response + observation ``k``; :func:`~agentgym.baselines.scoring.turn_logprobs`
  scores such a rollout with one sequence.

Groups are G rollouts of the same task and seed. ``terminated`` and ``truncated`` stay apart.
Tree samplers: with ``snapshots=True`` every turn keeps the env state it acted from, and
:func:`branch` replays ``n`` continuations from any turn of a finished rollout.
Edited rollouts: :func:`replay` plays given action texts teacher-forced and records the turns
:func:`collect` would have recorded for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agentgym.baselines.batch import Trajectory, Turn
from agentgym.baselines.envpool import EnvPool, step_each
from agentgym.baselines.policies.base import Policy
from agentgym.baselines.policies.constrained import allowed_tokens, encode_actions
from agentgym.baselines.prompt import (
    PRIVILEGED_KEY,
    Choices,
    History,
    PromptFormat,
    act,
    action_choices,
)
from agentgym.baselines.scoring import context_limit, logprobs_of


@dataclass(frozen=True)
class RolloutConfig:
    """How actions are generated and what the policy sees."""

    prompt: PromptFormat = field(default_factory=PromptFormat)
    """What each turn's prompt holds: the sample layout (CREDIT.md §0), the history window,
    the pinned first observation (see :class:`~agentgym.baselines.prompt.PromptFormat`). A
    concat rollout longer than the policy's context raises ValueError; a per-step prompt
    longer than it is cut by the policy (most recent tokens kept)."""
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
    snapshots: bool = False
    """Keep the env state each turn acted from in ``turn.extras["snapshot"]`` (bytes of
    ``env.unwrapped.snapshot()``; with the observation and its info in ``"observation"`` and
    ``"observation_info"``) so :func:`branch` can replay from any turn; ignored for envs
    without snapshot support."""


@dataclass
class _Slot:
    """One rollout in flight: its env, its trajectory so far, what the policy sees next."""

    env: Any
    traj: Trajectory
    obs: Any
    info: dict[str, Any]
    history: History
    key: int | None
    first_key: tuple[int, int] | None = None
    """``(turn, full key)``: the key that turn samples with instead of ``key * 1000 + turn``."""


def pick_tasks(pool: EnvPool, n: int, rng: np.random.Generator) -> list[tuple[str, int]]:
    """``n`` distinct train-split tasks of the pool's env, each with a fresh reset seed.

    Returns ``(task_id, seed)`` pairs drawn from ``rng`` (with replacement once ``n`` exceeds
    the split).
    """
    env: Any = pool.envs[0].unwrapped
    task_ids = env.task_ids("train")
    picks = rng.choice(len(task_ids), size=n, replace=n > len(task_ids))
    return [(task_ids[i], int(rng.integers(2**31))) for i in picks]


def collect(
    policy: Policy,
    pool: EnvPool,
    tasks: list[tuple[str, int]],
    group_size: int,
    cfg: RolloutConfig,
    *,
    gumbel_keys: list[int] | None = None,
    env_keys: list[int] | None = None,
) -> list[Trajectory]:
    """Play ``group_size`` rollouts of each (task_id, seed), all envs advancing together.

    Args:
        policy: generates actions.
        pool: envs (grown to ``len(tasks) * group_size`` if needed).
        tasks: (task id, reset seed) per group.
        group_size: G.
        cfg: generation settings and layout.
        gumbel_keys: per rollout, a key that fixes its sampling noise (twins share a key);
            turn ``k`` of a rollout with key ``c`` samples with key ``c * 1000 + k``.
        env_keys: per rollout, a key for the env-side noise: the env is keyed with
            ``set_rng(key)`` after its reset, so a :func:`branch` given the same env key
            draws the same noise at the same turns (twin rollouts).

    Returns:
        One trajectory per rollout, groups contiguous, in task order; ``node_id`` is
        ``"{group_id}:{j}"`` for the group's ``j``-th rollout, ``prompt`` is ``cfg.prompt``.
    """
    rows = [(task, seed, j) for task, seed in tasks for j in range(group_size)]
    _check_keys(len(rows), gumbel_keys=gumbel_keys, env_keys=env_keys)
    pool.grow(len(rows))
    slots = []
    for n, ((task, seed, j), env) in enumerate(zip(rows, pool.envs, strict=False)):
        obs, info = env.reset(seed=seed, options={"task_id": task})
        if env_keys is not None:
            unwrapped: Any = env.unwrapped
            unwrapped.set_rng(env_keys[n])
        group = f"{task}@{seed}"
        traj = Trajectory(
            task_id=task, group_id=group, seed=seed, node_id=f"{group}:{j}", prompt=cfg.prompt
        )
        history = History(policy, cfg.prompt)
        history.observe(obs, info)
        key = None if gumbel_keys is None else gumbel_keys[n]
        slots.append(_Slot(env, traj, obs, info, history, key))
    _play(policy, pool, slots, cfg, snapshots=cfg.snapshots and pool.supports_snapshot)
    return [s.traj for s in slots]


def branch(
    policy: Policy,
    pool: EnvPool,
    parents: list[tuple[Trajectory, int]],
    n: int,
    cfg: RolloutConfig,
    *,
    gumbel_keys: list[int] | None = None,
    env_keys: list[int] | None = None,
    first_keys: list[int] | None = None,
    forced: bool = False,
) -> list[Trajectory]:
    """Play ``n`` continuations from turn ``k`` of each ``(parent, k)``, all in lockstep.

    Each parent must come from :func:`collect` (or :func:`branch`) with
    ``RolloutConfig(snapshots=True)`` and the same prompt format as ``cfg``. A pool env
    is restored to the state turn ``k`` acted from and the policy acts again from there, with
    the same prompt the parent's turn ``k`` had.

    Args:
        policy: generates actions.
        pool: envs of the parent's id (grown to ``len(parents) * n`` if needed).
        parents: (trajectory, turn index) pairs, ``0 <= k < len(trajectory.turns)``.
        n: continuations per pair.
        cfg: generation settings (``cfg.snapshots`` also keeps snapshots of the new turns).
        gumbel_keys: one key per returned trajectory (``len(parents) * n``); turn ``k`` of a
            continuation samples with ``key * 1000 + k`` like :func:`collect`, so a branch
            given its parent's key replays the parent's own continuation.
        env_keys: one key per returned trajectory: its env is keyed with
            ``set_rng(key)`` after the restore, so continuations with different keys draw
            independent env-side noise and continuations with equal keys the same (common
            random numbers); None keeps the noise the snapshot's generator gives.
        first_keys: one key per returned trajectory: the first turn the continuation
            generates (turn ``k``, or ``k + 1`` when ``forced``) samples with this key as is,
            its later turns with ``gumbel_keys`` as above. A twin given its parent's gumbel
            and env keys and a first key of its own draws a fresh action at turn ``k`` and
            then shares the parent's noise wherever their contexts line up.
        forced: the continuation first takes the parent's own action at turn ``k``
            (teacher-forced: the parent's prompt, response and behaviour log-probs, the env's
            new answer, ``extras["forced"] = True``) and the policy acts from turn ``k + 1``;
            a Monte-Carlo estimate of Q(s_k, a_k) rather than V(s_k).

    Returns:
        ``len(parents) * n`` trajectories, pair by pair: turns ``0..k-1`` are copies of the
        parent's (same tensors, ``extras["shared"] = True``), then the new turns; same
        ``group_id``, task and seed as the parent, ``parent_id = parent.node_id``,
        ``branch_turn = k``, ``node_id = f"{parent.node_id}/{k}.{j}"`` (``j`` counts the
        continuations of that node within this call) and the continuation's own outcome.

    Raises:
        ValueError: the pool's env has no snapshots, a parent turn has none, ``k`` is out of
            range, the layouts differ or the key count is wrong.
    """
    if not pool.supports_snapshot:
        raise ValueError(
            f"branch needs env snapshots, and {pool.env_id} does not support snapshot()/restore()"
        )
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if first_keys is not None and gumbel_keys is None:
        raise ValueError("first_keys need gumbel_keys for the turns after the first")
    _check_keys(len(parents) * n, gumbel_keys=gumbel_keys, env_keys=env_keys, first_keys=first_keys)
    pool.grow(len(parents) * n)
    envs = iter(pool.envs)
    slots: list[_Slot] = []
    seen: dict[tuple[str, int], int] = {}
    for parent, k in parents:
        _check_parent(parent, k, cfg)
        turn = parent.turns[k]
        node = parent.node_id or parent.group_id
        past = parent.turns[: k + 1]
        for _ in range(n):
            j = seen[(node, k)] = seen.get((node, k), -1) + 1
            env = next(envs)
            unwrapped: Any = env.unwrapped
            unwrapped.restore(turn.extras["snapshot"])
            traj = Trajectory(
                task_id=parent.task_id,
                group_id=parent.group_id,
                seed=parent.seed,
                turns=[_shared(t) for t in past[:k]],
                node_id=f"{node}/{k}.{j}",
                parent_id=parent.node_id,
                branch_turn=k,
                prompt=cfg.prompt,
            )
            history = History(
                policy,
                cfg.prompt,
                [t.extras["observation"] for t in past],
                [t.response_ids for t in past[:k]],
                privileged_context=_privileged_context(past[0]),
            )
            n_slot = len(slots)
            if env_keys is not None:
                unwrapped.set_rng(env_keys[n_slot])
            key = None if gumbel_keys is None else gumbel_keys[n_slot]
            first = None
            if first_keys is not None:
                first = (k + 1 if forced else k, first_keys[n_slot])
            obs, info = turn.extras["observation"], turn.extras["observation_info"]
            slots.append(_Slot(env, traj, obs, info, history, key, first))
    active = slots
    if forced:
        active = [
            s
            for s, (parent, k) in zip(slots, _each(parents, n), strict=True)
            if _force(s, parent.turns[k], cfg, cfg.snapshots)
        ]
    _play(policy, pool, active, cfg, snapshots=cfg.snapshots)
    return [s.traj for s in slots]


def _check_keys(n: int, **keys: list[int] | None) -> None:
    """Refuse a key list (by its argument name) that does not give one key per rollout."""
    for name, given in keys.items():
        if given is not None and len(given) != n:
            raise ValueError(f"{len(given)} {name} for {n} rollouts")


def _each(parents: list[tuple[Trajectory, int]], n: int) -> list[tuple[Trajectory, int]]:
    """Each ``(parent, k)`` pair repeated ``n`` times, in :func:`branch`'s slot order."""
    return [pair for pair in parents for _ in range(n)]


def _force(slot: _Slot, turn: Turn, cfg: RolloutConfig, snapshots: bool) -> bool:
    """Take ``turn``'s own action in ``slot`` (teacher-forced); whether the episode goes on."""
    return _step_slot(
        slot,
        turn.prompt_ids.tolist(),
        [int(i) for i in turn.response_ids.tolist()],
        turn.extras["action"],
        turn.logp_old,
        turn.allowed_tokens,
        cfg,
        snapshots,
        forced=True,
    )


def replay(
    policy: Policy,
    pool: EnvPool | Any,
    task_id: str,
    seed: int | None,
    actions: Sequence[str],
    cfg: RolloutConfig,
    *,
    group_id: str | None = None,
    node_id: str | None = None,
    score: bool = True,
) -> Trajectory:
    """Play the action texts ``actions`` teacher-forced from ``reset(seed, task_id)``.

    The result is the turns :func:`collect` records when the policy happens to choose exactly
    these actions.

    Turn ``k`` gets the prompt the policy would have seen there (``cfg.prompt``), the
    response ``tokenizer.encode(action) + [eos]``, the env's reward (minus
    ``cfg.invalid_penalty`` for a rejected action), the done flags, ``state_key``, ``info``,
    ``extras["action"]`` (and the snapshot extras when ``cfg.snapshots`` and the env has
    them), and, where ``cfg.constrained`` and the state lists admissible actions,
    ``allowed_tokens``: the decoding mask along the response (None for an action outside the
    list, which constrained decoding could not have produced). Deterministic envs make this
    the rollout that ``actions`` stand for.

    Args:
        policy: supplies the tokenizer (prompts) and, with ``score``, the log-probs.
        pool: an :class:`EnvPool` (its first env is reset and played) or an env.
        task_id: the task, passed as ``options={"task_id": task_id}``.
        seed: the reset seed.
        actions: the action texts sent to ``env.step``, in order.
        cfg: prompt format, constraint and penalty (generation settings are unused).
        group_id: the trajectory's group id (default ``f"{task_id}@{seed}"``, as collect).
        node_id: the trajectory's node id (default None).
        score: fill every turn's ``logp_old`` with one ``policy.logprobs`` call over all
            turns (under the decoding masks and ``cfg.temperature``); otherwise leave it
            None.

    Returns:
        The trajectory, its ``prompt`` ``cfg.prompt``; outcome,
        ``terminated`` and ``truncated`` come from the last step when the episode ended
        there (actions that stop before the end leave both flags False and outcome 0).

    Raises:
        ValueError: the episode ended before the last action.
    """
    env: Any = pool.envs[0] if isinstance(pool, EnvPool) else pool
    tokenizer = policy.tokenizer
    snapshots = cfg.snapshots and bool(getattr(env.unwrapped, "supports_snapshot", False))
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    group = group_id if group_id is not None else f"{task_id}@{seed}"
    traj = Trajectory(
        task_id=task_id, group_id=group, seed=seed, node_id=node_id, prompt=cfg.prompt
    )
    history = History(policy, cfg.prompt)
    history.observe(obs, info)
    slot = _Slot(env, traj, obs, info, history, None)
    for k, action in enumerate(actions):
        if traj.terminated or traj.truncated:
            raise ValueError(
                f"replay of {group}: the episode ended at turn {k - 1}, before action "
                f"{k} of {len(actions)} ({action!r})"
            )
        body = list(tokenizer.encode(action))
        response = [*body, tokenizer.eos_id]
        mask = None
        if cfg.constrained and slot.info.get("admissible_actions"):
            choices = encode_actions(tokenizer, slot.info["admissible_actions"])
            if tuple(body) in choices:
                mask = allowed_tokens(response, choices, tokenizer.eos_id)
        _step_slot(slot, history.prompt(), response, action, None, mask, cfg, snapshots)
    if score and traj.turns:
        _score_replay(policy, traj.turns)
    return traj


def _score_replay(policy: Policy, turns: list[Turn]) -> None:
    """Fill ``logp_old`` of ``turns`` with one ``policy.logprobs`` call.

    Each turn is scored under its decoding mask and sampling temperature: the distribution
    the rollout engine would have drawn it from.
    """
    logps = logprobs_of(
        policy.logprobs,
        [t.prompt_ids for t in turns],
        [t.response_ids for t in turns],
        [t.allowed_tokens for t in turns],
        [t.temperature for t in turns],
        grad=False,
    )
    for turn, logp in zip(turns, logps, strict=True):
        turn.logp_old = logp.detach().float()


def _check_parent(parent: Trajectory, k: int, cfg: RolloutConfig) -> None:
    if not 0 <= k < len(parent.turns):
        raise ValueError(
            f"branch turn {k} is out of range for {parent.node_id} ({len(parent.turns)} turns)"
        )
    if "snapshot" not in parent.turns[k].extras:
        raise ValueError(
            f"turn {k} of {parent.node_id or parent.group_id} has no snapshot: collect the "
            "parents with RolloutConfig(snapshots=True) on an env that supports snapshots"
        )
    if parent.prompt != cfg.prompt:
        raise ValueError(
            f"the parent was played with {parent.prompt} but cfg asks for {cfg.prompt}; "
            "a branch must continue the parent's prompts"
        )


def _shared(turn: Turn) -> Turn:
    """A copy of a parent's turn for a branch's shared prefix.

    Tensors are shared, the ``extras`` and ``info`` dicts are not.
    """
    extras = {**turn.extras, "shared": True}
    return dataclasses.replace(turn, info=dict(turn.info), extras=extras)


def turn_reward(reward: float, ended: bool, info: dict[str, Any], cfg: RolloutConfig) -> float:
    """A turn's own reward: the env's reward for the step, less the invalid-action penalty.

    The last step's env reward is the trajectory's ``outcome`` instead, so that outcome-based
    variants read it there and the return ``sum(turn.reward) + outcome`` counts it once.
    """
    penalty = 0.0 if info.get("action_valid", True) else cfg.invalid_penalty
    return (0.0 if ended else float(reward)) - penalty


def _privileged_context(turn: Turn) -> str | None:
    """The privileged view's text of the episode a snapshotted first turn belongs to."""
    info = turn.extras.get("observation_info") or {}
    context = info.get("privileged_context")
    return None if context is None else str(context)


def _play(
    policy: Policy, pool: EnvPool, slots: list[_Slot], cfg: RolloutConfig, *, snapshots: bool
) -> None:
    """Step every slot until its episode ends (the one turn loop of collect and branch)."""
    active = list(slots)
    while active:
        active = _turn(policy, pool, cfg, active, snapshots)


def _turn(
    policy: Policy, pool: EnvPool, cfg: RolloutConfig, active: list[_Slot], snapshots: bool
) -> list[_Slot]:
    """One generation for every active rollout, one env step each; the still-active ones.

    The pool steps all the envs in one batch.
    """
    prompts = [s.history.prompt() for s in active]
    choices = [action_choices(policy, s.info, cfg.constrained) for s in active]
    if cfg.prompt.layout == "concat":
        _check_context(policy, cfg, active, prompts, choices)
    keys = None
    if any(s.key is not None for s in active):
        keys = [_turn_key(s) for s in active]
    acted = act(
        policy,
        prompts,
        choices,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        greedy=cfg.greedy,
        gumbel_keys=keys,
    )
    step_many = getattr(pool, "step_many", None) or step_each  # a duck-typed pool steps each
    stepped = step_many([s.env for s in active], [a.text for a in acted], snapshots)
    still = []
    for s, a, (snap, result) in zip(active, acted, stepped, strict=True):
        out, choice = a.out, a.choices
        mask = None if choice is None else allowed_tokens(out.ids, choice, policy.tokenizer.eos_id)
        logps = torch.tensor(out.logps, dtype=torch.float32)
        if _record(s, a.prompt, out.ids, a.text, logps, mask, cfg, snap, result):
            still.append(s)
    return still


def _step_slot(
    s: _Slot,
    prompt: list[int],
    ids: list[int],
    action: str,
    logp_old: torch.Tensor | None,
    mask: list[list[int]] | None,
    cfg: RolloutConfig,
    snapshots: bool,
    *,
    forced: bool = False,
) -> bool:
    """Send ``action`` to the slot's env and record the turn; whether the episode goes on."""
    snap = s.env.unwrapped.snapshot() if snapshots else None
    result = s.env.step(action)
    return _record(s, prompt, ids, action, logp_old, mask, cfg, snap, result, forced=forced)


def _record(
    s: _Slot,
    prompt: list[int],
    ids: list[int],
    action: str,
    logp_old: torch.Tensor | None,
    mask: list[list[int]] | None,
    cfg: RolloutConfig,
    snap: bytes | None,
    result: tuple[Any, float, bool, bool, dict[str, Any]],
    *,
    forced: bool = False,
) -> bool:
    """Record the turn that took ``action`` and gave ``result``; whether the episode goes on.

    ``snap`` is the state the turn acted from, where snapshots are kept.
    """
    extras: dict[str, Any] = {"action": action, "observation": s.obs}
    if PRIVILEGED_KEY in s.info:  # a privileged env: the teachers' view of this state
        extras[PRIVILEGED_KEY] = str(s.info[PRIVILEGED_KEY])
    if forced:
        extras["forced"] = True
    if snap is not None:
        extras.update(snapshot=snap, observation_info=s.info)
    state_key = s.info.get("state_key")
    o, reward, terminated, truncated, info = result
    s.traj.turns.append(
        Turn(
            prompt_ids=torch.tensor(prompt, dtype=torch.long),
            response_ids=torch.tensor(ids, dtype=torch.long),
            reward=turn_reward(reward, terminated or truncated, info, cfg),
            terminated=terminated,
            truncated=truncated,
            state_key=state_key,
            info=info,
            logp_old=logp_old,
            temperature=cfg.temperature,
            allowed_tokens=mask,
            extras=extras,
        )
    )
    s.obs, s.info = o, info
    s.history.act(ids)
    s.history.observe(o)
    if terminated or truncated:
        _end(s.traj, float(reward), terminated, truncated, s.history)
        return False
    return True


def _end(traj: Trajectory, reward: float, terminated: bool, truncated: bool, h: History) -> None:
    """Close a rollout: its outcome and done flags.

    A truncated rollout ended at a state the episode would have gone on from: it keeps the
    prompt of that state in ``extras["next_prompt"]``, so a critic can bootstrap from it.
    """
    traj.outcome, traj.terminated, traj.truncated = reward, terminated, truncated
    if truncated and not terminated:
        traj.extras["next_prompt"] = h.prompt()


def _turn_key(slot: _Slot) -> int:
    """The Gumbel key of the slot's next turn (its first key there, else key * 1000 + turn)."""
    if slot.key is None:
        raise ValueError("gumbel keys must be given for every rollout or for none")
    turn = len(slot.traj.turns)
    if slot.first_key is not None and slot.first_key[0] == turn:
        return slot.first_key[1]
    return slot.key * 1_000 + turn


def _check_context(
    policy: Policy,
    cfg: RolloutConfig,
    active: list[_Slot],
    prompts: list[list[int]],
    choices: list[Choices | None],
) -> None:
    """Refuse a concat prompt that would not fit with the longest response the batch allows.

    A constrained row's budget grows to its longest choice; a prompt that does not fit would
    be cut by the policy.
    """
    limit = context_limit(policy)
    if limit is None:
        return
    depths = [len(seq) + 1 for choice in choices if choice is not None for seq in choice]
    budget = max([cfg.max_new_tokens, *depths])
    for s, prompt in zip(active, prompts, strict=True):
        if len(prompt) + budget - 1 > limit:
            raise ValueError(
                f"layout 'concat': turn {len(s.traj.turns)} of {s.traj.node_id} has a "
                f"{len(prompt)}-token history and up to {budget} response tokens, more than "
                f"the policy's context limit of {limit} tokens; use layout='per-step' "
                "(optionally with history=W), fewer turns (the env's max_turns) or a policy "
                "with a longer context (TinyPolicy max_len)"
            )
