"""Plots write their PNG and nothing outside AGENTGYM_HOME (matplotlib's cache included)."""

import os
import subprocess
import sys
import textwrap

PLOTS = textwrap.dedent("""
    import sys
    from pathlib import Path

    from agentgym.baselines.train import plot_curve
    from agentgym.harness.plot import plot_report

    out = Path(sys.argv[1])
    summary = {"n": 4, "mean": 0.5, "ci_low": 0.25, "ci_high": 0.75}
    plot_report({"oracle": {"agentgym/Search-Menu-Small-v0": summary}}, out / "report.png")
    rows = [{"phase": "rl", "step": s, "success": 0.1 * s, "val_success": 0.2} for s in (1, 2)]
    plot_curve(rows, out / "curve.png")
""")


def plot_with(tmp_path, **env):
    """Run both plots in a fresh process (matplotlib not imported yet) with HOME empty."""
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    mpl = ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
    clean = {k: v for k, v in os.environ.items() if k not in mpl}
    ran = subprocess.run(
        [sys.executable, "-c", PLOTS, str(out)],
        env={**clean, "HOME": str(home), "AGENTGYM_HOME": str(tmp_path / "agentgym"), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["curve.png", "report.png"]
    return home


def test_plots_leave_home_untouched_and_cache_under_agentgym_home(tmp_path):
    home = plot_with(tmp_path)
    assert list(home.iterdir()) == []  # no ~/.cache/matplotlib, no ~/.config/matplotlib
    cache = tmp_path / "agentgym" / "cache" / "matplotlib"
    assert any(p.name.startswith("fontlist") for p in cache.iterdir())


def test_a_matplotlib_folder_the_user_chose_is_kept(tmp_path):
    mine = tmp_path / "mine"
    home = plot_with(tmp_path, MPLCONFIGDIR=str(mine))
    assert list(home.iterdir()) == []
    assert any(p.name.startswith("fontlist") for p in mine.iterdir())
    assert not (tmp_path / "agentgym" / "cache" / "matplotlib").exists()
