"""GRPO: group-relative outcome advantages (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300).

``A_i = (R_i − mean_g R) / (std_g R + ε)``, broadcast to every policy token of every turn of
rollout ``i`` (CREDIT.md §1.1). Dr. GRPO and RLOO subclass this and change only the per-group
formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from agentgym.baselines.batch import REWARDS
from agentgym.baselines.credit import Batch, Context, CreditVariant, register
from agentgym.baselines.credit._kernels import zscore
from agentgym.core.errors import BadInput

ZERO_STD = ("zero", "drop")


def check_zero_std(zero_std: str) -> None:
    """Refuse an unknown ``zero_std`` setting."""
    if zero_std not in ZERO_STD:
        raise BadInput(f"zero_std must be one of {ZERO_STD}, got {zero_std!r}")


@dataclass(frozen=True)
class GroupSettings:
    """The settings every group-relative outcome variant shares."""

    zero_std: str = "zero"
    """groups with all-equal rewards: "zero" keeps them with A = 0, "drop" leaves them out of
    the loss."""
    reward: str = "outcome"
    """what a rollout is scored by: "outcome" (the last step's reward, R_i) or "return" (the
    sum of every step's reward: intermediate rewards such as TextWorld's score deltas, and
    invalid-action penalties)."""

    def __post_init__(self) -> None:
        """Refuse an unknown ``zero_std`` or ``reward``."""
        check_zero_std(self.zero_std)
        if self.reward not in REWARDS:
            raise BadInput(f"reward must be one of {REWARDS}, got {self.reward!r}")


@register("grpo")
class GRPO(CreditVariant):
    """GRPO (DeepSeekMath, arXiv 2402.03300): z-scored outcome within each group.

    A group whose rewards are all equal (or that has one rollout) carries no signal: it keeps
    A = 0 or is dropped from the loss (``zero_std``; BAR / DAPO-style samplers rely on "drop").
    The std is the unbiased one, as in verl and TRL. The paper's loss averages tokens per
    rollout, then rollouts (``seq-mean-token-mean``).
    """

    aggregation: ClassVar[str | None] = "seq-mean-token-mean"

    @dataclass(frozen=True)
    class Config(GroupSettings):
        """GRPO's settings: the shared ones and ε of the std."""

        eps: float = 1e-6
        """ε added to the group's std (verl's epsilon)."""

    def group_advantage(self, R: Tensor) -> Tensor:
        """Advantages [G] of one group's outcomes R [G] (at least two distinct values)."""
        return zscore(R, self.cfg.eps)

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """GRPO's advantages: each group's ``group_advantage``, broadcast to every turn."""
        R = batch.outcomes(self.cfg.reward)
        A = torch.zeros_like(R)
        kept: list[int] = []
        n_zero_std = 0
        for idx in batch.groups().values():
            R_g = R[idx]
            if bool((R_g == R_g[0]).all()):
                n_zero_std += 1
                if self.cfg.zero_std == "drop":
                    continue
            else:
                A[idx] = self.group_advantage(R_g)
            kept += idx
        batch.advantages = batch.broadcast(A, sorted(kept))
        batch.metrics[f"{self.name}/zero_std_groups"] = float(n_zero_std)
