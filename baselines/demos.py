"""The warm start's demonstrations: the teacher's episodes on the train split, labelled.

The teacher plays in worker processes (``--sft-workers``; on ALFWorld most of an episode's
time is the planner's), and this process turns each episode's turns into (prompt, label)
pairs in seed order. An episode's random actions come from a generator of its own seed, so
the demonstrations are the same whatever the number of workers.

    demos = oracle_demos(cfg, policy)   # [(prompt ids, label ids + eos), ...]
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np
import torch

from agentgym.baselines.config import TrainConfig
from agentgym.baselines.envpool import env_kwargs, make_env
from agentgym.baselines.prompt import PRIVILEGED_KEY, History
from agentgym.core.errors import BadInput
from agentgym.terminal import Progress

THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)

Demo = tuple[torch.Tensor, torch.Tensor]
"""(prompt ids, response ids + eos) of one demonstrated turn."""

Turn = tuple[Any, str | None, str, str | None]
"""One turn of a teacher's episode: the observation, the privileged text its info carried (or
None), the teacher's action as labelled, and the random action taken instead (or None)."""

CHUNK = 25
"""Episodes a worker plays per task it is handed."""


def oracle_demos(cfg: TrainConfig, policy: Any) -> list[Demo]:
    """(prompt, teacher's action + eos) from the teacher's episodes on the train split.

    The teacher is ``cfg.sft.teacher``: the env's oracle (it reads the env's state), or an
    agent that sees only what the policy sees. With ``cfg.sft.noise`` > 0 an episode takes a
    random admissible action with that probability, and every state it visits is still
    labelled with the oracle's action (only the oracle re-plans from any state).

    The loss is the plain NLL over every response token, not the NLL under the decoding
    mask: the forced tokens (an item's text after its first distinct token) teach the policy
    to read the menu, and on Search-Menu-Small the plain loss gave a better warm start.
    """
    check_teacher(cfg)
    seeds = list(range(cfg.seed, cfg.seed + cfg.sft.episodes))
    demos: list[Demo] = []
    label = f"warm start: {cfg.sft.teacher}'s demonstrations"
    with Progress(label, len(seeds), unit="episodes") as progress:
        for turns in teacher_episodes(cfg, seeds):
            demos.extend(labelled(cfg, policy, turns))
            progress.advance(states=len(demos))
    return demos


def labelled(cfg: TrainConfig, policy: Any, turns: Sequence[Turn]) -> list[Demo]:
    """One episode's (prompt, label + eos) pairs, the prompts built as the policy sees them."""
    tokenizer = policy.tokenizer
    history = History(policy, cfg.prompt)
    demos = []
    for observation, context, label, instead in turns:
        history.observe(observation, None if context is None else {PRIVILEGED_KEY: context})
        response = [*tokenizer.encode(label), tokenizer.eos_id]
        demos.append((torch.tensor(history.prompt()), torch.tensor(response)))
        if instead is not None:
            response = [*tokenizer.encode(instead), tokenizer.eos_id]
        history.act(response)
    return demos


def teacher_episodes(cfg: TrainConfig, seeds: Sequence[int]) -> Iterator[list[Turn]]:
    """Each seed's episode of the teacher, in seed order, played by ``cfg.sft.workers``.

    One worker plays here; more play in spawned processes, a chunk of seeds at a time.
    """
    chunks = [seeds[i : i + CHUNK] for i in range(0, len(seeds), CHUNK)]
    workers = min(cfg.sft.workers, len(chunks))
    if workers <= 1:
        player = _Player(cfg)
        try:
            yield from (player.episode(seed) for seed in seeds)
        finally:
            player.close()
        return
    context = get_context("spawn")  # no inherited torch threads or locks
    with ProcessPoolExecutor(workers, context, initializer=_start, initargs=(cfg,)) as pool:
        for episodes in pool.map(_play, chunks):
            yield from episodes


def check_teacher(cfg: TrainConfig) -> None:
    """Refuse noise with a teacher that cannot label the states noise leads to.

    Raises:
        BadInput: ``--sft-noise`` with a teacher other than the oracle.
    """
    if cfg.sft.teacher != "oracle" and cfg.sft.noise > 0:
        raise BadInput(
            f"--sft-noise needs the oracle teacher (it re-plans from any state); "
            f"{cfg.sft.teacher} would label states its own bookkeeping never reached"
        )


class _Player:
    """The train split's env and the teacher bound to it, playing one seed at a time."""

    def __init__(self, cfg: TrainConfig):
        from agentgym.agents import load_agent

        self.cfg = cfg
        self.env = make_env(cfg, split="train", **env_kwargs(cfg))
        self.teacher: Any = load_agent(cfg.sft.teacher)
        if hasattr(self.teacher, "bind"):
            self.teacher.bind(self.env.unwrapped)

    def episode(self, seed: int) -> list[Turn]:
        """The teacher's episode of ``seed``, with random actions drawn from that seed alone."""
        cfg, env, teacher = self.cfg, self.env, self.teacher
        rng = np.random.default_rng([cfg.seed, 1, seed])
        obs, info = env.reset(seed=seed)
        teacher.reset(cfg.env, seed)
        turns: list[Turn] = []
        while True:
            action = str(teacher.act(obs, info))
            label = action if cfg.sft.think else THINK.sub("", action)
            context = info.get(PRIVILEGED_KEY)
            instead = None
            admissible = [str(a) for a in info.get("admissible_actions") or ()]
            if admissible and cfg.sft.noise > 0 and rng.random() < cfg.sft.noise:
                instead = action = admissible[int(rng.integers(len(admissible)))]
            turns.append((obs, None if context is None else str(context), label, instead))
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                return turns

    def close(self) -> None:
        """Close the env."""
        self.env.close()


_PLAYER: _Player | None = None
"""A worker process's player (:func:`_start`)."""


def _start(cfg: TrainConfig) -> None:
    """A worker's start: one thread (the planner is plain Python), then its env and teacher."""
    global _PLAYER
    torch.set_num_threads(1)
    _PLAYER = _Player(cfg)


def _play(seeds: Sequence[int]) -> list[list[Turn]]:
    """A worker's task: the episodes of ``seeds``."""
    assert _PLAYER is not None, "the worker was not started"
    return [_PLAYER.episode(seed) for seed in seeds]
