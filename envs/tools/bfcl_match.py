"""BFCL's AST matcher (prompt mode), and BFCL ground truths written as concrete calls.

Matching rules (:func:`match_calls`): function names are compared as written (dotted names kept);
every parameter must be in the function's schema and in the ground truth, every schema-required
parameter must be present, and a parameter absent from the call must be marked optional (``""``
among its acceptable values); each value must have the schema's type and equal one of the
acceptable values. Types are exact (``True`` is not an integer, ``"10"`` is not 10) except that
an integer is accepted where a float is expected; as in BFCL, a value written exactly as an
acceptable value that itself breaks the schema's type (a variable name where a list is expected,
``null``) is accepted. Strings compare after lowercasing, removing spaces and
`` ,./-_*^`` and writing ``'`` as ``"``; lists and tuples compare element by element; dicts
compare key by key against the answer's nested acceptable values. The predicted calls must pair
one to one with the ground-truth calls, in any order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# BFCL's Python type names; any other type name (Java, JavaScript) takes its value as a string.
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "float": (int, float),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "tuple": (list, tuple),
    "dict": (dict,),
    "object": (dict,),
}
_NATIVE_TYPES = frozenset((*_PY_TYPES, "any"))
_JSON_TYPE = {str: "string", int: "integer", float: "float", bool: "boolean", list: "array"}
_STRIP = str.maketrans("", "", " ,./-_*^")
_SHORT = 80


@dataclass(frozen=True)
class Verdict:
    """The matcher's verdict on the predicted calls of one entry.

    ``won``, why not (``reason``, empty when won) and how many ground-truth calls found a
    matching predicted call (``matched`` of ``total``).
    """

    won: bool
    reason: str
    matched: int
    total: int


def _norm(text: str) -> str:
    return text.lower().translate(_STRIP).replace("'", '"')


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


def _options(acceptable: Any) -> list[Any]:
    return acceptable if isinstance(acceptable, list) else [acceptable]


def _type_name(value: Any) -> str:
    return _JSON_TYPE.get(type(value), "null" if value is None else type(value).__name__)


def _type_error(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Why ``value`` does not have the BFCL type of ``schema``, or None.

    The type is checked through items and properties.
    """
    kind = schema.get("type", "any")
    if kind == "any":
        return None
    if type(value) not in _PY_TYPES.get(kind, (str,)):
        return f"expected {kind}, got {_type_name(value)}"
    if isinstance(value, (list, tuple)) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            error = _type_error(item, schema["items"])
            if error:
                return f"item {i}: {error}"
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        for key, item in value.items():
            sub = schema["properties"].get(key)
            error = _type_error(item, sub) if isinstance(sub, Mapping) else None
            if error:
                return f"key {key!r}: {error}"
    return None


def _same(value: Any, answer: Any, exact: bool = False) -> bool:
    """Whether ``value`` equals the acceptable ``answer`` under BFCL's comparison.

    ``exact`` also asks for the same number types (an integer is then no match for a float).
    """
    if isinstance(answer, str):
        return isinstance(value, str) and _norm(value) == _norm(answer)
    if isinstance(answer, bool) or isinstance(value, bool):
        return type(value) is type(answer) and value == answer
    if isinstance(answer, (int, float)):
        same_type = not exact or type(value) is type(answer)
        return isinstance(value, (int, float)) and same_type and value == answer
    if isinstance(answer, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(answer)
            and all(_same(v, a, exact) for v, a in zip(value, answer, strict=True))
        )
    if isinstance(answer, dict):
        if not isinstance(value, dict):
            return False
        for key, item in value.items():
            if key not in answer or not any(_same(item, a, exact) for a in _options(answer[key])):
                return False
        return all(k in value or "" in _options(a) for k, a in answer.items())
    return bool(value == answer)


