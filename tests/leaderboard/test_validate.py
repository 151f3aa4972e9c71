import copy
import json
from pathlib import Path

import pytest

from agentgym.core.errors import BadInput
from agentgym.harness.evaluate import evaluate
from agentgym.harness.results import SCHEMA_PATH, results_schema
from agentgym.harness.stats import aggregate
from agentgym.leaderboard.validate import (
    BadSubmission,
    check_submission,
    content_hash,
    load_submission,
)

MENU = "agentgym/Search-Menu-Small-v0"
FREE = "agentgym/Search-Free-Small-v0"


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("results") / "r.json"
    return evaluate("oracle", [MENU, FREE], seeds=4, episodes_per_seed=2, root_seed=5, out=out)


def recompute(doc: dict) -> dict:
    """The document with aggregates recomputed, as an honest-looking forger would."""
    boot = doc["bootstrap"]
    doc["aggregates"] = aggregate(doc["episodes"], bootstrap_seed=boot["seed"], reps=boot["reps"])
    return doc


def episode(doc: dict, env_id: str, run: int, index: int) -> dict:
    return next(
        ep
        for ep in doc["episodes"]
        if (ep["env_id"], ep["run"], ep["episode"]) == (env_id, run, index)
    )


def refused(doc: dict) -> str:
    with pytest.raises(BadSubmission) as info:
        check_submission(doc)
    return str(info.value)


def test_a_file_that_eval_wrote_passes(good):
    check_submission(copy.deepcopy(good))


def test_bad_submission_is_bad_input():
    assert issubclass(BadSubmission, BadInput)


# ---------------------------------------------------------------------------- loading


def test_load_returns_the_document_and_its_bytes(good, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good))
    doc, raw = load_submission(path)
    assert doc == good
    assert raw == path.read_bytes()


def test_truncated_file_is_refused(good, tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(good, indent=1)[:5000])
    with pytest.raises(BadSubmission, match="is not valid JSON \\(truncated or corrupted\\?\\)"):
        load_submission(path)


def test_missing_file_and_non_object_are_refused(tmp_path):
    with pytest.raises(BadSubmission, match="no such results file"):
        load_submission(tmp_path / "absent.json")
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(BadSubmission, match="is a JSON list, not a results object"):
        load_submission(path)


def test_content_hash_ignores_formatting_but_not_content(good):
    compact = json.dumps(good, separators=(",", ":")).encode()
    indented = json.dumps(good, indent=4).encode()
    reordered = json.dumps(dict(reversed(list(good.items())))).encode()
    assert content_hash(compact) == content_hash(indented) == content_hash(reordered)
    assert content_hash(indented) == content_hash(good) == content_hash(indented.decode())
    changed = copy.deepcopy(good)
    changed["episodes"][0]["seconds"] += 1.0
    assert content_hash(changed) != content_hash(good)


# ---------------------------------------------------------------------------- schema


def test_wrong_type_names_the_json_path(good):
    doc = copy.deepcopy(good)
    doc["episodes"][3]["success"] = "yes"
    message = refused(doc)
    assert "$.episodes[3].success" in message
    assert "is not of type 'boolean'" in message


def test_missing_field_is_named(good):
    doc = copy.deepcopy(good)
    del doc["episodes"][0]["transcript_sha256"]
    assert "at $.episodes[0]: 'transcript_sha256' is a required property" in refused(doc)
    doc = copy.deepcopy(good)
    del doc["bootstrap"]
    assert "at $: 'bootstrap' is a required property" in refused(doc)


def test_a_float_where_an_integer_belongs_is_refused(good):
    doc = copy.deepcopy(good)
    doc["episodes"][1]["run"] = 0.0
    assert "at $.episodes[1].run: 0.0 is not of type 'integer'" in refused(doc)


def test_non_finite_numbers_are_refused(good, tmp_path):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(good).replace('"mean": 1.0', '"mean": NaN', 1))
    with pytest.raises(BadSubmission, match="contains NaN, which is not a JSON number"):
        load_submission(path)
    doc = copy.deepcopy(good)
    doc["aggregates"][MENU]["mean"] = float("nan")
    assert "mean is nan in the file but 1.0 recomputed" in refused(doc)


def test_other_schema_version_is_refused(good):
    doc = copy.deepcopy(good)
    doc["schema_version"] = 2
    assert "schema_version 2 but this leaderboard reads schema_version 1" in refused(doc)


def test_added_fields_are_allowed(good):
    doc = copy.deepcopy(good)
    doc["controls"] = {"positive": 1.0}
    doc["episodes"][0]["note"] = "fields may be added by later issues"
    check_submission(doc)


# ---------------------------------------------------------------------------- structure


def test_no_episodes_is_refused(good):
    doc = copy.deepcopy(good)
    doc["episodes"] = []
    assert refused(doc) == "the results file has no episodes: there is nothing to rank"


def test_duplicate_episode_key_is_refused(good):
    doc = copy.deepcopy(good)
    doc["episodes"].append(dict(episode(doc, MENU, 1, 0)))
    message = refused(doc)
    assert f"episode ({MENU}, run 1, episode 0) appears more than once" in message


def test_undeclared_env_is_refused(good):
    doc = copy.deepcopy(good)
    doc["envs"] = [e for e in doc["envs"] if e["id"] != FREE]
    assert f"episodes of {FREE} are in the file but it is not in envs" in refused(doc)


