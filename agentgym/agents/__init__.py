"""Agents: the protocol, the built-in agents and loading an agent from its spec string."""

from __future__ import annotations

import importlib
from typing import Any

from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.agents.protocol import Agent
from agentgym.core.errors import BadInput

BUILTIN: dict[str, type[Any]] = {"random": RandomAgent, "oracle": OracleAgent}


def load_agent(spec: str) -> Agent:
    """Build an agent from its spec: ``random``, ``oracle`` or ``module:Class``.

    Raises:
        BadInput: the spec names no agent, or the class does not follow the Agent protocol.
    """
    if spec in BUILTIN:
        return BUILTIN[spec]()
    if ":" not in spec:
        raise BadInput(f"unknown agent {spec!r}: use random, oracle or module:Class")
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


__all__ = ["BUILTIN", "Agent", "OracleAgent", "RandomAgent", "load_agent"]
