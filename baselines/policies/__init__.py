"""Policies: the protocol, a tiny from-scratch transformer, constrained decoding, and the
agent that plays a saved policy.

    from agentgym.baselines.policies import TinyPolicy, collect_env_text, train_tokenizer
"""

from agentgym.baselines.policies.agent import PolicyAgent, prompt_ids, save_policy_checkpoint
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
    "prompt_ids",
    "save_policy_checkpoint",
    "train_tokenizer",
]
