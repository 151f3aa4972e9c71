"""Choosing tokens, and laying out a batch of prompts for it, shared by every policy.

That is temperature, the constrained-decoding mask, keyed Gumbel-max noise, and the
bookkeeping of a batch of responses being decoded.

A policy's ``generate`` runs its own forward passes and KV cache; everything between the
logits of a step and the next token fed back lives here once, so the tiny transformer and a
Hugging Face model sample alike (on the CPU, the same key gives both the same noise)::

    responses = Responses(allowed, len(prompts), max_new_tokens, tokenizer.eos_id)
    for t in range(responses.steps):
        mask = responses.mask(vocab, device)
        tok, logp = choose(logits, mask, t, temperature=T, greedy=False, keys=keys)
        responses.take(tok, logp)
        if responses.finished or t == responses.steps - 1:
            break
        logits = forward(responses.feed(tok, pad))   # the policy's own decode step
    outs = responses.results(tokenizer)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentgym.baselines.policies.base import AllowedSequences, GenOut
from agentgym.baselines.policies.constrained import Node, TokenTrie, allowed_mask

_MASK64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """SplitMix64's finaliser: a bijection on 64-bit integers that scatters nearby inputs."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def noise_seed(key: int, position: int) -> int:
    """The generator seed of Gumbel key ``key`` at response position ``position``."""
    return mix64(mix64(int(key) & _MASK64) ^ int(position))


def gumbel_noise(
    rows: int,
    vocab: int,
    keys: Sequence[int] | None,
    position: int,
    device: torch.device,
) -> torch.Tensor:
    """Standard Gumbel noise ``[rows, vocab]`` on ``device``.

    Args:
        rows: batch size ``B``.
        vocab: ``V``.
        keys: one integer key per row: row ``i`` then draws from a generator on ``device``
            seeded by ``(keys[i], position)``, so the same key gives the same noise at each
            response position whatever the batch (twin rollouts, replayable episodes). None
            draws from torch's global generator.
        position: index of the token within the response.
        device: where the noise is drawn (CPU and CUDA draws differ for the same key).
    """
    if keys is None:
        u = torch.rand((rows, vocab), device=device)
    else:
        u = torch.empty((rows, vocab), device=device)
        gen = torch.Generator(device=device)
        for i, key in enumerate(keys):
            gen.manual_seed(noise_seed(key, position))
            torch.rand(vocab, generator=gen, device=device, out=u[i])
    u = u.clamp_(min=torch.finfo(u.dtype).tiny)
    return -torch.log(-torch.log(u))


def choose(
    logits: torch.Tensor,
    mask: torch.Tensor | None,
    position: int,
    *,
    temperature: float,
    greedy: bool,
    keys: Sequence[int] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row by the Gumbel-max trick.

    Args:
        logits: ``[B, V]`` raw logits of the next token.
        mask: ``[B, V]`` bool, True where a token is allowed (None: all are).
        position: index of the token within the response (keys the noise).
        temperature: divides the logits (> 0).
        greedy: take the most likely allowed token, no noise.
        keys: per-row Gumbel keys, or None for torch's global generator.

    Returns:
        ``([B] tokens, [B] log-probs)``: the log-probs are those of the tempered, masked
        softmax at the chosen tokens (the behaviour log-probs), also when greedy.
    """
    scores = logits.float() / temperature
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    logp = torch.log_softmax(scores, dim=-1)
    if greedy:
        tok = logp.argmax(dim=-1)
    else:
        B, V = logp.shape
        tok = (logp + gumbel_noise(B, V, keys, position, logp.device)).argmax(dim=-1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


def distinct(rows: list[list[int]]) -> tuple[list[list[int]], torch.Tensor]:
    """The distinct rows in first-seen order, and each row's index among them."""
    seen: dict[tuple[int, ...], int] = {}
    index = [seen.setdefault(tuple(r), len(seen)) for r in rows]
    unique = [list(r) for r in seen]
    return unique, torch.tensor(index, dtype=torch.long)


def attend_mask(valid: torch.Tensor) -> torch.Tensor:
    """``[B, 1, T, T]`` causal attention over the ``valid`` ``[B, T]`` columns.

    A padding query attends to itself alone, so no row of the softmax is empty (an empty
    row gives NaN, and NaN times a zero weight is still NaN in the next layer).
    """
    T = valid.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=valid.device).tril()
    eye = torch.eye(T, dtype=torch.bool, device=valid.device)
    return (causal & (valid.bool()[:, None, :] | eye))[:, None]


