"""bench learning: the pipeline's shape on a smoke budget (speed and success are measured by
the full run, never asserted), and its refusals."""

import io
import json
import re

import torch
from clirun import cli
from rich.console import Console

from agentgym.bench import run_bench

SMALL = "agentgym/Search-Menu-Small-v1"
"""The smoke runs' env (``--quick`` without ``--env`` is the main job's check instead)."""


def test_quick_run_spends_one_token_budget_per_variant_and_seed_and_says_so(tmp_path):
    console = Console(file=io.StringIO(), width=300)
    plot = tmp_path / "curves.png"
    doc = run_bench("learning", console, quick=True, env=SMALL, seeds=2, plot=str(plot))
    budget = doc["budget"]
    assert (budget["token_budget"], budget["seeds"], budget["aggregation"]) == (
        400,
        [0, 1],
        "token-mean",
    )
    assert budget["scored"] == "final checkpoints" and plot.stat().st_size > 0
    text = console.file.getvalue()
    assert "400 generated tokens" in text and "training seeds 0, 1" in text
    assert "aggregation token-mean" in text
    assert [r["variant"] for r in doc["rows"]] == ["sft", "grpo", "gigpo"]
    for row in doc["rows"]:
        assert len(row["per_seed"]) == 2 and row["n"] == 2 * budget["test_seeds"]
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
        if row["variant"] != "sft":  # every run spent the budget, and no more than a step over
            assert all(t >= 400 for t in row["generated_tokens"]) and min(row["rl_steps"]) >= 1
    assert set(doc["comparisons"]) == {"grpo vs sft", "gigpo vs sft", "gigpo vs grpo"}
    for name, c in doc["comparisons"].items():
        assert c["n_pairs"] == 2 * budget["test_seeds"] and len(c["per_seed"]) == 2
        assert c["ci_low"] <= c["diff"] <= c["ci_high"]
        b, a = name.split(" vs ")  # the wording of every paired comparison: B − A, then verdict
        num = r"[+-]\d+\.\d"
        assert re.fullmatch(
            rf"{b} − {a} = {num} points, 95% CI \[{num}, {num}\] over training and test seeds; "
            rf"({a} better|{b} better|no detectable difference)",
            c["verdict"],
        ), c["verdict"]
    assert [len(c) for c in doc["curves"]["grpo"]] == [len(c) for c in doc["curves"]["gigpo"]]


def _cli(*args):
    return cli("bench", *args, timeout=300)


def test_clashing_or_misplaced_variants_exit_2_before_any_work():
    clash = _cli("learning", "--quick", "--variants", "grpo+rloo")
    assert clash.returncode == 2 and "grpo and rloo" in clash.stderr
    misplaced = _cli("search", "--quick", "--variants", "grpo")
    assert misplaced.returncode == 2 and "bench learning and credit only" in misplaced.stderr
    steps = _cli("trainer", "--quick", "--rl-steps", "3")
    assert steps.returncode == 2 and "--rl-steps applies to bench learning only" in steps.stderr
    zero = _cli("learning", "--quick", "--rl-steps", "0")
    assert zero.returncode == 2 and "at least 1" in zero.stderr
    env = _cli("search", "--quick", "--env", "agentgym/Search-Free-Small-v0")
    words = "--env applies to bench learning, credit and attribution only"
    assert env.returncode == 2 and words in env.stderr
    seeds = _cli("harness", "--quick", "--seeds", "2")
    assert seeds.returncode == 2 and "--seeds applies to bench learning only" in seeds.stderr
    negative = _cli("learning", "--quick", "--first-seed", "-1")
    assert negative.returncode == 2 and "--first-seed must be at least 0" in negative.stderr
    none = _cli("learning", "--quick", "--seeds", "0")
    assert none.returncode == 2 and "--seeds and --tokens must be at least 1" in none.stderr
    mode = _cli("learning", "--quick", "--aggregation", "median")
    assert mode.returncode == 2 and "aggregation" in mode.stderr


