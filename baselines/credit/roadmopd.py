r"""ROADMOPD: routed multi-teacher on-policy distillation (CREDIT.md §8).

[D]: derived, the paper was not found; cross-checked against MOPD (per-domain RL teachers
distilled on the student's own rollouts) and MAD-OPD (teachers weighting each other).

An ``aux_loss`` next to the RL loss of whichever estimator fills the advantages slot
(``grpo+roadmopd``). Teachers ``T_1..T_M`` are checkpoints given with ``--teachers
NAME=DIR,...``; they must share the student's tokenizer.

* Router ``r(x)``: the routed teacher of a turn is ``routes[info["domain"]]``, by default the
  teacher named like the domain. A run whose routes name a teacher ``--teachers`` lacks, or
  whose env has a domain no teacher serves, is refused at start-up
  (:meth:`ROADMOPD.teacher_problems`).
* Routed signal per sampled token (``signal``): ``"sampled"`` (default)
  ``d_t = log π_θ(y_t) − log p_r(y_t)``, the one-sample estimate of the reverse KL; or
  ``"topk"``: ``KL(p_r ‖ π_θ)`` on the routed teacher's top-``k`` ids plus a tail bucket.
* Non-routed teachers as critics: ``a_t = mean_{m≠r} 1[argmax p_m,t = argmax p_r,t]`` (top-1
  agreement, under the turn's decoding mask and temperature), and the token weight
  ``w_t = a_t / mean_seq(a)`` clipped to ``[0, w_max]`` (1 everywhere when the mean is 0, or
  with one teacher): tokens where the experts agree count more.
* ``L_D = λ · mean_t w_t · d_t`` over the policy-mask tokens of the mini-batch.
* Gradient projection: ``g_C`` is the RL loss's gradient (``p.grad`` when ``aux_loss`` runs),
  ``g_D`` the gradient of ``L_D`` (a second backward, ``torch.autograd.grad``). When
  ``⟨g_D, g_C⟩ < 0``: ``g_D ← g_D − η (⟨g_D, g_C⟩ / ‖g_C‖²) g_C`` with
  ``η = clip(−cos(g_D, g_C), 0, 1)`` (``eta="adaptive"``) or a fixed ``eta``. The hook returns
  ``Σ_p ⟨p, g_D'⟩ − (that, detached) + L_D (detached)``: its value is ``L_D`` and its gradient
  exactly ``g_D'``, so the trainer's own ``backward`` applies the projected gradient (no
  state carried to ``grad_hook``).

Choices where §8 leaves them free [D]:

* The gradient of the sampled signal. ``d_t`` is an estimate of ``KL(π_θ ‖ p_r)`` whose
  samples came from ``π_θ``; differentiating it with the samples held fixed gives ``∇ log
  π_θ(y_t)``, which only lowers the sampled tokens whatever the teacher says. The loss
  therefore back-propagates the score-function form ``λ · mean_t w_t · sg(d_t) · log π_θ(y_t)``
  (the on-policy distillation gradient: ``−d_t`` as a per-token advantage) while its value is
  ``L_D``. ``"topk"`` is differentiated directly (the teacher's distribution is given).
* ``λ = 0.1`` (``lam``): §8 gives no weight; 0.1 keeps ``L_D`` (nats per token) below the RL
  surrogate's scale at the start, where the student is the teachers' own warm start and
  ``d_t`` is small; the projection, not λ, is what keeps the two from fighting.
* ``mean_seq``: the mean over the whole rollout's policy-mask tokens (its turns together),
  not per turn, so a short turn is weighed against the rest of its episode.
* ``w_max = 2`` clips the weight of a token in a rollout where the experts rarely agree.
* ``k = 16`` for ``"topk"``; ``weighting="uniform"`` turns the critics off (``w_t = 1``).
* The projection is per mini-batch, over all trainable parameters as one vector. With
  ``‖g_C‖ = 0`` (no advantage in the mini-batch) nothing is projected.

Metrics: ``roadmopd/loss`` (``L_D``), ``roadmopd/signal`` (mean ``d_t``),
``roadmopd/agreement`` (mean ``a_t``), ``roadmopd/weight_max``, ``roadmopd/conflict`` (1 when
``⟨g_D, g_C⟩ < 0``; its mean over the updates is the conflict rate), ``roadmopd/cos``,
``roadmopd/eta`` (the η applied, 0 without conflict), ``roadmopd/routed/<name>`` (each
teacher's share of the tokens).

Recipe (one teacher per Tools domain, distilled into one student across the three; all start
from one warm start, so they share its tokenizer). ``agentgym bench learning --env
agentgym/Tools-Mixed-v1 --variants grpo,roadmopd`` runs it per training seed, teachers
included (the recipe :data:`~agentgym.baselines.config.TOOLS_MIXED`, whose env names the tools
instead of listing their schemas: add ``--env-kwargs '{"schemas": false}'`` to every command
below for a policy of small context). By hand::

    agentgym train --env agentgym/Tools-Mixed-v1 --steps 0 --out runs/mixed-sft
    for d in Ecommerce Accounts Travel; do
      agentgym train --env agentgym/Tools-$d-v1 --init runs/mixed-sft/sft --sft-steps 0 \\
        --credit grpo --out runs/teacher-$d
    done
    agentgym train --env agentgym/Tools-Mixed-v1 --init runs/mixed-sft/sft --sft-steps 0 \\
      --credit grpo+roadmopd --out runs/student \\
      --teachers ecommerce=runs/teacher-Ecommerce,accounts=runs/teacher-Accounts,\\
    travel=runs/teacher-Travel

(the teachers' names are the domains, so the default routes apply; with other names pass
``--credit-settings '{"roadmopd": {"routes": {"ecommerce": "NAME", ...}}}'``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Turn, register
from agentgym.baselines.divergence import kl
from agentgym.baselines.teachers import TokenDist
from agentgym.core.errors import BadInput

SIGNALS = ("sampled", "topk")
WEIGHTINGS = ("agreement", "uniform")
ROUTE, WEIGHT, AGREE = "roadmopd/route", "roadmopd/weight", "roadmopd/agreement"
"""``Turn.extras`` keys: the routed teacher's name, ``w_t`` and ``a_t`` ([L] each)."""


