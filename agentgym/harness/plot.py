"""A PNG of a report: mean success per env with its 95% bootstrap interval."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import BadInput
from agentgym.core.paths import use_matplotlib_dir
from agentgym.harness.results import EnvSummary, Summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def agg_figure(**kwargs: Any) -> Figure:
    """A matplotlib figure on the Agg canvas (no display, no pyplot state).

    The one place agentgym imports matplotlib: its cache goes under ``AGENTGYM_HOME``
    (:func:`agentgym.core.paths.use_matplotlib_dir`), not the user's home.

    Args:
        **kwargs: passed to ``matplotlib.figure.Figure`` (``figsize``, ``layout``, ...).

    Raises:
        BadInput: matplotlib is not installed.
    """
    use_matplotlib_dir()
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise BadInput("plotting needs matplotlib: pip install matplotlib") from None
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def plot_report(report: Mapping[str, EnvSummary], path: str | Path) -> None:
    """Write a horizontal bar chart of ``report`` to ``path`` as PNG.

    One bar per env (its mean, with the 95% interval as an error bar); below it, each task
    type of the env as a small labelled point with its own interval. Drawn
    on matplotlib's Agg canvas without pyplot, so no display and no global state is used.

    Args:
        report: the ``report --json`` document, ``{label: {n, mean, ci_low, ci_high,
            by_task_type?}}`` (labels are usually env ids).
        path: the PNG to write; its folder is created.

    Raises:
        BadInput: matplotlib is not installed, the report is empty, or the path cannot be
            written.
    """
    if not report:
        raise BadInput("the report has no env to plot")
    labels = list(report)
    rows = sum(1 + len(report[label].get("by_task_type") or {}) for label in labels)
    fig = agg_figure(figsize=(8, 1.4 + 0.5 * len(labels) + 0.25 * rows), layout="constrained")
    ax = fig.add_subplot()
    ticks, y = [], 0.0
    for label in labels:  # top to bottom: each env's bar, then its task types
        agg = report[label]
        ticks.append(y)
        ax.barh(y, agg["mean"], height=0.6, color="#4c72b0", alpha=0.8)
        _interval(ax, agg, y, f"{agg['mean']:.3f} (n={agg['n']})", bar=True)
        for kind, sub in sorted((agg.get("by_task_type") or {}).items()):
            y -= 0.45
            _interval(ax, sub, y, f"{kind} {sub['mean']:.3f} (n={sub['n']})", bar=False)
        y -= 1.0
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_xlim(0.0, 1.25)
    ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("success rate (mean of run scores), 95% bootstrap CI")
    ax.set_ylabel("environment")
    ax.set_title("Mean success per environment")
    ax.grid(axis="x", alpha=0.3)
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}") from None


def _interval(ax: Any, agg: Summary, y: float, text: str, *, bar: bool) -> None:
    """Draw the 95% interval of ``agg`` at height ``y``, with ``text`` to its right.

    An env's interval has black caps (``bar``); a task type's is an orange point.
    """
    color = "black" if bar else "#dd8452"
    ax.errorbar(
        agg["mean"],
        y,
        xerr=_err(agg),
        fmt="none" if bar else "o",
        color=color,
        ecolor=color,
        markersize=3,
        capsize=4 if bar else 2,
        linewidth=1 if bar else 0.8,
    )
    ax.text(
        min(max(agg["ci_high"], agg["mean"]), 1.0) + 0.01,
        y,
        text,
        va="center",
        fontsize=8 if bar else 7,
        color=color,
    )


def _err(agg: Summary) -> list[list[float]]:
    """Error bar lengths below and above the mean, shape (2, 1); never negative."""
    return [[max(0.0, agg["mean"] - agg["ci_low"])], [max(0.0, agg["ci_high"] - agg["mean"])]]
