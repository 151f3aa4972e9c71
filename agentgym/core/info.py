"""The standard ``info`` keys every agentgym environment returns, defined once.

Nothing timing-dependent goes into ``info``: two runs with the same seed and actions must return
equal infos. Privileged keys appear only when the env is made with ``privileged=True``.
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np

SEGMENT_TAGS = ("think", "search_query", "tool_call", "summary", "conclusion", "answer")


class Segment(TypedDict):
    """A tagged span of the last action: half-open character offsets ``[start, end)``."""

    tag: str
    start: int
    end: int


class ToolCall(TypedDict):
    """A parsed tool call: the function name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]


class Provenance(TypedDict):
    """Node ids of the environment's graph.

    ``visited`` and ``cited`` accumulate over the episode; ``produced`` and ``consumed``
    concern the last action only.
    """

    visited: list[str]
    cited: list[str]
    produced: list[str]
    consumed: list[str]


class AgentInfo(TypedDict, total=False):
    """Standard keys of the ``info`` dict returned by ``reset`` and ``step``."""

    action_valid: bool
    won: bool
    admissible_actions: list[str]
    action_mask: np.ndarray
    state_key: str
    task_id: str
    task_type: str
    domain: str
    segments: list[Segment]
    tool_calls: list[ToolCall]
    reward_components: dict[str, float]
    progress: float
    provenance: Provenance
    # privileged (only with privileged=True)
    privileged_context: str
    gold_answer: str
    gold_evidence: list[str]
    gold_tool_calls: list[ToolCall]


REQUIRED_KEYS: tuple[str, ...] = (
    "action_valid",
    "won",
    "state_key",
    "task_id",
    "task_type",
    "domain",
)
PRIVILEGED_KEYS: tuple[str, ...] = (
    "privileged_context",
    "gold_answer",
    "gold_evidence",
    "gold_tool_calls",
)

_LIST_OF_STR = (list, str)
_TYPES: dict[str, Any] = {
    "action_valid": bool,
    "won": bool,
    "admissible_actions": _LIST_OF_STR,
    "action_mask": np.ndarray,
    "state_key": str,
    "task_id": str,
    "task_type": str,
    "domain": str,
    "segments": list,
    "tool_calls": list,
    "reward_components": dict,
    "progress": float,
    "provenance": dict,
    "privileged_context": str,
    "gold_answer": str,
    "gold_evidence": _LIST_OF_STR,
    "gold_tool_calls": list,
}


def _problem(key: str, value: Any) -> str | None:
    """Why ``value`` is not a valid ``info[key]``, or None."""
    expected = _TYPES[key]
    if expected == _LIST_OF_STR:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if ok else f"info[{key!r}] must be a list of str"
    if not isinstance(value, expected):
        return f"info[{key!r}] must be {expected.__name__}, got {type(value).__name__}"
    if key == "action_mask" and value.dtype != np.int8:
        return f"info['action_mask'] must have dtype int8, got {value.dtype}"
    if key == "progress" and not 0.0 <= value <= 1.0:
        return f"info['progress'] must lie in [0, 1], got {value}"
    if key == "segments":
        for seg in value:
            if seg.get("tag") not in SEGMENT_TAGS or not 0 <= seg["start"] <= seg["end"]:
                return f"bad segment {seg!r}: tags are {SEGMENT_TAGS}, offsets half-open"
    if key == "provenance":
        missing = {"visited", "cited", "produced", "consumed"} - set(value)
        if missing:
            return f"info['provenance'] lacks {sorted(missing)}"
    return None


def info_problems(info: dict[str, Any], *, privileged: bool) -> list[str]:
    """List what is wrong with an info dict.

    That is missing required keys, wrong types, and privileged keys where they must not be
    (or absent where ``privileged`` asks for them).
    """
    problems = [f"info lacks required key {k!r}" for k in REQUIRED_KEYS if k not in info]
    for key, value in info.items():
        if key in _TYPES:
            msg = _problem(key, value)
            if msg:
                problems.append(msg)
    leaked = [k for k in PRIVILEGED_KEYS if k in info]
    if leaked and not privileged:
        problems.append(f"privileged keys {leaked} present without privileged=True")
    if privileged and not leaked:
        problems.append("privileged=True but no privileged key is present")
    return problems
