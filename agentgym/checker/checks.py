"""The named checks of ``agentgym check``. Each raises ``AssertionError`` with how to fix it."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.checker.transcript import (
    ADVERSARIAL_ACTIONS,
    canonical,
    continue_canonical,
    transcript,
    transcript_digest,
)
from agentgym.core.env import SPLITS, AgentEnv
from agentgym.core.info import info_problems
from agentgym.registry import make

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
RANDOM_SEEDS = 50
RANDOM_MAX_SUCCESS = 0.3
ORACLE_TASKS_PER_TYPE = 5


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one named check."""

    name: str
    ok: bool
    detail: str
    seconds: float


@dataclass
class CheckReport:
    """All checks run on one id."""

    env_id: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(r.ok for r in self.results)

    def failures(self) -> str:
        """The failed checks, one per line."""
        return "\n".join(f"{r.name}: {r.detail}" for r in self.results if not r.ok)


@dataclass(frozen=True)
class Ctx:
    """What each check receives."""

    env_id: str
    env_kwargs: dict[str, Any]

    def make(self, **extra: Any) -> gym.Env[Any, Any]:
        """A fresh env of ``env_id`` made with ``env_kwargs``, ``extra`` overriding them."""
        return make(self.env_id, **{**self.env_kwargs, **extra})


def _unwrapped(env: gym.Env[Any, Any]) -> AgentEnv[Any, Any]:
    base = env.unwrapped
    assert isinstance(base, AgentEnv), f"{type(base).__name__} is not an agentgym AgentEnv"
    return base


def play(
    env: gym.Env[Any, Any], agent: Any, *, seed: int | None = None, task_id: str | None = None
) -> tuple[bool, dict[str, Any], int]:
    """One episode; returns (won, last info, number of steps)."""
    options = {"task_id": task_id} if task_id else None
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(env.spec.id if env.spec else "", seed or 0)
    if hasattr(agent, "bind"):
        agent.bind(env.unwrapped)
    steps = 0
    while True:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        steps += 1
        if terminated or truncated:
            return bool(info.get("won")), info, steps


# ---------------------------------------------------------------------- the checks
def check_gymnasium(ctx: Ctx) -> None:
    """Gymnasium's check_env passes without a single warning."""
    env = ctx.make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    messages = sorted({str(w.message) for w in caught})
    assert not messages, "check_env warned: " + " | ".join(messages)


def check_splits(ctx: Ctx) -> None:
    """train, val and test are non-empty and disjoint."""
    env = _unwrapped(ctx.make())
    sets = {s: set(env.task_ids(s)) for s in SPLITS}
    for s, ids in sets.items():
        assert ids, f"split {s!r} has no task: declare a non-empty range"
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1 :]:
            shared = sets[a] & sets[b]
            assert not shared, f"splits {a} and {b} share {len(shared)} tasks, e.g. {min(shared)}"


def check_determinism(ctx: Ctx) -> None:
    """Two envs with the same seed give byte-identical transcripts."""
    for seed in (0, 1):
        a = transcript(ctx.env_id, seed, env_kwargs=ctx.env_kwargs)
        b = transcript(ctx.env_id, seed, env_kwargs=ctx.env_kwargs)
        assert a == b, f"seed {seed}: transcripts differ; draw all randomness from self.np_random"


