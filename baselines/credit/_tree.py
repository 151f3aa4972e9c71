"""TSBPO's tree machinery: the success model p̂(n), the branch allocator and the branch forest.

* the success model: a node's feature row ``x(n)`` (:data:`FEATURES`, :func:`node_features`),
  ``p̂(n) = σ(wᵀ x(n))`` (:func:`predict`) and the ridge-penalised Newton fit of ``w``
  (:func:`fit_logistic`), which starts from and pulls towards the prior-only weights :data:`W0`;
* the allocator: roots per task (:func:`n_roots`), the nodes a branch may restart from
  (:func:`candidate_nodes`) and the greedy ``p̂ (1 − p̂)`` fill under per-node caps
  (:func:`allocate_branches`);
* :class:`Forest`: who branched from whom and at which turn, the turns each trajectory owns
  and means over the leaves through a turn.

The variant that uses them, and the module docstring that derives them, is
:mod:`agentgym.baselines.credit.tsbpo`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from agentgym.baselines.batch import Batch, Key, Trajectory

__all__ = [
    "FEATURES",
    "W0",
    "Forest",
    "allocate_branches",
    "candidate_nodes",
    "fit_logistic",
    "n_roots",
    "node_features",
    "predict",
    "response_nll",
]

FEATURES = ("bias", "task_prior_logit", "depth", "root_outcome", "nll")
"""The columns of a node's feature row ``x(n)`` (:func:`node_features`)."""
W0 = np.array([0.0, 1.0, 0.0, 0.0, 0.0])
"""Logistic weights for which ``p̂(n)`` equals the task prior: the fit's starting point and
ridge centre."""


# ---------------------------------------------------------------- the success model p̂(n)


def _logit(p: float) -> float:
    p = min(max(p, 1e-3), 1.0 - 1e-3)
    return math.log(p / (1.0 - p))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


def response_nll(turn: Any) -> float:
    """Mean ``−log π_old(y_t)`` over the policy tokens of a turn's response (0 without log-probs).

    It says how uncertain the policy was when it acted there.
    """
    if turn.logp_old is None or turn.logp_old.numel() == 0:
        return 0.0
    m = turn.mask().to(turn.logp_old.device)
    return float(-(turn.logp_old * m).sum() / m.sum().clamp_min(1.0))


def node_features(task_prior: float, root: Trajectory, k: int) -> np.ndarray:
    """The feature row [5] (:data:`FEATURES`) of the node before turn ``k`` of ``root``.

    ``root`` is the trajectory whose own turn ``k`` is (a root, or with ``depth ≥ 2`` a
    branch, whose length, outcome and response then fill the depth, root-outcome and nll
    columns).
    """
    return np.array(
        [
            1.0,
            _logit(task_prior),
            k / max(1, len(root.turns)),
            min(max(root.outcome, 0.0), 1.0),
            response_nll(root.turns[k]),
        ]
    )


