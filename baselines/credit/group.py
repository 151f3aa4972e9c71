"""The default sampler: G rollouts of each of several tasks, the GRPO group (CREDIT.md §0).

Each group has one reset seed.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentgym.baselines.credit import Batch, Context, CreditVariant, register
from agentgym.baselines.rollout import collect, pick_tasks


@register("group")
class GroupSampler(CreditVariant):
    """Fill the batch with ``ctx.tasks_per_step`` groups of ``ctx.group_size`` rollouts.

    Each group is one train-split task drawn without replacement and one reset seed, both
    from ``ctx.rng``; all rollouts of a group start from the same state. Generation follows
    ``ctx.rollout``.
    """

    @dataclass(frozen=True)
    class Config:
        """No settings: the sizes are the run's ``tasks_per_step`` and ``group_size``."""

    def sample(self, batch: Batch, ctx: Context) -> None:
        """The default sampler: one group of ``group_size`` rollouts per drawn task and seed."""
        pool = ctx.need_envs()
        tasks = pick_tasks(pool, ctx.tasks_per_step, ctx.need_rng())
        batch.trajectories = collect(
            ctx.need_policy(), pool, tasks, ctx.group_size, ctx.need_rollout()
        )