def test_an_env_without_a_recipe_or_a_variant_that_misfits_it_exits_2_before_any_work():
    unknown = _cli("learning", "--quick", "--env", "agentgym/Search-Menu-Large-v0")
    assert unknown.returncode == 2 and "no recipe for 'agentgym/Search-Menu-Large-v0'" in (
        unknown.stderr
    )
    misfit = _cli(
        "learning", "--quick", "--env", "agentgym/Search-Free-Small-v0", "--variants", "snc"
    )
    assert misfit.returncode == 2 and "snc needs info keys" in misfit.stderr
    assert "warm start" not in misfit.stdout


def _one_step(env, variants, **options):
    """An env's recipe, quick: one seed, one RL step per variant."""
    console = Console(file=io.StringIO(), width=300)
    return run_bench(
        "learning", console, quick=True, rl_steps=1, seeds=1, variants=variants, env=env, **options
    )


def test_the_free_text_recipe_trains_slca_and_dre_from_one_warm_start():
    doc = _one_step("agentgym/Search-Free-Small-v0", "slca,dre")
    assert doc["env"] == "agentgym/Search-Free-Small-v0" and doc["budget"]["steps"] == 1
    assert doc["budget"]["sft_think"] is False
    assert [r["variant"] for r in doc["rows"]] == ["sft", "slca", "dre"]
    # each against its warm start, none against grpo (no grpo row)
    assert set(doc["comparisons"]) == {"slca vs sft", "dre vs sft"}


def test_the_alfworld_recipe_keeps_the_task_in_view_from_warm_start_to_evaluation():
    doc = _one_step("agentgym/ALFWorld-Small-v0", "gigpo")
    assert doc["env"] == "agentgym/ALFWorld-Small-v0"
    assert (doc["budget"]["history"], doc["budget"]["pin_first"]) == (2, True)
    assert [r["variant"] for r in doc["rows"]] == ["sft", "gigpo"]


def test_the_tools_recipe_trains_a_teacher_per_domain_for_roadmopd_and_reports_their_cost(
    tmp_path,
):
    work = tmp_path / "work"
    doc = _one_step("agentgym/Tools-Mixed-v1", "grpo,roadmopd", work=str(work))
    assert [r["variant"] for r in doc["rows"]] == ["sft", "grpo", "roadmopd"]
    assert doc["budget"]["env_kwargs"] == '{"schemas": false}'
    domains = ("ecommerce", "accounts", "travel")
    for domain in domains:  # each teacher: the recipe's grpo on its domain, from the warm start
        config = json.loads((work / f"teacher-{domain}-0" / "train_config.json").read_text())
        assert config["env"] == f"agentgym/Tools-{domain.capitalize()}-v1"
        assert (config["credit"], config["init"]) == ("grpo", str(work / "warm-0" / "sft"))
    student = json.loads((work / "roadmopd-0" / "train_config.json").read_text())
    assert student["teachers"] == ",".join(f"{d}={work}/teacher-{d}-0" for d in domains)
    rows = {r["variant"]: r for r in doc["rows"]}
    assert rows["roadmopd"]["teachers_train_seconds"][0] > 0
    assert rows["grpo"]["teachers_train_seconds"] == [0.0]
    assert json.loads((work / "grpo-0" / "train_config.json").read_text())["teachers"] == ""
    # the evaluation played the env the runs trained on
    scored = json.loads((work / "roadmopd-0" / "bench-learning.json").read_text())
    assert [e["kwargs"] for e in scored["result"]["doc"]["envs"]] == [{"schemas": False}]


