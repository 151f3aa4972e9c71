import json
import math
import re

import numpy as np
import pytest

from agentgym.core.errors import BadInput
from agentgym.harness.compare import Z_POWER, compare, pairs_needed
from agentgym.harness.results import agent_labels

KEYS = {
    "diff",
    "ci_low",
    "ci_high",
    "prob_improvement",
    "min_detectable_diff",
    "n_pairs",
    "verdict",
}
SIDES = {"a", "b"}  # top level only: who A and B are
RUNS, M = 100, 4  # 400 paired episodes per env
NUM = r"[+-]\d+\.\d"
VERDICT = rf"B vs A: B − A = ({NUM}) points, 95% CI \[({NUM}), ({NUM})\]; (A|B) better"


def _doc(
    success: dict[str, np.ndarray], *, version=0, data_hash="ab" * 32, seed_offset=0, agent=None
):
    """A results document; ``success[env_id]`` has shape (runs, M)."""
    envs, episodes = [], []
    for env_id, table in success.items():
        envs.append({"id": env_id, "version": version, "kwargs": {}, "data_hash": data_hash})
        for run, row in enumerate(table):
            for episode, ok in enumerate(row):
                seed = seed_offset + 7919 * run + episode
                episodes.append(
                    {
                        "env_id": env_id,
                        "run": run,
                        "episode": episode,
                        "seed": seed,
                        "task_id": f"task-{seed % 97}",
                        "task_type": "lookup",
                        "success": bool(ok),
                        "return": float(ok),
                        "steps": 5,
                        "tokens": None,
                        "seconds": 0.01,
                        "error": None,
                        "transcript_sha256": "0" * 64,
                    }
                )
    doc = {"schema_version": 1, "envs": envs, "episodes": episodes, "bootstrap": {"seed": 0}}
    if agent is not None:
        doc["agent"] = {"name": agent, "spec": agent, "checkpoint_sha256": None}
    return doc


def _planted(seed=0, gain=40, noise=20):
    """A at about 50% success; B = A with ``gain`` net extra successes out of 400 (``gain`` of
    A's failures turned into successes), plus ``noise`` flips each way that cancel out."""
    rng = np.random.default_rng(seed)
    a = rng.random(RUNS * M) < 0.5
    b = a.copy()
    fails, wins = rng.permutation(np.flatnonzero(~a)), rng.permutation(np.flatnonzero(a))
    b[fails[: gain + noise]] = True
    b[wins[:noise]] = False
    return a.reshape(RUNS, M), b.reshape(RUNS, M)


def test_finds_a_planted_ten_point_difference():
    a, b = _planted()
    out = compare(_doc({"E": a}), _doc({"E": b}))
    assert set(out) == KEYS | SIDES  # one env: DESIGN's keys and the two sides
    assert out["a"] == {"name": "A", "file": None} and out["b"] == {"name": "B", "file": None}
    assert out["n_pairs"] == RUNS * M
    assert out["diff"] == pytest.approx(0.10)
    assert 0 < out["ci_low"] < 0.10 < out["ci_high"]
    assert out["verdict"].startswith("B vs A: B − A = +10.0 points, 95% CI [+")
    numbers = re.fullmatch(VERDICT, out["verdict"])
    assert numbers and numbers[4] == "B"
    assert [float(x) for x in numbers.groups()[:3]] == [
        round(100 * out[k], 1) for k in ("diff", "ci_low", "ci_high")
    ]
    assert out["prob_improvement"] > 0.5
    d = (b.astype(float) - a).ravel()
    assert out["min_detectable_diff"] == pytest.approx(Z_POWER * d.std(ddof=1) / math.sqrt(d.size))
    assert pytest.approx(2.8, abs=0.005) == Z_POWER
    json.dumps(out)
    # the other way round, A is better; the numbers stay B − A, signed
    back = compare(_doc({"E": b}), _doc({"E": a}))
    assert back["diff"] == pytest.approx(-0.10)
    assert back["ci_high"] < 0
    numbers = re.fullmatch(VERDICT, back["verdict"])
    assert numbers and numbers[4] == "A" and numbers[1] == "-10.0"
    assert (float(numbers[2]), float(numbers[3])) == (
        round(100 * back["ci_low"], 1),
        round(100 * back["ci_high"], 1),
    )


def test_identical_files_show_no_difference():
    a, _ = _planted()
    doc = _doc({"E": a})
    out = compare(doc, doc)
    assert out["diff"] == 0.0
    assert out["ci_low"] <= 0.0 <= out["ci_high"]
    assert out["prob_improvement"] == 0.5
    assert out["min_detectable_diff"] == 0.0
    assert out["verdict"].startswith(
        "B vs A: B − A = +0.0 points, 95% CI [+0.0, +0.0]; no detectable difference; "
    )


def test_no_difference_says_how_many_pairs_would_detect_five_points():
    a, b = _planted(gain=0, noise=30)  # 60 disagreements that cancel out
    out = compare(_doc({"E": a}), _doc({"E": b}))
    assert out["diff"] == 0.0 and out["ci_low"] < 0 < out["ci_high"]
    sd = np.std((b.astype(float) - a).ravel(), ddof=1)
    n = pairs_needed(sd)
    assert n == math.ceil((Z_POWER * sd / 0.05) ** 2)
    low, high = (f"{100 * out[k]:+.1f}" for k in ("ci_low", "ci_high"))
    assert out["verdict"] == (
        f"B vs A: B − A = +0.0 points, 95% CI [{low}, {high}]; no detectable difference; "
        f"about {n} paired episodes would detect 5 points"
    )
    assert low.startswith("-") and high.startswith("+")