def predict(w: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``p̂ = σ(X w)``: [n] success probabilities of the nodes with features X [n, d]."""
    return _sigmoid(X @ w)


def fit_logistic(
    X: np.ndarray,
    y: np.ndarray,
    w0: np.ndarray,
    l2: float = 1.0,
    steps: int = 20,
    tol: float = 1e-8,
) -> np.ndarray:
    """Logistic regression by penalised maximum likelihood (Newton / IRLS).

    Minimises ``−Σ_j [y_j log p_j + (1 − y_j) log(1 − p_j)] + (l2/2) ‖w − w0‖²`` with
    ``p = σ(X w)``; ``y`` may be fractional (soft labels). The ridge keeps the fit finite on
    separable data and near ``w0`` while data are few.

    Args:
        X: [n, d] features.
        y: [n] outcomes in [0, 1].
        w0: [d] start and ridge centre.
        l2: ridge weight (> 0).
        steps: most Newton steps.
        tol: stop once no weight moves by ``tol`` or more in a step.

    Returns:
        [d] fitted weights.
    """
    w = w0.astype(np.float64).copy()
    eye = np.eye(len(w))
    for _ in range(steps):
        p = _sigmoid(X @ w)
        grad = X.T @ (p - y) + l2 * (w - w0)
        hess = (X.T * (p * (1.0 - p))) @ X + l2 * eye
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < tol:
            break
    return w


# ---------------------------------------------------------------- the allocator


def n_roots(budget: int, task_prior: float, min_roots: int, max_root_fraction: float) -> int:
    """``R`` of a task: ``⌈B (1 − p̄)⌉``, clipped.

    The clip is to ``[min_roots, max(min_roots, ⌊B · max_root_fraction⌋)]`` and to ``B``. A
    near-solved task gets few roots and many branches (its rare failures sit deep in the
    tree); a hard one mostly fresh episodes.
    """
    hi = max(min_roots, math.floor(budget * max_root_fraction))
    wanted = math.ceil(budget * (1.0 - task_prior) - 1e-9)
    return min(budget, max(min_roots, min(wanted, hi)))


def allocate_branches(
    p_hat: np.ndarray,
    budget: int,
    cap: int | np.ndarray,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Branches per node [n] maximising ``Σ_n q_n p̂_n (1 − p̂_n)``.

    Subject to ``q_n ≤ cap_n`` and ``Σ q_n ≤ budget``: nodes in order of decreasing contrast,
    each filled up to its cap.

    The objective is linear in ``q``, so this greedy fill is optimal. ``cap`` is one cap for
    every node or [n] caps (what is left of each node's cap after earlier rounds). Ties (e.g.
    before the model has data, when all nodes of a task share the prior) are broken by
    ``rng``'s permutation, or by node order without one. Less than ``budget`` is placed when
    ``Σ cap_n < budget``.
    """
    n = len(p_hat)
    caps = np.broadcast_to(np.asarray(cap, dtype=int), (n,))
    order = np.arange(n) if rng is None else rng.permutation(n)
    contrast = p_hat * (1.0 - p_hat)
    order = order[np.argsort(-contrast[order], kind="stable")]
    counts = np.zeros(n, dtype=int)
    left = budget
    for j in order:
        if left <= 0:
            break
        counts[j] = min(max(int(caps[j]), 0), left)
        left -= counts[j]
    return counts


def candidate_nodes(leaves: list[Trajectory], min_turn: int) -> list[tuple[Trajectory, int]]:
    """The nodes ``(trajectory, k)`` a branch may restart from, leaf by leaf.

    They are a root's turns ``k ≥ min_turn``, a branch's own suffix turns ``k > branch_turn``
    (and ``≥ min_turn``).
    """
    nodes = []
    for traj in leaves:
        start = min_turn
        if traj.parent_id is not None:
            start = max(min_turn, (traj.branch_turn or 0) + 1)
        nodes += [(traj, k) for k in range(start, len(traj.turns))]
    return nodes


# ---------------------------------------------------------------- the tree of a batch


class Forest:
    """The branch trees of a batch: who branched from whom, and at which turn.

    Trajectory ``i`` with ``parent_id`` shares turns ``0..b_i−1`` with its parent
    (``b_i = branch_turn``) and owns the rest; a trajectory without ``parent_id`` is a root
    and owns every turn. Parents are looked up by ``node_id`` within the group.
    """

    def __init__(self, batch: Batch):
        """Link each branch of ``batch`` to its parent, group by group.

        Raises:
            ValueError: a branch's parent is not in its group, or it has no ``branch_turn``.
        """
        n = len(batch.trajectories)
        self.batch = batch
        self.parent: list[int | None] = [None] * n
        self.at = [0] * n
        for group, idx in batch.groups().items():
            by_id = {batch.trajectories[i].node_id: i for i in idx}
            for i in idx:
                traj = batch.trajectories[i]
                if traj.parent_id is None:
                    continue
                if traj.parent_id not in by_id or traj.branch_turn is None:
                    raise ValueError(
                        f"tsbpo: trajectory {i} ({traj.node_id}) branches from "
                        f"{traj.parent_id!r} at turn {traj.branch_turn}, but that parent is "
                        f"not in its group {group!r}; keep whole trees in one batch"
                    )
                self.parent[i] = by_id[traj.parent_id]
                self.at[i] = traj.branch_turn

    def owner(self, i: int, k: int) -> int:
        """The trajectory whose own turn is turn ``k`` of trajectory ``i``."""
        while (p := self.parent[i]) is not None and k < self.at[i]:
            i = p
        return i

    def point(self, i: int) -> tuple[int, int]:
        """The branch point ``(o, k)`` of branch ``i``: the state before ``o``'s own turn ``k``.

        A branch taken where its parent itself branched moves up to that point.
        """
        o, k = self.parent[i], self.at[i]
        assert o is not None, f"trajectory {i} is a root"
        while (p := self.parent[o]) is not None and k <= self.at[o]:
            o = p
        return o, k

    def owned(self) -> list[Key]:
        """The training samples: every own turn, in :meth:`Batch.keys` order.

        The shared prefix copies (``extras["shared"]``) are the parent's turns and are left
        out.
        """
        every = self.batch.keys()
        return [
            (i, k)
            for i, k in every
            if self.owner(i, k) == i and not self.batch.turn((i, k)).extras.get("shared", False)
        ]

    def mean_through(self, value: Callable[[int, int], float]) -> dict[Key, float]:
        """For each own turn ``(o, j)``: the mean of ``value(t, j)`` over the leaves through it.

        The leaves ``t`` that pass through it are itself and every descendant sharing it.
        """
        sums: dict[Key, float] = defaultdict(float)
        counts: dict[Key, int] = defaultdict(int)
        for t, traj in enumerate(self.batch.trajectories):
            for j in range(len(traj.turns)):
                key = (self.owner(t, j), j)
                sums[key] += value(t, j)
                counts[key] += 1
        return {key: sums[key] / counts[key] for key in sums}
