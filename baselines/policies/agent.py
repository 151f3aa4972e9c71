"""A saved policy as an agentgym agent: ``agentgym eval --agent CKPT_DIR`` plays it.

A policy checkpoint is a directory with the policy's own files (weights, config,
``tokenizer.json``) and ``agentgym_agent.json`` naming :class:`PolicyAgent`::

    save_policy_checkpoint(policy, Path("runs/tiny"), metadata={"prompt": fmt.to_json()})
    agent = load_agent("runs/tiny")       # PolicyAgent.from_checkpoint

Checkpoint config keys ``PolicyAgent`` reads (others, such as training metadata, are kept
but ignored): ``policy_class`` (``module:Class`` with a ``load`` classmethod; default
:class:`~agentgym.baselines.policies.tiny.TinyPolicy`), ``constrained`` (default true),
``greedy`` (default true), ``temperature`` (1.0), ``seed`` (0), ``max_new_tokens`` (64),
``device`` ("cpu"), ``threads`` (1: torch's CPU threads while it generates, whatever the
host's default, so a checkpoint scores the same on any machine), and ``prompt``, the
:class:`~agentgym.baselines.prompt.PromptFormat` the policy was trained with (checkpoints
written before it existed kept ``layout``, ``history`` and ``pin_first`` at the top level,
and load the same).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
from pathlib import Path
from typing import Any

from agentgym.agents.checkpoint import save_checkpoint
from agentgym.baselines.policies.base import Policy
from agentgym.baselines.prompt import History, PromptFormat, act, action_choices
from agentgym.baselines.threads import torch_threads
from agentgym.core.errors import BadInput

AGENT_SPEC = "agentgym.baselines.policies.agent:PolicyAgent"
DEFAULT_POLICY_CLASS = "agentgym.baselines.policies.tiny:TinyPolicy"


class PolicyAgent:
    """Plays a :class:`~agentgym.baselines.policies.base.Policy`, one generation per turn.

    Prompts are built and actions chosen exactly as the rollout engine does
    (:mod:`agentgym.baselines.prompt`): where ``info["admissible_actions"]`` lists the valid
    actions and ``constrained`` is on, decoding is masked to exactly one of them (so every
    action is valid) and the chosen item's text is returned; otherwise the generated text
    is the action. Greedy by default; when sampling, the Gumbel noise is keyed by (``seed``,
    episode seed, turn), so an episode replays exactly.

    Attributes:
        policy: the policy played.
        prompt: the prompt format (layout, history window, pinned first observation).
        tokens_used: tokens generated in the current episode, eos included.
    """

    name = "policy"
    OPTIONS = frozenset(
        {"constrained", "greedy", "temperature", "seed", "max_new_tokens", "device", "threads"}
    )
    """The checkpoint settings ``eval --agent-option`` may override."""

    def __init__(
        self,
        policy: Policy,
        *,
        constrained: bool = True,
        greedy: bool = True,
        temperature: float = 1.0,
        seed: int = 0,
        max_new_tokens: int = 64,
        prompt: PromptFormat | None = None,
        threads: int = 1,
    ):
        """Wrap ``policy``; see the module docstring for what each setting does."""
        self.policy = policy
        self.constrained = constrained
        self.greedy = greedy
        self.temperature = temperature
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.prompt = prompt if prompt is not None else PromptFormat()
        self.threads = threads
        self._history = History(policy, self.prompt)
        self.tokens_used = 0
        self._episode_seed = 0
        self._turn = 0

    @classmethod
    def from_checkpoint(cls, path: Path, config: dict[str, Any]) -> PolicyAgent:
        """Load the policy in ``path`` with ``config["policy_class"]``'s ``load``."""
        policy_cls = import_policy_class(str(config.get("policy_class", DEFAULT_POLICY_CLASS)))
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
            prompt=PromptFormat.from_checkpoint(config),
            threads=int(config.get("threads", 1)),
        )

    @classmethod
    def from_named(
        cls, name: str, arg: str, overrides: dict[str, Any] | None = None
    ) -> PolicyAgent:
        """The plain agent of ``NAME:DIR`` (a named agent built on a policy checkpoint).

        Raises:
            BadInput: ``arg`` is not a checkpoint directory, or not a policy checkpoint.
        """
        from agentgym.agents.checkpoint import is_checkpoint_dir, read_manifest

        if not is_checkpoint_dir(arg):
            raise BadInput(f"{name}:{arg}: {arg!r} is not a checkpoint directory")
        manifest = read_manifest(arg)
        if manifest["agent"] != AGENT_SPEC:
            raise BadInput(f"{name}:{arg} needs a policy checkpoint, not {manifest['agent']}")
        return cls.from_checkpoint(Path(arg), {**manifest["config"], **(overrides or {})})

    def reset(self, env_id: str, seed: int) -> None:
        """Start an episode: zero the token count and key the sampling noise by ``seed``."""
        self._episode_seed = int(seed)
        self._turn = 0
        self.tokens_used = 0
        self._history = History(self.policy, self.prompt)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """One generation from the prompt of the episode so far.

        It is an admissible item when constrained.
        """
        self._history.observe(observation, info)
        key = stable_key(self.seed, self._episode_seed, self._turn)
        with torch_threads(self.threads):
            (acted,) = act(
                self.policy,
                [self._history.prompt()],
                [action_choices(self.policy, info, self.constrained)],
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                greedy=self.greedy,
                gumbel_keys=None if self.greedy else [key],
            )
        self.tokens_used += len(acted.out.ids)
        self._history.act(acted.out.ids)
        self._turn += 1
        return acted.text


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


def import_policy_class(spec: str) -> Any:
    """The policy class named by ``"module:Class"`` (it must have a ``load`` classmethod).

    Raises:
        ValueError: the spec is malformed or names no policy class.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"policy_class must be 'module:Class', got {spec!r}")
    cls = getattr(importlib.import_module(module_name), attr, None)
    if cls is None or not callable(getattr(cls, "load", None)):
        raise ValueError(f"{spec} is not a policy class with a load(path, device) classmethod")
    return cls


def settings_of(cls: Any, options: dict[str, Any], agent: str) -> Any:
    """An instance of the frozen dataclass ``cls`` from ``eval --agent-option`` values.

    A value must have its field's type (an int where the default is an int; an int or a
    float for a float; an int or null for a field that defaults to None).

    Raises:
        BadInput: an unknown option or a value of the wrong type, naming ``agent``.
    """
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise BadInput(f"{agent} has no option {', '.join(unknown)} (it takes {sorted(known)})")
    for name, value in options.items():
        default = known[name].default
        if default is None:  # an optional int (a layer index)
            kind, fits = "an int or null", value is None or _is_int(value)
        elif isinstance(default, bool):
            kind, fits = "true or false", isinstance(value, bool)
        elif isinstance(default, float):
            kind, fits = "a number", _is_int(value) or isinstance(value, float)
        else:
            kind, fits = f"a {type(default).__name__}", type(value) is type(default)
        if not fits:
            raise BadInput(f"{agent} option {name} takes {kind}, got {value!r}")
    return cls(**options)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def stable_key(*parts: int) -> int:
    """A 63-bit Gumbel key from integers (stable across processes and platforms)."""
    data = ":".join(str(int(p)) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") >> 1