def agreement(routed: Tensor, others: Sequence[Tensor]) -> Tensor:
    """``a_t``: the share of ``others`` (top-1 ids, ``[L]`` each) equal to ``routed``'s.

    Without other teachers there is no critic: 1 everywhere.
    """
    if not others:
        return torch.ones(routed.shape, dtype=torch.float32, device=routed.device)
    votes = [(o.to(routed.device) == routed).float() for o in others]
    return torch.stack(votes).mean(0)


def token_weights(agree: Tensor, mask: Tensor, w_max: float) -> Tensor:
    """``w_t = a_t / mean(a)`` over the masked tokens, clipped to ``[0, w_max]``.

    1 everywhere when that mean is 0 (no agreement at all, or no masked token).
    """
    m = mask.to(agree.device, torch.float32)
    total = float(m.sum())
    mean = float((agree * m).sum()) / total if total > 0 else 0.0
    if mean <= 0:
        return torch.ones_like(agree, dtype=torch.float32)
    return (agree.float() / mean).clamp(0.0, w_max)


def distill_loss(
    d: Tensor, w: Tensor, mask: Tensor, lam: float, student_logp: Tensor | None = None
) -> Tensor:
    """``L_D = λ Σ_t m_t w_t d_t / Σ_t m_t`` (flat ``[T]`` tensors).

    With ``student_logp`` (the sampled signal), the value is ``L_D`` but the gradient is the
    score-function one, ``λ Σ m w sg(d) ∇ log π_θ(y_t) / Σ m`` (module doc); otherwise ``d``
    is differentiated as it is.
    """
    m = mask.to(d.device, torch.float32)
    scale = lam / max(float(m.sum()), 1.0)
    w = w.to(d.device)
    value = scale * (m * w * d).sum()
    if student_logp is None:
        return value
    surrogate = scale * (m * w * d.detach() * student_logp).sum()
    return surrogate - surrogate.detach() + value.detach()


def project(
    g_d: Sequence[Tensor], g_c: Sequence[Tensor], eta: str | float
) -> tuple[list[Tensor], dict[str, float]]:
    """``g_D`` projected away from a conflicting ``g_C`` (both lists of per-parameter grads).

    When ``⟨g_D, g_C⟩ < 0`` and ``g_C ≠ 0``: ``g_D − η ⟨g_D,g_C⟩/‖g_C‖² · g_C``, with
    ``η = clip(−cos, 0, 1)`` for ``"adaptive"`` or the number given; else ``g_D`` unchanged.
    Returns the gradients and ``{"conflict", "cos", "eta"}``.
    """
    dot = sum(float((a.float() * b.float()).sum()) for a, b in zip(g_d, g_c, strict=True))
    nd = sum(float(a.float().pow(2).sum()) for a in g_d)
    nc = sum(float(b.float().pow(2).sum()) for b in g_c)
    cos = dot / math.sqrt(nd * nc) if nd > 0 and nc > 0 else 0.0
    if dot >= 0 or nc == 0:
        return list(g_d), {"conflict": 0.0, "cos": cos, "eta": 0.0}
    e = min(max(-cos, 0.0), 1.0) if eta == "adaptive" else float(eta)
    coef = e * dot / nc
    out = [a - (coef * b.float()).to(a.dtype) for a, b in zip(g_d, g_c, strict=True)]
    return out, {"conflict": 1.0, "cos": cos, "eta": e}


