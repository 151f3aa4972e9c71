"""``agentgym report`` over several files and ``agentgym compare`` as people read them."""

import json
import re

import pytest
from clirun import cli

SMALL = "agentgym/Search-Menu-Small-v0"
NUM = r"[+-]\d+\.\d"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """random and oracle on the same 12 seeds, and a random run on other seeds."""
    folder = tmp_path_factory.mktemp("results")
    for agent, name, root in (("random", "a", 0), ("oracle", "b", 0), ("random", "c", 7)):
        run = cli(
            "eval",
            *("--agent", agent, "--env", SMALL, "--seeds", "12"),
            *("--root-seed", str(root), "--out", f"{name}.json"),
            cwd=folder,
        )
        assert run.returncode == 0, run.stderr
    return folder


def test_compare_names_both_sides_and_prints_the_numbers(files):
    out = cli("compare", "a.json", "b.json", cwd=files)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert re.fullmatch(
        rf"oracle \(b\.json\) vs random \(a\.json\): oracle − random = \+\d+\.\d points, "
        rf"95% CI \[{NUM}, {NUM}\]; oracle better",
        line,
    ), line


def test_compare_without_a_difference_still_shows_the_estimate_and_interval(files):
    # the same random agent and seeds: the same outcome on every pair
    (files / "a2.json").write_text((files / "a.json").read_text())
    out = cli("compare", "a.json", "a2.json", cwd=files)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    head = "random (a2.json) vs random (a.json): random (a2.json) − random (a.json) = "
    assert line.startswith(head + "+0.0 points, 95% CI [+0.0, +0.0]; no detectable difference")


def test_report_of_two_files_shows_both_agents_in_one_table_and_plot(files):
    out = cli("report", "a.json", "b.json", "--plot", "both.png", cwd=files)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("│ " + SMALL)]
    assert [row.split("│")[2].strip() for row in rows] == ["random", "oracle"]
    assert out.stdout.count("┏") == 1  # one table
    # every run of each agent scored alike: exact intervals, marked and explained
    assert "[0.000, 0.265]*" in out.stdout and "[0.735, 1.000]*" in out.stdout
    assert "* exact binomial (Clopper-Pearson) interval" in out.stdout
    assert (files / "both.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_json_of_several_files_lists_each_with_its_agent_and_file(files):
    out = cli("report", "a.json", "b.json", "c.json", "--json", cwd=files)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [(r["agent"], r["file"]) for r in doc] == [
        ("random (a.json)", "a.json"),
        ("oracle", "b.json"),
        ("random (c.json)", "c.json"),
    ]
    alone = json.loads(cli("report", "b.json", "--json", cwd=files).stdout)
    assert doc[1]["report"] == alone  # one file: the document as before
    assert alone[SMALL]["ci_method"] == "clopper-pearson"


@pytest.mark.parametrize(
    ("bad", "words"),
    [("missing.json", "no such results file: missing.json"), ("bad.json", "bad.json is not")],
)
def test_a_missing_or_bad_file_among_several_exits_2_with_one_line(files, bad, words):
    (files / "bad.json").write_text("{not json")
    out = cli("report", "a.json", bad, "b.json", "--plot", "none.png", cwd=files)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr
    assert out.stdout == "" and not (files / "none.png").exists()
