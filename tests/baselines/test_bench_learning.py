"""bench learning: the pipeline's shape on a smoke budget (speed and success are measured by
the full run, never asserted), and its refusals."""

import io
import subprocess
import sys

from rich.console import Console

from agentgym.bench import run_bench


def test_quick_run_reports_every_checkpoint_and_the_paired_comparisons():
    doc = run_bench("learning", Console(file=io.StringIO(), width=200), quick=True, rl_steps=3)
    variants = [r["variant"] for r in doc["rows"]]
    assert variants[0] == "sft" and variants.count("grpo") == variants.count("gigpo") == 3
    assert doc["budget"]["steps"] == 3
    assert all(r["n"] == doc["budget"]["test_seeds"] for r in doc["rows"])
    seconds = [r["seconds"] for r in doc["rows"] if r["variant"] == "grpo"]
    assert seconds == sorted(seconds) and seconds[0] >= doc["rows"][0]["seconds"]
    tokens = [r["rl_tokens"] for r in doc["rows"] if r["variant"] == "grpo"]
    assert doc["rows"][0]["rl_tokens"] == 0 and 0 < tokens[0] < tokens[1] < tokens[2]
    assert set(doc["comparisons"]) == {"grpo vs sft", "gigpo vs grpo"}
    assert all(c["n_pairs"] == doc["budget"]["test_seeds"] for c in doc["comparisons"].values())
    assert set(doc["goal"]) == {"success", "seconds", "met"}


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "agentgym.cli", "bench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_clashing_or_misplaced_variants_exit_2_before_any_work():
    clash = _cli("learning", "--quick", "--variants", "grpo+rloo")
    assert clash.returncode == 2 and "grpo and rloo" in clash.stderr
    misplaced = _cli("search", "--quick", "--variants", "grpo")
    assert misplaced.returncode == 2 and "learning only" in misplaced.stderr
    steps = _cli("trainer", "--quick", "--rl-steps", "3")
    assert steps.returncode == 2 and "--rl-steps applies to bench learning only" in steps.stderr
    zero = _cli("learning", "--quick", "--rl-steps", "0")
    assert zero.returncode == 2 and "at least 1" in zero.stderr
    env = _cli("search", "--quick", "--env", "agentgym/Search-Free-Small-v0")
    assert env.returncode == 2 and "--env applies to bench learning only" in env.stderr


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


def test_the_free_text_recipe_trains_slca_and_dre_from_one_warm_start():
    console = Console(file=io.StringIO(), width=200)
    doc = run_bench(
        "learning",
        console,
        quick=True,
        rl_steps=1,
        variants="slca,dre",
        env="agentgym/Search-Free-Small-v0",
    )
    assert doc["env"] == "agentgym/Search-Free-Small-v0" and doc["goal"] is None
    assert doc["budget"]["sft_think"] is False
    assert [r["variant"] for r in doc["rows"]] == ["sft", "slca", "dre"]
    assert set(doc["comparisons"]) == set()  # no grpo row to compare against


def test_the_alfworld_recipe_keeps_the_task_in_view_from_warm_start_to_evaluation():
    console = Console(file=io.StringIO(), width=200)
    doc = run_bench(
        "learning",
        console,
        quick=True,
        rl_steps=1,
        variants="gigpo",
        env="agentgym/ALFWorld-Small-v0",
    )
    assert doc["env"] == "agentgym/ALFWorld-Small-v0"
    assert (doc["budget"]["history"], doc["budget"]["pin_first"]) == (2, True)
    assert [r["variant"] for r in doc["rows"]] == ["sft", "gigpo"]
