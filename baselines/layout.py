"""The two sample layouts of CREDIT.md §0: how prompts are built, and how turns are scored.

Every rollout is stored per turn (``Batch`` keys ``(i, k)``) in both layouts, so credit
variants keep per-turn identity and ``state_key``; the layouts differ in what a turn's prompt
holds:

* ``per-step`` with window ``W`` (``RolloutConfig.history``): the last ``W`` (observation,
  action) pairs, then the current observation. ``W = 0`` is the current observation alone,
  exactly :func:`~agentgym.baselines.policies.agent.prompt_ids`.
* ``concat`` (Search-R1 style): the whole episode so far. Turn ``k``'s prompt is exactly turn
  ``k-1``'s prompt + response + the tokens of observation ``k``, so the last turn's prompt +
  response holds every turn, and :func:`turn_logprobs` scores a rollout with one sequence
  instead of one per turn (observation tokens are dropped by keeping only response positions).

Token encoding of a history (one convention for rollout, training and
:class:`~agentgym.baselines.policies.agent.PolicyAgent`), built by :class:`History`:

* the oldest observation in the prompt: ``prompt_ids(policy, obs)`` (TinyPolicy: ``<bos>``
  first);
* each action: its token ids as generated, eos included;
* each later observation: ``policy.tokenizer.encode(OBS_SEPARATOR + obs)``, with
  ``OBS_SEPARATOR = "\\n"``.

Segments are encoded one by one and concatenated (never the joined text re-encoded), which is
what makes the concat prefix property exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.credit.batch import Batch, Key, Trajectory
from agentgym.baselines.policies.agent import prompt_ids

LAYOUTS = ("per-step", "concat")
"""The sample layouts ``RolloutConfig.layout`` accepts."""
OBS_SEPARATOR = "\n"
"""Text put before every observation that follows an action in a history prompt."""

Scorer = Callable[..., list[Tensor]]


class History:
    """The observations seen and the responses emitted so far in one episode; builds prompts.

    ``observations`` holds one more item than ``responses`` while the policy is to act: the
    current observation is the last. Encoded segments are cached, so building the prompt of
    every turn costs one encoding per observation.
    """

    def __init__(
        self,
        policy: Any,
        observations: Sequence[Any] = (),
        responses: Sequence[Sequence[int] | Tensor] = (),
    ):
        """Start from past ``observations`` and ``responses`` (token ids as generated)."""
        self.policy = policy
        self.observations: list[Any] = list(observations)
        self.responses: list[list[int]] = [_ids(r) for r in responses]
        self._first: dict[int, list[int]] = {}
        self._later: dict[int, list[int]] = {}

    def observe(self, observation: Any) -> None:
        """Append the observation the policy acts from next."""
        self.observations.append(observation)

    def act(self, response_ids: Sequence[int] | Tensor) -> None:
        """Append the response to the current observation."""
        self.responses.append(_ids(response_ids))

    def prompt(self, window: int | None, pin_first: bool = False) -> list[int]:
        """The prompt for the current (last) observation.

        Args:
            window: how many previous (observation, action) pairs precede the current
                observation (0: the observation alone); None: the whole episode (concat).
            pin_first: also keep the episode's first observation (where text games state
                the task) at the head of the prompt when the window has moved past it.

        Raises:
            ValueError: there is no current observation, or responses and observations do
                not alternate.
        """
        k = len(self.observations) - 1
        if k < 0 or len(self.responses) != k:
            raise ValueError(
                f"a history prompt needs one more observation than responses, got "
                f"{len(self.observations)} observations and {len(self.responses)} responses"
            )
        if window is not None and window < 0:
            raise ValueError(f"history window must be >= 0 or None, got {window}")
        start = 0 if window is None else max(0, k - window)
        if pin_first and start > 0:
            out = [*self._segment(0, first=True), *self._segment(start, first=False)]
        else:
            out = list(self._segment(start, first=True))
        for j in range(start, k):
            out += self.responses[j]
            out += self._segment(j + 1, first=False)
        return out

    def _segment(self, j: int, *, first: bool) -> list[int]:
        cache = self._first if first else self._later
        if j not in cache:
            cache[j] = observation_ids(self.policy, self.observations[j], first=first)
        return cache[j]


def observation_ids(policy: Any, observation: Any, *, first: bool) -> list[int]:
    """Tokens of one observation inside a history prompt: ``prompt_ids`` for the oldest one
    (``first``), else the tokenizer's encoding of ``OBS_SEPARATOR + observation``."""
    if first:
        return prompt_ids(policy, observation)
    text = observation if isinstance(observation, str) else str(observation)
    return list(policy.tokenizer.encode(OBS_SEPARATOR + text))