def _call_error(
    schemas: Mapping[str, Mapping[str, Any]],
    gold_name: str,
    gold_params: Mapping[str, list[Any]],
    call: Mapping[str, Any],
) -> str | None:
    """Why ``call`` does not match the ground-truth call ``gold_name(gold_params)``, or None."""
    name, args = call["name"], call["arguments"]
    if name != gold_name:
        return f"wrong function name: expected {gold_name!r}, got {name!r}"
    schema = schemas.get(gold_name)
    if schema is None:
        return f"no schema for function {gold_name!r}"
    params = schema["parameters"]
    props = params.get("properties", {})
    for param in params.get("required", ()):
        if param not in args:
            return f"missing required parameter {param!r}"
    for param, value in args.items():
        if param not in props or param not in gold_params:
            return f"unexpected parameter {param!r}"
        acceptable = gold_params[param]
        if props[param].get("type", "any") not in _NATIVE_TYPES:
            acceptable = [a if isinstance(a, str) else json.dumps(a) for a in acceptable]
        error = _type_error(value, props[param])
        if error and not any(_same(value, a, exact=True) for a in acceptable if a != ""):
            return f"type of {param!r}: {error}"
        if not any(_same(value, a) for a in acceptable):
            expected = [a for a in acceptable if a != ""]
            return (
                f"value of {param!r} not acceptable: {_short(value)}, "
                f"expected one of {_short(expected)}"
            )
    for param, acceptable in gold_params.items():
        if param not in args and "" not in acceptable:
            return f"missing parameter {param!r}: the answer requires it"
    return None


def _max_matching(ok: list[list[bool]], n_calls: int) -> list[int]:
    """For each predicted call, the ground-truth call it is paired with (-1 if none).

    The pairing is a maximum one-to-one pairing of the pairs marked ``ok``.
    """
    owner = [-1] * n_calls

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(n_calls):
            if ok[i][j] and j not in seen:
                seen.add(j)
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(ok)):
        augment(i, set())
    return owner


def match_calls(
    functions: Sequence[Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Mapping[str, list[Any]]]],
    calls: Sequence[Mapping[str, Any]],
) -> Verdict:
    """Score predicted ``calls`` (``{"name", "arguments"}``) against a BFCL ground truth.

    Args:
        functions: the entry's function schemas (BFCL's ``function`` field).
        ground_truth: BFCL's ``ground_truth``: one ``{name: {param: [acceptable values]}}`` per
            expected call.
        calls: the predicted calls, in any order.
    """
    schemas = {f["name"]: f for f in functions}
    gold = [next(iter(g.items())) for g in ground_truth]
    errors = [[_call_error(schemas, name, params, call) for call in calls] for name, params in gold]
    owner = _max_matching([[e is None for e in row] for row in errors], len(calls))
    total = len(gold)
    matched = sum(o >= 0 for o in owner)
    if len(calls) != total:
        return Verdict(False, f"wrong number of calls: {len(calls)} for {total}", matched, total)
    if matched == total:
        return Verdict(True, "", matched, total)
    i = next(i for i in range(total) if i not in owner)
    free = [j for j in range(len(calls)) if owner[j] < 0]
    j = next((j for j in free if calls[j]["name"] == gold[i][0]), free[0])
    reason = errors[i][j] or ""
    if total > 1:
        reason = f"no call matches expected call {i + 1} ({gold[i][0]}): {reason}"
    return Verdict(False, reason, matched, total)


def _concrete(answer: Any) -> Any:
    """The first acceptable value all the way down (optional dict keys left out)."""
    if isinstance(answer, dict):
        return {
            k: _concrete(opts[0])
            for k, a in answer.items()
            if (opts := _options(a)) and opts[0] != ""
        }
    if isinstance(answer, list):
        return [_concrete(a) for a in answer]
    return answer


def gold_calls(
    ground_truth: Sequence[Mapping[str, Mapping[str, list[Any]]]],
) -> list[dict[str, Any]]:
    """The ground truth as concrete calls: each parameter's first acceptable value.

    Optional parameters whose first value is ``""`` are left out.
    """
    out = []
    for g in ground_truth:
        name, params = next(iter(g.items()))
        args = {p: _concrete(a[0]) for p, a in params.items() if a and a[0] != ""}
        out.append({"name": name, "arguments": args})
    return out


def render_calls(calls: Sequence[Mapping[str, Any]]) -> str:
    """Calls written as ``<tool_call>`` blocks, one per line."""
    return "\n".join(
        "<tool_call>"
        + json.dumps({"name": c["name"], "arguments": c["arguments"]}, ensure_ascii=False)
        + "</tool_call>"
        for c in calls
    )
