"""Scoring turns under the two sample layouts of CREDIT.md §0.

Prompts are built in :mod:`agentgym.baselines.prompt`.

Every rollout is stored per turn (``Batch`` keys ``(i, k)``) in both layouts, so credit
variants keep per-turn identity and ``state_key``. A per-step turn is scored as its own
(prompt, response) row. A concat rollout (``traj.prompt.layout == "concat"``) holds every turn
in its last turn's prompt + response, so :func:`turn_logprobs` scores it as ONE sequence and
keeps only the response positions (observation tokens in between are dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.batch import Batch, Key, Trajectory

Scorer = Callable[..., list[Tensor]]


def context_limit(policy: Any) -> int | None:
    """The most tokens (prompt + response) the policy can attend over, or None if unknown.

    That is ``config.max_len`` (TinyPolicy) or the model's ``max_position_embeddings``
    (HFPolicy).
    """
    limit = getattr(getattr(policy, "config", None), "max_len", None)
    if isinstance(limit, int):
        return limit
    model = getattr(policy, "model", None)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return limit if isinstance(limit, int) else None


# -- scoring -------------------------------------------------------------------------------


def turn_logprobs(policy: Any, batch: Batch, keys: Sequence[Key], *, grad: bool) -> list[Tensor]:
    """``log π(y_t)`` of every response token of the turns at ``keys``, one [L] tensor per key.

    Each is aligned with that turn's ``response_ids``, as ``policy.logprobs`` per turn would
    give.

    Per-step trajectories are scored as ``policy.logprobs(prompts, responses, grad=grad)``
    over their turns (exactly that call when the batch holds no concat rollout). A
    trajectory whose prompt format has the concat layout is scored as ONE sequence: its last
    selected turn's prompt + response, split after its first selected turn's prompt; each
    turn's log-probs are the slice at its response positions (observation tokens in between
    are scored and dropped). All rows go through a single ``policy.logprobs`` call. Such a
    trajectory falls back to per-turn rows when the prefix property does not hold for a
    selected turn (an edited rollout) or the sequence exceeds :func:`context_limit`.
    """
    return _score_turns(policy.logprobs, policy, batch, keys, grad=grad, masked=True)


def turn_values(policy: Any, batch: Batch, keys: Sequence[Key], *, grad: bool) -> list[Tensor]:
    """``policy.values`` per turn at ``keys``.

    Concat rollouts are scored as one sequence each, as in :func:`turn_logprobs`.
    """
    return _score_turns(policy.values, policy, batch, keys, grad=grad)


def _score_turns(
    score: Scorer,
    policy: Any,
    batch: Batch,
    keys: Sequence[Key],
    *,
    grad: bool,
    masked: bool = False,
) -> list[Tensor]:
    """Score the turns at ``keys`` (see :func:`turn_logprobs`).

    ``masked``: log-probs of the distribution decoding sampled from, under each turn's
    ``allowed_tokens`` and sampling temperature.
    """
    limit = context_limit(policy)
    by_traj: dict[int, list[int]] = {}
    for k_i, k_turn in keys:
        by_traj.setdefault(k_i, []).append(k_turn)
    concat: dict[int, tuple[Tensor, int] | None] = {}
    for i, turns in by_traj.items():
        traj = batch.trajectories[i]
        if traj.prompt is not None and traj.prompt.layout == "concat":
            concat[i] = concat_sequence(traj, turns, limit)
    rows = _Rows()
    for key in keys:
        rows.add(batch, key, concat.get(key[0]))
    if not rows.prompts:
        return []
    if masked:
        scored = logprobs_of(
            score, rows.prompts, rows.responses, rows.allowed, rows.temperatures, grad=grad
        )
    else:
        scored = score(rows.prompts, rows.responses, grad=grad)
    return [scored[row][start : start + length] for row, start, length in rows.spans]


class _Rows:
    """The rows of one scoring call: a per-step turn is a row; a concat rollout is one row."""

    def __init__(self) -> None:
        """No rows yet."""
        self.prompts: list[Tensor] = []
        self.responses: list[Tensor] = []
        self.allowed: list[list[list[int] | None]] = []  # per row, per response position
        self.temperatures: list[float] = []
        self.spans: list[tuple[int, int, int]] = []  # per key: (row, start, length)
        self._row_of: dict[int, int] = {}  # concat trajectory -> its row

    def add(self, batch: Batch, key: Key, seq: tuple[Tensor, int] | None) -> None:
        """Add the turn at ``key``: its own row, or its slice of its rollout's one row."""
        i, _ = key
        turn = batch.turn(key)
        length = len(turn.response_ids)
        mask: list[list[int] | None] = (
            [None] * length if turn.allowed_tokens is None else list(turn.allowed_tokens)
        )
        if seq is None:
            self.spans.append((len(self.prompts), 0, length))
            self._append(turn.prompt_ids, turn.response_ids, mask, turn.temperature)
            return
        full, split = seq
        if i not in self._row_of:
            self._row_of[i] = len(self.prompts)
            # observation tokens stay unmasked; a rollout samples at one temperature
            self._append(full[:split], full[split:], [None] * (len(full) - split), turn.temperature)
        start = len(turn.prompt_ids) - split
        self.allowed[self._row_of[i]][start : start + length] = mask
        self.spans.append((self._row_of[i], start, length))

    def _append(
        self, prompt: Tensor, response: Tensor, mask: list[list[int] | None], temperature: float
    ) -> None:
        self.prompts.append(prompt)
        self.responses.append(response)
        self.allowed.append(mask)
        self.temperatures.append(temperature)


def logprobs_of(
    score: Scorer,
    prompts: list[Tensor],
    responses: list[Tensor],
    allowed: Sequence[Sequence[Sequence[int] | None] | None],
    temperatures: Sequence[float],
    *,
    grad: bool,
) -> list[Tensor]:
    """``score(prompts, responses)`` under the decoding masks and sampling temperatures.

    Each keyword goes to ``score`` (a policy's ``logprobs``) only when it changes something
    (a mask somewhere, a temperature other than 1), so a plain policy keeps its plain call.
    """
    kwargs: dict[str, Any] = {}
    if any(a is not None for row in allowed if row is not None for a in row):
        kwargs["allowed_tokens"] = allowed
    if any(t != 1.0 for t in temperatures):
        kwargs["temperature"] = list(temperatures)
    return score(prompts, responses, grad=grad, **kwargs)


def concat_sequence(
    traj: Trajectory, turns: Sequence[int], limit: int | None = None
) -> tuple[Tensor, int] | None:
    """The one sequence that holds ``traj``'s turns ``turns`` and where to split it.

    Returns:
        ``(sequence, split)``: the last listed turn's prompt + response, and the length of
        the first listed turn's prompt; or None when a listed turn's prompt + response is
        not a prefix of that sequence, or the sequence (minus its last token, which is only
        a target) exceeds ``limit``.
    """
    if not turns:
        return None
    first, last = traj.turns[min(turns)], traj.turns[max(turns)]
    full = torch.cat([last.prompt_ids.reshape(-1), last.response_ids.reshape(-1)])
    if limit is not None and len(full) - 1 > limit:
        return None
    for k in set(turns):
        turn = traj.turns[k]
        p, r = turn.prompt_ids.reshape(-1), turn.response_ids.reshape(-1)
        end = len(p) + len(r)
        if end > len(full) or not (
            torch.equal(full[: len(p)], p.to(full.device))
            and torch.equal(full[len(p) : end], r.to(full.device))
        ):
            return None
    split = len(first.prompt_ids.reshape(-1))
    if split == 0:
        return None
    return full, split
