"""Command-line options from frozen config dataclasses: one ``--name VALUE`` per field.

The field's docstring is its help (the CleanRL/tyro habit, without a second source of truth).

A config may hold groups: a field whose value is itself a config dataclass. A group's fields
become options of their own, named by the field name with the group's prefix (its field
metadata ``{"prefix": "sft_"}`` makes ``WarmStart.steps`` the option ``--sft-steps``); so the
code reads ``cfg.sft.steps`` while the command line keeps flat, stable names. A field with
metadata ``{"option": False}`` is no option (it keeps its default).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from dataclasses import dataclass
from typing import Any

from agentgym.core.errors import BadInput


@dataclass(frozen=True)
class Option:
    """One command-line option of a (possibly nested) config class.

    Attributes:
        name: the option's name with underscores (``sft_steps``); the flag is ``--sft-steps``.
        path: the attribute path of its field (``("sft", "steps")``).
        kind: the field's annotation as written (``"int"``, ``"int | None"``...).
        default: the field's default.
        doc: the field's docstring, on one line.
        group: the docstring's first line of the group holding it ("" at the top level).
    """

    name: str
    path: tuple[str, ...]
    kind: str
    default: Any
    doc: str
    group: str

    @property
    def flag(self) -> str:
        """``--name-with-dashes``."""
        return "--" + self.name.replace("_", "-")


def field_docs(cls: type) -> dict[str, str]:
    """The string literal that follows each annotated field in ``cls``'s body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    node = tree.body[0]
    if not isinstance(node, ast.ClassDef):
        return {}
    docs = {}
    for field, after in itertools.pairwise(node.body):
        named = isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
        documented = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        if named and documented:
            assert isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
            assert isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            docs[field.target.id] = " ".join(str(after.value.value).split())
    return docs


def options(
    cls: type, prefix: str = "", path: tuple[str, ...] = (), group: str = ""
) -> list[Option]:
    """Every option of config class ``cls``, groups expanded in field order.

    Raises:
        ValueError: two fields map to the same option name.
    """
    docs = field_docs(cls)
    out: list[Option] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("option", True) is False:
            continue
        sub = _group_class(f)
        if sub is not None:
            title = (inspect.getdoc(sub) or sub.__name__).splitlines()[0]
            out += options(sub, prefix + f.metadata.get("prefix", ""), (*path, f.name), title)
            continue
        out.append(
            Option(
                prefix + f.name,
                (*path, f.name),
                str(f.type),
                f.default,
                docs.get(f.name, ""),
                group,
            )
        )
    names = [o.name for o in out]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ValueError(f"{cls.__name__}: options {clash} are defined twice")
    return out


def build(cls: type, values: dict[str, Any], base: Any = None) -> Any:
    """``cls`` built from option values by name (``{"sft_steps": 20}``).

    Other fields come from ``base`` (default: ``cls()``).

    Raises:
        BadInput: an unknown option name, or a value the config refuses.
    """
    known = {o.name: o for o in options(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise BadInput(f"unknown options {unknown}: see --help for the options")
    nested: dict[tuple[str, ...], dict[str, Any]] = {}
    for name, value in values.items():
        path = known[name].path
        nested.setdefault(path[:-1], {})[path[-1]] = value
    try:
        return _replace(cls() if base is None else base, (), nested)
    except ValueError as e:
        raise BadInput(str(e)) from None


def _replace(obj: Any, path: tuple[str, ...], nested: dict[tuple[str, ...], dict[str, Any]]) -> Any:
    changes = dict(nested.get(path, {}))
    for f in dataclasses.fields(obj):
        if _group_class(f) is not None and any(
            p[: len(path) + 1] == (*path, f.name) for p in nested
        ):
            changes[f.name] = _replace(getattr(obj, f.name), (*path, f.name), nested)
    return dataclasses.replace(obj, **changes) if changes else obj


def flat(cfg: Any) -> dict[str, Any]:
    """The option values of a config, by option name (the inverse of :func:`build`)."""
    out = {}
    for o in options(type(cfg)):
        value = cfg
        for part in o.path:
            value = getattr(value, part)
        out[o.name] = value
    return out


def options_help(cls: type) -> str:
    """One line per option (name, docstring, default), under a heading per group."""
    lines: list[str] = []
    group = None
    for o in options(cls):
        if o.group != group:
            group = o.group
            if group:
                lines.append(f"\n  {group}")
        default = o.default if o.default is not dataclasses.MISSING else ""
        lines.append(f"  {o.flag:<22} {o.doc} [default: {default}]")
    return "\n".join(lines)


def parse_options(cls: type, args: list[str], **given: Any) -> Any:
    """Build ``cls`` from ``--name value`` pairs and ``given`` option values.

    A bool option is ``--flag``/``--no-flag``.

    Raises:
        BadInput: an unknown option, a missing or malformed value.
    """
    known = {o.name: o for o in options(cls)}
    values = dict(given)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise BadInput(f"unexpected argument {arg!r}: options look like --name value")
        name = arg[2:].replace("-", "_")
        negated = name.startswith("no_") and name[3:] in known
        key = name[3:] if negated else name
        if key not in known:
            raise BadInput(f"unknown option {arg}: see --help for the options")
        kind = known[key].kind
        if kind == "bool" and (negated or i + 1 == len(args) or args[i + 1].startswith("--")):
            values[key], i = not negated, i + 1
            continue
        if i + 1 == len(args):
            raise BadInput(f"{arg} needs a value")
        values[key], i = convert(key, kind, args[i + 1]), i + 2
    return build(cls, values)


def _group_class(f: dataclasses.Field[Any]) -> type | None:
    """The config class of a group field, or None for a plain option."""
    if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory):
        factory = f.default_factory
        return factory if isinstance(factory, type) else None
    return None


def convert(name: str, kind: str, text: str) -> Any:
    """Option ``name``'s value from its text, by the field's annotation ``kind``.

    Raises:
        BadInput: text the annotation does not take.
    """
    flag = "--" + name.replace("_", "-")
    optional = kind.endswith(" | None")
    if optional:
        if text.lower() in ("none", "null"):
            return None
        kind = kind.removesuffix(" | None")
    if kind == "bool":
        if text.lower() in ("1", "true", "yes"):
            return True
        if text.lower() in ("0", "false", "no"):
            return False
        raise BadInput(f"{flag} expects true or false, got {text!r}")
    convert: Any = {"int": int, "float": float}.get(kind, str)
    try:
        return convert(text)
    except ValueError:
        raise BadInput(f"{flag} expects {convert.__name__}, got {text!r}") from None
