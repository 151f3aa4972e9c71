"""Agents: the protocol, the built-in agents and loading an agent from its spec string."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.agents.protocol import Agent
from agentgym.core.errors import BadInput

BUILTIN: dict[str, type[Any]] = {"random": RandomAgent, "oracle": OracleAgent}
NAMED: dict[str, str] = {
    "gradcuit": "agentgym.baselines.gradcuit:GradCuitAgent",
    "gbc": "agentgym.baselines.gbc.pipeline:PipelineAgent",
}
"""``NAME:ARG`` agent specs -> the ``module:Class`` whose ``from_spec(arg, options)`` builds
the agent (they take precedence over ``module:Class``). ``gradcuit:DIR`` optimises latents of
a checkpoint at test time; ``gbc:DIR`` plays a checkpoint as a planner-caller-summariser
pipeline with gradient blame."""


def describe_agent(spec: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results file's ``agent`` entry: name, the exact spec, checkpoint sha256 if any.

    Non-empty ``options`` (``eval --agent-option``) are kept as ``options``, so that a run
    with other settings is another run.
    """
    from agentgym.agents.checkpoint import checkpoint_sha256, is_checkpoint_dir

    named, _, arg = spec.partition(":")
    sha256: str | None = None
    if is_checkpoint_dir(spec):
        name, sha256 = Path(spec).resolve().name, checkpoint_sha256(spec)
    elif named in NAMED and is_checkpoint_dir(arg):
        name, sha256 = f"{named}:{Path(arg).resolve().name}", checkpoint_sha256(arg)
    elif spec.startswith("openai:"):
        name = spec.split("#", 1)[-1]
    else:
        name = spec.split(":")[-1]
    entry: dict[str, Any] = {"name": name, "spec": spec, "checkpoint_sha256": sha256}
    if options:
        entry["options"] = dict(options)
    return entry


def load_agent(spec: str, options: dict[str, Any] | None = None) -> Agent:
    """Build an agent from its spec.

    The spec is ``random``, ``oracle``, ``NAME:ARG`` for a name in :data:`NAMED`,
    ``module:Class``, a checkpoint directory, or ``openai:URL#model`` (an OpenAI-compatible
    chat endpoint). ``options`` are the agent's settings: keyword arguments of a class's
    constructor, overrides of a checkpoint's agent config, or a named agent's settings.

    Raises:
        BadInput: the spec names no agent, the options do not fit it, or the class does not
            follow the Agent protocol.
    """
    options = dict(options or {})
    named, _, arg = spec.partition(":")
    if spec in BUILTIN:
        return _checked(spec, _construct(spec, BUILTIN[spec], options))
    if named in NAMED:
        factory = _import_attr(NAMED[named]).from_spec
        return _checked(spec, factory(arg, options))
    if spec.startswith("openai:"):
        from agentgym.agents.openai_chat import load_openai_agent

        if options:
            raise BadInput("an openai: agent takes no --agent-option; put settings in the spec")
        return load_openai_agent(spec)
    if Path(spec).is_dir():  # before module:Class: a path may contain ":"
        from agentgym.agents.checkpoint import load_checkpoint_agent

        return load_checkpoint_agent(spec, options)
    if ":" not in spec:
        raise BadInput(
            f"unknown agent {spec!r}: use random, oracle, {', '.join(f'{n}:DIR' for n in NAMED)},"
            " module:Class, a checkpoint directory or openai:URL#model"
        )
    return _checked(spec, _construct(spec, _import_attr(spec), options))


def _import_attr(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInput(f"cannot import agent module {module_name!r}: {e}") from None
    found = getattr(module, attr, None)
    if found is None:
        raise BadInput(f"module {module_name!r} has no attribute {attr!r}")
    return found


def _construct(spec: str, cls: Any, options: dict[str, Any]) -> Any:
    try:
        return cls(**options)
    except Exception as e:
        given = f"options {sorted(options)}" if options else "no arguments"
        raise BadInput(f"cannot construct agent {spec!r} with {given}: {e}") from None


def _checked(spec: str, agent: Any) -> Agent:
    if not isinstance(agent, Agent):
        raise BadInput(f"{spec!r} does not follow the Agent protocol (reset and act)")
    return agent


__all__ = [
    "BUILTIN",
    "NAMED",
    "Agent",
    "OracleAgent",
    "RandomAgent",
    "describe_agent",
    "load_agent",
]
