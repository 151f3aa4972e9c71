"""``evaluate``: a fixed agent scored over many random seeds, written as a results file.

Records stream to a journal as episodes finish (see :mod:`agentgym.harness.journal`), so the
same command resumes an interrupted run; another run's file is refused unless overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from agentgym.agents import describe_agent, load_agent
from agentgym.core.errors import AgentGymError, BadInput
from agentgym.harness.controls import run_controls
from agentgym.harness.journal import Journal, journal_path, read_journal, transcripts_path
from agentgym.harness.pool import Pool
from agentgym.harness.results import (
    HARNESS_VERSION,
    IDENTITY_FIELDS,
    SCHEMA_VERSION,
    AgentEntry,
    EnvEntry,
    EpisodeRecord,
    ResultsDoc,
    ResultsHeader,
    identity_of,
    packages,
    read_results,
    write_atomic,
)
from agentgym.harness.runner import Unit, execute
from agentgym.harness.seeds import episode_seeds
from agentgym.harness.stats import DEFAULT_REPS, aggregate
from agentgym.harness.worker import make_env
from agentgym.registry import env_info
from agentgym.terminal import Progress

Key = tuple[str, int, int]


class Interrupted(AgentGymError):
    """Ctrl-C during an evaluation: the finished episodes are saved in the journal."""


def _key(record: EpisodeRecord) -> Key:
    """An episode's key ``(env_id, run, episode)``."""
    return record["env_id"], record["run"], record["episode"]


@dataclass(frozen=True)
class RunPlan:
    """What an evaluation plays: an agent on envs over a seed tree.

    Everything but where the results go and how the episodes are run.
    """

    agent_spec: str
    env_ids: tuple[str, ...]
    seeds: int
    episodes_per_seed: int = 1
    root_seed: int = 0
    split: str = "test"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    env_url: str | None = None
    """An env service to play on (its episodes are the local env's, so not in the identity)."""
    agent_options: dict[str, Any] = field(default_factory=dict)
    """Settings for the agent (``eval --agent-option``); part of the agent's identity."""

    @property
    def total(self) -> int:
        """Episodes in the plan."""
        return len(self.env_ids) * self.seeds * self.episodes_per_seed

    def episode_seeds(self) -> list[list[int]]:
        """``seeds[run][episode]`` (see :func:`agentgym.harness.seeds.episode_seeds`)."""
        return episode_seeds(self.root_seed, self.seeds, self.episodes_per_seed)


def header(plan: RunPlan) -> ResultsHeader:
    """Everything of a results file but its episodes and aggregates (builds each env once)."""
    envs: list[EnvEntry] = []
    for env_id in plan.env_ids:
        env = make_env(env_id, plan.env_url, split=plan.split, **plan.env_kwargs)
        envs.append(
            {
                "id": env_id,
                "version": int(env_id.rsplit("-v", 1)[1]),
                "kwargs": dict(plan.env_kwargs),
                "data_hash": getattr(env.unwrapped, "data_hash", None),
            }
        )
        env.close()
    return {
        "schema_version": SCHEMA_VERSION,
        "harness_version": HARNESS_VERSION,
        "agent": cast(AgentEntry, describe_agent(plan.agent_spec, plan.agent_options)),
        "envs": envs,
        "split": plan.split,
        "root_seed": plan.root_seed,
        "episodes_per_seed": plan.episodes_per_seed,
        "seeds": plan.seeds,
        "bootstrap": {"seed": plan.root_seed, "reps": DEFAULT_REPS},
        "packages": packages(),
    }


def _resume(out: Path, identity: dict[str, Any], overwrite: bool) -> list[EpisodeRecord]:
    """Finished episodes of the same command in ``out`` and its journal; refuse another run's."""
    if overwrite:
        return []
    kept: dict[Key, EpisodeRecord] = {}
    sources: list[tuple[dict[str, Any] | None, list[EpisodeRecord]]] = []
    if out.exists():
        old = read_results(out)
        sources.append((identity_of(old), old["episodes"]))
    sources.append(read_journal(journal_path(out)))
    for old_identity, records in sources:
        if old_identity is None:
            continue
        differs = [k for k in IDENTITY_FIELDS if old_identity.get(k) != identity[k]]
        if differs:
            raise BadInput(
                f"{out} belongs to another run (its {', '.join(differs)} differ): "
                "choose another --out or pass --overwrite"
            )
        for record in records:
            if record.get("error") is None:  # errored episodes are played again
                kept[_key(record)] = record
    return list(kept.values())


