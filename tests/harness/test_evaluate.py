import json
import textwrap

import numpy as np
import pytest

from agentgym.core.errors import BadInput
from agentgym.harness.evaluate import evaluate
from agentgym.harness.results import read_results
from agentgym.harness.seeds import episode_seeds
from agentgym.registry import register, unregister

SMALL = "agentgym/Search-Menu-Small-v0"


def test_seeds_follow_the_spawned_seed_sequence_tree():
    seeds = episode_seeds(7, runs=3, episodes_per_run=2)
    run1 = np.random.SeedSequence(7).spawn(3)[1]
    assert seeds[1][0] == int(run1.spawn(2)[0].generate_state(1)[0])
    # more runs or episodes never change the existing ones
    more = episode_seeds(7, runs=5, episodes_per_run=4)
    assert [row[:2] for row in more[:3]] == seeds
    assert len({s for row in more for s in row}) == 20


def test_results_file_has_the_documented_fields(tmp_path):
    out = tmp_path / "r.json"
    doc = evaluate("random", [SMALL], seeds=4, episodes_per_seed=2, root_seed=3, out=out)
    assert json.loads(out.read_text()) == doc
    for key in (
        "schema_version",
        "harness_version",
        "agent",
        "envs",
        "split",
        "root_seed",
        "episodes_per_seed",
        "bootstrap",
        "packages",
        "episodes",
        "aggregates",
    ):
        assert key in doc
    assert doc["envs"][0]["id"] == SMALL and len(doc["envs"][0]["data_hash"]) == 64
    assert len(doc["episodes"]) == 8
    ep = doc["episodes"][0]
    for key in (
        "env_id",
        "run",
        "episode",
        "seed",
        "task_id",
        "task_type",
        "success",
        "return",
        "steps",
        "tokens",
        "seconds",
        "error",
        "transcript_sha256",
    ):
        assert key in ep
    scores = [np.mean([e["success"] for e in doc["episodes"] if e["run"] == r]) for r in range(4)]
    agg = doc["aggregates"][SMALL]
    assert agg["n"] == 4 and agg["mean"] == pytest.approx(np.mean(scores))
    assert agg["ci_low"] <= agg["mean"] <= agg["ci_high"] and "iqm" in agg


def test_same_command_gives_the_same_episodes_except_seconds(tmp_path):
    a = evaluate("random", [SMALL], seeds=5, out=tmp_path / "a.json")
    b = evaluate("random", [SMALL], seeds=5, out=tmp_path / "b.json")

    def strip(d):
        return [{k: v for k, v in e.items() if k != "seconds"} for e in d["episodes"]]

    assert strip(a) == strip(b)


def test_resume_keeps_finished_episodes_and_refuses_another_run(tmp_path):
    out = tmp_path / "r.json"
    evaluate("random", [SMALL], seeds=3, out=out)
    doc = json.loads(out.read_text())
    doc["episodes"] = doc["episodes"][:1]  # as if interrupted after one run
    doc["episodes"][0]["seconds"] = 123.0
    out.write_text(json.dumps(doc))
    resumed = evaluate("random", [SMALL], seeds=3, out=out)
    assert len(resumed["episodes"]) == 3 and resumed["episodes"][0]["seconds"] == 123.0
    with pytest.raises(BadInput, match="another run"):
        evaluate("oracle", [SMALL], seeds=3, out=out)
    fresh = evaluate("oracle", [SMALL], seeds=3, out=out, overwrite=True)
    assert fresh["aggregates"][SMALL]["mean"] == 1.0


def test_an_erroring_agent_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    (tmp_path / "flaky_agent.py").write_text(
        textwrap.dedent("""
        class Flaky:
            def reset(self, env_id, seed):
                self.seed = seed
            def act(self, observation, info):
                if self.seed % 2:
                    raise RuntimeError("model server went away")
                return 0
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    doc = evaluate("flaky_agent:Flaky", [SMALL], seeds=10, out=tmp_path / "r.json")
    errors = [e["error"] for e in doc["episodes"] if e["error"]]
    assert 0 < len(errors) < 10 and all("model server went away" in e for e in errors)
    assert len(doc["episodes"]) == 10 and doc["aggregates"][SMALL]["n"] == 10


def test_an_episode_the_env_ends_with_an_error_is_recorded_as_errored(tmp_path, monkeypatch):
    """An env that fails on its side (a crashed browser) truncates with ``info["error"]``;
    the harness records that episode as errored, not lost, and goes on."""
    (tmp_path / "crashing_env.py").write_text(
        textwrap.dedent("""
        from agentgym.envs.search.menu_env import SearchMenuEnv

        class CrashingEnv(SearchMenuEnv):
            def step(self, action):
                obs, reward, term, trunc, info = super().step(action)
                if self._reset_seed % 2:  # odd seeds: the env fails at the first step
                    self._done = True
                    return obs, 0.0, False, True, {**info, "error": "browser crashed"}
                return obs, reward, term, trunc, info
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    register(
        "agentgym/Test-Crashing-v0",
        "crashing_env:CrashingEnv",
        family="search",
        description="fails on odd seeds",
    )
    try:
        doc = evaluate("oracle", ["agentgym/Test-Crashing-v0"], seeds=6, out=tmp_path / "r.json")
    finally:
        unregister("agentgym/Test-Crashing-v0")
    errors = {e["seed"] % 2: e["error"] for e in doc["episodes"]}
    assert len(doc["episodes"]) == 6 and errors[0] is None
    assert errors[1] == "env: browser crashed"


def test_module_class_agents_must_follow_the_protocol(tmp_path, monkeypatch):
    (tmp_path / "not_an_agent.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BadInput, match="Agent protocol"):
        evaluate("not_an_agent:Thing", [SMALL], seeds=1)
    with pytest.raises(BadInput, match="no attribute"):
        evaluate("not_an_agent:Missing", [SMALL], seeds=1)


def test_unreadable_results_files_are_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(BadInput):
        read_results(bad)
    bad.write_text('{"schema_version": 99}')
    with pytest.raises(BadInput, match="schema_version"):
        read_results(bad)
    with pytest.raises(BadInput, match="no such"):
        read_results(tmp_path / "missing.json")
