"""Rubric-to-Code reward attribution: rubric items judged per rollout, each credited to its span.

CREDIT.md §12. [D]: derived, the paper was not found; cross-checks: Rubrics-to-Tokens (RTT:
item scores normalised within the group, credited to the tokens each item concerns), EGCA
(execution-grounded span credit).

* Judge (``score`` hook): a programmatic rubric from the env's own info on a privileged env
  (the env knows the gold; no LLM). Each item ``j`` has a score ``s_ij`` in [0, 1] per
  rollout ``i``, a weight ``w_j`` (its points) and a span: the turns it concerns and, within
  a turn, the tokens of a segment (``info["segments"]`` mapped onto tokens with the policy's
  tokenizer, :func:`~agentgym.baselines.segments.segment_token_tags`) or the whole turn. An
  item the rollout never attempted has an empty span there: its score (0) still enters the
  group's statistics, but no token of that rollout is credited with it.
* Token advantage (``shape`` hook, after the advantage slot, as trace):
  ``A_t = A_seq,t + λ Σ_j w_j 1[t ∈ span_j] Â_j · m_t``, ``Â_ij = (s_ij − mean_g s_j) /
  (std_g s_j + ε)`` (unbiased std, as GRPO; an item constant across its group gives 0), for
  every key the advantage slot filled: a sample it dropped stays dropped.
* Layered reward (``reward="layered"``, ``transform`` hook, before the advantage slot):
  ``R = 1[format]·(w_syn·1[syntax] + 1[syntax]·(w_run·1[runs] + 1[runs]·w_fun·pass_rate))``
  becomes each trajectory's ``outcome`` (the env's is kept in ``extras["rubric/outcome"]``).
  "outcome" (the default) leaves the outcome alone.

Rubrics (:data:`RUBRICS`), chosen by the gold key the privileged info exposes, not by env id:

* tool calls (``gold_tool_calls``; the ``Tools-*`` envs):
  ``hierr/<layer>`` for the five HierR layers (format, tool_name_f1, param_keys,
  param_values, parallel; the last step's ``reward_components``), weight 1/5 each (five parts
  of one score), spanning the ``tool_call`` tokens of every turn (format: every turn whole,
  since an unparsable action has no segment); per gold call ``n``, ``call<n>/tool`` (a call
  of its name is paired with it) and ``call<n>/args`` (the paired call's arguments that equal
  the gold's over the union of both keys, HierR's value score), weight 1/2 each, spanning
  the paired call's block (calls are paired as HierR pairs them: a maximum-weight matching
  of same-name pairs, weight = key Jaccard + value share; a call is every decoded
  ``info["tool_calls"]`` entry, valid or not); ``summary``: ``check_answer`` of the final
  summary (the share of the answer facts it quotes), weight 1, spanning the summary block.
* search (``gold_evidence``; the ``Search-*`` envs): per gold sentence ``s``,
  ``evidence/<s>`` (``s`` was read: ``provenance["cited"]``) and ``page/<s>`` (the page
  holding ``s``, an entity on the gold reasoning path, was opened or shown by a search:
  ``provenance["visited"]``; the bridge entities), each spanning the turn that first did it;
  ``answer``: ``check_answer`` of the final answer (exact match, else token F1), spanning the
  answer turn. Weight 1 each; search turns are whole (a menu item's first tokens choose it).

Layered mapping (tool calls only; other envs are refused): format = every action parses (an
invalid action has no segment; a call block whose JSON fails is a ``tool_call`` segment
without a ``tool_calls`` entry); syntax = no call names an unknown tool or breaks its schema;
runs = no call failed at run time; both read from the structured errors the next
observation shows (``Call 1 error: {"error": <code>, …}``; schema codes as
``envs/tools/schema.py`` lists them, any other code a run-time failure). A failing last
action of a truncated rollout shows no error anywhere: it is charged to syntax, the lowest
layer it could be. pass_rate = the mean of the last step's ``reward_components[pass_rate]``
(success and HierR: success alone is all or nothing, HierR alone pays a right call with a
wrong summary as much as a served request). Caveat: an action of no call is vacuously
syntax-valid, so the layered reward ranks "no call" above "a call that fails validation".

Choices [D] and why:

* ``lam = 0.5``: GRPO's term is a z-score (unit scale within a group); each item's ``Â`` is
  one too, and the weights keep the points covering one token at one or two units (a search
  turn: one item; a call block: the five HierR fifths, then its call's two halves), so at
  0.5 the rubric refines the outcome's credit and flips its sign on a span only when the
  items there agree, and strongly, against the outcome (as trace's λ).
* ``w_syn = w_run = 0.1``, ``w_fun = 0.8``: R stays in [0, 1], the env's reward scale, and
  a served request (pass_rate 1) is worth four times what valid, running calls alone earn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.credit._judge import AnswerJudge
from agentgym.baselines.credit._kernels import zscore
from agentgym.baselines.segments import segment_token_tags
from agentgym.core.calls import pair_calls, pair_scores
from agentgym.core.errors import BadInput

REWARDS = ("outcome", "layered")
ITEMS = "rubric/items"
"""``Trajectory.extras`` key of the judged :class:`Item` list."""
OUTCOME = "rubric/outcome"
"""``Trajectory.extras`` key of the env's outcome, kept when ``reward="layered"`` replaces it."""
HIERR_LAYERS = ("format", "tool_name_f1", "param_keys", "param_values", "parallel")
SYNTAX_ERRORS = frozenset(
    {"unknown_tool", "missing_parameter", "unexpected_parameter", "wrong_type", "not_in_enum"}
    | {"bad_value"}
)
"""Call error codes of a call that breaks its tool's schema (or names no tool)."""
FORMAT_ERRORS = frozenset({"malformed_call"})
"""Call error codes of a block whose JSON does not parse."""
_CALL_ERROR = re.compile(r"^(?:Call|Future) \S+(?: \([^()\n]*\))? error: (\{.*\})\s*$", re.M)


