"""Decode-time action masking: a token trie over the allowed responses.

Each allowed response is a token sequence followed by eos. Walking the trie from the root
with the tokens generated so far gives, at every step, the set of tokens that keep the
response a prefix of some allowed one; masking every other logit to ``-inf`` makes the
finished response exactly one allowed sequence, whatever the weights and temperature.

    trie = TokenTrie.from_texts(["search: Orarshire", "search: Mareminster"], tokenizer)
    node = trie.root
    while node:                          # an empty node means the response is complete
        token = pick(trie.choices(node))
        node = trie.advance(node, token)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

Node = dict[int, "Node"]
"""A trie node: next token -> child. The node after eos is empty."""


class TokenTrie:
    """A prefix tree over token sequences, each terminated by ``eos_id``.

    Attributes:
        eos_id: the token that ends every sequence.
        root: the node before the first token.
        depth: the longest sequence's length, eos included.
    """

    def __init__(self, sequences: Iterable[Sequence[int]], eos_id: int):
        """Build the trie; duplicates collapse.

        Raises:
            ValueError: no sequences, or a sequence that holds eos (it would end early).
        """
        self.eos_id = int(eos_id)
        self.root: Node = {}
        self.depth = 0
        count = 0
        for seq in sequences:
            tokens = [int(t) for t in seq]
            if self.eos_id in tokens:
                raise ValueError(f"allowed sequence {tokens} contains eos ({self.eos_id})")
            node = self.root
            for t in [*tokens, self.eos_id]:
                node = node.setdefault(t, {})
            self.depth = max(self.depth, len(tokens) + 1)
            count += 1
        if count == 0:
            raise ValueError("a TokenTrie needs at least one allowed sequence")

    @classmethod
    def from_texts(cls, texts: Iterable[str], tokenizer: Any) -> TokenTrie:
        """The trie of ``tokenizer.encode(text)`` for each text, ended by its eos."""
        return cls((tokenizer.encode(t) for t in texts), tokenizer.eos_id)

    def choices(self, node: Node) -> list[int]:
        """The tokens allowed after ``node``, in ascending order (empty when complete)."""
        return sorted(node)

    def advance(self, node: Node, token: int) -> Node:
        """The child of ``node`` along ``token``.

        Raises:
            KeyError: ``token`` is not allowed there.
        """
        try:
            return node[int(token)]
        except KeyError:
            raise KeyError(f"token {token} is not allowed here; allowed: {sorted(node)}") from None

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        """The tokens allowed after ``prefix`` (walked from the root).

        Raises:
            KeyError: ``prefix`` leaves the trie.
        """
        node = self.root
        for t in prefix:
            node = self.advance(node, t)
        return self.choices(node)

    def __contains__(self, sequence: object) -> bool:
        """Whether ``sequence`` (with or without its final eos) is a complete response."""
        if not isinstance(sequence, Sequence):
            return False
        tokens = [int(t) for t in sequence]
        if not tokens or tokens[-1] != self.eos_id:
            tokens.append(self.eos_id)
        node = self.root
        for t in tokens:
            if t not in node:
                return False
            node = node[t]
        return not node


def allowed_mask(
    nodes: Sequence[Node | None], vocab_size: int, device: torch.device
) -> torch.Tensor:
    """A boolean mask of allowed next tokens per row.

    Args:
        nodes: one trie node per row, or ``None`` for an unconstrained row.
        vocab_size: ``V``.
        device: where the mask goes.

    Returns:
        ``[B, V]`` bool, True where the token may be sampled (all True for free rows).
    """
    mask = torch.ones(len(nodes), vocab_size, dtype=torch.bool)
    for i, node in enumerate(nodes):
        if node is not None:
            mask[i] = False
            mask[i, list(node)] = True
    return mask.to(device)


AllowedTokens = Sequence[Sequence[int] | None]
"""Per response position, the token ids constrained decoding allowed there (None: any)."""


def allowed_tokens(
    response: Sequence[int], sequences: Iterable[Sequence[int]], eos_id: int
) -> list[list[int]]:
    """The tokens the trie of ``sequences`` allowed at each position of ``response``.

    That is what the decoder's mask was while it generated ``response`` (so that training can
    score the distribution actually sampled).

    Raises:
        KeyError: ``response`` leaves the trie.
    """
    trie = TokenTrie(sequences, eos_id)
    node, out = trie.root, []
    for t in response:
        out.append(trie.choices(node))
        node = trie.advance(node, t)
    return out


def masked_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    allowed: Sequence[Sequence[int] | None] | None,
    temperature: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log softmax(logits / T)[target]``, renormalised over the allowed ids where given.

    Where a position lists allowed ids, the result is the masked distribution constrained
    decoding samples from; with the sampling temperature it is exactly the distribution a
    token was drawn from, so a PPO ratio compares like with like.

    Args:
        logits: ``[N, V]``.
        targets: ``[N]`` token ids.
        allowed: ``N`` lists of allowed ids (or None for an unconstrained position), or None.
        temperature: ``[N]`` temperature per position, or None for 1 everywhere.

    Returns:
        ``[N]`` float32 log-probs (differentiable).
    """
    lf = logits.float()
    if temperature is not None:
        lf = lf / temperature.to(lf.device, lf.dtype)[:, None]
    picked = lf.gather(-1, targets[:, None]).squeeze(-1)
    norm = torch.logsumexp(lf, dim=-1)
    lists = {i: list(a) for i, a in enumerate(allowed or ()) if a is not None}
    rows = list(lists)
    if rows:
        width = max(len(a) for a in lists.values())
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        valid = torch.zeros(len(rows), width, dtype=torch.bool)
        for j, i in enumerate(rows):
            row = lists[i]
            ids[j, : len(row)] = torch.tensor(row, dtype=torch.long)
            valid[j, : len(row)] = True
        index = torch.tensor(rows, dtype=torch.long, device=lf.device)
        sub = lf[index].gather(-1, ids.to(lf.device)).masked_fill(~valid.to(lf.device), -torch.inf)
        norm = norm.index_put((index,), torch.logsumexp(sub, dim=-1))
    return picked - norm