def test_a_work_folder_resumes_finished_runs_and_lets_seeds_run_apart(tmp_path):
    work = tmp_path / "work"
    first = Console(file=io.StringIO(), width=300)

    def grpo(console, **options):
        return run_bench(
            "learning", console, quick=True, env=SMALL, variants="grpo", work=str(work), **options
        )

    one = grpo(first, seeds=1)
    model = work / "grpo-0" / "model.safetensors"
    stamp = model.stat().st_mtime_ns
    second = Console(file=io.StringIO(), width=300)
    apart = grpo(second, seeds=1, first_seed=1)
    assert apart["budget"]["seeds"] == [1] and "seed 0" not in second.file.getvalue()
    last = Console(file=io.StringIO(), width=300)
    both = grpo(last, seeds=2)
    text = last.file.getvalue()
    assert text.count("finished earlier, reused") == 4  # two warm starts, two grpo runs
    assert model.stat().st_mtime_ns == stamp
    assert [r["per_seed"] for r in both["rows"]] == [
        a["per_seed"] + b["per_seed"] for a, b in zip(one["rows"], apart["rows"], strict=True)
    ]
    changed = Console(file=io.StringIO(), width=300)
    grpo(changed, seeds=1, tokens=500)
    text = changed.file.getvalue()  # another RL budget: the same warm start, a new run
    assert "warm start: finished earlier" in text and "grpo: finished earlier" not in text
    assert model.stat().st_mtime_ns != stamp


def test_a_recipe_chosen_on_val_is_scored_on_test_without_training_again(tmp_path):
    work = tmp_path / "work"

    def grpo(split):
        console = Console(file=io.StringIO(), width=300)
        doc = run_bench(
            "learning", console, quick=True, env=SMALL, variants="grpo", seeds=1,
            curve=False, work=str(work), split=split,
        )  # fmt: skip
        return doc, console.file.getvalue()

    val, text = grpo("val")
    assert val["budget"]["split"] == "val" and "4 val seeds" in text
    done = json.loads((work / "grpo-0" / "bench-learning.json").read_text())
    assert done["result"]["doc"]["split"] == "val"
    model = work / "grpo-0" / "model.safetensors"
    stamp = model.stat().st_mtime_ns
    test, text = grpo("test")
    assert test["budget"]["split"] == "test" and "4 test seeds" in text
    assert text.count("trained earlier") == 2 and model.stat().st_mtime_ns == stamp
    done = json.loads((work / "grpo-0" / "bench-learning.json").read_text())
    assert done["result"]["doc"]["split"] == "test"
    assert done["result"]["tokens"] == val["rows"][1]["generated_tokens"][0]
    # the threads that trained each run are recorded, and scoring again keeps them
    assert [r["threads"] for r in val["rows"]] == [[2]] * 2  # the recipe's two threads
    assert [r["threads"] for r in test["rows"]] == [r["threads"] for r in val["rows"]]
    again, text = grpo("test")
    assert text.count("finished earlier, reused") == 2
    assert again["rows"] == test["rows"]


def test_an_agents_demonstrations_warm_start_runs_of_their_own_beside_the_oracles(tmp_path):
    work = tmp_path / "work"
    reader = "agentgym.envs.search.reader:ReaderAgent"
    console = Console(file=io.StringIO(), width=300)
    doc = run_bench(
        "learning", console, quick=True, env=SMALL, variants="grpo", seeds=1, curve=False,
        work=str(work), sft_teacher=reader,
    )  # fmt: skip
    assert (doc["budget"]["sft_teacher"], doc["budget"]["sft_noise"]) == (reader, 0.0)
    assert sorted(p.name for p in work.iterdir()) == ["grpo-reader-0", "warm-reader-0"]
    oracle = run_bench(
        "learning", console, quick=True, env=SMALL, variants="grpo", seeds=1, curve=False,
        work=str(work),
    )  # fmt: skip
    assert oracle["budget"]["sft_teacher"] == "oracle"
    names = sorted(p.name for p in work.iterdir())
    assert names == ["grpo-0", "grpo-reader-0", "warm-0", "warm-reader-0"]  # both kept


