"""The trainer's commands, reached by ``agentgym`` through its table of import strings."""

from __future__ import annotations

from pathlib import Path

from agentgym.baselines.config import (
    ALFWORLD_SMALL,
    ALFWORLD_SMALL_MEMORY,
    QUICKSTART,
    RECIPES,
    SEARCH_MENU_SMALL,
    SEARCH_MENU_SMALL_V0,
    TrainConfig,
)
from agentgym.baselines.options import options_help, parse_options
from agentgym.baselines.train import train
from agentgym.core.errors import BadInput
from agentgym.terminal import out

TRAIN_EXAMPLES = (
    "agentgym train --env agentgym/Search-Menu-Small-v1 --credit gigpo --steps 20 --out runs/gigpo",
    "agentgym train --env agentgym/Search-Menu-Small-v1 --credit gigpo+proas --steps 20 "
    "--out runs/gigpo-proas",
    "agentgym train --env agentgym/ALFWorld-Small-v0 --credit grpo --credit-settings "
    '\'{"grpo": {"zero_std": "drop"}}\' --history 2 --pin-first --out runs/alf',
)
"""The examples ``agentgym train --help`` ends with (tests/test_examples.py checks them)."""


def train_help() -> str:
    """What ``agentgym train --help`` prints: the usage, every option, then the examples."""
    return "\n".join(
        [
            "Usage: agentgym train --out DIR [OPTIONS]\n\nOptions:",
            "  --out DIR              where the final checkpoint goes",
            options_help(TrainConfig),
            "\nExamples:",
            *(f"  {example}" for example in TRAIN_EXAMPLES),
        ]
    )


def parse_train_args(args: list[str]) -> tuple[TrainConfig, Path]:
    """The config and the output folder that ``agentgym train`` arguments give.

    Raises:
        BadInput: no ``--out DIR``, an unknown option or a malformed value.
    """
    if "--out" not in args or args.index("--out") + 1 >= len(args):
        raise BadInput("train needs --out DIR (the final checkpoint is written there)")
    i = args.index("--out")
    return parse_options(TrainConfig, args[:i] + args[i + 2 :]), Path(args[i + 1])


def train_command(args: list[str]) -> None:
    """``agentgym train --out DIR [OPTIONS]``: train from the options of :class:`TrainConfig`.

    Parse the options, train, and say where the final checkpoint is (``--help`` lists every
    option).
    """
    if "--help" in args or "-h" in args:
        out.print(train_help(), markup=False)
        return
    cfg, target = parse_train_args(args)
    final = train(cfg, target)
    out.print(f"checkpoint: {final} (evaluate it with: agentgym eval --agent {final} ...)")


READER = {"reader": "agentgym.envs.search.reader:ReaderAgent"}
EXPLORER = {"explorer": "agentgym.envs.text.alfworld_explorer:ExplorerAgent"}
QUICKSTART_REFERENCES = {
    SEARCH_MENU_SMALL.env: READER,
    SEARCH_MENU_SMALL_V0.env: READER,
    ALFWORLD_SMALL.env: EXPLORER,
    ALFWORLD_SMALL_MEMORY.env: EXPLORER,
}
"""Agents the quickstart scores beside its policy, per env: what is reachable without
privileged knowledge (the oracle and a random agent bound it from above and below)."""


def quickstart_policy(
    out_dir: Path, env: str | None, changes: dict[str, int | None]
) -> tuple[str, dict[str, str]]:
    """Train the quickstart's policy into ``out_dir/policy``.

    The recipe is ``env``'s (default :data:`QUICKSTART`'s), with the options in ``changes``
    replaced where not None (``steps`` replaces a token budget too).

    Returns:
        The env id the recipe trains on, and the agents to score by the names their results
        carry: ``sft+<variant>`` (after RL), ``sft`` (the warm start) and the references.

    Raises:
        BadInput: ``env`` has no recipe.
    """
    env = env or QUICKSTART.env
    if env not in RECIPES:
        raise BadInput(f"the quickstart has no recipe for {env!r}: choose from {sorted(RECIPES)}")
    cfg = QUICKSTART if env == QUICKSTART.env else RECIPES[env]  # baselines/config.py
    changes = {name: value for name, value in changes.items() if value is not None}
    if "steps" in changes:
        changes["token_budget"] = 0
    cfg = cfg.with_options(**changes)
    rl = cfg.rl
    spend = f"{rl.token_budget:,} generated tokens" if rl.token_budget else f"{rl.steps} steps"
    policy_dir = out_dir / "policy"
    out.print(
        f"training the tiny policy on {env}: {cfg.sft.steps} SFT steps, then {spend} of "
        f"{cfg.credit}"
    )
    train(cfg, policy_dir)
    out.print(f"wrote {policy_dir} (SFT alone: {policy_dir / 'sft'})")
    agents = {f"sft+{cfg.credit}": str(policy_dir), "sft": str(policy_dir / "sft")}
    return cfg.env, {**agents, **QUICKSTART_REFERENCES.get(env, {})}
