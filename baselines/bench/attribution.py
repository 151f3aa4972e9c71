"""``agentgym bench attribution``: does GBC's blame name the agent and step that broke a run?

On a tools-family env (Tools-Ecommerce-v1 without schemas by default), the planner-caller-
summariser pipeline plays scripted messages (the oracle driver of
:mod:`agentgym.baselines.gbc.pipeline`), so that a fault injected into one call is the one
cause of a failure. Episode ``i`` injects one fault, cycling through the kinds:

* ``planner``: a corrupted plan (another tool) at a turn where the oracle calls tools;
* ``caller``: a wrong argument value at a turn where the oracle calls a tool with arguments;
* ``summariser``: a dropped fact in the final summary.

Episodes the fault does not make fail are counted and left out (the env does not check every
call: a wrong argument whose result the summary does not need is harmless). On the failed
ones, each method names one call, and it is right when that is the faulted (agent, step):

* ``gbc-<reduce>``: the largest blame after pushing the failure back through the connection
  weights (one forward and backward pass per call; every reduction from the same gradients);
* ``uniform``: every call equal, so the expected accuracy is the mean of 1 / calls;
* ``leave-one-out``: each call is re-run clean in turn and the episode re-executed; the first
  call whose re-run makes it succeed (the expensive counterfactual: one re-execution per call).

Rows: accuracy of (agent, step) and of the agent alone, per fault kind and overall, with the
cost per failed episode: passes and seconds for GBC, re-executed calls and env steps and
seconds for leave-one-out. The scorer is ``--checkpoint`` (a policy checkpoint trained on the
env; default: an untrained nano policy, which measures the method's plumbing, not its merit).
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from rich.console import Console
from rich.table import Table

from agentgym.baselines.gbc.attribution import (
    REDUCERS,
    Call,
    block_weights,
    input_gradients,
    propagate,
    top,
)
from agentgym.baselines.gbc.pipeline import PipelineAgent, PipelineSettings
from agentgym.baselines.gbc.script import SUMMARY, Script, tool_names
from agentgym.core.errors import BadInput
from agentgym.harness.episode import run_episode

ENV_ID = "agentgym/Tools-Ecommerce-v1"
KINDS = ("planner", "caller", "summariser")


def run(
    console: Console,
    quick: bool = False,
    env: str | None = None,
    checkpoint: str | None = None,
    tasks: int | None = None,
    **_: Any,
) -> dict[str, Any]:
    """Inject faults, attribute each failure three ways, print and return the table."""
    env_id = env or ENV_ID
    if "Tools-" not in env_id:
        raise BadInput(f"bench attribution runs on a tools-family env, not {env_id}")
    episodes = tasks or (6 if quick else 90)
    policy, scorer = _scorer(env_id, checkpoint)
    game = gym.make(env_id, schemas=False)
    tally: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    costs: dict[str, list[float]] = defaultdict(list)
    skipped = {"no_fault_site": 0, "no_effect": 0}
    for i in range(episodes):
        kind = KINDS[i % len(KINDS)]
        target = _target(game, seed=i, kind=kind)
        if target is None:
            skipped["no_fault_site"] += 1
            continue
        agent = PipelineAgent(policy, PipelineSettings(driver="oracle", fault=target))
        record = run_episode(game, agent, env_id=env_id, run=0, episode=i, seed=i)
        if record["success"] or record["error"]:
            skipped["no_effect"] += 1
            continue
        nodes = [f"{c.role}@{c.step}" for c in agent.calls]
        for method, pick, cost in _attribute(policy, game, env_id, i, agent.calls, target):
            for scope in (kind, "all"):
                tally[method][f"{scope}:step"].append(_right(pick, nodes, target))
                tally[method][f"{scope}:agent"].append(_right_agent(pick, nodes, target))
            for name, value in cost.items():
                costs[f"{method}:{name}"].append(value)
    doc = _document(env_id, scorer, episodes, skipped, tally, costs)
    _print(console, doc)
    return doc


def _scorer(env_id: str, checkpoint: str | None) -> tuple[Any, str]:
    """The policy whose gradients weigh the blocks, and how the report names it."""
    if checkpoint:
        agent = PipelineAgent.from_spec(checkpoint, {})
        return agent.policy, str(Path(checkpoint).name)
    from agentgym.baselines.policies.tiny import TinyPolicy
    from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer

    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(env_id, episodes=20), 800)
    return TinyPolicy.from_preset("nano", tokenizer, max_len=1024), "untrained nano"


def _target(env: Any, *, seed: int, kind: str) -> str | None:
    """The call to corrupt in episode ``seed``: a ``kind`` call where a fault can matter."""
    observation, _ = env.reset(seed=seed)
    script = Script.of(env.unwrapped, str(observation))
    sites = {
        "planner": lambda a: bool(tool_names(a)),
        "caller": lambda a: bool(tool_names(a)) and '"arguments": {}' not in a,
        "summariser": lambda a: a.startswith(SUMMARY) and bool(script.facts),
    }
    steps = [t for t, action in enumerate(script.actions) if sites[kind](action)]
    if not steps:
        return None
    return f"{kind}@{random.Random(seed).choice(steps)}"


def _attribute(
    policy: Any, env: Any, env_id: str, seed: int, calls: list[Call], target: str
) -> list[tuple[str, int | None, dict[str, float]]]:
    """``(method, the call it names, its cost)`` for every method on one failed episode."""
    start = time.perf_counter()
    grads = [input_gradients(policy, c.prompt, c.response) for c in calls]
    passes = time.perf_counter() - start
    out: list[tuple[str, int | None, dict[str, float]]] = []
    for reduce in REDUCERS:
        for call, (g, e) in zip(calls, grads, strict=True):
            call.weights = block_weights(call, g, e, reduce)
        own, _ = propagate(calls, 1.0)
        cost = {"backward": float(len(calls)), "seconds": passes}
        out.append((f"gbc-{reduce}", top(own), cost))
    out.append(("uniform", None, {"backward": 0.0, "seconds": 0.0}))
    start, steps, pick = time.perf_counter(), 0, None
    for k, call in enumerate(calls):
        settings = PipelineSettings(driver="oracle", fault=target, heal=f"{call.role}@{call.step}")
        rerun = run_episode(env, PipelineAgent(policy, settings), env_id=env_id, run=0,
                            episode=0, seed=seed)  # fmt: skip
        steps += rerun["steps"]
        if rerun["success"] and pick is None:
            pick = k
    cost = {"reruns": float(len(calls)), "env_steps": float(steps)}
    out.append(("leave-one-out", pick, {**cost, "seconds": time.perf_counter() - start}))
    return out


def _right(pick: int | None, nodes: list[str], target: str) -> float:
    if pick is None:  # uniform: the chance that a uniform draw names the target
        return 1.0 / len(nodes) if target in nodes else 0.0
    return float(nodes[pick] == target)


def _right_agent(pick: int | None, nodes: list[str], target: str) -> float:
    role = target.split("@")[0]
    if pick is None:
        return sum(n.startswith(role + "@") for n in nodes) / len(nodes)
    return float(nodes[pick].startswith(role + "@"))


def _document(
    env_id: str,
    scorer: str,
    episodes: int,
    skipped: dict[str, int],
    tally: dict[str, dict[str, list[float]]],
    costs: dict[str, list[float]],
) -> dict[str, Any]:
    rows = []
    for method, scores in tally.items():
        row: dict[str, Any] = {"method": method}
        for scope in (*KINDS, "all"):
            hits = scores.get(f"{scope}:step", [])
            row[f"{scope}_n"] = len(hits)
            row[f"{scope}_step"] = sum(hits) / len(hits) if hits else None
            agent_hits = scores.get(f"{scope}:agent", [])
            row[f"{scope}_agent"] = sum(agent_hits) / len(agent_hits) if agent_hits else None
        for key, values in costs.items():
            name, _, what = key.partition(":")
            if name == method:
                row[f"{what}_per_episode"] = sum(values) / len(values)
        rows.append(row)
    return {
        "part": "attribution",
        "env": env_id,
        "scorer": scorer,
        "episodes": episodes,
        "skipped": skipped,
        "rows": rows,
        "ratios": {},
    }


def _print(console: Console, doc: dict[str, Any]) -> None:
    failed = doc["rows"][0]["all_n"] if doc["rows"] else 0
    table = Table(
        title=f"fault attribution on {doc['env']} ({failed} failed faulted episodes of "
        f"{doc['episodes']}; scorer {doc['scorer']}; skipped {doc['skipped']})"
    )
    for head in ("method", *(f"{k} (n)" for k in KINDS), "all: step", "all: agent", "cost"):
        table.add_column(head)
    for row in doc["rows"]:
        cells = [row["method"]]
        for kind in KINDS:
            value = row[f"{kind}_step"]
            cells.append("-" if value is None else f"{value:.2f} ({row[f'{kind}_n']})")
        cells += [_pct(row["all_step"]), _pct(row["all_agent"]), _cost(row)]
        table.add_row(*cells)
    console.print(table)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cost(row: dict[str, Any]) -> str:
    parts = [
        f"{row[k]:.1f} {k.removesuffix('_per_episode')}"
        for k in ("backward_per_episode", "reruns_per_episode", "env_steps_per_episode")
        if k in row
    ]
    if "seconds_per_episode" in row:
        parts.append(f"{row['seconds_per_episode'] * 1000:.0f} ms")
    return ", ".join(parts) or "-"
