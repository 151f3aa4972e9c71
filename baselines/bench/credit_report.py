"""The table and the figure of ``agentgym bench credit``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.harness.plot import agg_figure


def _num(value: Any, fmt: str) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt % value


def _versus(row: dict[str, Any]) -> str:
    """The paired difference with grpo's rank correlation on the same turns ("" for grpo)."""
    vs = row.get("vs_grpo")
    if vs is None:
        return ""
    return f"{vs['diff']:+.2f} [{vs['ci_low']:+.2f}, {vs['ci_high']:+.2f}]"


def _sign(row: dict[str, Any]) -> str:
    """Sign agreement with its interval and the number of resolved turns."""
    low, high = row["sign_ci"]
    interval = "" if math.isnan(low) else f" [{low:.2f}, {high:.2f}]"
    return f"{_num(row['sign_agreement'], '%.2f')}{interval} ({row['resolved_turns']})"


def _note(row: dict[str, Any]) -> str:
    """An own sampler's row: its batch and truth are its own, grpo's credit there beside."""
    if not row["own_sampler"]:
        return ""
    grpo = row.get("grpo_on_own_batch")
    there = "" if grpo is None else f"; grpo on it {_num(grpo, '%+.2f')}"
    return f"own sampler, own truth{there}"


def print_fidelity(console: Console, doc: dict[str, Any]) -> None:
    """The truth's quality, then one row per variant (not-applicable ones with their reason)."""
    truth = doc["truth"]
    console.print(
        f"truth: {truth['kind']} over {truth['turns']} turns; median SE "
        f"{_num(truth['median_se'], '%.3f')}, split-half reliability "
        f"{_num(truth['reliability'], '%.2f')}, sign resolved on {truth['resolved_turns']} turns"
    )
    mc = truth["monte_carlo"]
    console.print(
        f"monte carlo: {mc['rollouts']:,} continuations, {mc['tokens']:,} tokens, "
        f"{mc['seconds']:.1f} s; median SE {_num(mc['median_se'], '%.3f')}"
    )
    check = truth.get("check")
    if check:
        low, high = check["bias_ci"]
        console.print(
            f"monte carlo against the analytic values over {check['turns']} turns: mean "
            f"difference {check['bias']:+.4f} [{low:+.4f}, {high:+.4f}], correlation "
            f"{check['pearson']:.3f}, |difference| mean {check['mean_abs_diff']:.4f}; each "
            f"turn's own 95% interval holds it on {check['within_95']:.0%} of turns"
        )
    table = Table(title=f"credit fidelity on {doc['env']} ({doc['policy']})")
    for column in ("variant", "rank corr.", "95% CI", "− grpo [95% CI]", "sign agree [CI] (n)"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for column in ("batch noise", "rollouts", "tokens", "seconds", "note"):
        table.add_column(column, justify="left" if column == "note" else "right")
    for row in doc["rows"]:
        if row["status"] != "ok":
            table.add_row(row["variant"], "n/a", "", "", "", "", "", "", "", row["reason"])
            continue
        extra = f" (+{row['extra_rollouts']})" if row["extra_rollouts"] > 0 else ""
        table.add_row(
            row["variant"],
            f"{row['spearman']:+.2f}",
            f"[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]",
            _versus(row),
            _sign(row),
            _num(row["batch_noise"], "%.2f"),
            f"{row['rollouts']}{extra}",
            f"{row['tokens']:,}",
            f"{row['seconds']:.1f}",
            _note(row),
        )
    console.print(table)


def plot_fidelity(doc: dict[str, Any], path: Path) -> None:
    """Rank correlation with the truth against seconds per batch, one point per variant."""
    rows = [r for r in doc["rows"] if r["status"] == "ok"]
    fig = agg_figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    markers = "osD^vP*Xh<>p"
    for n, row in enumerate(rows):
        low, high = row["spearman"] - row["ci_low"], row["ci_high"] - row["spearman"]
        ax.errorbar(
            row["seconds"],
            row["spearman"],
            yerr=[[low], [high]],
            fmt=markers[n % len(markers)],
            capsize=3,
            color=f"C{n % 10}",
            label=row["variant"],
        )
    ceiling = doc["truth"]["reliability"]
    if ceiling == ceiling and ceiling < 1:
        ax.axhline(ceiling, ls="--", color="grey", lw=1, label="truth's reliability")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    ax.axhline(0, color="black", lw=0.5)
    ax.set(
        xlabel="seconds per batch (sampling + credit)",
        ylabel="rank correlation with the true advantage",
        ylim=(-1.05, 1.05),
        title=f"{doc['env'].split('/')[-1]}: {doc['truth']['kind']} truth",
    )
    ax.set_xscale("log")
    fig.tight_layout()
    fig.savefig(path)
