"""``evaluate``: a fixed agent scored over many random seeds, written as a results file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym.agents import load_agent
from agentgym.core.errors import BadInput
from agentgym.harness.episode import run_episode
from agentgym.harness.results import (
    HARNESS_VERSION,
    IDENTITY_FIELDS,
    SCHEMA_VERSION,
    aggregates,
    packages,
    read_results,
    write_atomic,
)
from agentgym.harness.seeds import episode_seeds
from agentgym.registry import env_info, make


def _env_version(env_id: str) -> int:
    return int(env_id.rsplit("-v", 1)[1])


def header(
    agent_spec: str,
    env_ids: list[str],
    *,
    seeds: int,
    episodes_per_seed: int,
    root_seed: int,
    split: str,
    env_kwargs: dict[str, Any],
) -> dict[str, Any]:
    """Everything of a results file but its episodes and aggregates."""
    envs = []
    for env_id in env_ids:
        env = make(env_id, split=split, **env_kwargs)
        envs.append(
            {
                "id": env_id,
                "version": _env_version(env_id),
                "kwargs": dict(env_kwargs),
                "data_hash": getattr(env.unwrapped, "data_hash", None),
            }
        )
        env.close()
    return {
        "schema_version": SCHEMA_VERSION,
        "harness_version": HARNESS_VERSION,
        "agent": {"name": agent_spec.split(":")[-1], "spec": agent_spec, "checkpoint_sha256": None},
        "envs": envs,
        "split": split,
        "root_seed": root_seed,
        "episodes_per_seed": episodes_per_seed,
        "seeds": seeds,
        "bootstrap": {"seed": root_seed, "reps": 0},
        "packages": packages(),
    }


def _resume(out: Path, doc: dict[str, Any], overwrite: bool) -> list[dict[str, Any]]:
    """Episodes already in ``out`` when it came from the same command; refuse another run's."""
    if not out.exists() or overwrite:
        return []
    old = read_results(out)
    differs = [k for k in IDENTITY_FIELDS if old.get(k) != doc[k]]
    if differs:
        raise BadInput(
            f"{out} belongs to another run (its {', '.join(differs)} differ): "
            "choose another --out or pass --overwrite"
        )
    return [e for e in old["episodes"] if e.get("error") is None]


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
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Score ``agent_spec`` on each env over ``seeds`` runs of ``episodes_per_seed`` episodes.

    The file at ``out`` is rewritten after every run, so an interrupted evaluation resumes
    where it stopped when the same command is run again. Errored episodes are recorded and
    re-run on resume.
    """
    if seeds < 1 or episodes_per_seed < 1:
        raise BadInput("--seeds and --episodes-per-seed must be at least 1")
    for env_id in env_ids:
        env_info(env_id)
    kwargs = dict(env_kwargs or {})
    load_agent(agent_spec)  # a bad spec fails before any work
    doc = header(
        agent_spec,
        env_ids,
        seeds=seeds,
        episodes_per_seed=episodes_per_seed,
        root_seed=root_seed,
        split=split,
        env_kwargs=kwargs,
    )
    episodes = _resume(out, doc, overwrite) if out else []
    if out:
        write_atomic(out, _finish(doc, episodes))  # an unwritable --out fails before any work
    done = {(e["env_id"], e["run"], e["episode"]) for e in episodes}
    plan = episode_seeds(root_seed, seeds, episodes_per_seed)
    total, count = len(env_ids) * seeds * episodes_per_seed, len(done)
    for env_id in env_ids:
        env = make(env_id, split=split, **kwargs)
        agent = load_agent(agent_spec)
        for run, run_seeds in enumerate(plan):
            for episode, seed in enumerate(run_seeds):
                if (env_id, run, episode) in done:
                    continue
                episodes.append(
                    run_episode(env, agent, env_id=env_id, run=run, episode=episode, seed=seed)
                )
                count += 1
                if progress:
                    progress(count, total)
            if out:
                write_atomic(out, _finish(doc, episodes))
        env.close()
    result = _finish(doc, episodes)
    if out:
        write_atomic(out, result)
    return result


def _finish(doc: dict[str, Any], episodes: list[dict[str, Any]]) -> dict[str, Any]:
    episodes = sorted(episodes, key=lambda e: (e["env_id"], e["run"], e["episode"]))
    return {**doc, "episodes": episodes, "aggregates": aggregates(episodes)}
