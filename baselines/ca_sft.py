"""Credit-assignment SFT (``--sft-mode ca``), after Orchard's CA-SFT (CREDIT.md §3, derived).

Orchard imitates distilled trajectories labelled resolved or not: all of a resolved one, and
of an unresolved one only the turns where an estimate of the resolve probability rises. Here
the trajectories come from a noisy expert, and the estimate is Monte-Carlo under it::

    episodes   the env's oracle, replaced with probability ε by a uniformly random admissible
               action, on the warm start's seeds; a turn's label is the action it took
    V(s_t)     in a failed episode, at every turn boundary: the share of M continuations of the
               same noisy expert from s_t that win (s_t restored from a snapshot, or replayed
               from the reset seed where the env has none); V(s_K) = 0 at its end
    rise       r_t = V(s_t+1) - V(s_t); rise segments = maximal runs of turns with r_t > δ
    weights    won episode: 1 on every turn; failed: 1 (or r_t) inside a rise segment, else the
               turn is no demo (its prompt still holds the turns before it)

The continuations replay the env's own randomness as the episode drew it (a snapshot carries
the env's generator), so V averages over the expert's choices only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentgym.baselines.config import TrainConfig
from agentgym.baselines.demos import THINK, Demo
from agentgym.baselines.prompt import History
from agentgym.baselines.train import WarmStart, env_kwargs, make_env
from agentgym.core.errors import BadInput
from agentgym.terminal import Progress


@dataclass(frozen=True)
class TurnStart:
    """Where a turn acted from, restorable: the env's snapshot, else the actions before it.

    Attributes:
        seed: the episode's reset seed.
        actions: the actions taken before this turn (replayed where there is no snapshot).
        admissible: the state's admissible actions (what the expert's mistakes draw from).
        snapshot: ``env.unwrapped.snapshot()`` at this state, or None to replay.
    """

    seed: int
    actions: tuple[str, ...]
    admissible: tuple[str, ...]
    snapshot: bytes | None

    def restore(self, env: Any) -> dict[str, Any]:
        """Put ``env`` in this state; returns what the expert reads of its info."""
        if self.snapshot is not None:
            env.unwrapped.restore(self.snapshot)
        else:  # every env is deterministic under its reset seed
            env.reset(seed=self.seed)
            for action in self.actions:
                env.step(action)
        return {"admissible_actions": list(self.admissible)}


@dataclass
class Episode:
    """One noisy-expert episode: per turn its demo and where it acted from; its outcome.

    Attributes:
        demos: per turn, (prompt, the action it took + eos).
        starts: per turn, the state it acted from.
        won: ``info["won"]`` at the end.
        values: V(s_0..s_K), one more than the turns (failed episodes only; None before).
    """

    demos: list[Demo]
    starts: list[TurnStart]
    won: bool
    values: list[float] | None = None


def noisy_expert(env: Any, info: dict[str, Any], epsilon: float, rng: np.random.Generator) -> str:
    """The oracle's action, or with probability ``epsilon`` a uniformly random admissible one."""
    admissible = [str(a) for a in info.get("admissible_actions") or ()]
    if admissible and rng.random() < epsilon:
        return admissible[int(rng.integers(len(admissible)))]
    return str(env.unwrapped.oracle_action())


def mc_value(
    env: Any, start: TurnStart, rollouts: int, epsilon: float, rng: np.random.Generator
) -> float:
    """V(s): the share of ``rollouts`` noisy-expert continuations from ``start`` that win."""
    wins = 0
    for _ in range(rollouts):
        info = start.restore(env)
        while True:
            action = noisy_expert(env, info, epsilon, rng)
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        wins += bool(info.get("won"))
    return wins / rollouts


def rise_segments(values: Sequence[float], delta: float) -> list[tuple[int, int]]:
    """Maximal runs of turns whose rise ``values[t+1] - values[t]`` exceeds ``delta``.

    ``values`` holds V(s_0..s_K) of a K-turn episode; returns half-open turn ranges
    ``[a, b)``: turns a..b-1 each rose by more than ``delta`` (strictly).
    """
    segments: list[tuple[int, int]] = []
    for t in range(len(values) - 1):
        if values[t + 1] - values[t] <= delta:
            continue
        if segments and segments[-1][1] == t:
            segments[-1] = (segments[-1][0], t + 1)
        else:
            segments.append((t, t + 1))
    return segments


def turn_weights(
    won: bool, values: Sequence[float] | None, n_turns: int, delta: float, rise_weight: bool
) -> list[float]:
    """Per turn, the weight of its NLL (0: not trained on).

    1 on every turn of a won episode; in a failed one, ``values`` being V(s_0..s_K): inside a
    rise segment 1, or the turn's rise with ``rise_weight``; elsewhere 0.
    """
    if won:
        return [1.0] * n_turns
    assert values is not None and len(values) == n_turns + 1
    weights = [0.0] * n_turns
    for a, b in rise_segments(values, delta):
        for t in range(a, b):
            weights[t] = values[t + 1] - values[t] if rise_weight else 1.0
    return weights


