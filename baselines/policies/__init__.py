"""Policies: the protocol, a tiny transformer, sampling, and the agent that plays a policy.

The package holds the protocol, a tiny from-scratch transformer, shared sampling and
constrained decoding, and the agent that plays a saved policy.

    from agentgym.baselines.policies import TinyPolicy, collect_env_text, train_tokenizer

The agent's names (``PolicyAgent``, ``save_policy_checkpoint``) load on first use: the agent
builds prompts with :mod:`agentgym.baselines.prompt`, which itself stands on this package.
"""

from typing import Any

from agentgym.baselines.policies.base import GenOut, Policy
from agentgym.baselines.policies.constrained import TokenTrie
from agentgym.baselines.policies.tiny import PRESETS, TinyConfig, TinyPolicy
from agentgym.baselines.policies.tokenizer import Tokenizer, collect_env_text, train_tokenizer

__all__ = [
    "PRESETS",
    "GenOut",
    "Policy",
    "PolicyAgent",
    "TinyConfig",
    "TinyPolicy",
    "TokenTrie",
    "Tokenizer",
    "collect_env_text",
    "save_policy_checkpoint",
    "train_tokenizer",
]

_AGENT_NAMES = ("PolicyAgent", "save_policy_checkpoint")


def __getattr__(name: str) -> Any:
    """``PolicyAgent`` and ``save_policy_checkpoint``, imported when first asked for."""
    if name in _AGENT_NAMES:
        from agentgym.baselines.policies import agent

        return getattr(agent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
