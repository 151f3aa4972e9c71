"""SNC: structured same-state credit with dependency propagation, for menu search agents.

The agents act through a finite menu over an entity–sentence graph (CREDIT.md §16; [D]:
derived, the paper was not found; cross-check GDCR/SAPO, arXiv 2605.29697).

Three terms, no extra forward pass:

* episode: ``A^E_i = R_i − mean_g R`` (GiGPO's mean_norm, episode rows weighted by length
  as in the reference code, or per rollout);
* frontier-relative (same-state) term: step samples of a group that act from the same menu
  state (``turn.state_key``) form a bucket; ``A^SNC_{i,k} = R^s_{i,k} − mean_bucket R^s`` with
  the discounted step return ``R^s_{i,k} = Σ_{k'≥k} γ^{k'−k} r_{i,k'}`` (outcome R_i in the
  last step's r; a singleton bucket gives 0). ``frontier="rank"`` takes §16's other form, a
  rank against the other frontier options observed at that state ([D]: the ranking rule is
  derived): the bucket's samples are grouped by the action they took (``extras["action"]``,
  else the response tokens), each distinct action's value is the mean R^s of its samples, the
  values are ranked (ties share the average rank) and the ranks mapped to [−0.5, 0.5] (worst
  option −0.5, best +0.5); each sample gets its action's centred rank, so a bucket with one
  option, or all options tied, gives 0. Rank is scale-free: one lucky rollout with a large
  return moves its option to the top and no further, it cannot dominate the bucket;
* dependency credit: per rollout, edge ``b → a`` when turn ``a`` consumes a graph node that
  turn ``b < a`` produced (``info["provenance"]``; the latest earlier producer of the node,
  or every one). Each turn's credit ``c(a)`` (``dep_credit``: its A^SNC, the outcome-carrying
  last turn's A^E_i, or both) flows back to the turns it depends on:
  ``D(b) = Σ_{a reachable from b} γ_dep^{dist(b,a)} c(a)`` with ``dist`` the fewest edges
  from b to a; a turn's own credit is not added to itself (it already has it).

``A_{i,k,t} = (A^E_i + ω A^SNC_{i,k} + λ D_{i,k}) · m_t``. With ``lam = 0`` and
``frontier="mean"`` this is GiGPO in mean_norm mode with exact state keys.

Provenance in the menu search env (``agentgym/Search-Menu-*``): ``produced`` and
``consumed`` are the node ids of the last action only (a search produces entity nodes
``e:<id>``; expand/follow consume an entity node (follow also the sentence it follows) and
produce the page's sentence nodes ``s:<page>:<k>``; read consumes a sentence and produces the
entity and value nodes it mentions; answer consumes the node it names), while ``visited`` and
``cited`` accumulate over the episode. So the per-turn sets are used as they are, no
differencing. A turn without ``provenance`` (or an env that gives none) has no edges, and the
dependency term is 0 there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.credit._kernels import relative, state_buckets
from agentgym.baselines.credit.proas import action_of
from agentgym.core.errors import BadInput

FRONTIERS = ("mean", "rank")
EPISODE_STATS = ("steps", "rollouts")
DEP_CREDITS = ("snc", "outcome", "both")
PRODUCERS = ("latest", "all")


def dependency_parents(traj: Trajectory, producers: str = "latest") -> list[set[int]]:
    """Per turn ``a``, the turns ``b < a`` that produced a node turn ``a`` consumes.

    Args:
        traj: a rollout whose turns' ``info["provenance"]`` holds the per-action ``produced``
            and ``consumed`` node ids (turns without it have no edges).
        producers: "latest" links a consumed node to the most recent earlier turn that
            produced it, "all" to every earlier turn that did.
    """
    made: dict[str, list[int]] = {}
    parents: list[set[int]] = []
    for a, turn in enumerate(traj.turns):
        prov = turn.info.get("provenance") or {}
        mine: set[int] = set()
        for node in prov.get("consumed", ()):
            by = made.get(node)
            if by:
                mine.update(by if producers == "all" else by[-1:])
        parents.append(mine)
        for node in prov.get("produced", ()):
            made.setdefault(node, []).append(a)
    return parents


def propagate(parents: list[set[int]], credit: list[float], gamma_dep: float) -> list[float]:
    """``D(b) = Σ_{a ≠ b reachable from b} γ_dep^{dist(b,a)} c(a)`` over the dependency graph.

    The graph is given by ``parents`` (``dist`` = fewest edges, found by a breadth-first walk
    back from each credited turn).
    """
    D = [0.0] * len(credit)
    for a, c in enumerate(credit):
        if c == 0.0:
            continue
        dist = {a: 0}
        queue = deque([a])
        while queue:
            x = queue.popleft()
            for b in parents[x]:
                if b not in dist:
                    dist[b] = dist[x] + 1
                    queue.append(b)
        for b, d in dist.items():
            if d > 0:
                D[b] += gamma_dep**d * c
    return D


def frontier_rank(returns: Sequence[float], actions: Sequence[Hashable]) -> list[float]:
    """Centred rank of each sample's action among the distinct actions of one same-state bucket.

    Args:
        returns: the step return R^s of each sample in the bucket.
        actions: the action each sample took (same length); equal actions are one option.

    Returns:
        Per sample, its option's rank mapped to [−0.5, 0.5]: an option's value is the mean R^s
        of its samples; the lowest value ranks −0.5 and the highest +0.5, tied values share the
        average rank (exact float equality), and a single option gives 0.
    """
    by_action: dict[Hashable, list[float]] = {}
    for a, r in zip(actions, returns, strict=True):
        by_action.setdefault(a, []).append(r)
    value = {a: sum(rs) / len(rs) for a, rs in by_action.items()}
    n = len(value)
    if n < 2:
        return [0.0] * len(returns)
    ordered = sorted(value.values())
    # average 0-based rank of each distinct value: the middle of its run in the sorted list
    first: dict[float, int] = {}
    last: dict[float, int] = {}
    for pos, v in enumerate(ordered):
        first.setdefault(v, pos)
        last[v] = pos
    centred = {a: (first[v] + last[v]) / 2 / (n - 1) - 0.5 for a, v in value.items()}
    return [centred[a] for a in actions]


@register("snc")
class SNC(CreditVariant):
    """Structured same-state credit (CREDIT.md §16): three advantage terms.

    Episode advantage + ω · same-menu-state step advantage + λ · credit propagated back along
    the rollout's dependency graph.
    """

    requires_info = frozenset({"state_key", "admissible_actions", "provenance"})

    @dataclass(frozen=True)
    class Config:
        """SNC's settings: the terms' weights and forms, the discounts, and the dependencies."""

        omega: float = 1.0
        """ω, weight of the frontier-relative same-state term A^SNC."""
        frontier: str = "mean"
        """form of A^SNC within a same-state bucket: "mean" (``R^s − mean_bucket R^s``) or
        "rank" (the centred rank in [−0.5, 0.5] of the sample's action among the distinct
        actions taken at that state, each valued by its mean R^s). [D]: §16 names the rank
        form without a rule; rank is scale-free, so one lucky rollout cannot dominate a
        bucket."""
        lam: float = 0.5
        """λ, weight of the dependency credit D (0: off)."""
        gamma: float = 0.95
        """γ of the step returns R^s, per turn."""
        gamma_dep: float = 0.9
        """γ_dep, decay per dependency edge."""
        dep_credit: str = "both"
        """what each turn passes back: "snc" (its A^SNC), "outcome" (only the last turn, its
        rollout's A^E) or "both" (A^SNC, plus A^E on the last turn)."""
        producers: str = "latest"
        """a consumed node depends on the "latest" earlier turn that produced it, or on "all"
        of them."""
        episode_stats: str = "steps"
        """mean of A^E over "steps" (each step row carries its rollout's R, as GiGPO's
        reference code) or over "rollouts"."""

        def __post_init__(self):
            """Refuse an unknown choice or a gamma_dep outside [0, 1]."""
            for name, value, valid in (
                ("frontier", self.frontier, FRONTIERS),
                ("dep_credit", self.dep_credit, DEP_CREDITS),
                ("producers", self.producers, PRODUCERS),
                ("episode_stats", self.episode_stats, EPISODE_STATS),
            ):
                if value not in valid:
                    raise BadInput(f"snc {name} must be one of {valid}, got {value!r}")
            if not 0.0 <= self.gamma_dep <= 1.0:
                raise BadInput(f"snc gamma_dep must be in [0, 1], got {self.gamma_dep}")

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """SNC's advantages: episode term + ω · same-state term + λ · dependency credit."""
        cfg = self.cfg
        R = batch.outcomes()
        groups = batch.groups()

        # 1. episode term A^E_i
        A_E = torch.zeros_like(R)
        for idx in groups.values():
            rows = R[idx]
            if cfg.episode_stats == "steps":
                K = torch.tensor([len(batch.trajectories[i].turns) for i in idx], device=R.device)
                rows = rows.repeat_interleave(K)
            if rows.numel():
                A_E[idx] = relative(R[idx], rows)

        # 2. discounted step returns R^s_{i,k}, outcome in the last step's reward
        R_s: dict[Key, float] = {
            (i, k): G_k
            for i, traj in enumerate(batch.trajectories)
            for k, G_k in enumerate(traj.step_returns(cfg.gamma))
        }

        # 3. frontier-relative term A^SNC_{i,k}: same menu state within the group
        A_S, sizes = self._frontier_terms(batch, groups, R_s)

        # 4. dependency credit D_{i,k}, propagated back along each rollout's provenance
        D, n_edges = self._dependency_credit(batch, A_E, A_S)

        # 5. A_{i,k,t} = (A^E_i + ω A^SNC_{i,k} + λ D_{i,k}) m_t
        batch.advantages = {}
        all_keys = batch.keys()
        for i, k in all_keys:
            m = batch.trajectories[i].turns[k].mask()
            a = float(A_E[i]) + cfg.omega * A_S[(i, k)] + cfg.lam * D[(i, k)]
            batch.advantages[(i, k)] = a * m
        n_turns = max(1, len(D))
        batch.metrics["snc/dependency_edges_per_turn"] = n_edges / n_turns
        batch.metrics["snc/dependency_credit_abs_mean"] = sum(abs(d) for d in D.values()) / n_turns
        if sizes:
            batch.metrics["snc/bucket_size_mean"] = sum(sizes) / len(sizes)
            batch.metrics["snc/singleton_fraction"] = sum(s == 1 for s in sizes) / len(sizes)

    def _frontier_terms(
        self, batch: Batch, groups: dict[str, list[int]], R_s: dict[Key, float]
    ) -> tuple[dict[Key, float], list[int]]:
        """``A^SNC_{i,k}``: each turn's step return against its same-state bucket in the group.

        Args:
            batch: the rollouts.
            groups: group id -> trajectory indices.
            R_s: the discounted step return ``R^s_{i,k}`` of every turn.

        Returns:
            ``A^SNC`` of every turn (its action's frontier rank, or ``R^s`` centred on the
            bucket's mean, as ``frontier`` says), and the size of every bucket.
        """
        cfg = self.cfg
        A_S: dict[Key, float] = {}
        sizes = []
        for idx in groups.values():
            keys = [(i, k) for i in idx for k in range(len(batch.trajectories[i].turns))]
            for bucket in state_buckets(batch, keys, self.name):
                if cfg.frontier == "rank":
                    acts = [action_of(batch.trajectories[i].turns[k]) for i, k in bucket]
                    terms = frontier_rank([R_s[key] for key in bucket], acts)
                else:
                    returns = torch.tensor([R_s[key] for key in bucket], dtype=torch.float64)
                    terms = relative(returns, returns).tolist()
                for key, a in zip(bucket, terms, strict=True):
                    A_S[key] = a
                sizes.append(len(bucket))
        return A_S, sizes

    def _dependency_credit(
        self, batch: Batch, A_E: torch.Tensor, A_S: dict[Key, float]
    ) -> tuple[dict[Key, float], int]:
        """``D_{i,k}``: the credit of later turns that consumed what turn ``k`` produced.

        Per rollout, the credit to propagate (``A^SNC``, the outcome term ``A^E_i`` on the
        last turn, or both, as ``dep_credit`` says) flows back along its dependency edges,
        discounted by ``gamma_dep`` per edge.

        Returns:
            ``D`` of every turn and the number of dependency edges in the batch.
        """
        cfg = self.cfg
        D: dict[Key, float] = {}
        n_edges = 0
        for i, traj in enumerate(batch.trajectories):
            n = len(traj.turns)
            credit = [0.0] * n
            if cfg.dep_credit in ("snc", "both"):
                credit = [A_S[(i, k)] for k in range(n)]
            if cfg.dep_credit in ("outcome", "both") and n:
                credit[-1] += float(A_E[i])
            parents = dependency_parents(traj, cfg.producers)
            n_edges += sum(len(p) for p in parents)
            for k, d in enumerate(propagate(parents, credit, cfg.gamma_dep)):
                D[(i, k)] = d
        return D, n_edges
