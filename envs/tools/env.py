"""Schema-guided mock APIs: a tool-calling episode over a seeded, stateful backend."""

from __future__ import annotations

import copy
import json
import pickle
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded
from agentgym.core.spaces import String
from agentgym.envs.tools.backend import Task, ToolFailure
from agentgym.envs.tools.digest import MOD, StateDigest, seen_sum, state_key, text_hash
from agentgym.envs.tools.grammar import GRAMMAR, gold_calls_line, parse_action, reason
from agentgym.envs.tools.latency import LatencyModel
from agentgym.envs.tools.realclock import RealClock
from agentgym.envs.tools.rewards import (
    canonical,
    certify,
    hierr,
    missing_facts,
    tool_exact_match,
)
from agentgym.envs.tools.scheduler import Scheduler
from agentgym.envs.tools.schema import error
from agentgym.envs.tools.timeline import Timeline
from agentgym.envs.tools.world import DOMAINS, _world

_THINK_ONLY = re.compile(r"\s*(?:<think>.*?</think>\s*)+", re.DOTALL | re.IGNORECASE)
CROSS_NOTE = (
    "Calls run as futures across turns: each result arrives in the first observation after "
    "it finishes; an action of <think> blocks alone waits for the next one."
)


@dataclass
class _Episode:
    """Mutable state of one episode; JSON-able through ``asdict``."""

    calls: list[list[dict[str, Any]]] = field(default_factory=list)  # valid calls, by turn
    attempts: int = 0  # call blocks written, valid or not
    all_valid: bool = True
    asked: bool = False
    seen: list[str] = field(default_factory=list)  # result texts delivered
    summary: str | None = None
    clock: float = 0.0  # virtual ms (sync mode; the scheduler keeps it in async mode)
    scheduler: dict[str, Any] | None = None


