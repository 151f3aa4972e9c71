"""How long tool calls and the agent's writing take, in milliseconds (seeded, heavy-tailed).

Tool calls
    A call to a tool of mean latency ``m`` (``Tool.latency_ms``: 60–80 ms for reads by id,
    110–180 ms for searches and listings, 180–350 ms for writes) takes

        latency = tool_scale · m · B · T / E[B · T]

    * body ``B = exp(σ·z)``, ``z ~ N(0, 1)``: a log-normal spread around the typical time;
    * tail ``T``: with probability ``p`` the call hits a slow path (a cold cache, a retry, a
      lock) and ``T = min(U^(-1/α), cap)`` (a Pareto factor, ``U`` uniform on (0, 1]),
      otherwise ``T = 1``;
    * dividing by ``E[B·T]`` keeps the mean at ``tool_scale · m``; the median sits below it
      and the 99th percentile several times above it, as measured API latencies do.

    Parameters per kind of tool (:data:`KINDS`):

    ======  =====  =====  ===  ===  ==================================================
    kind    σ      p      α    cap  which tools
    ======  =====  =====  ===  ===  ==================================================
    read    0.25   0.02   2.0  8    no writes, fetches one entity (``get_*``, ``view_*``)
    search  0.40   0.05   1.6  12   no writes, scans a collection (``search_*``, ``list_*``)
    write   0.35   0.05   1.5  15   changes the backend
    ======  =====  =====  ===  ===  ==================================================

    The draws of a call come from ``sha256(seed, task id, call index)`` alone, so the same
    world seed, task and call give the same latency byte for byte in any process, whatever
    else ran before.

The agent's writing
    An action of ``n`` characters takes ``llm_overhead_ms + llm_ms_per_char · n`` (300 ms +
    5 ms a character by default: a decoding-speed proxy that needs no tokenizer); a call
    block is issued when its closing tag has been written.

``tool_scale`` multiplies tool latencies only (1: internal APIs; 10: slow third-party
APIs); the agent's speed stays the same.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist

from agentgym.envs.tools.backend import Tool

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Kind:
    """The latency shape of one kind of tool (see the module docstring)."""

    sigma: float
    tail_p: float
    tail_alpha: float
    tail_cap: float

    @property
    def mean_factor(self) -> float:
        """``E[B·T]``: the body's mean times the tail's (capped Pareto) mean."""
        a, cap = self.tail_alpha, self.tail_cap
        # E[min(X, c)] for Pareto(α, x_m=1) = (α - c^(1-α)) / (α - 1)
        pareto = (a - cap ** (1.0 - a)) / (a - 1.0)
        return math.exp(self.sigma**2 / 2) * (1.0 - self.tail_p + self.tail_p * pareto)


KINDS = {
    "read": Kind(sigma=0.25, tail_p=0.02, tail_alpha=2.0, tail_cap=8.0),
    "search": Kind(sigma=0.40, tail_p=0.05, tail_alpha=1.6, tail_cap=12.0),
    "write": Kind(sigma=0.35, tail_p=0.05, tail_alpha=1.5, tail_cap=15.0),
}


def kind_of(tool: Tool) -> str:
    """The kind of ``tool``: write (changes the backend), search (scans) or read."""
    if tool.writes:
        return "write"
    return "search" if tool.name.startswith(("search_", "list_")) else "read"


def _uniforms(*parts: object) -> tuple[float, float, float]:
    """Three uniforms in (0, 1) from the sha256 of ``parts`` (stable across processes)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return tuple(  # type: ignore[return-value]
        (int.from_bytes(digest[i : i + 8], "big") + 0.5) / 2.0**64 for i in (0, 8, 16)
    )


@dataclass(frozen=True)
class LatencyModel:
    """Seeded latencies of tool calls and of the agent's writing (module docstring)."""

    seed: int = 0
    tool_scale: float = 1.0
    llm_overhead_ms: float = 300.0
    llm_ms_per_char: float = 5.0

    def draw_ms(self, mean_ms: float, kind: str, *key: object) -> float:
        """A latency of mean ``tool_scale · mean_ms`` for a tool of ``kind``, drawn by ``key``."""
        shape = KINDS[kind]
        u_body, u_tail, u_size = _uniforms(self.seed, kind, *key)
        body = math.exp(shape.sigma * _NORMAL.inv_cdf(u_body))
        tail = min(u_size ** (-1.0 / shape.tail_alpha), shape.tail_cap)
        factor = body * (tail if u_tail < shape.tail_p else 1.0) / shape.mean_factor
        return round(self.tool_scale * mean_ms * factor, 3)

    def tool_ms(self, tool: Tool, task_id: str, index: int) -> float:
        """The latency of the episode's ``index``-th call (from 1), a call to ``tool``."""
        return self.draw_ms(tool.latency_ms, kind_of(tool), task_id, index)

    def call_ms(self, mean_ms: float, index: int) -> float:
        """A "read"-kind latency of mean ``mean_ms`` for call ``index`` (no task)."""
        return self.draw_ms(mean_ms, "read", "", index)

    def llm_ms(self, action: str) -> float:
        """The time the agent takes to write ``action``."""
        return round(self.llm_overhead_ms + self.llm_ms_per_char * len(action), 3)

    def issued_ms(self, end: int) -> float:
        """When a call block ending at character ``end`` is issued, from the turn's start."""
        return self.llm_overhead_ms + self.llm_ms_per_char * end
