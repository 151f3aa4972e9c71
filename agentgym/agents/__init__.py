"""Agents: the protocol, the built-in agents and loading an agent from its spec string."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.agents.protocol import Agent
from agentgym.core.errors import BadInput

BUILTIN: dict[str, type[Any]] = {"random": RandomAgent, "oracle": OracleAgent}


def describe_agent(spec: str) -> dict[str, Any]:
    """The results file's ``agent`` entry: name, the exact spec, checkpoint sha256 if any."""
    from agentgym.agents.checkpoint import checkpoint_sha256, is_checkpoint_dir

    if is_checkpoint_dir(spec):
        return {
            "name": Path(spec).resolve().name,
            "spec": spec,
            "checkpoint_sha256": checkpoint_sha256(spec),
        }
    name = spec.split("#", 1)[-1] if spec.startswith("openai:") else spec.split(":")[-1]
    return {"name": name, "spec": spec, "checkpoint_sha256": None}


def load_agent(spec: str) -> Agent:
    """Build an agent from its spec.

    The spec is ``random``, ``oracle``, ``module:Class``, a checkpoint directory, or
    ``openai:URL#model`` (an OpenAI-compatible chat endpoint).

    Raises:
        BadInput: the spec names no agent, or the class does not follow the Agent protocol.
    """
    if spec in BUILTIN:
        return BUILTIN[spec]()
    if spec.startswith("openai:"):
        from agentgym.agents.openai_chat import load_openai_agent

        return load_openai_agent(spec)
    if Path(spec).is_dir():  # before module:Class: a path may contain ":"
        from agentgym.agents.checkpoint import load_checkpoint_agent

        return load_checkpoint_agent(spec)
    if ":" not in spec:
        raise BadInput(
            f"unknown agent {spec!r}: use random, oracle, module:Class, a checkpoint "
            "directory or openai:URL#model"
        )
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInput(f"cannot import agent module {module_name!r}: {e}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise BadInput(f"module {module_name!r} has no attribute {attr!r}")
    try:
        agent = cls()
    except Exception as e:
        raise BadInput(f"cannot construct agent {spec!r} with no arguments: {e}") from None
    if not isinstance(agent, Agent):
        raise BadInput(f"{spec!r} does not follow the Agent protocol (reset and act)")
    return agent


__all__ = ["BUILTIN", "Agent", "OracleAgent", "RandomAgent", "describe_agent", "load_agent"]
