"""SLCA-GRPO: segment-level credit assignment for tool-calling RL, as in CREDIT.md §10.

The paper is "SLCA-GRPO: Resolving Cross-Segment Credit Misattribution in Tool-Calling RL",
OpenReview ``eNdfzfHBW5``.

Two rewards per rollout, two group z-scores, routed by token masks:

* ``A^tool_i = z_g(r_exec)``, ``A^sum_i = z_g(r_pref)`` with ``z_g(x) = (x − mean_g x) /
  (std_g x + ε)`` (unbiased std, as GRPO; a group whose values are all equal gives 0);
* ``A_{i,k,t} = (M_tool,t A^tool_i + M_sum,t A^sum_i) · m_t``: tool-like tokens
  (``tool_call``, ``search_query``) never see the summary reward and summary-like tokens
  (``summary``, ``answer``, ``conclusion``) never see the execution reward. Other tokens
  (``think``, markup, eos) follow the tool segment by default (``other``).

Token tags: ``Turn.segment_tags`` when set, else mapped from the env's character spans
``info["segments"]`` by :func:`agentgym.baselines.segments.segment_token_tags` with the
policy's tokenizer (the ``transform`` hook).

Rewards are rule-based (no LLM judge; the paper's HierR and judge score are replaced where the
env lacks them; this is a derived rule):

* ``r_exec``: the mean of ``reward_components[exec_reward]`` (HierR, ``"hierr"``) over the
  turns that report it; where no turn does, the search proxy ``info[exec_fallback]`` of the
  last turn (``"progress"``: the share of gold evidence retrieved); else the outcome R_i.
* ``r_pref = format · quality − omission · [progress ≥ threshold and not success]``, all read
  from the last turn's info: ``quality = reward_components[pref_reward]`` (``"f1"``, or
  ``"success"``; the outcome R_i when absent), ``format = reward_components.get("format", 1)``,
  and the omission penalty for a rollout that retrieved the gold evidence but answered wrong
  (the needed results were left out of the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.credit import (
    Batch,
    Context,
    CreditVariant,
    Key,
    Trajectory,
    Turn,
    register,
)
from agentgym.baselines.credit.grpo import check_zero_std
from agentgym.baselines.segments import tag_batch
from agentgym.core.errors import BadInput

OTHER = ("turn", "tool", "summary", "none")


def _strings(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


@register("slca")
class SLCA(CreditVariant):
    """SLCA-GRPO (OpenReview eNdfzfHBW5): execution and summary rewards, each on its own tokens.

    Separate group z-scores of an execution reward and a summary reward, each routed only to
    its own segment's tokens.
    """

    requires_info = frozenset({"segments"})  # the char spans routed to tokens
    aggregation = "seq-mean-token-mean"

    @dataclass(frozen=True)
    class Config:
        """SLCA's settings: the segment tags, where the two rewards come from, and ε."""

        tool_tags: tuple[str, ...] = ("tool_call", "search_query")
        """segment tags whose tokens get A^tool."""
        summary_tags: tuple[str, ...] = ("summary", "answer", "conclusion")
        """segment tags whose tokens get A^sum."""
        other: str = "turn"
        """tokens of any other tag (think, markup, an item's "answer: " prefix, eos): "turn"
        joins the segment of their own turn (summary when the turn has summary tokens and no
        tool tokens, else tool), or always "tool", "summary", or "none" (advantage 0).
        CREDIT.md §10 lets them follow the tool segment; on menu envs that credits the
        decision to answer (the item's first tokens) with the tool reward, and the tool
        proxy (evidence read) then teaches the policy never to answer, so "turn" is the
        default."""
        exec_reward: str = "hierr"
        """reward_components key of the execution reward, averaged over the turns with it."""
        exec_fallback: str = "progress"
        """info key of the last turn used as r_exec when no turn reports exec_reward."""
        pref_reward: str = "f1"
        """reward_components key of the answer's quality ("f1" or "success")."""
        format_key: str = "format"
        """reward_components key of the format gate (1 when absent)."""
        success_key: str = "success"
        """reward_components key telling whether the answer is right (the outcome when
        absent)."""
        omission_penalty: float = 0.5
        """subtracted from r_pref when the rollout retrieved the gold evidence but answered
        wrong."""
        omission_threshold: float = 1.0
        """progress at or above which the gold evidence counts as retrieved."""
        eps: float = 1e-6
        """ε added to each group std."""
        zero_std: str = "zero"
        """groups whose r_exec and r_pref are both all-equal: "zero" keeps them with A = 0,
        "drop" leaves them out of the loss."""

        def __post_init__(self):
            """Refuse bad settings; a single tag string becomes a one-tag tuple."""
            check_zero_std(self.zero_std)
            if self.other not in OTHER:
                raise BadInput(f"slca other must be one of {OTHER}, got {self.other!r}")
            object.__setattr__(self, "tool_tags", _strings(self.tool_tags))
            object.__setattr__(self, "summary_tags", _strings(self.summary_tags))
            both = sorted(set(self.tool_tags) & set(self.summary_tags))
            if both:
                raise BadInput(f"slca tags {both} are both tool_tags and summary_tags")

    # ------------------------------------------------------------------ rewards
    def r_exec(self, traj: Trajectory) -> float:
        """The execution reward of a rollout (HierR, else the search proxy, else R)."""
        cfg = self.cfg
        scores = [
            float(t.info["reward_components"][cfg.exec_reward])
            for t in traj.turns
            if cfg.exec_reward in t.info.get("reward_components", {})
        ]
        if scores:
            return sum(scores) / len(scores)
        last = traj.turns[-1].info if traj.turns else {}
        if cfg.exec_fallback in last:
            return float(last[cfg.exec_fallback])
        return float(traj.outcome)

    def r_pref(self, traj: Trajectory) -> tuple[float, bool]:
        """The summary reward of a rollout and whether the omission penalty applied."""
        cfg = self.cfg
        last = traj.turns[-1].info if traj.turns else {}
        parts = last.get("reward_components", {})
        quality = float(parts.get(cfg.pref_reward, traj.outcome))
        gate = float(parts.get(cfg.format_key, 1.0))
        success = float(parts.get(cfg.success_key, traj.outcome)) > 0.0
        progress = last.get("progress")
        omitted = progress is not None and progress >= cfg.omission_threshold and not success
        return gate * quality - (cfg.omission_penalty if omitted else 0.0), omitted

    def _z(self, x: Tensor) -> Tensor:
        if bool((x == x[0]).all()):
            return torch.zeros_like(x)
        return (x - x.mean()) / (x.std() + self.cfg.eps)

    # ------------------------------------------------------------------ hooks
    def transform(self, batch: Batch, ctx: Context) -> None:
        """SLCA's transform: tag response tokens from ``info["segments"]`` where untagged."""
        tagged = tag_batch(batch.trajectories, ctx.policy, "slca")
        if tagged:
            batch.metrics["slca/tagged_turns"] = float(tagged)

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """SLCA's advantages: z-scored r_exec on tool tokens, z-scored r_pref on summary tokens."""
        cfg = self.cfg
        self.transform(batch, ctx)
        device = batch.device
        # 1. two rewards per rollout
        r_exec = torch.tensor([self.r_exec(t) for t in batch.trajectories], device=device)
        prefs = [self.r_pref(t) for t in batch.trajectories]
        r_pref = torch.tensor([p for p, _ in prefs], device=device)

        # 2. separate group z-scores A^tool_i, A^sum_i
        A_tool, A_sum = torch.zeros_like(r_exec), torch.zeros_like(r_pref)
        kept: list[int] = []
        n_zero_std = 0
        for idx in batch.groups().values():
            A_tool[idx], A_sum[idx] = self._z(r_exec[idx]), self._z(r_pref[idx])
            if bool((A_tool[idx] == 0).all() and (A_sum[idx] == 0).all()):
                n_zero_std += 1
                if cfg.zero_std == "drop":
                    continue
            kept += idx

        # 3. route by token masks: A_t = (M_tool,t A^tool_i + M_sum,t A^sum_i) m_t, where
        #    tokens of other tags join M_tool or M_sum as cfg.other says (or neither)
        tool, summary = set(cfg.tool_tags), set(cfg.summary_tags)
        if cfg.other == "tool":
            tool = {None, *tool}
        elif cfg.other == "summary":
            summary = {None, *summary}
        shares = torch.zeros(3)  # policy tokens routed to tool, summary, nowhere
        batch.advantages = {}
        for i in sorted(kept):
            for k, turn in enumerate(batch.trajectories[i].turns):
                m = turn.mask()
                M_tool, M_sum = self._segment_masks(turn, m, tool, summary, where=(i, k))
                A_tok = M_tool * A_tool[i].to(m.device) + M_sum * A_sum[i].to(m.device)
                batch.advantages[(i, k)] = A_tok * m
                shares += torch.stack(
                    [(M_tool * m).sum(), (M_sum * m).sum(), ((1 - M_tool - M_sum) * m).sum()]
                ).cpu()

        # 4. metrics
        total = max(1.0, float(shares.sum()))
        batch.metrics["slca/r_exec_mean"] = float(r_exec.mean()) if r_exec.numel() else 0.0
        batch.metrics["slca/r_pref_mean"] = float(r_pref.mean()) if r_pref.numel() else 0.0
        batch.metrics["slca/omission_rate"] = sum(o for _, o in prefs) / max(1, len(prefs))
        batch.metrics["slca/tool_token_share"] = float(shares[0]) / total
        batch.metrics["slca/summary_token_share"] = float(shares[1]) / total
        batch.metrics["slca/zero_std_groups"] = float(n_zero_std)

    def _segment_masks(
        self, turn: Turn, m: Tensor, tool: set[str | None], summary: set[str | None], where: Key
    ) -> tuple[Tensor, Tensor]:
        """``M_tool`` and ``M_sum``: which response tokens of ``turn`` route to each segment.

        Args:
            turn: a turn with one segment tag per response token.
            m: its policy-token mask (sets the device).
            tool: the tags routed to the tool segment (``None``: untagged or other tags).
            summary: the tags routed to the summary segment.
            where: ``(i, k)`` of the turn, for the error message.

        Returns:
            Two float tensors like ``m``. With ``other="turn"``, other tokens join the turn's
            own segment: summary when it holds summary tokens and no tool token, else tool.

        Raises:
            ValueError: the turn has not one tag per response token.
        """
        cfg = self.cfg
        tags = turn.segment_tags or []
        if len(tags) != m.numel():
            raise ValueError(
                f"slca: trajectory {where[0]} turn {where[1]} has {len(tags)} segment tags for "
                f"{m.numel()} response tokens"
            )
        known = [t if t in cfg.tool_tags or t in cfg.summary_tags else None for t in tags]
        in_tool = [t in tool for t in known]
        in_sum = [t in summary for t in known]
        if cfg.other == "turn":  # other tokens join their turn's own segment
            to_sum = any(in_sum) and not any(in_tool)
            fill = [t is None for t in known]
            in_tool = [a or (f and not to_sum) for a, f in zip(in_tool, fill, strict=True)]
            in_sum = [a or (f and to_sum) for a, f in zip(in_sum, fill, strict=True)]
        M_tool = torch.tensor(in_tool, device=m.device).float()
        M_sum = torch.tensor(in_sum, device=m.device).float()
        return M_tool, M_sum
