"""What a tool domain provides: JSON-Schema tools over a seeded backend, and gold tasks.

A domain has JSON-Schema tools over a seeded, JSON-able backend state, and tasks with gold
calls. The env (``envs/tools/env.py``) owns everything else: parsing the action grammar,
validating calls against the schemas, errors, synchronous or asynchronous execution,
rewards, the oracle and snapshots.

A domain is pure and deterministic: ``build(seed)`` returns the same state for the same seed
in any process, and ``call`` depends only on the state and the arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

TASK_TYPES = ("single", "multiple", "parallel", "dependent", "irrelevance", "clarification")
"""single: one call; multiple: several different calls over turns (each known up front);
parallel: independent calls issued together in one turn; dependent: a result feeds the next
call's arguments; irrelevance: no tool can help (answer without calling); clarification:
the request lacks a required detail, which the scripted user gives when asked."""


@dataclass(frozen=True)
class Tool:
    """One API function.

    ``parameters`` is a JSON Schema object (``{"type": "object", "properties": {...},
    "required": [...], "additionalProperties": false}``) using only type, enum, format
    ("date" as YYYY-MM-DD, "email"), pattern, minimum, maximum, minLength, items and
    description; ``returns`` describes the result the same way.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    returns: dict[str, Any]
    writes: bool = False
    """whether the call changes the state (reads never do)."""
    latency_ms: float = 100.0
    """the mean latency of the call on the env's virtual clock (async option)."""

    def spec(self) -> dict[str, Any]:
        """The function schema shown to the agent (OpenAI style)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolFailure(Exception):
    """A call that passed validation but cannot run on this state.

    ``code`` is "not_found" (a missing entity: ``kind`` and ``key`` name it) or
    "failed_precondition" (a business rule: e.g. refunding an order that was not delivered);
    the message says what to do.
    """

    def __init__(self, code: str, message: str, *, kind: str = "", key: str = ""):
        """Record the failure's code, message and, for a missing entity, its kind and key."""
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind
        self.key = key


def not_found(kind: str, key: Any) -> ToolFailure:
    """The failure of a call naming a missing entity (``kind`` "order", ``key`` "o123")."""
    return ToolFailure("not_found", f"no {kind} with id {key!r}", kind=kind, key=str(key))


def failed_precondition(message: str) -> ToolFailure:
    """The failure of a call that breaks a business rule; ``message`` says what to do."""
    return ToolFailure("failed_precondition", message)


def entity(state: dict[str, Any], collection: str, kind: str, key: str) -> dict[str, Any]:
    """The entity ``state[collection][key]``.

    Args:
        state: a backend state.
        collection: the top-level collection, e.g. "orders".
        kind: the entity's name in the error, e.g. "order".
        key: its id.

    Returns:
        The entity itself (not a copy).

    Raises:
        ToolFailure: "not_found" when there is no such entity.
    """
    found: dict[str, Any] | None = state[collection].get(key)
    if found is None:
        raise not_found(kind, key)
    return found


def id_number(key: str) -> int:
    """The number in an entity id ("p12" -> 12, "pay5" -> 5), for numeric ordering."""
    return int(key.lstrip("abcdefghijklmnopqrstuvwxyz"))


@dataclass(frozen=True)
class Call:
    """A concrete tool call (gold calls are always concrete: the generator runs them)."""

    name: str
    arguments: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The call as JSON: ``{"name": ..., "arguments": {...}}``."""
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Task:
    """One episode's goal.

    ``gold_calls`` lists the turns of calls the oracle makes, each turn a tuple of calls issued
    together (a parallel task has one turn of several calls; a dependent task has one call per
    turn, each needing the previous result). ``answer_facts`` are the strings the final
    summary must contain (values read from results, e.g. a price "129.99" or a booking id);
    ``clarify_reply`` is what the scripted user says to an ``<ask>``, and for clarification
    tasks it holds the detail that ``request`` leaves out.
    """

    id: str
    task_type: str
    request: str
    gold_calls: tuple[tuple[Call, ...], ...]
    answer_facts: tuple[str, ...]
    clarify_reply: str = "I have nothing to add; please go ahead."
    hidden_facts: dict[str, str] = field(default_factory=dict)


class Domain:
    """A family of tools over one backend.

    Subclasses set ``name`` and implement the abstract methods; see ``envs/tools/domains/``
    for the shipped ones.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def tools(self) -> list[Tool]:
        """The domain's tools, in a fixed order."""
        raise NotImplementedError

    def build(self, seed: int) -> dict[str, Any]:
        """The initial backend state, deterministic in ``seed``.

        The state is JSON-able: dicts, lists, str, int, float, bool, None.
        """
        raise NotImplementedError

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run a validated call on ``state`` (changed in place by writes).

        Returns:
            The call's JSON-able result.

        Raises:
            ToolFailure: for a missing entity or a broken rule.
        """
        raise NotImplementedError

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(read, written) resource paths of a call, e.g. (["products/p3"], ["carts/u1"]).

        Paths form a tree by "/": two calls conflict when one writes a path that is equal to,
        above or below a path the other reads or writes. The async scheduler orders
        conflicting calls and runs the rest concurrently.
        """
        raise NotImplementedError

    def changes(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[str]:
        """The paths a write call will change, given ``state`` before the call.

        Defaults to the written paths of :meth:`resources`, which cannot look at the state; a
        domain may name finer ones (the booking a cancellation refunds) to keep the env's
        state digest cheap. They must cover every change the call makes.
        """
        return self.resources(name, arguments)[1]

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks of every type in ``TASK_TYPES`` for the initial ``state``.

        The state is never changed here; the tasks are deterministic in ``seed``, with unique
        ids and valid gold calls.
        """
        raise NotImplementedError
