"""Command-line options from a frozen config dataclass: one ``--field-name VALUE`` per field,
with the field's docstring as its help (the CleanRL/tyro habit, without a second source of
truth)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from typing import Any

from agentgym.core.errors import BadInput


def field_docs(cls: type) -> dict[str, str]:
    """The string literal that follows each annotated field in ``cls``'s body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in itertools.pairwise(body):
        named = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        documented = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        if named and documented:
            docs[node.target.id] = " ".join(str(after.value.value).split())  # type: ignore
    return docs


def options_help(cls: type) -> str:
    """One line per option: name, default and the field's docstring."""
    docs = field_docs(cls)
    lines = []
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        lines.append(f"  {flag:<22} {docs.get(f.name, '')} [default: {f.default}]")
    return "\n".join(lines)


def _convert(name: str, kind: Any, text: str) -> Any:
    kind = (
        kind
        if isinstance(kind, type)
        else {"int": int, "float": float, "bool": bool}.get(str(kind), str)
    )
    if kind is bool:
        if text.lower() in ("1", "true", "yes"):
            return True
        if text.lower() in ("0", "false", "no"):
            return False
        raise BadInput(f"--{name.replace('_', '-')} expects true or false, got {text!r}")
    try:
        return kind(text)
    except ValueError:
        raise BadInput(
            f"--{name.replace('_', '-')} expects {kind.__name__}, got {text!r}"
        ) from None


def parse_options(cls: type, args: list[str], **given: Any) -> Any:
    """Build ``cls`` from ``--field-name value`` pairs (``--flag``/``--no-flag`` for bools)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = dict(given)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise BadInput(f"unexpected argument {arg!r}: options look like --name value")
        name = arg[2:].replace("-", "_")
        negated = name.startswith("no_") and name[3:] in fields
        key = name[3:] if negated else name
        if key not in fields:
            raise BadInput(f"unknown option {arg}: see --help for the options")
        kind = fields[key].type
        if str(kind) in ("bool", "<class 'bool'>") and (
            negated or i + 1 == len(args) or args[i + 1].startswith("--")
        ):
            values[key], i = not negated, i + 1
            continue
        if i + 1 == len(args):
            raise BadInput(f"{arg} needs a value")
        values[key], i = _convert(key, kind, args[i + 1]), i + 2
    return cls(**values)