class Responses:
    """The responses of one batch while they are decoded, row by row.

    A free row ends at eos or after ``max_new_tokens`` tokens. A constrained row
    (``allowed[i]`` given) is masked to the trie of its allowed sequences, each followed by
    eos, so it ends as exactly one of them; its budget grows to its longest sequence plus
    eos when ``max_new_tokens`` is shorter, and :attr:`steps` is the longest budget.

    Attributes:
        steps: the most decoding steps any row may take.
        done: per row, whether its response is complete.
        top_allowed: the largest token id any allowed sequence holds (-1: none).
    """

    def __init__(
        self,
        allowed: Sequence[AllowedSequences | None] | None,
        rows: int,
        max_new_tokens: int,
        eos_id: int,
    ):
        """Start ``rows`` empty responses.

        Raises:
            ValueError: ``allowed`` has another length than ``rows``, an allowed set is
                empty, or a sequence holds eos.
        """
        if allowed is not None and len(allowed) != rows:
            raise ValueError(f"{len(allowed)} allowed lists for {rows} prompts")
        self.eos_id = int(eos_id)
        self.max_new_tokens = max_new_tokens
        self.tries = [
            None if a is None else TokenTrie(a, eos_id) for a in (allowed or [None] * rows)
        ]
        self.steps = max([max_new_tokens] + [t.depth for t in self.tries if t is not None])
        self._nodes: list[Node | None] = [None if t is None else t.root for t in self.tries]
        self._outs = [GenOut(ids=[], logps=[]) for _ in range(rows)]
        # a free row with no budget is complete before it starts
        self._done = [t is None and max_new_tokens <= 0 for t in self.tries]
        # all rows free: tokens stay in tensors, one column per step, read back once
        self._columns: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._lengths: torch.Tensor | None = None
        self._done_t: torch.Tensor | None = None
        self.top_allowed = max(
            (int(tok) for a in (allowed or []) if a is not None for seq in a for tok in seq),
            default=-1,
        )

    @property
    def done(self) -> list[bool]:
        """Per row, whether its response is complete."""
        return self._done if self._done_t is None else self._done_t.tolist()

    @property
    def constrained(self) -> bool:
        """Whether any row is constrained to a trie."""
        return any(t is not None for t in self.tries)

    @property
    def finished(self) -> bool:
        """Whether every response is complete."""
        if self._done_t is not None:
            return bool(self._done_t.all())
        return all(self._done)

    def take(self, tokens: torch.Tensor, logps: torch.Tensor) -> None:
        """:meth:`record` for ``[B]`` tensors; with no constrained row, without leaving them.

        Free rows only need ``tokens == eos`` and a length count, so the step's tokens are
        kept as a column and read back once in :meth:`results`; a constrained batch walks its
        tries token by token through :meth:`record`.
        """
        if self.constrained:
            self.record(tokens.tolist(), logps.tolist())
            return
        if self._done_t is None:
            self._done_t = torch.tensor(self._done, device=tokens.device)
            self._lengths = torch.zeros(len(self._done), dtype=torch.long, device=tokens.device)
        assert self._lengths is not None
        live = ~self._done_t
        self._columns.append((tokens, logps))
        self._lengths += live
        self._done_t = (
            self._done_t | (tokens == self.eos_id) | (self._lengths >= self.max_new_tokens)
        )

    def feed(self, tokens: torch.Tensor, pad: int) -> torch.Tensor:
        """This step's ``tokens`` ``[B]`` to feed back, ``pad`` in the rows now complete."""
        done = self._done_t if self._done_t is not None else torch.tensor(self.done)
        return torch.where(done.to(tokens.device), torch.full_like(tokens, pad), tokens)

    def mask(self, vocab: int, device: torch.device) -> torch.Tensor | None:
        """``[B, V]`` bool of the tokens each row may take next, or None if none is constrained.

        An unfinished constrained row allows its next tokens; free and finished rows allow
        everything.
        """
        if not self.constrained:
            return None
        live = [None if d else node for node, d in zip(self._nodes, self._done, strict=True)]
        return allowed_mask(live, vocab, device)

    def record(self, tokens: Sequence[int], logps: Sequence[float]) -> None:
        """Append each unfinished row's chosen token and its log-prob; mark rows that end."""
        for i, (tok, logp) in enumerate(zip(tokens, logps, strict=True)):
            if self._done[i]:
                continue
            out = self._outs[i]
            out.ids.append(int(tok))
            out.logps.append(float(logp))
            node = self._nodes[i]
            if node is None:  # a free row stops at eos or at its own budget
                self._done[i] = tok == self.eos_id or len(out.ids) >= self.max_new_tokens
            else:
                self._nodes[i] = node = node[int(tok)]
                self._done[i] = not node

    def results(self, tokenizer: Any) -> list[GenOut]:
        """The responses, each with its text decoded (special tokens dropped)."""
        if self._columns:
            ids = torch.stack([c[0] for c in self._columns], dim=1).tolist()
            logps = torch.stack([c[1] for c in self._columns], dim=1).tolist()
            lengths = self._lengths.tolist()  # type: ignore[union-attr]
            for out, row, lps, n in zip(self._outs, ids, logps, lengths, strict=True):
                out.ids, out.logps = row[:n], lps[:n]
        for out in self._outs:
            out.text = tokenizer.decode(out.ids)
        return self._outs
