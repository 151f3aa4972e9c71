"""Submission checks: what the leaderboard refuses before it stores a results file.

A results file is trusted only as far as it can be checked here, without playing episodes
(``agentgym verify`` replays a sample later):

1. it is JSON and follows the harness's results schema (schema_version 1,
   :func:`agentgym.harness.results.results_schema`);
2. it has episodes, each env it plays is declared once, and no episode key
   ``(env_id, run, episode)`` appears twice;
3. every env exists in this installation with the same version and data hash;
4. its episodes are exactly the harness's seed plan (``seeds`` runs of ``episodes_per_seed``
   episodes drawn from ``root_seed``), so no unlucky seed was left out;
5. its aggregates agree with a recomputation from the episodes, with the file's own
   bootstrap seed and repetitions, on every field of
   :func:`agentgym.harness.stats.summary_fields` and on ``ci_method`` (a file written before
   ``ci_method`` existed is checked against the bootstrap intervals it could only hold).

Each refusal is a :class:`BadSubmission` with one sentence that names what is wrong.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.canonical import canonical
from agentgym.core.errors import BadInput, UnknownEnv
from agentgym.harness.results import SCHEMA_VERSION, results_schema
from agentgym.harness.seeds import episode_seeds
from agentgym.harness.stats import aggregate, summary_fields
from agentgym.registry import env_ids, env_info, make

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

TOLERANCE = 1e-9
"""Largest absolute difference allowed between a stored and a recomputed aggregate."""
_MAX_SHOWN = 120  # characters of an offending value quoted in a message

Doc = Mapping[str, Any]
"""A results document as read, before the checks (a ``ResultsDoc`` once they pass)."""
Key = tuple[str, int, int]


class BadSubmission(BadInput):
    """A results file the leaderboard refuses (the CLI exits with code 2)."""


class AlreadySubmitted(BadSubmission):
    """The same result is on the board already (a refusal; ``agentgym submit`` exits 0).

    Attributes:
        submission_id: the id of the entry that holds it.
        name: that entry's name.
    """

    def __init__(self, submission_id: int, name: str) -> None:
        """The refusal naming the entry ``submission_id`` (called ``name``)."""
        super().__init__(
            f"this results file was already submitted as #{submission_id} ({name}): "
            "each result is ranked once"
        )
        self.submission_id = submission_id
        self.name = name

    def __reduce__(self) -> tuple[type[AlreadySubmitted], tuple[int, str]]:
        """Pickle by the id and name (the message is rebuilt from them)."""
        return type(self), (self.submission_id, self.name)


# ---------------------------------------------------------------------------- loading


def content_hash(doc: Mapping[str, Any] | bytes | str) -> str:
    """The sha256 of the document's canonical JSON (:func:`agentgym.core.canonical.canonical`).

    Re-indenting a file, reordering its keys or escaping its characters differently gives
    the same hash.

    Args:
        doc: a parsed results document, or the raw bytes or text of a results file.

    Raises:
        BadSubmission: raw input that is not JSON.
    """
    if isinstance(doc, (bytes, str)):
        doc = _parse(doc, "the submission")
    return hashlib.sha256(canonical(doc)).hexdigest()


def result_hash(doc: Doc) -> str:
    """The sha256 of the document's canonical JSON without its episodes' ``seconds``.

    Wall-clock time is the one field that differs between two runs of the same evaluation
    (on any backend), so this hash identifies a result: the leaderboard stores each once.

    Args:
        doc: a parsed results document.
    """
    episodes = doc.get("episodes")
    if isinstance(episodes, list):  # checked later: any input hashes without an error
        untimed = [
            {k: v for k, v in e.items() if k != "seconds"} if isinstance(e, dict) else e
            for e in episodes
        ]
        doc = {**doc, "episodes": untimed}
    return hashlib.sha256(canonical(doc)).hexdigest()


def load_submission(path: Path | str) -> tuple[dict[str, Any], bytes]:
    """Read a results file.

    Returns:
        The parsed document and the file's raw bytes.

    Raises:
        BadSubmission: the file is missing, unreadable, not JSON (e.g. truncated), or not a
            JSON object.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadSubmission(f"no such results file: {path}") from None
    except OSError as e:
        raise BadSubmission(f"cannot read {path}: {e.strerror or e}") from None
    return _parse(raw, str(path)), raw


def _parse(raw: bytes | str, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw, parse_constant=_refuse_constant)
    except BadSubmission as e:
        raise BadSubmission(f"{where} {e}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise BadSubmission(
            f"{where} is not valid JSON (truncated or corrupted?): {e}; "
            "submit the file that `agentgym eval --out` wrote"
        ) from None
    if not isinstance(doc, dict):
        raise BadSubmission(f"{where} is a JSON {type(doc).__name__}, not a results object")
    return doc


def _refuse_constant(name: str) -> float:
    raise BadSubmission(f"contains {name}, which is not a JSON number: results must be finite")


# ---------------------------------------------------------------------------- the checks


