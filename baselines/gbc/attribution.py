"""GBC (CREDIT.md §19): connection weights from input gradients, and blame pushed through them.

A multi-agent run is a computation graph of calls. Each call (an agent's one generation) reads
a prompt split into marked blocks: its own role text, and blocks that other calls or the env
wrote (a plan, an observation holding tool results). The connection weight from a block to the
call is the gradient of the call's generation log-probability ``Σ_t log p(y_t | x)`` with
respect to the input embeddings of the block's tokens, reduced over the block:

* ``mean_l1``: the mean over the block's tokens of ``‖∂/∂e_t‖₁`` (the paper's default);
* ``max_l1``: their maximum;
* ``mean_product`` / ``max_product``: the same over ``|∂/∂e_t · e_t|`` (gradient × input).

The gradient comes from one teacher-forced forward and backward pass per call through the
policy's block hook at layer 0 (:data:`~agentgym.baselines.policies.base.BlockHook`), whose
input is the embeddings. The paper computes it during generation (prefix gradient caching);
here it is one extra pass after the call, the cost the report counts.

Blame: the episode's failure (1 - won) enters the last call. Walking the calls backwards, a
call's incoming blame ``B`` is split by its normalised weights: the share of its own role
block stays with the call (what a better prompt of that agent could fix, as AgentChord
optimises prompts), and the share of each other block flows to the call that wrote it (an
observation flows to the call whose action produced it, through the deterministic env; the
first observation is the task's, kept as ``task``). The shares of all calls and the task sum to
the failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentgym.core.errors import BadInput

REDUCERS = ("mean_l1", "max_l1", "mean_product", "max_product")
ROLE = "role"
"""The block name of a call's own role text."""
TASK = "task"
"""Where blame of blocks no call wrote goes (the request, the first observation)."""


@dataclass
class Block:
    """A marked span of a call's prompt: ``ids[start:end]`` came from ``source``.

    Attributes:
        name: what it holds (``role``, ``obs:2``, ``plan:2``).
        source: the index of the call that wrote it, or None (the call's own role text, or the
            task: see ``own``).
        start: the first token of the span in the prompt.
        end: one past its last token.
        own: the call's own role text (its blame stays with the call).
        positions: the block's tokens when they are not one span (then ``start`` and ``end``
            only bound them).
    """

    name: str
    source: int | None
    start: int
    end: int
    own: bool = False
    positions: list[int] | None = None

    def tokens(self) -> list[int] | slice:
        """The block's token positions in the prompt (a list or one slice)."""
        return self.positions if self.positions is not None else slice(self.start, self.end)


@dataclass
class Call:
    """One generation of one agent: who, when, what it read and what it wrote.

    Attributes:
        role: the agent (``planner``, ``caller``, ``summariser``).
        step: the env turn it served.
        prompt: the prompt's token ids.
        response: the generated token ids.
        text: the generation as text (the message passed on).
        blocks: the prompt's marked spans.
        weights: per block name, its normalised connection weight (after :func:`connect`).
    """

    role: str
    step: int
    prompt: list[int]
    response: list[int]
    text: str
    blocks: list[Block]
    weights: dict[str, float] = field(default_factory=dict)


class _LayerZero:
    """A block hook that swaps block 0's input for a leaf tensor, so its gradient is kept."""

    def __init__(self) -> None:
        self.leaves: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, i: int, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if i != 0:
            return x
        leaf = x.detach().requires_grad_(True)
        self.leaves.append((leaf, pos))
        return leaf


def input_gradients(
    policy: Any, prompt: Sequence[int], response: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``∂ Σ log p(response | prompt) / ∂ e`` and ``e`` per prompt token, ``[P, width]`` each.

    ``e`` are the input embeddings (block 0's input). The policy's weights get no gradient.
    """
    hook = _LayerZero()
    policy.set_block_hook(hook)
    try:
        with torch.enable_grad():
            (logp,) = policy.logprobs(
                [torch.tensor(list(prompt), dtype=torch.long)],
                [torch.tensor(list(response), dtype=torch.long)],
                grad=True,
            )
            leaves = [leaf for leaf, _ in hook.leaves]
            grads = torch.autograd.grad(logp.sum(), leaves, allow_unused=True)
    finally:
        policy.set_block_hook(None)
    width = leaves[0].shape[-1]
    g_out = torch.zeros(len(prompt), width)
    e_out = torch.zeros(len(prompt), width)
    for (leaf, pos), grad in zip(hook.leaves, grads, strict=True):
        row_pos = pos[0].cpu()
        keep = row_pos < len(prompt)
        if grad is not None:
            g_out[row_pos[keep]] = grad[0, keep].detach().float().cpu()
        e_out[row_pos[keep]] = leaf[0, keep].detach().float().cpu()
    return g_out, e_out


def reduce_block(grads: torch.Tensor, embeds: torch.Tensor, reduce: str) -> float:
    """One block's connection weight from its tokens' gradients and embeddings."""
    if grads.shape[0] == 0:
        return 0.0
    if reduce.endswith("_l1"):
        per_token = grads.abs().sum(-1)
    elif reduce.endswith("_product"):
        per_token = (grads * embeds).sum(-1).abs()
    else:
        raise BadInput(f"unknown GBC reduction {reduce!r}: choose from {', '.join(REDUCERS)}")
    return float(per_token.max() if reduce.startswith("max") else per_token.mean())


def connect(policy: Any, call: Call, reduce: str = "mean_l1") -> dict[str, float]:
    """Set and return ``call.weights``: each block's weight, normalised to sum to 1."""
    grads, embeds = input_gradients(policy, call.prompt, call.response)
    call.weights = block_weights(call, grads, embeds, reduce)
    return call.weights


def block_weights(
    call: Call, grads: torch.Tensor, embeds: torch.Tensor, reduce: str
) -> dict[str, float]:
    """Each block's weight from the prompt's gradients, normalised to sum to 1 (even if all 0)."""
    raw = {b.name: reduce_block(grads[b.tokens()], embeds[b.tokens()], reduce) for b in call.blocks}
    total = sum(raw.values())
    n = max(1, len(raw))
    return {k: (v / total if total > 0 else 1.0 / n) for k, v in raw.items()}


def propagate(calls: Sequence[Call], failure: float) -> tuple[list[float], float]:
    """Push ``failure`` from the last call back through the weights.

    Returns:
        ``(blame per call, the task's share)``; together they sum to ``failure``.
    """
    incoming = [0.0] * len(calls)
    own = [0.0] * len(calls)
    task = 0.0
    if calls:
        incoming[-1] = float(failure)
    for i in range(len(calls) - 1, -1, -1):
        call, b_in = calls[i], incoming[i]
        if b_in == 0.0:
            continue
        for block in call.blocks:
            share = b_in * call.weights.get(block.name, 0.0)
            if block.own:
                own[i] += share
            elif block.source is None or not 0 <= block.source < i:
                task += share
            else:
                incoming[block.source] += share
    return own, task


def uniform_blame(calls: Sequence[Call], failure: float) -> list[float]:
    """The baseline that knows nothing: every call the same share."""
    return [failure / len(calls)] * len(calls) if calls else []


def top(blame: Sequence[float]) -> int:
    """The index of the largest blame (the first on ties)."""
    return max(range(len(blame)), key=lambda i: (blame[i], -i))