def test_a_dropped_unlucky_episode_is_refused(good):
    doc = copy.deepcopy(good)
    doc["episodes"] = [
        ep for ep in doc["episodes"] if (ep["env_id"], ep["run"], ep["episode"]) != (MENU, 2, 1)
    ]
    message = refused(recompute(doc))
    assert f"{MENU} has 7 of its 8 planned episodes (run 2 episode 1 is missing)" in message


def test_a_chosen_seed_is_refused(good):
    doc = copy.deepcopy(good)
    doc["episodes"][0]["seed"] = 12345
    assert "has seed 12345 but root_seed 5 gives" in refused(doc)


# ---------------------------------------------------------------------------- aggregates


def test_an_edited_episode_with_old_aggregates_is_refused(good):
    doc = copy.deepcopy(good)
    episode(doc, MENU, 0, 0)["success"] = False
    message = refused(doc)
    assert message.startswith(f"aggregates of {MENU} disagree with its episodes: mean is 1.0")
    assert "recomputed (bootstrap seed 5, 2000 reps)" in message


def test_edited_aggregates_are_refused(good):
    doc = copy.deepcopy(good)
    doc["aggregates"][FREE]["ci_low"] = 0.9
    assert refused(doc).startswith(f"aggregates of {FREE} disagree with its episodes: ci_low")
    doc = copy.deepcopy(good)
    kind = next(iter(doc["aggregates"][MENU]["by_task_type"]))
    doc["aggregates"][MENU]["by_task_type"][kind]["iqm"] = 0.5
    assert f"aggregates of {MENU}, task type {kind}, disagree" in refused(doc)
    doc = copy.deepcopy(good)
    del doc["aggregates"][FREE]
    assert f"aggregates lack {FREE}, which has episodes" in refused(doc)


def test_exact_intervals_are_named_and_checked(good):
    summary = good["aggregates"][MENU]  # the oracle wins every run: an exact interval
    assert summary["ci_method"] == "clopper-pearson" and summary["ci_low"] < 1.0
    doc = copy.deepcopy(good)
    doc["aggregates"][MENU]["ci_method"] = "bootstrap-percentile"
    assert refused(doc).startswith(
        f"aggregates of {MENU} disagree with its episodes: ci_method is 'bootstrap-percentile'"
    )
    doc["aggregates"][MENU]["ci_method"] = "wald"
    assert "ci_method" in refused(doc) and "'wald' is not one of" in refused(doc)
    doc = copy.deepcopy(good)  # the zero-width bootstrap interval under today's method name
    doc["aggregates"][MENU].update(ci_low=1.0, ci_high=1.0)
    assert refused(doc).startswith(f"aggregates of {MENU} disagree with its episodes: ci_low")


def test_a_file_from_before_ci_method_passes_with_its_bootstrap_intervals(good):
    doc = copy.deepcopy(good)
    boot = doc["bootstrap"]
    doc["aggregates"] = aggregate(
        doc["episodes"], bootstrap_seed=boot["seed"], reps=boot["reps"], exact_if_constant=False
    )
    for env in doc["aggregates"].values():
        for summary in (env, *env["by_task_type"].values()):
            assert summary.pop("ci_method") == "bootstrap-percentile"
    assert doc["aggregates"][MENU]["ci_low"] == doc["aggregates"][MENU]["ci_high"] == 1.0
    check_submission(doc)
    doc["aggregates"][MENU].update(ci_low=0.9)
    assert refused(doc).startswith(f"aggregates of {MENU} disagree with its episodes: ci_low")


def test_aggregates_within_tolerance_pass(good):
    doc = copy.deepcopy(good)
    doc["aggregates"][MENU]["mean"] -= 1e-12
    check_submission(doc)


# ---------------------------------------------------------------------------- installation


def test_version_mismatch_names_both_versions(good):
    doc = copy.deepcopy(good)
    doc["envs"][0]["version"] = 1
    message = refused(doc)
    assert message == (
        f"the file records version 1 of {MENU} but this installation's {MENU} is version 0"
    )


def test_unknown_version_of_an_id_names_the_installed_one(good):
    doc = copy.deepcopy(good)
    newer = MENU.replace("-v0", "-v7")
    doc["envs"][0].update(id=newer, version=7)
    for ep in doc["episodes"]:
        if ep["env_id"] == MENU:
            ep["env_id"] = newer
    message = refused(recompute(doc))
    installed = f"{MENU}, {MENU.replace('-v0', '-v1')}"  # Search-Menu-Small has v0 and v1
    assert (
        f"{newer} is not registered in this installation (this installation has {installed})"
        in (message)
    )


def test_data_hash_mismatch_names_both_hashes(good):
    doc = copy.deepcopy(good)
    ours = doc["envs"][1]["data_hash"]
    doc["envs"][1]["data_hash"] = "0" * 64
    message = refused(doc)
    assert f"the data of {FREE} differ from this installation's" in message
    assert "0" * 64 in message and ours in message


def test_unbuildable_env_is_refused(good):
    doc = copy.deepcopy(good)
    doc["envs"][0]["kwargs"] = {"no_such_option": 1}
    assert f"cannot build {MENU} as the file describes it" in refused(doc)


def test_schema_file_is_valid_json_schema():
    import jsonschema

    path = Path(__file__).parents[2] / "agentgym" / "harness" / "results.schema.json"
    assert path == SCHEMA_PATH
    for schema in (json.loads(path.read_text()), results_schema()):
        jsonschema.validators.validator_for(schema).check_schema(schema)
