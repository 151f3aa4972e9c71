"""``agentgym verify``: re-run a sample of a submission's episodes and compare transcripts.

Aggregates can be recomputed by anyone who edits a file; transcripts cannot be forged without
playing the episodes. A submission whose sampled episodes replay to the same transcript hash,
success, return, steps and task is marked verified; otherwise "not reproduced", listing the
differing episodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentgym.agents import describe_agent, load_agent
from agentgym.core.errors import BadInput
from agentgym.harness.episode import run_episode
from agentgym.harness.results import EpisodeRecord
from agentgym.leaderboard.store import Leaderboard
from agentgym.registry import make

# What a replay must reproduce exactly (``seconds`` and ``tokens`` may vary).
REPLAYED_FIELDS = ("transcript_sha256", "success", "return", "steps", "task_id", "error")


def _sample(episodes: Sequence[EpisodeRecord], k: int, submission_id: int) -> list[EpisodeRecord]:
    """``k`` episodes drawn without replacement, the same ones each time for a submission."""
    rng = np.random.default_rng(submission_id)
    picks = rng.choice(len(episodes), size=min(k, len(episodes)), replace=False)
    return [episodes[i] for i in sorted(picks.tolist())]


def verify(lb: Leaderboard, submission_id: int, *, sample: int = 10) -> dict[str, Any]:
    """Replay ``sample`` random episodes of a submission and record whether they reproduce.

    Returns:
        ``{id, verified, checked, differing: [{env_id, run, episode, seed, fields, expected, got}],
        note}``.
    """
    if sample < 1:
        raise BadInput("--sample must be at least 1")
    doc = lb.document(submission_id)
    agent = doc["agent"]
    expected_sha = agent.get("checkpoint_sha256")
    if expected_sha and describe_agent(agent["spec"])["checkpoint_sha256"] != expected_sha:
        note = f"checkpoint at {agent['spec']} changed since submission"
        lb.set_verified(submission_id, False, note)
        return {"id": submission_id, "verified": False, "checked": 0, "differing": [], "note": note}
    kwargs = {e["id"]: e.get("kwargs", {}) for e in doc["envs"]}
    differing = []
    picked = _sample(doc["episodes"], sample, submission_id)
    for ep in picked:
        env = make(ep["env_id"], split=doc["split"], **kwargs.get(ep["env_id"], {}))
        replay = run_episode(
            env,
            load_agent(agent["spec"]),
            env_id=ep["env_id"],
            run=ep["run"],
            episode=ep["episode"],
            seed=ep["seed"],
        )
        env.close()
        got: Mapping[str, Any] = replay
        fields = [f for f in REPLAYED_FIELDS if got[f] != ep.get(f)]
        if fields:
            differing.append(
                {
                    "env_id": ep["env_id"],
                    "run": ep["run"],
                    "episode": ep["episode"],
                    "seed": ep["seed"],
                    "fields": fields,
                    "expected": {f: ep.get(f) for f in fields},
                    "got": {f: got[f] for f in fields},
                }
            )
    ok = not differing
    if ok:
        note = f"{len(picked)} sampled episodes replayed identically"
    else:
        keys = ", ".join(f"{d['env_id']} run {d['run']} episode {d['episode']}" for d in differing)
        note = f"not reproduced: {len(differing)} of {len(picked)} episodes differ ({keys})"
    lb.set_verified(submission_id, ok, note)
    return {
        "id": submission_id,
        "verified": ok,
        "checked": len(picked),
        "differing": differing,
        "note": note,
    }