def test_rl_options_train_runs_of_their_own_from_the_same_warm_start(tmp_path):
    work = tmp_path / "work"

    def grpo(**options):
        console = Console(file=io.StringIO(), width=300)
        doc = run_bench(
            "learning", console, quick=True, env=SMALL, variants="grpo", seeds=1, curve=False,
            work=str(work), **options,
        )  # fmt: skip
        return doc, console.file.getvalue()

    plain, _ = grpo()
    tuned, text = grpo(rl_options=("epochs=2", "lr=1e-3"))
    assert "warm start: finished earlier" in text and "(epochs=2, lr=0.001)" in text
    assert (plain["budget"]["epochs"], plain["budget"]["lr"]) == (1, 3e-4)  # the recipe's
    assert (tuned["budget"]["epochs"], tuned["budget"]["lr"]) == (2, 1e-3)
    assert sorted(p.name for p in work.iterdir()) == ["grpo-0", "grpo-epochs2-lr0.001-0", "warm-0"]
    trained = json.loads((work / "grpo-epochs2-lr0.001-0" / "train_config.json").read_text())
    assert (trained["epochs"], trained["lr"]) == (2, 1e-3)
    warm = json.loads((work / "warm-0" / "train_config.json").read_text())
    assert (warm["epochs"], warm["lr"]) == (1, 3e-4)  # the warm start stays the recipe's


def test_an_rl_option_outside_the_rl_loop_or_out_of_range_exits_2():
    for option, words in [
        ("sft_steps=5", "not an option of the RL loop or its sampling"),
        ("epochs=0", "--epochs and --minibatches must be at least 1"),
        ("lr=fast", "--lr expects float"),
        ("token_budget=9", "the budget is set by --tokens"),
        ("epochs", "--rl-option expects NAME=VALUE"),
    ]:
        refused = _cli("learning", "--quick", "--env", SMALL, "--rl-option", option)
        assert refused.returncode == 2 and words in refused.stderr, (option, refused.stderr)
        assert "warm start" not in refused.stdout
    check = _cli("learning", "--quick", "--rl-option", "epochs=2")
    assert check.returncode == 2 and "the main job's check trains its recipe" in check.stderr


def test_the_scoring_split_is_val_or_test_and_the_teacher_an_agent():
    refused = _cli("learning", "--quick", "--env", SMALL, "--split", "train")
    assert refused.returncode == 2 and "--split must be val or test" in refused.stderr
    unknown = _cli("learning", "--quick", "--env", SMALL, "--sft-teacher", "nosuch:Agent")
    assert unknown.returncode == 2 and "cannot import agent module 'nosuch'" in unknown.stderr


def test_without_the_curve_only_final_checkpoints_are_scored_and_teachers_are_counted(tmp_path):
    console = Console(file=io.StringIO(), width=300)
    doc = run_bench(
        "learning",
        console,
        quick=True,
        env=SMALL,
        seeds=1,
        variants="grpo,sdar",
        curve=False,
        work=str(tmp_path / "work"),
    )
    # one point per run: the final checkpoint, the only one the headline reads
    assert [len(c) for c in doc["curves"]["grpo"]] == [1]
    assert [len(c) for c in doc["curves"]["sdar"]] == [1]
    rows = {r["variant"]: r for r in doc["rows"]}
    # sdar's privileged teacher scored every turn; grpo has no teacher
    assert rows["sdar"]["teacher_tokens"][0] > 0 and rows["grpo"]["teacher_tokens"] == [0]
    assert "teachers s" in console.file.getvalue()


