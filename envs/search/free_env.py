"""Multi-hop question answering with free-form search (the Search-R1 action format)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgym.core.env import Transition
from agentgym.core.errors import ResetNeeded
from agentgym.core.spaces import String
from agentgym.envs.search.answers import exact_match, normalize_cached, token_f1
from agentgym.envs.search.base import SearchEnvBase
from agentgym.envs.search.parsing import ParsedAction, parse_action
from agentgym.envs.search.world_types import entity_node, value_node

INSTRUCTIONS = (
    "Think inside <think>...</think>, then either search the encyclopedia with "
    "<search>query</search> or give the final answer with <answer>answer</answer>."
)


@dataclass
class _Episode:
    """Mutable state of one episode; JSON-able through ``asdict``."""

    queries: list[str] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)  # retrieved, first-seen order
    seen: list[str] = field(default_factory=list)  # sentence ids shown
    cited: list[str] = field(default_factory=list)
    answer: str | None = None


class SearchFreeEnv(SearchEnvBase):
    """Answer a multi-hop question by writing search queries and a final answer.

    ## Description
    The worlds and questions of the menu search envs (or an official dataset), with free-form
    text actions as in Search-R1: each search returns the ``search_k`` best pages of the
    retriever (exact BM25 by default, or dense), shown as ``<information>`` passages.

    ## Observation
    Text: the question, the passages of the last search (or why the last action was
    invalid) and the instructions.

    ## Action
    Text (:class:`~agentgym.core.spaces.String`): optional ``<think>…</think>`` blocks, then
    exactly one ``<search>query</search>`` or ``<answer>answer</answer>``. ``info["segments"]``
    tags the think, search_query and answer spans.

    ## Rewards
    1.0 for an answer that matches the gold answer or an alias (SQuAD normalisation), else 0.
    ``info["reward_components"]``: exact_match, f1, success, format, invalid_action.

    ## Provenance
    ``visited``: page and sentence nodes shown; ``produced``: nodes the last search showed;
    ``consumed``: nodes the last action named (entity names, values); ``cited``: shown
    sentences that produced a consumed node or that the agent quoted.

    ## Privileged
    With ``privileged=True``, reset and every step add: ``privileged_context`` ("Answer:
    <answer>", "Evidence:", then "- <page title>: <sentence>" per gold sentence),
    ``gold_answer``, ``gold_evidence`` (sentence ids), ``gold_facts`` (the gold sentences as
    "<page title>: <sentence>") and ``evidence_hint`` ("Still missing: evidence about
    <title>; …." naming the pages of the gold sentences not yet shown by a search, or "All evidence
    found.").

    ## Termination
    Terminates on an answer; truncates after ``max_turns`` turns (10 by default).

    ## Registered ids
    ``agentgym/Search-Free-{Small,Medium,Large}-v0``; official HotpotQA and 2WikiMultiHopQA
    through ``agentgym/Search-Free-{HotpotQA,2Wiki}-Official-v0`` with ``path``.

    ## Version history
    v0: first version.
    """

    corpus = "pages"
    default_max_turns = 10

    def __init__(self, preset: str = "small", **kwargs: Any):
        """Create the env; keyword arguments as :class:`SearchEnvBase`."""
        kwargs.setdefault("search_k", 3)
        super().__init__(preset, **kwargs)
        self.observation_space = String()
        self.action_space = String()
        self._ep = _Episode()

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._begin(task_id)
        self._ep = _Episode()
        obs = self._observe("Search the encyclopedia to answer the question.")
        return obs, self._info(valid=True, reward=0.0, produced=[], consumed=[], parsed=None)

    def _apply(self, action: Any) -> Transition:
        if not isinstance(action, str):
            parsed = ParsedAction(error=f"an action is text, got {type(action).__name__}")
        else:
            parsed = parse_action(action)
        if parsed.kind is None:
            obs = self._observe(f"Invalid action: {parsed.error}. {INSTRUCTIONS}")
            info = self._info(valid=False, reward=0.0, produced=[], consumed=[], parsed=parsed)
            return Transition(obs, 0.0, False, info)
        consumed = self._consume(" ".join([*parsed.thoughts, parsed.argument]))
        if parsed.kind == "search":
            result, produced = self._do_search(parsed.argument)
            reward = 0.0
        else:
            self._ep.answer = parsed.argument
            reward = exact_match(parsed.argument, self._golds())
            verdict = "correct" if reward else "wrong"
            result, produced = f"You answered {parsed.argument!r}: {verdict}.", []
        obs = self._observe(result)
        info = self._info(
            valid=True, reward=reward, produced=produced, consumed=consumed, parsed=parsed
        )
        return Transition(obs, reward, parsed.kind == "answer", info)

    def _do_search(self, query: str) -> tuple[str, list[str]]:
        ep, world = self._ep, self._data.world
        ep.queries.append(query)
        hits = self.search(query)
        if not hits:
            return "<information>\nNo page matches the query.\n</information>", []
        produced: list[str] = []
        lines = ["<information>"]
        for rank, eid in enumerate(hits, 1):
            sids = self.visible(eid)
            if eid not in ep.pages:
                ep.pages.append(eid)
            new = [s for s in sids if s not in ep.seen]
            ep.seen.extend(new)
            produced += [entity_node(eid), *new]
            body = " ".join(world.sentences[s].text for s in sids)
            lines.append(f"Doc {rank} (Title: {world.entities[eid].title}) {body}")
        lines.append("</information>")
        return "\n".join(lines), produced

    def _consume(self, text: str) -> list[str]:
        """Nodes the agent's text names, citing the shown sentences behind them or quoted."""
        world, ep = self._data.world, self._ep
        said = f" {normalize_cached(text)} "
        consumed: dict[str, None] = {}
        for sid in ep.seen:
            s = world.sentences[sid]
            nodes = [entity_node(m) for m in s.mentions if m != s.page]
            nodes += [value_node(v) for v in s.values]
            named = [n for n in nodes if self._named(n, said)]
            consumed.update(dict.fromkeys(named))
            quoted = f" {normalize_cached(s.text)} " in said
            if (named or quoted) and sid not in ep.cited:
                ep.cited.append(sid)
        for eid in ep.pages:
            if self._named(entity_node(eid), said):
                consumed[entity_node(eid)] = None
        return list(consumed)

    def _named(self, node: str, said: str) -> bool:
        if node.startswith("v:"):
            names = [node[2:]]
        else:
            entity = self._data.world.entities[int(node[2:])]
            names = [entity.name, entity.title]
        return any(f" {n} " in said for n in map(normalize_cached, names) if n)

    # ------------------------------------------------------------------ observation and info
    def _observe(self, result: str) -> str:
        lines = [f"Question: {self.question.text}", result]
        if self._ep.answer is None:
            lines.append(f"Turn {self.turn + 1} of {self.max_turns}. {INSTRUCTIONS}")
        return "\n".join(lines)

    def _state_key(self) -> str:
        ep = self._ep
        return self._digest([sorted(ep.pages), sorted(ep.cited), ep.answer])

    def _info(
        self,
        *,
        valid: bool,
        reward: float,
        produced: list[str],
        consumed: list[str],
        parsed: ParsedAction | None,
    ) -> dict[str, Any]:
        ep = self._ep
        gold = self.question.evidence
        f1 = token_f1(ep.answer, self._golds()) if ep.answer is not None else 0.0
        calls = []
        if parsed is not None and parsed.kind == "search":
            calls = [{"name": "search", "arguments": {"query": parsed.argument}}]
        return {
            "action_valid": valid,
            "won": reward == 1.0,
            "state_key": self._state_key(),
            "segments": list(parsed.segments) if parsed and valid else [],
            "tool_calls": calls,
            "reward_components": {
                "exact_match": reward,
                "f1": f1,
                "success": reward,
                "format": 1.0 if valid else 0.0,
                "invalid_action": 0.0 if valid else 1.0,
            },
            "progress": sum(s in ep.seen for s in gold) / len(gold) if gold else 0.0,
            "provenance": {
                "visited": [entity_node(e) for e in ep.pages] + list(ep.seen),
                "cited": list(ep.cited),
                "produced": produced,
                "consumed": consumed,
            },
        }

    def answer_prefix(self) -> str:
        """An answer is ``<answer>...</answer>``; :meth:`check_answer` scores its inside."""
        return "<answer>"

    def _evidence_seen(self) -> list[str]:
        return self._ep.seen

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """Search each gold evidence page in turn, then answer quoting the evidence."""
        if self.done:
            raise ResetNeeded("the episode is over: call reset() first")
        q, world = self.question, self._data.world
        for sid in q.evidence:
            if sid not in self._ep.seen:
                return f"<search>{self._oracle_query(world.sentences[sid].page, sid)}</search>"
        quotes = " ".join(world.sentences[s].text for s in q.evidence)
        return f"<think>{quotes}</think>\n<answer>{q.answer}</answer>"

    def _oracle_query(self, eid: int, sid: str) -> str:
        """The first of (title, title + evidence sentence) whose search finds the page."""
        world = self._data.world
        title = world.entities[eid].title
        candidates = [title, f"{title} {world.sentences[sid].text}"]
        for query in candidates:
            if eid in self.search(query):
                return query
        return candidates[-1]