@functools.lru_cache(maxsize=1)
def _validator() -> Validator:
    import jsonschema  # here: listing the board should not pay for its import

    schema = results_schema()
    base = jsonschema.validators.validator_for(schema)
    base.check_schema(schema)
    # JSON Schema counts 1.0 as an integer; runs, seeds and counts index lists here.
    strict = base.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    )
    cls = jsonschema.validators.extend(base, type_checker=strict)
    validator: Validator = cls(schema)
    return validator


def check_schema(doc: Doc) -> None:
    """The document follows the schema_version 1 JSON schema; the message names the path."""
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise BadSubmission(
            f"the file has schema_version {version!r} but this leaderboard reads "
            f"schema_version {SCHEMA_VERSION}: re-run `agentgym eval` with this version"
        )
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(doc))
    if error is not None:
        message = error.message
        if len(message) > _MAX_SHOWN:
            message = message[:_MAX_SHOWN] + "…"
        raise BadSubmission(f"the results file breaks the schema at {error.json_path}: {message}")


def check_has_episodes(doc: Doc) -> None:
    """At least one episode."""
    if not doc["episodes"]:
        raise BadSubmission("the results file has no episodes: there is nothing to rank")


def check_envs_declared(doc: Doc) -> None:
    """Each env is declared once in ``envs`` and every declared env has episodes."""
    declared = Counter(e["id"] for e in doc["envs"])
    twice = sorted(i for i, c in declared.items() if c > 1)
    if twice:
        raise BadSubmission(f"the results file declares {twice[0]} more than once in envs")
    played = {ep["env_id"] for ep in doc["episodes"]}
    undeclared = sorted(played - set(declared))
    if undeclared:
        raise BadSubmission(f"episodes of {undeclared[0]} are in the file but it is not in envs")
    unplayed = sorted(set(declared) - played)
    if unplayed:
        raise BadSubmission(f"{unplayed[0]} is declared in envs but has no episodes")


def check_unique_keys(doc: Doc) -> None:
    """No episode key ``(env_id, run, episode)`` appears twice."""
    seen: set[Key] = set()
    for ep in doc["episodes"]:
        key = (ep["env_id"], ep["run"], ep["episode"])
        if key in seen:
            raise BadSubmission(
                f"episode {_name(key)} appears more than once: each (env_id, run, episode) "
                "must be unique"
            )
        seen.add(key)


def check_installation(doc: Doc) -> None:
    """Every env is registered here with the file's version, and builds the same data."""
    for entry in doc["envs"]:
        env_id = entry["id"]
        _check_registered(env_id)
        here = int(env_id.rsplit("-v", 1)[1])
        if entry["version"] != here:
            raise BadSubmission(
                f"the file records version {entry['version']} of {env_id} but this "
                f"installation's {env_id} is version {here}"
            )
        theirs = entry["data_hash"]
        ours = installed_data_hash(env_id, doc["split"], json.dumps(entry["kwargs"]))
        if theirs != ours:
            raise BadSubmission(
                f"the data of {env_id} differ from this installation's: the file has "
                f"data_hash {theirs} but this installation builds {ours}"
            )


def _check_registered(env_id: str) -> None:
    try:
        env_info(env_id)
    except UnknownEnv:
        base = env_id.rsplit("-v", 1)[0]
        others = [i for i in env_ids() if i.rsplit("-v", 1)[0] == base]
        has = f" (this installation has {', '.join(others)})" if others else ""
        raise BadSubmission(
            f"{env_id} is not registered in this installation{has}: "
            "results on it cannot be checked here"
        ) from None


@functools.lru_cache(maxsize=64)
def installed_data_hash(env_id: str, split: str, kwargs_json: str) -> str | None:
    """``env.unwrapped.data_hash`` of ``env_id`` as built here (cached per process).

    Raises:
        BadSubmission: the env cannot be built with the file's split and kwargs.
    """
    try:
        env = make(env_id, split=split, **json.loads(kwargs_json))
    except BadInput as e:
        raise BadSubmission(f"cannot build {env_id} as the file describes it: {e}") from None
    try:
        return getattr(env.unwrapped, "data_hash", None)
    finally:
        env.close()


