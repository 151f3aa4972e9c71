"""``agentgym bench trainer``: behaviour only (both sides run, tokens are counted, the ratio
is reported), never speed. Everything is built offline."""

from __future__ import annotations

import io
import json
import sys

import pytest
from rich.console import Console

from agentgym.baselines.bench.grpo_task import QUICK, WORDS, build_tokenizer, reward, task_rows
from agentgym.baselines.bench.trainer import INSTALL_HINT
from agentgym.bench import PARTS, run_bench
from agentgym.core.errors import BadInput


def test_quick_run_measures_both_trainers() -> None:
    buf = io.StringIO()
    doc = run_bench("trainer", Console(file=buf, width=200), quick=True)
    assert PARTS["trainer"] == "agentgym.baselines.bench.trainer"
    assert doc["part"] == "trainer"
    json.dumps(doc)  # the CLI writes it as JSON
    s = QUICK
    assert doc["settings"]["prompts"] == s.prompts and doc["settings"]["threads"] >= 1
    completions = s.steps * s.prompts * s.completions
    for side in ("ours", "trl"):
        rows = [r for r in doc["rows"] if r["side"] == side]
        assert len(rows) == s.alternations
        for r in rows:
            assert r["steps"] == s.steps and r["seconds"] > 0 and r["tokens_per_s"] > 0
            # every completion has 1..max_new_tokens tokens (EOS included)
            assert completions <= r["completion_tokens"] <= completions * s.max_new_tokens
            assert "generate" in r["phase_s"] and 0.0 <= r["mean_reward"] <= 1.0
            assert r["threads"] == doc["settings"]["threads"]
        assert doc["medians_tokens_per_s"][side] > 0
    assert doc["ratios"]["ours/trl tokens_per_s"] > 0
    assert doc["goal"]["ours/trl tokens_per_s"] == 2.0
    assert doc["peak_rss_mib"] > 0
    printed = buf.getvalue()
    assert "ours/TRL" in printed and "where the time goes" in printed


def test_without_trl_it_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)
    with pytest.raises(BadInput) as err:
        run_bench("trainer", Console(file=io.StringIO()), quick=True)
    assert str(err.value) == INSTALL_HINT
    assert "pip install 'agentgym[bench]'" in INSTALL_HINT


def test_both_sides_see_the_same_prompt_tokens() -> None:
    from agentgym.baselines.policies.hf import HFTokenizer

    tok = build_tokenizer()
    prompts = [r["prompt"] for r in task_rows(len(WORDS))]
    ours = [HFTokenizer(tok).encode(p) for p in prompts]
    trl_way = tok(text=prompts)["input_ids"]  # how GRPOTrainer tokenizes plain-text prompts
    assert ours == trl_way
    assert all(ids and tok.eos_token_id not in ids for ids in ours)


def test_reward_rule() -> None:
    assert reward("well: apple!", "apple") == 1.0
    assert reward("", "apple") == 0.0
    assert reward("pal", "apple") == pytest.approx(0.5 * 3 / 4)  # a, p, l of {a, p, l, e}
    assert [r["word"] for r in task_rows(len(WORDS) + 1)][-1] == WORDS[0]
