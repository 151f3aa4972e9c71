"""What is fixed per tool-env id: the domain, its initial state, the tasks and their splits."""

from __future__ import annotations

import copy
import functools
import importlib
import json
import pickle
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.tools.backend import TASK_TYPES, Domain, Task
from agentgym.envs.tools.digest import StateDigest, dump
from agentgym.envs.tools.rewards import canonical
from agentgym.envs.tools.schema import Validator

DOMAINS = {
    "ecommerce": "agentgym.envs.tools.domains.ecommerce:EcommerceDomain",
    "accounts": "agentgym.envs.tools.domains.accounts:AccountsDomain",
    "travel": "agentgym.envs.tools.domains.travel:TravelDomain",
}
PER_TYPE = {"train": 40, "val": 10, "test": 10}
"""Tasks of each type per split (the domain generates their sum)."""


@dataclass(frozen=True)
class Gold:
    """What scoring needs of a task's gold calls, computed once per task."""

    turns: list[list[dict[str, Any]]]
    """the gold calls as JSON, by turn."""
    counts: Counter[str]
    """how many times each distinct call (``canonical``) appears."""
    total: int


@dataclass(frozen=True, eq=False)
class World:
    """Everything fixed per id: the domain, its initial state (as JSON), the tasks."""

    domain: Domain
    state_json: str
    tasks: dict[str, Task]
    splits: dict[str, tuple[str, ...]]
    validator: Validator
    gold_states: dict[str, str] = field(default_factory=dict)
    state_pickle: bytes = b""
    """the initial state pickled: a reset unpickles it (faster than parsing the JSON)."""
    digest: StateDigest = field(default_factory=StateDigest)
    """the initial state's digest, copied at each reset."""
    golds: dict[str, Gold] = field(default_factory=dict)

    @functools.cached_property
    def tools_text(self) -> str:
        """The tools' JSON specs, one per line (computed once)."""
        return "\n".join(json.dumps(t.spec()) for t in self.domain.tools())

    @functools.cached_property
    def tool_names(self) -> str:
        """The tools' names, comma-separated (computed once)."""
        return ", ".join(self.validator.tools)

    def gold(self, task_id: str) -> Gold:
        """The task's gold calls as scoring reads them (cached)."""
        found = self.golds.get(task_id)
        if found is None:
            turns = [[c.to_json() for c in turn] for turn in self.tasks[task_id].gold_calls]
            counts = Counter(canonical(c) for turn in turns for c in turn)
            found = self.golds[task_id] = Gold(turns, counts, sum(counts.values()))
        return found

    def gold_state(self, task_id: str) -> str:
        """The digest of the backend state after the task's gold calls (cached)."""
        if task_id not in self.gold_states:
            state = json.loads(self.state_json)
            for turn in self.tasks[task_id].gold_calls:
                for call in turn:
                    self.domain.call(state, call.name, copy.deepcopy(call.arguments))
            self.gold_states[task_id] = StateDigest().hexdigest(state)
        return self.gold_states[task_id]


@functools.cache
def _world(domain_name: str, seed: int) -> World:
    module, _, cls = DOMAINS[domain_name].partition(":")
    domain: Domain = getattr(importlib.import_module(module), cls)()
    state = domain.build(seed)
    tasks = domain.tasks(copy.deepcopy(state), seed, sum(PER_TYPE.values()))
    by_type: dict[str, list[str]] = {t: [] for t in TASK_TYPES}
    for task in tasks:
        by_type[task.task_type].append(task.id)
    splits: dict[str, list[str]] = {s: [] for s in PER_TYPE}
    for ids in by_type.values():
        start = 0
        for split, n in PER_TYPE.items():
            splits[split].extend(ids[start : start + n])
            start += n
    world = World(
        domain=domain,
        state_json=dump(state),
        state_pickle=pickle.dumps(json.loads(dump(state)), protocol=pickle.HIGHEST_PROTOCOL),
        tasks={t.id: t for t in tasks},
        splits={s: tuple(ids) for s, ids in splits.items()},
        validator=Validator(domain.tools()),
    )
    world.digest.hexdigest(state)  # every entity's digest, once
    return world
