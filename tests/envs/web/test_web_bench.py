"""bench web: the text shop's rows on a smoke run (speeds are measured, never asserted)."""

from agentgym.envs.web.bench import GOAL_TEXT_STEPS_PER_S, run, success_row, text_row


def test_the_text_row_times_both_forms_on_the_same_recorded_episodes():
    row = text_row("Small", episodes=2, repeats=2)
    assert row["env"] == "Shop-Small" and row["episodes"] == 4
    # the oracle's and the random agent's episodes, replayed in both forms
    assert row["text_steps"] == row["menu_steps"] > 4
    for form in ("text", "menu"):
        assert row[f"{form}_steps_per_s"] > 0 and row[f"{form}_reset_ms"] > 0
        timing = row["timing_s"][form]
        assert timing["runs"] == 2 and timing["wall_min_s"] <= timing["wall_s"]
    assert GOAL_TEXT_STEPS_PER_S == 500.0


def test_the_success_row_plays_the_oracle_and_a_random_agent_on_test_seeds():
    row = success_row("agentgym/Shop-Small-v0", seeds=4, menu=True)
    assert row == {
        "env": "agentgym/Shop-Small-v0 menu=True",
        "oracle_success": 1.0,
        "random_success": row["random_success"],
        "seeds": 4,
    }
    assert 0.0 <= row["random_success"] <= 0.5


def test_the_part_is_found_by_the_bench_table():
    from agentgym.bench import PARTS

    assert PARTS["web"] == "agentgym.envs.web.bench" and callable(run)
