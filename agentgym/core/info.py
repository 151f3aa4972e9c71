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


class CreditValues(TypedDict):
    """Exact values under one policy of the state the next action is taken from.

    ``q[a]`` is the expected undiscounted sum of rewards from this step to the episode's end
    (the turn limit included) when taking admissible action ``a`` and then following the
    policy; ``value`` is the policy's own expectation (``max`` of ``q`` for the optimal
    policy, their mean for the uniform one); ``advantage[a] = q[a] - value``.
    """

    value: float
    q: dict[str, float]
    advantage: dict[str, float]


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
    error: str
    """Set only when the env itself failed (a crashed browser) and ended the episode with
    ``truncated=True``: why. The harness records such an episode as errored."""
    # privileged (only with privileged=True)
    privileged_context: str
    """Short text a teacher reads at the head of its prompt: what would let it act well
    (search: the answer and the gold sentences; ALFWorld: the skill hint and the planner's
    next commands; TextWorld: the walkthrough; tools: the gold calls; credit: the best
    action now; shop: the target product and the way to buy it)."""
    gold_answer: str
    gold_evidence: list[str]
    gold_facts: list[str]
    """The gold supporting sentences as text (search: ``"<page title>: <sentence>"``), the
    fact-use view of ISA-Distill."""
    evidence_hint: str
    """Per step, which gold evidence the agent has not been shown yet (search: ``"Still
    missing: evidence about <title>; …."`` or ``"All evidence found."``), the
    evidence-seeking view of ISA-Distill."""
    gold_tool_calls: list[ToolCall]
    credit_values: dict[str, CreditValues]


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
    "gold_facts",
    "evidence_hint",
    "gold_tool_calls",
    "credit_values",
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
    "error": str,
    "privileged_context": str,
    "gold_answer": str,
    "gold_evidence": _LIST_OF_STR,
    "gold_facts": _LIST_OF_STR,
    "evidence_hint": str,
    "gold_tool_calls": list,
    "credit_values": dict,
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
    if key == "credit_values":
        for policy, table in value.items():
            if not isinstance(table, dict) or {"value", "q", "advantage"} - set(table):
                return f"info['credit_values'][{policy!r}] must hold value, q and advantage"
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
