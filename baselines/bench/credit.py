"""Credit fidelity: each variant's per-turn advantages against the true advantage of the policy.

For a fixed policy and env: one batch of rollouts (groups of the default sampler, snapshots
kept); every registered variant computes its per-turn advantages on it with the trainer's own
hooks (``transform``, ``score``, ``advantages``, ``shape``; a variant with a sampler of its own
samples its own batch, and its turns get their own ground truth). The ground truth is the
true advantage A(s_t, a_t) of the policy, from paired Monte-Carlo continuations
(:mod:`agentgym.baselines.truth`), or, where the env states it analytically and the policy is
the one it is stated for (the ``Credit-*`` envs under the uniform policy), the analytic
value, with the Monte-Carlo estimate checked against it. Where a measured variant reads
privileged info (trace's gold answer), the rollouts are played on the privileged env: the
policy's prompts never show it, so the batch is the one every variant would see.

Reported per variant: Spearman's rank correlation with the truth (bootstrap interval over
groups), sign agreement on the turns whose true sign is resolved, batch noise (the share of a
turn's credit that the other rollouts of its group decide, from resampled groups), and the
cost: rollouts, generated tokens, seconds. Beside them, the truth's own median standard error
and split-half reliability, so that a noisy truth is never passed off as exact. A variant that
produces no per-turn advantage is listed as not applicable, with what it produces instead.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from scipy import stats

from agentgym.baselines.batch import Batch, Key, StepContext, generated_tokens
from agentgym.baselines.bench.credit_report import plot_fidelity, print_fidelity
from agentgym.baselines.bench.fidelity import (
    EPS,
    batch_noise,
    fidelity,
    paired_difference,
    truth_summary,
)
from agentgym.baselines.credit import SINGLE_SLOTS, compose, get, names
from agentgym.baselines.policies.base import Policy
from agentgym.baselines.rollout import EnvPool, RolloutConfig
from agentgym.baselines.teachers import Teachers
from agentgym.baselines.truth import (
    TruthCost,
    TurnTruth,
    analytic,
    has_analytic,
    monte_carlo,
    scored_turns,
)
from agentgym.core.errors import BadInput

DEFAULT_ENV = "agentgym/Credit-KeyDoor-v0"
K = 8
"""Paired continuations per turn for the Monte-Carlo truth."""
TASKS = 8
GROUP_SIZE = 4
RESAMPLES = 8
"""Resampled batches per variant for batch noise."""
CREDIT_HOOKS = ("transform", "score", "advantages", "shape")
INDEX = "bench_index"
"""``Trajectory.extras`` key: a rollout's index in its own batch, kept through copies."""


@dataclass
class Setup:
    """What every variant is measured with."""

    env: str
    policy: Policy
    policy_name: str
    rollout: RolloutConfig
    pool: EnvPool
    tasks: int
    group_size: int
    k: int
    seed: int
    resamples: int
    analytic: bool
    """the env states this policy's values analytically (the truth is exact)."""


@dataclass
class Measured:
    """A batch with its scored turns and their truth."""

    batch: Batch
    keys: list[Key]
    truth: dict[Key, TurnTruth]
    """the truth the variants are scored against (analytic where the env states it)."""
    mc: dict[Key, TurnTruth]
    """the Monte-Carlo estimate (the truth itself where no analytic value exists)."""
    seconds: float
    tokens: int
    cost: TruthCost = field(default_factory=TruthCost)
    check: dict[str, Any] = field(default_factory=dict)