def test_a_finished_run_that_predates_an_option_is_reused_at_its_default():
    from agentgym.baselines.bench.learning_runs import same_settings
    from agentgym.baselines.config import TrainConfig

    cfg = TrainConfig.from_options(env="agentgym/Search-Menu-Small-v1", sft_steps=5)
    key = {"warm start": cfg.to_json(), "test_seeds": 100}
    older = {"warm start": dict(cfg.to_json()), "test_seeds": 100}
    del older["warm start"]["sft_mode"]  # a run made before the option existed
    assert same_settings(older, key) and same_settings(key, key)
    ca = {"warm start": {**cfg.to_json(), "sft_mode": "ca"}, "test_seeds": 100}
    assert not same_settings(older, ca)  # the option away from its default: not the same run
    assert not same_settings({**key, "test_seeds": 4}, key)
    assert not same_settings({**key, "extra": 1}, key)  # a setting the run has and key lacks
    assert not same_settings(None, key)


def _doc(sft, rl, gain, budget=None):
    row = lambda name, m: {"variant": name, "mean": m, "ci_low": m - 0.05, "ci_high": m + 0.05}  # noqa: E731
    return {
        "budget": budget or {"env": "x", "token_budget": 10},
        "rows": [row("sft", sft), row("gigpo", rl)],
        "comparisons": {
            "gigpo vs sft": {"diff": gain, "ci_low": gain - 0.1, "ci_high": gain + 0.1}
        },
    }


def test_the_check_says_changed_when_a_figure_leaves_its_recorded_interval(tmp_path, monkeypatch):
    from agentgym.baselines.bench import learning_check

    monkeypatch.setattr(learning_check, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(learning_check, "variant", lambda: "gigpo")
    quiet = Console(file=io.StringIO())
    learning_check.check(quiet, _doc(0.40, 0.55, 0.15), record=True)
    same = learning_check.check(quiet, _doc(0.42, 0.52, 0.10), record=False)
    assert same["verdicts"] == {"sft": "same", "gigpo": "same", "gigpo - sft": "same"}
    moved = learning_check.check(quiet, _doc(0.40, 0.41, 0.01), record=False)
    assert moved["verdicts"] == {"sft": "same", "gigpo": "changed", "gigpo - sft": "changed"}
    other = learning_check.check(quiet, _doc(0.40, 0.55, 0.15, {"env": "y"}), record=False)
    assert set(other["verdicts"].values()) == {"not comparable"}
    # an option added since the record, at its default, keeps the record comparable
    newer = {"env": "x", "token_budget": 10, "kl_coef": 0.0}
    later = learning_check.check(quiet, _doc(0.42, 0.52, 0.10, newer), record=False)
    assert set(later["verdicts"].values()) == {"same"}


def test_quick_without_an_env_checks_the_main_job_against_its_record(tmp_path, monkeypatch):
    """The main job's recipe, at a budget shrunk further for the test, recorded and checked."""
    from agentgym.baselines.bench import learning_check
    from agentgym.baselines.config import QUICKSTART

    monkeypatch.setattr(learning_check, "RECORD", tmp_path / "record.json")
    small = {"sft_steps": 5, "sft_episodes": 4, "token_budget": 300, "preset": "nano"}
    monkeypatch.setattr(learning_check, "SMALL", small)
    monkeypatch.setattr(learning_check, "TEST_SEEDS", 4)
    console = Console(file=io.StringIO(), width=300)
    threads = torch.get_num_threads()
    recorded = run_bench("learning", console, quick=True, record=True, work=str(tmp_path / "w"))
    assert recorded["env"] == QUICKSTART.env
    assert [r["variant"] for r in recorded["rows"]] == ["sft", QUICKSTART.credit]
    assert recorded["budget"]["sft_steps"] == 5 and recorded["budget"]["seeds"] == [0]
    again = run_bench("learning", console, quick=True, work=str(tmp_path / "w2"))  # retrained
    assert set(again["check"]["verdicts"].values()) == {"same"}
    assert "against record.json" in console.file.getvalue()
    assert torch.get_num_threads() == threads  # pinned for training, then restored


def test_record_is_refused_outside_the_main_jobs_check():
    refused = _cli("learning", "--quick", "--env", SMALL, "--record")
    assert refused.returncode == 2 and "--record writes the main job's check" in refused.stderr
