"""Load the official multi-hop QA datasets (HotpotQA, 2WikiMultiHopQA) into a ``World``.

The loaders turn a local copy of an official file into the structures the search envs read:
a :class:`~.world.World` of pages and a tuple of :class:`~.questions.Question`, plus a
:class:`LoadReport` saying what was read and what was skipped::

    world, questions, report = load_official("data/hotpotqa/hotpot_dev_distractor_v1.json")
    report.official_ids["q00003"]  # the dataset's own ``_id`` of question "q00003"

Accepted inputs
    A file, or a directory holding one of :data:`DIRECTORY_FILES`; the first of that list
    present is read (HotpotQA dev distractor, dev fullwiki, train; then 2Wiki ``dev.json``,
    ``dev.jsonl``, ``train.json``, ``train.jsonl``). With ``fmt`` given only that format's names
    are tried. A file holds a JSON list of question records or JSON Lines (one record a line).
    Unlabeled test splits (records without ``answer`` / ``supporting_facts``) are refused.

Format detection
    With ``fmt=None`` the first record decides: ``"2wiki"`` if it has an ``evidences`` field,
    else ``"hotpotqa"``; every record is then checked against that format.

Pages
    One entity (``etype="page"``) per distinct title over all loaded contexts, ids in order of
    first appearance (record by record, paragraph by paragraph). ``title`` is the official title
    and ``name`` the title without a trailing parenthetical ("Alice (film)" -> "Alice"). When a
    title recurs with a different sentence list, the first list is kept and the occurrence is
    counted in ``LoadReport.page_conflicts``.

Sentence ids keep the official indices
    The sentence at official index ``k`` of the page of entity ``e`` has id ``"s:e:k"``, the
    same ``k`` that ``supporting_facts`` uses. Texts are stripped; a sentence that is empty
    after stripping is left out of ``World.pages`` and ``World.sentences`` (counted in
    ``LoadReport.empty_sentences``), so a page's ids can have gaps (``s:4:0, s:4:2``) but every
    id still names the official index. A sentence's ``mentions`` are the ids of the *other*
    titles of the same record's context that occur in its text as whole words
    (case-sensitive); ``values`` is ``()`` and ``fact`` is ``None``. The world has no facts and
    ``seed`` 0.

Questions
    ``id`` is ``"q<record index:05d>"``, the record's position in the file, so ids stay stable
    under ``limit`` and have gaps where records were skipped; the official ``_id`` is in
    ``LoadReport.official_ids``. ``task_type`` is the official type (HotpotQA: ``bridge``,
    ``comparison``; 2Wiki: ``comparison``, ``inference``, ``compositional``,
    ``bridge_comparison``). ``evidence`` is the supporting facts' sentence ids in file order
    (duplicates dropped) and ``hops`` their number, at least 1. ``anchors`` are the supporting
    pages in order of first appearance and ``mentions`` their titles: unlike the synthetic
    questions, official question texts usually do not contain these titles verbatim.
    ``chain`` holds one ``"title: sentence"`` line per evidence sentence. ``answer_node`` is
    ``"v:<answer>"``. ``aliases`` is ``()`` for HotpotQA; for 2Wiki it is the record's
    ``aliases`` (or ``answer_aliases``) list when present, else, when records carry
    ``answer_id`` and an ``id_aliases.json`` (the official ID-enhanced release) lies next to the
    data file, that answer's ``aliases`` and ``demonyms``.

Supporting facts
    A fact ``[title, k]`` is looked up on the record's own paragraph of that title, which is
    the kept page unless the title conflicted; then the sentence text is looked up on the kept
    page (same index first, else its first sentence of the same text). A title absent from the
    record's context (HotpotQA fullwiki) is looked up on the page another loaded record
    supplied. A record is skipped, and counted by reason, when a fact names a title no loaded
    context has (``missing_title``), an index outside the paragraph or an empty sentence
    (``missing_sentence``), or a sentence of a conflicting paragraph absent from the kept page
    (``conflict``); the first failing fact in file order gives the reason.

The result depends only on the file's bytes, ``fmt`` and ``limit`` (and, for 2Wiki aliases, on
``id_aliases.json``): loading twice gives the same ``World.data_hash()`` and equal questions,
and ``limit=n`` reads the first ``n`` records, whose pages are then a prefix of the full file's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from agentgym.core.errors import BadInput
from agentgym.envs.search.questions import Question
from agentgym.envs.search.world_types import Entity, Sentence, World, value_node

__all__ = [
    "DIRECTORY_FILES",
    "FORMATS",
    "HOTPOTQA_FILES",
    "HOTPOTQA_TYPES",
    "PAGE_ETYPE",
    "TWOWIKI_FILES",
    "TWOWIKI_TYPES",
    "LoadReport",
    "load_official",
]

#: Values of ``fmt``.
FORMATS: tuple[str, ...] = ("hotpotqa", "2wiki")
#: File names tried, in this order, in a directory given as a HotpotQA path.
HOTPOTQA_FILES: tuple[str, ...] = (
    "hotpot_dev_distractor_v1.json",
    "hotpot_dev_fullwiki_v1.json",
    "hotpot_train_v1.1.json",
)
#: File names tried, in this order, in a directory given as a 2WikiMultiHopQA path.
TWOWIKI_FILES: tuple[str, ...] = ("dev.json", "dev.jsonl", "train.json", "train.jsonl")
#: File names tried, in this order, in a directory when ``fmt`` is None.
DIRECTORY_FILES: tuple[str, ...] = HOTPOTQA_FILES + TWOWIKI_FILES
#: The official question types (kept as ``Question.task_type``; others are kept as well).
HOTPOTQA_TYPES: tuple[str, ...] = ("bridge", "comparison")
TWOWIKI_TYPES: tuple[str, ...] = ("comparison", "inference", "compositional", "bridge_comparison")
#: ``Entity.etype`` of every page of an official world.
PAGE_ETYPE = "page"

_FILES = {"hotpotqa": HOTPOTQA_FILES, "2wiki": TWOWIKI_FILES}
_LABEL = {"hotpotqa": "HotpotQA", "2wiki": "2WikiMultiHopQA"}
_ALIASES_FILE = "id_aliases.json"
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
_SKIP_REASONS = ("missing_title", "missing_sentence", "conflict")


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_official` read, kept and skipped.

    Attributes:
        path: The file read (resolved from a directory when one was given).
        fmt: ``"hotpotqa"`` or ``"2wiki"``.
        records: Records read (at most ``limit``).
        official_ids: Question id (``"q00007"``) -> the record's official ``_id``, in order.
        skipped: Skipped records by reason: ``missing_title``, ``missing_sentence``,
            ``conflict`` (all three keys present).
        skipped_ids: Official ``_id`` of each skipped record, in file order.
        page_conflicts: Paragraph occurrences whose sentences differ from the kept page.
        empty_sentences: Sentences of kept pages left out for being empty after stripping.
        aliases_file: The ``id_aliases.json`` read for 2Wiki aliases, or None.
    """

    path: str
    fmt: str
    records: int
    official_ids: Mapping[str, str]
    skipped: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType(dict.fromkeys(_SKIP_REASONS, 0))
    )
    skipped_ids: tuple[str, ...] = ()
    page_conflicts: int = 0
    empty_sentences: int = 0
    aliases_file: str | None = None

    @property
    def questions(self) -> int:
        """Number of questions kept."""
        return len(self.official_ids)

    @property
    def n_skipped(self) -> int:
        """Number of records skipped, all reasons together."""
        return sum(self.skipped.values())


