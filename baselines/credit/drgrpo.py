"""Dr. GRPO: GRPO without the std and length biases.

Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783; code
sail-sg/understand-r1-zero.

``A_i = R_i − mean_g R`` (no division by the group std), and token losses are summed per
response and divided by a constant instead of the response length (CREDIT.md §1.2). The
trainer supplies the constant (the generation budget) to ``aggregate(..., "constant-norm")``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from agentgym.baselines.credit import register
from agentgym.baselines.credit.grpo import GRPO, check_zero_std


@register("drgrpo")
class DrGRPO(GRPO):
    """Dr. GRPO (arXiv 2503.20783): mean-centred outcome, constant-normalised loss."""

    aggregation = "constant-norm"

    @dataclass(frozen=True)
    class Config:
        """Dr. GRPO's settings: what becomes of groups with all-equal rewards."""

        zero_std: str = "zero"
        """groups with all-equal rewards: "zero" keeps them with A = 0, "drop" leaves them out of
        the loss."""

        def __post_init__(self):
            """Refuse an unknown ``zero_std``."""
            check_zero_std(self.zero_std)

    def group_advantage(self, R: Tensor) -> Tensor:
        """Dr. GRPO's group advantage: the outcome minus the group mean, without the std."""
        return R - R.mean()
