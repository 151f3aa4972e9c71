"""BFCL's single-turn function-calling tasks, read from the data files that bfcl-eval ships, and
scored by an AST matcher that follows BFCL's rules in prompt mode.

The package is never imported (importing it writes into site-packages): its folder is found with
:func:`importlib.util.find_spec` and its JSON Lines files are read directly.

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

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded
from agentgym.core.spaces import String
from agentgym.envs.tools.grammar import GRAMMAR, ParsedAction, parse_action

CATEGORIES: dict[str, tuple[str, ...]] = {
    "simple": ("simple_python",),
    "multiple": ("multiple",),
    "parallel": ("parallel",),
    "parallel_multiple": ("parallel_multiple",),
    "live": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
}
"""Our category names and the BFCL data files (``BFCL_v4_<name>.json``) each one reads."""

_VARIANTS = {
    "simple": ("Simple", "one function, one call"),
    "multiple": ("Multiple", "several functions, one call"),
    "parallel": ("Parallel", "one function, several calls in one turn"),
    "parallel_multiple": ("ParallelMultiple", "several functions, several calls in one turn"),
    "live": ("Live", "user-contributed live requests, one or several calls"),
}
_SPLIT_BOUNDS = (("train", 0.70), ("val", 0.85), ("test", 1.0))

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


# ---------------------------------------------------------------------- matcher
@dataclass(frozen=True)
class Verdict:
    """The matcher's verdict: ``won``, why not (``reason``, empty when won) and how many
    ground-truth calls found a matching predicted call (``matched`` of ``total``)."""

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
    """Why ``value`` does not have the BFCL type of ``schema`` (checked through items and
    properties), or None."""
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
    """Whether ``value`` equals the acceptable ``answer`` under BFCL's comparison; ``exact``
    also asks for the same number types (an integer is then no match for a float)."""
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
    """For each predicted call, the ground-truth call it is paired with (-1 if none), in a
    maximum one-to-one pairing of the pairs marked ``ok``."""
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
    """The ground truth as concrete calls: each parameter's first acceptable value, leaving out
    optional parameters whose first value is ``""``."""
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


# ---------------------------------------------------------------------- loader
@dataclass(frozen=True)
class Entry:
    """One BFCL entry joined to its possible answer; ``category`` is BFCL's file category."""

    id: str
    category: str
    messages: tuple[dict[str, Any], ...]
    functions: tuple[dict[str, Any], ...]
    ground_truth: tuple[dict[str, dict[str, list[Any]]], ...]


@dataclass(frozen=True)
class Category:
    """A loaded category: kept entries in file order, their ids per split (:func:`split_of`),
    excluded ids with the reason, and the sha256 of the files read."""

    name: str
    entries: dict[str, Entry]
    splits: dict[str, tuple[str, ...]]
    excluded: dict[str, str]
    digest: str


def default_data_dir() -> str:
    """The data folder of the installed bfcl-eval package (found without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        raise BadInput("bfcl-eval is not installed: `pip install --no-deps bfcl-eval`")
    root = spec.submodule_search_locations[0] if spec.submodule_search_locations else None
    return os.path.join(root or os.path.dirname(spec.origin or ""), "data")


def _read_lines(path: str, hasher: Any) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise BadInput(f"cannot read BFCL data file {path}: {e.strerror}") from e
    hasher.update(blob)
    try:
        return [json.loads(line) for line in blob.splitlines() if line.strip()]
    except ValueError as e:
        raise BadInput(f"{path} is not JSON Lines: {e}") from e


def _well_formed(ground_truth: Any) -> bool:
    return (
        isinstance(ground_truth, list)
        and bool(ground_truth)
        and all(
            isinstance(g, dict)
            and len(g) == 1
            and all(
                isinstance(params, dict) and all(isinstance(a, list) for a in params.values())
                for params in g.values()
            )
            for g in ground_truth
        )
    )


def _contradiction(entry: Entry) -> str | None:
    """Why the entry's own ground truth cannot win, or None."""
    schemas = {f["name"]: f for f in entry.functions}
    for g in entry.ground_truth:
        name, params = next(iter(g.items()))
        if name not in schemas:
            return f"the ground truth calls {name!r}, which no schema defines"
        schema = schemas[name]["parameters"]
        for param in params:
            if param not in schema.get("properties", {}):
                return f"the ground truth names {param!r}, missing from the schema of {name!r}"
        for param in schema.get("required", ()):
            if "" in params.get(param, ()):
                return f"the ground truth marks the required {param!r} of {name!r} optional"
    verdict = match_calls(entry.functions, entry.ground_truth, gold_calls(entry.ground_truth))
    return None if verdict.won else f"the ground truth fails the matcher: {verdict.reason}"


