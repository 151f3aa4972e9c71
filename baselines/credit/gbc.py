"""GBC (CREDIT.md §19) as token weights: blame through gradient connections between turns.

One agent's turns are the calls of a computation graph: turn ``k``'s prompt holds its own
context (observations, instructions) and, as blocks from upstream calls, the earlier turns'
responses that its history window shows (``--history N`` or the concat layout; with the
observation alone no turn reads another, and the variant refuses to start). Per rollout:

1. per turn, the gradient of ``Σ log p(response | prompt)`` with respect to the prompt's
   input embeddings (one forward and backward pass, :func:`~..gbc.attribution.connect`),
   reduced per block (``reduce``) and normalised;
2. the outcome enters the last turn and is pushed back: a turn keeps the share of its own
   context and passes each earlier response's share to that turn
   (:func:`~..gbc.attribution.propagate`); the shares sum to 1;
3. every token of turn ``k`` gets weight ``w_k = 1 - α + α · K · share_k`` (mean 1 over the
   rollout's ``K`` turns): the advantage of the slot's estimator is multiplied by it, for
   successes and failures alike (the same graph says which turns the outcome rests on).

A ``shape`` hook, so it composes with any estimator (``grpo+gbc``). The policy needs block
hooks (the tiny policy; Hugging Face models on the lean forward).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentgym.baselines.credit import Batch, Context, CreditVariant, register
from agentgym.baselines.gbc.attribution import REDUCERS, Block, Call, connect, propagate
from agentgym.core.errors import BadInput


@register("gbc")
class GBC(CreditVariant):
    """GBC (CREDIT.md §19): turn weights from blame pushed back through input gradients."""

    @dataclass(frozen=True)
    class Config:
        """Settings of the gbc weights."""

        reduce: str = "mean_l1"
        """How a block's token gradients become its weight: mean_l1, max_l1, mean_product
        or max_product (gradient × input)."""
        alpha: float = 1.0
        """Mix of the blame weights: 0 leaves the advantages alone, 1 uses them fully."""

        def __post_init__(self) -> None:
            """Refuse unknown reductions and an alpha outside [0, 1]."""
            if self.reduce not in REDUCERS:
                raise BadInput(f"gbc reduce must be one of {', '.join(REDUCERS)}")
            if not 0.0 <= self.alpha <= 1.0:
                raise BadInput(f"gbc alpha must be in [0, 1], got {self.alpha}")

    def shape(self, batch: Batch, ctx: Context) -> None:
        """Multiply each turn's advantages by its blame weight."""
        if batch.advantages is None:
            return
        policy = ctx.need_policy()
        if not callable(getattr(policy, "set_block_hook", None)):
            raise BadInput("gbc needs a policy with block hooks (the tiny policy, or a plain "
                           "GPT-2 or Llama model without LoRA)")  # fmt: skip
        fmt = getattr(ctx.rollout, "prompt", None)
        if fmt is not None and fmt.layout == "per-step" and fmt.history == 0:
            raise BadInput("gbc needs earlier turns in the prompt: --history 1 or more, or "
                           "--layout concat")  # fmt: skip
        start, passes, low, high = time.perf_counter(), 0, float("inf"), 0.0
        for i, traj in enumerate(batch.trajectories):
            weights = self.turn_weights(policy, [t.prompt_ids.tolist() for t in traj.turns],
                                        [t.response_ids.tolist() for t in traj.turns])  # fmt: skip
            passes += len(weights)
            for k, w in enumerate(weights):
                if (i, k) in batch.advantages:
                    batch.advantages[(i, k)] = batch.advantages[(i, k)] * w
                low, high = min(low, w), max(high, w)
        batch.metrics["gbc/passes"] = float(passes)
        batch.metrics["gbc/weight_min"] = low if passes else 1.0
        batch.metrics["gbc/weight_max"] = high if passes else 1.0
        batch.metrics["gbc/seconds"] = time.perf_counter() - start

    def turn_weights(
        self, policy: Any, prompts: Sequence[list[int]], responses: Sequence[list[int]]
    ) -> list[float]:
        """``w_k`` per turn of one rollout (see the module docstring)."""
        calls = turn_calls(prompts, responses)
        if not calls:
            return []
        for call in calls:
            connect(policy, call, self.cfg.reduce)
        own, _ = propagate(calls, 1.0)
        total = sum(own) or 1.0
        n, a = len(calls), self.cfg.alpha
        return [1.0 - a + a * n * share / total for share in own]


def turn_calls(prompts: Sequence[list[int]], responses: Sequence[list[int]]) -> list[Call]:
    """The turns as calls: each earlier response its prompt shows is a block from that turn.

    A response is found as the last occurrence of its ids before the later ones found; the
    rest of the prompt's tokens are the turn's own block (its own context).
    """
    calls = []
    for k, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        blocks, end = [], len(prompt)
        for j in range(k - 1, -1, -1):
            at = _rfind(prompt, responses[j], end)
            if at < 0:
                break  # older turns left the window
            blocks.append(Block(f"turn:{j}", j, at, at + len(responses[j])))
            end = at
        taken = {p for b in blocks for p in range(b.start, b.end)}
        rest = [p for p in range(len(prompt)) if p not in taken]
        own = Block("own", None, 0, len(prompt), own=True, positions=rest)
        calls.append(Call("agent", k, list(prompt), list(response), "", [own, *blocks]))
    return calls


def _rfind(hay: list[int], needle: list[int], end: int) -> int:
    """The start of the last occurrence of ``needle`` in ``hay[:end]``, or -1."""
    n = len(needle)
    for at in range(end - n, -1, -1):
        if hay[at : at + n] == needle:
            return at
    return -1
