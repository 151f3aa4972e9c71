"""The default sampler: G rollouts of each of several tasks, one reset seed per group, the
GRPO group (CREDIT.md §0)."""

from __future__ import annotations

from dataclasses import dataclass

from agentgym.baselines.credit import Batch, Context, CreditVariant, register


@register("group")
class GroupSampler(CreditVariant):
    """Fill the batch with ``config.tasks_per_step`` groups of ``config.group_size`` rollouts.

    Each group is one train-split task drawn without replacement and one reset seed, both
    from ``ctx.rng``; all rollouts of a group start from the same state. Generation follows
    ``ctx.rollout``.
    """

    @dataclass(frozen=True)
    class Config:
        """No settings: the sizes are the run's ``tasks_per_step`` and ``group_size``."""

    def sample(self, batch: Batch, ctx: Context) -> None:
        from agentgym.baselines.rollout import collect, pick_tasks

        tasks = pick_tasks(ctx.envs, ctx.config.tasks_per_step, ctx.rng)
        batch.trajectories = collect(
            ctx.policy, ctx.envs, tasks, ctx.config.group_size, ctx.rollout
        )