class _Record(NamedTuple):
    """One validated question record."""

    position: int  # index of the record in the file
    official_id: str
    task_type: str
    question: str
    answer: str
    aliases: tuple[str, ...] | None  # None: none in the record itself
    answer_id: str | None
    support: tuple[tuple[str, int], ...]
    context: tuple[tuple[str, tuple[str, ...]], ...]  # stripped sentences, official indices


def load_official(
    path: str | os.PathLike[str], *, fmt: str | None = None, limit: int | None = None
) -> tuple[World, tuple[Question, ...], LoadReport]:
    """Load an official HotpotQA or 2WikiMultiHopQA file into a world and its questions.

    See the module docstring for the mapping. Unlike the synthetic generators this returns
    three values; ``world, questions, *_ = load_official(...)`` ignores the report.

    Args:
        path: A data file (JSON list or JSON Lines), or a directory holding one of
            :data:`DIRECTORY_FILES` (the first present is read).
        fmt: ``"hotpotqa"``, ``"2wiki"``, or None to detect it from the first record.
        limit: Read only the first ``limit`` records (a positive int), or all when None.

    Returns:
        ``(world, questions, report)``.

    Raises:
        BadInput: A missing path, a directory without a known file, a file that is not JSON or
            not a list of question records of the format, an unlabeled test split, or a bad
            ``fmt`` / ``limit``. ``BadInput`` is a ``ValueError``.
    """
    if fmt is not None and fmt not in FORMATS:
        raise BadInput(f"unknown dataset format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BadInput(f"limit must be a positive int or None, got {limit!r}")
    file = _resolve_path(Path(os.fspath(path)), fmt)
    raw = _read_records(file, limit)
    if not raw:
        raise BadInput(f"{file} contains no question records.")
    if fmt is None:
        fmt = "2wiki" if isinstance(raw[0], dict) and "evidences" in raw[0] else "hotpotqa"
    records = [_validate(file, fmt, i, obj) for i, obj in enumerate(raw)]
    alias_table, aliases_file = _alias_table(file, fmt, records)
    return _build(file, fmt, records, alias_table, aliases_file)


# ------------------------------------------------------------------------------ reading
def _resolve_path(path: Path, fmt: str | None) -> Path:
    """The data file ``path`` names: itself, or the first known file in the directory."""
    if path.is_dir():
        names = _FILES[fmt] if fmt else DIRECTORY_FILES
        for name in names:
            if (path / name).is_file():
                return path / name
        raise BadInput(f"directory {path} holds none of the known data files {', '.join(names)}.")
    if not path.exists():
        raise BadInput(f"dataset path {path} does not exist.")
    if not path.is_file():
        raise BadInput(f"dataset path {path} is neither a file nor a directory.")
    return path


def _read_text(file: Path) -> str:
    try:
        data = file.read_bytes()
    except OSError as e:
        raise BadInput(f"cannot read dataset file {file}: {e.strerror or e}.") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"dataset file {file} is not UTF-8 text, so not JSON.") from None


