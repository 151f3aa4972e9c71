"""What the search family's action spaces share: data, tasks, gold answers, ablations."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agentgym.core.env import AgentEnv
from agentgym.core.errors import BadInput, ResetNeeded
from agentgym.envs.search.answers import answer_score
from agentgym.envs.search.data import SearchData, load, load_official
from agentgym.envs.search.questions import Question
from agentgym.envs.search.retrieval import Retriever

# Graph ablations: which sentence nodes of an earlier episode's provenance to hide.
ABLATIONS = ("keep_cited", "remove_cited", "remove_uncited_visited")


def hidden_sentences(
    mode: str, all_sentences: Any, visited: list[str], cited: list[str]
) -> frozenset[str]:
    """The sentence ids an ablation hides, given an episode's visited and cited node ids.

    Ablations act on sentence nodes ("s:..."): ``keep_cited`` hides every sentence but the
    cited ones, ``remove_cited`` hides the cited ones, ``remove_uncited_visited`` hides the
    sentences seen but not cited.
    """
    cited_s = {n for n in cited if n.startswith("s:")}
    if mode == "keep_cited":
        return frozenset(s for s in all_sentences if s not in cited_s)
    if mode == "remove_cited":
        return frozenset(cited_s)
    if mode == "remove_uncited_visited":
        return frozenset(n for n in visited if n.startswith("s:") and n not in cited_s)
    raise BadInput(f"unknown ablation {mode!r}: choose one of {', '.join(ABLATIONS)}")


def _read_provenance(provenance: Mapping[str, Any] | str | None) -> dict[str, Any]:
    if provenance is None or isinstance(provenance, Mapping):
        return dict(provenance or {})
    try:
        return dict(json.loads(Path(provenance).read_text()))
    except (OSError, ValueError, TypeError) as e:
        raise BadInput(f"cannot read provenance file {provenance}: {e}") from None


class SearchEnvBase(AgentEnv[str, Any]):
    """Base of the search envs: a world, its question splits, gold answers and retrievers.

    The world is a preset's (or an official dataset); the base also applies the graph
    ablations.

    Ablations re-run an agent on a corpus with some sentences hidden: ``ablation`` names the
    mode and ``provenance`` maps ``"<task_id>@<seed>"`` (or ``"<task_id>"``) to an earlier
    episode's ``{"visited": [...], "cited": [...]}`` (a dict or a JSON file's path).
    """

    family = "search"
    domain = "encyclopedia"
    corpus = "pages"
    ablations = ABLATIONS

    def __init__(
        self,
        preset: str = "small",
        *,
        path: str | None = None,
        fmt: str | None = None,
        retriever: str = "bm25",
        search_k: int = 5,
        ablation: str | None = None,
        provenance: Mapping[str, Any] | str | None = None,
        split: str = "train",
        privileged: bool = False,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ):
        """Create the env.

        Args:
            preset: "small" (50 pages), "small-full" (the same with every question it
                yields), "medium" (5,000) or "large" (100,000).
            path: an official dataset's file or folder (Official ids); replaces ``preset``.
            fmt: "hotpotqa" or "2wiki" for ``path`` (detected when None).
            retriever: "bm25" (exact fast BM25Okapi), "bm25-reference" (rank-bm25) or "dense".
            search_k: documents returned per search.
            ablation: one of :data:`ABLATIONS`, or None.
            provenance: the earlier episodes an ablation hides nodes of.
            split: task range drawn by ``reset(seed=...)``: train, val or test.
            privileged: add the gold answer, evidence ids, supporting sentences and the
                evidence hint to ``info`` (see :meth:`_privileged_info`).
            max_turns: turn limit (the family default if None).
            render_mode: None or "ansi".
        """
        if fmt is not None and not path:
            raise BadInput("this id reads an official dataset: pass path=FILE_OR_DIR")
        self._data: SearchData = load_official(path, fmt) if path else load(preset)
        super().__init__(
            split=split, privileged=privileged, max_turns=max_turns, render_mode=render_mode
        )
        if ablation is not None and ablation not in ABLATIONS:
            raise BadInput(f"unknown ablation {ablation!r}: choose one of {', '.join(ABLATIONS)}")
        if search_k < 1:
            raise BadInput(f"search_k must be at least 1, got {search_k}")
        self.preset, self.path, self.fmt = preset, path, fmt
        self.retriever_name, self.search_k = retriever, int(search_k)
        self.ablation = ablation
        self._provenance = _read_provenance(provenance)
        try:
            self._retriever: Retriever = self._data.retriever(retriever, self.corpus)
        except ImportError as e:
            raise BadInput(f"retriever {retriever!r} needs: {e}") from None
        self._q: Question | None = None
        self._ep: Any = None  # the family's episode dataclass
        self._hidden: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> tuple[str, ...]:
        """The question ids of ``split`` (the env's own split if None), in the data's order."""
        return self._data.splits[split or self.split]

    def task_type_of(self, task_id: str) -> str:
        """The task type of question ``task_id``."""
        return self._data.by_id[task_id].task_type

    def _has_task(self, task_id: str) -> bool:
        return task_id in self._data.by_id

    def _config(self) -> dict[str, Any]:
        return {
            "data": self._data.name,
            "retriever": self.retriever_name,
            "search_k": self.search_k,
            "ablation": self.ablation,
        }

    @property
    def data_hash(self) -> str:
        """sha256 of the data: the world's pages and the questions' ids, texts and answers."""
        return self._data.data_hash

    @property
    def question(self) -> Question:
        """The current task's question (privileged: holds the gold answer)."""
        if self._q is None:
            raise ResetNeeded("no task yet: call reset() first")
        return self._q

    def _begin(self, task_id: str) -> None:
        """Set the question and the ablation's hidden sentences for a new episode."""
        self._q = self._data.by_id[task_id]
        self._hidden = self._hidden_for(task_id)

    def _hidden_for(self, task_id: str) -> frozenset[str]:
        if self.ablation is None:
            return frozenset()
        record = self._provenance.get(f"{task_id}@{self._reset_seed}")
        record = record or self._provenance.get(task_id)
        if record is None:
            return frozenset()
        return hidden_sentences(
            self.ablation, self._data.world.sentences, record["visited"], record["cited"]
        )

    def search(self, query: str) -> list[int]:
        """Page ids the retriever returns for ``query``.

        Under an ablation the intact index still ranks the pages (rebuilding BM25 on the few
        pages ``keep_cited`` leaves would zero the idf of most terms and measure BM25's
        small-corpus statistics, not the evidence), but pages whose sentences are all hidden
        are never returned and hidden sentences are never shown.
        """
        k = self.search_k
        if not self._hidden:
            return self._retriever.search(query, k)
        n_pages, want = len(self._data.world.entities), k
        while True:
            hits = self._retriever.search(query, want)
            kept = [e for e in hits if self.visible(e)]
            if len(kept) >= k or len(hits) < want or want >= n_pages:
                return kept[:k]
            want = min(4 * want, n_pages)

    def visible(self, eid: int) -> list[str]:
        """The sentence ids of page ``eid`` this episode can see."""
        return [s for s in self._data.world.pages[eid] if s not in self._hidden]

    # ------------------------------------------------------------------ state
    def _get_state(self) -> dict[str, Any]:
        return asdict(self._ep)

    def _set_state(self, state: dict[str, Any]) -> None:
        assert self.task_id is not None
        self._begin(self.task_id)
        self._ep = type(self._ep)(**state)
        self._restored()

    def _restored(self) -> None:
        """Hook: rebuild what derives from the episode state after a restore."""

    def _digest(self, canon: list[Any]) -> str:
        """The state key of a canonical description of the state."""
        blob = json.dumps([self.task_id, *canon], separators=(",", ":")).encode()
        return hashlib.blake2b(blob, digest_size=16).hexdigest()

    # ------------------------------------------------------------------ gold
    def _golds(self) -> list[str]:
        return [self.question.answer, *self.question.aliases]

    def answer_prefix(self) -> str:
        """The text an answer action starts with; :meth:`check_answer` scores what follows."""
        return "answer: "

    def check_answer(self, text: str) -> float:
        """1.0 for an exact match with the gold answer or an alias, else token F1."""
        return answer_score(text, self._golds())

    def _evidence_seen(self) -> Collection[str]:
        """Sentence ids whose text the agent has been shown this episode (a family hook)."""
        return ()

    def gold_facts(self) -> list[str]:
        """The gold supporting sentences, ``"<page title>: <sentence>"``, in reasoning order."""
        world = self._data.world
        return [
            f"{world.entities[world.sentences[sid].page].title}: {world.sentences[sid].text}"
            for sid in self.question.evidence
        ]

    def evidence_hint(self) -> str:
        """Which gold evidence the agent has not been shown yet, by the pages that hold it.

        ``"Still missing: evidence about <title>; <title>."`` in reasoning order, or
        ``"All evidence found."`` once every gold sentence has been shown.
        """
        world, seen = self._data.world, self._evidence_seen()
        missing = [
            world.entities[world.sentences[sid].page].title
            for sid in self.question.evidence
            if sid not in seen
        ]
        if not missing:
            return "All evidence found."
        return f"Still missing: evidence about {'; '.join(dict.fromkeys(missing))}."

    def _privileged_info(self) -> dict[str, Any]:
        """The privileged keys of the current task and step.

        ``privileged_context`` ("Answer: …", then "Evidence:" and one "- <title>: <sentence>"
        line per gold sentence), ``gold_answer``, ``gold_evidence`` (sentence ids),
        ``gold_facts`` (the same sentences as a list) and ``evidence_hint`` (per step).
        """
        q = self.question
        facts = self.gold_facts()
        context = "\n".join([f"Answer: {q.answer}", "Evidence:", *(f"- {f}" for f in facts)])
        return {
            "privileged_context": context,
            "gold_answer": q.answer,
            "gold_evidence": list(q.evidence),
            "gold_facts": facts,
            "evidence_hint": self.evidence_hint(),
        }