def plan_units(plan: RunPlan, done: set[Key], transcripts: bool = False) -> list[Unit]:
    """The units (env × run) with at least one episode not in ``done``."""
    seeds = plan.episode_seeds()
    units = []
    for env_id in plan.env_ids:
        for run, run_seeds in enumerate(seeds):
            todo = tuple((m, s) for m, s in enumerate(run_seeds) if (env_id, run, m) not in done)
            if todo:
                units.append(
                    Unit(
                        env_id,
                        run,
                        todo,
                        plan.agent_spec,
                        plan.split,
                        dict(plan.env_kwargs),
                        transcripts,
                        plan.env_url,
                        dict(plan.agent_options),
                    )
                )
    return units


def evaluate(
    agent_spec: str,
    env_ids: list[str],
    *,
    seeds: int,
    episodes_per_seed: int = 1,
    root_seed: int = 0,
    split: str = "test",
    env_kwargs: dict[str, Any] | None = None,
    out: Path | None = None,
    overwrite: bool = False,
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    pool: Pool | None = None,
    transcripts: bool = False,
    controls: bool = False,
    progress: bool = False,
    env_url: str | None = None,
    agent_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Score an agent on envs over many seeded runs; return the results document.

    Args:
        agent_spec: random, oracle, module:Class, a checkpoint directory or openai:URL#model.
        env_ids: registered ids.
        seeds: number of runs, each with its own seed tree.
        episodes_per_seed: episodes per run (a run's score is their mean success).
        root_seed: root of ``SeedSequence``.
        split: the task split to evaluate on.
        env_kwargs: extra constructor arguments for every env.
        out: results file; resumed when it (or its journal) came from the same command.
        overwrite: replace ``out`` even if it belongs to another run.
        backend: "local", "process" or "ray".
        workers: processes (process backend) or CPUs of a local Ray.
        address: address of an existing Ray cluster.
        pool: a started pool (:func:`agentgym.harness.pool.open_pool`) to play on instead of
            one started for this call; it stays open, warm for the caller's next call. Its
            own backend and workers replace ``backend`` and ``workers``.
        transcripts: also write every exchange to ``out``'s ``.transcripts.jsonl``.
        controls: also run the metric controls: positive (oracle), null (permuted answers)
            and perturbation (known perturbations of the gold lower the score as expected).
        progress: show a progress bar on stderr.
        env_url: play the envs on this env service (``agentgym serve``) through
            agentgym/Remote-v0; the records are the same as local ones.
        agent_options: settings for the agent (see :func:`agentgym.agents.load_agent`);
            they are part of the results' agent entry, so other options are another run.

    Raises:
        BadInput: unusable arguments, or ``out`` belongs to another run.
        Interrupted: Ctrl-C; finished episodes stay in the journal for a resume.
    """
    kwargs = dict(env_kwargs or {})
    plan = RunPlan(
        agent_spec,
        tuple(env_ids),
        seeds,
        episodes_per_seed,
        root_seed,
        split,
        kwargs,
        env_url,
        dict(agent_options or {}),
    )
    _check(plan, out, transcripts)
    doc = header(plan)
    records = _resume(out, identity_of(doc), overwrite) if out else []
    units = plan_units(plan, {_key(r) for r in records}, transcripts)
    journal = Journal(journal_path(out), identity_of(doc), records) if out else None
    how = {"backend": backend, "workers": workers, "address": address, "pool": pool}
    try:
        bar = _progress(plan, len(records)) if progress else None
        _play(units, records, journal, out if transcripts else None, bar, **how)
    except KeyboardInterrupt:
        raise _interrupted(journal, len(records), plan.total) from None
    result = finish(doc, records)
    if controls:
        result["controls"] = run_controls(plan)
    if out:
        _save(out, result, journal, transcripts)
    return dict(result)  # a plain dict, as callers annotate it


def _check(plan: RunPlan, out: Path | None, transcripts: bool) -> None:
    """Refuse (BadInput) a plan whose counts, output, envs or agent are unusable."""
    if plan.seeds < 1 or plan.episodes_per_seed < 1:
        raise BadInput("--seeds and --episodes-per-seed must be at least 1")
    if transcripts and out is None:
        raise BadInput("--transcripts needs --out (they are written beside it)")
    if out is not None and (out.is_dir() or not out.name):
        raise BadInput(f"{out} is a directory: give a file path for --out")
    for env_id in plan.env_ids:
        env_info(env_id)
    load_agent(plan.agent_spec, plan.agent_options)  # a bad spec fails before any work


def _interrupted(journal: Journal | None, done: int, total: int) -> Interrupted:
    """Keep the journal of an interrupted run and say how to resume it."""
    if journal:
        journal.close(remove=False)
    where = f"; run the same command to resume from {journal.path}" if journal else ""
    return Interrupted(f"interrupted after {done} of {total} episodes{where}")


def _save(out: Path, result: ResultsDoc, journal: Journal | None, transcripts: bool) -> None:
    """Write the results file, then drop the journal and duplicate transcripts."""
    write_atomic(out, result)
    assert journal is not None
    journal.close(remove=True)
    if transcripts:
        _compact_transcripts(transcripts_path(out), {_key(r) for r in result["episodes"]})


def _play(
    units: list[Unit],
    records: list[EpisodeRecord],
    journal: Journal | None,
    transcripts_out: Path | None,
    bar: Progress | None,
    **backend: Any,
) -> None:
    """Run the units, streaming each finished episode to the journal (and transcripts)."""
    tfile = transcripts_path(transcripts_out).open("a") if transcripts_out else None
    try:
        for record, steps in execute(units, **backend):
            if tfile is not None:
                line = {"key": list(_key(record)), "steps": steps}
                if "blame" in record:  # a pipeline's blame per call, beside the exchange
                    line["blame"] = cast(dict[str, Any], record)["blame"]
                tfile.write(json.dumps(line) + "\n")
                tfile.flush()
            if journal:
                journal.append(record)
            records.append(record)
            if bar:
                bar.advance(success=_mean_success(records))
    finally:
        if tfile is not None:
            tfile.close()
        if bar:
            bar.close()


def _compact_transcripts(path: Path, keys: set[Key]) -> None:
    """Keep one transcript per finished episode (a resumed run may have written twice)."""
    latest: dict[Key, str] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            env_id, run, episode = json.loads(line)["key"]
        except (ValueError, KeyError):
            continue  # a line cut short by a kill
        key = (env_id, run, episode)
        if key in keys:
            latest[key] = line
    body = "".join(latest[k] + "\n" for k in sorted(latest))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(body)
    tmp.replace(path)


def _progress(plan: RunPlan, done: int) -> Progress:
    """The evaluation's progress over its episodes, ``done`` of them already journaled."""
    envs = ", ".join(plan.env_ids)
    bar = Progress(f"eval {plan.agent_spec} on {envs} ({plan.split})", plan.total, unit="episodes")
    bar.done = done
    return bar


def _mean_success(records: list[EpisodeRecord]) -> float:
    """The mean success of the episodes so far (shown beside the count)."""
    return sum(float(r["success"]) for r in records) / len(records)


def finish(doc: ResultsHeader, episodes: Iterable[EpisodeRecord]) -> ResultsDoc:
    """The results document: header, episodes in key order, aggregates with intervals.

    Args:
        doc: the header (:func:`header`).
        episodes: every episode of the plan, in any order.

    Returns:
        The document ``eval`` writes; its aggregates use the header's bootstrap seed and
        repetitions.
    """
    ordered = sorted(episodes, key=_key)
    boot = doc["bootstrap"]
    stats = aggregate(ordered, bootstrap_seed=boot["seed"], reps=boot["reps"])
    return {**doc, "episodes": ordered, "aggregates": stats}
