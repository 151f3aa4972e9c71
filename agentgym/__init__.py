"""agentgym: a workbench for credit assignment in multi-turn LLM-agent reinforcement learning.

``import agentgym`` registers every environment id with gymnasium, so ``gymnasium.make``
knows them, also in worker processes that import agentgym.
"""

from __future__ import annotations

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import (
    AgentGymError,
    BadInput,
    MissingInfoKey,
    ResetNeeded,
    SnapshotMismatch,
    UnknownEnv,
)
from agentgym.core.menu import Menu
from agentgym.core.spaces import String
from agentgym.registry import env_ids, env_info, make, make_vec, register, register_all

__version__ = "0.1.0"

__all__ = [
    "AgentEnv",
    "AgentGymError",
    "BadInput",
    "Menu",
    "MissingInfoKey",
    "ResetNeeded",
    "SnapshotMismatch",
    "String",
    "Transition",
    "UnknownEnv",
    "__version__",
    "env_ids",
    "env_info",
    "make",
    "make_vec",
    "register",
    "register_all",
]

register_all()
