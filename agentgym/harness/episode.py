"""Playing one episode for the harness, recorded with its timing and transcript hash."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym

from agentgym.core.canonical import canonical, jsonable
from agentgym.harness.results import EpisodeRecord


def run_episode(
    env: gym.Env[Any, Any],
    agent: Any,
    *,
    env_id: str,
    run: int,
    episode: int,
    seed: int,
    on_end: Callable[[dict[str, Any]], None] | None = None,
    transcript: list[Any] | None = None,
) -> EpisodeRecord:
    """Play one episode and return its record (an error is recorded, never raised).

    The transcript hash covers every observation, action, reward and end flag, so a re-run
    of the same agent on the same seed can be compared byte for byte. Where the last
    ``info`` holds a ``certificate`` (see ``EpisodeRecord``), the record keeps it.

    Args:
        env: the env, made for the evaluation's split.
        agent: an agent (``reset``, ``act``, optional ``bind``, ``finish``, ``tokens_used``,
            ``compute_used`` and ``blame_used``).
        env_id: the env's id; ``run`` and ``episode`` complete the record's key.
        run: the run index.
        episode: the episode index within the run.
        seed: passed to ``env.reset`` and ``agent.reset``.
        on_end: receives the last ``info`` of an episode that ended normally.
        transcript: when given, gets the same exchange as JSON-able lists
            (``["reset", seed, obs]`` then one ``[action, obs, reward, terminated,
            truncated]`` per step).

    Returns:
        The episode's record; its ``transcript_sha256`` hashes the canonical JSON of each
        item of the exchange in turn.
    """
    record = _blank_record(env_id, run, episode, seed)
    digest = hashlib.sha256()
    start = time.perf_counter()
    try:
        obs, info = env.reset(seed=seed)
        record["task_id"], record["task_type"] = info.get("task_id"), info.get("task_type")
        agent.reset(env_id, seed)
        if hasattr(agent, "bind"):
            agent.bind(env.unwrapped)
        _note(digest, transcript, ["reset", seed, obs])
        while True:
            action = agent.act(obs, info)
            obs, reward, terminated, truncated, info = env.step(action)
            _note(digest, transcript, [action, obs, reward, terminated, truncated])
            record["steps"] += 1
            record["return"] += float(reward)
            if terminated or truncated:
                record["success"] = bool(info.get("won", False))
                if info.get("error"):  # the env failed (a crashed browser), not the agent
                    record["error"] = f"env: {info['error']}"
                if "certificate" in info:  # an all-optima certificate of a matched metric
                    cast("dict[str, Any]", record)["certificate"] = info["certificate"]
                if on_end is not None:
                    on_end(info)
                if hasattr(agent, "finish"):  # e.g. a pipeline attributing the outcome
                    agent.finish(info)
                break
    except Exception as e:
        record["error"] = f"{type(e).__name__}: {e}"
    record["tokens"] = int(getattr(agent, "tokens_used", 0) or 0)
    _note_extras(record, agent)
    record["seconds"] = round(time.perf_counter() - start, 6)
    record["transcript_sha256"] = digest.hexdigest()
    return record


def _note_extras(record: EpisodeRecord, agent: Any) -> None:
    """Keep what the agent reports of the episode beyond its actions (optional record keys).

    ``compute_used``: counts of the extra work it did (``forward``, ``backward``,
    ``verifier``, ...); ``blame_used``: per-agent, per-step blame of a multi-agent pipeline.
    """
    extra = cast("dict[str, Any]", record)
    compute = getattr(agent, "compute_used", None)
    if compute:
        extra["compute"] = {str(k): int(v) for k, v in dict(compute).items()}
    blame = getattr(agent, "blame_used", None)
    if blame:
        extra["blame"] = jsonable(list(blame))


def errored_record(env_id: str, run: int, episode: int, seed: int, error: str) -> EpisodeRecord:
    """The record of an episode that ended with no result (its worker died): ``error`` says why.

    It reads like the record of an episode whose ``reset`` raised: no steps, the hash of an
    empty exchange.
    """
    record = _blank_record(env_id, run, episode, seed)
    record["error"] = error
    record["transcript_sha256"] = hashlib.sha256().hexdigest()
    return record


def _blank_record(env_id: str, run: int, episode: int, seed: int) -> EpisodeRecord:
    """The record of an episode not played yet, its keys in results-file order."""
    return {
        "env_id": env_id,
        "run": run,
        "episode": episode,
        "seed": seed,
        "task_id": None,
        "task_type": None,
        "success": False,
        "return": 0.0,
        "steps": 0,
        "tokens": 0,
        "seconds": 0.0,
        "error": None,
        "transcript_sha256": "",
    }


def _note(digest: Any, transcript: list[Any] | None, item: list[Any]) -> None:
    """Add ``item`` to the running hash (and to ``transcript``)."""
    data = jsonable(item)
    digest.update(canonical(data))
    if transcript is not None:
        transcript.append(data)
