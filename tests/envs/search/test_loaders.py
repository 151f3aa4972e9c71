"""Tests of the official-dataset loaders (HotpotQA, 2WikiMultiHopQA) on small fixture files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.core.errors import BadInput
from agentgym.envs.search.loaders import HOTPOTQA_TYPES, TWOWIKI_TYPES, load_official
from agentgym.envs.search.world_types import World

FIXTURES = Path(__file__).parent / "fixtures"
HOTPOT_DIR = FIXTURES / "hotpotqa"
HOTPOT = HOTPOT_DIR / "hotpot_dev_distractor_v1.json"
TWOWIKI_DIR = FIXTURES / "2wiki"
TWOWIKI = TWOWIKI_DIR / "dev.json"
TWOWIKI_JSONL = TWOWIKI_DIR / "dev.jsonl"


def _records(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def _first_paragraphs(records: list[dict]) -> dict[str, list[str]]:
    """Title -> sentences of its first occurrence over all contexts, in file order."""
    out: dict[str, list[str]] = {}
    for record in records:
        for title, sentences in record["context"]:
            out.setdefault(title, sentences)
    return out


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hotpot():
    return load_official(HOTPOT)


@pytest.fixture(scope="module")
def twowiki():
    return load_official(TWOWIKI)


# ------------------------------------------------------------------------------ pages
@pytest.mark.parametrize("path", [HOTPOT, TWOWIKI])
def test_one_page_per_distinct_title_with_the_file_sentences(path):
    world, _, _ = load_official(path)
    paragraphs = _first_paragraphs(_records(path))
    assert [e.title for e in world.entities] == list(paragraphs)
    assert [e.id for e in world.entities] == list(range(len(paragraphs)))
    for entity in world.entities:
        assert entity.etype == "page" and entity.attributes == ()
        expected = [
            (f"s:{entity.id}:{k}", text.strip())
            for k, text in enumerate(paragraphs[entity.title])
            if text.strip()
        ]
        assert [(s.id, s.text) for s in world.page(entity.id)] == expected
        for s in world.page(entity.id):
            assert s.page == entity.id and s.values == () and s.fact is None
    assert world.facts == ()
    assert list(world.sentences) == [sid for page in world.pages for sid in page]


def test_empty_sentences_are_dropped_but_indices_stay_official(hotpot):
    world, questions, report = hotpot
    brask = world.by_title("Brask")
    assert world.pages[brask] == (f"s:{brask}:0", f"s:{brask}:2", f"s:{brask}:3")
    assert report.empty_sentences == 1
    # supporting fact ["Brask", 2] is the river sentence, after the blank one at index 1
    q0 = questions[0]
    assert q0.evidence[-1] == f"s:{brask}:2"
    assert world.sentences[q0.evidence[-1]].text.startswith("The river Oller flows")


def test_names_strip_a_trailing_parenthetical(hotpot, twowiki):
    world, _, _ = hotpot
    band = world.entities[world.by_title("Grey Lantern (band)")]
    assert (band.name, band.title) == ("Grey Lantern", "Grey Lantern (band)")
    assert world.entities[world.by_title("Brask")].name == "Brask"
    world2, _, _ = twowiki
    assert world2.by_name("Salt Meadow") == (
        world2.by_title("Salt Meadow (novel)"),
        world2.by_title("Salt Meadow (1961 film)"),
    )


def test_shared_title_is_one_page_and_conflicts_keep_the_first(hotpot):
    world, _, report = hotpot
    titles = [e.title for e in world.entities]
    assert titles.count("Brask") == 1 and titles.count("Tallmere") == 1
    venn = world.by_title("Oskar Venn")
    # the 4th record lists Oskar Venn's sentences in another order: the first list is kept
    assert world.sentences[f"s:{venn}:0"].text.startswith("Oskar Venn (1851")
    assert len(world.pages[venn]) == 3
    assert report.page_conflicts == 1


def test_sentence_mentions_are_whole_word_titles_of_the_same_context(hotpot):
    world, _, _ = hotpot
    t = world.by_title
    assert world.sentences[f"s:{t('Oskar Venn')}:0"].mentions == (t("Brask"),)
    # "Grey Lantern Morning ... by Oskar Venn.": not its own page, not "Grey Lantern (band)"
    assert world.sentences[f"s:{t('Grey Lantern Morning')}:0"].mentions == (t("Oskar Venn"),)
    # "Tallmere Harbour Gallery" contains the title "Tallmere" as a whole word
    assert world.sentences[f"s:{t('Grey Lantern Morning')}:1"].mentions == (t("Tallmere"),)
    # "Brasko" and "Braskholm" do not mention "Brask"
    assert all(s.mentions == () for s in world.page(t("Brasko")))
    # several mentions are sorted ids
    ilse = world.sentences[f"s:{t('Ilse Marrow')}:1"]
    assert ilse.mentions == tuple(sorted((t("Coldwater Academy"), t("Tallmere"))))
    # "Oskar Venn" is a page, but not in the context of the record that added this page
    gallery = world.sentences[f"s:{t('Tallmere Harbour Gallery')}:2"]
    assert "Oskar Venn" in gallery.text and gallery.mentions == ()


# ------------------------------------------------------------------------------ questions
@pytest.mark.parametrize("path", [HOTPOT, TWOWIKI])
def test_evidence_resolves_to_the_supporting_sentences(path):
    world, questions, report = load_official(path)
    records = {r["_id"]: r for r in _records(path)}
    assert questions
    for q in questions:
        record = records[report.official_ids[q.id]]
        own = dict(reversed(record["context"]))  # first occurrence wins
        support = record["supporting_facts"]
        assert len(q.evidence) == len(support) == q.hops
        for sid, (title, k) in zip(q.evidence, support, strict=True):
            sentence = world.sentences[sid]
            assert world.entities[sentence.page].title == title
            assert sentence.text == own[title][k].strip()
        assert q.chain == tuple(
            f"{world.entities[world.sentences[s].page].title}: {world.sentences[s].text}"
            for s in q.evidence
        )
        assert (q.text, q.answer, q.task_type) == (
            record["question"],
            record["answer"],
            record["type"],
        )
        assert q.answer_node == f"v:{record['answer']}"


def test_question_fields_hotpotqa(hotpot):
    world, questions, report = hotpot
    t = world.by_title
    assert [q.id for q in questions] == ["q00000", "q00001", "q00003"]
    q0 = questions[0]
    assert q0.anchors == (t("Grey Lantern Morning"), t("Oskar Venn"), t("Brask"))
    assert q0.mentions == ("Grey Lantern Morning", "Oskar Venn", "Brask")
    assert q0.evidence == (
        f"s:{t('Grey Lantern Morning')}:0",
        f"s:{t('Oskar Venn')}:0",
        f"s:{t('Brask')}:2",
    )
    assert q0.hops == 3 and q0.aliases == ()
    assert q0.chain[0] == "Grey Lantern Morning: " + world.sentences[q0.evidence[0]].text
    # the 4th record's ["Oskar Venn", 1] is, in its own reordered paragraph, the kept sentence 0
    q3 = questions[2]
    assert q3.evidence == (f"s:{t('Oskar Venn')}:0", f"s:{t('Ilse Marrow')}:0")
    assert q3.answer == "yes" and q3.answer_node == "v:yes"
    assert all(q.aliases == () for q in questions)
    assert report.official_ids == {
        "q00000": "5f0a1c7e55429901aa000001",
        "q00001": "5f0a1c7e55429901aa000002",
        "q00003": "5f0a1c7e55429901aa000004",
    }


def test_question_fields_2wiki(twowiki):
    world, questions, report = twowiki
    t = world.by_title
    assert [q.id for q in questions] == ["q00000", "q00001", "q00002"]
    q0, q1, q2 = questions
    assert q0.anchors == (t("Salt Meadow (1961 film)"), t("Pieter Halm"))
    assert q0.mentions == ("Salt Meadow (1961 film)", "Pieter Halm")
    # official titles need not occur in the question text
    assert q0.mentions[0] not in q0.text
    # aliases: from id_aliases.json by answer_id (the answer itself left out), or the record's
    assert q0.aliases == ("Agnes Korrel-Halm",)
    assert q1.aliases == ("Salt Meadow (1961 film)",)
    assert q2.aliases == ("Tomas A. Osk",)
    assert report.aliases_file == str(TWOWIKI_DIR / "id_aliases.json")


def test_type_mapping_keeps_the_official_types(hotpot, twowiki):
    assert {q.task_type for q in hotpot[1]} == set(HOTPOTQA_TYPES)
    types = [q.task_type for q in twowiki[1]]
    assert types == ["compositional", "comparison", "inference"]
    assert set(types) <= set(TWOWIKI_TYPES)


def test_skipped_records_are_counted(hotpot, twowiki):
    _, _, report = hotpot
    assert report.records == 5 and report.questions == 3 and report.n_skipped == 2
    assert dict(report.skipped) == {"missing_title": 1, "missing_sentence": 1, "conflict": 0}
    assert report.skipped_ids == ("5f0a1c7e55429901aa000003", "5f0a1c7e55429901aa000005")
    _, _, report2 = twowiki
    assert dict(report2.skipped) == {"missing_title": 0, "missing_sentence": 1, "conflict": 1}
    assert report2.skipped_ids == (
        "3c7d1e2a0bdd11eb9f10acde48001125",
        "3c7d1e2a0bdd11eb9f10acde48001126",
    )
    assert report2.page_conflicts == 1 and report2.empty_sentences == 0


def test_hops_at_least_one_and_duplicate_facts_collapse(tmp_path):
    records = _records(HOTPOT)[:2]
    records[0]["supporting_facts"] = []
    facts = records[1]["supporting_facts"]
    records[1]["supporting_facts"] = [facts[0], facts[0], facts[1]]
    _, questions, _ = load_official(_write(tmp_path, "x.json", json.dumps(records)))
    assert (questions[0].hops, questions[0].evidence, questions[0].anchors) == (1, (), ())
    assert questions[1].hops == 2 and len(questions[1].evidence) == 2


def test_support_outside_its_context_uses_another_records_page(tmp_path):
    # fullwiki contexts may lack a gold paragraph another record supplies
    records = _records(HOTPOT)[:2]
    records[1]["supporting_facts"].append(["Oskar Venn", 0])
    world, questions, _ = load_official(_write(tmp_path, "x.json", json.dumps(records)))
    assert questions[1].evidence[-1] == f"s:{world.by_title('Oskar Venn')}:0"


# ------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("path", [HOTPOT, TWOWIKI])
def test_loading_twice_is_identical(path):
    world_a, questions_a, report_a = load_official(path)
    world_b, questions_b, report_b = load_official(path)
    assert world_a is not world_b
    assert world_a.data_hash() == world_b.data_hash()
    assert questions_a == questions_b and report_a == report_b


def test_data_hash_is_stable_across_processes(hotpot):
    code = (
        "from agentgym.envs.search.loaders import load_official;"
        f"print(load_official({str(HOTPOT)!r})[0].data_hash())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == hotpot[0].data_hash()


def test_jsonl_variant_loads_like_the_json_file(twowiki):
    world, questions, report = load_official(TWOWIKI_JSONL)
    assert world.data_hash() == twowiki[0].data_hash()
    assert questions == twowiki[1]
    assert report.fmt == "2wiki" and report.path == str(TWOWIKI_JSONL)


def test_world_lookups_work(hotpot):
    world, _, _ = hotpot
    assert isinstance(world, World)
    eid = world.by_title("Tallmere")
    assert world.by_name("Tallmere") == (eid,)
    assert world.fact_of(eid, "anything") is None and world.objects(eid, "anything") == ()
    with pytest.raises(KeyError):
        world.by_title("Nowhere")


# ------------------------------------------------------------------------------ paths, formats
def test_auto_detection_and_explicit_format(hotpot, twowiki):
    assert hotpot[2].fmt == "hotpotqa" and twowiki[2].fmt == "2wiki"
    world, questions, _ = load_official(HOTPOT, fmt="hotpotqa")
    assert world.data_hash() == hotpot[0].data_hash() and questions == hotpot[1]
    world, questions, _ = load_official(TWOWIKI, fmt="2wiki")
    assert world.data_hash() == twowiki[0].data_hash() and questions == twowiki[1]
    with pytest.raises(BadInput, match="evidences"):
        load_official(HOTPOT, fmt="2wiki")


def test_directory_paths(tmp_path):
    assert load_official(HOTPOT_DIR)[2].path == str(HOTPOT)
    assert load_official(TWOWIKI_DIR)[2].path == str(TWOWIKI)  # dev.json before dev.jsonl
    assert load_official(str(TWOWIKI_DIR), fmt="2wiki")[2].path == str(TWOWIKI)
    with pytest.raises(BadInput, match="none of the known data files"):
        load_official(HOTPOT_DIR, fmt="2wiki")
    shutil.copy(TWOWIKI_JSONL, tmp_path / "train.jsonl")
    assert load_official(tmp_path)[2].path == str(tmp_path / "train.jsonl")


def test_limit_reads_a_prefix(hotpot):
    world, questions, report = load_official(HOTPOT, limit=2)
    assert report.records == 2
    assert [q.id for q in questions] == ["q00000", "q00001"]
    assert questions == hotpot[1][:2]
    n = len(world.entities)
    assert world.entities == hotpot[0].entities[:n]
    assert world.sentences == {s: hotpot[0].sentences[s] for s in world.sentences}
    assert len(world.entities) < len(hotpot[0].entities)
    _, questions_l, report_l = load_official(TWOWIKI_JSONL, limit=1)
    assert report_l.records == 1 and [q.id for q in questions_l] == ["q00000"]
    assert load_official(HOTPOT, limit=100)[2].records == 5


# ------------------------------------------------------------------------------ bad input
def _test_split(tmp_path: Path) -> Path:
    records = [
        {"_id": r["_id"], "question": r["question"], "context": r["context"]}
        for r in _records(HOTPOT)
    ]
    return _write(tmp_path, "hotpot_test_fullwiki_v1.json", json.dumps(records))


def _without(key: str):
    def make(tmp_path: Path) -> Path:
        records = _records(HOTPOT)
        del records[1][key]
        return _write(tmp_path, "x.json", json.dumps(records))

    return make


def _with(key: str, value):
    def make(tmp_path: Path) -> Path:
        records = _records(HOTPOT)
        records[2][key] = value
        return _write(tmp_path, "x.json", json.dumps(records))

    return make


BAD_FILES = {
    "missing": (lambda tmp: tmp / "nope.json", "does not exist"),
    "empty_dir": (lambda tmp: tmp, "none of the known data files"),
    "not_json": (lambda tmp: _write(tmp, "x.json", "[{'_id': 1}]"), "not valid JSON"),
    "not_utf8": (lambda tmp: _write(tmp, "x.json", b"\xff\xfe[\x00]\x00"), "not UTF-8"),
    "empty_file": (lambda tmp: _write(tmp, "x.json", "  \n"), "is empty"),
    "object": (lambda tmp: _write(tmp, "x.json", '{\n"data": []\n}'), "one JSON object"),
    "scalar": (lambda tmp: _write(tmp, "x.json", "42"), "JSON int, not a list"),
    "empty_list": (lambda tmp: _write(tmp, "x.json", "[]"), "no question records"),
    "non_objects": (lambda tmp: _write(tmp, "x.json", "[[1, 2]]"), "not a question object"),
    "bad_jsonl": (
        lambda tmp: _write(tmp, "x.jsonl", TWOWIKI_JSONL.read_text() + "{broken\n"),
        "line 6 is not valid JSON",
    ),
    "test_split": (_test_split, "unlabeled test split"),
    "no_context": (_without("context"), "record 1 lacks the field"),
    "no_type": (_without("type"), "lacks the field"),
    "bad_context": (_with("context", [["Title", "not a list"]]), "'context'"),
    "bad_support": (_with("supporting_facts", [["Brask", "2"]]), "'supporting_facts'"),
    "bad_answer": (_with("answer", 1821), "'answer'"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_input_names_the_file(tmp_path, case):
    make, message = BAD_FILES[case]
    path = make(tmp_path)
    with pytest.raises(BadInput, match=message) as info:
        load_official(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_alias_file(tmp_path):
    shutil.copy(TWOWIKI, tmp_path / "dev.json")
    _write(tmp_path, "id_aliases.json", '{"Q_id": "Q1", "aliases": "x"}\n')
    with pytest.raises(BadInput, match=r"id_aliases\.json"):
        load_official(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fmt": "squad"}, "unknown dataset format"),
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "5"}, "limit"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(BadInput, match=message):
        load_official(HOTPOT, **kwargs)
