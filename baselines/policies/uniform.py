"""The uniform policy: every admissible action equally likely, through the policy contract.

It is the policy whose values the ``Credit-*`` envs state analytically (``info["credit_values"]
["uniform"]``), so the rollout engine, the credit variants and ``agentgym bench credit`` can run
on it and be checked against an exact answer. It has no weights: nothing to train or save.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.baselines.policies.base import AllowedSequences, GenOut
from agentgym.core.errors import BadInput


class UniformPolicy:
    """Uniform over the allowed sequences of each constrained row (the env's admissible actions).

    ``generate`` picks one of the row's distinct allowed sequences with equal probability and
    returns the exact per-token log-probs of that choice (the share of the sequences still
    possible that continue with the token). A row without allowed sequences (free text with no
    list of actions) has no uniform distribution and is refused.

    Args:
        tokenizer: the tokenizer prompts and actions are encoded with (any agentgym tokenizer).
        seed: seeds the generator used when no ``gumbel_keys`` are given.
    """

    def __init__(self, tokenizer: Any, seed: int = 0):
        """Keep the tokenizer and seed the generator."""
        self.tokenizer = tokenizer
        self.device = torch.device("cpu")
        self._rng = np.random.default_rng(seed)

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
        """One uniformly drawn allowed sequence per prompt (``gumbel_keys`` fix the draw).

        ``greedy`` takes the first allowed sequence; ``temperature`` and ``max_new_tokens``
        do not apply (every sequence is equally likely, and each is complete).

        Raises:
            BadInput: a row has no allowed sequences.
        """
        if allowed is None or any(a is None or not a for a in allowed):
            raise BadInput(
                "the uniform policy needs the env's admissible actions at every state "
                "(constrained decoding on an env that lists them)"
            )
        if gumbel_keys is not None and len(gumbel_keys) != len(prompts):
            raise ValueError(f"{len(gumbel_keys)} gumbel_keys for {len(prompts)} prompts")
        eos = self.tokenizer.eos_id
        outs = []
        for row, sequences in enumerate(allowed):
            choices = [tuple(s) for s in dict.fromkeys(tuple(s) for s in sequences or ())]
            if greedy:
                pick = 0
            elif gumbel_keys is not None:
                pick = int(np.random.default_rng([gumbel_keys[row]]).integers(len(choices)))
            else:
                pick = int(self._rng.integers(len(choices)))
            ids = [*choices[pick], eos]
            logps = sequence_logprobs(choices, pick, eos)
            outs.append(GenOut(ids=ids, logps=logps, text=self.tokenizer.decode(choices[pick])))
        return outs

    def logprobs(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
        allowed_tokens: Sequence[Sequence[Sequence[int] | None] | None] | None = None,
        temperature: float | Sequence[float] = 1.0,
    ) -> list[torch.Tensor]:
        """Uniform over the tokens allowed at each position (0 where decoding was free).

        Without the set of allowed sequences this is the per-token reading of the decoding
        mask; :meth:`generate`'s own log-probs are the exact ones of its draw.
        """
        out = []
        for row, response in enumerate(responses):
            masks = None if allowed_tokens is None else allowed_tokens[row]
            values = []
            for t in range(len(response)):
                allowed = None if masks is None else masks[t]
                values.append(-math.log(len(allowed)) if allowed else 0.0)
            out.append(torch.tensor(values, dtype=torch.float32))
        return out

    def response_logits(
        self, prompts: list[torch.Tensor], responses: list[torch.Tensor], *, grad: bool = False
    ) -> list[torch.Tensor]:
        """Equal logits ``[len(response), V]``: uniform under a decoding mask and elsewhere.

        Under a mask that is what :meth:`logprobs` gives; where decoding was free the
        distribution is uniform over the vocabulary.
        """
        size = int(self.tokenizer.vocab_size)
        return [torch.zeros(len(r), size) for r in responses]

    def values(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
    ) -> list[torch.Tensor]:
        """Zeros: the uniform policy has no critic."""
        return [torch.zeros(len(r), dtype=torch.float32) for r in responses]

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """No parameters."""
        return iter(())

    def save(self, path: Path) -> None:
        """Refused: there are no weights to save."""
        raise BadInput("the uniform policy has no weights to save")

    @classmethod
    def load(cls, path: Path, device: str | torch.device = "cpu") -> UniformPolicy:
        """Refused: the uniform policy is built from a tokenizer, not loaded."""
        raise BadInput("the uniform policy is not a checkpoint: build it with a tokenizer")


def sequence_logprobs(choices: Sequence[tuple[int, ...]], pick: int, eos: int) -> list[float]:
    """Per-token log-probs of ``choices[pick] + [eos]`` when every choice is equally likely.

    Token ``t``'s probability is the share of the choices that agree with the chosen prefix
    up to ``t`` and continue with the chosen token (eos: the choice ends there).
    """
    chosen = (*choices[pick], eos)
    alive = [(*c, eos) for c in choices]
    logps = []
    for t, token in enumerate(chosen):
        agree = [c for c in alive if len(c) > t and c[t] == token]
        logps.append(math.log(len(agree) / len(alive)))
        alive = agree
    return logps
