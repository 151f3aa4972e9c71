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
from agentgym.baselines.credit.grpo import GRPO, GroupSettings


@register("drgrpo")
class DrGRPO(GRPO):
    """Dr. GRPO (arXiv 2503.20783): mean-centred outcome, constant-normalised loss."""

    aggregation = "constant-norm"

    @dataclass(frozen=True)
    class Config(GroupSettings):
        """Dr. GRPO's settings: the shared ones (no ε: the std is not used)."""

    def group_advantage(self, R: Tensor) -> Tensor:
        """Dr. GRPO's group advantage: the outcome minus the group mean, without the std."""
        return R - R.mean()