@functools.lru_cache(maxsize=16)
def _load(category: str, data_dir: str) -> Category:
    hasher = hashlib.sha256()
    entries: dict[str, Entry] = {}
    excluded: dict[str, str] = {}
    for part in CATEGORIES[category]:
        path = os.path.join(data_dir, f"BFCL_v4_{part}.json")
        answer_path = os.path.join(data_dir, "possible_answer", f"BFCL_v4_{part}.json")
        questions = _read_lines(path, hasher)
        answers = {a["id"]: a["ground_truth"] for a in _read_lines(answer_path, hasher)}
        for q in questions:
            gt = answers.get(q["id"])
            if gt is None:
                excluded[q["id"]] = "no possible answer"
                continue
            if not _well_formed(gt):
                raise BadInput(f"{answer_path}: the ground truth of {q['id']} is not BFCL's")
            messages = tuple(m for turn in q["question"] for m in turn)
            entry = Entry(q["id"], part, messages, tuple(q["function"]), tuple(gt))
            reason = _contradiction(entry)
            if reason is None:
                entries[entry.id] = entry
            else:
                excluded[entry.id] = reason
    splits = {name: tuple(i for i in entries if split_of(i) == name) for name, _ in _SPLIT_BOUNDS}
    return Category(category, entries, splits, excluded, hasher.hexdigest())


def load_category(category: str, data_dir: str | os.PathLike[str] | None = None) -> Category:
    """Load (once per process; cached per data folder and category) one of :data:`CATEGORIES`.

    Args:
        category: simple, multiple, parallel, parallel_multiple or live.
        data_dir: a folder in BFCL's layout (``BFCL_v4_<name>.json`` and
            ``possible_answer/BFCL_v4_<name>.json``); the installed package's if None.
    """
    if category not in CATEGORIES:
        raise BadInput(f"unknown BFCL category {category!r}: choose one of {', '.join(CATEGORIES)}")
    folder = default_data_dir() if data_dir is None else os.fspath(data_dir)
    return _load(category, os.path.abspath(folder))