def check_seed_plan(doc: Doc) -> None:
    """Each env's episodes are exactly the harness's plan.

    That is runs ``0..seeds-1`` of episodes ``0..episodes_per_seed-1``, with the seeds that
    ``root_seed`` gives (DESIGN, Harness). Coverage is checked before seeds are derived, so a
    huge ``seeds`` costs nothing.
    """
    per_run = doc["episodes_per_seed"]
    runs = doc.get("seeds") or 1 + max(ep["run"] for ep in doc["episodes"])
    by_env: dict[str, set[tuple[int, int]]] = {}
    for ep in doc["episodes"]:
        run, index = ep["run"], ep["episode"]
        if run >= runs or index >= per_run:
            raise BadSubmission(
                f"episode {_name((ep['env_id'], run, index))} lies outside the file's plan of "
                f"{runs} seeds × {per_run} episodes per seed"
            )
        by_env.setdefault(ep["env_id"], set()).add((run, index))
    for env_id, keys in sorted(by_env.items()):
        if len(keys) < runs * per_run:
            r, m = next((r, m) for r in range(runs) for m in range(per_run) if (r, m) not in keys)
            raise BadSubmission(
                f"{env_id} has {len(keys)} of its {runs * per_run} planned episodes (run {r} "
                f"episode {m} is missing): submit the complete file that eval wrote"
            )
    plan = episode_seeds(doc["root_seed"], runs, per_run)
    for ep in doc["episodes"]:
        expected = plan[ep["run"]][ep["episode"]]
        if ep["seed"] != expected:
            raise BadSubmission(
                f"episode {_name((ep['env_id'], ep['run'], ep['episode']))} has seed "
                f"{ep['seed']} but root_seed {doc['root_seed']} gives {expected}: results "
                "must use the harness's seeds"
            )


def check_aggregates(doc: Doc) -> None:
    """Stored aggregates equal a recomputation from the episodes (within ``TOLERANCE``).

    A summary without ``ci_method`` comes from a harness that had only the bootstrap
    interval, so it is checked against the bootstrap interval everywhere.
    """
    boot = doc["bootstrap"]
    how = f"(bootstrap seed {boot['seed']}, {boot['reps']} reps)"
    stored = doc["aggregates"]
    fresh = {
        exact: aggregate(
            doc["episodes"], bootstrap_seed=boot["seed"], reps=boot["reps"], exact_if_constant=exact
        )
        for exact in _interval_kinds(stored)
    }
    now = fresh[True]
    _compare_keys(set(stored), set(now), "aggregates", "its episodes")
    for env_id in sorted(now):
        _compare_summary(stored[env_id], fresh, (env_id, None), f"aggregates of {env_id}", how)
        if "by_task_type" not in stored[env_id]:
            continue
        stored_types = stored[env_id]["by_task_type"]
        _compare_keys(
            set(stored_types), set(now[env_id]["by_task_type"]), f"by_task_type of {env_id}", ""
        )
        for kind in sorted(stored_types):
            where = f"aggregates of {env_id}, task type {kind},"
            _compare_summary(stored_types[kind], fresh, (env_id, kind), where, how)


def _interval_kinds(aggregates: Mapping[str, Any]) -> list[bool]:
    """Which recomputations the stored summaries need.

    True for today's intervals (exact where every run scored the same 0 or 1); also False,
    the bootstrap everywhere, when a summary lacks ``ci_method`` (a file from before it).
    """
    summaries = [
        s for env in aggregates.values() for s in (env, *(env.get("by_task_type") or {}).values())
    ]
    return [True, False] if any("ci_method" not in s for s in summaries) else [True]


def _compare_keys(stored: set[str], fresh: set[str], what: str, source: str) -> None:
    if stored - fresh:
        raise BadSubmission(f"{what} name {sorted(stored - fresh)[0]}, which has no episodes")
    if fresh - stored:
        raise BadSubmission(f"{what} lack {sorted(fresh - stored)[0]}, which has episodes")


def _compare_summary(
    stored: Mapping[str, Any],
    fresh: Mapping[bool, Mapping[str, Any]],
    at: tuple[str, str | None],
    where: str,
    how: str,
) -> None:
    env_id, kind = at
    expected = fresh["ci_method" in stored][env_id]
    if kind is not None:
        expected = expected["by_task_type"][kind]
    for field in summary_fields():
        if not abs(float(stored[field]) - float(expected[field])) <= TOLERANCE:  # NaN fails too
            raise BadSubmission(
                f"{where} disagree with its episodes: {field} is {stored[field]!r} in the file "
                f"but {expected[field]!r} recomputed {how}"
            )
    if "ci_method" in stored and stored["ci_method"] != expected["ci_method"]:
        raise BadSubmission(
            f"{where} disagree with its episodes: ci_method is {stored['ci_method']!r} in the "
            f"file but {expected['ci_method']!r} recomputed"
        )


def _name(key: Key) -> str:
    return f"({key[0]}, run {key[1]}, episode {key[2]})"


CHECKS: tuple[Callable[[Doc], None], ...] = (
    check_schema,
    check_has_episodes,
    check_envs_declared,
    check_unique_keys,
    check_installation,
    check_seed_plan,
    check_aggregates,
)
"""The checks in the order :func:`check_submission` runs them (cheap and structural first;
each may assume that the ones before it passed)."""


def check_submission(doc: Doc, checks: Iterable[Callable[[Doc], None]] = CHECKS) -> None:
    """Run every check on a parsed results document.

    Args:
        doc: a results document, e.g. from :func:`load_submission`.
        checks: the checks to run, in order (default: all of :data:`CHECKS`).

    Raises:
        BadSubmission: the first check that fails, with one sentence saying why.
    """
    if not isinstance(doc, dict):
        raise BadSubmission(f"a results document is a JSON object, not {type(doc).__name__}")
    for check in checks:
        check(doc)
