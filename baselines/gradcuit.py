"""GradCuit (CREDIT.md §15): a frozen policy that optimises its own latents at test time.

``agentgym eval --agent gradcuit:DIR [--agent-option KEY=VALUE ...]`` plays the policy
checkpoint in ``DIR`` with its weights frozen. The hidden states entering block ``layer``
(layer 0: the input embeddings) of the prompt's last tokens, or of a short prefix text
appended to every prompt, become latents ``z = z0 + δ``. Each turn:

1. decode the action from ``z0`` (``δ = 0``, a fresh offset per turn);
2. ask the verifier for a score ``s`` in [0, 1] and set ``r = s - 1`` (in [-1, 0]);
3. while ``r <= threshold`` and fewer than ``steps`` updates were taken: one Adam step on
   ``δ`` for the REINFORCE loss ``-r · Σ_t log p(y_t | x, z0 + δ)`` (the gradient reaches
   the latents through attention), then decode again and ask the verifier again;
4. play the last decoded action (the paper's rule, not the best one seen).

The verifier (``verifier``) is the env's own answer checker where the action is an answer
(it starts with ``env.answer_prefix()``; ``check_answer`` scores the rest: search answers,
tools summaries), else:

* ``step`` (default, the paper's one-shot check): a trial step, ``snapshot``, ``step``,
  ``restore``. A trial step that ends the episode scores 1 when won and 0 otherwise, an
  invalid action scores 0, and any other step gives no verdict (the action is kept);
* ``rollout``: the trial step, then the frozen policy plays on greedily to the episode's end
  before the restore; 1 when won, else the last action's answer score (0 if none). It gives
  a verdict at every turn, the decisive early ones of a delayed-credit env included, at one
  episode's remainder of generations per verification (``verifier_generations``).
 Nothing of a trial reaches the real episode: the env is
restored before the harness steps it, and the recorded transcript is the one a plain agent
playing the same final actions produces (tested).

The extra work is recorded per episode in ``compute`` (:mod:`agentgym.harness.episode`):
``generations`` (every decode, the first of each turn included), ``forward`` and ``backward``
(the teacher-forced scoring passes of the updates), ``verifier`` (verifier calls) and
``updates``.

Options (``--agent-option``): ``steps`` (5), ``lr`` (Adam's, 1e-3 as the official example),
``layer`` (None: the middle block, as the example's 14 of 28), ``threshold`` (-0.2),
``prefix`` ("": the latents are the states of the last ``span`` prompt tokens; the official
example appends :data:`DEFAULT_PREFIX` and takes its tokens' states, which suits an
instruction-tuned model but throws a small policy trained without it off its own actions,
hence not the default), ``span`` (8), and the checkpoint's own settings (``greedy``,
``temperature``, ``seed``, ``max_new_tokens``, ``device``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from agentgym.baselines.policies.agent import PolicyAgent, settings_of, stable_key
from agentgym.baselines.policies.base import BlockHook, Policy
from agentgym.baselines.policies.constrained import allowed_tokens
from agentgym.baselines.policies.sampling import Responses
from agentgym.baselines.prompt import Action, History, act, action_choices
from agentgym.core.errors import BadInput

DEFAULT_PREFIX = "Let's think about this problem and solve it step by step."
VERIFIERS = ("step", "rollout")


@dataclass(frozen=True)
class GradCuitSettings:
    """The test-time optimisation's settings (see the module docstring)."""

    steps: int = 5
    lr: float = 1e-3
    layer: int | None = None
    threshold: float = -0.2
    prefix: str = ""
    span: int = 8
    verifier: str = "step"

    def __post_init__(self) -> None:
        """Refuse settings outside their ranges (BadInput)."""
        if self.verifier not in VERIFIERS:
            raise BadInput(f"gradcuit verifier must be one of {', '.join(VERIFIERS)}")
        if self.steps < 0 or self.lr <= 0 or self.span < 1 or not -1 <= self.threshold <= 0:
            raise BadInput(
                "gradcuit needs steps >= 0, lr > 0, span >= 1 and -1 <= threshold <= 0, got "
                f"steps={self.steps}, lr={self.lr}, span={self.span}, "
                f"threshold={self.threshold}"
            )


