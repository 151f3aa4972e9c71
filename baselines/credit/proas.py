"""ProAS: progress-aware advantage shaping (CREDIT.md §6).

[D]: derived, the paper was not found; cross-check SPA-RL, arXiv 2505.20732.

A ``shape`` hook: it edits the advantages of whichever estimator fills the slot (GRPO by
default; ``gigpo+proas`` etc.). Per task it keeps a sliding window of the last ``window``
successful rollouts (last turn's ``info["won"]``), this batch's included, in the variant
instance across steps.

* Reference graph of a task: nodes are state keys, edges ``(s, a) → s'`` the steps of the
  successes in the window (``s`` = ``turn.state_key``, ``a`` = the action text, ``s'`` = the
  next turn's state or the last turn's ``info["state_key"]``); goal nodes are the states the
  winning actions led to. Node progress ``p(s) = 1 − d(s) / d_max`` with ``d(s)`` the fewest
  edges from ``s`` to a goal and ``d_max`` the largest finite ``d``; a state off the graph
  (or cut off from every goal) has ``p = 0``.
* Step labels: **reasonable** when ``(s, a)`` is an edge of the graph, else
  **progress-advancing** when ``p(s') > p(s)``, else **drift**.
* Progress signal (``progress``; [D]: §6 allows "sub-goal predicates" as nodes and lists an
  "optional sub-goal progress signal"): "graph" (default) uses ``p`` as above; "env" calls a
  non-reasonable step advancing when the env's ``info["progress"]`` rose over it
  (``after > before``), "both" when either ``p`` or the env's progress rose. ``after`` is the
  turn's ``info["progress"]``, ``before`` the previous turn's; for the first turn it is the
  reset's ``info["progress"]``, which a Trajectory keeps only in
  ``turns[0].extras["observation_info"]`` (rollouts collected with snapshots on), else 0.0
  (nothing achieved before the first action). A step whose ``after`` (or, past the first
  turn, ``before``) is missing has no env signal and keeps its graph label, so envs without
  ``"progress"`` need nothing new (``proas/progress_fallback_steps`` counts such
  non-reasonable steps). Reasonable steps always come from the graph, and a task without a
  graph is left alone under every setting.
* Per-turn scalar advantage ``A_{i,k}``: the first policy token's value or the mean over the
  policy mask (``turn_value``); a changed turn is written back as ``A_{i,k} · m_t``.
* Asymmetric masking: in a rollout with negative advantage (``Σ_k A_{i,k} < 0``), the
  reasonable and advancing steps with ``A_{i,k} < 0`` get 0: failures do not punish good
  steps. Positive advantages are left alone, unless ``mask_positive_drift`` asks to zero the
  drift steps of rollouts with positive advantage.
* Future-Drift redistribution: ``M_i = Σ_{k: A_{i,k} < 0} A_{i,k}`` (before masking) is
  spread over the negative drift steps ``D_i``: ``A_{i,k} ← w_k M_i``, ``Σ_{k∈D_i} w_k = 1``,
  with ``w_k ∝`` the number of drift steps at or after k ("future": earlier drift is
  blamed more), ``K_i − k`` for 0-based k ("linear", i.e. ``K_i − k + 1`` 1-based) or 1
  ("uniform"). The rollout's negative mass is preserved exactly.

A task with no success in the window has no graph: its rollouts are left as they are (no
labels without a reference). A negative rollout without a negative drift step has nowhere to
put its mass: its good steps are masked and the mass is dropped, or, with
``keep_without_drift``, it keeps its advantages.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.core.errors import BadInput

WEIGHTS = ("future", "linear", "uniform")
TURN_VALUES = ("mean", "first")
LABELS = ("reasonable", "advancing", "drift")
PROGRESS = ("graph", "env", "both")

Step = tuple[str, Any, str | None]
"""(state key, action, next state key) of one turn."""


def action_of(turn: Any) -> Any:
    """The action a turn took: its text (``extras["action"]``), else its token ids."""
    action = turn.extras.get("action")
    return action if action is not None else tuple(int(t) for t in turn.response_ids.tolist())


def steps_of(traj: Trajectory) -> list[Step]:
    """``(s, a, s')`` per turn; ``s'`` of the last turn is its ``info["state_key"]``."""
    out: list[Step] = []
    nexts = [t.state_key for t in traj.turns[1:]]
    if traj.turns:
        nexts.append(traj.turns[-1].info.get("state_key"))
    for turn, nxt in zip(traj.turns, nexts, strict=True):
        out.append((str(turn.state_key), action_of(turn), nxt))
    return out


@dataclass
class ReferenceGraph:
    """The reference graph of one task, built from successful rollouts' steps."""

    edges: set[tuple[str, Any]] = field(default_factory=set)
    progress: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_successes(cls, successes: list[list[Step]]) -> ReferenceGraph:
        """Edges and node progress ``p(s) = 1 − d(s)/d_max`` of the successes' steps."""
        edges: set[tuple[str, Any]] = set()
        back: dict[str, set[str]] = {}
        goals: set[str] = set()
        for path in successes:
            for s, a, s_next in path:
                edges.add((s, a))
                if s_next is not None:
                    back.setdefault(s_next, set()).add(s)
            if path and path[-1][2] is not None:
                goals.add(str(path[-1][2]))
        dist = dict.fromkeys(goals, 0)
        queue = deque(goals)
        while queue:
            x = queue.popleft()
            for prev in back.get(x, ()):
                if prev not in dist:
                    dist[prev] = dist[x] + 1
                    queue.append(prev)
        d_max = max(dist.values(), default=0)
        progress = {s: 1.0 - d / d_max if d_max else 1.0 for s, d in dist.items()}
        return cls(edges, progress)

    def p(self, state: str | None) -> float:
        """Node progress; 0 off the graph."""
        return self.progress.get(str(state), 0.0) if state is not None else 0.0

    def label(self, step: Step) -> str:
        """The step's label: "reasonable", "advancing" or "drift"."""
        s, a, s_next = step
        if (s, a) in self.edges:
            return "reasonable"
        if self.p(s_next) > self.p(s):
            return "advancing"
        return "drift"


def env_rises(traj: Trajectory) -> list[bool | None]:
    """Per turn, whether the env's ``info["progress"]`` rose over the step.

    None where the turn's progress (or, past the first turn, the previous turn's) is missing.
    Before the first turn: the reset's progress if ``extras["observation_info"]`` kept it,
    else 0.0.
    """
    if not traj.turns:
        return []
    before: Any = (traj.turns[0].extras.get("observation_info") or {}).get("progress", 0.0)
    out: list[bool | None] = []
    for turn in traj.turns:
        after = turn.info.get("progress")
        out.append(None if after is None or before is None else float(after) > float(before))
        before = after
    return out


def step_labels(graph: ReferenceGraph, traj: Trajectory, progress: str) -> list[tuple[str, bool]]:
    """``(label, fell_back)`` per turn of ``traj``.

    The label is the graph's, with "advancing" decided by ``progress`` ("graph", "env" or
    "both"); ``fell_back`` marks a non-reasonable step without an env signal under
    "env"/"both" (it keeps the graph's label).
    """
    labels = [graph.label(step) for step in steps_of(traj)]
    if progress == "graph":
        return [(label, False) for label in labels]
    out = []
    for label, rise in zip(labels, env_rises(traj), strict=True):
        if label == "reasonable":
            out.append((label, False))
        elif rise is None:
            out.append((label, True))
        elif rise or (progress == "both" and label == "advancing"):
            out.append(("advancing", False))
        else:
            out.append(("drift", False))
    return out


def drift_weights(drift: list[int], K: int, scheme: str) -> list[float]:
    """Normalised weights over the drift turn indices ``drift`` (ascending) of a K-turn rollout.

    "future" ∝ drift steps at or after k, "linear" ∝ K − k, "uniform" ∝ 1.
    """
    if scheme == "future":
        raw = [float(len(drift) - j) for j in range(len(drift))]
    elif scheme == "linear":
        raw = [float(K - k) for k in drift]
    else:
        raw = [1.0] * len(drift)
    total = sum(raw)
    return [w / total for w in raw]


@register("proas")
class ProAS(CreditVariant):
    """ProAS (CREDIT.md §6): move failed rollouts' negative advantage onto their drift steps.

    The good steps of failed rollouts are masked and their negative advantage moves onto the
    drift steps, earlier drift first, by a reference graph of successes.
    """

    requires_info = frozenset({"state_key", "won"})

    @dataclass(frozen=True)
    class Config:
        """ProAS's settings: the success window, the weights, and how steps are labelled."""

        window: int = 16
        """successful rollouts kept per task (the newest; this batch's included)."""
        weights: str = "future"
        """redistribution weights over drift steps: "future" (∝ drift steps at or after k),
        "linear" (∝ K_i − k + 1, k 1-based) or "uniform"."""
        turn_value: str = "mean"
        """per-turn scalar advantage: "mean" over the policy mask or the "first" policy
        token's value."""
        mask_positive_drift: bool = False
        """also zero the drift steps of rollouts with positive advantage."""
        keep_without_drift: bool = False
        """a negative rollout with no negative drift step has its good steps masked and its
        negative mass dropped (False, as the masking rule says) or keeps its advantages
        (True)."""
        progress: str = "graph"
        """what makes a non-reasonable step progress-advancing ([D]): "graph" (its reference
        graph node progress rose), "env" (the env's ``info["progress"]`` rose over the step;
        a step without it keeps the graph's label) or "both" (either rose)."""

        def __post_init__(self):
            """Refuse a window below 1 or an unknown weights, turn_value or progress."""
            if self.window < 1:
                raise BadInput(f"proas window must be at least 1, got {self.window}")
            if self.weights not in WEIGHTS:
                raise BadInput(f"proas weights must be one of {WEIGHTS}, got {self.weights!r}")
            if self.turn_value not in TURN_VALUES:
                raise BadInput(
                    f"proas turn_value must be one of {TURN_VALUES}, got {self.turn_value!r}"
                )
            if self.progress not in PROGRESS:
                raise BadInput(f"proas progress must be one of {PROGRESS}, got {self.progress!r}")

    def __init__(self, config: Any = None):
        """Read the settings; no task has a success window yet."""
        super().__init__(config)
        self.successes: dict[str, deque[list[Step]]] = {}
        """task id -> the last ``window`` successful rollouts' steps."""

    def remember(self, batch: Batch) -> None:
        """Add this batch's successful rollouts to their tasks' windows."""
        for traj in batch.trajectories:
            if traj.turns and bool(traj.turns[-1].info.get("won", False)):
                window = self.successes.setdefault(traj.task_id, deque(maxlen=self.cfg.window))
                window.append(steps_of(traj))

    def _scalar(self, batch: Batch, key: Key) -> float | None:
        a = batch.advantages.get(key) if batch.advantages is not None else None
        if a is None:
            return None
        m = batch.turn(key).mask()
        on = m > 0
        if not bool(on.any()):
            return None
        if self.cfg.turn_value == "first":
            return float(a[on][0])
        return float((a * m).sum() / m.sum())

    def shape(self, batch: Batch, ctx: Context) -> None:
        """ProAS's shaping: mask good steps of negative rollouts, move their mass onto drift."""
        cfg = self.cfg
        self.remember(batch)
        if batch.advantages is None:
            return
        graphs = {
            task: ReferenceGraph.from_successes(list(paths))
            for task, paths in self.successes.items()
        }
        counts = dict.fromkeys((*LABELS, "masked", "redistributed", "no_graph", "fallback"), 0)
        moved = 0.0
        for i, traj in enumerate(batch.trajectories):
            keys = [(i, k) for k in range(len(traj.turns))]
            scalars = {key: self._scalar(batch, key) for key in keys}
            A = {key: a for key, a in scalars.items() if a is not None}
            if not A:
                continue
            graph = graphs.get(traj.task_id)
            if graph is None:
                counts["no_graph"] += 1
                continue
            marks = step_labels(graph, traj, cfg.progress)
            labels = {(i, k): label for k, (label, _) in enumerate(marks)}
            for key in A:
                counts[labels[key]] += 1
                counts["fallback"] += marks[key[1]][1]
            new: dict[Key, float] = {}
            total = sum(A.values())
            if total < 0:
                negative = [key for key in A if A[key] < 0]
                M = sum(A[key] for key in negative)
                drift = [key for key in negative if labels[key] == "drift"]
                if not drift and cfg.keep_without_drift:
                    continue
                for key in negative:
                    if labels[key] != "drift":
                        new[key] = 0.0
                        counts["masked"] += 1
                if drift:
                    weights = drift_weights([k for _, k in drift], len(traj.turns), cfg.weights)
                    for key, w in zip(drift, weights, strict=True):
                        new[key] = w * M
                    counts["redistributed"] += 1
                moved += sum(A[key] for key in negative if labels[key] != "drift")
            elif total > 0 and cfg.mask_positive_drift:
                for key in A:
                    if labels[key] == "drift":
                        new[key] = 0.0
                        counts["masked"] += 1
            for key, value in new.items():
                batch.advantages[key] = value * batch.turn(key).mask()
        self._record(batch, counts, moved, len(graphs))

    def _record(self, batch: Batch, counts: dict[str, int], moved: float, n_graphs: int) -> None:
        """The ``proas/*`` metrics of :meth:`shape` into ``batch.metrics``.

        Args:
            batch: the shaped batch.
            counts: steps per label, masked steps, rollouts redistributed or without a graph,
                and steps whose progress fell back from the graph.
            moved: the advantage mass taken off masked steps of negative rollouts.
            n_graphs: tasks with a reference graph.
        """
        cfg = self.cfg
        labelled = max(1, sum(counts[label] for label in LABELS))
        for label in LABELS:
            batch.metrics[f"proas/{label}_share"] = counts[label] / labelled
        batch.metrics["proas/masked_steps"] = float(counts["masked"])
        batch.metrics["proas/redistributed_rollouts"] = float(counts["redistributed"])
        batch.metrics["proas/moved_mass"] = moved
        batch.metrics["proas/rollouts_without_graph"] = float(counts["no_graph"])
        batch.metrics["proas/tasks_with_graph"] = float(n_graphs)
        if cfg.progress != "graph":
            batch.metrics["proas/progress_fallback_steps"] = float(counts["fallback"])
