"""The pipeline's scripted messages (the oracle driver) and the faults injected into messages.

The oracle driver plays the env's own oracle episode, split into roles that each depend only
on what their blocks say: the planner names the oracle's next tool (or says to reply or ask),
the caller carries out the plan it reads with the oracle's arguments, and the summariser
writes the oracle's summary with only the facts that some observation it reads shows. A
corrupted message therefore changes what follows it, and nothing downstream repairs it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
SUMMARY = "<summary>"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Script:
    """The oracle's clean episode from the current state, and what the roles need of the env.

    Attributes:
        actions: the oracle's actions, one per turn.
        facts: the answer facts the summary must state (the tools family's).
        tools: the env's tool names.
    """

    actions: tuple[str, ...]
    facts: tuple[str, ...]
    tools: tuple[str, ...]

    @classmethod
    def of(cls, env: Any, observation: str) -> Script:
        """Play the oracle from ``env``'s state to the end, then restore the state.

        The tool names come from ``observation`` (the episode's first, which lists them).
        """
        saved = env.snapshot()
        actions: list[str] = []
        try:
            done = False
            while not done:
                actions.append(str(env.oracle_action()))
                _, _, terminated, truncated, _ = env.step(actions[-1])
                done = terminated or truncated
        finally:
            env.restore(saved)
        task = getattr(env, "task", None)
        facts = tuple(str(f) for f in getattr(task, "answer_facts", ()) or ())
        return cls(tuple(actions), facts, tools_in(observation))

    def replies_at(self, t: int) -> bool:
        """Whether the oracle's turn ``t`` is the final summary (or the script is over)."""
        return t >= len(self.actions) or self.actions[t].startswith(SUMMARY)

    def message(self, role: str, t: int, plan: str, seen: str) -> str:
        """The clean message of ``role`` at turn ``t`` given the ``plan`` and the blocks seen."""
        clean = self.actions[min(t, len(self.actions) - 1)] if self.actions else ""
        if role == "planner":
            return plan_of(clean)
        if role == "caller":
            return carry_out(plan, clean)
        summary = next((a for a in reversed(self.actions) if a.startswith(SUMMARY)), clean)
        for fact in self.facts:
            if _norm(fact) and _norm(fact) not in _norm(seen):
                summary = drop_fact(summary, fact)
        return summary


def tools_in(observation: str) -> tuple[str, ...]:
    """The tools an observation offers: its ``Tools: a, b`` line, else its schemas' names."""
    line = re.search(r"^Tools: (.+)$", observation, re.M)
    if line is not None:
        return tuple(n.strip() for n in line.group(1).split(",") if n.strip())
    return tuple(dict.fromkeys(re.findall(r'"name": "(\w+)"', observation)))


def tool_names(action: str) -> list[str]:
    """The names of the tool calls in ``action``, in order."""
    names = []
    for body in CALL.findall(action):
        try:
            names.append(str(json.loads(body).get("name", "")))
        except (ValueError, AttributeError):
            names.append("")
    return names


def plan_of(action: str) -> str:
    """The plan a planner writes for ``action``."""
    if action.startswith(SUMMARY):
        return "reply to the user"
    names = tool_names(action)
    return f"call {', '.join(names)}" if names else "ask the user"


def carry_out(plan: str, clean: str) -> str:
    """What a caller that follows ``plan`` does, knowing the arguments of ``clean``."""
    wanted = plan[len("call ") :].split(", ") if plan.startswith("call ") else []
    if not wanted:
        return clean if not CALL.search(clean) else "<ask>What should I do next?</ask>"
    bodies = CALL.findall(clean)
    calls = []
    for i, name in enumerate(wanted):
        try:
            args = json.loads(bodies[i]).get("arguments", {}) if i < len(bodies) else {}
        except (ValueError, AttributeError):
            args = {}
        calls.append(f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>")
    return "\n".join(calls)


def fault_message(role: str, message: str, script: Script | None) -> str:
    """``message`` corrupted the way a faulty ``role`` would.

    The planner names a tool other than the ones it planned (or, with no script, replies at
    once); the caller's first argument gets a wrong value; the summariser drops a fact (with no
    script, gives up).
    """
    if role == "planner":
        if script is None:
            return "reply to the user"
        planned = set(message[len("call ") :].split(", ")) if message.startswith("call ") else set()
        other = next((t for t in script.tools if t not in planned), "")
        return f"call {other}"
    if role == "caller":
        return _wrong_argument(message)
    facts = [f for f in (script.facts if script else ()) if drop_fact(message, f) != message]
    if facts:
        return drop_fact(message, facts[0])
    return "<summary>I could not find what you asked for.</summary>"


def _wrong_argument(message: str) -> str:
    match = CALL.search(message)
    if match is None:
        return message + "x"
    try:
        call = json.loads(match.group(1))
        args = dict(call.get("arguments") or {})
    except (ValueError, AttributeError):
        return message.replace("<tool_call>", "<tool_call>x", 1)
    if not args:
        call["name"] = str(call.get("name", "")) + "x"
    else:
        key = next(iter(args))
        value = args[key]
        if isinstance(value, bool):
            args[key] = not value
        elif isinstance(value, int | float):
            args[key] = value + 1
        else:
            args[key] = f"{value}x"
        call["arguments"] = args
    body = json.dumps(call)
    return message[: match.start(1)] + body + message[match.end(1) :]


def drop_fact(text: str, fact: str) -> str:
    """``text`` with every whole occurrence of ``fact`` replaced by ``unknown``."""
    return re.sub(rf"(?<![\w.]){re.escape(fact)}(?![\w]|\.\d)", UNKNOWN, text)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w.]+", " ", str(text).lower()).split())
