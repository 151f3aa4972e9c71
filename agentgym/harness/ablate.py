"""``agentgym ablate``: re-run an agent on corpora with its own provenance nodes removed.

This is the GraphRAG provenance study: it shows which evidence the agent's success depends on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym.agents import load_agent
from agentgym.core.errors import BadInput
from agentgym.harness.episode import run_episode
from agentgym.harness.results import EpisodeRecord
from agentgym.harness.seeds import episode_seeds
from agentgym.harness.stats import aggregate
from agentgym.registry import make


def _play(
    env_id: str, agent_spec: str, seeds: list[int], env_kwargs: dict[str, Any]
) -> tuple[list[EpisodeRecord], dict[str, dict[str, list[str]]]]:
    """Episodes of ``agent_spec`` (one per seed) and their final provenance by task@seed."""
    env, agent = make(env_id, **env_kwargs), load_agent(agent_spec)
    records, provenance = [], {}
    for run, seed in enumerate(seeds):

        def keep(info: dict[str, Any], seed: int = seed) -> None:
            prov = info.get("provenance", {})
            provenance[f"{info['task_id']}@{seed}"] = {
                "visited": list(prov.get("visited", [])),
                "cited": list(prov.get("cited", [])),
            }

        records.append(
            run_episode(env, agent, env_id=env_id, run=run, episode=0, seed=seed, on_end=keep)
        )
    env.close()
    return records, provenance


def ablate(
    agent_spec: str, env_id: str, *, seeds: int, root_seed: int = 0, split: str = "test"
) -> dict[str, Any]:
    """Success of the agent on the intact corpus and under each ablation of the env.

    Every ablated run replays the same seeds; an episode whose provenance hides nothing
    (e.g. it ended in an error) runs on the intact corpus.

    Returns:
        ``{env_id, agent, seeds, split, baseline: {n, mean, iqm, ci_low, ci_high, ...},
        ablations: {mode: {..., delta}}}`` where ``delta`` is the paired mean difference to
        the baseline.
    """
    if seeds < 1:
        raise BadInput("--seeds must be at least 1")
    load_agent(agent_spec)
    probe = make(env_id, split=split)
    modes = getattr(probe.unwrapped, "ablations", ())
    probe.close()
    if not modes:
        raise BadInput(f"{env_id} supports no graph ablation (it needs provenance and ablations)")
    plan = [row[0] for row in episode_seeds(root_seed, seeds, 1)]
    base_records, provenance = _play(env_id, agent_spec, plan, {"split": split})
    base = aggregate(base_records, bootstrap_seed=root_seed)[env_id]
    base_success = np.array([r["success"] for r in base_records], dtype=float)
    out: dict[str, Any] = {
        "env_id": env_id,
        "agent": agent_spec,
        "seeds": seeds,
        "split": split,
        "baseline": base,
        "ablations": {},
    }
    for mode in modes:
        kwargs = {"split": split, "ablation": mode, "provenance": provenance}
        records, _ = _play(env_id, agent_spec, plan, kwargs)
        success = np.array([r["success"] for r in records], dtype=float)
        agg = aggregate(records, bootstrap_seed=root_seed)[env_id]
        out["ablations"][mode] = {**agg, "delta": float(np.mean(success - base_success))}
    return out
