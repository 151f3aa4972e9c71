"""Metric controls (cross-view correspondence as measurement intervention, CREDIT.md §13).

A metric is only trustworthy if it passes three controls on the same tasks:

* positive: the oracle must score 1.0 (the metric can recognise success);
* null: gold answers permuted across episodes (each task scored with another task's gold
  answer) must score at chance, the rate at which two tasks share an answer (the metric
  does not reward answers unrelated to the task);
* perturbation: a known change to the gold must lower the score by exactly the amount the
  metric's definition gives (the metric sees what it claims to measure). Gold answers of a
  token-F1 family (:data:`ANSWER_F1_FAMILIES`): the answer written twice scores F1 2/3
  (precision 1/2, recall 1); its first k = ceil(n/2) of n plain words score 2k/(n+k)
  (precision 1, recall k/n). Gold calls of an env with ``check_calls``: the last of n calls
  dropped scores Tool-Exact-Match (n-1)/n, a spurious call added n/(n+1), and one of m
  argument values changed in a call whose name the gold uses once scores param_values
  1 - 1/(m n) with param_keys still 1 (that call's pair is then fixed; every other call
  pairs with its equal). An alias of the answer (official 2Wiki data) that equals the cut
  answer would score it 1.0: the control names such episodes' seeds.

The control reads the gold from the privileged info and scores with the env's own
``check_answer`` / ``check_calls``; what it expects comes from the definitions above, not
from the env.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from agentgym.registry import make

if TYPE_CHECKING:
    from agentgym.harness.evaluate import RunPlan

ANSWER_F1_FAMILIES = ("search",)
"""Families whose ``check_answer`` is exact match, else token F1 (SQuAD normalisation): the
only answer metric whose perturbed score the harness knows."""
SPURIOUS_CALL: dict[str, Any] = {"name": "perturbation.spurious_call", "arguments": {}}
"""A call no gold holds (tool names carry no dot)."""
CHANGED_VALUE = "<perturbed value>"
"""What replaces one gold argument value."""
EXACT = 1e-9
"""A perturbed score this close to its expected value is as expected."""
_ARTICLES = frozenset({"a", "an", "the"})

Perturbed = tuple[str, str, float, float]
"""(perturbation, metric, score, expected score) of one episode."""


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


def _answer_perturbations(base: Any, info: dict[str, Any]) -> list[Perturbed]:
    """The gold answer written twice and cut to its first half, where their F1 is known."""
    gold = info.get("gold_answer")
    if gold is None or getattr(base, "family", None) not in ANSWER_F1_FAMILIES:
        return []
    words = gold.split()
    plain = [w.isalnum() and w.lower() not in _ARTICLES for w in words]
    if not any(plain):  # normalisation could leave nothing to score
        return []
    out = [("answer written twice", "check_answer", base.check_answer(f"{gold} {gold}"), 2 / 3)]
    if len(words) >= 2 and all(plain):  # each word stays one token after normalisation
        n, k = len(words), (len(words) + 1) // 2
        cut = base.check_answer(" ".join(words[:k]))
        out.append(("answer cut to its first half", "check_answer", cut, 2 * k / (n + k)))
    return out


def _call_perturbations(base: Any, info: dict[str, Any]) -> list[Perturbed]:
    """Gold calls with one dropped, one spurious call added, one argument value changed."""
    gold = info.get("gold_tool_calls")
    check = getattr(base, "check_calls", None)
    if gold is None or check is None:
        return []
    n = len(gold)
    added = check([[*gold, SPURIOUS_CALL]])["tool_exact_match"]
    out = [("a spurious call added", "tool_exact_match", added, n / (n + 1))]
    if n:
        dropped = check([gold[:-1]])["tool_exact_match"]
        out.append(("the last gold call dropped", "tool_exact_match", dropped, (n - 1) / n))
    names = Counter(c["name"] for c in gold)
    at = next((i for i, c in enumerate(gold) if names[c["name"]] == 1 and c["arguments"]), None)
    if at is not None:
        call = gold[at]
        key, m = sorted(call["arguments"])[0], len(call["arguments"])
        changed = [*gold]
        changed[at] = {"name": call["name"], "arguments": {**call["arguments"], key: CHANGED_VALUE}}
        scores = check([changed])
        label = "one argument value changed"
        out.append((label, "param_values", scores["param_values"], 1 - 1 / (m * n)))
        out.append((label, "param_keys", scores["param_keys"], 1.0))
    return out


def _perturbation_control(
    env_id: str, seeds: list[int], split: str, env_kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    """The perturbation control on one env, or None where no perturbation applies to it.

    Returns:
        ``{"checks": [...], "ok"}``: per perturbation and metric the episodes it applied to,
        the mean score and mean expected score, how many episodes were ``off`` (not within
        :data:`EXACT` of the expected score), the first ``off_seeds``, and ``ok`` (none off).
    """
    env = make(env_id, split=split, privileged=True, **env_kwargs)
    base: Any = env.unwrapped
    rows: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for seed in seeds:
        _, info = env.reset(seed=seed)
        for name, metric, score, expected in (
            *_answer_perturbations(base, info),
            *_call_perturbations(base, info),
        ):
            rows.setdefault((name, metric), []).append((float(score), expected, seed))
    env.close()
    checks = []
    for (name, metric), found in rows.items():
        off = [seed for score, expected, seed in found if abs(score - expected) > EXACT]
        checks.append(
            {
                "name": name,
                "metric": metric,
                "episodes": len(found),
                "mean": float(np.mean([r[0] for r in found])),
                "expected": float(np.mean([r[1] for r in found])),
                "off": len(off),
                "off_seeds": off[:5],
                "ok": not off,
            }
        )
    return {"checks": checks, "ok": all(c["ok"] for c in checks)} if checks else None


def run_controls(plan: RunPlan) -> dict[str, Any]:
    """The three controls on the evaluation's own seeds and envs, per env.

    Returns:
        ``{env_id: {"positive": {"agent", "mean", "ok"}, "null": {"mean", "chance", "ok"} or
        None where the env has no gold answer, "perturbation": {"checks", "ok"} (see
        :func:`_perturbation_control`) or None where no perturbation applies}}``.
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
            "perturbation": _perturbation_control(env_id, flat, plan.split, plan.env_kwargs),
        }
    return out
