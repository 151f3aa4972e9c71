"""A saved policy as an agentgym agent: ``agentgym eval --agent CKPT_DIR`` plays it.

A policy checkpoint is a directory with the policy's own files (weights, config,
``tokenizer.json``) and ``agentgym_agent.json`` naming :class:`PolicyAgent`::

    save_policy_checkpoint(policy, Path("runs/tiny"), metadata={"env_id": env_id})
    agent = load_agent("runs/tiny")       # PolicyAgent.from_checkpoint

Checkpoint config keys ``PolicyAgent`` reads (others, such as training metadata, are kept
but ignored): ``policy_class`` (``module:Class`` with a ``load`` classmethod; default
:class:`~agentgym.baselines.policies.tiny.TinyPolicy`), ``constrained`` (default true),
``greedy`` (default true), ``temperature`` (1.0), ``seed`` (0), ``max_new_tokens`` (64),
``device`` ("cpu"), and the sample layout the policy was trained with: ``layout``
("per-step", the default, or "concat": the whole episode in every prompt), ``history``
(per-step: previous (observation, action) pairs in each prompt, default 0) and ``pin_first``
(per-step: the first observation heads every prompt, default false).
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Any

from agentgym.agents.checkpoint import save_checkpoint
from agentgym.baselines.policies.base import GenOut, Policy
from agentgym.baselines.policies.constrained import decoded_action, encode_actions

AGENT_SPEC = "agentgym.baselines.policies.agent:PolicyAgent"
DEFAULT_POLICY_CLASS = "agentgym.baselines.policies.tiny:TinyPolicy"


def prompt_ids(policy: Policy, observation: Any) -> list[int]:
    """The prompt a policy sees for an observation: the observation text alone, encoded by
    the policy's ``encode_prompt`` where it has one (TinyPolicy adds ``<bos>``), else by its
    tokenizer. Training code should build prompts with this function too."""
    text = observation if isinstance(observation, str) else str(observation)
    encode = getattr(policy, "encode_prompt", None)
    return list(encode(text)) if callable(encode) else list(policy.tokenizer.encode(text))


class PolicyAgent:
    """Plays a :class:`~agentgym.baselines.policies.base.Policy`, one generation per turn.

    Where ``info["admissible_actions"]`` lists the valid actions and ``constrained`` is on,
    decoding is masked to exactly one of them (so every action is valid) and the chosen
    item's text is returned; otherwise the generated text is the action. Greedy by default;
    when sampling, the Gumbel noise is keyed by (``seed``, episode seed, turn), so an
    episode replays exactly. ``history`` builds prompts as the rollout engine does
    (:mod:`agentgym.baselines.layout`): 0 (the default) is the observation alone, ``W`` adds
    the last ``W`` (observation, action) pairs, None the whole episode (concat layout);
    ``pin_first`` keeps the first observation at the head once the window has left it.

    Attributes:
        policy: the policy played.
        tokens_used: tokens generated in the current episode, eos included.
    """

    name = "policy"

    def __init__(
        self,
        policy: Policy,
        *,
        constrained: bool = True,
        greedy: bool = True,
        temperature: float = 1.0,
        seed: int = 0,
        max_new_tokens: int = 64,
        history: int | None = 0,
        pin_first: bool = False,
    ):
        """Wrap ``policy``; see the module docstring for what each setting does."""
        self.policy = policy
        self.constrained = constrained
        self.greedy = greedy
        self.temperature = temperature
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        if history is not None and history < 0:
            raise ValueError(f"history must be >= 0 or None, got {history}")
        self.history = history
        self.pin_first = pin_first
        self._history: Any = None
        self.tokens_used = 0
        self._episode_seed = 0
        self._turn = 0

    @classmethod
    def from_checkpoint(cls, path: Path, config: dict[str, Any]) -> PolicyAgent:
        """Load the policy in ``path`` with ``config["policy_class"]``'s ``load``."""
        policy_cls = _import_class(str(config.get("policy_class", DEFAULT_POLICY_CLASS)))
        policy = policy_cls.load(Path(path), device=config.get("device", "cpu"))
        if hasattr(policy, "eval"):
            policy.eval()
        return cls(
            policy,
            constrained=bool(config.get("constrained", True)),
            greedy=bool(config.get("greedy", True)),
            temperature=float(config.get("temperature", 1.0)),
            seed=int(config.get("seed", 0)),
            max_new_tokens=int(config.get("max_new_tokens", 64)),
            history=None if config.get("layout") == "concat" else int(config.get("history", 0)),
            pin_first=bool(config.get("pin_first", False)),
        )

    def reset(self, env_id: str, seed: int) -> None:
        """Start an episode: zero the token count and key the sampling noise by ``seed``."""
        self._episode_seed = int(seed)
        self._turn = 0
        self.tokens_used = 0
        self._history = None

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """One generation from the observation text (and, with ``history``, the episode's
        earlier observations and actions); an admissible item when constrained."""
        if self.history == 0 and not self.pin_first:
            prompt = prompt_ids(self.policy, observation)
        else:
            from agentgym.baselines.layout import History

            if self._history is None:
                self._history = History(self.policy)
            self._history.observe(observation)
            prompt = self._history.prompt(self.history, self.pin_first)
        admissible = info.get("admissible_actions") if self.constrained else None
        choices = encode_actions(self.policy.tokenizer, admissible) if admissible else None
        allowed = None if choices is None else [list(seq) for seq in choices]
        out = self._generate(prompt, allowed)
        if self._history is not None:
            self._history.act(out.ids)
        action = decoded_action(self.policy.tokenizer, out.ids, choices)
        self._turn += 1
        return action

    def _generate(self, prompt: list[int], allowed: list[list[int]] | None) -> GenOut:
        key = _key(self.seed, self._episode_seed, self._turn)
        out = self.policy.generate(
            [prompt],
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            greedy=self.greedy,
            gumbel_keys=None if self.greedy else [key],
            allowed=None if allowed is None else [allowed],
        )[0]
        self.tokens_used += len(out.ids)
        return out


def save_policy_checkpoint(
    policy: Policy, path: Path, *, metadata: dict[str, Any] | None = None
) -> Path:
    """Write ``policy`` as a checkpoint directory that ``agentgym eval --agent`` loads.

    The policy's files come first (``policy.save``), ``agentgym_agent.json`` last, so a
    half-written directory is never taken for a checkpoint. The manifest's config is
    ``{"policy_class": <policy's module:Class>, "constrained": True, **metadata}``.

    Args:
        policy: any policy whose class has ``save`` and ``load``.
        path: the checkpoint directory (created if needed).
        metadata: JSON-able extras (training settings, env id, step) and overrides of the
            agent settings listed in the module docstring.

    Returns:
        ``path``.
    """
    root = Path(path)
    policy.save(root)
    policy_class = f"{type(policy).__module__}:{type(policy).__qualname__}"
    config = {"policy_class": policy_class, "constrained": True, **(metadata or {})}
    return save_checkpoint(root, AGENT_SPEC, config)


def _import_class(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"policy_class must be 'module:Class', got {spec!r}")
    cls = getattr(importlib.import_module(module_name), attr, None)
    if cls is None or not callable(getattr(cls, "load", None)):
        raise ValueError(f"{spec} is not a policy class with a load(path, device) classmethod")
    return cls


def _key(*parts: int) -> int:
    """A 63-bit Gumbel key from integers (stable across processes and platforms)."""
    data = ":".join(str(int(p)) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") >> 1