@dataclass
class Item:
    """One rubric item as judged on one rollout.

    Attributes:
        name: unique within a task's rubric (``"call0/args"``, ``"evidence/s:7:4"``).
        kind: what it checks, shared by the items of one check (``"call/args"``).
        score: ``s_ij`` in [0, 1].
        weight: ``w_j``, the item's points.
        span: turn index -> float [L] 0/1 mask of that turn's response tokens the item
            concerns; empty where the rollout never attempted it.
    """

    name: str
    kind: str
    score: float
    weight: float = 1.0
    span: dict[int, Tensor] = field(default_factory=dict)


# ---------------------------------------------------------------------- kernels
def item_z(scores: Sequence[float], eps: float) -> list[float]:
    """``Â_j`` of one item over one group: the z-score of its scores (zeros when constant)."""
    return zscore(torch.tensor(list(scores), dtype=torch.float64), eps).tolist()


def rubric_bonus(
    items: Sequence[Sequence[Item]], groups: Mapping[str, Sequence[int]], eps: float
) -> tuple[dict[Key, Tensor], list[bool]]:
    """``Σ_j w_j 1[t ∈ span_j] Â_j`` per turn, and per (group, item) whether it was constant.

    Args:
        items: per trajectory, its judged items (a name missing from a rollout scores 0 there
            and spans nothing).
        groups: group id -> trajectory indices (:meth:`Batch.groups`).
        eps: ε added to each item's group std.

    Returns:
        ``(i, k)`` -> [L] bonus for every turn some item credits (others are absent), and one
        flag per (group, item name): all its scores in the group were equal.
    """
    bonus: dict[Key, Tensor] = {}
    constant: list[bool] = []
    for idx in groups.values():
        by_name = [{it.name: it for it in items[i]} for i in idx]
        for name in dict.fromkeys(n for judged in by_name for n in judged):
            members = [judged.get(name) for judged in by_name]
            z = item_z([it.score if it else 0.0 for it in members], eps)
            constant.append(all(v == 0.0 for v in z))
            for i, it, z_i in zip(idx, members, z, strict=True):
                if it is None or z_i == 0.0:
                    continue
                for k, mask in it.span.items():
                    term = it.weight * z_i * mask
                    bonus[(i, k)] = bonus[(i, k)] + term if (i, k) in bonus else term
    return bonus, constant


@dataclass(frozen=True)
class Layers:
    """The layers of one rollout's layered reward (CREDIT.md §12)."""

    format: bool
    syntax: bool
    runs: bool
    pass_rate: float


