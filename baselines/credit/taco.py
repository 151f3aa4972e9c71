"""TACO: differential answer probes around each tool call, and outcome-gated routing.

CREDIT.md §18, status [P-abs] (arXiv 2606.30251); the probe template and the routing table are
derived.

* DAPR, the differential answer-probe reward. A probe at a state decodes a short answer with
  the policy, greedily, after the state's prompt and the env's answer prefix
  (``env.unwrapped.answer_prefix()``: ``"answer: "`` on the search menu, ``"<answer>"`` on free
  search, ``"<summary>"`` on the tools family), forced as the first tokens of the response;
  the env's own checker scores it (``check_answer``, in [0, 1]; a tag prefix's closing tag and
  what follows are cut first). For each call turn ``j`` (a turn whose action holds a
  ``tool_call`` or ``search_query`` segment), ``before`` is the probe at the state the call
  acted from (turn ``j``'s prompt: the call's view not yet returned) and ``after`` the probe
  at the next state (turn ``j + 1``'s prompt, or a truncated rollout's ``next_prompt``: the
  call's observation in view). ``u_j = sign(Score(after) − Score(before)) ∈ {−1, 0, +1}``
  (useful, redundant, misleading); ``utility = "diff"`` keeps the raw difference. A call
  that ended the episode has no after-state and gets ``u_j = 0``. ``Â^DAPR_j`` is ``u_j``
  z-normalised over the calls of its group (0 when they all agree), on the call's span (its
  ``tool_call``/``search_query`` tokens; the whole response where the env tags none).
* OGAR, outcome-gated advantage routing, parameter-free: the outcome advantage ``A_i`` the
  advantage slot gave rollout ``i`` stays only on the turns responsible for the outcome: the
  answer turns (an ``answer``, ``summary`` or ``conclusion`` segment), and, for ``A_i > 0``,
  the calls with ``u_j > 0``, for ``A_i < 0`` the calls with ``u_j < 0``. Redundant calls and
  every other turn get no outcome credit.
* Token advantage (``shape``, so it composes as ``grpo+taco``):
  ``A_t = λ Σ_j 1[t ∈ call_j] Â^DAPR_j + OGAR(A_i)_t`` on every key the slot filled.

Probes are deduplicated by their tokens (the after-state of call ``j`` is the before-state of
turn ``j + 1``, and rollouts of a group share their first state), batched, and run without
grad; a private env reset to each group's task scores them (:class:`AnswerJudge`, as rubric's).

Choices and why: ``lam = 1.0``, DAPR's unit (a z-score) added as the formula has it;
``probe_tokens = 16`` covers an entity name or a short summary (a longer answer can only
lower a token-F1 score); greedy decoding makes each probe the policy's best answer there, so
``u_j`` has no sampling noise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.credit._judge import AnswerJudge
from agentgym.baselines.credit._kernels import relative
from agentgym.baselines.segments import tag_batch
from agentgym.core.errors import BadInput

__all__ = ["Taco", "call_utility", "ogar_keep"]

CALL_TAGS = ("tool_call", "search_query")
ANSWER_TAGS = ("answer", "summary", "conclusion")
UTILITIES = ("sign", "diff")
UTILITY = "taco/u"
"""``Turn.extras`` key of a call turn's utility ``u_j``."""
SCORES = "taco/scores"
"""``Turn.extras`` key of a call turn's ``(Score(before), Score(after))``."""

Probe = tuple[int, ...]


def call_utility(before: float, after: float, how: str = "sign") -> float:
    """``u_j``: the sign of ``after − before`` (``"sign"``) or the difference (``"diff"``)."""
    d = after - before
    return float(np.sign(d)) if how == "sign" else float(d)