def test_is_deterministic_given_the_seed():
    a, b = _planted(seed=3)
    da, db = _doc({"E": a}), _doc({"E": b})
    assert compare(da, db, bootstrap_seed=1) == compare(da, db, bootstrap_seed=1)
    # the seed matters (intervals of 0/1 data sit on a grid, so look at several seeds)
    cis = {
        tuple(compare(da, db, bootstrap_seed=s)[k] for k in ("ci_low", "ci_high")) for s in range(5)
    }
    assert len(cis) > 1


def test_pairs_only_the_shared_episodes():
    a, b = _planted()
    da = _doc({"E": a})
    db = _doc({"E": b[: RUNS // 2]})  # B ran half the seeds
    db["episodes"] += _doc({"E": b}, seed_offset=10**6)["episodes"]  # and others A never ran
    out = compare(da, db)
    assert out["n_pairs"] == RUNS // 2 * M
    assert out["diff"] == pytest.approx(np.mean(b[: RUNS // 2]) - np.mean(a[: RUNS // 2]))


def test_several_envs_add_by_env():
    a, b = _planted(seed=1)
    a2, b2 = _planted(seed=2, gain=0)
    out = compare(_doc({"E": a, "F": a2}), _doc({"E": b, "F": b2}))
    assert set(out) == KEYS | SIDES | {"by_env"}
    assert list(out["by_env"]) == ["E", "F"]
    assert all(set(v) == KEYS for v in out["by_env"].values())
    assert out["n_pairs"] == 2 * RUNS * M
    assert re.fullmatch(VERDICT, out["by_env"]["E"]["verdict"])[4] == "B"
    assert "; no detectable difference" in out["by_env"]["F"]["verdict"]
    assert out["by_env"]["F"]["diff"] == 0.0
    assert out["diff"] == pytest.approx(0.05)
    json.loads(json.dumps(out))


def test_prob_improvement_is_rliables():
    from rliable import metrics

    rng = np.random.default_rng(5)
    a = rng.random((30, 2, 5)) < 0.5  # runs x envs x episodes
    b = rng.random((30, 2, 5)) < 0.6
    out = compare(_doc({"E": a[:, 0], "F": a[:, 1]}), _doc({"E": b[:, 0], "F": b[:, 1]}))
    expected = metrics.probability_of_improvement(b.mean(axis=2), a.mean(axis=2))
    assert out["prob_improvement"] == pytest.approx(expected, abs=1e-12)
    for i, env_id in enumerate(["E", "F"]):
        one = metrics.probability_of_improvement(b[:, i].mean(1)[:, None], a[:, i].mean(1)[:, None])
        assert out["by_env"][env_id]["prob_improvement"] == pytest.approx(one, abs=1e-12)


@pytest.mark.parametrize(
    ("field", "other", "words"),
    [("version", 1, "versions"), ("data_hash", "cd" * 32, "data hashes")],
)
def test_refuses_other_env_versions_or_data(field, other, words):
    a, b = _planted()
    da, db = _doc({"E": a}), _doc({"E": b}, **{field: other})
    with pytest.raises(BadInput, match=f"different {words} of E"):
        compare(da, db)


def test_refuses_files_without_shared_episodes():
    a, b = _planted()
    with pytest.raises(BadInput, match="share no episode"):
        compare(_doc({"E": a}), _doc({"E": b}, seed_offset=10**6))
    with pytest.raises(BadInput, match="share no episode"):
        compare(_doc({"E": a}), _doc({"F": b}))


def test_the_verdict_names_both_agents_and_files_and_shows_the_numbers_first():
    a, b = _planted(gain=0, noise=30)  # no difference: the interval holds zero
    out = compare(
        _doc({"E": a}, agent="sft"),
        _doc({"E": b}, agent="sft+grpo"),
        files=("runs/a.json", "runs/b.json"),
    )
    assert out["a"] == {"name": "sft", "file": "runs/a.json"}
    assert out["b"] == {"name": "sft+grpo", "file": "runs/b.json"}
    head = "sft+grpo (runs/b.json) vs sft (runs/a.json): sft+grpo − sft = +0.0 points, 95% CI ["
    assert out["verdict"].startswith(head)
    numbers, verdict = out["verdict"].split("; ", 1)
    assert re.search(rf"\[{NUM}, {NUM}\]$", numbers)
    assert verdict.startswith("no detectable difference")
    better = compare(_doc({"E": a}, agent="sft"), _doc({"E": b | a}, agent="sft+grpo"))
    assert better["verdict"].startswith("sft+grpo vs sft: sft+grpo − sft = +")
    assert better["verdict"].endswith("; sft+grpo better")
    names = compare(_doc({"E": a}), _doc({"E": b | a}), names=("before", "after"))
    assert names["verdict"].startswith("after vs before: after − before = +")


def test_sides_with_the_same_agent_are_told_apart_by_file_then_position():
    docs = [_doc({}, agent="random"), _doc({}, agent="random"), _doc({}, agent="oracle")]
    assert agent_labels(docs, ["a.json", "b.json", "c.json"]) == [
        "random (a.json)",
        "random (b.json)",
        "oracle",
    ]
    assert agent_labels(docs, ["a.json", "a.json", None]) == ["random #1", "random #2", "oracle"]
    assert agent_labels([_doc({}), _doc({})], [None, None]) == ["A", "B"]
    a, _ = _planted()
    doc = _doc({"E": a}, agent="random")
    out = compare(doc, doc, files=("x.json", "y.json"))
    assert out["verdict"].startswith(
        "random (y.json) vs random (x.json): random (y.json) − random (x.json) = +0.0 points"
    )
