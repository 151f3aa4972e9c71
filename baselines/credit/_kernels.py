"""Advantage kernels that several credit variants share: pure functions, tested by hand.

* :func:`relative`: a group-relative term, centred and optionally scaled (GRPO's z-score,
  GiGPO's ``mean_norm`` / ``mean_std_norm``, SNC's centring);
* :func:`leave_one_out`: RLOO's baseline (Ahmadian et al. 2024, arXiv 2402.14740);
* :func:`centre`: ``x − mean`` over plain floats (TSBPO's sibling and same-state terms);
* :func:`state_buckets`: the turns of each group that acted from the same anchor state
  (GiGPO's step groups, SNC's frontier, TSBPO's same-state term).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from agentgym.baselines.batch import Batch, Key


def relative(x: Tensor, rows: Tensor, eps: float | None = None) -> Tensor:
    """``(x − mean(rows))``, divided by ``std(rows) + eps`` when ``eps`` is given.

    Args:
        x: the values to score, any shape.
        rows: the group's values the statistics come from (1-D, non-empty).
        eps: added to the unbiased std before dividing; None: centre only.

    Returns:
        A tensor like ``x``: all zeros when every row is equal (a singleton included), so a
        group without contrast carries no signal.
    """
    if bool((rows == rows[0]).all()):
        return x.new_zeros(x.shape)
    centred = x - rows.mean()
    return centred if eps is None else centred / (rows.std() + eps)


def zscore(R: Tensor, eps: float) -> Tensor:
    """GRPO's ``(R − mean R) / (std R + eps)`` over one group (zeros when all agree)."""
    return relative(R, R, eps)


def leave_one_out(R: Tensor) -> Tensor:
    """``R_i − mean_{j≠i} R_j = G/(G−1) (R_i − mean R)`` over one group of ``G >= 2``."""
    G = R.numel()
    return G / (G - 1) * (R - R.mean())


def centre(values: Sequence[float]) -> list[float]:
    """``x − mean(values)`` for each value, in plain float arithmetic (empty in, empty out)."""
    if not values:
        return []
    mu = sum(values) / len(values)
    return [x - mu for x in values]


def state_buckets(batch: Batch, keys: Sequence[Key], who: str) -> list[list[Key]]:
    """The turns at ``keys`` grouped by (group id, ``state_key``).

    Buckets come in order of first appearance, turns in ``keys`` order.

    Args:
        batch: holds the turns.
        keys: the turns to bucket.
        who: the variant's name, for the error message.

    Raises:
        ValueError: a turn has no ``state_key`` (the rollout did not record it).
    """
    buckets: dict[tuple[str, str], list[Key]] = {}
    for i, k in keys:
        traj = batch.trajectories[i]
        s = traj.turns[k].state_key
        if s is None:
            raise ValueError(
                f"{who}: trajectory {i} turn {k} has no state_key; the rollout must record "
                "info['state_key'] of the state each turn acted from"
            )
        buckets.setdefault((traj.group_id, s), []).append((i, k))
    return list(buckets.values())
