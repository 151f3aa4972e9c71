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

The success model, the allocator and the branch forest live in
:mod:`agentgym.baselines.credit._tree`; this module re-exports them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.credit._kernels import centre, state_buckets, zscore
from agentgym.baselines.credit._tree import (
    FEATURES,
    W0,
    Forest,
    allocate_branches,
    candidate_nodes,
    fit_logistic,
    n_roots,
    node_features,
    predict,
    response_nll,
)
from agentgym.baselines.rollout import branch, collect, pick_tasks
from agentgym.core.errors import BadInput

__all__ = [
    "FEATURES",
    "TSBPO",
    "W0",
    "Forest",
    "allocate_branches",
    "candidate_nodes",
    "fit_logistic",
    "n_roots",
    "node_features",
    "predict",
    "response_nll",
    "root_advantages",
    "same_state_advantages",
    "sibling_advantages",
]

# ---------------------------------------------------------------- the three advantage terms


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
        trees = _Trees.of_roots(roots, B)

        # 2. `depth` rounds, each spending its share of Q = B − R where p̂(1 − p̂) is largest
        # among the nodes of every leaf so far (round 1: the roots'); caps count all rounds
        for d in range(cfg.depth):
            pairs, owners, p_round = self._place(trees, priors, d, ctx.rng)

            # 3. budget no round could place (very short leaves): more fresh episodes
            if d == cfg.depth - 1 and any(trees.left):
                first = [len(r) for r in trees.roots]
                more = _collect(policy, pool, tasks, trees.left, first, rollout)
                trees.roots = [r + m for r, m in zip(trees.roots, more, strict=True)]

            # 4. the round's branches in one lockstep call; node ids count every branch of a
            # node over all rounds, so they stay unique within the tree
            new = branch(policy, pool, pairs, 1, rollout) if pairs else []
            trees.attach(new, pairs, owners, p_round)

        # 5. the task's roots, then its branches round by round; all share the task's group id
        batch.trajectories = [
            traj for r, ks in zip(trees.roots, trees.kids, strict=True) for traj in r + ks
        ]
        self.learn([t for r in trees.roots for t in r], trees.X_branched, trees.branched)
        trees.record(batch, priors, n_examples=len(self.y))

    def _place(
        self, trees: _Trees, priors: list[float], d: int, rng: np.random.Generator | None
    ) -> tuple[list[tuple[Trajectory, int]], list[int], list[float]]:
        """Round ``d``'s branches: per task, its share of what is left, placed by :meth:`_plan`.

        Returns:
            The nodes ``(trajectory, k)`` to branch from, once per branch, the task of each
            and its node's ``p̂``. The features of each branch's node are appended to
            ``trees.X_branched`` and the branches taken off ``trees.left``.
        """
        cfg = self.cfg
        pairs: list[tuple[Trajectory, int]] = []
        owners: list[int] = []
        p_round: list[float] = []
        for t, prior in enumerate(priors):
            nodes, X, p_hat, q = self._plan(
                trees.roots[t] + trees.kids[t],
                prior,
                -(-trees.left[t] // (cfg.depth - d)),
                trees.used[t],
                rng,
            )
            for node, x, p, n in zip(nodes, X, p_hat, q, strict=True):
                pairs += [node] * n
                owners += [t] * n
                trees.X_branched += [x] * n
                p_round += [float(p)] * n
                trees.p_nodes.setdefault((t, node[0].node_id, node[1]), float(p))
            trees.left[t] -= int(q.sum())
        return pairs, owners, p_round

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


@dataclass
class _Trees:
    """The trees of one step's tasks (index ``t``) as :meth:`TSBPO.sample` grows them.

    Attributes:
        roots: per task, its fresh episodes.
        kids: per task, its branches, round by round.
        used: per task, branches taken so far from each node ``(node_id, k)`` (the caps).
        left: per task, the leaf budget not yet placed.
        X_branched: the feature row of every branch's node, in the order of ``branched``.
        branched: every branch, over all tasks and rounds.
        p_nodes: ``p̂`` of every candidate node ``(t, node_id, k)``, as first predicted.
        p_branched: ``p̂`` of every branch's node, in the order of ``branched``.
    """

    roots: list[list[Trajectory]]
    kids: list[list[Trajectory]]
    used: list[dict[tuple[str | None, int], int]]
    left: list[int]
    X_branched: list[np.ndarray] = field(default_factory=list)
    branched: list[Trajectory] = field(default_factory=list)
    p_nodes: dict[tuple[int, str | None, int], float] = field(default_factory=dict)
    p_branched: list[float] = field(default_factory=list)

    @classmethod
    def of_roots(cls, roots: list[list[Trajectory]], budget: int) -> _Trees:
        """Trees of roots only, each task with ``budget − R`` leaves left to place."""
        return cls(
            roots=roots,
            kids=[[] for _ in roots],
            used=[defaultdict(int) for _ in roots],
            left=[budget - len(r) for r in roots],
        )

    def attach(
        self,
        new: list[Trajectory],
        pairs: list[tuple[Trajectory, int]],
        owners: list[int],
        p_round: list[float],
    ) -> None:
        """Name and file a round's branches: ``new[j]`` branched from ``pairs[j]``."""
        for kid, (parent, k), t, p in zip(new, pairs, owners, p_round, strict=True):
            kid.node_id = f"{parent.node_id}/{k}.{self.used[t][(parent.node_id, k)]}"
            self.used[t][(parent.node_id, k)] += 1
            kid.extras["tsbpo_p_hat"] = p
            self.kids[t].append(kid)
        self.branched += new
        self.p_branched += p_round

    def record(self, batch: Batch, priors: list[float], n_examples: int) -> None:
        """The sampler's ``tsbpo/*`` metrics of the step into ``batch.metrics``."""
        batch.metrics["tsbpo/roots"] = float(sum(len(r) for r in self.roots))
        batch.metrics["tsbpo/branches"] = float(len(self.branched))
        branch_ids = {kid.node_id for kid in self.branched}
        batch.metrics["tsbpo/deep_branches"] = float(
            sum(kid.parent_id in branch_ids for kid in self.branched)
        )
        batch.metrics["tsbpo/p_hat_mean"] = (
            float(np.mean(list(self.p_nodes.values()))) if self.p_nodes else 0.0
        )
        if self.p_branched:
            batch.metrics["tsbpo/p_hat_branched"] = float(np.mean(self.p_branched))
        batch.metrics["tsbpo/task_prior_mean"] = float(np.mean(priors)) if priors else 0.0
        batch.metrics["tsbpo/model_examples"] = float(n_examples)


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
