"""The prompt format and the one way to act: what a policy sees, and how it picks an action.

Training and evaluation share both: the rollout engine, the warm start's demonstrations and
:class:`~agentgym.baselines.policies.agent.PolicyAgent` build prompts with a
:class:`History` under one frozen :class:`PromptFormat` (saved in every checkpoint as one
object), and generate through :func:`act`. A new prompt option is a new field of
:class:`PromptFormat` and a line in :meth:`History.prompt`, nothing else.

Token encoding of a history (the two sample layouts of CREDIT.md §0):

* the oldest observation in the prompt: :func:`prompt_ids` (TinyPolicy puts ``<bos>`` first);
* each action: its token ids as generated, eos included;
* each later observation: ``tokenizer.encode(OBS_SEPARATOR + obs)``.

Segments are encoded one by one and concatenated (never the joined text re-encoded), which is
what makes the concat layout's prefix property exact: turn ``k``'s prompt is turn ``k-1``'s
prompt + response + observation ``k``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from agentgym.baselines.policies.base import GenOut, Policy
from agentgym.baselines.policies.constrained import decoded_action, encode_actions

LAYOUTS = ("per-step", "concat")
"""The sample layouts a :class:`PromptFormat` takes."""
OBS_SEPARATOR = "\n"
"""Text put before every observation that follows an action in a history prompt."""
PRIVILEGED_KEY = "privileged_context"
"""The ``info`` key whose text the privileged view inserts."""

Choices = dict[tuple[int, ...], str]
"""Token sequence -> action text: the actions constrained decoding may produce."""


@dataclass(frozen=True)
class PromptFormat:
    """How the prompt of each turn is built from the episode so far.

    Saved in every checkpoint (:meth:`to_json`), so evaluation rebuilds exactly the prompts
    the policy was trained on.
    """

    layout: str = "per-step"
    """"per-step": ``history`` previous (observation, action) pairs, then the current
    observation; "concat": the whole episode so far (turn k's prompt = turn k-1's prompt +
    response + observation k)."""
    history: int = 0
    """per-step only: previous (observation, action) pairs before the current observation
    (0: the observation alone)."""
    pin_first: bool = False
    """per-step only: keep the episode's first observation at the head of every prompt once
    the window has left it (text games state the task only there)."""
    context: int | None = None
    """Most prompt tokens kept, the most recent ones (None: all; the policy still cuts a
    prompt longer than its own context)."""
    privileged: bool = field(default=False, metadata={"option": False})
    """The privileged view: the privileged text of the state being acted from (the env's
    ``info["privileged_context"]``, present when the env is made with ``privileged=True``, or
    a text the caller gives) opens the prompt, ahead of its oldest observation, the rest of
    the prompt unchanged (self-distillation teachers score the same tokens under it). Never a
    training option: a teacher's view is ``dataclasses.replace(fmt, privileged=True)`` of the
    run's own format."""

    def __post_init__(self) -> None:
        """Refuse a layout, window or context that cannot be built."""
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.history < 0:
            raise ValueError(f"history must be >= 0, got {self.history}")
        if self.layout == "concat" and (self.history or self.pin_first):
            raise ValueError(
                "history and pin_first apply to the per-step layout; concat keeps everything"
            )
        if self.context is not None and self.context < 1:
            raise ValueError(f"context must be >= 1 or None, got {self.context}")

    @property
    def window(self) -> int | None:
        """Previous (observation, action) pairs in a prompt: ``history``, or None (concat)."""
        return None if self.layout == "concat" else self.history

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON object (the checkpoint's ``"prompt"`` entry)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PromptFormat:
        """Inverse of :meth:`to_json`; unknown keys are refused.

        Raises:
            ValueError: an unknown key or an invalid value.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise ValueError(f"unknown prompt format keys {unknown}: known are {sorted(names)}")
        return cls(**dict(doc))

    @classmethod
    def from_checkpoint(cls, config: Mapping[str, Any]) -> PromptFormat:
        """The format a checkpoint's manifest config records.

        Current checkpoints hold it as ``config["prompt"]``; earlier ones kept ``layout``,
        ``history`` and ``pin_first`` at the top level of the config, and are read the same.
        """
        if "prompt" in config:
            return cls.from_json(config["prompt"])
        layout = str(config.get("layout", "per-step"))
        per_step = layout != "concat"
        return cls(
            layout=layout,
            history=int(config.get("history", 0)) if per_step else 0,
            pin_first=bool(config.get("pin_first", False)) if per_step else False,
        )


def prompt_ids(policy: Policy, observation: Any) -> list[int]:
    """The tokens of an observation that opens a prompt.

    The text is encoded by the policy's ``encode_prompt`` where it has one (TinyPolicy adds
    ``<bos>``), else by its tokenizer.
    """
    text = observation if isinstance(observation, str) else str(observation)
    encode = getattr(policy, "encode_prompt", None)
    return list(encode(text)) if callable(encode) else list(policy.tokenizer.encode(text))


def observation_ids(policy: Policy, observation: Any, *, first: bool) -> list[int]:
    """Tokens of one observation inside a history prompt.

    :func:`prompt_ids` for the oldest one (``first``), else the tokenizer's encoding of
    ``OBS_SEPARATOR + observation``.
    """
    if first:
        return prompt_ids(policy, observation)
    text = observation if isinstance(observation, str) else str(observation)
    return list(policy.tokenizer.encode(OBS_SEPARATOR + text))


class History:
    """One episode's observations and responses so far; builds each turn's prompt.

    ``observations`` holds one more item than ``responses`` while the policy is to act: the
    current observation is the last. Encoded segments are cached, so building the prompt of
    every turn costs one encoding per observation.
    """

    def __init__(
        self,
        policy: Policy,
        fmt: PromptFormat,
        observations: Sequence[Any] = (),
        responses: Sequence[Sequence[int] | Tensor] = (),
        privileged_context: str | None = None,
    ):
        """Start from past ``observations`` and ``responses`` (token ids as generated).

        Args:
            policy: supplies the tokenizer (and ``encode_prompt``).
            fmt: the prompt format.
            observations: the observations seen so far.
            responses: the token ids of the responses so far.
            privileged_context: the privileged view's text (used when ``fmt.privileged``)
                for every turn; None: each turn's own, from the ``info`` :meth:`observe`
                was given with its observation (the latest one given, where an info had none).
        """
        self.policy = policy
        self.fmt = fmt
        self.observations: list[Any] = list(observations)
        self.responses: list[list[int]] = [_ids(r) for r in responses]
        self.privileged_context = privileged_context
        self._contexts: list[str | None] = [None] * len(self.observations)
        self._first: dict[tuple[int, str | None], list[int]] = {}
        self._later: dict[int, list[int]] = {}

    def observe(self, observation: Any, info: Mapping[str, Any] | None = None) -> None:
        """Append the observation the policy acts from next.

        Its ``info`` supplies the privileged view's text of that turn (when it has one).
        """
        context = None if info is None else info.get(PRIVILEGED_KEY)
        self._contexts.append(None if context is None else str(context))
        self.observations.append(observation)

    def context(self) -> str | None:
        """The privileged text of the current turn (see ``privileged_context``)."""
        if self.privileged_context is not None:
            return self.privileged_context
        return next((c for c in reversed(self._contexts) if c is not None), None)

    def act(self, response_ids: Sequence[int] | Tensor) -> None:
        """Append the response to the current observation."""
        self.responses.append(_ids(response_ids))

    def prompt(self) -> list[int]:
        """The prompt for the current (last) observation, built as :attr:`fmt` says.

        Raises:
            ValueError: there is no current observation, or responses and observations do
                not alternate.
        """
        k = len(self.observations) - 1
        if k < 0 or len(self.responses) != k:
            raise ValueError(
                f"a history prompt needs one more observation than responses, got "
                f"{len(self.observations)} observations and {len(self.responses)} responses"
            )
        window = self.fmt.window
        start = 0 if window is None else max(0, k - window)
        head = self.context() if self.fmt.privileged else None
        if self.fmt.pin_first and start > 0:
            out = [*self._opening(0, head), *self._segment(start)]
        else:
            out = list(self._opening(start, head))
        for j in range(start, k):
            out += self.responses[j]
            out += self._segment(j + 1)
        if self.fmt.context is not None:
            out = out[-self.fmt.context :]
        return out

    def _opening(self, j: int, head: str | None) -> list[int]:
        """Observation ``j`` opening the prompt, after the privileged text ``head`` if any."""
        if (j, head) not in self._first:
            observation = self.observations[j]
            if head:
                observation = f"{head}{OBS_SEPARATOR}{observation}"
            self._first[(j, head)] = observation_ids(self.policy, observation, first=True)
        return self._first[(j, head)]

    def _segment(self, j: int) -> list[int]:
        """Observation ``j`` inside the prompt, after an action."""
        if j not in self._later:
            self._later[j] = observation_ids(self.policy, self.observations[j], first=False)
        return self._later[j]


@dataclass
class Action:
    """One acted turn: the prompt, what the policy generated, and the action it stands for.

    Attributes:
        prompt: the prompt's token ids.
        out: the generation (response ids with their behaviour log-probs).
        text: the action sent to ``env.step``: the chosen item's text when decoding was
            constrained, else the decoded response.
        choices: the actions decoding was constrained to, or None.
    """

    prompt: list[int]
    out: GenOut
    text: str
    choices: Choices | None


def action_choices(policy: Policy, info: Mapping[str, Any], constrained: bool) -> Choices | None:
    """The actions decoding is constrained to at a state, or None (free text).

    They are its admissible actions, encoded, when ``constrained`` and the env lists them.
    """
    admissible = info.get("admissible_actions") if constrained else None
    return encode_actions(policy.tokenizer, admissible) if admissible else None


def act(
    policy: Policy,
    prompts: Sequence[list[int]],
    choices: Sequence[Choices | None],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    greedy: bool = False,
    gumbel_keys: list[int] | None = None,
) -> list[Action]:
    """One batched generation: an action for each prompt.

    Args:
        policy: generates.
        prompts: one prompt per row (from :meth:`History.prompt`).
        choices: per row, the actions decoding is constrained to (:func:`action_choices`),
            or None for free text.
        max_new_tokens: the most tokens of a free row (a constrained row's budget grows to
            its longest choice).
        temperature: sampling temperature.
        greedy: take the most likely token.
        gumbel_keys: per row, a key fixing its sampling noise (None: torch's generator).

    Returns:
        One :class:`Action` per prompt, in order.
    """
    outs = policy.generate(
        list(prompts),
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        greedy=greedy,
        gumbel_keys=gumbel_keys,
        allowed=[None if c is None else [list(seq) for seq in c] for c in choices],
    )
    return [
        Action(list(p), out, decoded_action(policy.tokenizer, out.ids, c), c)
        for p, out, c in zip(prompts, outs, choices, strict=True)
    ]


def _ids(x: Sequence[int] | Tensor) -> list[int]:
    if isinstance(x, Tensor):
        return [int(v) for v in x.reshape(-1).tolist()]
    return [int(v) for v in x]
