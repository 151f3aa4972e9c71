"""Per-token segment tags from the character spans an env reports (CREDIT.md §22).

Envs tag the spans of an action's text in ``info["segments"]``: ``{tag, start, end}`` with
half-open character offsets into the text sent to ``env.step``. Credit variants that route
advantages by segment (SLCA, and any later span-level method) need one tag per response token.
:func:`segment_token_tags` finds each token's characters by decoding growing prefixes of the
response, so it works with any tokenizer that has ``decode``, byte-level BPE included.

    tags = segment_token_tags(policy.tokenizer, turn.response_ids, info["segments"], eos_id)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentgym.core.errors import BadInput

UNTAGGED = ""
"""The tag of a token no segment covers (markup, whitespace, eos)."""


def _ids(response_ids: Any) -> list[int]:
    if hasattr(response_ids, "tolist"):
        return [int(i) for i in response_ids.tolist()]
    return [int(i) for i in response_ids]


def _agreed(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    for j in range(n):
        if a[j] != b[j]:
            return j
    return n


def token_char_spans(tokenizer: Any, ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """The decoded text of ``ids`` and each token's half-open character span in it.

    Token ``j`` spans the characters that ``decode(ids[:j+1])`` adds to ``decode(ids[:j])``,
    counting only the characters on which the prefix agrees with the whole text (a token
    holding the first bytes of a multi-byte character decodes to a replacement character, so
    it spans nothing and the token completing the character spans it). Spans never overlap
    and never shrink; a special token, which ``decode`` drops, spans nothing.
    """
    text = str(tokenizer.decode(list(ids)))
    spans: list[tuple[int, int]] = []
    end = 0
    for j in range(len(ids)):
        prefix = str(tokenizer.decode(list(ids[: j + 1])))
        agreed = _agreed(prefix, text)
        new_end = max(end, agreed)
        spans.append((end, new_end))
        end = new_end
    return text, spans


def _tag_of(start: int, end: int, segments: Sequence[Mapping[str, Any]], size: int) -> str:
    """The tag of the segment overlapping ``[start, end)`` most (the first on a tie).

    A span of no characters takes the tag of the character it begins, if any.
    """
    if start == end:
        if start >= size:
            return UNTAGGED
        end = start + 1
    best, best_overlap = UNTAGGED, 0
    for seg in segments:
        overlap = min(end, int(seg["end"])) - max(start, int(seg["start"]))
        if overlap > best_overlap:
            best, best_overlap = str(seg["tag"]), overlap
    return best


def segment_token_tags(
    tokenizer: Any,
    response_ids: Any,
    segments: Iterable[Mapping[str, Any]] | None,
    eos_id: int | None,
) -> list[str]:
    """One tag per response token from the env's character spans.

    Args:
        tokenizer: anything with ``decode(ids) -> str``.
        response_ids: the turn's response tokens ([L] tensor or sequence of ints).
        segments: ``info["segments"]`` of the turn: ``{tag, start, end}`` dicts whose offsets
            index the decoded response (the action text the env received); None or empty
            leaves every token untagged.
        eos_id: the end-of-response token; it and every token after it are untagged.

    Returns:
        ``L`` tags: the tag of the segment that overlaps the token's characters most, or
        :data:`UNTAGGED` (``""``) for a token outside every segment.
    """
    ids = _ids(response_ids)
    body = ids.index(eos_id) if eos_id is not None and eos_id in ids else len(ids)
    segs = list(segments or ())
    if not segs:
        return [UNTAGGED] * len(ids)
    text, spans = token_char_spans(tokenizer, ids[:body])
    tags = [_tag_of(a, b, segs, len(text)) for a, b in spans]
    return tags + [UNTAGGED] * (len(ids) - body)


def fill_segment_tags(turns: Iterable[Any], tokenizer: Any) -> int:
    """Set ``turn.segment_tags`` from ``turn.info["segments"]`` where it is None.

    Args:
        turns: :class:`~agentgym.baselines.batch.Turn` objects.
        tokenizer: the policy's tokenizer (``decode``, ``eos_id``).

    Returns:
        How many turns were tagged (those already tagged are left as they are).
    """
    filled = 0
    for turn in turns:
        if turn.segment_tags is not None:
            continue
        eos_id = getattr(tokenizer, "eos_id", None)
        turn.segment_tags = segment_token_tags(
            tokenizer, turn.response_ids, turn.info.get("segments"), eos_id
        )
        filled += 1
    return filled


def tag_batch(trajectories: Iterable[Any], policy: Any, variant: str) -> int:
    """:func:`fill_segment_tags` on every turn of ``trajectories`` with ``policy``'s tokenizer.

    The transform of the variants that read segment tags; returns the turns tagged.

    Raises:
        BadInput: a turn is untagged and ``policy`` has no tokenizer (``variant`` names who
            needs the tags).
    """
    turns = [t for traj in trajectories for t in traj.turns]
    if all(t.segment_tags is not None for t in turns):
        return 0
    tokenizer = getattr(policy, "tokenizer", None)
    if tokenizer is None:
        raise BadInput(
            f"{variant} needs segment tags: set Turn.segment_tags, or give a policy with a "
            "tokenizer (decode, eos_id) to map info['segments'] onto tokens"
        )
    return fill_segment_tags(turns, tokenizer)
