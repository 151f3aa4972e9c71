"""The env's own answer checker for any task of a rollout pool (taco's probes, rubric's items).

``check_answer`` depends on the task alone, so one private env, made like the pool's and reset
to a task when asked about another, judges every rollout; the pool's own envs are left alone.
"""

from __future__ import annotations

from typing import Any

from agentgym.baselines.batch import Trajectory


class AnswerJudge:
    """``check_answer`` (and the env's other per-task methods) for the tasks of ``pool``.

    Attributes:
        pool: the rollouts' :class:`~agentgym.baselines.rollout.EnvPool`.
        calls: answers checked so far.
    """

    def __init__(self, pool: Any):
        """Make the private env (like the pool's: same id and kwargs)."""
        self.pool = pool
        self.env = pool.make_env()
        self.task: str | None = None
        self.calls = 0

    @classmethod
    def for_pool(cls, judge: AnswerJudge | None, pool: Any) -> AnswerJudge:
        """``judge`` if it serves ``pool``, else a new judge for it."""
        return judge if judge is not None and judge.pool is pool else cls(pool)

    def at(self, task_id: str, seed: int | None) -> Any:
        """The private env's ``unwrapped``, reset to ``task_id`` (only when it changes)."""
        if self.task != task_id:
            self.env.reset(seed=seed, options={"task_id": task_id})
            self.task = task_id
        return self.env.unwrapped

    def __call__(self, traj: Trajectory, text: str) -> float:
        """The checker's score of ``text`` as an answer to ``traj``'s task."""
        self.calls += 1
        return float(self.at(traj.task_id, traj.seed).check_answer(text))
