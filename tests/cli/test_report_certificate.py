"""``agentgym report`` on a Tools eval shows how many episodes HierR's optimal matchings
disagree on, and the metric's range over the optima (CREDIT.md §13)."""

import json
import os
import re

import jsonschema
from clirun import cli

from agentgym.harness.results import results_schema

TOOLS = "agentgym/Tools-Ecommerce-v1"

AGENT = '''
import json

CATEGORIES = ["electronics", "books", "home", "toys", "sports", "clothing", "beauty"]
SORTS = ["relevance", "price_asc", "price_desc", "rating_desc"]


def other(key, value):
    """Another valid value of a search_products argument."""
    if key == "category":
        return CATEGORIES[(CATEGORIES.index(value) + 1) % len(CATEGORIES)]
    if key == "sort":
        return SORTS[(SORTS.index(value) + 1) % len(SORTS)]
    if key == "in_stock_only":
        return not value
    if key == "limit":
        return value % 20 + 1
    if key in ("min_price", "max_price"):
        return value + 1 if value < 10000 else value - 1
    return value + " zz"


class Ambiguous:
    """The oracle, except where a gold call searches the catalogue with m > 1 arguments: there
    two searches that tie for it (t = ceil(m / 2) of its arguments, right; and all m with
    2t - m of them right: key Jaccard + value share 2t/m each), then a summary."""

    name = "ambiguous"

    def __init__(self):
        self.env, self.tokens_used, self.turn = None, 0, 0

    def reset(self, env_id, seed):
        self.turn = 0

    def bind(self, env):
        self.env = env

    def act(self, observation, info):
        self.turn += 1
        gold = [c.to_json() for turn in self.env.task.gold_calls for c in turn]
        target = next(
            (c for c in gold if c["name"] == "search_products" and len(c["arguments"]) > 1),
            None,
        )
        if target is None:
            return self.env.oracle_action()
        if self.turn > 1:
            return "<summary>Done.</summary>"
        args = target["arguments"]
        keys = sorted(args)
        m = len(keys)
        t = (m + 1) // 2
        right = 2 * t - m
        changed = {k: args[k] if i < right else other(k, args[k]) for i, k in enumerate(keys)}
        half = {k: args[k] for k in keys[:t]}
        calls = [{"name": "search_products", "arguments": a} for a in (changed, half)]
        return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
'''


def test_report_of_a_tools_eval_counts_the_ambiguous_episodes_and_their_range(tmp_path):
    (tmp_path / "ambiguous_agent.py").write_text(AGENT)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    # root seed 9: the seventh run draws a task whose gold searches with four filters
    args = ("--agent", "ambiguous_agent:Ambiguous", "--env", TOOLS, "--seeds", "7")
    run = cli("eval", *args, "--root-seed", "9", "--out", "t.json", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    jsonschema.validate(doc, results_schema())
    certs = [e["certificate"] for e in doc["episodes"]]
    assert len(certs) == 7 and sum(not c["unique"] for c in certs) == 1

    out = cli("report", "t.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    head = f"all-optima certificate for ambiguous_agent:Ambiguous on {TOOLS}:"
    assert head in out.stdout.splitlines(), out.stdout
    lines = {
        m.group(1): m.groups()[1:]
        for m in re.finditer(
            r"^  (\w+): (\d+) of (\d+) episodes ambiguous \(optimal matchings disagree\), "
            r"mean over optima \[(\d\.\d+), (\d\.\d+)\]$",
            out.stdout,
            re.MULTILINE,
        )
    }
    assert set(lines) == {"param_keys", "param_values", "hierr"}, out.stdout
    for metric, (ambiguous, n, low, high) in lines.items():
        spans = [c["ranges"][metric] for c in certs]
        assert int(n) == 7
        assert int(ambiguous) == sum(hi > lo for lo, hi in spans) == 1
        assert float(low) == round(sum(lo for lo, _ in spans) / 7, 3)
        assert float(high) == round(sum(hi for _, hi in spans) / 7, 3)
        assert float(low) < float(high)