def _read_records(file: Path, limit: int | None) -> list[Any]:
    """The file's records: a JSON list, or JSON Lines; the first ``limit`` only."""
    text = _read_text(file)
    start = text.lstrip()[:1]
    if not start:
        raise BadInput(f"dataset file {file} is empty.")
    if start == "{":
        return _read_json_lines(file, text, limit)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(
            f"dataset file {file} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})."
        ) from None
    if not isinstance(data, list):
        raise BadInput(
            f"dataset file {file} holds a JSON {type(data).__name__}, not a list of question "
            "records."
        )
    return data if limit is None else data[:limit]


def _read_json_lines(file: Path, text: str, limit: int | None) -> list[Any]:
    records: list[Any] = []
    for lineno, line in _lines(text):
        if limit is not None and len(records) >= limit:
            break
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if not records and _is_json_object(text):
                raise BadInput(
                    f"dataset file {file} holds one JSON object, not a list of question records."
                ) from None
            raise BadInput(
                f"dataset file {file} is neither JSON nor JSON Lines: line {lineno} is not "
                f"valid JSON ({e.msg})."
            ) from None
    return records


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield lineno, line


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


# ------------------------------------------------------------------------------ validation
def _validate(file: Path, fmt: str, index: int, obj: Any) -> _Record:
    """Check one record's shape and return it normalised; raise BadInput naming the field."""
    where = f"{_LABEL[fmt]} file {file}: record {index}"
    if not isinstance(obj, dict):
        raise BadInput(f"{where} is a JSON {type(obj).__name__}, not a question object.")
    if "answer" not in obj and "supporting_facts" not in obj and "question" in obj:
        raise BadInput(
            f"{where} has no 'answer' or 'supporting_facts', so this looks like an unlabeled "
            "test split; load a dev or train file."
        )
    required = ["_id", "question", "answer", "type", "supporting_facts", "context"]
    if fmt == "2wiki":
        required.append("evidences")
    missing = [key for key in required if key not in obj]
    if missing:
        hint = ""
        if fmt == "2wiki" and missing == ["evidences"]:
            hint = " (is it a HotpotQA file? pass fmt='hotpotqa')"
        raise BadInput(f"{where} lacks the field(s) {', '.join(missing)}{hint}.")
    official_id = obj["_id"]
    if isinstance(official_id, bool) or not isinstance(official_id, (str, int)):
        raise BadInput(f"{where} has an '_id' that is not a string.")
    for key in ("question", "answer", "type"):
        if not isinstance(obj[key], str):
            raise BadInput(f"{where} has a '{key}' that is not a string.")
    if fmt == "2wiki" and not isinstance(obj["evidences"], list):
        raise BadInput(f"{where} has 'evidences' that are not a list of triples.")
    aliases = None
    for key in ("aliases", "answer_aliases"):
        if fmt == "2wiki" and key in obj:
            aliases = _strings(obj[key], f"{where} has '{key}' that are not a list of strings.")
            break
    answer_id = obj.get("answer_id") if fmt == "2wiki" else None
    if answer_id is not None and not isinstance(answer_id, str):
        raise BadInput(f"{where} has an 'answer_id' that is not a string.")
    return _Record(
        position=index,
        official_id=str(official_id),
        task_type=obj["type"],
        question=obj["question"],
        answer=obj["answer"],
        aliases=aliases,
        answer_id=answer_id,
        support=_support(obj["supporting_facts"], where),
        context=_context(obj["context"], where),
    )


