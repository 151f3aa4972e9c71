"""ISA-Distill: information-state-aware on-policy distillation for search agents (CREDIT.md §4).

[D]: derived from the paper digest; the paper itself was not found.

Per turn ``t`` (the state the turn acted from):

* **Recoverability** ``k_t ∈ [0, 1]`` from the frozen initial policy ``π₀`` (``ctx.ref``):
  the probe prompt is the turn's prompt rebuilt from its observations with every occurrence
  of the gold answer (``info["gold_answer"]``) replaced by ``mask_text`` ("value-masked";
  the question line is kept, see ``keep_prefix``), the answer prompt appended to the last
  observation; ``NLL_t`` is the mean token NLL of the gold answer forced after it, and
  ``k_t = σ(a − b·NLL_t)``.
* **Calibration** of ``(a, b)``: on the first step and then every ``calibrate_every`` steps,
  ``π₀`` samples ``samples`` answers at up to ``calibrate_probes`` of the step's probes; a
  probe's success rate is the share of samples whose first line matches the gold answer
  (SQuAD normalisation; aliases are not known here). ``(a, b)`` are refitted to those rates
  by Newton's method on the weighted logistic likelihood, pulled toward the previous
  ``(a, b)`` by ``ridge`` (finite when every rate is 0). ``k_t`` of a step uses the fit
  made before it: the first step uses the default ``(a0, b0) = (2, 1)`` (``k = 0.5`` at 2
  nats/token, 0.88 at 0, under 0.05 past 5).
* **Two teacher views**, both the current policy under the privileged view (no grad):
  the *fact-use* view opens the prompt with the gold supporting facts (``info["gold_facts"]``;
  where the env gives none, the state's ``privileged_context``, else the
  ``gold_evidence`` ids: ``isa/fact_fallback`` counts those turns); the *evidence-seeking*
  view opens it with the evidence hint of the state acted from (the previous turn's
  ``info["evidence_hint"]``, or the reset's in ``extras["observation_info"]``; where absent,
  built here: the gold facts whose sentence the observation does not show yet, named by
  their page title, else by their text with the answer masked; ``isa/hint_fallback``).
* **Key spans**: only tokens of the segments tagged ``search_query``, ``conclusion`` and
  ``answer`` (``info["segments"]`` mapped to tokens by
  :func:`~agentgym.baselines.segments.tag_batch`), within the policy mask.
* **Loss** ``λ (1/|K|) Σ_{t∈K} [k_t KL(p_fact,t ‖ π_θ,t) + (1 − k_t) KL(p_evid,t ‖ π_θ,t)]``
  on each view's top-``k`` support plus a tail bucket, added to the RL loss. One student
  forward serves both views (their supports side by side).

Search family only: the env must give ``gold_answer`` and ``segments`` and have
``check_answer`` and ``search`` (the search family's retrieval).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.credit._recoverability import (
    answer_matches,
    fit_logistic,
    recoverability,
    value_mask,
)
from agentgym.baselines.divergence import kl
from agentgym.baselines.prompt import PRIVILEGED_KEY, History, PromptFormat
from agentgym.baselines.segments import tag_batch
from agentgym.baselines.teachers import TokenDist
from agentgym.core.errors import BadInput


def isa_loss(
    fact: Tensor,
    evid: Tensor,
    student_fact: Tensor,
    student_evid: Tensor,
    k: Tensor,
    key: Tensor,
    coef: float,
) -> Tensor:
    """``coef · Σ_t key_t [k_t KL(fact_t ‖ s_t) + (1 − k_t) KL(evid_t ‖ s_t)] / Σ_t key_t``.

    ``fact``, ``evid`` (teachers, detached here) and the student's tables on their supports
    are ``[T, k + 1]`` log-probs; ``k`` and ``key`` (0/1) are ``[T]``. No key token: 0.
    """
    per = k * kl(fact.detach(), student_fact) + (1 - k) * kl(evid.detach(), student_evid)
    count = key.sum()
    if float(count) == 0:
        return (per * 0).sum()
    return coef * (per * key).sum() / count


def _gold(traj: Trajectory, k: int) -> str | None:
    for turn in [traj.turns[k], *traj.turns]:
        if "gold_answer" in turn.info:
            return str(turn.info["gold_answer"])
    return None


def _facts(traj: Trajectory, k: int) -> tuple[list[str], bool]:
    """The gold supporting facts of the task, and whether a fallback gave them."""
    info = traj.turns[k].info
    if info.get("gold_facts"):
        return [str(f) for f in info["gold_facts"]], False
    text = traj.turns[k].extras.get(PRIVILEGED_KEY)
    if text:
        return [ln.strip().lstrip("- ") for ln in str(text).split("\n") if ln.strip()], True
    return [str(e) for e in info.get("gold_evidence", [])], True


def _env_hint(traj: Trajectory, k: int) -> str | None:
    """The env's evidence hint of the state turn ``k`` acted from, or None."""
    before = traj.turns[k - 1].info if k > 0 else traj.turns[0].extras.get("observation_info")
    hint = (before or {}).get("evidence_hint")
    return None if not hint else str(hint)