def run(
    console: Console,
    quick: bool = False,
    *,
    env: str = DEFAULT_ENV,
    variants: tuple[str, ...] | None = None,
    checkpoint: str | None = None,
    k: int | None = None,
    tasks: int | None = None,
    group_size: int | None = None,
    plot: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Measure the credit fidelity of ``variants`` (default: every registered one) on ``env``.

    ``checkpoint``: a checkpoint directory, ``"uniform"`` (the uniform policy over admissible
    actions), or None: the uniform policy where the env states its values analytically, else
    a short warm start of the env's recipe. ``k``, ``tasks`` and ``group_size`` size the
    truth and the batch; ``quick`` makes everything small (a smoke run).
    """
    names_ = tuple(variants) if variants else tuple(names())
    for name in names_:
        get(name)  # refuse an unknown name before any work
    # variants reading privileged info (trace's gold answer) need it in the turns' info; the
    # policy's prompts never show it, so every variant still sees the same rollouts
    privileged = any(compose(name).needs_privileged for name in names_)
    setup = _setup(console, env, checkpoint, quick, k, tasks, group_size, seed, privileged)
    console.print(
        f"bench credit: {setup.env}, policy {setup.policy_name}, {setup.tasks} groups of "
        f"{setup.group_size}, K = {setup.k}"
    )
    shared = _measure(setup, _sample(setup, "grpo"))
    measured = [_variant(setup, name, shared) for name in names_]
    rows = [row for row, _ in measured]
    _against_grpo(setup, shared, measured)
    doc = _document(setup, shared, rows)
    print_fidelity(console, doc)
    if plot:
        plot_fidelity(doc, Path(plot))
        console.print(f"wrote {plot}")
    return doc


# ---------------------------------------------------------------------------- setup


def _setup(
    console: Console,
    env: str,
    checkpoint: str | None,
    quick: bool,
    k: int | None,
    tasks: int | None,
    group_size: int | None,
    seed: int,
    privileged: bool = False,
) -> Setup:
    from agentgym.registry import make

    sizes = {"k": k, "tasks": tasks, "group_size": group_size}
    bad = [f"--{n.replace('_', '-')}" for n, v in sizes.items() if v is not None and v < 2]
    if bad:
        raise BadInput(f"{', '.join(bad)} must be at least 2")
    probe = make(env, privileged=True)
    _, info = probe.reset(seed=0)
    states_values = "credit_values" in info
    probe.close()
    if checkpoint is None:
        checkpoint = "uniform" if states_values else ""
    policy, name, rollout = _policy(console, env, checkpoint, quick, seed)
    analytic_ok = states_values and name == "uniform"
    privileged = privileged or analytic_ok
    extra: dict[str, Any] = {"privileged": True} if privileged else {}
    pool = EnvPool(env, 1, split="train", **extra)
    return Setup(
        env=env,
        policy=policy,
        policy_name=name,
        rollout=rollout,
        pool=pool,
        tasks=tasks or (2 if quick else TASKS),
        group_size=group_size or (2 if quick else GROUP_SIZE),
        k=k or (2 if quick else K),
        seed=seed,
        resamples=2 if quick else RESAMPLES,
        analytic=analytic_ok,
    )


def _policy(
    console: Console, env: str, checkpoint: str, quick: bool, seed: int
) -> tuple[Policy, str, RolloutConfig]:
    """The measured policy, its name in the report, and how its rollouts generate."""
    if checkpoint == "uniform":
        from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
        from agentgym.baselines.policies.uniform import UniformPolicy

        tokenizer = train_tokenizer(collect_env_text(env, episodes=10, seed=seed), 1000)
        return UniformPolicy(tokenizer, seed=seed), "uniform", RolloutConfig(snapshots=True)
    if checkpoint:
        return _load(Path(checkpoint))
    return _warm_start(console, env, quick, seed)


def _load(path: Path) -> tuple[Policy, str, RolloutConfig]:
    from agentgym.agents.checkpoint import read_manifest
    from agentgym.baselines.prompt import PromptFormat
    from agentgym.baselines.train import load_policy

    config = read_manifest(path).get("config", {})
    train = config.get("train", {}) if isinstance(config.get("train"), dict) else {}
    policy = load_policy(path)
    rollout = RolloutConfig(
        prompt=PromptFormat.from_checkpoint(config),
        max_new_tokens=int(train.get("max_new_tokens", 48)),
        temperature=float(train.get("temperature", 1.0)),
        constrained=bool(train.get("constrained", True)),
        snapshots=True,
    )
    return policy, str(path), rollout


def _warm_start(
    console: Console, env: str, quick: bool, seed: int
) -> tuple[Policy, str, RolloutConfig]:
    """A short SFT warm start of the env's recipe: a policy that succeeds some of the time."""
    from agentgym.baselines.config import RECIPES, TrainConfig
    from agentgym.baselines.train import make_policy, oracle_demos, rollout_config, sft

    # an env without a recipe gets the smallest policy: the default must finish in minutes
    recipe = RECIPES.get(env) or TrainConfig.from_options(env=env, preset="nano")
    steps = 20 if quick else min(recipe.sft.steps, 300)
    cfg = recipe.with_options(
        sft_steps=steps, sft_episodes=10 if quick else min(recipe.sft.episodes, 200), seed=seed
    )
    if quick:
        cfg = cfg.with_options(preset="nano")
    console.print(
        f"no --checkpoint: measuring a short warm start ({steps} SFT steps of the recipe); "
        "pass --checkpoint DIR for a trained policy"
    )
    torch.manual_seed(seed)
    policy = make_policy(cfg)
    sft(policy, oracle_demos(cfg, policy), cfg)
    name = f"warm start ({steps} SFT steps)"
    return policy, name, rollout_config(cfg, snapshots=True)


# ---------------------------------------------------------------------------- batches


def _context(setup: Setup, plan: Any) -> StepContext:
    """The step context the trainer would give the plan's hooks (no reference unless asked)."""
    return StepContext(
        config=None,
        policy=setup.policy,
        ref=setup.policy if plan.needs_reference else None,
        envs=setup.pool,
        step=1,
        rollout=setup.rollout,
        rng=np.random.default_rng(setup.seed),
        tasks_per_step=setup.tasks,
        group_size=setup.group_size,
        teachers=Teachers(setup.policy, setup.policy if plan.needs_reference else None),
    )


def _sample(setup: Setup, spec: str) -> tuple[Batch, float]:
    """A batch from the sampler of plan ``spec``, every rollout tagged with its index."""
    plan = compose(spec)
    batch = Batch(trajectories=[])
    torch.manual_seed(setup.seed)  # a sampler without keys draws from torch's generator
    start = time.perf_counter()
    with torch.no_grad():
        plan.run("sample", batch, _context(setup, plan))
    for i, traj in enumerate(batch.trajectories):
        traj.extras[INDEX] = i
    return batch, time.perf_counter() - start


def _measure(setup: Setup, sampled: tuple[Batch, float]) -> Measured:
    """The batch's scored turns and their truth (analytic, checked by Monte Carlo, or MC)."""
    batch, seconds = sampled
    trajs = batch.trajectories
    keys = scored_turns(trajs)
    tokens = generated_tokens(trajs)
    with torch.no_grad():
        mc, cost = monte_carlo(
            setup.policy, setup.pool, trajs, keys, setup.k, setup.rollout, seed=setup.seed
        )
    measured = Measured(batch, keys, mc, mc, seconds, tokens, cost)
    if setup.analytic and has_analytic(trajs, keys, "uniform"):
        exact = analytic(trajs, keys, "uniform")
        measured.check = _mc_check(mc, exact)
        measured.truth = exact
    return measured


def _mc_check(mc: dict[Key, TurnTruth], exact: dict[Key, TurnTruth]) -> dict[str, Any]:
    """How the Monte-Carlo estimate agrees with the analytic truth.

    ``bias``: the mean signed difference over turns, with its 95% interval (Student's t over
    turns): an unbiased estimator's holds 0. ``within_95``: the share of turns whose own 95%
    interval (t over the K paired differences) holds the analytic value; near 0.95 when K is
    large enough, lower when most of a turn's K paired differences are equal (a rare outcome
    not yet drawn gives a zero-width interval): raise ``--k`` to check turn by turn.
    """
    keys = list(exact)
    diff = np.array([mc[key].advantage - exact[key].advantage for key in keys])
    inside = []
    for key in keys:
        low, high = mc[key].interval()
        inside.append(low - EPS <= exact[key].advantage <= high + EPS)
    n = len(diff)
    half = float(stats.t.ppf(0.975, n - 1) * diff.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    bias = float(diff.mean()) if n else float("nan")
    return {
        "turns": n,
        "bias": bias,
        "bias_ci": [bias - half, bias + half],
        "pearson": _pearson(
            [mc[key].advantage for key in keys], [exact[k].advantage for k in keys]
        ),
        "within_95": float(np.mean(inside)) if inside else float("nan"),
        "mean_abs_diff": float(np.abs(diff).mean()) if n else float("nan"),
        "max_abs_diff": float(np.abs(diff).max()) if n else float("nan"),
    }


def _pearson(x: list[float], y: list[float]) -> float:
    """Pearson's correlation, NaN where either side is constant."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _credit(batch: Batch) -> dict[Key, float]:
    """Each tagged on-policy turn's credit: its token advantages' mean over policy tokens."""
    out: dict[Key, float] = {}
    advantages = batch.advantages or {}
    for i, traj in enumerate(batch.trajectories):
        if traj.edited or INDEX not in traj.extras:
            continue
        for k, turn in enumerate(traj.turns):
            key = (int(traj.extras[INDEX]), k)
            if key in out:
                continue
            adv = advantages.get((i, k))
            m = turn.mask()
            out[key] = 0.0 if adv is None else float((adv * m).sum() / m.sum().clamp(min=1))
    return out


def _credit_hooks(setup: Setup, plan: Any, batch: Batch) -> tuple[dict[Key, float], float]:
    """Run the plan's credit hooks on ``batch`` (a copy is edited); the credit and the seconds."""
    work = Batch(trajectories=copy.deepcopy(batch.trajectories))
    ctx = _context(setup, plan)
    start = time.perf_counter()
    with torch.no_grad():
        for hook in CREDIT_HOOKS:
            plan.run(hook, work, ctx)
    return _credit(work), time.perf_counter() - start


def _resampled(setup: Setup, batch: Batch, r: int) -> Batch:
    """The batch with each group's rollouts drawn again from it, with replacement."""
    rng = np.random.default_rng([setup.seed, r])
    picks = [
        int(i)
        for members in batch.groups().values()
        for i in rng.choice(members, size=len(members), replace=True)
    ]
    return Batch(trajectories=[batch.trajectories[i] for i in picks])


# ---------------------------------------------------------------------------- variants


def _not_applicable(name: str) -> str | None:
    """Why variant ``name`` has no per-turn advantage to measure, or None if it has one."""
    cls = get(name)
    if name in SINGLE_SLOTS.values() and cls.slots == {"sample"}:
        return "the default sampler: alone, its plan is grpo's"
    # a score hook alone feeds an auxiliary loss (teachers' log-probs): the advantages stay
    # the base family's, so there is no credit of its own to measure
    if not cls.slots & {"sample", *CREDIT_HOOKS} - {"score"}:
        return f"produces {', '.join(sorted(cls.slots))} only: a loss term, no per-turn advantage"
    return None


Credit = dict[Key, float]


def _against_grpo(
    setup: Setup, shared: Measured, measured: list[tuple[dict[str, Any], Credit | None]]
) -> None:
    """Add to each row on the shared batch its rank correlation's paired difference with grpo."""
    grpo = next((c for row, c in measured if row["variant"] == "grpo" and c is not None), None)
    if grpo is None:
        return
    groups = {i: t.group_id for i, t in enumerate(shared.batch.trajectories)}
    for row, credit in measured:
        if credit is not None and not row["own_sampler"] and row["variant"] != "grpo":
            row["vs_grpo"] = paired_difference(credit, grpo, shared.truth, groups, seed=setup.seed)


def _variant(setup: Setup, name: str, shared: Measured) -> tuple[dict[str, Any], Credit | None]:
    """One row, the variant's fidelity and cost, or why it does not apply; and its credit."""
    reason = _not_applicable(name)
    if reason is not None:
        return {"variant": name, "status": "n/a", "reason": reason}, None
    plan = compose(name)
    try:
        plan.check(setup.pool.envs[0])
    except BadInput as e:
        return {"variant": name, "status": "n/a", "reason": str(e)}, None
    own = plan.owner("sample").name != "group"
    measured = _measure(setup, _sample(setup, name)) if own else shared
    try:
        credit, seconds = _credit_hooks(setup, plan, measured.batch)
    except BadInput as e:  # what the measured policy lacks (gbc: block hooks)
        return {"variant": name, "status": "n/a", "reason": str(e)}, None
    groups = {i: t.group_id for i, t in enumerate(measured.batch.trajectories)}
    row: dict[str, Any] = {"variant": name, "status": "ok", "plan": str(plan)}
    row.update(fidelity(credit, measured.truth, groups, seed=setup.seed))
    noise = float("nan")
    if not own:
        again = [
            _credit_hooks(setup, plan, _resampled(setup, measured.batch, r))[0]
            for r in range(setup.resamples)
        ]
        noise = batch_noise({key: credit[key] for key in measured.keys}, again)
    n = len(measured.batch.trajectories)
    row.update(
        batch_noise=noise,
        own_sampler=own,
        rollouts=n,
        extra_rollouts=n - setup.tasks * setup.group_size,
        tokens=measured.tokens,
        seconds=measured.seconds + seconds,
        credit_seconds=seconds,
    )
    if own:
        # grpo's credit on the variant's own batch: the paired comparison the shared batch
        # gives every other variant (auxiliary rollouts are in no group, so grpo skips them)
        grpo, _ = _credit_hooks(setup, compose("grpo"), measured.batch)
        row["vs_grpo"] = paired_difference(credit, grpo, measured.truth, groups, seed=setup.seed)
        row["grpo_on_own_batch"] = fidelity(grpo, measured.truth, groups, seed=setup.seed)[
            "spearman"
        ]
        row["truth"] = truth_summary(measured.truth)
    return row, credit


def _document(setup: Setup, shared: Measured, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The bench's JSON: settings, the truth's quality, one row per variant, ratios to grpo."""
    kind = "analytic (uniform policy)" if shared.check else "monte carlo"
    grpo = next((r for r in rows if r["variant"] == "grpo" and r["status"] == "ok"), None)
    ratios = {}
    if grpo is not None and grpo["spearman"] > 0:
        ratios = {
            f"{r['variant']} / grpo rank correlation": round(r["spearman"] / grpo["spearman"], 3)
            for r in rows
            if r["status"] == "ok" and r["variant"] != "grpo"
        }
    return {
        "part": "credit",
        "env": setup.env,
        "policy": setup.policy_name,
        "batch": {"groups": setup.tasks, "group_size": setup.group_size},
        "k": setup.k,
        "seed": setup.seed,
        "truth": {
            "kind": kind,
            **truth_summary(shared.truth),
            "monte_carlo": {
                **truth_summary(shared.mc),
                "rollouts": shared.cost.rollouts,
                "tokens": shared.cost.tokens,
                "seconds": shared.cost.seconds,
            },
            "check": shared.check,
        },
        "sampling": {"seconds": shared.seconds, "tokens": shared.tokens},
        "rows": rows,
        "ratios": ratios,
    }