def history_prompt(
    policy: Any,
    observations: Sequence[Any],
    responses: Sequence[Sequence[int] | Tensor],
    window: int | None,
    pin_first: bool = False,
) -> list[int]:
    """The prompt for ``observations[-1]`` given the episode so far (see :class:`History`).

    Args:
        policy: supplies the tokenizer (and ``encode_prompt`` for the oldest observation).
        observations: every observation of the episode, the current one last.
        responses: the token ids of every earlier action, eos included
            (``len(responses) == len(observations) - 1``).
        window: previous (observation, action) pairs to include; None for all (concat).
        pin_first: keep the first observation at the head once the window has left it.
    """
    return History(policy, observations, responses).prompt(window, pin_first)


def context_limit(policy: Any) -> int | None:
    """The most tokens (prompt + response) the policy can attend over, or None if unknown:
    ``config.max_len`` (TinyPolicy) or the model's ``max_position_embeddings`` (HFPolicy)."""
    limit = getattr(getattr(policy, "config", None), "max_len", None)
    if isinstance(limit, int):
        return limit
    model = getattr(policy, "model", None)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return limit if isinstance(limit, int) else None


# -- scoring -------------------------------------------------------------------------------


def turn_logprobs(policy: Any, batch: Batch, keys: Sequence[Key], *, grad: bool) -> list[Tensor]:
    """``log π(y_t)`` of every response token of the turns at ``keys``, one [L] tensor per key
    aligned with that turn's ``response_ids``, as ``policy.logprobs`` per turn would give.

    Per-step trajectories are scored as ``policy.logprobs(prompts, responses, grad=grad)``
    over their turns (exactly that call when the batch holds no concat rollout). A
    trajectory marked ``extras["layout"] == "concat"`` is scored as ONE sequence: its last
    selected turn's prompt + response, split after its first selected turn's prompt; each
    turn's log-probs are the slice at its response positions (observation tokens in between
    are scored and dropped). All rows go through a single ``policy.logprobs`` call. Such a
    trajectory falls back to per-turn rows when the prefix property does not hold for a
    selected turn (an edited rollout) or the sequence exceeds :func:`context_limit`.
    """
    return _score_turns(policy.logprobs, policy, batch, keys, grad=grad, masked=True)


def turn_values(policy: Any, batch: Batch, keys: Sequence[Key], *, grad: bool) -> list[Tensor]:
    """``policy.values`` per turn at ``keys``, with the same one-sequence-per-concat-rollout
    scoring as :func:`turn_logprobs`."""
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
    """Score the turns at ``keys`` (see :func:`turn_logprobs`); ``masked``: pass each
    turn's ``allowed_tokens`` so log-probs are those of the distribution decoding sampled."""
    limit = context_limit(policy)
    by_traj: dict[int, list[int]] = {}
    for k_i, k_turn in keys:
        by_traj.setdefault(k_i, []).append(k_turn)
    concat: dict[int, tuple[Tensor, int] | None] = {}
    for i, turns in by_traj.items():
        traj = batch.trajectories[i]
        if traj.extras.get("layout") == "concat":
            concat[i] = concat_sequence(traj, turns, limit)

    prompts: list[Tensor] = []
    responses: list[Tensor] = []
    allowed: list[list[list[int] | None]] = []  # per row, per response position
    row_of: dict[int, int] = {}  # concat trajectory -> its row
    spans: list[tuple[int, int, int]] = []  # per key: (row, start, length)
    for key in keys:
        i, _ = key
        turn = batch.turn(key)
        length = len(turn.response_ids)
        seq = concat.get(i)
        mask: list[list[int] | None] = (
            [None] * length if turn.allowed_tokens is None else list(turn.allowed_tokens)
        )
        if seq is None:
            spans.append((len(prompts), 0, length))
            prompts.append(turn.prompt_ids)
            responses.append(turn.response_ids)
            allowed.append(mask)
            continue
        full, split = seq
        if i not in row_of:
            row_of[i] = len(prompts)
            prompts.append(full[:split])
            responses.append(full[split:])
            allowed.append([None] * (len(full) - split))  # observation tokens: unmasked
        start = len(turn.prompt_ids) - split
        allowed[row_of[i]][start : start + length] = mask
        spans.append((row_of[i], start, length))
    if not prompts:
        return []
    if masked and any(a is not None for row in allowed for a in row):
        scored = score(prompts, responses, grad=grad, allowed_tokens=allowed)
    else:
        scored = score(prompts, responses, grad=grad)
    return [scored[row][start : start + length] for row, start, length in spans]


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


def _ids(x: Sequence[int] | Tensor) -> list[int]:
    if isinstance(x, Tensor):
        return [int(v) for v in x.reshape(-1).tolist()]
    return [int(v) for v in x]