def _strings(value: Any, message: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput(message)
    return tuple(value)


def _support(value: Any, where: str) -> tuple[tuple[str, int], ...]:
    message = f"{where} has 'supporting_facts' that are not a list of [title, sentence index]."
    if not isinstance(value, list):
        raise BadInput(message)
    out = []
    for fact in value:
        if (
            not isinstance(fact, list)
            or len(fact) != 2
            or not isinstance(fact[0], str)
            or isinstance(fact[1], bool)
            or not isinstance(fact[1], int)
        ):
            raise BadInput(message)
        out.append((fact[0], fact[1]))
    return tuple(out)


def _context(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    message = f"{where} has a 'context' that is not a list of [title, list of sentences]."
    if not isinstance(value, list):
        raise BadInput(message)
    out = []
    for paragraph in value:
        if (
            not isinstance(paragraph, list)
            or len(paragraph) != 2
            or not isinstance(paragraph[0], str)
            or not isinstance(paragraph[1], list)
            or not all(isinstance(s, str) for s in paragraph[1])
        ):
            raise BadInput(message)
        out.append((paragraph[0], tuple(s.strip() for s in paragraph[1])))
    return tuple(out)


def _alias_table(
    file: Path, fmt: str, records: Sequence[_Record]
) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """2Wiki's ``id_aliases.json`` next to ``file`` (JSON Lines of Q_id, aliases, demonyms)."""
    alias_path = file.parent / _ALIASES_FILE
    wanted = fmt == "2wiki" and any(r.aliases is None and r.answer_id for r in records)
    if not wanted or not alias_path.is_file():
        return {}, None
    table: dict[str, tuple[str, ...]] = {}
    text = _read_text(alias_path)
    for lineno, line in _lines(text):
        bad = f"alias file {alias_path}: line {lineno} is not a JSON object with Q_id and aliases."
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise BadInput(bad) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("Q_id"), str):
            raise BadInput(bad)
        names = _strings(obj.get("aliases", []), bad) + _strings(obj.get("demonyms", []), bad)
        table.setdefault(obj["Q_id"], names)
    return table, str(alias_path)


# ------------------------------------------------------------------------------ building
def _name(title: str) -> str:
    """The title without a trailing parenthetical: ``"Alice (film)"`` -> ``"Alice"``."""
    name = _PARENTHETICAL.sub("", title)
    return name if name else title


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _occurs(title: str, text: str) -> bool:
    r"""Whether ``title`` occurs in ``text`` as a whole word (like regex ``\b``, no compile)."""
    start = text.find(title) if title else -1
    while start != -1:
        end = start + len(title)
        if not (start and _is_word_char(text[start - 1])) and not (
            end < len(text) and _is_word_char(text[end])
        ):
            return True
        start = text.find(title, start + 1)
    return False


class _Builder:
    """Accumulates pages over records, then resolves supporting facts against them."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.texts: list[tuple[str, ...]] = []  # kept paragraph of each page, official indices
        self.entities: list[Entity] = []
        self.sentences: dict[str, Sentence] = {}
        self.pages: list[tuple[str, ...]] = []
        self.conflicts = 0
        self.empty = 0

    def add_context(self, context: Sequence[tuple[str, tuple[str, ...]]]) -> None:
        """Add the record's new pages; count paragraphs that differ from a kept page."""
        new: list[int] = []
        for title, texts in context:
            eid = self.ids.get(title)
            if eid is None:
                eid = len(self.entities)
                self.ids[title] = eid
                self.texts.append(texts)
                self.entities.append(Entity(eid, PAGE_ETYPE, _name(title), title, ()))
                new.append(eid)
            elif self.texts[eid] != texts:
                self.conflicts += 1
        if not new:
            return
        # Only this record's titles are looked for: fast, and it is the record's link structure.
        others = {self.ids[title]: title for title, _ in context}
        for eid in new:
            sids = []
            for k, text in enumerate(self.texts[eid]):
                if not text:
                    self.empty += 1
                    continue
                mentions = tuple(
                    sorted(
                        other
                        for other, title in others.items()
                        if other != eid and _occurs(title, text)
                    )
                )
                sid = f"s:{eid}:{k}"
                self.sentences[sid] = Sentence(sid, eid, text, mentions, (), None)
                sids.append(sid)
            self.pages.append(tuple(sids))

    def resolve(self, own: Mapping[str, tuple[str, ...]], title: str, k: int) -> str:
        """The sentence id of supporting fact ``[title, k]``, or a skip reason."""
        eid = self.ids.get(title)
        if eid is None:
            return "missing_title"
        kept = self.texts[eid]
        mine = own.get(title, kept)
        if not 0 <= k < len(mine) or not mine[k]:
            return "missing_sentence"
        if k < len(kept) and kept[k] == mine[k]:
            return f"s:{eid}:{k}"
        for j, text in enumerate(kept):  # the record's paragraph differs from the kept page
            if text == mine[k]:
                return f"s:{eid}:{j}"
        return "conflict"

    def world(self) -> World:
        return World(
            seed=0,
            entities=tuple(self.entities),
            sentences=self.sentences,
            pages=tuple(self.pages),
            facts=(),
        )


def _build(
    file: Path,
    fmt: str,
    records: Sequence[_Record],
    alias_table: Mapping[str, tuple[str, ...]],
    aliases_file: str | None,
) -> tuple[World, tuple[Question, ...], LoadReport]:
    builder = _Builder()
    for record in records:
        builder.add_context(record.context)
    world = builder.world()
    questions: list[Question] = []
    official_ids: dict[str, str] = {}
    skipped = dict.fromkeys(_SKIP_REASONS, 0)
    skipped_ids: list[str] = []
    for record in records:
        own: dict[str, tuple[str, ...]] = {}
        for title, texts in record.context:
            own.setdefault(title, texts)
        evidence: list[str] = []
        reason = None
        for title, k in record.support:
            sid = builder.resolve(own, title, k)
            if not sid.startswith("s:"):
                reason = sid
                break
            if sid not in evidence:
                evidence.append(sid)
        if reason is not None:
            skipped[reason] += 1
            skipped_ids.append(record.official_id)
            continue
        question = _question(world, record, evidence, alias_table)
        questions.append(question)
        official_ids[question.id] = record.official_id
    report = LoadReport(
        path=str(file),
        fmt=fmt,
        records=len(records),
        official_ids=MappingProxyType(official_ids),
        skipped=MappingProxyType(skipped),
        skipped_ids=tuple(skipped_ids),
        page_conflicts=builder.conflicts,
        empty_sentences=builder.empty,
        aliases_file=aliases_file,
    )
    return world, tuple(questions), report


def _question(
    world: World,
    record: _Record,
    evidence: Sequence[str],
    alias_table: Mapping[str, tuple[str, ...]],
) -> Question:
    anchors: list[int] = []
    for sid in evidence:
        page = world.sentences[sid].page
        if page not in anchors:
            anchors.append(page)
    aliases = record.aliases
    if aliases is None:
        aliases = alias_table.get(record.answer_id or "", ())
    aliases = tuple(dict.fromkeys(a for a in aliases if a and a != record.answer))
    chain = tuple(
        f"{world.entities[world.sentences[sid].page].title}: {world.sentences[sid].text}"
        for sid in evidence
    )
    return Question(
        id=f"q{record.position:05d}",
        task_type=record.task_type,
        hops=max(1, len(evidence)),
        text=record.question,
        answer=record.answer,
        aliases=aliases,
        answer_node=value_node(record.answer),
        anchors=tuple(anchors),
        mentions=tuple(world.entities[a].title for a in anchors),
        evidence=tuple(evidence),
        chain=chain,
    )