def ca_warm_start(cfg: TrainConfig, policy: Any) -> WarmStart:
    """CA-SFT's demonstrations and weights from ``cfg.sft.episodes`` noisy-expert episodes."""
    env = make_env(cfg, split="train", **env_kwargs(cfg))
    label = f"warm start (ca): noisy oracle's episodes (ε={cfg.sft.ca_epsilon})"
    episodes = []
    with Progress(label, cfg.sft.episodes, unit="episodes") as progress:
        for seed in range(cfg.seed, cfg.seed + cfg.sft.episodes):
            episodes.append(play(cfg, env, policy, seed))
            progress.advance(failed=sum(not e.won for e in episodes))
    failed = [e for e in episodes if not e.won]
    label = f"warm start (ca): V at each turn of the failed episodes ({cfg.sft.ca_rollouts} each)"
    with Progress(label, len(failed), unit="episodes") as progress:
        for episode in failed:
            episode.values = estimate_values(cfg, env, episode)
            progress.advance()
    return assemble(episodes, cfg.sft.ca_delta, cfg.sft.ca_rise_weight)


def play(cfg: TrainConfig, env: Any, policy: Any, seed: int) -> Episode:
    """One noisy-expert episode from reset seed ``seed``; its mistakes keyed by (run, seed)."""
    tokenizer, eos = policy.tokenizer, policy.tokenizer.eos_id
    rng = np.random.default_rng([cfg.seed, 2, seed])
    snapshots = bool(getattr(env.unwrapped, "supports_snapshot", False))
    obs, info = env.reset(seed=seed)
    history = History(policy, cfg.prompt)
    episode = Episode(demos=[], starts=[], won=False)
    actions: list[str] = []
    while True:
        history.observe(obs, info)
        admissible = tuple(str(a) for a in info.get("admissible_actions") or ())
        snapshot = env.unwrapped.snapshot() if snapshots else None
        episode.starts.append(TurnStart(seed, tuple(actions), admissible, snapshot))
        action = noisy_expert(env, info, cfg.sft.ca_epsilon, rng)
        text = action if cfg.sft.think else THINK.sub("", action)
        response = [*tokenizer.encode(text), eos]
        episode.demos.append((torch.tensor(history.prompt()), torch.tensor(response)))
        history.act(response)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            episode.won = bool(info.get("won"))
            return episode


def estimate_values(cfg: TrainConfig, env: Any, episode: Episode) -> list[float]:
    """V(s_0..s_K) of an episode: Monte-Carlo at each turn boundary, its outcome at the end.

    Each boundary's continuations draw from a generator keyed by (run seed, episode seed,
    turn), so an estimate does not depend on which others were made before it.
    """
    sft = cfg.sft
    values = []
    for t, start in enumerate(episode.starts):
        rng = np.random.default_rng([cfg.seed, 3, start.seed, t])
        values.append(mc_value(env, start, sft.ca_rollouts, sft.ca_epsilon, rng))
    return [*values, float(episode.won)]


def assemble(episodes: Sequence[Episode], delta: float, rise_weight: bool) -> WarmStart:
    """The demos with a non-zero weight, their weights, and what the SFT row logs.

    Logged: ``sft_failed`` (failed episodes), ``sft_failed_turns`` (their turns),
    ``sft_kept_failed_turns`` (of those, the ones in rise segments), ``sft_mean_v`` (mean V over
    the failed episodes' estimated boundaries, s_0..s_K-1; NaN if none failed), ``sft_demos``.

    Raises:
        BadInput: no turn is left to train on.
    """
    demos: list[Demo] = []
    weights: list[float] = []
    kept_failed = 0
    for e in episodes:
        per_turn = turn_weights(e.won, e.values, len(e.demos), delta, rise_weight)
        for demo, weight in zip(e.demos, per_turn, strict=True):
            if weight > 0:
                demos.append(demo)
                weights.append(weight)
                kept_failed += not e.won
    if not demos:
        raise BadInput(
            f"--sft-mode ca kept no turn: every episode failed and none rose by more than "
            f"--sft-ca-delta {delta} (lower --sft-ca-epsilon or --sft-ca-delta)"
        )
    failed = [e for e in episodes if not e.won]
    estimated = [v for e in failed for v in (e.values or [])[:-1]]
    metrics = {
        "sft_failed": float(len(failed)),
        "sft_failed_turns": float(sum(len(e.demos) for e in failed)),
        "sft_kept_failed_turns": float(kept_failed),
        "sft_mean_v": float(np.mean(estimated)) if estimated else float("nan"),
        "sft_demos": float(len(demos)),
    }
    return WarmStart(demos, weights, metrics)
