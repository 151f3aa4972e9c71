"""Episode seeds: one root, ``SeedSequence.spawn`` per run and per episode, recorded."""

from __future__ import annotations

import numpy as np


def episode_seeds(root_seed: int, runs: int, episodes_per_run: int) -> list[list[int]]:
    """``seeds[r][m]``: the uint32 passed to ``reset(seed=...)`` for run r, episode m.

    ``SeedSequence(root).spawn(runs)`` gives one sequence per run; run r's episodes use
    ``run_seq.spawn(episodes_per_run)``; each episode's sequence is reduced with
    ``generate_state(1)[0]``. Adding runs or episodes never changes the existing seeds.
    """
    out = []
    for run_seq in np.random.SeedSequence(root_seed).spawn(runs):
        out.append([int(s.generate_state(1)[0]) for s in run_seq.spawn(episodes_per_run)])
    return out