def ogar_keep(kind: str, outcome_advantage: float, utility: float) -> bool:
    """Whether OGAR keeps the outcome advantage on a turn of ``kind`` ("answer", "call", "other").

    The answer always; a call when its utility has the outcome advantage's sign (non-zero);
    nothing else.
    """
    if kind == "answer":
        return True
    if kind == "call":
        return utility != 0.0 and np.sign(utility) == np.sign(outcome_advantage)
    return False


def _kind(tags: list[str] | None) -> str:
    """A turn's kind from its token tags: "answer" before "call", else "other"."""
    present = set(tags or ())
    if present & set(ANSWER_TAGS):
        return "answer"
    if present & set(CALL_TAGS):
        return "call"
    return "other"


def _cut(text: str, prefix: str) -> str:
    """The answer inside a tag prefix (``<answer>x</answer>...`` → ``x``); else as is."""
    if prefix.startswith("<") and prefix.endswith(">"):
        close = "</" + prefix[1:]
        return text.split(close, 1)[0]
    return text


@register("taco")
class Taco(CreditVariant):
    """TACO (CREDIT.md §18): DAPR call utilities on call spans, OGAR-routed outcome credit."""

    requires_info = frozenset({"segments"})
    requires_abilities = frozenset({"check_answer", "answer_prefix"})

    @dataclass(frozen=True)
    class Config:
        """TACO's settings: the probe, the utility and the weight of the DAPR term."""

        lam: float = 1.0
        """λ, the weight of the normalised DAPR term."""
        probe_tokens: int = 16
        """the most tokens a probe decodes after the answer prefix."""
        utility: str = "sign"
        """"sign": u ∈ {−1, 0, +1}; "diff": the score difference itself."""
        probe_rows: int = 64
        """probes per generate call."""
        eps: float = 1e-6
        """added to the std of the group's utilities."""

        def __post_init__(self) -> None:
            """Refuse an unknown utility and sizes below 1."""
            if self.utility not in UTILITIES:
                raise BadInput(f"taco utility must be one of {UTILITIES}, got {self.utility!r}")
            if self.probe_tokens < 1 or self.probe_rows < 1:
                raise BadInput("taco probe_tokens and probe_rows must be >= 1")

    def __init__(self, config: Any = None):
        """Read the settings; the answer checker's env is made on first use."""
        super().__init__(config)
        self._judge: AnswerJudge | None = None

    # ------------------------------------------------------------------ probes
    def score(self, batch: Batch, ctx: Context) -> None:
        """Probe the states around every call: ``u_j`` into the call turns' extras."""
        policy = ctx.need_policy()
        self._judge = judge = AnswerJudge.for_pool(self._judge, ctx.need_envs())
        start = time.perf_counter()
        tag_batch(batch.trajectories, policy, "taco")
        jobs: list[tuple[Trajectory, int, Probe, Probe | None]] = []
        for traj in batch.trajectories:
            if traj.auxiliary:
                continue
            for j, turn in enumerate(traj.turns):
                if _kind(turn.segment_tags) != "call" or turn.extras.get("shared"):
                    continue
                before = tuple(turn.prompt_ids.tolist())
                after: Probe | None = None
                if j + 1 < len(traj.turns):
                    after = tuple(traj.turns[j + 1].prompt_ids.tolist())
                elif "next_prompt" in traj.extras:
                    after = tuple(int(x) for x in traj.extras["next_prompt"])
                jobs.append((traj, j, before, after))
        by_group: dict[tuple[str, int | None], list[Probe]] = {}
        for traj, _, before, after in jobs:
            wanted = by_group.setdefault((traj.task_id, traj.seed), [])
            wanted += [before] + ([after] if after is not None else [])
        scores: dict[tuple[str, int | None, Probe], float] = {}
        for (task, seed), probes in by_group.items():
            env = judge.at(task, seed)
            prefix = str(env.answer_prefix())
            answers = self._decode(policy, list(dict.fromkeys(probes)), prefix)
            for probe, text in answers.items():
                scores[(task, seed, probe)] = float(env.check_answer(_cut(text, prefix)))
        useful = redundant = misleading = 0
        for traj, j, before, after in jobs:
            s0 = scores[(traj.task_id, traj.seed, before)]
            s1 = s0 if after is None else scores[(traj.task_id, traj.seed, after)]
            u = call_utility(s0, s1, self.cfg.utility)
            traj.turns[j].extras[UTILITY] = u
            traj.turns[j].extras[SCORES] = (s0, s1)
            useful += u > 0
            redundant += u == 0
            misleading += u < 0
        m = batch.metrics
        m["taco/calls"] = float(len(jobs))
        m["taco/useful"] = float(useful)
        m["taco/redundant"] = float(redundant)
        m["taco/misleading"] = float(misleading)
        m["taco/probes"] = float(len(scores))
        m["taco/seconds"] = m.get("taco/seconds", 0.0) + time.perf_counter() - start

    def _decode(self, policy: Any, probes: list[Probe], prefix: str) -> dict[Probe, str]:
        """The greedy answer the policy gives after each probe's prompt and ``prefix``."""
        head = list(policy.tokenizer.encode(prefix))
        out: dict[Probe, str] = {}
        step = self.cfg.probe_rows
        for first in range(0, len(probes), step):
            rows = probes[first : first + step]
            with torch.no_grad():
                gens = policy.generate(
                    [[*p, *head] for p in rows],
                    max_new_tokens=self.cfg.probe_tokens,
                    greedy=True,
                )
            out.update({p: g.text for p, g in zip(rows, gens, strict=True)})
        return out

    # ------------------------------------------------------------------ advantages
    def dapr(self, batch: Batch) -> dict[Key, float]:
        """``Â^DAPR_j`` of every call turn: ``u_j`` z-scored over the calls of its group."""
        out: dict[Key, float] = {}
        for idx in batch.groups().values():
            calls = [
                (i, k)
                for i in idx
                for k, t in enumerate(batch.trajectories[i].turns)
                if UTILITY in t.extras and not t.extras.get("shared")
            ]
            if not calls:
                continue
            u = torch.tensor([batch.turn(c).extras[UTILITY] for c in calls], dtype=torch.float64)
            z = relative(u, u, self.cfg.eps) if len(calls) > 1 else u * 0.0
            out.update({c: float(v) for c, v in zip(calls, z.tolist(), strict=True)})
        return out

    def shape(self, batch: Batch, ctx: Context) -> None:
        """``A_t = λ · Â^DAPR on call spans + OGAR(A_i)`` on every key the slot filled."""
        if batch.advantages is None:
            return
        if not any(UTILITY in t.extras for tr in batch.trajectories for t in tr.turns):
            self.score(batch, ctx)
        dapr = self.dapr(batch)
        routed = dropped = 0
        for key, adv in batch.advantages.items():
            turn = batch.turn(key)
            m = turn.mask().to(adv.device)
            a_i = float((adv * m).sum() / m.sum().clamp(min=1.0))
            kind = _kind(turn.segment_tags)
            u = float(turn.extras.get(UTILITY, 0.0))
            keep = ogar_keep(kind, a_i, u)
            routed += keep
            dropped += not keep
            new = adv if keep else adv * 0.0
            if key in dapr:
                span = self._span(turn, m)
                new = new + self.cfg.lam * dapr[key] * span
            batch.advantages[key] = new
        batch.metrics["taco/routed_turns"] = float(routed)
        batch.metrics["taco/unrouted_turns"] = float(dropped)

    @staticmethod
    def _span(turn: Any, mask: torch.Tensor) -> torch.Tensor:
        """The call's tokens (its call tags) within the policy mask; all of it untagged."""
        tags = turn.segment_tags or []
        span = torch.tensor([float(t in CALL_TAGS) for t in tags], device=mask.device)
        if span.numel() != mask.numel() or not bool(span.any()):
            return mask
        return span * mask
