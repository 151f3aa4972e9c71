"""Call validation against the tools' JSON Schemas; nothing here raises on bad input.

A compiled validator per tool for the common case (fastjsonschema), and a precise, structured
error for the rest (jsonschema's error tree, classified).

An error is a dict the agent can act on::

    {"error": "wrong_type", "tool": "add_to_cart", "parameter": "quantity",
     "message": "parameter 'quantity' must be integer, got string '2'"}

Codes: ``unknown_tool``, ``malformed_call`` (the block's JSON), ``missing_parameter``,
``unexpected_parameter``, ``wrong_type``, ``not_in_enum``, ``bad_value`` (format, pattern,
bounds, length), ``not_found`` and ``failed_precondition`` (from the backend).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from typing import Any

import fastjsonschema
import jsonschema

from agentgym.envs.tools.backend import Tool

_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def error(code: str, tool: str, message: str, parameter: str = "") -> dict[str, Any]:
    """A structured call error."""
    out = {"error": code, "tool": tool, "message": message}
    if parameter:
        out["parameter"] = parameter
    return out


class Validator:
    """Validates calls of one set of tools.

    ``check(name, arguments)`` returns None for a valid call, else a structured error.
    """

    def __init__(self, tools: Iterable[Tool]):
        """Compile each tool's schema: fastjsonschema to check, jsonschema to explain."""
        self.tools = {t.name: t for t in tools}
        self._fast: dict[str, Callable[[Any], Any]] = {
            name: fastjsonschema.compile(t.parameters) for name, t in self.tools.items()
        }
        self._slow = {
            name: jsonschema.Draft202012Validator(
                t.parameters, format_checker=jsonschema.FormatChecker()
            )
            for name, t in self.tools.items()
        }

    def check(self, name: Any, arguments: Any) -> dict[str, Any] | None:
        """None when ``name`` is a tool and ``arguments`` satisfy its schema, else the error."""
        fast = self._fast.get(name) if isinstance(name, str) else None
        if fast is None:
            return self._unknown(name)
        if not isinstance(arguments, dict):
            return error(
                "malformed_call",
                name,
                f'"arguments" must be a JSON object, got {_type_name(arguments)}',
            )
        try:
            fast(arguments)
            return None
        except fastjsonschema.JsonSchemaException:
            return self._explain(name, arguments)

    def _unknown(self, name: Any) -> dict[str, Any]:
        shown = name if isinstance(name, str) else _show(name)
        close = difflib.get_close_matches(str(name), list(self.tools), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return error(
            "unknown_tool",
            str(shown),
            f"no tool named {shown!r}{hint} Available: {', '.join(self.tools)}",
        )

    def _explain(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The first problem of a call the compiled validator refused, classified."""
        schema = self.tools[name].parameters
        properties = schema.get("properties", {})
        missing = [p for p in schema.get("required", ()) if p not in arguments]
        if missing:
            return error(
                "missing_parameter",
                name,
                f"missing required parameter {missing[0]!r} of {name}",
                missing[0],
            )
        extra = [p for p in arguments if p not in properties]
        if extra and schema.get("additionalProperties") is False:
            return error(
                "unexpected_parameter",
                name,
                f"{name} has no parameter {extra[0]!r}; its parameters: {', '.join(properties)}",
                extra[0],
            )
        errors = sorted(self._slow[name].iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:  # the two validators disagree (e.g. a format only one checks)
            return error("bad_value", name, f"arguments of {name} do not match its schema")
        e = errors[0]
        parameter = ".".join(str(p) for p in e.absolute_path)
        where = f"parameter {parameter!r}" if parameter else "arguments"
        if e.validator == "type":
            expected = e.validator_value
            expected = " or ".join(expected) if isinstance(expected, list) else expected
            message = (
                f"{where} must be {expected}, got {_type_name(e.instance)} {_show(e.instance)}"
            )
            return error("wrong_type", name, message, parameter)
        if e.validator == "enum":
            allowed = ", ".join(_show(v) for v in e.validator_value)
            message = f"{where} must be one of {allowed}; got {_show(e.instance)}"
            return error("not_in_enum", name, message, parameter)
        if e.validator == "required":
            return error("missing_parameter", name, f"{where}: {e.message}", parameter)
        if e.validator == "additionalProperties":
            return error("unexpected_parameter", name, f"{where}: {e.message}", parameter)
        return error("bad_value", name, f"{where}: {e.message}", parameter)
