"""The results contract: types, schema and canonical JSON agree with what the harness writes."""

import hashlib
import json

import numpy as np

from agentgym.agents import load_agent
from agentgym.core.canonical import canonical, jsonable
from agentgym.harness.episode import run_episode
from agentgym.harness.evaluate import RunPlan, finish, header
from agentgym.harness.report import cells, columns
from agentgym.harness.results import EpisodeRecord, ResultsDoc, results_schema
from agentgym.harness.stats import CI_METHODS, STATISTICS, summarize, summary_fields
from agentgym.registry import make

SMALL = "agentgym/Search-Menu-Small-v0"


def test_canonical_bytes_are_sorted_compact_and_ascii():
    value = {"b": np.int64(2), "a": (np.array([1.5, 2.0]), "naïve ✓"), 3: None}
    assert canonical(value) == b'{"3":null,"a":[[1.5,2.0],"na\\u00efve \\u2713"],"b":2}'
    assert jsonable(value) == {"b": 2, "a": [[1.5, 2.0], "naïve ✓"], "3": None}
    assert json.loads(canonical(value)) == jsonable(value)


def test_snapshots_are_canonical_json():
    env = make(SMALL, split="test")
    env.reset(seed=3)
    env.step(env.unwrapped.oracle_action())
    snap = env.unwrapped.snapshot()
    assert canonical(json.loads(snap)) == snap
    old = json.dumps(json.loads(snap), sort_keys=True, separators=(",", ":")).encode()
    assert snap == old  # the bytes of the snapshots written before there was one function


def test_an_episode_record_has_the_typed_and_schema_keys_in_order():
    env, agent = make(SMALL, split="test"), load_agent("oracle")
    steps: list = []
    record = run_episode(env, agent, env_id=SMALL, run=0, episode=0, seed=11, transcript=steps)
    schema = results_schema()["$defs"]["episode"]
    assert list(record) == list(EpisodeRecord.__annotations__) == schema["required"]
    digest = hashlib.sha256()
    for item in steps:
        digest.update(canonical(item))
    assert record["transcript_sha256"] == digest.hexdigest()


def test_a_results_document_has_every_required_key():
    plan = RunPlan("random", (SMALL,), seeds=2)
    doc = finish(header(plan), [])
    schema = results_schema()
    assert set(schema["required"]) <= set(doc) == ResultsDoc.__required_keys__


def test_summaries_follow_the_statistics_table():
    fields = summary_fields()
    assert fields[:2] == ("n", "mean") and fields[-2:] == ("ci_low", "ci_high")
    assert fields[2:-2] == tuple(s.key for s in STATISTICS) and "iqm" in fields
    summary = summarize(np.array([0.0, 0.5, 1.0, 1.0]), bootstrap_seed=0, reps=100)
    assert tuple(summary) == (*fields, "ci_method")
    assert summary["ci_method"] == "bootstrap-percentile"
    assert (summary["n"], summary["mean"], summary["iqm"]) == (4, 0.625, 0.75)
    assert columns() == ["runs", "mean", *(s.label for s in STATISTICS), "95% CI"]
    assert "IQM" in columns() and len(cells(summary)) == len(columns())
    assert cells(summary)[:3] == ["4", "0.625", "0.750"]
    assert not cells(summary)[-1].endswith("*")
    exact = summarize(np.zeros(50), bootstrap_seed=0, reps=100)
    assert cells(exact)[-1] == "[0.000, 0.071]*"


def test_the_schema_requires_every_summary_field_with_the_mean_bounds():
    summary = results_schema()["$defs"]["summary"]
    assert summary["required"] == list(summary_fields())  # ci_method: files before it lack it
    assert list(summary["properties"]) == [*summary_fields(), "ci_method"]
    assert summary["properties"]["iqm"] == summary["properties"]["mean"]
    assert summary["properties"]["ci_method"]["enum"] == list(CI_METHODS)
    # a fresh copy each time: callers may change theirs
    results_schema()["$defs"]["summary"]["required"].clear()
    assert results_schema()["$defs"]["summary"]["required"] == list(summary_fields())
