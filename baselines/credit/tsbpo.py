"""TSBPO: tree rollouts with a fitted root/branch allocator and three-level advantages.

The allocator is fitted by likelihood (CREDIT.md §5, status [D]: no primary source;
cross-checks named there: TRACE's tree rollouts with a success predictor, a verl-agent
"BACE-GiGPO" recipe with natural roots + restored branches under a fixed leaf budget, ≥2 roots
and ≤2 branches per anchor).

Sampling, per task, a leaf budget ``B = R + Q`` (the run's ``group_size``):

* ``R`` roots (fresh episodes) from the task's Beta prior of root success p̄ (fewer roots for
  near-solved tasks): ``R = clip(⌈B (1 − p̄)⌉, min_roots, max(min_roots, ⌊B · max_root_fraction⌋))``;
* ``Q = B − R`` branches: the env is restored before turn ``k ≥ min_branch_turn`` of a root
  and the suffix is resampled. Branch nodes maximise the expected contrast ``p̂ (1 − p̂)``
  under a per-node cap, where ``p̂(n) = σ(wᵀ x(n))`` is a logistic success model of a fresh
  continuation from node ``n``, fitted by (ridge-penalised) maximum likelihood with
  Newton/IRLS steps on every branch outcome seen so far. Features ``x(n)``
  (:data:`FEATURES`): bias, logit of the task prior, relative depth ``k / K_root``, the
  root's outcome, and the mean negative log-prob of the root's turn-``k`` response (an
  entropy proxy). The ridge pulls ``w`` towards ``w₀ = (0, 1, 0, 0, 0)``, for which ``p̂`` is
  exactly the task's Beta prior mean: the model before any data.

Tree depth ([D], derived: CREDIT.md lets branch nodes lie "anywhere in the tree" and names no
schedule). ``depth = D`` spends ``Q`` in ``D`` rounds; round ``d = 1..D`` places
``⌈Q_left / (D − d + 1)⌉`` branches (what a round cannot place carries to the next; what the
last cannot place becomes extra roots, so ``B`` stays exact) over the candidate nodes of every
leaf sampled so far, with the same contrast score and per-node cap (counted over all rounds).
A root's candidates are its turns ``k ≥ min_branch_turn``; a branch's are its own suffix
turns ``k > branch_turn`` (its first own turn acts from its parent's node, so a branch there
would be one more sibling at that node and could bypass the cap). A branch of a branch is
restored from the snapshot its parent recorded at turn ``k`` and shares the parent's prefix,
exactly like a branch of a root; its features ``x(n)`` are read off that branch (its depth,
outcome and turn-``k`` response). ``depth = 1`` is one round over the roots: the two-level
tree. ``p̂`` is refitted once per step, after the last round.

Advantages per owned turn ``(i, k)`` (shared prefix copies of branches get no key), with
``A = A^root + w_sib A^sib + w_ss A^ss``:

* ``A^root_i = (R_i − mean_roots R) / (std_roots R + ε)`` over the group's roots only, on every
  turn of root ``i`` (branches are selected, not sampled, so they stay out of this baseline);
* ``A^sib_{c,k} = R̄_c − mean_{c' ∈ children(n)} R̄_{c'}`` at each branch point ``n`` (the state
  before turn ``k``), on the child's turn ``k``; the parent's own continuation is a child and
  ``R̄_c`` is the mean outcome of the leaves under child ``c``;
* ``A^ss_{i,k} = G_{i,k} − mean_bucket G``: GiGPO's anchor-state term (CREDIT.md §1.5) over the
  whole tree, buckets of equal ``state_key``, ``G`` the discounted step return (by default the
  mean over every leaf that passes through the turn).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.credit._kernels import centre, state_buckets, zscore
from agentgym.baselines.rollout import branch, collect, pick_tasks
from agentgym.core.errors import BadInput

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


def root_advantages(
    batch: Batch, eps: float = 1e-6, forest: Forest | None = None
) -> dict[Key, float]:
    """``A^root``: GRPO's z-score over each group's roots, on every turn of each root.

    Returns:
        ``(i, k) -> float`` for the turns of roots (0 for a group whose roots all agree).
    """
    forest = forest or Forest(batch)
    R = batch.outcomes().double()
    out: dict[Key, float] = {}
    for idx in batch.groups().values():
        roots = [i for i in idx if forest.parent[i] is None]
        A = zscore(R[roots], eps).tolist() if roots else []
        for i, a in zip(roots, A, strict=True):
            out.update({(i, k): a for k in range(len(batch.trajectories[i].turns))})
    return out


def sibling_advantages(batch: Batch, forest: Forest | None = None) -> dict[Key, float]:
    """``A^sib``: each child's mean leaf outcome relative to its siblings', at each branch point.

    At each branch point ``(o, k)``, children ``c`` = ``o``'s own continuation and every branch
    taken there; ``A^sib_{c,k} = R̄_c − mean_c' R̄_c'`` with ``R̄_c`` the mean outcome of the
    leaves under ``c``, on the child's turn ``k`` (its first turn after the point).

    Returns:
        ``(c, k) -> float`` for the first turn of every child of every branch point.
    """
    forest = forest or Forest(batch)
    trajs = batch.trajectories
    R_bar = forest.mean_through(lambda t, j: trajs[t].outcome)
    children: dict[tuple[int, int], list[int]] = {}
    for i in range(len(trajs)):
        if forest.parent[i] is not None:
            o, k = forest.point(i)
            children.setdefault((o, k), [o]).append(i)
    out: dict[Key, float] = {}
    for (_, k), kids in children.items():
        terms = centre([R_bar[(c, k)] for c in kids])
        out.update({(c, k): a for c, a in zip(kids, terms, strict=True)})
    return out


def same_state_advantages(
    batch: Batch, gamma: float, tree_mean: bool = True, forest: Forest | None = None
) -> dict[Key, float]:
    """``A^ss``: GiGPO's anchor-state term over each whole tree (group).

    Own turns with equal ``state_key`` form a bucket, ``A^ss = G − mean_bucket G`` (a
    singleton gives 0).

    Args:
        batch: the trees, one per group.
        gamma: γ of the step returns ``G``, per turn.
        tree_mean: ``G`` of an own turn is the mean step return over every leaf passing
            through it (a parent's turn before a branch point also sees the branches'
            futures); False: its own trajectory's return only (plain GiGPO on the leaves).
        forest: the batch's :class:`Forest`, if already built (else it is built here).

    Returns:
        ``(i, k) -> float`` for every own turn.
    """
    forest = forest or Forest(batch)
    G = [traj.step_returns(gamma) for traj in batch.trajectories]
    value = forest.mean_through(lambda t, j: G[t][j]) if tree_mean else None
    out: dict[Key, float] = {}
    for keys in state_buckets(batch, forest.owned(), "tsbpo"):
        g = [value[key] if value is not None else G[key[0]][key[1]] for key in keys]
        out.update(zip(keys, centre(g), strict=True))
    return out


# ---------------------------------------------------------------- the variant


@register("tsbpo")
class TSBPO(CreditVariant):
    """TSBPO (CREDIT.md §5): tree sampler + root, sibling and same-state advantages.

    CREDIT.md marks TSBPO [D] (derived; the paper was not found), so this is a reasonable
    design, not the paper's. Choices and why:

    * the success model is a 5-feature logistic regression (:data:`FEATURES`) fitted by
      ridge-penalised maximum likelihood (Newton), labelled by branch outcomes only: a branch
      is exactly a fresh continuation from a node, whereas a root's own outcome would leak into
      the root-outcome feature. Before ``min_fit_examples`` exist, ``p̂`` is the task's Beta
      prior mean ``(α + wins) / (α + β + roots)`` (roots' outcomes only: branches are chosen,
      not drawn);
    * by default (``depth=1``) branches come from the roots' nodes in one round (a two-level
      tree per step), at turns ``k ≥ min_branch_turn`` (default 1: a branch at turn 0 would
      be a fresh episode without a root advantage). ``depth ≥ 2`` splits ``Q`` over that many
      rounds, each also choosing among earlier branches' own suffix nodes (module docstring);
      the advantages handle trees of any depth. Budget the per-node caps cannot place becomes
      extra roots, so every task still has ``B`` leaves;
    * ``A^root`` covers roots only and ``A^sib``/``A^ss`` are raw differences (no std), as the
      spec writes them; ``w_sib`` and ``w_ss`` set their scale. ``ss_tree_mean`` switches the
      same-state return between the tree mean and the plain per-leaf one;
    * a trajectory without ``parent_id`` is a root, so plain groups get GRPO + a GiGPO step
      term. Loss: token sums per response over active turns (``turn-normalized``).
    """

    requires_info = frozenset({"state_key"})
    requires_abilities = frozenset({"snapshot"})
    aggregation = "turn-normalized"

    @dataclass(frozen=True)
    class Config:
        """TSBPO's settings: the advantage weights, the tree budget, and the success model."""

        w_sib: float = 1.0
        """weight of the sibling-relative advantage A^sib."""
        w_ss: float = 1.0
        """weight of the same-state advantage A^ss."""
        gamma: float = 0.95
        """γ of the step returns of A^ss, per turn."""
        eps: float = 1e-6
        """ε added to the roots' std in A^root."""
        ss_tree_mean: bool = True
        """A^ss return of a turn: mean over every leaf through it (True) or its own
        trajectory's only (False, plain GiGPO on the leaves)."""
        drop_zero_turns: bool = False
        """leave out own turns whose advantage is exactly 0, so the turn-normalized loss
        divides by the turns that carry a nonzero advantage (CREDIT.md §5's "active turns");
        False keeps every own turn for later shape hooks and the KL term."""
        min_roots: int = 2
        """fewest fresh episodes per task."""
        max_root_fraction: float = 0.75
        """most roots as a share of the leaf budget (at least min_roots): keeps some branches,
        and data for the success model, even on unsolved tasks."""
        max_branches_per_node: int = 2
        """most branches from one node."""
        min_branch_turn: int = 1
        """earliest turn a branch may restart at: a branch at turn 0 is a fresh episode from the
        same seed that would get no root advantage, so by default that budget goes to roots."""
        prior_alpha: float = 1.0
        """α of each task's Beta prior of root success."""
        prior_beta: float = 1.0
        """β of each task's Beta prior of root success."""
        l2: float = 1.0
        """ridge weight of the success model, towards the prior-only weights."""
        newton_steps: int = 20
        """most Newton steps per fit."""
        min_fit_examples: int = 8
        """branch outcomes needed before the success model is fitted (the prior mean until
        then)."""
        buffer_size: int = 4096
        """most recent branch outcomes kept for fitting."""
        depth: int = 1
        """most branching levels per tree, one allocation round each ([D], derived): 1 =
        branches from roots only (two-level trees); d ≥ 2 = round r places
        ⌈Q_left / (d − r + 1)⌉ branches on nodes of every leaf so far, including earlier
        branches' own suffix turns, by the same p̂(1 − p̂) score and per-node caps."""

        def __post_init__(self):
            """Refuse settings out of range."""
            if self.min_roots < 1 or self.max_branches_per_node < 1:
                raise BadInput("tsbpo min_roots and max_branches_per_node must be >= 1")
            if not 0.0 < self.max_root_fraction <= 1.0:
                raise BadInput(
                    f"tsbpo max_root_fraction must be in (0, 1], got {self.max_root_fraction}"
                )
            if self.prior_alpha <= 0 or self.prior_beta <= 0 or self.l2 <= 0:
                raise BadInput("tsbpo prior_alpha, prior_beta and l2 must be > 0")
            if self.min_branch_turn < 0:
                raise BadInput(f"tsbpo min_branch_turn must be >= 0, got {self.min_branch_turn}")
            if self.newton_steps < 1 or self.buffer_size < 1 or self.min_fit_examples < 1:
                raise BadInput("tsbpo newton_steps, buffer_size, min_fit_examples must be >= 1")
            if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
                raise BadInput(
                    f"tsbpo depth must be an int >= 1 (1 = branch from roots only), "
                    f"got {self.depth!r}"
                )

    def __init__(self, config: Any = None):
        """Read the settings; start with empty task priors and the prior-only model ``W0``."""
        super().__init__(config)
        self.wins: dict[str, float] = defaultdict(float)  # Σ root outcomes per task
        self.plays: dict[str, int] = defaultdict(int)  # roots played per task
        self.X: list[np.ndarray] = []  # features of branched nodes
        self.y: list[float] = []  # their branches' outcomes
        self.w = W0.copy()

    def task_prior(self, task_id: str) -> float:
        """The Beta posterior mean of root success of ``task_id``."""
        a, b = self.cfg.prior_alpha, self.cfg.prior_beta
        return (a + self.wins[task_id]) / (a + b + self.plays[task_id])

    def learn(self, roots: list[Trajectory], X: list[np.ndarray], kids: list[Trajectory]):
        """Add root outcomes to the task priors and ``(x(n), R_branch)`` to the model's data.

        ``w`` is refitted once there are enough examples.
        """
        for traj in roots:
            self.wins[traj.task_id] += min(max(traj.outcome, 0.0), 1.0)
            self.plays[traj.task_id] += 1
        self.X += X
        self.y += [min(max(kid.outcome, 0.0), 1.0) for kid in kids]
        self.X, self.y = self.X[-self.cfg.buffer_size :], self.y[-self.cfg.buffer_size :]
        if len(self.y) >= self.cfg.min_fit_examples:
            self.w = fit_logistic(
                np.stack(self.X), np.array(self.y), W0, self.cfg.l2, self.cfg.newton_steps
            )

    def sample(self, batch: Batch, ctx: Context) -> None:
        """TSBPO's sampler: per task, roots from its prior, then branches where p̂(1 − p̂) peaks."""
        cfg = self.cfg
        pool = ctx.envs
        if pool is None or not getattr(pool, "supports_snapshot", False):
            name = getattr(pool, "env_id", type(pool).__name__)
            raise BadInput(f"tsbpo samples trees and needs env snapshots, which {name} lacks")
        rollout = dataclasses.replace(ctx.need_rollout(), snapshots=True)
        B = int(ctx.group_size)
        tasks = pick_tasks(pool, ctx.tasks_per_step, ctx.need_rng())
        priors = [self.task_prior(task) for task, _ in tasks]

        # 1. roots: R fresh episodes per task, R from the task's prior
        counts = [n_roots(B, p, cfg.min_roots, cfg.max_root_fraction) for p in priors]
        policy = ctx.need_policy()
        roots = _collect(policy, pool, tasks, counts, [0] * len(tasks), rollout)

        # 2. `depth` rounds, each spending its share of Q = B − R where p̂(1 − p̂) is largest
        # among the nodes of every leaf so far (round 1: the roots'); caps count all rounds
        kids: list[list[Trajectory]] = [[] for _ in tasks]
        used: list[dict[tuple[str | None, int], int]] = [defaultdict(int) for _ in tasks]
        left = [B - len(r) for r in roots]
        X_branched: list[np.ndarray] = []
        branched: list[Trajectory] = []  # every branch, in the order of X_branched
        p_nodes: dict[tuple[int, str | None, int], float] = {}
        p_branched: list[float] = []
        for d in range(cfg.depth):
            pairs: list[tuple[Trajectory, int]] = []
            owners: list[int] = []
            p_round: list[float] = []
            for t, prior in enumerate(priors):
                nodes, X, p_hat, q = self._plan(
                    roots[t] + kids[t], prior, -(-left[t] // (cfg.depth - d)), used[t], ctx.rng
                )
                for node, x, p, n in zip(nodes, X, p_hat, q, strict=True):
                    pairs += [node] * n
                    owners += [t] * n
                    X_branched += [x] * n
                    p_round += [float(p)] * n
                    p_nodes.setdefault((t, node[0].node_id, node[1]), float(p))
                left[t] -= int(q.sum())

            # 3. budget no round could place (very short leaves): more fresh episodes
            if d == cfg.depth - 1 and any(left):
                more = _collect(policy, pool, tasks, left, [len(r) for r in roots], rollout)
                roots = [r + m for r, m in zip(roots, more, strict=True)]

            # 4. the round's branches in one lockstep call; node ids count every branch of a
            # node over all rounds, so they stay unique within the tree
            new = branch(policy, pool, pairs, 1, rollout) if pairs else []
            for kid, (parent, k), t, p in zip(new, pairs, owners, p_round, strict=True):
                kid.node_id = f"{parent.node_id}/{k}.{used[t][(parent.node_id, k)]}"
                used[t][(parent.node_id, k)] += 1
                kid.extras["tsbpo_p_hat"] = p
                kids[t].append(kid)
            branched += new
            p_branched += p_round

        # 5. the task's roots, then its branches round by round; all share the task's group id
        batch.trajectories = [traj for r, ks in zip(roots, kids, strict=True) for traj in r + ks]
        self.learn([t for r in roots for t in r], X_branched, branched)
        batch.metrics["tsbpo/roots"] = float(sum(len(r) for r in roots))
        batch.metrics["tsbpo/branches"] = float(len(branched))
        branch_ids = {kid.node_id for kid in branched}
        batch.metrics["tsbpo/deep_branches"] = float(
            sum(kid.parent_id in branch_ids for kid in branched)
        )
        batch.metrics["tsbpo/p_hat_mean"] = (
            float(np.mean(list(p_nodes.values()))) if p_nodes else 0.0
        )
        if p_branched:
            batch.metrics["tsbpo/p_hat_branched"] = float(np.mean(p_branched))
        batch.metrics["tsbpo/task_prior_mean"] = float(np.mean(priors)) if priors else 0.0
        batch.metrics["tsbpo/model_examples"] = float(len(self.y))

    def _plan(
        self,
        leaves: list[Trajectory],
        prior: float,
        budget: int,
        used: dict[tuple[str | None, int], int],
        rng: np.random.Generator | None,
    ) -> tuple[list[tuple[Trajectory, int]], np.ndarray, np.ndarray, np.ndarray]:
        """One task's round: its candidate nodes [n], their features X [n, 5], ``p̂`` [n], ``q``.

        ``q`` [n] is the branches placed on them (``Σ q ≤ budget``, each within what is left of
        its node's cap after ``used``).
        """
        cfg = self.cfg
        nodes = candidate_nodes(leaves, cfg.min_branch_turn)
        rows = [node_features(prior, traj, k) for traj, k in nodes]
        X = np.array(rows).reshape(len(nodes), len(FEATURES))
        p_hat = predict(self.w, X)
        caps = [cfg.max_branches_per_node - used.get((traj.node_id, k), 0) for traj, k in nodes]
        q = allocate_branches(p_hat, budget, np.array(caps, dtype=int), rng)
        return nodes, X, p_hat, q

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """TSBPO's advantages: A^root + w_sib A^sib + w_ss A^ss, on own turns only."""
        cfg = self.cfg
        forest = Forest(batch)
        A_root = root_advantages(batch, cfg.eps, forest)
        A_sib = sibling_advantages(batch, forest)
        A_ss = same_state_advantages(batch, cfg.gamma, cfg.ss_tree_mean, forest)

        # A = A^root + w_sib A^sib + w_ss A^ss on own turns only: a shared prefix copy is its
        # parent's turn, and a second key would double that turn's gradient
        batch.advantages = {}
        for key in forest.owned():
            a = A_root.get(key, 0.0) + cfg.w_sib * A_sib.get(key, 0.0) + cfg.w_ss * A_ss[key]
            if cfg.drop_zero_turns and a == 0.0:
                continue
            m = batch.turn(key).mask()
            batch.advantages[key] = torch.tensor(a, dtype=torch.float32, device=m.device) * m
        batch.metrics["tsbpo/branch_points"] = float(
            len({forest.point(i) for i, p in enumerate(forest.parent) if p is not None})
        )
        batch.metrics["tsbpo/shared_turns"] = float(len(batch.keys()) - len(forest.owned()))


def _collect(
    policy: Any,
    pool: Any,
    tasks: list[tuple[str, int]],
    counts: list[int],
    first: list[int],
    cfg: Any,
) -> list[list[Trajectory]]:
    """``counts[t]`` fresh episodes of each task, numbered from ``first[t]`` in their node ids.

    Node ids are ``"{group}:{j}"``; tasks with equal counts share one lockstep :func:`collect`
    call.
    """
    out: list[list[Trajectory]] = [[] for _ in tasks]
    for n in sorted(set(counts) - {0}):
        which = [t for t, c in enumerate(counts) if c == n]
        trajs = collect(policy, pool, [tasks[t] for t in which], n, cfg)
        for j, t in enumerate(which):
            out[t] = trajs[j * n : (j + 1) * n]
            for m, traj in enumerate(out[t]):
                traj.node_id = f"{traj.group_id}:{first[t] + m}"
    return out
