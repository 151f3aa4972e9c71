"""Option types the commands share, and parsing of their ``KEY=VALUE`` lists."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from agentgym.core.errors import BadInput

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
EnvKwargs = Annotated[
    list[str] | None,
    typer.Option(
        "--env-kwarg", help="KEY=VALUE passed to the env (VALUE parsed as JSON if it can)."
    ),
]
AgentOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--agent-option",
        help="KEY=VALUE setting of the agent (VALUE parsed as JSON if it can): a checkpoint's "
        "greedy, temperature, seed, max_new_tokens; gradcuit's steps, lr, layer, threshold, "
        "prefix; gbc's reduce, fault.",
    ),
]

DeviceOption = Annotated[
    str | None,
    typer.Option(help="learning only: where the runs train: cpu (default) or cuda."),
]
CurveFlag = Annotated[
    bool | None,
    typer.Option(
        "--curve/--no-curve",
        help="learning only: also score checkpoints along the budget for the curve "
        "(default on; the headline uses final checkpoints either way).",
    ),
]
RecordFlag = Annotated[
    bool | None,
    typer.Option(
        "--record",
        help="learning --quick only: record its figures as the ones later checks compare "
        "against (baselines/bench/learning_quick.json).",
    ),
]
SftModeOption = Annotated[
    str | None,
    typer.Option(
        help="learning only: the warm start's SFT mode: plain (default) or ca "
        "(credit-assignment SFT; its runs get folders of their own, e.g. warm-ca-0)."
    ),
]
SftTeacherOption = Annotated[
    str | None,
    typer.Option(
        help="learning only: who labels the warm start's demonstrations (default the recipe's, "
        "the env's oracle): an agent as module:Class that sees only what the policy sees, "
        "without the recipe's noise (its runs get folders of their own)."
    ),
]
SplitOption = Annotated[
    str | None,
    typer.Option(
        help="learning only: the split the checkpoints are scored on: test (default) or val "
        "(choose a recipe on val; the same --work folder then scores its runs on test without "
        "training them again)."
    ),
]

RlOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--rl-option",
        help="learning only: NAME=VALUE, an option of the RL loop or its sampling that every "
        "variant's RL run takes over the recipe's (e.g. epochs=2, lr=1e-3, group_size=16, "
        "temperature=1.2); the warm starts stay the recipe's, and the runs of each setting get "
        "folders of their own.",
    ),
]


def parse_env_kwargs(items: list[str] | None, *, flag: str = "--env-kwarg") -> dict[str, Any]:
    """``["path=/data", "max_turns=30"]`` → ``{"path": "/data", "max_turns": 30}``."""
    kwargs: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise BadInput(f"{flag} expects KEY=VALUE, got {item!r}")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value
    return kwargs
