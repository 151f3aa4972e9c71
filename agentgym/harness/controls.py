"""Metric controls (cross-view correspondence as measurement intervention).

A success metric is only trustworthy if it passes two controls on the same tasks:

* positive: the oracle must score 1.0 (the metric can recognise success);
* null: gold answers permuted across episodes (each task scored with another task's gold
  answer) must score at chance, the rate at which two tasks share an answer (the metric
  does not reward answers unrelated to the task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from agentgym.registry import make

if TYPE_CHECKING:
    from agentgym.harness.evaluate import RunPlan


def _null_control(
    env_id: str, seeds: list[int], split: str, env_kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    """The null control on one env, or None where the env has no gold answers.

    Returns:
        The mean exact-match score of permuted gold answers, the chance rate, and whether
        the first stays within two standard errors (plus 2 points) of the second.
    """
    env = make(env_id, split=split, privileged=True, **env_kwargs)
    base: Any = env.unwrapped
    golds = []
    for seed in seeds:
        _, info = env.reset(seed=seed)
        if "gold_answer" not in info:
            return None
        golds.append(info["gold_answer"])
    n = len(golds)
    if n < 2:
        return None
    scores, own = [], []
    for i, seed in enumerate(seeds):  # rotate by one: every episode gets another's answer
        env.reset(seed=seed)
        scores.append(float(base.check_answer(golds[(i + 1) % n]) == 1.0))
        own.append(float(base.check_answer(golds[i]) == 1.0))  # sanity: its own gold wins
    same = np.array([[a == b for b in golds] for a in golds], dtype=float)
    chance = float((same.sum() - n) / (n * (n - 1)))
    mean = float(np.mean(scores))
    tolerance = 2 * np.sqrt(max(chance * (1 - chance), 1e-12) / n) + 0.02
    env.close()
    return {
        "mean": mean,
        "chance": chance,
        "ok": bool(mean <= chance + tolerance and min(own) == 1.0),
    }


def run_controls(plan: RunPlan) -> dict[str, Any]:
    """Both controls on the evaluation's own seeds and envs, per env.

    Returns:
        ``{env_id: {"positive": {"agent", "mean", "ok"}, "null": {"mean", "chance", "ok"} or
        None where the env has no gold answer}}``.
    """
    from agentgym.harness.evaluate import evaluate

    flat = [s for row in plan.episode_seeds() for s in row]
    oracle = evaluate(
        "oracle",
        list(plan.env_ids),
        seeds=plan.seeds,
        episodes_per_seed=plan.episodes_per_seed,
        root_seed=plan.root_seed,
        split=plan.split,
        env_kwargs=plan.env_kwargs,
    )
    out = {}
    for env_id in plan.env_ids:
        mean = oracle["aggregates"][env_id]["mean"]
        out[env_id] = {
            "positive": {"agent": "oracle", "mean": mean, "ok": mean == 1.0},
            "null": _null_control(env_id, flat, plan.split, plan.env_kwargs),
        }
    return out