class ToolsEnv(AgentEnv[str, str]):
    """Serve a user's request by calling schema-described tools over a stateful backend.

    ## Description
    A domain's tools (JSON Schema) over a backend generated from the id's seed (e-commerce,
    customer accounts, travel). Each task is one user request of a type in ``task_type``:
    single call, several different calls, parallel independent calls, dependent calls (a
    result feeds the next call), irrelevance (no tool helps) or clarification (the request
    lacks a detail the scripted user gives when asked). Every call is validated against its
    schema before it runs; a bad call returns a structured error and changes nothing.

    ## Observation
    Text: the user's request, the tools' schemas (first turn; their names with
    ``schemas=False``) or their names, the results or errors of the last action's calls (or
    the user's reply to a question, or why the action broke the grammar), and the turn count
    followed by the grammar.

    ## Action
    Text: optional ``<think>…</think>``, then one or more ``<tool_call>{"name": …,
    "arguments": {…}}</tool_call>``, or one ``<summary>…</summary>`` (the final answer to
    the user, which ends the episode), or one ``<ask>…</ask>`` (a question to the user).
    ``info["segments"]`` tags think, tool_call and summary spans; ``info["tool_calls"]`` lists
    the parsed calls.

    ## Rewards
    1.0 at the summary when the episode succeeded, else 0: the final backend state equals
    the one the gold calls produce, the summary contains every fact the user asked for, a
    clarification task asked first, and an irrelevance task called nothing.
    ``info["reward_components"]`` at the end: success, the HierR layers (format,
    tool_name_f1, param_keys, param_values, parallel, hierr), tool_exact_match, omission (1
    when results holding a needed fact were delivered but the summary left it out); each
    turn: format and invalid_action. ``info["progress"]``: the share of gold calls made.
    ``info["certificate"]`` at the end: whether HierR's optimal matching of calls is unique
    and each matched layer's range over all optimal matchings (``rewards.certify``).
    ``check_calls`` scores any calls against the task's gold calls the same way.

    ## Asynchronous calls
    With ``async_calls=True`` a call returns a future id at once and runs on a virtual clock
    while the agent keeps writing: calls are issued when their block is written, calls on
    conflicting resources (the domain's read/write tree) run in issue order and the rest
    concurrently; a turn's observation comes when its calls have all finished (a gather).
    In sync mode the agent waits for each call in turn. With ``overlap="cross"`` (the
    ``-Async-v2`` ids) futures run on across turns: an action first waits for the pending
    results it uses, each result arrives in the first observation after it finishes, and a
    ``<think>``-only action waits for the next one. Latencies come from a seeded, heavy-tailed
    model per tool kind (:mod:`agentgym.envs.tools.latency`); ``unwrapped.clock_ms`` is the
    episode's virtual time; ``clock="real"`` makes calls and writing really sleep (times
    ``clock_scale``) for wall-time measurements. The final backend state is the same in
    every mode.

    ## Privileged
    With ``privileged=True``: ``gold_tool_calls`` (every gold call, in order), ``gold_answer``
    (the answer facts joined by "; ", absent on irrelevance tasks) and ``privileged_context``,
    lines ``Gold calls: [{"name":…,"arguments":{…}},…]`` (compact JSON; ``Gold calls: none
    (no tool serves this request).`` on irrelevance tasks), ``Hidden facts: {…}`` (the detail
    a clarification task leaves out) and ``Answer facts: <fact>; …`` (what the summary must
    quote).

    ## Termination
    Terminates on a summary; truncates after ``max_turns`` turns (10 by default).

    ## Registered ids
    ``agentgym/Tools-{Ecommerce,Accounts,Travel}-v0`` and their ``-Async-v0`` twins;
    ``-v1`` and ``-Async-v1`` ids of each domain (``grammar_in_errors=False``);
    ``-Async-v2`` (v1's text, futures across turns).

    ## Version history
    v0: first version.
    v1: the reason given for an invalid action no longer repeats the grammar, which the
    observation's last line states anyway (so it appeared twice).
    v2 (async): futures overlap across turns (``overlap="cross"``).
    """

    family = "tools"
    default_max_turns = 10

    def __init__(
        self,
        async_calls: bool = False,
        world_seed: int = 0,
        tool_latency_scale: float = 1.0,
        grammar_in_errors: bool = True,
        overlap: str = "turn",
        clock: str = "virtual",
        clock_scale: float = 1.0,
        schemas: bool = True,
        **kwargs: Any,
    ):
        """Create the env (a subclass per domain names it).

        Args:
            async_calls: issue calls as futures on a virtual clock (see the class docstring).
            world_seed: seed of the backend, the tasks and the latencies.
            tool_latency_scale: multiplies every tool's mean latency (1: internal APIs of
                50–400 ms; 10: slow third-party APIs).
            grammar_in_errors: repeat the grammar after an invalid action's reason (the v0
                ids; the v1 ids give the reason alone).
            overlap: with ``async_calls``, "turn" gathers a turn's futures before its
                observation (v0, v1); "cross" lets them run on across turns (v2).
            clock: "virtual" (no waiting) or "real": calls and the agent's writing really
                sleep, for measuring wall time (see ``envs/tools/realclock.py``).
            clock_scale: real seconds slept per virtual second in the real clock mode.
            schemas: the first observation lists the tools' JSON schemas (the registered
                ids); False names them only, as every later turn does: for a small policy
                whose context would otherwise cut the request off a first prompt of ~1,800
                tokens, and which learns the arguments from its demonstrations.
            **kwargs: split, privileged, max_turns, render_mode (see ``AgentEnv``).
        """
        if self.domain not in DOMAINS:
            raise BadInput(f"unknown tools domain {self.domain!r}: use a subclass per domain")
        super().__init__(**kwargs)
        self.async_calls = bool(async_calls)
        self.world_seed = int(world_seed)
        self.grammar_in_errors = bool(grammar_in_errors)
        self.schemas = bool(schemas)
        self._world = _world(self.domain, self.world_seed)
        if not tool_latency_scale > 0:
            raise BadInput(f"tool_latency_scale must be > 0, got {tool_latency_scale}")
        self.latency = LatencyModel(seed=self.world_seed, tool_scale=float(tool_latency_scale))
        if overlap not in ("turn", "cross"):
            raise BadInput(f"overlap must be 'turn' or 'cross', got {overlap!r}")
        if clock not in ("virtual", "real") or not clock_scale > 0:
            raise BadInput(f"need clock 'virtual' or 'real' and clock_scale > 0, got {clock!r}")
        self.overlap = overlap
        self.real = RealClock(float(clock_scale)) if clock == "real" else None
        self.observation_space = String()
        self.action_space = String()
        self._ep = _Episode()
        self._state: dict[str, Any] = {}
        self._digest = StateDigest()
        self._seen = 0  # seen_sum(self._ep.seen), kept up to date
        self._made: Counter[str] = Counter()  # canonical valid calls made
        self._matched = 0  # of them, those the gold calls still had room for
        self._time = Timeline(self.latency, self.async_calls, self.overlap, None)

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> tuple[str, ...]:
        """Task ids of ``split``: the first 40 / next 10 / last 10 of each type."""
        return self._world.splits[split or self.split]

    def task_type_of(self, task_id: str) -> str:
        """single, multiple, parallel, dependent, irrelevance or clarification."""
        return self._world.tasks[task_id].task_type

    def _has_task(self, task_id: str) -> bool:
        return task_id in self._world.tasks

    @property
    def task(self) -> Task:
        """The current task."""
        if self._task_id is None:
            raise ResetNeeded("call reset() first")
        return self._world.tasks[self._task_id]

    @property
    def clock_ms(self) -> float:
        """The episode's virtual time in milliseconds."""
        return self._time.now

    def _config(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "async_calls": self.async_calls,
            "world_seed": self.world_seed,
            "tool_latency_scale": self.latency.tool_scale,
            **({} if self.overlap == "turn" else {"overlap": self.overlap}),
            **({} if self.real is None else {"clock": "real", "clock_scale": self.real.scale}),
            # only when it differs from v0's, so that v0's data hash and snapshots stay as they were
            **({} if self.grammar_in_errors else {"grammar_in_errors": False}),
        }

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._ep = _Episode()
        self._state = pickle.loads(self._world.state_pickle)
        self._digest = self._world.digest.copy()
        self._seen, self._made, self._matched = 0, Counter(), 0
        if self.real is not None:
            self.real.reset()
        self._time = Timeline(self.latency, self.async_calls, self.overlap, self.real)
        obs = self._render([], first=True)
        return obs, self._info(valid=True, segments=[], calls=[], components={})

    def _apply(self, action: Any) -> Transition:
        parsed = parse_action(action)
        segments = [dict(s) for s in parsed.segments]
        text = action if isinstance(action, str) else ""
        elapsed = self.latency.llm_ms(text)
        if parsed.kind == "invalid" and self._is_wait(text):
            self._time.tick(elapsed)
            lines = [self._future_line(f) for f in self._time.wait_next()]
            return self._step_result(lines, True, segments, [], terminal=False)
        if parsed.kind == "invalid":
            self._ep.all_valid = False
            self._time.tick(elapsed)
            lines = [f"Invalid action: {reason(parsed.error or '', self.grammar_in_errors)}"]
            return self._step_result(lines, False, segments, [], terminal=False)
        if parsed.kind == "ask":
            self._ep.asked = True
            self._time.tick(elapsed)
            lines = [f"User: {self.task.clarify_reply}"]
            return self._step_result(lines, True, segments, [], terminal=False)
        if parsed.kind == "summary":
            self._ep.summary = parsed.text
            for future in self._time.await_used(parsed.text, self._visible()):
                self._future_line(future)  # the facts it quotes arrive before it is written
            self._time.tick(elapsed)
            self._time.finish()  # the backend finishes before the end
            return self._step_result([], True, segments, [], terminal=True)
        return self._tool_turn(text, parsed, segments, elapsed)

    def _tool_turn(
        self, text: str, parsed: Any, segments: list[dict[str, Any]], elapsed: float
    ) -> Transition:
        """Validate and run (or issue) every call block of the action."""
        used = [b.arguments for b in parsed.calls if b.arguments is not None]
        lines = [self._future_line(f) for f in self._time.await_used(used, self._visible())]
        self._time.begin_turn(elapsed)
        valid_calls: list[dict[str, Any]] = []
        parsed_calls: list[dict[str, Any]] = []
        all_ok = True
        for i, block in enumerate(parsed.calls, start=1):
            self._ep.attempts += 1
            problem: dict[str, Any] | None
            if block.error is not None:
                problem = error("malformed_call", "", block.error)
            else:
                parsed_calls.append({"name": block.name, "arguments": block.arguments})
                problem = self._world.validator.check(block.name, block.arguments)
            if problem is not None:
                all_ok = False
                lines.append(f"Call {i} error: {json.dumps(problem)}")
                continue
            line, ok = self._run_call(i, block, valid_calls)
            lines.append(line)
            all_ok &= ok
        self._ep.calls.append(valid_calls)
        self._ep.all_valid &= all_ok
        lines += [self._future_line(f) for f in self._time.end_turn(elapsed)]
        return self._step_result(lines, all_ok, segments, parsed_calls, terminal=False)

    def _run_call(self, i: int, block: Any, valid_calls: list[dict[str, Any]]) -> tuple[str, bool]:
        """Run one validated call on the backend: its line (result or future) and success."""
        call = {"name": block.name, "arguments": block.arguments}
        tool = self._world.validator.tools[block.name]
        domain = self._world.domain
        changes = domain.changes(self._state, block.name, block.arguments) if tool.writes else None
        try:
            result = domain.call(self._state, block.name, copy.deepcopy(block.arguments))
            ok = True
            valid_calls.append(call)
            self._count_made(call)
            if changes is not None:
                self._digest.invalidate(changes)
        except ToolFailure as failure:
            ok = False
            result = error(failure.code, block.name, failure.message)
        shown = json.dumps(result)
        latency = self.latency.tool_ms(tool, self.task.id, self._ep.attempts)
        paths = domain.resources(block.name, block.arguments)
        future = self._time.call(block.name, paths, latency, shown, ok, block.end)
        if future is None:
            return self._result_line(i, block.name, shown, ok), ok
        return f"Call {i} ({block.name}) issued as future {future.id}.", ok

    def _count_made(self, call: dict[str, Any]) -> None:
        """Count a valid call towards progress (a gold call's copies count once each)."""
        key = canonical(call)
        if self._made[key] < self._world.gold(self.task.id).counts[key]:
            self._matched += 1
        self._made[key] += 1

    def _future_line(self, future: Any) -> str:
        return self._result_line(future.id, future.name, future.result, future.ok)

    def _result_line(self, ref: Any, name: str, shown: str, ok: bool) -> str:
        if ok:
            self._ep.seen.append(shown)
            self._seen = (self._seen + text_hash(shown)) % MOD
        label = f"Call {ref}" if isinstance(ref, int) else f"Future {ref}"
        return f"{label} ({name}) {'result' if ok else 'error'}: {shown}"

    def _visible(self) -> str:
        """What the agent has been shown that a call could take values from."""
        task, ep = self.task, self._ep
        reply = task.clarify_reply if ep.asked else ""
        return " ".join([task.request, reply, *ep.seen])

    def _is_wait(self, text: str) -> bool:
        """Across turns, a <think>-only action waits for the next result (while any is due)."""
        return (
            self.overlap == "cross"
            and self._time.scheduler is not None
            and bool(self._time.scheduler.pending())
            and _THINK_ONLY.fullmatch(text) is not None
        )

    def _step_result(
        self,
        lines: list[str],
        valid: bool,
        segments: list[dict[str, Any]],
        calls: list[dict[str, Any]],
        *,
        terminal: bool,
    ) -> Transition:
        if not valid:
            self._ep.all_valid = False
        last = terminal or self._turn >= self.max_turns
        components: dict[str, float] = {
            "format": 1.0 if valid else 0.0,
            "invalid_action": 0.0 if valid else 1.0,
        }
        won, certificate = False, None
        if last:
            judged = self._judge()
            won = judged["success"] == 1.0
            components.update(judged)
            certificate = self._certificate()
        reward = 1.0 if terminal and won else 0.0
        obs = self._render(lines, first=False) if not terminal else self._closing(won)
        info = self._info(valid, segments, calls, components, won)
        if certificate is not None:
            info["certificate"] = certificate
        return Transition(obs, reward, terminal, info)

    # ------------------------------------------------------------------ scoring
    def _judge(self) -> dict[str, float]:
        """success, HierR, Tool-Exact-Match and omission of the episode so far."""
        task, ep = self.task, self._ep
        gold_turns = self._world.gold(task.id).turns
        pred_turns = [t for t in ep.calls if t]
        layers = hierr(pred_turns, gold_turns, ep.all_valid)
        pred = [c for t in pred_turns for c in t]
        gold = [c for t in gold_turns for c in t]
        summary = ep.summary or ""
        missing = missing_facts(summary, task.answer_facts) if ep.summary is not None else []
        shown = " ".join(ep.seen)
        omission = any(f in shown for f in missing)
        success = (
            ep.summary is not None
            and not missing
            and self._digest.hexdigest(self._state) == self._world.gold_state(task.id)
            and (task.task_type != "clarification" or ep.asked)
            and (task.task_type != "irrelevance" or ep.attempts == 0)
        )
        return {
            "success": 1.0 if success else 0.0,
            **layers,
            "tool_exact_match": tool_exact_match(pred, gold),
            "omission": 1.0 if omission else 0.0,
        }

    def _certificate(self) -> dict[str, Any]:
        """The all-optima certificate of the episode's HierR, as JSON data."""
        gold_turns = self._world.gold(self.task.id).turns
        pred_turns = [t for t in self._ep.calls if t]
        return certify(pred_turns, gold_turns, self._ep.all_valid).to_json()

    def check_calls(self, turns: list[list[dict[str, Any]]]) -> dict[str, float]:
        """Score calls against the current task's gold calls, every action well-formed.

        Args:
            turns: calls (``{"name", "arguments"}``) by turn, as if they had all run.

        Returns:
            The HierR layers (``hierr`` among them) and ``tool_exact_match``, computed as at
            an episode's end.
        """
        gold_turns = self._world.gold(self.task.id).turns
        pred = [c for t in turns for c in t]
        gold = [c for t in gold_turns for c in t]
        return {**hierr(turns, gold_turns, True), "tool_exact_match": tool_exact_match(pred, gold)}

    def _progress(self) -> float:
        total = self._world.gold(self.task.id).total
        return self._matched / total if total else 0.0

    def answer_prefix(self) -> str:
        """The text an answer action starts with; :meth:`check_answer` scores what follows."""
        return "<summary>"

    def check_answer(self, text: str) -> float:
        """The share of the task's answer facts that ``text`` contains (1.0 when it has none)."""
        facts = self.task.answer_facts
        if not facts:
            return 1.0
        return 1.0 - len(missing_facts(str(text), facts)) / len(facts)

    # ------------------------------------------------------------------ text and info
    def _render(self, lines: list[str], first: bool) -> str:
        task = self.task
        head = [f"User: {task.request}"]
        if first and self.schemas:
            head += ["", "Tools (JSON Schema):", self._world.tools_text]
        else:
            head += [f"Tools: {self._world.tool_names}"]
        if first and self.overlap == "cross" and self.async_calls:
            head += ["", CROSS_NOTE]
        body = ["", *lines] if lines else []
        turn = f"Turn {self._turn + 1} of {self.max_turns}. {GRAMMAR}"
        return "\n".join([*head, *body, "", turn])

    def _closing(self, won: bool) -> str:
        verdict = "the request was served" if won else "the request was not served"
        return f"User: {self.task.request}\nYou replied to the user: {verdict}."

    def _state_key(self) -> str:
        """The task, the backend's digest, the results seen and the flags, hashed.

        Every part is kept up to date incrementally (see :mod:`agentgym.envs.tools.digest`).
        """
        digest = self._digest.hexdigest(self._state)
        ep = self._ep
        return state_key(self.task.id, digest, self._seen, ep.asked, ep.summary is not None)

    def _info(
        self,
        valid: bool,
        segments: list[dict[str, Any]],
        calls: list[dict[str, Any]],
        components: dict[str, float],
        won: bool = False,
    ) -> dict[str, Any]:
        return {
            "action_valid": valid,
            "won": won,
            "state_key": self._state_key(),
            "segments": segments,
            "tool_calls": calls,
            "reward_components": components,
            "progress": self._progress(),
            "provenance": {"visited": [], "cited": [], "produced": [], "consumed": []},
        }

    def _privileged_info(self) -> dict[str, Any]:
        """``gold_tool_calls``, ``privileged_context`` and (unless irrelevance) ``gold_answer``.

        The context's lines: ``Gold calls: <compact JSON list, in order>`` (or ``Gold calls:
        none (no tool serves this request).``), ``Hidden facts: <JSON>`` on a clarification
        task, ``Answer facts: <fact>; <fact>`` where the summary must quote some.
        """
        task = self.task
        calls = [c.to_json() for turn in task.gold_calls for c in turn]
        lines = [gold_calls_line(calls)]
        if task.hidden_facts:
            lines.append(f"Hidden facts: {json.dumps(task.hidden_facts)}")
        if task.answer_facts:
            lines.append(f"Answer facts: {'; '.join(task.answer_facts)}")
        out: dict[str, Any] = {
            "gold_tool_calls": calls,
            "privileged_context": "\n".join(lines),
        }
        if task.answer_facts:  # an irrelevance task has no gold answer
            out["gold_answer"] = "; ".join(task.answer_facts)
        return out

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """The oracle's next action on the current task.

        Ask first on a clarification task, then each turn of gold calls not yet made, then a
        summary quoting the answer facts.
        """
        if self.done:
            raise ResetNeeded("the episode is over: call reset() first")
        task = self.task
        if task.task_type == "clarification" and not self._ep.asked:
            return "<ask>Could you tell me the detail your request leaves out?</ask>"
        made = [json.dumps(c, sort_keys=True) for t in self._ep.calls for c in t]
        for turn in task.gold_calls:
            wanted = [json.dumps(c.to_json(), sort_keys=True) for c in turn]
            if all(w in made for w in wanted):
                for w in wanted:
                    made.remove(w)
                continue
            return "\n".join(f"<tool_call>{json.dumps(c.to_json())}</tool_call>" for c in turn)
        if not task.answer_facts:
            return "<summary>I am sorry, none of my tools can help with that request.</summary>"
        return (
            f"<summary>Done. Here is what you asked for: {'; '.join(task.answer_facts)}.</summary>"
        )

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        ep = asdict(self._ep)
        ep["clock"] = self._time.clock
        scheduler = self._time.scheduler
        ep["scheduler"] = scheduler.state() if scheduler is not None else None
        # JSON text keeps the entities' key order (a snapshot's canonical form sorts keys),
        # so results read from the state render the same after a restore
        return {"episode": ep, "backend": json.dumps(self._state, separators=(",", ":"))}

    def _set_state(self, state: dict[str, Any]) -> None:
        ep = dict(state["episode"])
        scheduler = ep.pop("scheduler")
        self._ep = _Episode(**ep)
        backend = state["backend"]
        self._state = json.loads(backend) if isinstance(backend, str) else copy.deepcopy(backend)
        self._digest = StateDigest()  # re-hashed in full once, then kept up to date
        self._seen = seen_sum(self._ep.seen)
        self._made, self._matched = Counter(), 0
        for call in (c for turn in self._ep.calls for c in turn):
            self._count_made(call)
        if self.real is not None:
            self.real.reset()
        self._time = Timeline(self.latency, self.async_calls, self.overlap, self.real)
        self._time.clock = self._ep.clock
        if scheduler is not None:
            self._time.scheduler = Scheduler.from_state(scheduler)


class EcommerceEnv(ToolsEnv):
    """:class:`ToolsEnv` over the e-commerce backend.

    The backend holds the catalogue, carts, orders, refunds and shipping.
    """

    domain = "ecommerce"


class AccountsEnv(ToolsEnv):
    """:class:`ToolsEnv` over the customer-accounts backend.

    The backend holds profiles, addresses, loyalty points and support tickets.
    """

    domain = "accounts"


class TravelEnv(ToolsEnv):
    """:class:`ToolsEnv` over the travel backend (flights, hotels, bookings, payments)."""

    domain = "travel"
