"""GiGPO: group-in-group policy optimisation, as in CREDIT.md §1.5.

Feng et al. 2025, arXiv 2505.10978; reference code ``gigpo/core_gigpo.py`` in verl-agent.

Two levels of groups, no extra forward pass:

* episode: ``A^E_i = (R_i − mean_g R) / F_norm``;
* step: rollouts of one group that reach the same anchor state (``turn.state_key``) form a
  bucket; ``A^S_{i,k} = (R^s_{i,k} − mean_bucket R^s) / F_norm`` with the discounted step return
  ``R^s_{i,k} = Σ_{k'≥k} γ^{k'−k} r_{i,k'}`` (the outcome R_i is in the last step's r);
* ``A_{i,k,t} = (A^E_i + ω A^S_{i,k}) · m_t``.

``F_norm`` is 1 (``mean_norm``) or the std (``mean_std_norm``). A bucket or group whose values
are all equal, including a singleton, gives 0 (the reference gives a singleton episode group
A = R; here every group-relative term has zero mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, register
from agentgym.baselines.credit._kernels import relative, state_buckets
from agentgym.core.errors import BadInput

MODES = ("mean_norm", "mean_std_norm")
EPISODE_STATS = ("steps", "rollouts")


@register("gigpo")
class GiGPO(CreditVariant):
    """GiGPO (arXiv 2505.10978): episode advantage + ω · anchor-state step advantage."""

    requires_info = frozenset({"state_key"})

    @dataclass(frozen=True)
    class Config:
        """GiGPO's settings: ω, γ, the normalisation and how anchor states are matched."""

        omega: float = 1.0
        """ω, weight of the step advantage."""
        gamma: float = 0.95
        """γ of the step returns, per turn."""
        mode: str = "mean_norm"
        """F_norm: "mean_norm" (1) or "mean_std_norm" (the std, + eps)."""
        eps: float = 1e-6
        """ε added to the std in mean_std_norm."""
        episode_stats: str = "steps"
        """episode mean/std over "steps" (each step row carries its rollout's R, so long
        rollouts weigh more, as in the reference code) or over "rollouts"."""
        similarity: float = 1.0
        """anchor states merge when their keys' SequenceMatcher ratio is at least this;
        1.0 = identical keys only (the reference's fuzzy mode uses 0.95)."""

        def __post_init__(self):
            """Refuse an unknown mode or episode_stats, or a similarity outside (0, 1]."""
            if self.mode not in MODES:
                raise BadInput(f"gigpo mode must be one of {MODES}, got {self.mode!r}")
            if self.episode_stats not in EPISODE_STATS:
                raise BadInput(
                    f"gigpo episode_stats must be one of {EPISODE_STATS}, "
                    f"got {self.episode_stats!r}"
                )
            if not 0.0 < self.similarity <= 1.0:
                raise BadInput(f"gigpo similarity must be in (0, 1], got {self.similarity}")

    def _relative(self, x: Tensor, rows: Tensor) -> Tensor:
        """``(x − mean(rows)) / F_norm(rows)``; 0 when all rows are equal (or there is one)."""
        return relative(x, rows, None if self.cfg.mode == "mean_norm" else self.cfg.eps)

    def _buckets(self, batch: Batch, keys: list[Key]) -> list[list[Key]]:
        """Anchor-state buckets of one group: identical (or similar enough) state keys."""
        exact = state_buckets(batch, keys, self.name)
        if self.cfg.similarity >= 1.0:
            return exact
        state_keys = [str(batch.turn(key).state_key) for key in keys]
        reps: list[str] = []
        buckets: list[list[Key]] = []
        for key, s in zip(keys, state_keys, strict=True):
            for j, rep in enumerate(reps):
                if SequenceMatcher(None, s, rep).ratio() >= self.cfg.similarity:
                    buckets[j].append(key)
                    break
            else:
                reps.append(s)
                buckets.append([key])
        return buckets

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """GiGPO's advantages: the episode term plus ω times the anchor-state term."""
        cfg = self.cfg
        R = batch.outcomes()
        groups = batch.groups()

        # 1. episode advantage A^E_i
        A_E = torch.zeros_like(R)
        for idx in groups.values():
            if cfg.episode_stats == "steps":
                K = torch.tensor([len(batch.trajectories[i].turns) for i in idx], device=R.device)
                rows = R[idx].repeat_interleave(K)
            else:
                rows = R[idx]
            if rows.numel():
                A_E[idx] = self._relative(R[idx], rows)

        # 2. discounted step returns R^s_{i,k}, outcome in the last step's reward
        R_s: dict[Key, float] = {
            (i, k): G_k
            for i, traj in enumerate(batch.trajectories)
            for k, G_k in enumerate(traj.step_returns(cfg.gamma))
        }

        # 3. step advantage A^S_{i,k} within anchor-state buckets of each group
        A_S: dict[Key, Tensor] = {}
        sizes = []
        for idx in groups.values():
            keys = [(i, k) for i in idx for k in range(len(batch.trajectories[i].turns))]
            for bucket in self._buckets(batch, keys):
                returns = torch.tensor([R_s[key] for key in bucket], device=R.device)
                for key, a in zip(bucket, self._relative(returns, returns), strict=True):
                    A_S[key] = a
                sizes.append(len(bucket))

        # 4. A_{i,k,t} = (A^E_i + ω A^S_{i,k}) m_t
        batch.advantages = {}
        all_keys = batch.keys()
        for i, k in all_keys:
            m = batch.trajectories[i].turns[k].mask()
            batch.advantages[(i, k)] = (A_E[i] + cfg.omega * A_S[(i, k)]).to(m.device) * m
        if sizes:
            batch.metrics["gigpo/bucket_size_mean"] = sum(sizes) / len(sizes)
            batch.metrics["gigpo/singleton_fraction"] = sum(s == 1 for s in sizes) / len(sizes)
