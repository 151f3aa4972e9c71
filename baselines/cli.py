"""The trainer's commands, reached by ``agentgym`` through its table of import strings."""

from __future__ import annotations

from pathlib import Path

from agentgym.baselines.config import SEARCH_MENU_SMALL, TrainConfig
from agentgym.baselines.options import options_help, parse_options
from agentgym.baselines.train import train
from agentgym.core.errors import BadInput
from agentgym.terminal import out


def train_command(args: list[str]) -> None:
    """``agentgym train --out DIR [OPTIONS]``: train from the options of :class:`TrainConfig`.

    Parse the options, train, and say where the final checkpoint is (``--help`` lists every
    option).
    """
    if "--help" in args or "-h" in args:
        out.print("Usage: agentgym train --out DIR [OPTIONS]\n\nOptions:", markup=False)
        out.print("  --out DIR              where the final checkpoint goes", markup=False)
        out.print(options_help(TrainConfig), markup=False)
        return
    if "--out" not in args or args.index("--out") + 1 >= len(args):
        raise BadInput("train needs --out DIR (the final checkpoint is written there)")
    i = args.index("--out")
    target = Path(args[i + 1])
    cfg = parse_options(TrainConfig, args[:i] + args[i + 2 :])
    final = train(cfg, target)
    out.print(f"checkpoint: {final} (evaluate it with: agentgym eval --agent {final} ...)")


QUICKSTART_REFERENCES = {"reader": "agentgym.envs.search.reader:ReaderAgent"}
"""Agents the quickstart scores beside its policy: what is reachable without privileged
knowledge (the oracle and a random agent bound it from above and below)."""


def quickstart_policy(
    out_dir: Path, sft_steps: int | None, rl_steps: int | None
) -> tuple[str, dict[str, str]]:
    """Train the quickstart's policy (the Search-Menu-Small recipe) into ``out_dir/policy``.

    Returns:
        The env id the recipe trains on, and the agents to score by the names their results
        carry: ``sft+<variant>`` (after RL), ``sft`` (the warm start) and the references.
    """
    cfg = SEARCH_MENU_SMALL  # the recipe, baselines/config.py
    if sft_steps is not None:
        cfg = cfg.with_options(sft_steps=sft_steps)
    if rl_steps is not None:
        cfg = cfg.with_options(steps=rl_steps)
    policy_dir = out_dir / "policy"
    out.print(
        f"training the tiny policy: {cfg.sft.steps} SFT steps, then {cfg.rl.steps} GRPO steps"
    )
    train(cfg, policy_dir)
    out.print(f"wrote {policy_dir} (SFT alone: {policy_dir / 'sft'})")
    agents = {f"sft+{cfg.credit}": str(policy_dir), "sft": str(policy_dir / "sft")}
    return cfg.env, {**agents, **QUICKSTART_REFERENCES}