@register("isa")
class ISA(CreditVariant):
    """ISA-Distill (CREDIT.md §4, [D]): recoverability-weighted fact-use / evidence-seeking OPD.

    The module docstring gives the formula and the choices made.
    """

    requires_info = frozenset({"gold_answer", "segments"})
    requires_abilities = frozenset({"privileged", "check_answer", "search"})

    @dataclass(frozen=True)
    class Config:
        """ISA-Distill's settings: key spans, the teachers' support, the probe and its fit."""

        coef: float = 0.1
        """λ: the weight of the key-span distillation loss."""
        k: int = 16
        """each teacher view's top-k ids kept as its support (plus one tail bucket)."""
        key_tags: tuple[str, ...] = ("search_query", "conclusion", "answer")
        """segment tags whose tokens get the loss."""
        answer_prompt: str = "\nanswer: "
        """appended to the probe's last observation; the gold answer is forced after it."""
        mask_text: str = "[masked]"
        """what replaces each occurrence of the gold answer in the probe's observations."""
        keep_prefix: str = "Question:"
        """observation lines starting with it are not masked ("": mask every line)."""
        samples: int = 8
        """answers sampled from π₀ per calibration probe (the paper: 32)."""
        calibrate_every: int = 10
        """refit (a, b) every that many steps, the first step included (0: never)."""
        calibrate_probes: int = 32
        """most probes sampled per calibration (evenly spread over the step's turns)."""
        answer_tokens: int = 16
        """most tokens of a sampled answer."""
        a0: float = 2.0
        """a of k = σ(a − b·NLL) before the first fit."""
        b0: float = 1.0
        """b of k = σ(a − b·NLL) before the first fit."""
        ridge: float = 1.0
        """pull of each fit toward the previous (a, b)."""
        newton_steps: int = 25
        """Newton steps per fit."""

        def __post_init__(self):
            """Refuse settings outside their ranges; one tag string becomes a tuple."""
            if isinstance(self.key_tags, str):
                object.__setattr__(self, "key_tags", (self.key_tags,))
            object.__setattr__(self, "key_tags", tuple(str(t) for t in self.key_tags))
            for name in ("k", "samples", "calibrate_probes", "answer_tokens"):
                if getattr(self, name) < 1:
                    raise BadInput(f"isa {name} must be >= 1, got {getattr(self, name)}")
            if self.coef < 0 or self.ridge < 0 or self.calibrate_every < 0:
                raise BadInput("isa coef, ridge and calibrate_every must be >= 0")

    def __init__(self, config: Any = None):
        """Settings, and the calibration ``(a, b)`` that starts at ``(a0, b0)``."""
        super().__init__(config)
        self.a, self.b = self.cfg.a0, self.cfg.b0
        self.last_fit: int | None = None

    @property
    def needs_reference(self) -> bool:
        """The probe reads the frozen initial policy."""
        return True

    # ------------------------------------------------------------------ probe
    def probe_prompt(self, ref: Any, traj: Trajectory, k: int, gold: str) -> list[int]:
        """Turn ``k``'s prompt with the answer masked out and the answer prompt appended."""
        cfg, turns = self.cfg, traj.turns
        obs = [
            value_mask(str(t.extras["observation"]), gold, cfg.mask_text, cfg.keep_prefix)
            for t in turns[: k + 1]
        ]
        obs[-1] += cfg.answer_prompt
        fmt = dataclasses.replace(traj.prompt or PromptFormat(), privileged=False)
        responses = [t.response_ids for t in turns[:k]]
        return History(ref, fmt, obs, responses).prompt()

    def _probes(self, ref: Any, batch: Batch) -> list[tuple[Key, list[int], str]]:
        out = []
        every = batch.keys()
        for i, k in every:
            traj = batch.trajectories[i]
            gold = _gold(traj, k)
            if gold is not None and "observation" in traj.turns[k].extras:
                out.append(((i, k), self.probe_prompt(ref, traj, k, gold), gold))
        return out

    def _nll(self, ref: Any, probes: list[tuple[Key, list[int], str]]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(probes), 32):
            chunk = probes[start : start + 32]
            prompts = [torch.tensor(p, dtype=torch.long) for _, p, _ in chunk]
            golds = [torch.tensor(ref.tokenizer.encode(g), dtype=torch.long) for _, _, g in chunk]
            logps = ref.logprobs(prompts, golds)
            out += [float(-lp.mean()) if lp.numel() else 0.0 for lp in logps]
        return out

    def _calibrate(self, ref: Any, probes: list, nll: list[float]) -> float:
        """Refit ``(a, b)`` on answers sampled at up to ``calibrate_probes`` probes."""
        cfg = self.cfg
        n, most = len(probes), min(len(probes), cfg.calibrate_probes)
        picked = sorted({round(j * (n - 1) / max(1, most - 1)) for j in range(most)})
        prompts = [probes[j][1] for j in picked for _ in range(cfg.samples)]
        outs = ref.generate(prompts, max_new_tokens=cfg.answer_tokens, temperature=1.0)
        rates = []
        for m, j in enumerate(picked):
            texts = [o.text for o in outs[m * cfg.samples : (m + 1) * cfg.samples]]
            rates.append(sum(answer_matches(t, probes[j][2]) for t in texts) / cfg.samples)
        self.a, self.b = fit_logistic(
            [nll[j] for j in picked],
            rates,
            [float(cfg.samples)] * len(picked),
            start=(self.a, self.b),
            ridge=cfg.ridge,
            steps=cfg.newton_steps,
        )
        return sum(rates) / len(rates) if rates else 0.0

    # ------------------------------------------------------------------ hooks
    def transform(self, batch: Batch, ctx: Context) -> None:
        """Tag response tokens from ``info["segments"]`` where untagged."""
        tag_batch(batch.trajectories, ctx.policy, "isa")

    def score(self, batch: Batch, ctx: Context) -> None:
        """``NLL_t`` and ``k_t`` of every turn (``extras["isa/nll"]``, ``["isa/k"]``)."""
        cfg = self.cfg
        ref = ctx.ref
        if ref is None:
            raise ValueError("isa needs the frozen initial policy (ctx.ref)")
        probes = self._probes(ref, batch)
        nll = self._nll(ref, probes)
        ks = recoverability(torch.tensor(nll, dtype=torch.float64), self.a, self.b).tolist()
        for (key, _, _), x, kt in zip(probes, nll, ks, strict=True):
            batch.turn(key).extras["isa/nll"] = x
            batch.turn(key).extras["isa/k"] = float(kt)
        due = cfg.calibrate_every > 0 and (
            self.last_fit is None or ctx.step - self.last_fit >= cfg.calibrate_every
        )
        m = batch.metrics
        if due and probes:
            m["isa/calibration_success"] = self._calibrate(ref, probes, nll)
            self.last_fit = ctx.step
        m["isa/a"], m["isa/b"] = self.a, self.b
        m["isa/nll_mean"] = sum(nll) / len(nll) if nll else 0.0
        m["isa/k_mean"] = sum(ks) / len(ks) if ks else 0.0

    def key_mask(self, key: Key, batch: Batch) -> Tensor:
        """``[L]`` 1 on the turn's key-span policy tokens."""
        turn = batch.turn(key)
        tags = turn.segment_tags or [""] * len(turn.response_ids)
        keep = torch.tensor([t in self.cfg.key_tags for t in tags], dtype=torch.float32)
        return keep.to(turn.mask().device) * turn.mask()

    def fact_context(self, traj: Trajectory, k: int) -> str:
        """The fact-use view's text: the gold supporting facts."""
        facts, _ = _facts(traj, k)
        return "Supporting facts:\n" + "\n".join(f"- {f}" for f in facts)

    def evidence_context(self, traj: Trajectory, k: int) -> str:
        """The evidence-seeking view's text: the evidence hint of the state acted from."""
        given = _env_hint(traj, k)
        return given if given is not None else self.built_hint(traj, k)

    def built_hint(self, traj: Trajectory, k: int) -> str:
        """The hint built here: the gold facts the observation does not show yet."""
        facts, fallback = _facts(traj, k)
        seen = str(traj.turns[k].extras.get("observation", ""))
        gold = _gold(traj, k) or ""
        missing = []
        for fact in facts:
            title, sep, sentence = fact.partition(": ")
            body = (sentence if sep and not fallback else fact).strip().rstrip(".")
            if body and body not in seen:
                name = title if sep and not fallback else value_mask(fact, gold, self.cfg.mask_text)
                missing.append(name)
        if not missing:
            return "All evidence found."
        return f"Still missing: evidence about {'; '.join(dict.fromkeys(missing))}."

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Tensor, dict[str, float]] | None:
        """The recoverability-weighted two-view KL on key-span tokens."""
        cfg = self.cfg
        every = batch.keys()
        masks = {key: self.key_mask(key, batch) for key in every}
        keys = [key for key, m in masks.items() if float(m.sum()) > 0]
        if not keys:
            batch.metrics["isa/key_tokens"] = 0.0
            return None
        teachers = ctx.need_teachers()
        fact = teachers.topk(
            batch, keys, "privileged", cfg.k, context=self.fact_context, tag="isa_fact"
        )
        evid = teachers.topk(
            batch, keys, "privileged", cfg.k, context=self.evidence_context, tag="isa_evid"
        )
        both = [
            TokenDist(torch.cat([f.ids, e.ids], -1), torch.cat([f.logp, e.logp], -1), f.sampled)
            for f, e in zip(fact, evid, strict=True)
        ]
        student = teachers.student(batch, keys, both)
        tables: list[list[Tensor]] = [[], [], [], [], [], []]
        for key, f, e, s in zip(keys, fact, evid, student, strict=True):
            width = f.ids.shape[1]
            s_f = TokenDist(f.ids, s.logp[:, :width], s.sampled).with_tail()
            s_e = TokenDist(e.ids, s.logp[:, width:], s.sampled).with_tail()
            k_t = float(batch.turn(key).extras.get("isa/k", 0.5))  # no probe: even weights
            m = masks[key].to(s_f.device)
            for slot, x in enumerate((f.with_tail(), e.with_tail(), s_f, s_e, m * 0 + k_t, m)):
                tables[slot].append(x.to(s_f.device))
        f_t, e_t, sf_t, se_t, k_all, key_all = (torch.cat(x) for x in tables)
        loss = isa_loss(f_t, e_t, sf_t, se_t, k_all, key_all, cfg.coef)
        total = float(sum(float(batch.turn(key).mask().sum()) for key in every))
        n_key = float(key_all.sum())
        return loss, {
            "isa/loss": float(loss.detach()),
            "isa/key_tokens": n_key,
            "isa/key_token_share": n_key / max(1.0, total),
            "isa/fact_fallback": float(sum(_facts(batch.trajectories[i], k)[1] for i, k in keys)),
            "isa/hint_fallback": float(
                sum(_env_hint(batch.trajectories[i], k) is None for i, k in keys)
            ),
        }
