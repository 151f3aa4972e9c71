"""Multi-hop question answering over a seeded encyclopedia with a structured menu of actions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gymnasium.spaces import Discrete

from agentgym.core.env import Transition
from agentgym.core.errors import ResetNeeded
from agentgym.core.info import Segment, ToolCall
from agentgym.core.menu import Menu
from agentgym.core.spaces import String
from agentgym.envs.search.answers import exact_match, token_f1
from agentgym.envs.search.base import SearchEnvBase
from agentgym.envs.search.world_types import Sentence, entity_node, value_node

MAX_MENU = 256

# An operation behind a menu item: (kind, *arguments).
Op = tuple[Any, ...]


@dataclass
class _Episode:
    """Mutable state of one episode; JSON-able through ``asdict``."""

    searched: list[str] = field(default_factory=list)
    results: list[int] = field(default_factory=list)
    expanded: list[int] = field(default_factory=list)
    current: int | None = None
    read: list[str] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)
    answer: str | None = None


class SearchMenuEnv(SearchEnvBase):
    """Answer a multi-hop question by navigating an entity–sentence graph through a menu.

    ## Description
    The world is a seeded synthetic encyclopedia: people, films, cities, companies,
    universities and awards, one page each, whose sentences state relations and attributes.
    Distractor pages share names and attribute values, so reading the right page matters.
    A question (bridge, comparison or compositional; 2–4 hops) names one or two anchor pages.

    ## Observation
    Text (:class:`~agentgym.core.spaces.String`): the question, the sentences read so far,
    the current page, the result of the last action and the numbered menu.

    ## Action
    ``Discrete(max_menu)`` with ``info["action_mask"]``; the item's text (or its number as a
    string) is accepted too. Items: ``search: <mention>`` (BM25 over page titles),
    ``expand: <title>`` (open a page found by search), ``read: <title> #<k>`` (read a sentence
    of the current page), ``follow: <relation> from <title> to <title>`` (open a page linked
    from a sentence read), ``answer: <text>`` (an entity or value met in a sentence read;
    ends the episode).

    ## Rewards
    1.0 on a correct answer (exact match against the gold answer or an alias after SQuAD
    normalisation), else 0.0. ``info["reward_components"]`` holds ``exact_match``, ``f1``,
    ``success`` and ``invalid_action``.

    ## Privileged
    With ``privileged=True``, reset and every step add: ``privileged_context`` ("Answer:
    <answer>", "Evidence:", then "- <page title>: <sentence>" per gold sentence),
    ``gold_answer``, ``gold_evidence`` (sentence ids), ``gold_facts`` (the gold sentences as
    "<page title>: <sentence>") and ``evidence_hint`` ("Still missing: evidence about
    <title>; …." naming the pages of the gold sentences not yet read, or "All evidence
    found.").

    ## Termination
    Terminates on an answer; truncates after ``max_turns`` turns (20 by default).

    ## Registered ids
    ``agentgym/Search-Menu-Small-v0`` (50 pages), ``agentgym/Search-Menu-Medium-v0``
    (5,000 pages).

    ## Version history
    v0: first version.
    """

    corpus = "titles"
    default_max_turns = 20

    def __init__(self, preset: str = "small", **kwargs: Any):
        """Create an env over a preset's world; keyword arguments as :class:`SearchEnvBase`."""
        super().__init__(preset, **kwargs)
        self.max_menu = MAX_MENU
        self.observation_space = String()
        self.action_space = Discrete(self.max_menu)
        self._ep = _Episode()
        self._menu = Menu((), self.max_menu)
        self._ops: list[Op] = []

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._begin(task_id)
        self._ep = _Episode()
        self._rebuild_menu()
        obs = self._observe("The episode begins. Search for a page named in the question.")
        return obs, self._info(valid=True, reward=0.0, produced=[], consumed=[])

    def _apply(self, action: Any) -> Transition:
        index, error = self._menu.resolve(action)
        if index is None:
            obs = self._observe(f"Invalid action: {error}")
            info = self._info(valid=False, reward=0.0, produced=[], consumed=[])
            return Transition(obs, 0.0, False, info)
        op, text = self._ops[index], self._menu.items[index]
        handler = getattr(self, f"_do_{op[0]}")
        result, produced, consumed = handler(*op[1:])
        reward = 0.0
        if op[0] == "answer":
            reward = exact_match(op[1], self._golds())
        self._rebuild_menu()
        obs = self._observe(result)
        info = self._info(valid=True, reward=reward, produced=produced, consumed=consumed)
        info["segments"] = _segments(op[0], text, _as_text(action))
        info["tool_calls"] = _tool_calls(op)
        return Transition(obs, reward, op[0] == "answer", info)

    # ------------------------------------------------------------------ operations
    def _do_search(self, mention: str) -> tuple[str, list[str], list[str]]:
        ep, world = self._ep, self._data.world
        ep.searched.append(mention)
        hits = self.search(mention)
        for eid in hits:
            if eid not in ep.results:
                ep.results.append(eid)
        if not hits:
            return f"Search {mention!r} found no page.", [], []
        titles = "; ".join(world.entities[e].title for e in hits)
        return f"Search {mention!r} found: {titles}.", [entity_node(e) for e in hits], []

    def _open(self, eid: int) -> list[str]:
        ep = self._ep
        ep.current = eid
        if eid not in ep.expanded:
            ep.expanded.append(eid)
        sids = self.visible(eid)
        ep.listed.extend(s for s in sids if s not in ep.listed)
        return sids

    def _do_expand(self, eid: int) -> tuple[str, list[str], list[str]]:
        produced = self._open(eid)
        title = self._data.world.entities[eid].title
        return f"Opened {title!r} ({len(produced)} sentences).", produced, [entity_node(eid)]

    def _do_follow(self, sid: str, eid: int) -> tuple[str, list[str], list[str]]:
        produced = self._open(eid)
        title = self._data.world.entities[eid].title
        msg = f"Followed the link to {title!r} ({len(produced)} sentences)."
        return msg, produced, [sid, entity_node(eid)]

    def _do_read(self, sid: str) -> tuple[str, list[str], list[str]]:
        self._ep.read.append(sid)
        s = self._data.world.sentences[sid]
        produced = [entity_node(m) for m in s.mentions] + [value_node(v) for v in s.values]
        return f"{self._sentence_label(s)}: {s.text}", produced, [sid]

    def _do_answer(self, text: str, node: str) -> tuple[str, list[str], list[str]]:
        self._ep.answer = text
        verdict = "correct" if exact_match(text, self._golds()) else "wrong"
        return f"You answered {text!r}: {verdict}. The episode is over.", [], [node]

    # ------------------------------------------------------------------ menu
    def _rebuild_menu(self) -> None:
        ops: list[tuple[str, Op]] = []
        if self._ep.answer is None:
            ops = self._search_ops() + self._read_ops() + self._follow_ops()
            ops += self._expand_ops() + self._answer_ops()
        ops = ops[: self.max_menu]
        self._menu = Menu([t for t, _ in ops], self.max_menu)
        self._ops = [op for _, op in ops]

    def _search_ops(self) -> list[tuple[str, Op]]:
        q, ep = self.question, self._ep
        return [(f"search: {m}", ("search", m)) for m in q.mentions if m not in ep.searched]

    def _read_ops(self) -> list[tuple[str, Op]]:
        ep, world = self._ep, self._data.world
        if ep.current is None:
            return []
        ops = []
        for sid in self.visible(ep.current):
            if sid in ep.read:
                continue
            s = world.sentences[sid]
            hint = ", ".join(world.entities[m].title for m in s.mentions if m != s.page)
            text = f"read: {self._sentence_label(s)}" + (f" (mentions {hint})" if hint else "")
            ops.append((text, ("read", sid)))
        return ops

    def _follow_ops(self) -> list[tuple[str, Op]]:
        ep, world = self._ep, self._data.world
        ops, seen = [], set()
        for sid in ep.read:
            s = world.sentences[sid]
            source = world.entities[s.page].title
            for m in s.mentions:
                if m == ep.current or m == s.page:
                    continue
                fact = s.fact
                rel = fact.relation if fact and fact.obj == entity_node(m) else "mentions"
                text = f"follow: {rel} from {source} to {world.entities[m].title}"
                if text not in seen:
                    seen.add(text)
                    ops.append((text, ("follow", sid, m)))
        return ops

    def _expand_ops(self) -> list[tuple[str, Op]]:
        ep, world = self._ep, self._data.world
        eids = dict.fromkeys(ep.results + ep.expanded)
        return [
            (f"expand: {world.entities[e].title}", ("expand", e)) for e in eids if e != ep.current
        ]

    def _answer_ops(self) -> list[tuple[str, Op]]:
        world = self._data.world
        candidates: dict[str, str] = {}
        for sid in self._ep.read:
            s = world.sentences[sid]
            for eid in (s.page, *s.mentions):
                candidates.setdefault(world.entities[eid].name, entity_node(eid))
            for v in s.values:
                candidates.setdefault(v, value_node(v))
        return [(f"answer: {t}", ("answer", t, node)) for t, node in candidates.items()]

    # ------------------------------------------------------------------ observation and info
    def _sentence_label(self, s: Sentence) -> str:
        k = s.id.rsplit(":", 1)[1]
        return f"{self._data.world.entities[s.page].title} #{k}"

    def _observe(self, result: str) -> str:
        world, ep = self._data.world, self._ep
        lines = [f"Question: {self.question.text}"]
        if ep.read:
            lines.append("Notes:")
            for sid in ep.read:
                s = world.sentences[sid]
                lines.append(f"- {self._sentence_label(s)}: {s.text}")
        page = "none" if ep.current is None else world.entities[ep.current].title
        lines.append(f"Current page: {page}")
        lines.append(f"Last result: {result}")
        if self._menu.items:
            lines.append(f"Turn {self.turn + 1} of {self.max_turns}. Choose one action:")
            lines.append(self._menu.render())
        return "\n".join(lines)

    def _state_key(self) -> str:
        ep = self._ep
        canon = [sorted(ep.searched), sorted(ep.expanded), ep.current, sorted(ep.read), ep.answer]
        return self._digest(canon)

    def _info(
        self, *, valid: bool, reward: float, produced: list[str], consumed: list[str]
    ) -> dict[str, Any]:
        ep = self._ep
        f1 = token_f1(ep.answer, self._golds()) if ep.answer is not None else 0.0
        gold = self.question.evidence
        return {
            "action_valid": valid,
            "won": reward == 1.0,
            "admissible_actions": list(self._menu.items),
            "action_mask": self._menu.mask(),
            "state_key": self._state_key(),
            "segments": [],
            "tool_calls": [],
            "reward_components": {
                "exact_match": reward,
                "f1": f1,
                "success": reward,
                "invalid_action": 0.0 if valid else 1.0,
            },
            "progress": sum(s in ep.read for s in gold) / len(gold),
            "provenance": {
                "visited": [entity_node(e) for e in ep.expanded] + list(ep.listed),
                "cited": list(ep.read),
                "produced": produced,
                "consumed": consumed,
            },
        }

    def _restored(self) -> None:
        self._rebuild_menu()

    def _evidence_seen(self) -> list[str]:
        return self._ep.read

    # ------------------------------------------------------------------ gold and oracle
    def oracle_action(self) -> str:
        """The next menu item on the gold reasoning chain (the item's text)."""
        if self.done:
            raise ResetNeeded("the episode is over: call reset() first")
        q, ep, world = self.question, self._ep, self._data.world
        for sid in q.evidence:
            if sid in ep.read:
                continue
            page = world.sentences[sid].page
            if ep.current == page:
                return self._item(lambda op, sid=sid: op == ("read", sid))
            for kind in ("follow", "expand"):
                found = self._find(lambda op, k=kind, p=page: op[0] == k and op[-1] == p)
                if found is not None:
                    return found
            mention = q.mentions[q.anchors.index(page)]
            return self._item(lambda op, m=mention: op == ("search", m))
        golds = {a for a in self._golds()}
        return self._item(lambda op: op[0] == "answer" and op[1] in golds)

    def _find(self, pred: Any) -> str | None:
        for text, op in zip(self._menu.items, self._ops, strict=False):
            if pred(op):
                return text
        return None

    def _item(self, pred: Any) -> str:
        found = self._find(pred)
        if found is None:
            raise RuntimeError(f"oracle found no menu item on the gold path for {self.task_id}")
        return found


def _as_text(action: Any) -> str | None:
    return action if isinstance(action, str) else None


def _segments(kind: str, item: str, raw: str | None) -> list[Segment]:
    """Tag the argument of a search or answer, or the whole item as a tool call.

    Offsets index the action as the agent wrote it when it wrote the item's text, else the
    item's text (an index was given).
    """
    base, text = 0, item
    if raw is not None and len(raw.strip()) == len(item):
        base, text = len(raw) - len(raw.lstrip()), raw.strip()
    if kind in ("search", "answer"):
        start = base + text.index(":") + 2
        tag = "search_query" if kind == "search" else "answer"
        return [{"tag": tag, "start": start, "end": base + len(text)}]
    return [{"tag": "tool_call", "start": base, "end": base + len(text)}]


def _tool_calls(op: Op) -> list[ToolCall]:
    kind = op[0]
    if kind == "search":
        return [{"name": "search", "arguments": {"query": op[1]}}]
    if kind == "expand":
        return [{"name": "expand", "arguments": {"entity": entity_node(op[1])}}]
    if kind == "read":
        return [{"name": "read", "arguments": {"sentence": op[1]}}]
    if kind == "follow":
        return [{"name": "follow", "arguments": {"sentence": op[1], "entity": entity_node(op[2])}}]
    return []
