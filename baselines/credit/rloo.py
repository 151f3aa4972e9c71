"""RLOO: REINFORCE with a leave-one-out baseline.

Ahmadian et al. 2024, "Back to Basics", arXiv 2402.14740; Kool et al. 2019.

``A_i = R_i − 1/(G−1) Σ_{j≠i} R_j = G/(G−1) (R_i − mean_g R)`` (CREDIT.md §1.3), broadcast to
every policy token of rollout ``i``. Used here with the trainer's clipped surrogate.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from agentgym.baselines.credit import register
from agentgym.baselines.credit._kernels import leave_one_out
from agentgym.baselines.credit.grpo import GRPO, GroupSettings


@register("rloo")
class RLOO(GRPO):
    """RLOO (arXiv 2402.14740): each rollout's baseline is the mean of the others' outcomes."""

    aggregation = None

    @dataclass(frozen=True)
    class Config(GroupSettings):
        """RLOO's settings: the shared ones (no ε: the std is not used)."""

    def group_advantage(self, R: Tensor) -> Tensor:
        """RLOO's group advantage: the outcome minus the mean of the others' outcomes."""
        return leave_one_out(R)