def layered_reward(layers: Layers, w_syn: float, w_run: float, w_fun: float) -> float:
    """``1[format]·(w_syn·1[syntax] + 1[syntax]·(w_run·1[runs] + 1[runs]·w_fun·pass_rate))``."""
    f, s, r = float(layers.format), float(layers.syntax), float(layers.runs)
    return f * (w_syn * s + s * (w_run * r + r * w_fun * layers.pass_rate))


# ---------------------------------------------------------------------- what the info shows
def call_error_codes(observation: Any) -> list[str]:
    """The ``"error"`` codes of the structured call errors an observation shows."""
    if not isinstance(observation, str):
        return []
    codes = []
    for m in _CALL_ERROR.finditer(observation):
        try:
            codes.append(str(json.loads(m.group(1)).get("error", "")))
        except (ValueError, AttributeError):
            continue
    return codes


def _segments(info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(info.get("segments") or [])


def parsed(info: Mapping[str, Any]) -> bool:
    """Whether a turn's action parsed: valid, or an action block whose every call decoded."""
    if info.get("action_valid", True):
        return True
    tags = [str(s["tag"]) for s in _segments(info)]
    blocks = tags.count("tool_call")
    return bool(blocks or "summary" in tags) and blocks == len(info.get("tool_calls") or [])


def tool_layers(traj: Trajectory, pass_keys: Sequence[str]) -> Layers:
    """The layers of a tool-call rollout, read from its turns (see the module doc)."""
    codes = [c for t in traj.turns[1:] for c in call_error_codes(t.extras.get("observation"))]
    fmt = all(parsed(t.info) for t in traj.turns) and not FORMAT_ERRORS & set(codes)
    syntax = not SYNTAX_ERRORS & set(codes)
    runs = not set(codes) - SYNTAX_ERRORS - FORMAT_ERRORS
    last = traj.turns[-1].info if traj.turns else {}
    if last.get("tool_calls") and not last.get("action_valid", True):
        syntax = False  # its errors were never shown: the lowest layer it could be
    parts = last.get("reward_components") or {}
    rate = sum(float(parts.get(k, 0.0)) for k in pass_keys) / max(1, len(pass_keys))
    return Layers(fmt, syntax, runs, rate)


class Spans:
    """Token masks of one rollout's turns: whole turns and the env's segments.

    A segment's tokens are those :func:`segment_token_tags` gives it with the policy's
    tokenizer; without a tokenizer, the tokens whose ``Turn.segment_tags`` equal its tag.
    """

    def __init__(self, traj: Trajectory, tokenizer: Any):
        """Masks of ``traj``'s turns, computed on first use."""
        self.traj, self.tokenizer = traj, tokenizer
        self._owner: dict[int, list[int]] = {}

    def whole(self, k: int) -> Tensor:
        """Every response token of turn ``k``."""
        return torch.ones(self.traj.turns[k].response_ids.shape)

    def segment(self, k: int, j: int) -> Tensor:
        """The tokens of ``info["segments"][j]`` of turn ``k``."""
        turn = self.traj.turns[k]
        segs = _segments(turn.info)
        if self.tokenizer is None:
            if turn.segment_tags is None:
                raise BadInput(
                    "rubric maps segments to tokens: set Turn.segment_tags, or give a policy "
                    "with a tokenizer (decode, eos_id)"
                )
            hit = [t == segs[j]["tag"] for t in turn.segment_tags]
        else:
            hit = [o == j for o in self._owners(k)]
        return torch.tensor(hit, dtype=torch.float32)

    def tagged(self, k: int, tags: Sequence[str]) -> Tensor:
        """The tokens of turn ``k``'s segments tagged one of ``tags``."""
        mask = torch.zeros(self.traj.turns[k].response_ids.shape)
        for j, seg in enumerate(_segments(self.traj.turns[k].info)):
            if seg["tag"] in tags:
                mask = torch.maximum(mask, self.segment(k, j))
        return mask

    def _owners(self, k: int) -> list[int]:
        """Per token of turn ``k``, the index of the segment it belongs to (-1: none)."""
        if k not in self._owner:
            turn = self.traj.turns[k]
            indexed = [{**s, "tag": str(j)} for j, s in enumerate(_segments(turn.info))]
            eos = getattr(self.tokenizer, "eos_id", None)
            tags = segment_token_tags(self.tokenizer, turn.response_ids, indexed, eos)
            self._owner[k] = [int(t) if t else -1 for t in tags]
        return self._owner[k]


def action_text(traj: Trajectory, k: int, tokenizer: Any) -> str:
    """The text turn ``k`` sent to the env (decoded from its tokens if not recorded)."""
    turn = traj.turns[k]
    if "action" in turn.extras:
        return str(turn.extras["action"])
    if tokenizer is None:
        return ""
    ids = [int(t) for t in turn.response_ids.tolist()]
    eos = getattr(tokenizer, "eos_id", None)
    return str(tokenizer.decode(ids[: ids.index(eos)] if eos in ids else ids))


def final_answer(traj: Trajectory, tags: Sequence[str]) -> tuple[int, list[int]] | None:
    """The last turn and its segments tagged ``tags``, if the rollout ended on such an action."""
    if not traj.turns or not traj.terminated:
        return None
    k = len(traj.turns) - 1
    found = [j for j, s in enumerate(_segments(traj.turns[k].info)) if s["tag"] in tags]
    return (k, found) if found else None


Judge = Callable[[Trajectory, str], float]
"""``check_answer`` of a rollout's task on a text."""


# ---------------------------------------------------------------------- rubric: tool calls
def _attempts(traj: Trajectory, spans: Spans) -> list[tuple[dict[str, Any], int, Tensor]]:
    """Every decoded call of the rollout: (call, turn, mask of its block).

    A turn whose blocks do not match its decoded calls one to one (a block failed to decode)
    gives each call the mask of all its call blocks.
    """
    out = []
    for k, turn in enumerate(traj.turns):
        calls = list(turn.info.get("tool_calls") or [])
        blocks = [j for j, s in enumerate(_segments(turn.info)) if s["tag"] == "tool_call"]
        for c, call in enumerate(calls):
            if len(blocks) == len(calls):
                out.append((call, k, spans.segment(k, blocks[c])))
            else:
                out.append((call, k, spans.tagged(k, ("tool_call",))))
    return out


def tool_items(traj: Trajectory, spans: Spans, judge: Judge) -> list[Item]:
    """The tool-call rubric of one rollout (see the module doc)."""
    turns = traj.turns
    parts = (turns[-1].info.get("reward_components") or {}) if turns else {}
    call_turns = {
        k: spans.tagged(k, ("tool_call",))
        for k, t in enumerate(turns)
        if any(s["tag"] == "tool_call" for s in _segments(t.info))
    }
    items = []
    for layer in HIERR_LAYERS:
        span = {k: spans.whole(k) for k in range(len(turns))} if layer == "format" else call_turns
        score = float(parts.get(layer, 0.0))
        items.append(Item(f"hierr/{layer}", f"hierr/{layer}", score, 0.2, dict(span)))
    made = _attempts(traj, spans)
    gold_calls = list(turns[0].info.get("gold_tool_calls") or []) if turns else []
    paired = pair_calls([call for call, _, _ in made], gold_calls)
    for n, gold in enumerate(gold_calls):
        tool = Item(f"call{n}/tool", "call/tool", 0.0, 0.5)
        args = Item(f"call{n}/args", "call/args", 0.0, 0.5)
        if n in paired:
            call, k, mask = made[paired[n]]
            tool.score, tool.span = 1.0, {k: mask}
            args.score = pair_scores(call.get("arguments") or {}, gold["arguments"])[1]
            args.span = {k: mask}
        items += [tool, args]
    items.append(_answer_item(traj, spans, judge, ("summary",), "summary", whole=False))
    return items


def _answer_item(
    traj: Trajectory, spans: Spans, judge: Judge, tags: Sequence[str], name: str, *, whole: bool
) -> Item:
    """``check_answer`` of the rollout's final answer, on its segment or its whole turn."""
    found = final_answer(traj, tags)
    if found is None:
        return Item(name, name, 0.0)
    k, segs = found
    text = action_text(traj, k, spans.tokenizer)
    info_segs = _segments(traj.turns[k].info)
    said = " ".join(text[int(info_segs[j]["start"]) : int(info_segs[j]["end"])] for j in segs)
    mask = spans.whole(k) if whole else spans.tagged(k, tags)
    return Item(name, name, float(judge(traj, said)), 1.0, {k: mask})


# ---------------------------------------------------------------------- rubric: search
def _first(traj: Trajectory, node: str, where: str) -> int | None:
    """The first turn after which ``node`` is in ``provenance[where]`` (cumulative)."""
    for k, turn in enumerate(traj.turns):
        if node in ((turn.info.get("provenance") or {}).get(where) or ()):
            return k
    return None


def search_items(traj: Trajectory, spans: Spans, judge: Judge) -> list[Item]:
    """The search rubric of one rollout (see the module doc)."""
    gold = list(traj.turns[0].info.get("gold_evidence") or []) if traj.turns else []
    items = []
    for kind, where in (("evidence", "cited"), ("page", "visited")):
        for s in gold:
            k = _first(traj, str(s), where)
            span = {} if k is None else {k: spans.whole(k)}
            items.append(Item(f"{kind}/{s}", kind, float(k is not None), 1.0, span))
    items.append(_answer_item(traj, spans, judge, ("answer",), "answer", whole=True))
    return items


@dataclass(frozen=True)
class Rubric:
    """A family's rubric: the privileged info key it reads the gold from, and its judge."""

    name: str
    gold_key: str
    items: Callable[[Trajectory, Spans, Judge], list[Item]]
    layered: bool
    """whether its info shows the layers of the layered reward."""


RUBRICS: tuple[Rubric, ...] = (
    Rubric("tool calls", "gold_tool_calls", tool_items, layered=True),
    Rubric("search", "gold_evidence", search_items, layered=False),
)
"""The rubrics, tried in order: the first whose ``gold_key`` the info holds is used."""


def rubric_of(info: Mapping[str, Any]) -> Rubric | None:
    """The rubric for a rollout whose (privileged) info is ``info``, or None."""
    return next((r for r in RUBRICS if r.gold_key in info), None)


@register("rubric")
class RubricCredit(CreditVariant):
    """Rubric-to-Code (CREDIT.md §12): group-normalised rubric items added on their spans.

    A programmatic judge scores rubric items from the privileged info (tool calls against the
    gold calls, evidence read, the answer); each item's group z-score is added, times λ, to
    the tokens it concerns. Optionally the layered reward replaces the outcome.
    """

    requires_info = frozenset({"segments", "tool_calls"})
    requires_abilities = frozenset({"privileged", "check_answer"})
    aggregation: ClassVar[str | None] = None

    @dataclass(frozen=True)
    class Config:
        """Rubric-to-Code's settings: λ, ε and the layered reward."""

        lam: float = 0.5
        """λ, the weight of the rubric term (see the module doc)."""
        eps: float = 1e-6
        """ε added to each item's group std."""
        reward: str = "outcome"
        """"outcome": the env's outcome is left as it is; "layered": the layered reward
        replaces it (tool-call envs only)."""
        w_syn: float = 0.1
        """layered: the weight of the syntax layer."""
        w_run: float = 0.1
        """layered: the weight of the runs layer."""
        w_fun: float = 0.8
        """layered: the weight of the pass rate."""
        pass_rate: tuple[str, ...] = ("success", "hierr")
        """layered: the last step's reward_components averaged into the pass rate."""

        def __post_init__(self):
            """Refuse an unknown reward, negative weights or an empty pass rate."""
            if self.reward not in REWARDS:
                raise BadInput(f"rubric reward must be one of {REWARDS}, got {self.reward!r}")
            if min(self.lam, self.eps, self.w_syn, self.w_run, self.w_fun) < 0:
                raise BadInput("rubric lam, eps and the layer weights must be >= 0")
            keys = (self.pass_rate,) if isinstance(self.pass_rate, str) else self.pass_rate
            object.__setattr__(self, "pass_rate", tuple(str(k) for k in keys))
            if not self.pass_rate:
                raise BadInput("rubric pass_rate needs at least one reward_components key")

    def __init__(self, config: Any = None):
        """Read the settings; the answer judge's env is made on first use."""
        super().__init__(config)
        self._judge: AnswerJudge | None = None

    def info_problems(self, env_id: str, info: Mapping[str, Any]) -> list[str]:
        """No rubric for the env's info, or a layered reward it cannot give."""
        rubric = rubric_of(info)
        if rubric is None:
            keys = " or ".join(r.gold_key for r in RUBRICS)
            return [f"a rubric's gold in its privileged info ({keys}), which {env_id} lacks"]
        if self.cfg.reward == "layered" and not rubric.layered:
            return [
                "tool-call layers (parse, schema and run errors) for reward='layered', which "
                f"{env_id} (a {rubric.name} env) does not show: use reward='outcome'"
            ]
        return []

    # ------------------------------------------------------------------ layered reward
    def transform(self, batch: Batch, ctx: Context) -> None:
        """With ``reward="layered"``: each trajectory's outcome becomes its layered reward."""
        if self.cfg.reward != "layered" or not batch.trajectories:
            return
        cfg = self.cfg
        layers = []
        for traj in batch.trajectories:
            rubric = rubric_of(traj.turns[0].info) if traj.turns else None
            if rubric is None or not rubric.layered:
                raise BadInput(
                    "rubric reward='layered' needs tool-call rollouts (gold_tool_calls in "
                    f"their privileged info); {traj.task_id} has none"
                )
            traj.extras.setdefault(OUTCOME, traj.outcome)
            lay = tool_layers(traj, cfg.pass_rate)
            traj.outcome = layered_reward(lay, cfg.w_syn, cfg.w_run, cfg.w_fun)
            layers.append(lay)
        n = len(layers)
        m = batch.metrics
        m["rubric/layered_mean"] = sum(t.outcome for t in batch.trajectories) / n
        m["rubric/outcome_mean"] = sum(float(t.extras[OUTCOME]) for t in batch.trajectories) / n
        for name in ("format", "syntax", "runs"):
            m[f"rubric/{name}_rate"] = sum(getattr(x, name) for x in layers) / n
        m["rubric/pass_rate"] = sum(x.pass_rate for x in layers) / n

    # ------------------------------------------------------------------ judge
    def _answer_judge(self, ctx: Context) -> Judge:
        self._judge = AnswerJudge.for_pool(self._judge, ctx.need_envs())
        return self._judge

    def score(self, batch: Batch, ctx: Context) -> None:
        """Judge every rollout not judged yet: its items into ``extras["rubric/items"]``."""
        tokenizer = getattr(ctx.policy, "tokenizer", None)

        def judge(traj: Trajectory, text: str) -> float:
            return self._answer_judge(ctx)(traj, text)

        before = self._judge.calls if self._judge is not None else 0
        for traj in batch.trajectories:
            if ITEMS in traj.extras:
                continue
            rubric = rubric_of(traj.turns[0].info) if traj.turns else None
            if rubric is None:
                raise BadInput(
                    f"rubric: {traj.task_id} has no rubric gold in its info (gold_tool_calls or "
                    "gold_evidence): play the rollouts on a privileged env"
                )
            device = traj.turns[0].response_ids.device
            items = rubric.items(traj, Spans(traj, tokenizer), judge)
            for it in items:
                it.span = {k: v.to(device) for k, v in it.span.items()}
            traj.extras[ITEMS] = items
        kinds: dict[str, list[float]] = {}
        for traj in batch.trajectories:
            for it in traj.extras[ITEMS]:
                kinds.setdefault(it.kind, []).append(it.score)
        after = self._judge.calls if self._judge is not None else 0
        batch.metrics["rubric/judge_calls"] = float(max(0, after - before))
        n = max(1, len(batch.trajectories))
        batch.metrics["rubric/items"] = sum(len(t.extras[ITEMS]) for t in batch.trajectories) / n
        for kind, scores in kinds.items():
            batch.metrics[f"rubric/{kind}"] = sum(scores) / len(scores)

    # ------------------------------------------------------------------ advantages
    def shape(self, batch: Batch, ctx: Context) -> None:
        """``A += λ Σ_j w_j 1[t ∈ span_j] Â_j · m`` on every turn the advantage slot filled."""
        if any(ITEMS not in t.extras for t in batch.trajectories):
            self.score(batch, ctx)
        items = [t.extras[ITEMS] for t in batch.trajectories]
        bonus, constant = rubric_bonus(items, batch.groups(), self.cfg.eps)
        total = tokens = 0.0
        for key, adv in (batch.advantages or {}).items():
            m = batch.turn(key).mask().to(adv.device)
            tokens += float(m.sum())
            if key in bonus:
                term = self.cfg.lam * bonus[key].to(adv.device) * m
                batch.advantages[key] = adv + term  # type: ignore[index]
                total += float(term.abs().sum())
        attributed = [bool(it.span) for judged in items for it in judged]
        batch.metrics["rubric/constant_items"] = sum(constant) / max(1, len(constant))
        batch.metrics["rubric/attributed"] = sum(attributed) / max(1, len(attributed))
        batch.metrics["rubric/term_abs_mean"] = total / max(1.0, tokens)