def kept_entries(category: str, data_dir: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """Ids of the category's entries whose ground truth wins, in file order."""
    return tuple(load_category(category, data_dir).entries)


def excluded_entries(
    category: str, data_dir: str | os.PathLike[str] | None = None
) -> tuple[str, ...]:
    """Ids of the category's self-contradicting entries (``load_category`` gives reasons)."""
    return tuple(load_category(category, data_dir).excluded)


def split_of(entry_id: str) -> str:
    """The split of an entry: 70% train, 15% val, 15% test by the sha256 of its id."""
    digest = hashlib.sha256(entry_id.encode()).digest()
    x = int.from_bytes(digest[:8], "big") / 2**64
    return next(name for name, bound in _SPLIT_BOUNDS if x < bound)


# ---------------------------------------------------------------------- env
class BFCLEnv(AgentEnv[str, str]):
    """Answer one BFCL request with function calls, scored by BFCL's AST rules (prompt mode).

    ## Description
    The single-turn categories of the Berkeley Function Calling Leaderboard (bfcl-eval's data
    files): simple, multiple, parallel, parallel_multiple and live. Entries whose own ground
    truth fails the matcher are left out (:func:`excluded_entries`).

    ## Observation
    Text: the request (each message as ``role: content``), the function schemas as JSON (one
    per line) and the action grammar.

    ## Action
    Text (:class:`~agentgym.core.spaces.String`) in the tool grammar
    (:data:`~agentgym.envs.tools.grammar.GRAMMAR`): optional ``<think>`` blocks, then one
    ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` block per call, all in one turn.
    ``info["segments"]`` tags the think and tool_call spans; ``info["tool_calls"]`` lists the
    parsed calls.

    ## Rewards
    1.0 when the calls match the ground truth (:func:`match_calls`), else 0.
    ``info["reward_components"]``: ast_match, format; ``info["progress"]``: the fraction of
    expected calls matched.

    ## Termination
    Single-turn: the first action ends the episode (terminated), whether it is scored or
    invalid (bad grammar, a malformed call block, a ``<summary>`` or an ``<ask>``: reward 0,
    ``action_valid`` False).

    ## Registered ids
    ``agentgym/BFCL-{Simple,Multiple,Parallel,ParallelMultiple,Live}-v0``, registered only when
    bfcl-eval is installed.

    ## Version history
    v0: first version.
    """

    family = "tools"
    domain = "bfcl"
    default_max_turns = 1

    def __init__(
        self, category: str, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any
    ):
        """Create the env.

        Args:
            category: one of :data:`CATEGORIES`.
            data_dir: a folder in BFCL's layout; the installed package's data if None.
            **kwargs: split, privileged, max_turns, render_mode (see ``AgentEnv``).
        """
        super().__init__(**kwargs)
        self.category = category
        self._data = load_category(category, data_dir)
        self.observation_space = String()
        self.action_space = String()
        self._won: bool | None = None

    # ------------------------------------------------------------------ tasks
    @classmethod
    def registry_note(cls, **kwargs: Any) -> str:
        """Kept and excluded entries (those whose ground truth contradicts their schema)."""
        category = str(kwargs["category"])
        kept, excluded = kept_entries(category), excluded_entries(category)
        return (
            f"{len(kept)} entries kept; {len(excluded)} excluded (ground truth contradicts "
            "its own schema)"
        )

    def task_ids(self, split: str | None = None) -> tuple[str, ...]:
        return self._data.splits[split or self.split]

    def task_type_of(self, task_id: str) -> str:
        return self.category

    def _has_task(self, task_id: str) -> bool:
        return task_id in self._data.entries

    def _config(self) -> dict[str, Any]:
        return {"category": self.category, "data": self._data.digest}

    @property
    def entry(self) -> Entry:
        """The current task's BFCL entry."""
        if self.task_id is None:
            raise ResetNeeded("no task yet: call reset() first")
        return self._data.entries[self.task_id]

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._won = None
        entry = self.entry
        request = "\n".join(f"{m['role']}: {m['content']}" for m in entry.messages)
        schemas = "\n".join(json.dumps(f, ensure_ascii=False) for f in entry.functions)
        obs = (
            f"{request}\n\nFunctions (JSON schemas, one per line):\n{schemas}\n\n"
            f"Answer with the function calls that fulfil the request, all in this one turn. "
            f"{GRAMMAR}"
        )
        return obs, self._info(valid=True, parsed=None, progress=0.0)

    def _apply(self, action: Any) -> Transition:
        parsed = parse_action(action)
        error = self._action_error(parsed)
        if error is not None:
            self._won = False
            obs = f"Invalid action: {error}\nThe episode is over."
            return Transition(obs, 0.0, True, self._info(valid=False, parsed=parsed, progress=0.0))
        entry = self.entry
        verdict = match_calls(entry.functions, entry.ground_truth, _calls(parsed))
        self._won = verdict.won
        if verdict.won:
            obs = "The calls match the expected answer.\nThe episode is over."
        else:
            obs = f"The calls do not match the expected answer: {verdict.reason}."
            obs += "\nThe episode is over."
        info = self._info(valid=True, parsed=parsed, progress=verdict.matched / verdict.total)
        return Transition(obs, float(verdict.won), True, info)

    @staticmethod
    def _action_error(parsed: ParsedAction) -> str | None:
        if parsed.kind == "invalid":
            return parsed.error
        if parsed.kind != "tool_calls":
            tag = "<summary>" if parsed.kind == "summary" else "<ask>"
            return f"this task is answered with <tool_call> blocks, not with {tag}. {GRAMMAR}"
        bad = [f"call block {i}: {c.error}" for i, c in enumerate(parsed.calls, 1) if c.error]
        return "; ".join(bad) if bad else None

    def _info(self, *, valid: bool, parsed: ParsedAction | None, progress: float) -> dict[str, Any]:
        won, answered = bool(self._won), self._won is not None
        key = json.dumps([self.task_id, self.turn, answered])
        return {
            "action_valid": valid,
            "won": won,
            "state_key": hashlib.sha256(key.encode()).hexdigest(),
            "segments": [dict(s) for s in parsed.segments] if parsed else [],
            "tool_calls": _calls(parsed) if parsed else [],
            "reward_components": {"ast_match": float(won), "format": float(valid and answered)},
            "progress": progress,
            "provenance": {"visited": [], "cited": [], "produced": [], "consumed": []},
        }

    def _privileged_info(self) -> dict[str, Any]:
        return {"gold_tool_calls": gold_calls(self.entry.ground_truth)}

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        return {"won": self._won}

    def _set_state(self, state: dict[str, Any]) -> None:
        self._won = state["won"]

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """The ground truth as ``<tool_call>`` blocks (:func:`gold_calls`)."""
        if self.done or self.task_id is None:
            raise ResetNeeded("the episode is over or not started: call reset() first")
        return render_calls(gold_calls(self.entry.ground_truth))


def _calls(parsed: ParsedAction) -> list[dict[str, Any]]:
    """The calls of the blocks that parsed, as ``{name, arguments}``."""
    return [
        {"name": c.name, "arguments": c.arguments}
        for c in parsed.calls
        if c.name is not None and c.arguments is not None
    ]


def register_ids(register: Callable[..., None]) -> None:
    """Register ``agentgym/BFCL-<Variant>-v0`` for each category, when bfcl-eval is installed."""
    if importlib.util.find_spec("bfcl_eval") is None:
        return
    for category, (variant, what) in _VARIANTS.items():
        register(
            f"agentgym/BFCL-{variant}-v0",
            "agentgym.envs.tools.bfcl:BFCLEnv",
            family="tools",
            description=f"BFCL function calling ({what}), scored by BFCL's AST rules",
            kwargs={"category": category},
        )
