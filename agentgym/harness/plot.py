"""A PNG of a report: mean success per env and agent with its 95% interval."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import BadInput
from agentgym.core.paths import use_matplotlib_dir
from agentgym.harness.results import EnvSummary, Summary
from agentgym.harness.stats import CI_EXACT

XLABEL = "success rate (mean over runs, 95% CI)"
YLABEL = "environment, then agent (task types below each bar)"
EXACT_LABEL = "; * exact binomial CI (every run scored the same)"
_TITLE_CHARS = 70  # past this the title counts the agents and leaves their names to the legend

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


def plot_report(reports: Mapping[str, Mapping[str, EnvSummary]], path: str | Path) -> None:
    """Write :func:`report_figure` of ``reports`` to ``path`` as PNG.

    Args:
        reports: ``{agent name: its report --json document}``, each ``{env_id: {n, mean,
            ci_low, ci_high, ci_method?, by_task_type?}}``.
        path: the PNG to write; its folder is created.

    Raises:
        BadInput: matplotlib is not installed, there is nothing to plot, or the path cannot
            be written.
    """
    fig = report_figure(reports)
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}") from None


def report_figure(reports: Mapping[str, Mapping[str, EnvSummary]]) -> Figure:
    """A horizontal bar chart of one or several agents' reports, side by side per env.

    Per env (a bold tick label), one bar per agent (its mean, the 95% interval as an error
    bar, one colour per agent, named in the legend and the title); below each bar the task
    types of that env as small points with their own intervals. An exact binomial interval
    is marked ``*``. Drawn on matplotlib's Agg canvas without pyplot, so no display and no
    global state is used.

    Args:
        reports: ``{agent name: {env_id: summary}}`` as for :func:`plot_report`.

    Raises:
        BadInput: matplotlib is not installed, or no agent has an env to plot.
    """
    envs = list(dict.fromkeys(env_id for report in reports.values() for env_id in report))
    if not envs:
        raise BadInput("the report has no env to plot")
    rows = sum(
        1 + sum(1 + len(r[e].get("by_task_type") or {}) for r in reports.values() if e in r)
        for e in envs
    )
    fig = agg_figure(figsize=(10, 1.8 + 0.28 * rows), layout="constrained")
    ax = fig.add_subplot()
    colors = {name: f"C{i % 10}" for i, name in enumerate(reports)}
    ticks: list[tuple[float, str, bool]] = []  # (height, label, is an env)
    y, exact = 0.0, False
    for env_id in envs:  # top to bottom: the env, then each agent's bar and its task types
        ticks.append((y, env_id, True))
        y -= 0.8
        for name, report in reports.items():
            if env_id in report:
                ticks.append((y, name, False))
                first = env_id == next(iter(report))  # one legend entry per agent
                y, marked = _agent_rows(ax, report[env_id], y, name if first else "", colors[name])
                exact = exact or marked
        y -= 0.4
    ax.set_ylim(y + 0.7, 0.5)  # y is 1.2 below the last row drawn
    _decorate(ax, ticks, list(reports), exact)
    return fig


def _agent_rows(ax: Any, agg: EnvSummary, y: float, name: str, color: str) -> tuple[float, bool]:
    """Draw one agent's bar at ``y`` and its task types below; the next free ``y``.

    The bar enters the legend as ``name`` unless ``name`` is empty.

    Returns:
        The next free height and whether any interval drawn was exact.
    """
    ax.barh(y, agg["mean"], height=0.6, color=color, alpha=0.75, label=name or "_nolegend_")
    exact = _interval(ax, agg, y, f"{agg['mean']:.3f} (n={agg['n']})", color, bar=True)
    for kind, sub in sorted((agg.get("by_task_type") or {}).items()):
        y -= 0.45
        text = f"{kind} {sub['mean']:.3f} (n={sub['n']})"
        exact = _interval(ax, sub, y, text, color, bar=False) or exact
    return y - 0.8, exact


def _decorate(
    ax: Any, ticks: list[tuple[float, str, bool]], agents: list[str], exact: bool
) -> None:
    """Ticks (env ids in bold), limits, axis labels, title and the legend of agents."""
    ax.set_yticks([t for t, _, _ in ticks], [label for _, label, _ in ticks], fontsize=8)
    for tick, (_, _, is_env) in zip(ax.get_yticklabels(), ticks, strict=True):
        if is_env:
            tick.set_fontweight("bold")
    ax.set_xlim(0.0, 1.6)  # room on the right for the labels of bars near 1
    ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel(XLABEL + (EXACT_LABEL if exact else ""))
    ax.set_ylabel(YLABEL)
    ax.set_title(title(agents))
    ax.grid(axis="x", alpha=0.3)
    ax.legend(
        title="agent", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title_fontsize=8
    )


def title(agents: list[str]) -> str:
    """The plot's title, naming the agents (or counting them when the names run long)."""
    names = ", ".join(agents)
    if len(names) > _TITLE_CHARS:
        names = f"{len(agents)} agents (see legend)"
    return f"Mean success per environment: {names}"


def _interval(ax: Any, agg: Summary, y: float, text: str, color: str, *, bar: bool) -> bool:
    """Draw the 95% interval of ``agg`` at height ``y``, with ``text`` to its right.

    An agent's bar gets a black interval with caps (``bar``); a task type is a point in the
    agent's colour. Returns whether the interval is exact (its text then ends in ``*``).
    """
    exact = agg.get("ci_method") == CI_EXACT
    ink = "black" if bar else color
    ax.errorbar(
        agg["mean"],
        y,
        xerr=_err(agg),
        fmt="none" if bar else "o",
        color=ink,
        ecolor=ink,
        markersize=3,
        capsize=4 if bar else 2,
        linewidth=1 if bar else 0.8,
    )
    ax.text(
        min(max(agg["ci_high"], agg["mean"]), 1.0) + 0.01,
        y,
        text + ("*" if exact else ""),
        va="center",
        fontsize=8 if bar else 7,
        color=ink,
    )
    return exact


def _err(agg: Summary) -> list[list[float]]:
    """Error bar lengths below and above the mean, shape (2, 1); never negative."""
    return [[max(0.0, agg["mean"] - agg["ci_low"])], [max(0.0, agg["ci_high"] - agg["mean"])]]