def position_temperatures(
    temperature: float | Sequence[float], sizes: Sequence[int], device: torch.device
) -> torch.Tensor | None:
    """The temperature of every scored position, rows of ``sizes`` positions laid end to end.

    Args:
        temperature: one temperature for all rows, or one per row.
        sizes: positions per row.
        device: where the result goes.

    Returns:
        ``[sum(sizes)]`` float32, or None when every temperature is 1 (nothing to divide).

    Raises:
        ValueError: per-row temperatures of another length than ``sizes``, or one <= 0.
    """
    per_row = (
        [float(temperature)] * len(sizes)
        if isinstance(temperature, (int, float))
        else [float(t) for t in temperature]
    )
    if len(per_row) != len(sizes):
        raise ValueError(f"{len(per_row)} temperatures for {len(sizes)} rows")
    if any(t <= 0 for t in per_row):
        raise ValueError(f"temperatures must be > 0, got {per_row}")
    if all(t == 1.0 for t in per_row):
        return None
    rows = torch.tensor(per_row, dtype=torch.float32)
    return rows.repeat_interleave(torch.tensor(list(sizes), dtype=torch.long)).to(device)


def encode_actions(tokenizer: Any, admissible: Iterable[Any]) -> dict[tuple[int, ...], str]:
    """Token sequence → action text for the actions an env lists.

    The first text wins if two encode alike; the keys are the ``allowed`` sequences of
    constrained decoding.
    """
    encoded: dict[tuple[int, ...], str] = {}
    for text in dict.fromkeys(str(a) for a in admissible):
        encoded.setdefault(tuple(tokenizer.encode(text)), text)
    return encoded


def decoded_action(
    tokenizer: Any, ids: Sequence[int], choices: dict[tuple[int, ...], str] | None
) -> str:
    """The action a generation stands for.

    That is the chosen item's text when decoding was constrained to ``choices``, else the
    decoded text (a trailing eos dropped).
    """
    body = list(ids[:-1]) if ids and ids[-1] == tokenizer.eos_id else list(ids)
    if choices is not None:
        return choices[tuple(body)]
    return str(tokenizer.decode(body))
