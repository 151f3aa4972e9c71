"""Learning, compared fairly: credit variants at an equal budget of generated tokens.

For each training seed: one SFT warm start from the oracle's demonstrations (the env's recipe
in :data:`~agentgym.baselines.config.RECIPES`), then every variant from that same checkpoint
with that seed, each until its rollouts have generated the same number of tokens (a tree
sampler or a refilling one spends the budget differently, never more). Every variant uses one
loss aggregation (``--aggregation``, token-mean by default; ``--aggregation own`` lets each
variant use its paper's, when aggregation is the thing compared). Only final checkpoints are
scored, greedily on the test split over many seeds through the harness; a few checkpoints
along the budget are scored too, for the curve, never for the headline. A recipe is chosen on
the val split (``--split val``) and reported on test: the same work folder then scores its
finished runs again instead of training them again.

Reported: per variant, the mean over training seeds with a two-level bootstrap interval over
training seeds and test seeds (:func:`~agentgym.harness.stats.nested_bootstrap_ci`), each
seed's own success, and the paired difference against grpo (same seeds, same test episodes)
with the same two-level interval; a plot of test success against generated tokens with a band
over the seeds. Evaluation time is never counted as training time.

A variant that distils from teachers (``roadmopd``) gets them trained here, on an env whose
tasks come from several domains (:data:`~agentgym.baselines.config.DOMAIN_ENVS`): per training
seed, one run of the recipe's own variant on each domain's env from that seed's warm start, at
the same token budget. Their training time is reported beside the variant's own (``+N``): the
student's budget of generated tokens is equal, its compute is not.

With ``--work DIR`` the runs stay in DIR and a finished one is reused when its settings match
(a warm start, a variant's run with its scores): an interrupted benchmark resumes where it
stopped, and training seeds can run in parallel processes (``--seeds 1 --first-seed 1 --work
DIR`` in each) before one last call with all the seeds reports them together.

With ``--sft-mode ca`` the warm starts are credit-assignment SFT's (``baselines/ca_sft.py``);
every run of a seed is then kept under a name of its own (``warm-ca-0``, ``grpo-ca-0``), so
a work folder holds plain and ca runs side by side.

``--rl-option NAME=VALUE`` (repeatable) sets an option of the RL loop or of its sampling for
every variant's RL run (``--rl-option epochs=2 --rl-option lr=1e-3``), never for the warm
start: the runs of each setting are kept under a name of their own (``gigpo-epochs2-lr0.001-0``)
beside the same warm starts, so RL settings are compared from one warm start per seed.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from agentgym.baselines.bench import learning_check
from agentgym.baselines.bench.learning_report import mean_success, report
from agentgym.baselines.bench.learning_runs import reused
from agentgym.baselines.config import DOMAIN_ENVS, RECIPES, SEARCH_MENU_SMALL, TrainConfig
from agentgym.baselines.options import convert, options
from agentgym.core.errors import BadInput

ENV_ID = SEARCH_MENU_SMALL.env
TOKENS = 80_000
"""The default budget of generated tokens per RL run where the recipe sets none: about 30 steps
of the Search-Menu-Small recipe (about 2,700 tokens a step), an RL run of 8-9 minutes on one
core; each training seed's warm start (2,000 SFT steps, shared by its variants) takes about 17
more. A recipe with a token budget of its own (ALFWorld-Small's) is measured at that budget."""
CURVE = (0.25, 0.5, 0.75)
"""Fractions of the budget whose checkpoints are scored for the curve (the final one always)."""


@dataclass(frozen=True)
class Budget:
    """What every variant gets, stated in every output.

    Attributes:
        train: the recipe (warm start and RL settings; ``rl.token_budget`` is the budget).
        seeds: the training seeds; each has its own warm start, shared by its variants.
        test_seeds: seeds of the scoring split per scored checkpoint.
    """

    train: TrainConfig
    seeds: tuple[int, ...]
    test_seeds: int
    curve: tuple[float, ...] = CURVE
    """fractions of the budget whose checkpoints are scored for the curve (empty: the final
    checkpoint alone, the only one the headline uses)."""
    split: str = "test"
    """the split the checkpoints are scored on: "test", or "val" to choose a recipe (then
    report the chosen one on test)."""
    rl_options: tuple[tuple[str, Any], ...] = ()
    """RL and sampling options by name (``("epochs", 2)``) that every variant's RL run takes
    over the recipe's; the warm starts stay the recipe's."""

    @property
    def rl_train(self) -> TrainConfig:
        """The recipe as the variants' RL runs take it: with :attr:`rl_options`."""
        return self.train.with_options(**dict(self.rl_options))

    def eval_key(self) -> dict[str, Any]:
        """How the checkpoints are scored, as a finished run's settings record it."""
        return {"test_seeds": self.test_seeds, "split": self.split}

    @property
    def env(self) -> str:
        """The env trained and scored on."""
        return self.train.env

    def describe(self) -> str:
        """One line: budget, seeds, aggregation and scoring."""
        rl = self.rl_train.rl
        spend = f"{rl.token_budget:,} generated tokens" if rl.token_budget else f"{rl.steps} steps"
        sft = self.train.sft
        mode = f" ({sft.mode})" if sft.mode != "plain" else ""
        start = f"warm start {sft.steps} SFT steps{mode}" if sft.steps else "no SFT"
        settings = ", ".join(f"{name}={value}" for name, value in self.rl_options)
        return (
            f"{self.env}: {start}, then {spend} of RL per "
            f"variant{f' ({settings})' if settings else ''}; training seeds "
            f"{', '.join(map(str, self.seeds))}; aggregation "
            f"{rl.aggregation or 'each variant its own'}; final checkpoints, greedy, "
            f"{self.test_seeds} {self.split} seeds"
        )


def budget_for(
    env: str,
    quick: bool = False,
    *,
    seeds: int = 3,
    tokens: int | None = None,
    aggregation: str = "token-mean",
    first_seed: int = 0,
) -> Budget:
    """The budget on ``env`` from its recipe (``quick``: a smoke run, not a measurement).

    Raises:
        BadInput: no recipe for ``env``, fewer than one seed or token, or a bad aggregation.
    """
    if env not in RECIPES:
        raise BadInput(f"bench learning has no recipe for {env!r}: choose from {sorted(RECIPES)}")
    if seeds < 1 or (tokens is not None and tokens < 1):
        raise BadInput(f"--seeds and --tokens must be at least 1, got {seeds} and {tokens}")
    if first_seed < 0:
        raise BadInput(f"--first-seed must be at least 0, got {first_seed}")
    own = aggregation == "own"
    base = RECIPES[env].with_options(
        token_budget=tokens or (400 if quick else RECIPES[env].rl.token_budget or TOKENS),
        aggregation="" if own else aggregation,
        checkpoint_every=1,
        eval_every=0,
        tensorboard=False,
    )
    if quick:
        base = base.with_options(
            preset="nano", sft_steps=20, sft_episodes=10, tasks_per_step=2, group_size=2
        )
    seed_range = tuple(range(first_seed, first_seed + seeds))
    return Budget(base, seed_range, test_seeds=4 if quick else 100)


def _check_budget(seeds: int, tokens: int | None, aggregation: str, first_seed: int) -> Budget:
    """The main job's check: its recipe at :data:`.learning_check.SMALL`, final checkpoints."""
    budget = budget_for(
        learning_check.recipe().env,
        seeds=seeds,
        tokens=tokens or learning_check.recipe().rl.token_budget,
        aggregation=aggregation,
        first_seed=first_seed,
    )
    small = {k: v for k, v in learning_check.SMALL.items() if k != "token_budget"}
    train = budget.train.with_options(**small)
    return replace(budget, train=train, test_seeds=learning_check.TEST_SEEDS, curve=())


def run(
    console: Console,
    quick: bool = False,
    variants: tuple[str, ...] | None = None,
    rl_steps: int | None = None,
    env: str | None = None,
    seeds: int | None = None,
    tokens: int | None = None,
    aggregation: str = "token-mean",
    plot: str | None = None,
    first_seed: int = 0,
    work: str | None = None,
    device: str = "cpu",
    curve: bool = True,
    sft_mode: str = "plain",
    sft_teacher: str | None = None,
    split: str = "test",
    record: bool = False,
    rl_options: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Warm starts, the variants, the evaluations, the comparisons; prints two tables.

    ``quick`` without ``env`` is the main job's check (:mod:`.learning_check`): its recipe at a
    small budget, one training seed, against the recorded figures (``record``: write them
    instead); ``quick`` with ``env`` is a smoke run of that env's recipe. ``rl_steps`` replaces
    the token budget by a number of RL steps per variant; the training seeds are ``first_seed``
    onwards; ``work`` keeps the runs there and reuses finished ones (None: a temporary folder,
    removed at the end); ``device`` is where they train; without ``curve`` only final
    checkpoints are scored (a quarter of the evaluations); ``sft_mode`` is the warm start's
    (``ca``: its own mistakes replace the recipe's ``sft_noise``); ``sft_teacher`` labels its
    demonstrations instead of the recipe's teacher (without noise); ``split`` is the one the
    checkpoints are scored on (``val`` to choose a recipe, ``test`` to report it);
    ``rl_options`` (``"NAME=VALUE"``) set RL and sampling options of every variant's RL run.
    """
    from agentgym.baselines.credit import compose
    from agentgym.registry import make

    checking = quick and env is None
    if record and not checking:
        raise BadInput("--record writes the main job's check: bench learning --quick, no --env")
    if split not in ("val", "test"):
        raise BadInput(f"--split must be val or test, got {split!r}")
    if checking and split != "test":
        raise BadInput("the main job's check scores on test, as its recorded figures do")
    if checking and rl_options:
        raise BadInput("the main job's check trains its recipe, as its recorded figures do")
    if checking:
        budget = _check_budget(1 if seeds is None else seeds, tokens, aggregation, first_seed)
        variants = variants or (learning_check.variant(),)
    else:
        budget = budget_for(
            env or ENV_ID,
            quick,
            seeds=3 if seeds is None else seeds,
            tokens=tokens,
            aggregation=aggregation,
            first_seed=first_seed,
        )
        variants = variants or ("grpo", "gigpo")
    budget = _with_options(budget, rl_steps, device, curve, sft_mode, sft_teacher, split)
    budget = _with_rl_options(budget, rl_options)
    variants = tuple(dict.fromkeys(variants))
    if not variants:
        raise BadInput("--variants needs at least one credit variant")
    for name in variants:
        # an unknown name, a clash or a misfitting env fails now, not after the warm start
        plan = compose(name, {"aggregation": budget.train.rl.aggregation or None})
        plan.check(make(budget.env, **({"privileged": True} if plan.needs_privileged else {})))
        if _wants_teachers(name) and budget.env not in DOMAIN_ENVS:
            raise BadInput(
                f"{name} distils from a teacher per domain, which bench learning trains only "
                f"on {', '.join(sorted(DOMAIN_ENVS))}"
            )
    console.print(budget.describe())
    if work is not None and Path(work).exists() and not Path(work).is_dir():
        raise BadInput(f"--work {work} is a file: give a folder")
    folder = Path(work or tempfile.mkdtemp(prefix="agentgym-bench-learning-"))
    try:
        runs = [_seed_runs(console, budget, variants, seed, folder) for seed in budget.seeds]
    finally:
        if work is None:
            shutil.rmtree(folder, ignore_errors=True)
    doc = report(console, budget, variants, runs, plot)
    if checking:
        doc["check"] = learning_check.check(console, doc, record=record)
    return doc


def _with_options(
    budget: Budget,
    rl_steps: int | None,
    device: str,
    curve: bool,
    sft_mode: str,
    sft_teacher: str | None,
    split: str,
) -> Budget:
    """``budget`` with :func:`run`'s options applied (each at its default leaves it alone)."""
    if rl_steps is not None:
        budget = replace(budget, train=budget.train.with_options(steps=rl_steps, token_budget=0))
    if device != "cpu":  # checked by the first run that trains: finished runs report anywhere
        budget = replace(budget, train=budget.train.with_options(device=device))
    if not curve:
        budget = replace(budget, curve=())
    if split != "test":
        budget = replace(budget, split=split)
    if sft_mode != "plain":
        budget = replace(budget, train=budget.train.with_options(sft_mode=sft_mode, sft_noise=0.0))
    if sft_teacher is not None and sft_teacher != "oracle":
        from agentgym.agents import load_agent

        load_agent(sft_teacher)  # a name that loads no agent fails now, not after the runs
        # an agent's demonstrations take no noise: only the oracle re-plans from any state
        teacher = budget.train.with_options(sft_teacher=sft_teacher, sft_noise=0.0)
        budget = replace(budget, train=teacher)
    return budget


RL_GROUPS = ("rl", "sampling")
"""The option groups ``--rl-option`` sets: the RL loop's and its decoding's."""


def _with_rl_options(budget: Budget, items: tuple[str, ...] | list[str]) -> Budget:
    """``budget`` with ``--rl-option NAME=VALUE`` items parsed, checked and kept in name order.

    Raises:
        BadInput: an item that is not NAME=VALUE, a name outside the RL and sampling options
            (or the budget's, which have options of their own), a value the config refuses.
    """
    known = {o.name: o for o in options(TrainConfig) if o.path[0] in RL_GROUPS}
    own = {"steps": "--rl-steps", "token_budget": "--tokens", "aggregation": "--aggregation"}
    parsed: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise BadInput(f"--rl-option expects NAME=VALUE, got {item!r}")
        if name in own:
            raise BadInput(f"--rl-option {name}: the budget is set by {own[name]}")
        if name not in known:
            raise BadInput(
                f"--rl-option {name}: not an option of the RL loop or its sampling; choose "
                f"from {', '.join(sorted(set(known) - set(own)))}"
            )
        parsed[name] = convert(name, known[name].kind, text.strip())
    if not parsed:
        return budget
    budget.train.with_options(**parsed)  # a value the config refuses fails now
    return replace(budget, rl_options=tuple(sorted(parsed.items())))


def _threads(cfg: TrainConfig) -> int:
    """The torch threads a run trained on (its ``threads`` option, or the host's default)."""
    return cfg.model.threads or torch.get_num_threads()


def _seed_runs(
    console: Console, budget: Budget, variants: tuple[str, ...], seed: int, work: Path
) -> dict[str, dict[str, Any]]:
    """One training seed: its warm start and every variant from it, scored."""
    from agentgym.baselines.train import train

    base = budget.train.with_options(seed=seed)
    tag = _tag(base)
    warm = work / f"warm-{tag}{seed}"
    warm_cfg = base.with_options(steps=0, token_budget=0)
    # the policy every variant starts from: the SFT warm start, or, in a recipe without one
    # (RL from scratch), the seed's initial policy, which train() leaves at its output
    start = warm / "sft" if warm_cfg.sft.steps > 0 else warm

    def warm_scored() -> dict[str, Any]:
        return {"doc": _evaluate(start, budget), "curve": [], "tokens": 0, "steps": 0}

    def warm_start() -> dict[str, Any]:
        train(warm_cfg, warm)
        return {**warm_scored(), "threads": _threads(warm_cfg)}

    warm_key = {"warm start": warm_cfg.to_json(), **budget.eval_key()}
    title = f"seed {seed}: warm start"
    out = {"sft": reused(console, title, warm, warm_key, warm_start, warm_scored)}
    wanting = [name for name in variants if _wants_teachers(name)]
    teachers = _domain_teachers(console, base, warm_key, start, seed, work) if wanting else {}
    spec = ",".join(f"{domain}={run['dir']}" for domain, run in teachers.items())
    settings = "".join(f"{name}{value}-" for name, value in budget.rl_options)
    for name in variants:
        run_dir = work / f"{name}-{settings}{tag}{seed}"
        cfg = base.with_options(
            credit=name, init=str(start), sft_steps=0, **dict(budget.rl_options)
        )
        if name in wanting:
            cfg = cfg.with_options(teachers=spec)

        def scored(run_dir: Path = run_dir) -> dict[str, Any]:
            return _scored_run(run_dir, budget)

        def rl(cfg: TrainConfig = cfg, run_dir: Path = run_dir) -> dict[str, Any]:
            train(cfg, run_dir)
            return {**scored(run_dir), "threads": _threads(cfg)}

        key = {**warm_key, "rl": cfg.to_json()}  # a new warm start invalidates its runs
        out[name] = reused(console, f"seed {seed}: {name}", run_dir, key, rl, scored)
        if name in wanting:  # its teachers' training is its cost too
            out[name] = {**out[name], "teachers_train_seconds": _total(teachers, "seconds")}
    return out


def _tag(cfg: TrainConfig) -> str:
    """What a seed's run folders add to their names for a warm start of another kind.

    Plain SFT on the oracle's demonstrations adds nothing; another mode adds its name
    (``ca-``), another teacher its class's (``explorer-`` for ``...:ExplorerAgent``).
    """
    tag = "" if cfg.sft.mode == "plain" else f"{cfg.sft.mode}-"
    if cfg.sft.teacher != "oracle":
        name = cfg.sft.teacher.rsplit(":", 1)[-1].rsplit(".", 1)[-1].lower()
        tag += f"{name.removesuffix('agent') or name}-"
    return tag


def _wants_teachers(name: str) -> bool:
    """Whether variant ``name`` distils from teacher checkpoints (``--teachers``)."""
    from agentgym.baselines.credit import compose

    return any(v.requires_teachers for v in compose(name).variants)


def _domain_teachers(
    console: Console,
    base: TrainConfig,
    warm_key: dict[str, Any],
    start: Path,
    seed: int,
    work: Path,
) -> dict[str, dict[str, Any]]:
    """One teacher per domain of the env (:data:`DOMAIN_ENVS`), trained or reused.

    A teacher is the recipe's own variant on its domain's env, from the seed's warm start, at
    the variants' token budget. Returns, by domain, its folder, generated tokens and training
    seconds. Not scored: only its cost is reported.
    """
    from agentgym.baselines.train import train

    teachers = {}
    for domain, env in DOMAIN_ENVS[base.env].items():
        cfg = base.with_options(env=env, init=str(start), sft_steps=0)
        run_dir = work / f"teacher-{domain}-{_tag(base)}{seed}"

        def rl(cfg: TrainConfig = cfg, run_dir: Path = run_dir) -> dict[str, Any]:
            train(cfg, run_dir)
            rows = _rl_rows(run_dir)
            return {
                "tokens": int(float(rows[-1]["generated_total"])) if rows else 0,
                "seconds": float(rows[-1]["seconds"]) if rows else 0.0,
            }

        key = {**warm_key, "teacher": cfg.to_json()}
        title = f"seed {seed}: {domain} teacher"
        teachers[domain] = {**reused(console, title, run_dir, key, rl), "dir": str(run_dir)}
    return teachers


def _total(runs: dict[str, dict[str, Any]], field: str) -> float:
    return float(sum(run[field] for run in runs.values()))


def _rl_rows(run_dir: Path) -> list[dict[str, str]]:
    """The RL steps' rows of a run's ``metrics.csv``."""
    with (run_dir / "metrics.csv").open() as f:
        return [r for r in csv.DictReader(f) if r["phase"] == "rl"]


def _scored_run(run_dir: Path, budget: Budget) -> dict[str, Any]:
    """The final checkpoint's results, and the curve's checkpoints' test success."""
    rl = _rl_rows(run_dir)
    totals = [float(r["generated_total"]) for r in rl]
    final = totals[-1] if totals else 0.0
    curve = []
    for fraction in budget.curve:
        step = next((i + 1 for i, t in enumerate(totals) if t >= fraction * final), None)
        if step is not None and step < len(totals):
            doc = _evaluate(run_dir / "steps" / f"step_{step:05d}", budget)
            curve.append((totals[step - 1], mean_success(doc, budget.env)))
    doc = _evaluate(run_dir, budget)
    curve.append((final, mean_success(doc, budget.env)))
    return {
        "doc": doc,
        "curve": curve,
        "tokens": int(final),
        "steps": len(rl),
        "seconds": float(rl[-1]["seconds"]) if rl else 0.0,
        # the extra forwards a variant's teachers ran (privileged view, reference, checkpoints)
        "teacher_tokens": sum(float(r.get("teachers/tokens") or 0) for r in rl),
        "teacher_seconds": sum(float(r.get("teachers/seconds") or 0) for r in rl),
    }


def _evaluate(ckpt: Path, budget: Budget) -> dict[str, Any]:
    from agentgym.baselines.train import env_kwargs
    from agentgym.harness.evaluate import evaluate

    return evaluate(
        str(ckpt),
        [budget.env],
        seeds=budget.test_seeds,
        root_seed=0,
        split=budget.split,
        env_kwargs=env_kwargs(budget.train),  # the env the runs trained on
    )