def check_cross_process(ctx: Ctx) -> None:
    """A fresh Python process gives the same transcript (no hash() or set order leaks)."""
    here = transcript_digest(ctx.env_id, 3, env_kwargs=ctx.env_kwargs)
    code = (
        "import json, sys; from agentgym.checker import transcript_digest;"
        f"print(transcript_digest({ctx.env_id!r}, 3, env_kwargs=json.loads(sys.argv[1])))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(ctx.env_kwargs)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, f"child process failed: {out.stderr.strip()[-500:]}"
    assert out.stdout.strip() == here, "transcript differs in another process"


def _prefix(ctx: Ctx, seed: int) -> tuple[gym.Env[Any, Any], list[Any]]:
    """An env a few random valid steps into an episode, and the actions that will follow."""
    env, agent = ctx.make(), RandomAgent()
    obs, info = env.reset(seed=seed)
    agent.reset(ctx.env_id, seed)
    for _ in range(3):
        obs, _, term, trunc, info = env.step(agent.act(obs, info))
        if term or trunc:
            obs, info = env.reset(seed=seed + 100)
    # Oracle actions after the prefix exercise long, valid continuations (random ones where
    # the env has no oracle).
    follow = []
    probe = pickle.loads(pickle.dumps(env))
    expert = probe.unwrapped.has_oracle
    for _ in range(8):
        a = probe.unwrapped.oracle_action() if expert else agent.act(obs, info)
        follow.append(a)
        obs, _, term, trunc, info = probe.step(a)
        if term or trunc:
            break
    return env, follow


def check_pickle(ctx: Ctx) -> None:
    """An env pickled mid-episode continues exactly like the original."""
    env, follow = _prefix(ctx, seed=11)
    clone = pickle.loads(pickle.dumps(env))
    assert continue_canonical(clone, follow) == continue_canonical(env, follow), (
        "pickled env diverged"
    )


def check_snapshot(ctx: Ctx) -> None:
    """restore(snapshot()) on a fresh instance reproduces the continuation and the state key."""
    env, follow = _prefix(ctx, seed=12)
    base = _unwrapped(env)
    if not base.supports_snapshot:
        return
    snap = base.snapshot()
    fresh = ctx.make()
    _unwrapped(fresh).restore(snap)
    assert _unwrapped(fresh).snapshot() == snap, "snapshot of a restored env differs"
    assert continue_canonical(fresh, follow) == continue_canonical(env, follow), (
        "restored env diverged"
    )


def check_info(ctx: Ctx) -> None:
    """Every info has the standard keys and types; privileged keys only with privileged=True."""
    for privileged in (False, True):
        env = ctx.make(privileged=privileged)
        agent = RandomAgent()
        for seed in range(3):
            obs, info = env.reset(seed=seed)
            agent.reset(ctx.env_id, seed)
            infos = [info]
            while True:
                obs, _, term, trunc, info = env.step(agent.act(obs, info))
                infos.append(info)
                if term or trunc:
                    break
            for i, inf in enumerate(infos):
                problems = info_problems(inf, privileged=privileged)
                assert not problems, f"privileged={privileged}, seed {seed}, turn {i}: {problems}"


def check_oracle(ctx: Ctx) -> str | None:
    """The oracle wins the first tasks of every task type, citing all gold evidence.

    Skipped (and said so) for an env whose ``has_oracle`` is False.
    """
    env = ctx.make(split="test", privileged=True)
    base = _unwrapped(env)
    if not base.has_oracle:
        return "no oracle: nothing to check"
    by_type: dict[str, list[str]] = {}
    for tid in base.task_ids("test"):
        by_type.setdefault(base.task_type_of(tid), []).append(tid)
    for task_type, tids in sorted(by_type.items()):
        for tid in tids[:ORACLE_TASKS_PER_TYPE]:
            won, info, steps = play(env, OracleAgent(), task_id=tid)
            assert won, f"oracle lost {task_type} task {tid} after {steps} steps"
            gold = set(info.get("gold_evidence", []))
            cited = set(info.get("provenance", {}).get("cited", gold))
            assert gold <= cited, f"{tid}: oracle did not cite gold evidence {sorted(gold - cited)}"
    for seed in range(5):
        won, _, steps = play(env, OracleAgent(), seed=seed)
        assert won, f"oracle lost the task of seed {seed} after {steps} steps"
    return None


def check_random(ctx: Ctx) -> str:
    """A random agent succeeds on at most 30% of 50 test-split seeds."""
    env = ctx.make(split="test")
    wins = sum(play(env, RandomAgent(), seed=s)[0] for s in range(RANDOM_SEEDS))
    rate = wins / RANDOM_SEEDS
    assert rate <= RANDOM_MAX_SUCCESS, f"random agent won {rate:.0%} of test seeds: too easy"
    return f"random agent won {wins}/{RANDOM_SEEDS} test seeds"


def _menu_adversaries(env: gym.Env[Any, Any], info: dict[str, Any]) -> list[tuple[str, Any]]:
    mask = info.get("action_mask")
    if mask is None or mask.all():
        return []
    return [("masked index", int(mask.argmin())), ("masked index as text", str(mask.argmin()))]


def check_adversarial(ctx: Ctx) -> None:
    """Hostile actions never raise and come back invalid with a readable error."""
    env = ctx.make()
    for seed in range(2):
        _, info = env.reset(seed=seed)
        cases = list(ADVERSARIAL_ACTIONS) + _menu_adversaries(env, info)
        for name, action in cases:
            try:
                obs, _, term, trunc, info = env.step(action)
            except Exception as e:  # the point of the check
                raise AssertionError(f"{name} action raised {type(e).__name__}: {e}") from e
            assert info.get("action_valid") is False, f"{name} action was accepted as valid"
            if isinstance(obs, str):
                assert obs.strip() and len(obs) < 100_000, f"{name}: unreadable observation"
            if term or trunc:
                env.reset(seed=seed)


def check_answers(ctx: Ctx) -> None:
    """check_answer gives 1.0 to the gold answer and a score in [0, 1] to partial answers."""
    env = ctx.make(privileged=True)
    base = _unwrapped(env)
    for seed in range(5):
        _, info = env.reset(seed=seed)
        gold = info.get("gold_answer")
        if gold is None:
            return
        assert base.check_answer(gold) == 1.0, f"check_answer rejects the gold answer {gold!r}"
        for partial in ("", gold.split()[0], gold + " and more", "unrelated"):
            score = base.check_answer(partial)
            assert 0.0 <= score <= 1.0, f"check_answer({partial!r}) = {score} outside [0, 1]"


def check_set_rng(ctx: Ctx) -> None:
    """Envs keyed with set_rng(k) and given the same actions give the same episode."""
    runs = []
    for _ in range(2):
        env, agent = ctx.make(), RandomAgent()
        obs, info = env.reset(seed=5)
        _unwrapped(env).set_rng(1234)
        agent.reset(ctx.env_id, 5)
        out = []
        for _ in range(10):
            obs, r, term, trunc, info = env.step(agent.act(obs, info))
            out.append(canonical([obs, r, term, trunc, info]))
            if term or trunc:
                break
        runs.append(out)
    assert runs[0] == runs[1], "set_rng(key) did not make the env-side randomness reproducible"


CHECKS: dict[str, Callable[[Ctx], str | None]] = {
    "gymnasium_check_env": check_gymnasium,
    "splits_disjoint": check_splits,
    "same_seed_same_transcript": check_determinism,
    "same_transcript_in_another_process": check_cross_process,
    "pickle_mid_episode": check_pickle,
    "snapshot_restore": check_snapshot,
    "standard_info_keys": check_info,
    "oracle_wins": check_oracle,
    "random_rarely_wins": check_random,
    "adversarial_actions": check_adversarial,
    "check_answer": check_answers,
    "set_rng": check_set_rng,
}


def check_agent_env(
    env_id: str,
    *,
    env_kwargs: dict[str, Any] | None = None,
    only: list[str] | None = None,
) -> CheckReport:
    """Run the named checks on ``env_id`` and report each (never stops at the first failure).

    Args:
        env_id: a registered id.
        env_kwargs: extra constructor arguments (e.g. ``path`` of an Official loader id).
        only: names of the checks to run (all if None).
    """
    make(env_id, **(env_kwargs or {})).close()  # unknown ids fail fast with UnknownEnv
    ctx, report = Ctx(env_id, dict(env_kwargs or {})), CheckReport(env_id)
    for name, fn in CHECKS.items():
        if only and name not in only:
            continue
        start = time.perf_counter()
        try:
            ok, detail = True, fn(ctx) or ""
        except AssertionError as e:
            ok, detail = False, str(e)
        except Exception as e:  # a crash is a failed check, reported with its type
            ok, detail = False, f"raised {type(e).__name__}: {e}"
        detail = _ANSI.sub("", detail).strip()
        report.results.append(CheckResult(name, ok, detail, time.perf_counter() - start))
    return report
