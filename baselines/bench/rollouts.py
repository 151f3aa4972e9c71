"""``agentgym bench rollouts``: rollout throughput with the envs here or in Ray actors.

The same rollout batch (a nano policy, 4 groups of 4 on Search-Menu-Small-v1, keyed Gumbel
sampling) is collected with the local pool and with :class:`RayEnvPool` on 1 and 2 env
actors, on two kinds of env:

* slow steps: every step also waits :data:`DELAY_MS` (as a browser, a remote API or a large
  world would), which actors overlap;
* plain steps: the env's own CPU work only (well under a millisecond), where each batched
  round trip to an actor costs more than it saves.

Rows: seconds per batch (median of alternating repeats), env steps per second, and whether
each backend's batch equals the local one. On a 2-core host the driver's generation and two
actors share two cores: the ratio shows overlap of waiting more than added compute. The
local Ray declares 3 logical CPUs, so that both Ray pools exist while the repeats alternate;
only one collects at a time.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import torch
from rich.console import Console
from rich.table import Table

from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.ray_pool import RayEnvPool
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.core.timing import alternate
from agentgym.harness.runner import ray_session

ENV_ID = "agentgym/Search-Menu-Small-v1"
DELAY_MS = 50.0
GROUPS, GROUP_SIZE = 4, 4
REPEATS, WARMUP = 3, 1


class StepDelay(gym.Wrapper):
    """Each step also sleeps :data:`DELAY_MS` (a slow env: a browser, a remote API)."""

    def step(self, action: Any) -> Any:
        """The env's step, then the wait."""
        out = self.env.step(action)
        time.sleep(DELAY_MS / 1000)
        return out


def _collector(
    policy: Any, pool: Any, tasks: Any, cfg: RolloutConfig, batches: dict[str, Any], name: str
) -> Any:
    """A call that collects the batch on ``pool`` and keeps it in ``batches[name]``."""
    keys = list(range(len(tasks) * GROUP_SIZE))

    def once() -> None:
        batches[name] = collect(policy, pool, tasks, GROUP_SIZE, cfg, gumbel_keys=keys)

    return once


def _form(trajs: list[Any]) -> list[Any]:
    return [[(t.extras["action"], t.reward) for t in traj.turns] for traj in trajs]


def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """The measurements; prints the table, returns the doc."""
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(ENV_ID, episodes=10), vocab_size=600)
    policy = TinyPolicy.from_preset("nano", tokenizer, max_len=1024)
    cfg = RolloutConfig(max_new_tokens=40)
    size = GROUPS * GROUP_SIZE
    repeats = 1 if quick else REPEATS
    rows: list[dict[str, Any]] = []
    ratios: dict[str, float] = {}
    # 3 logical CPUs: the 1-actor and the 2-actor pools both exist while the repeats
    # alternate, but only one collects at a time (on this host's 2 cores).
    with ray_session(num_cpus=3):
        for slow in (True, False):
            wrapper = f"{__name__}:StepDelay" if slow else None
            local = EnvPool(ENV_ID, size, split="train")
            if slow:
                local.envs = [StepDelay(e) for e in local.envs]
            pools: dict[str, Any] = {"local": local}
            for actors in (1, 2):
                pools[f"ray {actors} actor{'s' if actors > 1 else ''}"] = RayEnvPool(
                    ENV_ID, size, actors=actors, wrapper=wrapper, split="train"
                )
            tasks = [(local.envs[0].unwrapped.task_ids("train")[i], 7 + i) for i in range(GROUPS)]
            batches: dict[str, Any] = {}

            timed = alternate(
                {
                    name: _collector(policy, pools[name], tasks, cfg, batches, name)
                    for name in pools
                },
                repeats,
                WARMUP,
            )
            steps = sum(len(t.turns) for t in batches["local"])
            kind = f"{DELAY_MS:g} ms steps" if slow else "plain steps"
            for name in pools:
                seconds = timed.median(name)
                rows.append(
                    {
                        "env": kind,
                        "backend": name,
                        "s per batch": round(seconds, 3),
                        "env steps/s": round(steps / seconds, 1),
                        "same batch as local": _form(batches[name]) == _form(batches["local"]),
                    }
                )
            for name in pools:
                if name != "local":
                    ratios[f"{kind}: local / {name}"] = round(timed.ratio("local", name), 2)
                    pools[name].close()
    _print(console, rows, ratios)
    return {"part": "rollouts", "rows": rows, "ratios": ratios}


def _print(console: Console, rows: list[dict[str, Any]], ratios: dict[str, float]) -> None:
    table = Table(title=f"rollout throughput, {GROUPS}×{GROUP_SIZE} rollouts on {ENV_ID}")
    for col in ("env", "backend", "s per batch", "env steps/s", "same batch as local"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            *(str(r[c]) for c in ("env", "backend", "s per batch", "env steps/s")),
            str(r["same batch as local"]),
        )
    console.print(table)
    console.print(f"speed-ups over local: {ratios}")
