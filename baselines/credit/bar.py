"""BAR: Balanced Adaptive Rollout, the sampler of Orchard, as CREDIT.md §3 derives it.

Orchard is Peng et al. 2026, arXiv 2605.15040; the paper text could not be read: the rules
below are a design.

Per task a Beta(α, β) posterior of the success probability ``p``, kept across steps and updated
with every rollout (success: outcome > 0.5). One step:

1. candidates: the train tasks whose posterior mean ``p̂ = α / (α + β)`` lies in
   ``[p_min, p_max]``, in random order; the skipped ones, least extreme first, only when too
   few candidates remain;
2. round 0: one group of G rollouts (one task, one seed) for each of the first B candidates;
3. while fewer than B groups are mixed (outcomes not all equal) and rounds remain: refill the
   all-equal groups that can still mix, most promising first, with ``refill`` more rollouts of
   the same task and seed; draw a fresh candidate group for each missing group no refill can
   cover; stop at ``max_rounds`` rounds, ``max_extra`` extra rollouts, or when nothing is left;
4. the batch: the mixed groups, then the most promising all-equal groups up to B (these carry
   A = 0 under grpo, or leave the loss with grpo's ``zero_std="drop"``).

"Can still mix" is the posterior predictive: ``n`` more rollouts of a task with posterior
Beta(α, β) after an all-failure group contain a success with probability
``1 − Π_{j<n} (β + j) / (α + β + j)`` (after an all-success group, α and β swap roles); a group
is refilled when that is at least ``min_mix``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgym.baselines.credit import Batch, Context, CreditVariant, Trajectory, register
from agentgym.baselines.rollout import collect
from agentgym.core.errors import BadInput

SUCCESS = 0.5
"""An outcome above this counts as a success (``won``)."""


@dataclass
class _Group:
    """One group of the step: a task, a reset seed, its rollouts so far."""

    task: str
    seed: int
    order: int
    """creation order within the step (the batch keeps it)."""
    trajs: list[Trajectory] = field(default_factory=list)

    @property
    def mixed(self) -> bool:
        return len({t.outcome for t in self.trajs}) > 1

    @property
    def won(self) -> bool:
        """All-equal group: whether its common outcome is a success."""
        return self.trajs[0].outcome > SUCCESS


@register("bar")
class BAR(CreditVariant):
    """BAR, Orchard's Balanced Adaptive Rollout (CREDIT.md §3, [derived]).

    Collect groups until B of them have mixed outcomes, guided by a per-task Beta posterior of
    the success rate.

    Choices, since the paper's rule could not be read: the posterior is per task id (seeds
    pooled) with a uniform Beta(1, 1) prior; a task is skipped on its posterior mean (not on a
    credible interval), so a new task is always tried; refills keep every rollout (a refilled
    group grows past G, and group-relative estimators handle any size) rather than trimming
    back to G, since choosing which rollouts to keep by outcome would bias the group mean;
    a group that cannot mix is kept as a possible filler and replaced by a fresh task; the
    extra rollouts are capped per step (``max_extra``) besides the rounds. ``decay`` < 1 lets a
    changing policy forget old outcomes (pseudo-counts shrink toward the prior each step), so
    that skipped tasks come back.
    """

    @dataclass(frozen=True)
    class Config:
        """BAR's settings: the Beta prior, which tasks to skip, and the refill limits."""

        alpha0: float = 1.0
        """α of the Beta prior of every task's success rate."""
        beta0: float = 1.0
        """β of the Beta prior."""
        p_min: float = 0.05
        """skip tasks whose posterior mean success rate is below this (near-hopeless)."""
        p_max: float = 0.95
        """skip tasks whose posterior mean success rate is above this (near-solved)."""
        min_mix: float = 0.25
        """refill an all-equal group when the posterior predictive chance that its refill
        holds a different outcome is at least this."""
        refill: int | None = None
        """rollouts added to a group per refill (None: the group size G)."""
        max_rounds: int = 4
        """most refill rounds after the first collection (0: skipping only)."""
        max_extra: int | None = None
        """most rollouts per step beyond the first B·G (None: B·G)."""
        decay: float = 1.0
        """each step, pseudo-counts shrink toward the prior: α ← α0 + decay (α − α0)
        (1: a plain posterior)."""

        def __post_init__(self):
            """Refuse settings out of range."""
            if self.alpha0 <= 0 or self.beta0 <= 0:
                raise BadInput(f"bar alpha0 and beta0 must be > 0, got {self.alpha0}, {self.beta0}")
            if not 0.0 <= self.p_min <= self.p_max <= 1.0:
                raise BadInput(
                    f"bar needs 0 <= p_min <= p_max <= 1, got p_min={self.p_min}, "
                    f"p_max={self.p_max}"
                )
            if not 0.0 <= self.min_mix <= 1.0:
                raise BadInput(f"bar min_mix must be in [0, 1], got {self.min_mix}")
            if self.refill is not None and self.refill < 1:
                raise BadInput(f"bar refill must be >= 1 or None, got {self.refill}")
            if self.max_rounds < 0:
                raise BadInput(f"bar max_rounds must be >= 0, got {self.max_rounds}")
            if self.max_extra is not None and self.max_extra < 0:
                raise BadInput(f"bar max_extra must be >= 0 or None, got {self.max_extra}")
            if not 0.0 < self.decay <= 1.0:
                raise BadInput(f"bar decay must be in (0, 1], got {self.decay}")

    def __init__(self, config: Any = None):
        """Read the settings; every task starts at the prior."""
        super().__init__(config)
        self.posterior: dict[str, tuple[float, float]] = {}
        """task id -> (α, β) of its success rate; absent tasks are at the prior."""

    # ------------------------------------------------------------------ posterior
    def beta(self, task: str) -> tuple[float, float]:
        """(α, β) of ``task``'s posterior."""
        return self.posterior.get(task, (self.cfg.alpha0, self.cfg.beta0))

    def mean(self, task: str) -> float:
        """Posterior mean success rate ``α / (α + β)`` of ``task``."""
        a, b = self.beta(task)
        return a / (a + b)

    def observe(self, trajs: list[Trajectory]) -> None:
        """Update the posteriors with every rollout's outcome."""
        for t in trajs:
            a, b = self.beta(t.task_id)
            won = t.outcome > SUCCESS
            self.posterior[t.task_id] = (a + won, b + (not won))

    def mix_chance(self, task: str, won: bool, n: int) -> float:
        """Posterior predictive probability that ``n`` more rollouts of ``task`` differ once.

        That is the chance that they hold at least one outcome unlike an all-``won`` group's.
        """
        a, b = self.beta(task)
        same = a if won else b
        p_all_same = 1.0
        for j in range(n):
            p_all_same *= (same + j) / (a + b + j)
        return 1.0 - p_all_same

    def _forget(self) -> None:
        if self.cfg.decay == 1.0:
            return
        a0, b0, d = self.cfg.alpha0, self.cfg.beta0, self.cfg.decay
        self.posterior = {
            t: (a0 + d * (a - a0), b0 + d * (b - b0)) for t, (a, b) in self.posterior.items()
        }

    # ------------------------------------------------------------------ what tests replace
    def _task_ids(self, ctx: Context) -> list[str]:
        """The train-split task ids of the pool's env."""
        env: Any = ctx.need_envs().envs[0].unwrapped
        return list(env.task_ids("train"))

    def _collect(self, ctx: Context, tasks: list[tuple[str, int]], n: int) -> list[Trajectory]:
        """``n`` rollouts of each (task id, seed), groups contiguous in task order."""
        return collect(ctx.need_policy(), ctx.need_envs(), tasks, n, ctx.need_rollout())

    # ------------------------------------------------------------------ the sampler
    def sample(self, batch: Batch, ctx: Context) -> None:
        """BAR's sampler: groups refilled or replaced until B of them have mixed outcomes."""
        B, G = int(ctx.tasks_per_step), int(ctx.group_size)
        n_refill = self.cfg.refill or G
        budget = B * G if self.cfg.max_extra is None else self.cfg.max_extra
        self._forget()

        # 1. candidates: eligible tasks shuffled, then the skipped ones, least extreme first
        first, fresh, skipped = self._candidates(ctx, B)

        # 2. round 0
        groups: list[_Group] = []
        self._add_groups(ctx, groups, first, G)

        # 3. refill rounds
        rounds, extra = self._refill_rounds(ctx, groups, fresh, B, G, n_refill, budget)

        # 4. the batch: mixed groups, then the most promising all-equal ones, up to B
        mixed = [g for g in groups if g.mixed][:B]
        rest = [g for g in groups if not g.mixed]
        rest.sort(key=lambda g: -self.mix_chance(g.task, g.won, n_refill))
        fillers = rest[: B - len(mixed)]
        chosen = sorted(mixed + fillers, key=lambda g: g.order)
        batch.trajectories = []
        for g in chosen:
            for j, t in enumerate(g.trajs):
                t.node_id = f"{t.group_id}:{j}"  # refills restart collect's numbering
            batch.trajectories += g.trajs
        used = {g.task for g in groups}
        batch.metrics["bar/rounds"] = float(rounds)
        batch.metrics["bar/mixed_groups"] = float(len(mixed))
        batch.metrics["bar/filled_groups"] = float(len(fillers))
        batch.metrics["bar/extra_rollouts"] = float(extra)
        batch.metrics["bar/unused_rollouts"] = float(
            sum(len(g.trajs) for g in groups) - len(batch.trajectories)
        )
        batch.metrics["bar/skipped_tasks"] = float(sum(t not in used for t in skipped))

    def _candidates(self, ctx: Context, B: int) -> tuple[list[str], list[str], list[str]]:
        """The step's candidate tasks (step 1 of the module docstring).

        Returns:
            The B tasks of round 0 (eligible ones shuffled, then skipped ones, least extreme
            first, repeating only past the split), the eligible tasks later rounds may draw,
            and the skipped tasks.

        Raises:
            BadInput: the env lists no train tasks.
        """
        ids = self._task_ids(ctx)
        if not ids:
            raise BadInput("bar: the env lists no train tasks")
        lo, hi = self.cfg.p_min, self.cfg.p_max
        eligible = [t for t in ids if lo <= self.mean(t) <= hi]
        eligible = [eligible[int(i)] for i in ctx.need_rng().permutation(len(eligible))]
        taken = set(eligible)
        skipped = sorted((t for t in ids if t not in taken), key=lambda t: abs(self.mean(t) - 0.5))
        stream = eligible + skipped
        first = [stream[j % len(stream)] for j in range(B)]  # repeats only past the split
        fresh = eligible[B:]  # later rounds draw only eligible tasks
        return first, fresh, skipped

    def _refill_rounds(
        self,
        ctx: Context,
        groups: list[_Group],
        fresh: list[str],
        B: int,
        G: int,
        n_refill: int,
        budget: int,
    ) -> tuple[int, int]:
        """Refill or replace all-equal groups until B are mixed (step 3 of the module docstring).

        ``groups`` grows in place; ``fresh`` are the tasks new groups may draw.

        Returns:
            The rounds run and the extra rollouts they planned.
        """
        rounds = extra = 0
        while rounds < self.cfg.max_rounds:
            needed = B - sum(g.mixed for g in groups)
            if needed <= 0:
                break
            chances = {
                g.order: self.mix_chance(g.task, g.won, n_refill) for g in groups if not g.mixed
            }
            hopeful = sorted(
                (g for g in groups if not g.mixed and chances[g.order] >= self.cfg.min_mix),
                key=lambda g: -chances[g.order],
            )
            refills = hopeful[: min(needed, (budget - extra) // n_refill)]
            extra += len(refills) * n_refill
            n_new = min(needed - len(refills), (budget - extra) // G, len(fresh))
            new, fresh = fresh[:n_new], fresh[n_new:]
            extra += n_new * G
            if not refills and not new:
                break
            rounds += 1
            if refills:
                trajs = self._collect(ctx, [(g.task, g.seed) for g in refills], n_refill)
                self.observe(trajs)
                for j, g in enumerate(refills):
                    g.trajs += trajs[j * n_refill : (j + 1) * n_refill]
            self._add_groups(ctx, groups, new, G)
        return rounds, extra

    def _add_groups(self, ctx: Context, groups: list[_Group], tasks: list[str], G: int) -> None:
        """Collect one new group of G rollouts for each of ``tasks``, each with a fresh seed."""
        if not tasks:
            return
        pairs = [(t, int(ctx.need_rng().integers(2**31))) for t in tasks]
        trajs = self._collect(ctx, pairs, G)
        self.observe(trajs)
        for j, (task, seed) in enumerate(pairs):
            groups.append(_Group(task, seed, len(groups), trajs[j * G : (j + 1) * G]))