def _domain(turn: Turn) -> str | None:
    """The turn's ``info["domain"]`` (after its step, or the observation's it acted from)."""
    domain = turn.info.get("domain")
    if domain is None:
        domain = (turn.extras.get("observation_info") or {}).get("domain")
    return None if domain is None else str(domain)


@register("roadmopd")
class ROADMOPD(CreditVariant):
    """ROADMOPD (CREDIT.md §8, [D]): distil each domain's routed teacher.

    Tokens are weighted by the other teachers' agreement; the distillation gradient is
    projected off the RL gradient where the two conflict.
    """

    requires_info = frozenset({"domain"})
    requires_teachers = True

    @dataclass(frozen=True)
    class Config:
        """ROADMOPD's settings (module doc: which are derived and why)."""

        routes: Mapping[str, str] = field(default_factory=dict)
        """domain -> teacher name (JSON object); a domain not listed goes to the teacher of
        its own name."""
        signal: str = "sampled"
        """"sampled": d_t = log π_θ(y_t) − log p_r(y_t); "topk": KL(p_r ‖ π_θ) on top-k+tail."""
        k: int = 16
        """support of the "topk" signal."""
        lam: float = 0.1
        """λ, the weight of L_D [D]."""
        w_max: float = 2.0
        """upper clip of the token weight w_t."""
        weighting: str = "agreement"
        """"agreement": w_t from the non-routed teachers' top-1 agreement; "uniform": w_t = 1."""
        eta: str | float = "adaptive"
        """projection strength when the gradients conflict: "adaptive" (clip(−cos, 0, 1)) or
        a number in [0, 1] (0: no projection)."""

        def __post_init__(self) -> None:
            """Refuse settings outside their ranges."""
            if not isinstance(self.routes, Mapping) or not all(
                isinstance(a, str) and isinstance(b, str) for a, b in self.routes.items()
            ):
                raise BadInput("roadmopd routes is a JSON object of domain -> teacher name")
            object.__setattr__(self, "routes", dict(self.routes))
            if self.signal not in SIGNALS or self.weighting not in WEIGHTINGS:
                raise BadInput(
                    f"roadmopd signal is one of {SIGNALS} and weighting one of {WEIGHTINGS}"
                )
            if self.k < 1 or self.lam < 0 or self.w_max <= 0:
                raise BadInput("roadmopd needs k >= 1, lam >= 0 and w_max > 0")
            if self.eta != "adaptive" and (
                isinstance(self.eta, str) or not 0.0 <= float(self.eta) <= 1.0
            ):
                raise BadInput(f"roadmopd eta is 'adaptive' or a number in [0, 1], got {self.eta}")

    def route(self, domain: str) -> str:
        """The teacher routed for ``domain``."""
        return self.cfg.routes.get(domain, domain)

    def teacher_problems(self, names: Sequence[str], domains: Sequence[str]) -> list[str]:
        """Routes naming an absent teacher; env domains no given teacher serves."""
        have = ", ".join(names) or "none"
        out = [
            f"roadmopd routes domain {d!r} to teacher {t!r}, absent from --teachers ({have})"
            for d, t in sorted(self.cfg.routes.items())
            if t not in names
        ]
        for d in domains:
            if self.route(d) not in names and d not in self.cfg.routes:
                out.append(
                    f"roadmopd has no teacher for the env's domain {d!r} (--teachers has "
                    f"{have}): name a teacher {d!r} or route it with the 'routes' setting"
                )
        return out

    # ------------------------------------------------------------------ hooks
    def score(self, batch: Batch, ctx: Context) -> None:
        """Route every turn and weigh its tokens (teacher forwards, no grad)."""
        self.prepare(batch, ctx)

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Any, dict[str, float]] | None:
        """``L_D`` whose gradient is the projected ``g_D'`` (module doc)."""
        every: list[Key] = batch.keys()
        keys = [key for key in every if float(batch.turn(key).mask().sum()) > 0]
        if not keys:
            return None
        self.prepare(batch, ctx)
        teachers = ctx.need_teachers()
        params = [p for p in teachers.policy.parameters() if p.requires_grad]
        loss, metrics = self.loss(batch, keys, ctx)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        g_d = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
        g_c = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
        g_new, stats = project(g_d, g_c, self.cfg.eta)
        applied = sum((p * g.detach()).sum() for p, g in zip(params, g_new, strict=True))
        assert isinstance(applied, Tensor)
        out = applied - applied.detach() + loss.detach().to(applied.device)
        metrics.update({f"roadmopd/{name}": value for name, value in stats.items()})
        return out, metrics

    # ------------------------------------------------------------------ parts
    def prepare(self, batch: Batch, ctx: Context) -> None:
        """Fill ``extras`` ROUTE, AGREE and WEIGHT of every turn not done yet."""
        every: list[Key] = batch.keys()
        todo = [key for key in every if ROUTE not in batch.turn(key).extras]
        if not todo:
            return
        teachers = ctx.need_teachers()
        routes = {key: self._route_of(batch.turn(key), list(teachers.named)) for key in todo}
        top1: dict[tuple[Key, str], Tensor] = {}
        k_routed = self.cfg.k if self.cfg.signal == "topk" else 1
        for name in teachers.named:
            mine = [key for key in todo if routes[key] == name]
            rest = [key for key in todo if routes[key] != name]
            if self.cfg.weighting == "uniform":
                rest = []
            for keys, k in ((mine, k_routed), (rest, 1)):
                if keys:
                    for key, dist in zip(
                        keys, teachers.topk(batch, keys, f"teacher:{name}", k), strict=True
                    ):
                        top1[key, name] = dist.ids[:, 0]
        for key in todo:
            r = routes[key]
            others = [top1[key, m] for m in teachers.named if m != r and (key, m) in top1]
            turn = batch.turn(key)
            turn.extras[ROUTE] = r
            turn.extras[AGREE] = agreement(top1[key, r], others).cpu()
        self._weigh(batch, {key[0] for key in todo})

    def _route_of(self, turn: Turn, names: list[str]) -> str:
        domain = _domain(turn)
        if domain is None:
            raise BadInput("roadmopd routes by info['domain'], which a turn lacks")
        name = self.route(domain)
        if name not in names:
            raise BadInput(
                f"roadmopd has no teacher for domain {domain!r} (routed to {name!r}; "
                f"--teachers has {', '.join(names)})"
            )
        return name

    def _weigh(self, batch: Batch, indices: set[int]) -> None:
        """``w_t`` over each rollout's policy-mask tokens (``mean_seq``: the whole rollout)."""
        for i in sorted(indices):
            turns = batch.trajectories[i].turns
            if not turns:
                continue
            agree = torch.cat([t.extras[AGREE] for t in turns])
            mask = torch.cat([t.mask().cpu() for t in turns])
            w = token_weights(agree, mask, self.cfg.w_max)
            parts = w.split([len(t.response_ids) for t in turns])
            for turn, part in zip(turns, parts, strict=True):
                turn.extras[WEIGHT] = part

    def signal(self, batch: Batch, keys: list[Key], ctx: Context) -> tuple[Tensor, Tensor | None]:
        """Flat ``d_t`` over ``keys`` (with grad), and the student's sampled log-probs.

        The log-probs carry the score-function gradient (None for "topk").
        """
        teachers = ctx.need_teachers()
        by_route: dict[str, list[Key]] = {}
        for key in keys:
            by_route.setdefault(batch.turn(key).extras[ROUTE], []).append(key)
        k = self.cfg.k if self.cfg.signal == "topk" else 1
        routed: dict[Key, TokenDist] = {}
        for name, mine in by_route.items():
            routed.update(zip(mine, teachers.topk(batch, mine, f"teacher:{name}", k), strict=True))
        dists = [routed[key] for key in keys]
        if self.cfg.signal == "topk":
            student = teachers.student(batch, keys, dists)
            d = [
                kl(t.with_tail().to(s.logp.device), s.with_tail())
                for s, t in zip(student, dists, strict=True)
            ]
            return torch.cat(d), None
        student = teachers.student(batch, keys)
        logp = torch.cat([s.sampled for s in student])
        teacher = torch.cat([t.sampled.to(logp.device) for t in dists])
        return logp - teacher, logp

    def loss(self, batch: Batch, keys: list[Key], ctx: Context) -> tuple[Tensor, dict[str, float]]:
        """``L_D`` over ``keys`` (value ``L_D``; gradient as the module doc says) and metrics."""
        d, logp = self.signal(batch, keys, ctx)
        w = torch.cat([batch.turn(key).extras[WEIGHT] for key in keys]).to(d.device)
        mask = torch.cat([batch.turn(key).mask() for key in keys]).to(d.device)
        agree = torch.cat([batch.turn(key).extras[AGREE] for key in keys]).to(d.device)
        loss = distill_loss(d, w, mask, self.cfg.lam, logp)
        n = max(float(mask.sum()), 1.0)
        metrics = {
            "roadmopd/loss": float(loss.detach()),
            "roadmopd/signal": float((mask * d.detach()).sum()) / n,
            "roadmopd/agreement": float((mask * agree).sum()) / n,
            "roadmopd/weight_max": float(w[mask > 0].max()) if n > 0 else 0.0,
        }
        for key in keys:
            name = f"roadmopd/routed/{batch.turn(key).extras[ROUTE]}"
            share = float(batch.turn(key).mask().sum()) / n
            metrics[name] = metrics.get(name, 0.0) + share
        return loss, metrics
