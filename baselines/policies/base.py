"""The contract every policy follows: batched generation with behaviour log-probs, scoring.

The rollout engine, the trainer and :class:`~agentgym.baselines.policies.agent.PolicyAgent`
see a policy only through :class:`Policy`, so the tiny from-scratch transformer and a
Hugging Face model are interchangeable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

AllowedSequences = Sequence[Sequence[int]]
"""The token sequences one prompt may produce (each is followed by eos)."""

BlockHook = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]
"""``hook(layer, x, pos) -> x``: sees the hidden states ``x`` ``[B, T, width]`` entering block
``layer`` (layer 0: the input embeddings, positions included) with their positions ``pos``
``[B, T]``, and returns the states the block gets. Policies that support it (the tiny policy;
Hugging Face models on the lean forward) call it in generation and in scoring alike, so a
latent edit (GradCuit) or a leaf for input gradients (GBC) acts on both."""


@dataclass
class GenOut:
    """One generated response.

    Attributes:
        ids: generated tokens (no prompt), ending with eos if eos was generated.
        logps: behaviour log-probs of those tokens under the sampling distribution actually
            used (after masking and temperature); ``len(logps) == len(ids)``.
        text: ``ids`` decoded, eos and other special tokens dropped.
    """

    ids: list[int]
    logps: list[float] = field(default_factory=list)
    text: str = ""


@runtime_checkable
class Policy(Protocol):
    """A language-model policy with a value head.

    Attributes:
        tokenizer: has ``encode(text) -> list[int]``, ``decode(ids) -> str``, ``eos_id``,
            ``pad_id`` and ``vocab_size``.
        device: where the parameters live.
    """

    tokenizer: Any
    device: torch.device

    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        gumbel_keys: list[int] | None = None,
        allowed: Sequence[AllowedSequences | None] | None = None,
    ) -> list[GenOut]:
        """Sample one response per prompt, batched, with a KV cache.

        Args:
            prompts: token ids of each prompt (``B`` prompts).
            max_new_tokens: the most tokens generated per prompt, eos included.
            temperature: logits are divided by it before sampling (> 0).
            greedy: take the most likely token instead of sampling.
            gumbel_keys: when given, ``gumbel_keys[i]`` makes prompt ``i``'s sampling a
                deterministic function of (key, position): the same key gives the same
                Gumbel noise at each response position (twin rollouts).
            allowed: when given, ``allowed[i]`` constrains prompt ``i``'s response to exactly
                one of those token sequences followed by eos (``None`` leaves it free).

        Returns:
            ``B`` responses in prompt order.
        """
        ...

    def logprobs(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
        allowed_tokens: Sequence[Sequence[Sequence[int] | None] | None] | None = None,
        temperature: float | Sequence[float] = 1.0,
    ) -> list[torch.Tensor]:
        """Per-token ``log p(response_t | prompt, response_<t)``, batched with padding.

        Args:
            prompts: ``B`` 1-D long tensors.
            responses: ``B`` 1-D long tensors.
            grad: keep the autograd graph.
            allowed_tokens: per row, per response position, the token ids constrained
                decoding allowed there (None: any). The log-probs are then those of the
                masked distribution the decoder sampled from, so that the PPO ratio compares
                like with like (Huang & Ontañón 2020, arXiv 2006.14171).
            temperature: the temperature the responses were sampled at, one for all rows
                or one per row: log-probs are those of softmax(logits / T), for the same
                reason.

        Returns:
            ``B`` float tensors, the ``i``-th of shape ``[len(responses[i])]``.
        """
        ...

    def values(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
    ) -> list[torch.Tensor]:
        """Value-head outputs per response token (PPO), shapes as ``logprobs``."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The trainable parameters."""
        ...

    def save(self, path: Path) -> None:
        """Write safetensors weights, a JSON config and ``tokenizer.json`` into ``path``."""
        ...

    @classmethod
    def load(cls, path: Path, device: str | torch.device = "cpu") -> Policy:
        """Read what ``save`` wrote (no pickle)."""
        ...
