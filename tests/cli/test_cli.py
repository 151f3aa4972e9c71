import json
from pathlib import Path

import pytest
from clirun import cli

from agentgym.baselines.config import QUICKSTART

SMALL = "agentgym/Search-Menu-Small-v0"


def test_envs_json_is_exactly_one_document():
    out = cli("envs", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {"id": SMALL, "family": "search"}.items() <= next(
        r for r in rows if r["id"] == SMALL
    ).items()
    assert all(set(r) == {"id", "family", "description", "note"} for r in rows)


def test_envs_family_filter_and_table():
    assert json.loads(cli("envs", "--family", "search", "--json").stdout)
    tools = {r["id"]: r for r in json.loads(cli("envs", "--family", "tools", "--json").stdout)}
    assert {"agentgym/Tools-Ecommerce-v0", "agentgym/Tools-Travel-Async-v0"} <= set(tools)
    # a behaviour fix is a new version beside the old id, which keeps working
    assert {"agentgym/Tools-Ecommerce-v1", "agentgym/Tools-Travel-Async-v1"} <= set(tools)
    assert "without the grammar" in tools["agentgym/BFCL-Simple-v1"]["description"]
    assert {r["family"] for r in tools.values()} == {"tools"}
    # BFCL ids say how many entries were excluded for contradicting their own schema
    assert "excluded (ground truth contradicts" in tools["agentgym/BFCL-Simple-v0"]["note"]
    table = cli("envs")
    assert table.returncode == 0 and SMALL in table.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (("envs", "--family", "games"), "unknown family"),
        (("check", "agentgym/Search-Menu-Smal-v0"), "Did you mean"),
        (
            ("eval", "--agent", "nobody", "--env", SMALL, "--seeds", "2", "--out", "x.json"),
            "unknown agent",
        ),
        (
            ("eval", "--agent", "random", "--env", SMALL, "--seeds", "0", "--out", "x.json"),
            "at least 1",
        ),
        (
            (
                "eval",
                "--agent",
                "random",
                "--env",
                SMALL,
                "--seeds",
                "2",
                "--out",
                "x.json",
                "--env-kwarg",
                "colour=blue",
            ),
            "does not take",
        ),
        (
            (
                "eval",
                "--agent",
                "random",
                "--env",
                SMALL,
                "--seeds",
                "2",
                "--out",
                "x.json",
                "--split",
                "dev",
            ),
            "unknown split",
        ),
        (
            ("eval", "--agent", "random", "--env", SMALL, "--seeds", "two", "--out", "x.json"),
            "--seeds",
        ),
        (("frobnicate",), "No such command"),
        (("eval", "--agent", "random", "--env", SMALL, "--seeds", "1", "--out", "."), "directory"),
        (("bench", "everything"), "unknown bench part"),
        (
            (
                "eval",
                "--agent",
                "random",
                "--env",
                SMALL,
                "--seeds",
                "1",
                "--out",
                "x.json",
                "--backend",
                "slurm",
            ),
            "unknown backend",
        ),
        (
            (
                "eval",
                "--agent",
                "openai:ftp://x#m",
                "--env",
                SMALL,
                "--seeds",
                "1",
                "--out",
                "x.json",
            ),
            "openai:URL#model",
        ),
        (("report", "missing.json"), "no such results file"),
        (("compare", "missing.json", "missing.json"), "no such results file"),
        (("play", SMALL, "--env-kwarg", "oops"), "KEY=VALUE"),
        (("play", SMALL, "--env-kwarg", "max_turns=x"), "cannot be made with"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, words):
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("command", ["eval", "check", "play"])
def test_unknown_env_kwarg_lists_what_the_id_takes(tmp_path, command):
    args = {
        "eval": ("eval", "--agent", "random", "--env", SMALL, "--seeds", "1", "--out", "x.json"),
        "check": ("check", SMALL),
        "play": ("play", SMALL),
    }[command]
    out = cli(*args, "--env-kwarg", "foo=1", cwd=tmp_path, stdin="")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.strip().splitlines() == [
        f"agentgym: error: {SMALL} does not take foo; it takes: preset, path, fmt, retriever, "
        "search_k, ablation, provenance, split, privileged, max_turns, render_mode"
    ]
    assert not (tmp_path / "x.json").exists()


def test_check_passes_on_small():
    out = cli("check", SMALL, "--only", "oracle_wins", "--only", "adversarial_actions")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("pass") == 2


def test_eval_oracle_and_random_over_50_seeds(tmp_path):
    for agent, check in (("oracle", lambda m: m == 1.0), ("random", lambda m: m <= 0.3)):
        path = tmp_path / f"{agent}.json"
        out = cli("eval", "--agent", agent, "--env", SMALL, "--seeds", "50", "--out", str(path))
        assert out.returncode == 0, out.stderr
        doc = json.loads(path.read_text())
        agg = doc["aggregates"][SMALL]
        assert agg["n"] == 50 and check(agg["mean"]), agg
        assert len(doc["episodes"]) == 50 and doc["split"] == "test"


def test_play_by_piped_input_wins_with_the_oracle_moves():
    import agentgym

    env = agentgym.make(SMALL)
    env.reset(seed=5)
    moves = []
    while True:
        move = env.unwrapped.oracle_action()
        moves.append(move)
        *_, term, trunc, _ = env.step(move)
        if term or trunc:
            break
    out = cli("play", SMALL, "--seed", "5", stdin="\n".join(moves) + "\n")
    assert out.returncode == 0, out.stderr
    assert "Episode over: you won. Return 1." in out.stdout
    assert "[0] search:" in out.stdout


def test_play_survives_garbage_and_end_of_input():
    out = cli("play", SMALL, "--seed", "1", stdin='\n99\n{"x":\n')
    assert out.returncode == 0, out.stderr
    # lines that name no action are answered without stepping the env: no turn is spent
    assert "(that action was not valid)" not in out.stdout
    assert "no action is numbered 99" in out.stdout and "no action matches" in out.stdout
    assert "(input ended)" in out.stdout


def test_bench_search_writes_rows_and_ratios(tmp_path):
    path = tmp_path / "bench.json"
    out = cli("bench", "search", "--quick", "--json", str(path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(path.read_text())
    assert doc["part"] == "search"
    kinds = {r["kind"] for r in doc["rows"]}
    assert kinds == {"env", "bm25", "dense"}
    envs = [r for r in doc["rows"] if r["kind"] == "env"]
    assert all(r["env_steps_per_s"] > 0 for r in envs)
    assert all(r["top10_agreement"] == 1.0 for r in doc["rows"] if r["kind"] == "bm25")
    assert any(k.startswith("env/engine") for k in doc["ratios"])


@pytest.mark.parametrize("part", ["harness", "leaderboard"])
def test_bench_parts_write_rows_and_ratios(tmp_path, part):
    path = tmp_path / "bench.json"
    out = cli("bench", part, "--quick", "--json", str(path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(path.read_text())
    assert doc["part"] == part and doc["rows"] and doc["ratios"]


def test_ablate_reports_each_ablation_as_json():
    out = cli(
        "ablate",
        "--agent",
        "oracle",
        "--env",
        "agentgym/Search-Free-Small-v0",
        "--seeds",
        "10",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["baseline"]["n"] == 10 and doc["baseline"]["mean"] == 1.0
    assert set(doc["ablations"]) == {"keep_cited", "remove_cited", "remove_uncited_visited"}


def test_quickstart_runs_the_main_job(tmp_path):
    """A small budget of the same pipeline: train, evaluate five agents, compare, submit."""
    out = cli(
        "quickstart",
        *("--seeds", "6", "--sft-steps", "10", "--sft-episodes", "10", "--rl-steps", "1"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "agentgym-quickstart"
    env = QUICKSTART.env  # the default recipe's env
    assert env == "agentgym/ALFWorld-Small-v0" and f"on {env}: 10 SFT steps" in out.stdout
    assert (folder / "policy" / "agentgym_agent.json").exists()
    assert (folder / "policy" / "sft" / "agentgym_agent.json").exists()
    oracle = json.loads((folder / "oracle.json").read_text())
    assert oracle["aggregates"][env]["mean"] == 1.0
    trained = json.loads((folder / "sft+gigpo.json").read_text())  # the quickstart's variant
    assert trained["agent"]["checkpoint_sha256"] and len(trained["episodes"]) == 6
    sft, rl = (Path("agentgym-quickstart") / f"{n}.json" for n in ("sft", "sft+gigpo"))
    assert f"paired: sft+gigpo ({rl}) vs sft ({sft}): sft+gigpo − sft = " in out.stdout
    assert "95% CI" in out.stdout
    board = out.stdout.split("rank")[-1]  # the leaderboard table comes last
    assert all(name in board for name in ("sft+gigpo", "sft", "explorer", "oracle", "random"))
    explorer = json.loads((folder / "explorer.json").read_text())  # no privileged knowledge
    assert explorer["aggregates"][env]["mean"] >= 0.5
    assert (folder / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # on the board `agentgym leaderboard` shows (the tests' AGENTGYM_HOME), not one of its own
    assert f"show this board: agentgym leaderboard --env {env}\n" in out.stdout
    assert not (folder / "leaderboard.db").exists()


def test_quickstart_on_the_search_menu_scores_its_reader(tmp_path):
    env = "agentgym/Search-Menu-Small-v1"
    out = cli(
        "quickstart",
        *("--env", env, "--seeds", "6", "--sft-steps", "10", "--sft-episodes", "10"),
        *("--rl-steps", "1"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "agentgym-quickstart"
    board = out.stdout.split("rank")[-1]
    assert all(name in board for name in ("sft+grpo", "sft", "reader", "oracle", "random"))
    reader = json.loads((folder / "reader.json").read_text())
    assert reader["aggregates"][env]["mean"] >= 0.8
    assert not (folder / "explorer.json").exists()
    unknown = cli("quickstart", "--env", "agentgym/Search-Menu-Large-v0", cwd=tmp_path)
    assert unknown.returncode == 2 and "no recipe for 'agentgym/Search-Menu-Large-v0'" in (
        unknown.stderr
    )


def test_submit_stores_a_result_once_on_the_agentgym_home_board(tmp_path):
    home = {"AGENTGYM_HOME": str(tmp_path / "home")}
    first, rerun, other = (tmp_path / f"{name}.json" for name in ("first", "rerun", "other"))
    for path, root in ((first, "0"), (rerun, "0"), (other, "1")):
        made = cli(
            *("eval", "--agent", "random", "--env", SMALL, "--seeds", "4"),
            "--root-seed",
            root,
            "--out",
            str(path),
        )
        assert made.returncode == 0, made.stderr
    assert cli("submit", str(first), "--name", "mine", env=home).returncode == 0
    again = cli("submit", str(rerun), env=home)  # the same evaluation run again
    assert again.returncode == 0, again.stderr
    assert "already submitted as 1 (mine): not stored again" in again.stdout
    assert f"submission 1: rank 1 on {SMALL}" in again.stdout
    changed = cli("submit", str(other), env=home)  # other seeds: another result
    assert changed.returncode == 0 and "submission 2: rank" in changed.stdout
    rows = json.loads(cli("leaderboard", "--json", env=home).stdout)
    assert sorted((r["id"], r["name"]) for r in rows) == [(1, "mine"), (2, "random")]


def test_the_quickstart_submits_to_the_agentgym_home_board_once(tmp_path, monkeypatch, capsys):
    """Its submit step, on small results files: run twice, its entries are stored once."""
    from agentgym.harness.evaluate import evaluate
    from agentgym.leaderboard.cli import publish
    from agentgym.leaderboard.store import Leaderboard

    monkeypatch.setenv("AGENTGYM_HOME", str(tmp_path / "home"))
    agents = ("oracle", "random")
    publish(None, {name: evaluate(name, [SMALL], seeds=4) for name in agents})
    publish(None, {name: evaluate(name, [SMALL], seeds=4) for name in agents})  # a rerun
    printed = capsys.readouterr().out
    board = Leaderboard()
    assert board.path == tmp_path / "home" / "leaderboard.db"
    assert sorted((r["id"], r["name"]) for r in board.rows()) == [(1, "oracle"), (2, "random")]
    assert "random: already submitted as 2 (random)" in printed
    assert f"show this board: agentgym leaderboard --env {SMALL}\n" in printed
    assert "--db" not in printed
    other = tmp_path / "other.db"
    publish(other, {"oracle": evaluate("oracle", [SMALL], seeds=4)})
    printed = capsys.readouterr().out
    assert f"show this board: agentgym leaderboard --env {SMALL} --db {other.resolve()}\n" in (
        printed
    )
    assert [r["name"] for r in Leaderboard(other).rows()] == ["oracle"]
    assert len(board.rows()) == 2


def test_report_json_and_plot(tmp_path):
    results, png = tmp_path / "r.json", tmp_path / "r.png"
    assert (
        cli(
            "eval", "--agent", "random", "--env", SMALL, "--seeds", "8", "--out", str(results)
        ).returncode
        == 0
    )
    out = cli("report", str(results), "--json", "--plot", str(png))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc[SMALL]) == {"n", "mean", "iqm", "ci_low", "ci_high", "ci_method", "by_task_type"}
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert (
        json.loads(cli("report", str(results), "--json").stdout) == doc
    )  # same file, same numbers


def test_compare_json_and_refusals(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for agent, path in (("random", a), ("oracle", b)):
        cli("eval", "--agent", agent, "--env", SMALL, "--seeds", "20", "--out", str(path))
    out = cli("compare", str(a), str(b), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {
        "diff",
        "ci_low",
        "ci_high",
        "prob_improvement",
        "min_detectable_diff",
        "n_pairs",
        "verdict",
    } <= set(doc)
    assert doc["a"] == {"name": "random", "file": str(a)}
    assert doc["b"] == {"name": "oracle", "file": str(b)}
    assert doc["verdict"].startswith(f"oracle ({b}) vs random ({a}): oracle − random = +")
    assert doc["verdict"].endswith("; oracle better")
    other = tmp_path / "other.json"
    cli(
        "eval",
        "--agent",
        "random",
        "--env",
        "agentgym/Search-Menu-Medium-v0",
        "--seeds",
        "2",
        "--out",
        str(other),
    )
    refused = cli("compare", str(a), str(other))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
