"""DRE: Dynamic Rollout Editing (ICT CAS, arXiv 2606.17890), the agent variant of CREDIT.md §20.

The editing rule is derived: only the abstract could be read.

For each successful rollout (outcome > 0.5) with actions ``a_0 .. a_{K-1}`` (``a_{K-1}`` the
final answer): the earliest cut ``k`` such that ``a_0 .. a_{k-1}, a_{K-1}`` wins from the same
reset, verified by replaying it in a fresh env of the pool. When ``k < K − 1`` the turns
``k .. K−2`` were redundant: the edited rollout (turns ``0..k−1`` kept, the final action as turn
``k``) is replayed teacher-forced with :func:`~agentgym.baselines.rollout.replay`, which
rebuilds the prompts the policy would have seen (the rollout's own layout and history window,
the decoding masks where it was constrained) and recomputes ``logp_old`` with one forward pass:
the edited turns are off-policy and clipping handles it. It joins the original's group
("add" keeps the original too, "replace" swaps it) with

    R' = R + length_bonus · (K_min − K') / K_min   when K' < K_min, else R' = R,

``K'`` its turns and ``K_min`` the turns of the group's shortest natural (unedited) success,
its own original included. The bonus is relative to the group, not to the rollout's own
length: an edited copy never out-scores a success of the group that is as short or shorter,
and a group whose rollouts all scored alike stays without signal unless the edit is shorter
than every success it had (a bonus relative to the rollout's own length once put a 10-turn
rollout's 4-turn edit above a natural 3-turn success, and woke up all-success groups whose
edits shortened nothing the group had not already found).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agentgym.baselines.credit import Batch, Context, CreditVariant, Trajectory, register
from agentgym.baselines.rollout import EnvPool, RolloutConfig, replay
from agentgym.core.errors import BadInput

SUCCESS = 0.5
"""A rollout with an outcome above this is successful."""
MODES = ("add", "replace")


def _shortest_successes(trajectories: list[Trajectory]) -> dict[str, int]:
    """Per group, the turns of its shortest natural (unedited) successful rollout."""
    shortest: dict[str, int] = {}
    for t in trajectories:
        if t.outcome > SUCCESS and not t.edited:
            shortest[t.group_id] = min(shortest.get(t.group_id, len(t.turns)), len(t.turns))
    return shortest


@register("dre")
class DRE(CreditVariant):
    """DRE (arXiv 2606.17890, CREDIT.md §20): shorter verified copies of successful rollouts.

    Successful rollouts with redundant turns get a verified shorter copy in their group, paid
    a length bonus.

    Choices, since the editing rule is derived: the answer-bearing action is the rollout's last
    one and the cut is searched from the start (``k = 0, 1, ..``), each candidate replayed from
    reset (the envs are deterministic given task, seed and actions; a rollout without a seed
    or without recorded actions is left alone); a cut counts when the episode terminates on the
    final action with an outcome at least the original's, so an edit never lowers the reward;
    the bonus is on the fraction of turns removed; by default the cut must not lower the
    env's ``progress`` either (``keep_progress``). Only reset determinism is needed (no
    snapshot, no answer checker: the env itself verifies). Rollouts already edited are not
    edited again.
    """

    @dataclass(frozen=True)
    class Config:
        """DRE's settings: where the edited copy goes, its bonus, and the progress check."""

        mode: str = "add"
        """"add" puts the edited rollout next to the original in its group; "replace" swaps
        the original for it."""
        length_bonus: float = 0.1
        """outcome bonus per fraction of turns the edit is shorter than the group's shortest
        natural success: R' = R + length_bonus · (K_min − K') / K_min (0 unless shorter)."""
        keep_progress: bool = True
        """a cut counts only if the edited episode ends with at least the original's
        ``info["progress"]`` (on search envs: the share of gold evidence read), where the env
        reports it. An env that checks the answer string alone verifies "answer at once" as
        a win, and the edited rollout then teaches the policy to answer what it never read:
        on Search-Free-Small without this check dre fell to 0.07 test success against
        grpo's 0.17 after 20 steps."""

        def __post_init__(self):
            """Refuse an unknown mode or a negative bonus."""
            if self.mode not in MODES:
                raise BadInput(f"dre mode must be one of {MODES}, got {self.mode!r}")
            if self.length_bonus < 0:
                raise BadInput(f"dre length_bonus must be >= 0, got {self.length_bonus}")

    def transform(self, batch: Batch, ctx: Context) -> None:
        """DRE's edit: add (or swap in) the verified shorter copy of each successful rollout."""
        if ctx.envs is None:
            raise BadInput("dre replays rollouts and needs the env pool (ctx.envs)")
        shortest = _shortest_successes(batch.trajectories)
        out: list[Trajectory] = []
        n_edited = removed = rewarded = 0
        for traj in batch.trajectories:
            edited = self.edit(traj, ctx)
            if edited is None:
                out.append(traj)
                continue
            n_edited += 1
            removed += len(traj.turns) - len(edited.turns)
            K_min, K_edit = shortest[traj.group_id], len(edited.turns)
            if K_edit < K_min:
                edited.outcome += self.cfg.length_bonus * (K_min - K_edit) / K_min
                rewarded += 1
            out += [edited] if self.cfg.mode == "replace" else [traj, edited]
        batch.trajectories = out
        batch.metrics["dre/edited"] = float(n_edited)
        batch.metrics["dre/turns_removed"] = float(removed)
        batch.metrics["dre/rewarded"] = float(rewarded)

    def edit(self, traj: Trajectory, ctx: Context) -> Trajectory | None:
        """The verified edited copy of ``traj``, or None.

        None when it failed, cannot be replayed, or has no redundant turn.
        """
        actions = [t.extras.get("action") for t in traj.turns]
        if (
            traj.outcome <= SUCCESS
            or traj.edited
            or traj.seed is None
            or len(actions) < 2
            or any(not isinstance(a, str) for a in actions)
        ):
            return None
        K = len(actions)
        k = self.earliest_cut(ctx, traj, actions)
        if k is None:
            return None
        texts = [a for a in actions if isinstance(a, str)]  # all of them, checked above
        source = traj.node_id or traj.group_id
        edited = replay(
            ctx.need_policy(),
            ctx.envs,
            traj.task_id,
            traj.seed,
            [*texts[:k], texts[-1]],
            self._rollout_config(traj, ctx),
            group_id=traj.group_id,
            node_id=f"{source}/dre",
        )
        if not (edited.terminated and edited.outcome >= traj.outcome):
            return None  # the env disagrees with the check: leave the rollout alone
        edited.edited = True
        edited.sample_weight = traj.sample_weight
        edited.extras["dre"] = {
            "source": source,
            "removed": list(range(k, K - 1)),
            "env_outcome": edited.outcome,
        }
        edited.outcome = traj.outcome  # the bonus, if any, is the group's to give (transform)
        return edited

    def earliest_cut(self, ctx: Context, traj: Trajectory, actions: list[Any]) -> int | None:
        """The least ``k`` in ``0 .. K−2`` such that ``actions[:k]`` then ``actions[-1]`` wins.

        It must win from ``traj``'s reset with an outcome >= ``traj.outcome``; None when there
        is none (the rollout is already minimal). With ``keep_progress`` the cut must also end
        with at least the original's ``info["progress"]``. Costs up to K(K − 1)/2 env steps.
        """
        env: Any = ctx.envs.envs[0] if isinstance(ctx.envs, EnvPool) else ctx.envs
        needed = traj.turns[-1].info.get("progress") if self.cfg.keep_progress else None
        for k in range(len(actions) - 1):
            env.reset(seed=traj.seed, options={"task_id": traj.task_id})
            ended = False
            for action in actions[:k]:
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    ended = True
                    break
            if ended:
                continue
            _, reward, terminated, _, info = env.step(actions[-1])
            if not (terminated and float(reward) >= traj.outcome):
                continue
            if needed is None or float(info.get("progress", 0.0)) >= float(needed):
                return k
        return None

    @staticmethod
    def _rollout_config(traj: Trajectory, ctx: Context) -> Any:
        """The run's rollout settings with ``traj``'s own prompt format and decoding constraint.

        The constraint is on when its turns carry decoding masks.
        """
        base = ctx.rollout if isinstance(ctx.rollout, RolloutConfig) else RolloutConfig()
        return dataclasses.replace(
            base,
            prompt=traj.prompt if traj.prompt is not None else base.prompt,
            constrained=any(t.allowed_tokens is not None for t in traj.turns),
            snapshots=False,
        )