def latent_offset(layer: int, start: int, delta: torch.Tensor) -> BlockHook:
    """A block hook adding ``delta[j]`` to the states at position ``start + j`` entering ``layer``.

    Positions outside ``[start, start + len(delta))`` (decode steps, earlier prompt tokens)
    are left as they are, so one hook serves the prefill, every decode step and scoring.
    """

    def hook(i: int, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if i != layer:
            return x
        rel = pos - start
        inside = (rel >= 0) & (rel < delta.shape[0])
        if not bool(inside.any()):
            return x
        add = delta[rel.clamp(0, delta.shape[0] - 1)] * inside[..., None].to(x.dtype)
        return x + add.to(x.dtype)

    return hook


@contextmanager
def hooked(policy: Any, hook: BlockHook) -> Iterator[None]:
    """Install ``hook`` on ``policy``'s blocks for the duration of the block."""
    policy.set_block_hook(hook)
    try:
        yield
    finally:
        policy.set_block_hook(None)


class EnvVerifier:
    """The env's verdicts on an action text: a score in [0, 1], or None for no verdict."""

    def __init__(self, env: Any):
        """Verify against ``env`` (the unwrapped env the harness binds)."""
        self.env = env
        self.prefix = _answer_prefix(env)
        self.snapshots = bool(getattr(env, "supports_snapshot", False))

    def answer(self, text: str) -> float | None:
        """The answer checker's score where ``text`` is an answer, else None."""
        if self.prefix is None or not text.startswith(self.prefix):
            return None
        return float(self.env.check_answer(_inside(text[len(self.prefix) :], self.prefix)))

    def __call__(self, text: str) -> float | None:
        """The answer's score, else a trial step's verdict (rolled back), else None."""
        score = self.answer(text)
        if score is not None or not self.snapshots:
            return score
        saved = self.env.snapshot()
        try:
            _, _, terminated, _, info = self.env.step(text)
        finally:
            self.env.restore(saved)
        if not info.get("action_valid", True):
            return 0.0
        if terminated:
            return 1.0 if info.get("won") else 0.0
        return None


def _answer_prefix(env: Any) -> str | None:
    try:
        env.check_answer("")
        return str(env.answer_prefix())
    except (AttributeError, NotImplementedError):
        return None


def _inside(text: str, prefix: str) -> str:
    """The answer inside a tag prefix (``x</answer>...`` → ``x``); else as is."""
    if prefix.startswith("<") and prefix.endswith(">"):
        return text.split("</" + prefix[1:], 1)[0]
    return text


class GradCuitAgent(PolicyAgent):
    """A :class:`PolicyAgent` that optimises latent states per turn against a verifier.

    Attributes:
        settings: the optimisation's settings.
        compute_used: this episode's counts (``generations``, ``forward``, ``backward``,
            ``verifier``, ``updates``), recorded by the harness.
    """

    name = "gradcuit"

    def __init__(self, policy: Policy, settings: GradCuitSettings, **agent: Any):
        """Freeze ``policy``'s weights; ``agent`` are :class:`PolicyAgent`'s settings."""
        super().__init__(policy, **agent)
        if not callable(getattr(policy, "set_block_hook", None)):
            raise BadInput(f"{type(policy).__name__} has no block hooks for gradcuit's latents")
        for p in list(policy.parameters()):
            p.requires_grad_(False)
        self.settings = settings
        blocks = int(policy.num_blocks)  # type: ignore[attr-defined]
        self.layer = blocks // 2 if settings.layer is None else settings.layer
        if not 0 <= self.layer < blocks:
            raise BadInput(f"gradcuit layer must be in [0, {blocks}), got {self.layer}")
        policy.set_block_hook(None)  # type: ignore[attr-defined]  # refuses one off the lean forward
        self._prefix = policy.tokenizer.encode(settings.prefix) if settings.prefix else []
        self._verify: EnvVerifier | None = None
        self.compute_used: dict[str, int] = {}

    @classmethod
    def from_spec(cls, arg: str, options: dict[str, Any]) -> GradCuitAgent:
        """``gradcuit:DIR``: the policy checkpoint in ``DIR`` with ``options``."""
        theirs = {k: v for k, v in options.items() if k in PolicyAgent.OPTIONS}
        ours = {k: v for k, v in options.items() if k not in theirs}
        plain = PolicyAgent.from_named("gradcuit", arg, theirs)
        settings = settings_of(GradCuitSettings, ours, "gradcuit")
        return cls(
            plain.policy,
            settings,
            constrained=plain.constrained,
            greedy=plain.greedy,
            temperature=plain.temperature,
            seed=plain.seed,
            max_new_tokens=plain.max_new_tokens,
            prompt=plain.prompt,
        )

    def bind(self, env: Any) -> None:
        """Take the env's verifier (called by the harness after each reset)."""
        self._verify = EnvVerifier(env)

    def reset(self, env_id: str, seed: int) -> None:
        """Start an episode: zero the counts too."""
        super().reset(env_id, seed)
        names = ["generations", "forward", "backward", "verifier", "updates"]
        if self.settings.verifier == "rollout":
            names.append("verifier_generations")
        self.compute_used = dict.fromkeys(names, 0)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """Decode, verify, and optimise the latents while the verifier is not satisfied."""
        self._history.observe(observation, info)
        choices = action_choices(self.policy, info, self.constrained)
        prompt, start = self._latent_prompt(choices)
        delta = torch.zeros(len(prompt) - start, self._width(), requires_grad=True)
        adam = torch.optim.Adam([delta], lr=self.settings.lr)
        hook = latent_offset(self.layer, start, delta)
        acted = self._decode(prompt, choices, hook, 0)
        score = self._score(acted)
        for k in range(1, self.settings.steps + 1):
            if score is None or score - 1.0 > self.settings.threshold:
                break
            self._update(acted, hook, adam, reward=score - 1.0)
            acted = self._decode(prompt, choices, hook, k)
            score = self._score(acted)
        self.tokens_used += len(acted.out.ids)
        self._history.act(acted.out.ids)
        self._turn += 1
        return acted.text

    # -- the pieces of a turn ----------------------------------------------------------------

    def _latent_prompt(self, choices: Any) -> tuple[list[int], int]:
        """The prompt with the prefix, cut to fit generation, and where the latents start."""
        prompt = [*self._history.prompt(), *self._prefix]
        max_len = getattr(getattr(self.policy, "config", None), "max_len", None)
        if isinstance(max_len, int):  # generate and logprobs must see the same columns
            allowed = None if choices is None else [[list(seq) for seq in choices]]
            steps = Responses(allowed, 1, self.max_new_tokens, self.policy.tokenizer.eos_id).steps
            prompt = prompt[-(max_len + 1 - steps) :]
        span = len(self._prefix) if self._prefix else self.settings.span
        return prompt, max(1, len(prompt) - span)

    def _width(self) -> int:
        """The width of the hidden states (the tiny policy's, or the Hugging Face model's)."""
        width = getattr(getattr(self.policy, "config", None), "n_embd", None)
        if width is None:
            width = self.policy.model.config.hidden_size  # type: ignore[attr-defined]
        return int(width)

    def _decode(self, prompt: list[int], choices: Any, hook: BlockHook, k: int) -> Action:
        key = stable_key(self.seed, self._episode_seed, self._turn, k)
        with hooked(self.policy, hook):
            (acted,) = act(
                self.policy,
                [prompt],
                [choices],
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                greedy=self.greedy,
                gumbel_keys=None if self.greedy else [key],
            )
        self.compute_used["generations"] += 1
        return acted

    def _score(self, acted: Action) -> float | None:
        self.compute_used["verifier"] += 1
        verify = self._verify
        if verify is None:
            return None
        if self.settings.verifier == "rollout" and verify.snapshots:
            return self._rollout_score(verify, acted)
        return verify(acted.text)

    def _rollout_score(self, verify: EnvVerifier, acted: Action) -> float:
        """Play ``acted``, then the plain policy greedily to the end; roll it all back.

        1 for a won episode, else the last action's answer score (0 if it is no answer).
        """
        env, history = verify.env, self._history
        after = History(self.policy, self.prompt, history.observations, history.responses)
        after.act(acted.out.ids)
        saved, text = env.snapshot(), acted.text
        try:
            obs, _, terminated, truncated, info = env.step(text)
            while not (terminated or truncated):
                after.observe(obs, info)
                choices = action_choices(self.policy, info, self.constrained)
                (nxt,) = act(self.policy, [after.prompt()], [choices],
                             max_new_tokens=self.max_new_tokens, greedy=True)  # fmt: skip
                self.compute_used["verifier_generations"] += 1
                after.act(nxt.out.ids)
                text = nxt.text
                obs, _, terminated, truncated, info = env.step(text)
        finally:
            env.restore(saved)
        return 1.0 if info.get("won") else (verify.answer(text) or 0.0)

    def _update(
        self, acted: Action, hook: BlockHook, adam: torch.optim.Optimizer, *, reward: float
    ) -> None:
        reinforce_step(self.policy, acted, hook, adam, reward=reward, temperature=self.temperature)
        for name in ("forward", "backward", "updates"):
            self.compute_used[name] += 1


def reinforce_step(
    policy: Policy,
    acted: Action,
    hook: BlockHook,
    adam: torch.optim.Optimizer,
    *,
    reward: float,
    temperature: float = 1.0,
) -> float:
    """One Adam step on the latents behind ``hook`` for ``-reward · Σ log p(y | x, z)``.

    ``y`` is ``acted``'s response, scored teacher-forced under the same decoding mask it was
    generated with. Only the tensors ``adam`` holds get gradients and change.

    Returns:
        The loss before the step.
    """
    mask = None
    if acted.choices is not None:
        mask = [allowed_tokens(acted.out.ids, list(acted.choices), policy.tokenizer.eos_id)]
    prompt = torch.tensor(acted.prompt, dtype=torch.long)
    response = torch.tensor(acted.out.ids, dtype=torch.long)
    latents = [p for group in adam.param_groups for p in group["params"]]
    with hooked(policy, hook), torch.enable_grad():
        (logp,) = policy.logprobs(
            [prompt], [response], grad=True, allowed_tokens=mask, temperature=temperature
        )
        loss = -reward * logp.sum()
        grads = torch.autograd.grad(loss, latents)  # the latents' only: weights get none
    for p, g in zip(latents, grads, strict=True):
        p.grad = g
    adam.step()
    return float(loss.detach())
