"""BFCL's single-turn function-calling tasks, read from the data files that bfcl-eval ships.

The env scores them with the AST matcher of :mod:`agentgym.envs.tools.bfcl_match`, which
follows BFCL's rules in prompt mode.

The package is never imported (importing it writes into site-packages): its folder is found with
:func:`importlib.util.find_spec` and its JSON Lines files are read directly.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded
from agentgym.core.spaces import String
from agentgym.envs.tools.bfcl_match import Verdict as Verdict  # re-exported
from agentgym.envs.tools.bfcl_match import gold_calls, match_calls, render_calls
from agentgym.envs.tools.grammar import (
    GRAMMAR,
    ParsedAction,
    gold_calls_line,
    parse_action,
    reason,
)

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
    """A loaded category: its entries, splits, exclusions and the digest of its files.

    Kept entries in file order, their ids per split (:func:`split_of`), excluded ids with the
    reason, and the sha256 of the files read.
    """

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

    ## Privileged
    With ``privileged=True``: ``gold_tool_calls`` (the ground truth as concrete calls, each
    parameter's first acceptable value) and ``privileged_context``, ``Gold calls:
    [{"name":…,"arguments":{…}},…]`` (the same calls as compact JSON).

    ## Termination
    Single-turn: the first action ends the episode (terminated), whether it is scored or
    invalid (bad grammar, a malformed call block, a ``<summary>`` or an ``<ask>``: reward 0,
    ``action_valid`` False).

    ## Registered ids
    ``agentgym/BFCL-{Simple,Multiple,Parallel,ParallelMultiple,Live}-v0`` and the same five
    with ``-v1`` (``grammar_in_errors=False``), registered only when bfcl-eval is installed.

    ## Version history
    v0: first version.
    v1: the reason given for an invalid action no longer repeats the grammar, which the first
    observation states.
    """

    family = "tools"
    domain = "bfcl"
    default_max_turns = 1

    def __init__(
        self,
        category: str,
        data_dir: str | os.PathLike[str] | None = None,
        grammar_in_errors: bool = True,
        **kwargs: Any,
    ):
        """Create the env.

        Args:
            category: one of :data:`CATEGORIES`.
            data_dir: a folder in BFCL's layout; the installed package's data if None.
            grammar_in_errors: repeat the grammar after an invalid action's reason (the v0
                ids; the v1 ids give the reason alone).
            **kwargs: split, privileged, max_turns, render_mode (see ``AgentEnv``).
        """
        super().__init__(**kwargs)
        self.category = category
        self.grammar_in_errors = bool(grammar_in_errors)
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
        """The kept entry ids of ``split`` (the env's own split if None), in file order."""
        return self._data.splits[split or self.split]

    def task_type_of(self, task_id: str) -> str:
        """The env's category: every entry of a category has the same task type."""
        return self.category

    def _has_task(self, task_id: str) -> bool:
        return task_id in self._data.entries

    def _config(self) -> dict[str, Any]:
        config = {"category": self.category, "data": self._data.digest}
        # only when it differs from v0's, so that v0's data hash and snapshots stay as they were
        return config if self.grammar_in_errors else {**config, "grammar_in_errors": False}

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

    def _action_error(self, parsed: ParsedAction) -> str | None:
        if parsed.kind == "invalid":
            return reason(parsed.error or "", self.grammar_in_errors)
        if parsed.kind != "tool_calls":
            tag = "<summary>" if parsed.kind == "summary" else "<ask>"
            text = f"this task is answered with <tool_call> blocks, not with {tag}."
            return reason(text, self.grammar_in_errors)
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
        """``gold_tool_calls`` and ``privileged_context`` (``Gold calls: <compact JSON>``)."""
        calls = gold_calls(self.entry.ground_truth)
        return {"gold_tool_calls": calls, "privileged_context": gold_calls_line(calls)}

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
    """Register ``agentgym/BFCL-<Variant>-v0`` and ``-v1`` per category, with bfcl-eval installed.

    v1 gives an invalid action's reason without repeating the grammar (see :class:`BFCLEnv`).
    """
    if importlib.util.find_spec("bfcl_eval") is None:
        return
    for category, (variant, what) in _VARIANTS.items():
        description = f"BFCL function calling ({what}), scored by BFCL's AST rules"
        register(
            f"agentgym/BFCL-{variant}-v0",
            "agentgym.envs.tools.bfcl:BFCLEnv",
            family="tools",
            description=description,
            kwargs={"category": category},
        )
        register(
            f"agentgym/BFCL-{variant}-v1",
            "agentgym.envs.tools.bfcl:BFCLEnv",
            family="tools",
            description=f"{description}; invalid-action reasons without the grammar",
            kwargs={"category": category, "grammar_in_errors": False},
        )
