"""The results contract: the one format ``eval`` writes and ``submit`` reads (schema_version 1).

The types below say what the harness writes; ``results.schema.json`` beside this module says
what a reader may accept, and :func:`results_schema` completes it with the summary
statistics of :mod:`agentgym.harness.stats`, so that the statistics are listed in one place
(:data:`agentgym.harness.stats.STATISTICS`). Later versions may add fields, never rename them.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict, cast

from agentgym.core.errors import BadInput
from agentgym.harness.stats import CI_METHODS, summary_fields

SCHEMA_VERSION = 1
HARNESS_VERSION = "0.1"
RECORDED_PACKAGES = ("agentgym", "gymnasium", "numpy", "rank-bm25")
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")

# Fields that tell whether an existing file came from the same command (so it may be resumed).
IDENTITY_FIELDS = ("agent", "envs", "split", "root_seed", "episodes_per_seed")


# ---------------------------------------------------------------------------- types

EpisodeRecord = TypedDict(
    "EpisodeRecord",
    {
        "env_id": str,
        "run": int,
        "episode": int,
        "seed": int,
        "task_id": str | None,
        "task_type": str | None,
        "success": bool,
        "return": float,
        "steps": int,
        "tokens": int,
        "seconds": float,
        "error": str | None,
        "transcript_sha256": str,
    },
)
"""One played episode; ``(env_id, run, episode)`` is its key. ``return`` is a keyword, hence
the functional form. ``seconds`` (and ``tokens``) may differ between replays; everything else
is fixed by the env, the agent and ``seed``. Where the env gives one at the episode's end, a
record also holds ``certificate`` (optional, so not typed here; the schema's ``$defs``
describe it): whether the optimal matching behind a metric is unique and the metric's range
over all optimal matchings (CREDIT.md §13; the tools family's HierR). Agents that do extra
work or attribute blame add ``compute`` and ``blame`` (optional as well; see
:func:`agentgym.harness.episode.run_episode`)."""


class _SummaryRequired(TypedDict):
    n: int
    mean: float
    ci_low: float
    ci_high: float


class Summary(_SummaryRequired, total=False):
    """Statistics of one set of run scores, in the order of :func:`stats.summary_fields`.

    Besides these keys a summary holds one float per :data:`stats.STATISTICS` entry (``iqm``),
    between ``mean`` and ``ci_low``; code reads those through that table, never by name.

    Attributes:
        n: runs (seeds) scored.
        mean: the ranking metric, mean success over runs, in [0, 1].
        ci_low: lower end of the mean's 95% interval.
        ci_high: upper end of that interval.
        ci_method: how the interval was computed, one of :data:`stats.CI_METHODS`: the
            stratified bootstrap's percentile interval, or the exact binomial one when every
            run scored the same 0 or 1. The harness always writes it; a file written before
            it existed lacks it, and its intervals are all bootstrap intervals.
    """

    ci_method: str


class EnvSummary(Summary, total=False):
    """The summary of one env, with one summary per task type.

    The harness always writes ``by_task_type``; a reader may find it missing.
    """

    by_task_type: dict[str, Summary]


class _AgentRequired(TypedDict):
    name: str
    spec: str
    checkpoint_sha256: str | None


class AgentEntry(_AgentRequired, total=False):
    """The agent of a results file (:func:`agentgym.agents.describe_agent`).

    ``options`` holds the agent's settings (``eval --agent-option``) when some were given.
    """

    options: dict[str, Any]


class EnvEntry(TypedDict):
    """One env of a results file, as built for the evaluation."""

    id: str
    version: int
    kwargs: dict[str, Any]
    data_hash: str | None


class Bootstrap(TypedDict):
    """The seed and repetitions of every bootstrap interval of the file."""

    seed: int
    reps: int


class ResultsHeader(TypedDict):
    """Everything of a results file but its episodes and aggregates."""

    schema_version: int
    harness_version: str
    agent: AgentEntry
    envs: list[EnvEntry]
    split: str
    root_seed: int
    episodes_per_seed: int
    seeds: int
    bootstrap: Bootstrap
    packages: dict[str, str]


class _Optional(TypedDict, total=False):
    """Fields written only when asked for.

    Attributes:
        controls: ``eval --controls``, per env the positive, null and perturbation controls.
    """

    controls: dict[str, Any]


class ResultsDoc(ResultsHeader, _Optional):
    """A whole results file: the header, the episodes in key order and the aggregates."""

    episodes: list[EpisodeRecord]
    aggregates: dict[str, EnvSummary]


# ---------------------------------------------------------------------------- schema


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    """The JSON Schema with its summary completed (cached; see :func:`results_schema`)."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    summary = schema["$defs"]["summary"]
    fixed = summary["properties"]
    fields = summary_fields()
    extra = {k: v for k, v in fixed.items() if k not in fields}  # ci_method
    summary["properties"] = {**{f: fixed.get(f, fixed["mean"]) for f in fields}, **extra}
    summary["properties"]["ci_method"]["enum"] = list(CI_METHODS)
    summary["required"] = list(fields)
    return schema


def results_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a results file.

    Returns:
        A fresh copy of ``results.schema.json`` whose summary requires every field of
        :func:`agentgym.harness.stats.summary_fields`, each statistic shaped like ``mean``,
        and allows ``ci_method`` to be one of :data:`agentgym.harness.stats.CI_METHODS`.
    """
    return copy.deepcopy(_schema())


# ---------------------------------------------------------------------------- files


def identity_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`IDENTITY_FIELDS` of a results document (None where one is missing)."""
    return {k: doc.get(k) for k in IDENTITY_FIELDS}


def packages() -> dict[str, str]:
    """Installed versions of the packages that can change a result."""
    out = {}
    for name in RECORDED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def write_atomic(path: Path, doc: Any) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half.

    Args:
        path: the file to write; its folder is created.
        doc: JSON data, written with one-space indents and a final newline.

    Raises:
        BadInput: the path is a directory or cannot be written.
    """
    if path.is_dir():
        raise BadInput(f"{path} is a directory: give a file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}") from None


def read_results(path: Path) -> ResultsDoc:
    """Load and minimally validate a results file (the leaderboard checks it fully).

    Args:
        path: a file written by ``agentgym eval --out``.

    Returns:
        The document.

    Raises:
        BadInput: the file is missing, not JSON, not schema_version 1 or has no episodes.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BadInput(f"no such results file: {path}") from None
    except (OSError, ValueError) as e:
        raise BadInput(f"{path} is not a JSON results file: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise BadInput(f"{path} is not an agentgym results file (schema_version 1)")
    if not isinstance(doc.get("episodes"), list):
        raise BadInput(f"{path} has no episodes list")
    return cast("ResultsDoc", doc)  # its fields are checked by the leaderboard, not here


def agent_labels(docs: Sequence[Mapping[str, Any]], files: Sequence[str | None]) -> list[str]:
    """Distinct names to show for the agents of several results documents.

    Each is the agent's name (``agent.name``; ``A``, ``B``, ... where a document has none).
    Where two documents share a name, their file follows it in parentheses, e.g.
    ``random (runs/a.json)``; where the file does not tell them apart either, their position
    does (``random #2``).

    Args:
        docs: results documents.
        files: the file each document was read from, None where it came from no file.

    Returns:
        One label per document, in order, all different.
    """
    names = [
        str((doc.get("agent") or {}).get("name") or chr(ord("A") + i % 26))
        for i, doc in enumerate(docs)
    ]
    pairs = list(zip(names, files, strict=True))
    return [
        name
        if names.count(name) == 1
        else f"{name} ({file})"
        if file and pairs.count((name, file)) == 1
        else f"{name} #{i + 1}"
        for i, (name, file) in enumerate(pairs)
    ]
