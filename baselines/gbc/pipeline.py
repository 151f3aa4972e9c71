"""A planner-caller-summariser pipeline over one policy checkpoint, with GBC blame (§19).

``agentgym eval --agent gbc:DIR [--agent-option KEY=VALUE ...]`` plays a tools-family env
with three agents that share the checkpoint in ``DIR`` and differ in their role text. Each
turn the planner reads the latest observation and writes a plan; then the caller turns the
plan into tool calls, or, when the plan says to reply (or on the env's last turn), the
summariser writes the ``<summary>`` from every observation so far. Messages travel as marked
blocks (``<<plan:2>> ... <</plan:2>>``); each call records which call wrote each block of its
prompt, so the episode is a computation graph (:mod:`agentgym.baselines.gbc.attribution`).

When an episode fails, every call's connection weights are computed (one forward and backward
pass each) and the failure is pushed back through them. The harness records the blame per
call (role, step, share, message) in the results and the transcripts, and the passes in
``compute``.

Options:

* ``driver``: ``policy`` (default: the checkpoint generates every message) or ``oracle``:
  the messages are scripted from the env's oracle (the plan names the oracle's next tool, the
  caller carries the plan out with the oracle's arguments, the summariser writes the oracle's
  summary but only the facts its observations show), so that an injected fault is the one
  cause of a failure; the checkpoint then only scores the messages for the gradients. This is
  the attribution harness of ``agentgym bench attribution``; it reads the env, as the oracle
  agent does.
* ``fault``: ``ROLE@STEP``: that call's message is corrupted: a plan naming another tool, a
  call with a wrong argument, a summary that drops a fact (oracle driver).
* ``heal``: ``ROLE@STEP``: that call is re-run clean even where ``fault`` names it (the
  leave-one-out baseline's re-execution).
* ``reduce``: the block reduction, one of :data:`~.attribution.REDUCERS` (``mean_l1``).
* ``plan_tokens`` (24) and ``max_new_tokens`` (128): generation budgets of the policy driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentgym.baselines.gbc.attribution import (
    REDUCERS,
    TASK,
    Block,
    Call,
    connect,
    propagate,
)
from agentgym.baselines.gbc.script import Script, fault_message
from agentgym.baselines.policies.agent import PolicyAgent, settings_of
from agentgym.baselines.policies.base import Policy
from agentgym.core.errors import BadInput

ROLES = {
    "planner": "You are the planner. Read the request and the latest tool results and say "
    "what to do next: which tool to call, or to reply to the user.",
    "caller": "You are the caller. Carry out the plan: write the tool calls in the format the "
    "request gives.",
    "summariser": "You are the summariser. Write the final <summary>...</summary> for the "
    "user from the tool results.",
}
_NODE = re.compile(r"(planner|caller|summariser)@(\d+)")


@dataclass(frozen=True)
class PipelineSettings:
    """How the pipeline plays and attributes (see the module docstring)."""

    driver: str = "policy"
    fault: str = ""
    heal: str = ""
    reduce: str = "mean_l1"
    plan_tokens: int = 24
    max_new_tokens: int = 128

    def __post_init__(self) -> None:
        """Refuse unknown drivers, reductions and malformed nodes (BadInput)."""
        if self.driver not in ("policy", "oracle"):
            raise BadInput(f"gbc driver must be policy or oracle, got {self.driver!r}")
        if self.reduce not in REDUCERS:
            raise BadInput(f"gbc reduce must be one of {', '.join(REDUCERS)}, got {self.reduce!r}")
        for node in (self.fault, self.heal):
            if node and not _NODE.fullmatch(node):
                raise BadInput(
                    f"gbc fault and heal are ROLE@STEP (roles {sorted(ROLES)}): {node!r}"
                )
        if self.plan_tokens < 1 or self.max_new_tokens < 1:
            raise BadInput("gbc plan_tokens and max_new_tokens must be at least 1")


class PipelineAgent:
    """Three roles over one policy; records calls, compute and blame per episode.

    Attributes:
        calls: the current episode's calls, in order.
        blame_used: per call of a failed episode, ``{agent, step, blame, message}``, and the
            task's share as ``{agent: "task", step: 0, ...}``; empty for a won episode.
        compute_used: ``calls``, ``generations``, ``forward`` and ``backward`` passes.
        tokens_used: tokens generated (the policy driver) in the episode.
    """

    name = "gbc"

    def __init__(self, policy: Policy, settings: PipelineSettings | None = None):
        """Play ``policy`` in every role (it needs block hooks for the gradients)."""
        if not callable(getattr(policy, "set_block_hook", None)):
            raise BadInput(f"{type(policy).__name__} has no block hooks for gbc's gradients")
        policy.set_block_hook(None)  # type: ignore[attr-defined]  # refuses one off the lean forward
        for p in list(policy.parameters()):
            p.requires_grad_(False)
        self.policy = policy
        self.settings = settings or PipelineSettings()
        self.calls: list[Call] = []
        self.blame_used: list[dict[str, Any]] = []
        self.compute_used: dict[str, int] = {}
        self.tokens_used = 0
        self._env: Any = None
        self._script: Script | None = None

    @classmethod
    def from_spec(cls, arg: str, options: dict[str, Any]) -> PipelineAgent:
        """``gbc:DIR``: the policy checkpoint in ``DIR`` with ``options``."""
        plain = PolicyAgent.from_named("gbc", arg)
        return cls(plain.policy, settings_of(PipelineSettings, options, "gbc"))

    # -- the episode ----------------------------------------------------------------------

    def reset(self, env_id: str, seed: int) -> None:
        """Start an episode: no calls, no blame."""
        self.calls, self.blame_used, self.tokens_used = [], [], 0
        self.compute_used = dict.fromkeys(("calls", "generations", "forward", "backward"), 0)
        self._observations: list[str] = []
        self._actors: list[int] = []
        self._script = None

    def bind(self, env: Any) -> None:
        """Keep the env: the oracle driver scripts its messages from it (at the first turn)."""
        self._env = env

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        """The planner's call, then the caller's or the summariser's; returns the action."""
        t = len(self._observations)
        self._observations.append(str(observation))
        if t == 0 and self.settings.driver == "oracle":
            if self._env is None:
                raise BadInput("gbc's oracle driver reads the env: bind(env) after reset")
            self._script = Script.of(self._env, str(observation))
        source = self._actors[-1] if self._actors else None
        obs = ("obs", t, self._observations[t], source)
        plan = self._call("planner", t, [obs])
        last = t + 1 >= int(getattr(self._env, "max_turns", t + 2))
        if self._replies(t, plan.text) or last:
            seen = [
                ("obs", j, text, self._actors[j - 1] if j else None)
                for j, text in enumerate(self._observations)
            ]
            actor = self._call(
                "summariser", t, [*seen, ("plan", t, plan.text, len(self.calls) - 1)]
            )
        else:
            actor = self._call("caller", t, [obs, ("plan", t, plan.text, len(self.calls) - 1)])
        self._actors.append(len(self.calls) - 1)
        return actor.text

    def finish(self, info: dict[str, Any]) -> None:
        """At the episode's end: on a failure, weigh every call and push the failure back."""
        failure = 0.0 if info.get("won") else 1.0
        if failure == 0.0 or not self.calls:
            return
        for call in self.calls:
            connect(self.policy, call, self.settings.reduce)
            self.compute_used["forward"] += 1
            self.compute_used["backward"] += 1
        own, task = propagate(self.calls, failure)
        self.blame_used = [
            {"agent": c.role, "step": c.step, "blame": round(b, 6), "message": c.text}
            for c, b in zip(self.calls, own, strict=True)
        ]
        self.blame_used.append({"agent": TASK, "step": 0, "blame": round(task, 6), "message": ""})

    # -- one call -------------------------------------------------------------------------

    def _replies(self, t: int, plan: str) -> bool:
        if self._script is not None:
            return self._script.replies_at(t)
        return bool(re.search(r"\b(reply|summar)", plan.lower()))

    def _call(self, role: str, t: int, blocks: list[tuple[str, int, str, int | None]]) -> Call:
        """Build the role's marked prompt, get its message, and record the call."""
        tok = self.policy.tokenizer
        prompt = list(self.policy.encode_prompt(ROLES[role]))  # type: ignore[attr-defined]
        spans = [Block("role", None, 0, len(prompt), own=True)]
        for kind, step, text, source in blocks:
            ids = tok.encode(f"\n<<{kind}:{step}>>\n{text}\n<</{kind}:{step}>>\n")
            spans.append(Block(f"{kind}:{step}", source, len(prompt), len(prompt) + len(ids)))
            prompt += ids
        node = f"{role}@{t}"
        faulty = self.settings.fault == node and self.settings.heal != node
        if self._script is not None:
            seen = "\n".join(text for _, _, text, _ in blocks)
            plan = self.calls[-1].text if self.calls else ""
            text = self._script.message(role, t, plan, seen)
            text = fault_message(role, text, self._script) if faulty else text
            response = [*tok.encode(text), tok.eos_id]
            prompt, spans = _fit(self.policy, prompt, spans, len(response))
        else:
            budget = (
                self.settings.plan_tokens if role == "planner" else self.settings.max_new_tokens
            )
            prompt, spans = _fit(self.policy, prompt, spans, budget)
            (out,) = self.policy.generate([prompt], max_new_tokens=budget, greedy=True)
            self.compute_used["generations"] += 1
            self.tokens_used += len(out.ids)
            text = fault_message(role, out.text, None) if faulty else out.text
            response = list(out.ids) if not faulty else [*tok.encode(text), tok.eos_id]
        call = Call(role, t, prompt, response, text, spans)
        self.calls.append(call)
        self.compute_used["calls"] += 1
        return call


def _fit(
    policy: Any, prompt: list[int], spans: list[Block], response: int
) -> tuple[list[int], list[Block]]:
    """Cut the prompt so that it and ``response`` tokens fit the policy's context.

    Tokens go from the start of the longest block that is not the role text (the oldest
    context inside it), so every block keeps its tail and the role stays whole.
    """
    max_len = getattr(getattr(policy, "config", None), "max_len", None)
    if not isinstance(max_len, int):
        return prompt, spans
    over = len(prompt) + response - 1 - max_len
    if over <= 0:
        return prompt, spans
    if not spans:
        return prompt[over:], spans
    cut = dict.fromkeys(range(len(spans)), 0)
    for _ in range(over):
        i = max(
            (i for i, b in enumerate(spans) if not b.own and b.end - b.start - cut[i] > 1),
            key=lambda i: spans[i].end - spans[i].start - cut[i],
        )
        cut[i] += 1
    kept: list[int] = []
    out: list[Block] = []
    for i, b in enumerate(spans):
        start = len(kept)
        kept += prompt[b.start + cut[i] : b.end]
        out.append(Block(b.name, b.source, start, len(kept), b.own))
    return kept, out
