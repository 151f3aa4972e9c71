"""The PPO/GRPO loop, read top to bottom.

It never names a credit variant: every variant acts through the plan's hooks (``sample,
transform, score, advantages, shape, aux_loss, grad_hook``) on one
:class:`~agentgym.baselines.batch.Batch` per step.

    SFT warm start on oracle demonstrations (plain, or credit-assignment SFT: ca_sft.py)
    for each step:  rollouts -> transform -> score -> advantages -> shape
                    -> log-probs -> clipped surrogate (+ KL, + aux losses) -> step
"""

from __future__ import annotations

import contextlib
import copy
import csv
import importlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.agents.checkpoint import is_checkpoint_dir
from agentgym.baselines.batch import Batch, StepContext, generated_tokens
from agentgym.baselines.config import SFT_MODES, TrainConfig
from agentgym.baselines.credit import compose
from agentgym.baselines.demos import Demo, oracle_demos
from agentgym.baselines.envpool import (
    EnvPool,
    check_pool_options,
    env_kwargs,
    make_env,
    rollout_pool,
)
from agentgym.baselines.policies.agent import (
    DEFAULT_POLICY_CLASS,
    import_policy_class,
    save_policy_checkpoint,
)
from agentgym.baselines.rollout import RolloutConfig
from agentgym.baselines.teachers import Teachers, check_tokenizer, parse_teachers
from agentgym.baselines.threads import torch_threads
from agentgym.baselines.update import adamw, update
from agentgym.core.errors import BadInput
from agentgym.harness.plot import agg_figure
from agentgym.harness.pool import Pool, open_pool
from agentgym.terminal import Progress


def credit_settings(cfg: TrainConfig) -> dict[str, Any]:
    """``cfg.credit_settings`` parsed: variant name -> its settings.

    The names are checked against the variants of ``cfg.credit``; each variant checks its own
    fields when it is built.
    """
    if not cfg.credit_settings.strip():
        return {}
    try:
        settings = json.loads(cfg.credit_settings)
    except json.JSONDecodeError as e:
        raise BadInput(f"--credit-settings is not valid JSON: {e}") from None
    if not isinstance(settings, dict) or not all(isinstance(v, dict) for v in settings.values()):
        raise BadInput('--credit-settings must map variant names to objects: {"grpo": {...}}')
    named = {p.strip() for p in cfg.credit.split("+")}
    stray = sorted(set(settings) - named)
    if stray:
        raise BadInput(f"--credit-settings names {stray}, which --credit {cfg.credit!r} lacks")
    return settings


def plan_settings(cfg: TrainConfig) -> dict[str, Any]:
    """What :func:`compose` reads: the variants' settings and the run's loss aggregation."""
    settings: dict[str, Any] = dict(credit_settings(cfg))
    if cfg.rl.aggregation:
        settings["aggregation"] = cfg.rl.aggregation
    return settings


def make_policy(cfg: TrainConfig) -> Any:
    """The policy to train.

    That is a tiny transformer with a tokenizer fitted to the env's text, or a local Hugging
    Face model, or the policy of the checkpoint ``cfg.model.init``.
    """
    if cfg.model.init:
        return load_policy(Path(cfg.model.init), cfg.model.device)
    if cfg.model.policy == "tiny":
        from agentgym.baselines.policies.tiny import TinyPolicy
        from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer

        tokenizer = train_tokenizer(
            collect_env_text(cfg.env, seed=cfg.seed, env_kwargs=env_kwargs(cfg)), vocab_size=2000
        )
        torch.manual_seed(cfg.seed)
        tiny = TinyPolicy.from_preset(cfg.model.preset, tokenizer, max_len=cfg.model.max_len)
        return tiny.to(cfg.model.device)
    if not Path(cfg.model.policy).is_dir():
        raise BadInput(
            f"--policy must be 'tiny' or a local model directory, got {cfg.model.policy!r}"
        )
    from agentgym.baselines.policies.hf import HFPolicy, LoraSettings

    lora = (
        LoraSettings(r=cfg.model.lora_r, alpha=2.0 * cfg.model.lora_r)
        if cfg.model.lora_r > 0
        else None
    )
    return HFPolicy.from_pretrained(cfg.model.policy, lora=lora, device=cfg.model.device)


def check_device(device: str) -> None:
    """Refuse a device torch cannot name or this machine lacks (exit 2, one line)."""
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise BadInput(f"--device {device!r}: use cpu or cuda (cuda:N)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise BadInput(f"--device {device}: torch sees no GPU on this machine")


def load_policy(path: Path, device: str = "cpu", *, flag: str = "--init") -> Any:
    """The policy inside a checkpoint directory, on ``device``, by the class it names.

    It reads safetensors + JSON; nothing is unpickled. ``flag`` names the option that gave
    ``path`` in the error.
    """
    from agentgym.agents.checkpoint import is_checkpoint_dir, read_manifest

    if not is_checkpoint_dir(path):
        raise BadInput(f"{flag} {path}: not a checkpoint directory")
    config = read_manifest(path).get("config", {})
    policy_cls = import_policy_class(str(config.get("policy_class", DEFAULT_POLICY_CLASS)))
    return policy_cls.load(path, device=device)


@dataclass(frozen=True)
class WarmStart:
    """What the SFT warm start trains on, whatever its mode (:data:`SFT_MODES`)."""

    demos: list[Demo]
    weights: list[float] | None = None
    """Per demo, the weight of its NLL (None: 1 each)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """What the mode logs in the SFT row of ``metrics.csv`` (names start with ``sft_``)."""


def warm_start(cfg: TrainConfig, policy: Any) -> WarmStart:
    """The demonstrations of ``cfg.sft.mode``, by the function :data:`SFT_MODES` names."""
    module, _, name = SFT_MODES[cfg.sft.mode].partition(":")
    data: WarmStart = getattr(importlib.import_module(module), name)(cfg, policy)
    return data


def plain_warm_start(cfg: TrainConfig, policy: Any) -> WarmStart:
    """Plain SFT: every state of the teacher's episodes, weight 1 (:func:`oracle_demos`)."""
    return WarmStart(oracle_demos(cfg, policy))


def rollout_config(cfg: TrainConfig, **overrides: Any) -> RolloutConfig:
    """How the run generates actions and what its prompts hold."""
    return RolloutConfig(
        prompt=cfg.prompt,
        max_new_tokens=cfg.sampling.max_new_tokens,
        temperature=cfg.sampling.temperature,
        constrained=cfg.sampling.constrained,
        **overrides,
    )


def sft(
    policy: Any, demos: list[Demo], cfg: TrainConfig, weights: Sequence[float] | None = None
) -> float:
    """Teacher forcing on the demonstrations with a warm-up + cosine learning rate.

    ``weights``: per demo, the weight of its tokens' NLL (None: 1 each); the loss stays a sum
    over the batch's tokens divided by their number, so a weight below 1 lowers that demo's
    share. Returns the last batch's (weighted) mean NLL per token.
    """
    optimizer = adamw(policy.parameters(), lr=cfg.sft.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_cosine(cfg.sft.steps))
    rng = np.random.default_rng(cfg.seed)
    nll = float("nan")
    with Progress("warm start (SFT)", cfg.sft.steps) as progress:
        for _ in range(cfg.sft.steps):
            idx = rng.choice(len(demos), size=min(32, len(demos)), replace=False)
            prompts, responses = [demos[i][0] for i in idx], [demos[i][1] for i in idx]
            logps = policy.logprobs(prompts, responses, grad=True)
            if weights is None:
                loss = -torch.cat(logps).mean()
            else:
                weighted = sum(weights[i] * lp.sum() for i, lp in zip(idx, logps, strict=True))
                loss = -weighted / sum(len(lp) for lp in logps)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.rl.max_grad_norm)
            optimizer.step()
            schedule.step()
            nll = loss.item()
            progress.advance(nll=nll)
    return nll


def _warmup_cosine(steps: int, warmup: float = 0.05) -> Any:
    """The learning-rate factor at each step.

    Linear warm-up over the first ``warmup`` share of ``steps``, then cosine decay to zero.
    """
    ramp = max(1, int(steps * warmup))

    def factor(step: int) -> float:
        if step < ramp:
            return (step + 1) / ramp
        return 0.5 * (1.0 + np.cos(np.pi * (step - ramp) / max(1, steps - ramp)))

    return factor


def rl_step(
    policy: Any,
    ref: Any,
    plan: Any,
    pool: EnvPool,
    optimizer: Any,
    cfg: TrainConfig,
    step: int,
    rng: np.random.Generator,
    teachers: Teachers | None = None,
) -> dict[str, float]:
    """One optimiser step: rollouts (the plan's sampler), the credit hooks, the loss, the update."""
    ctx = StepContext(
        config=cfg,
        policy=policy,
        ref=ref,
        envs=pool,
        step=step,
        rollout=rollout_config(cfg),
        rng=rng,
        tasks_per_step=cfg.rl.tasks_per_step,
        group_size=cfg.rl.group_size,
        teachers=teachers,
    )
    batch = Batch(trajectories=[])
    with torch.no_grad():
        for hook in ("sample", "transform", "score", "advantages", "shape"):
            plan.run(hook, batch, ctx)
    metrics = update(batch, policy, ref, plan, optimizer, cfg, ctx)
    # Rollout statistics over fresh episodes only: branches are started where a sampler chose
    # to, and edited copies carry bonus outcomes, so either would bias them.
    fresh = [t for t in batch.trajectories if t.parent_id is None and not t.edited]
    env_metrics = getattr(pool, "step_metrics", None)  # a Ray pool: actors restarted, replays
    generated = generated_tokens(batch.trajectories)  # what the policy sampled this step
    valid = [turn.info.get("action_valid", True) for t in fresh for turn in t.turns]
    return {
        **(env_metrics() if env_metrics is not None else {}),
        **metrics,
        **batch.metrics,
        "success": float(np.mean([t.outcome for t in fresh])) if fresh else float("nan"),
        "return": float(np.mean([t.total_return for t in fresh])) if fresh else float("nan"),
        "invalid_rate": 1.0 - float(np.mean(valid)) if valid else float("nan"),
        "turns": float(np.mean([len(t.turns) for t in fresh])) if fresh else float("nan"),
        "generated_tokens": float(generated),
    }


def _start_up(cfg: TrainConfig, plan: Any) -> tuple[EnvPool, dict[str, Any]]:
    """Every check that can refuse the run, before any work; the rollout envs and teachers.

    A variant reading privileged info gets privileged envs (the prompts never show it).
    """
    if not 0.0 <= cfg.sft.noise <= 1.0:
        raise BadInput(f"--sft-noise is a probability in [0, 1], got {cfg.sft.noise}")
    kwargs = env_kwargs(cfg)
    check_device(cfg.model.device)
    teacher_dirs = parse_teachers(cfg.rl.teachers)
    plan.check_teachers(list(teacher_dirs))
    rollout_kwargs = {**kwargs, "privileged": True} if plan.needs_privileged else kwargs
    check_pool_options(cfg)
    probe = make_env(cfg, **rollout_kwargs)
    plan.check(probe)  # an env lacking what a variant needs
    plan.check_teachers(list(teacher_dirs), probe)  # teachers a variant cannot use
    # the reference's checkpoint is read once the warm start exists; its folder is checked now
    if cfg.rl.reference and not is_checkpoint_dir(Path(cfg.rl.reference)):
        raise BadInput(f"--reference {cfg.rl.reference}: not a checkpoint directory")
    named = {
        name: load_policy(Path(p), cfg.model.device, flag=f"--teachers {name}")
        for name, p in teacher_dirs.items()
    }
    size = cfg.rl.tasks_per_step * cfg.rl.group_size
    return rollout_pool(cfg, size, split="train", **rollout_kwargs), named


def train(cfg: TrainConfig, out: Path) -> Path:
    """Warm start, then the RL loop; the final checkpoint is ``out`` itself.

    The loop runs ``cfg.rl.steps`` steps, or, with ``cfg.rl.token_budget``, until the
    rollouts have generated that many tokens.
    """
    plan = compose(cfg.credit, plan_settings(cfg))
    pool, named = _start_up(cfg, plan)
    try:
        with torch_threads(cfg.model.threads):
            return _train(cfg, out, plan, pool, named)
    finally:
        pool.close()


def _train(cfg: TrainConfig, out: Path, plan: Any, pool: EnvPool, named: dict[str, Any]) -> Path:
    """:func:`train` once its rollout envs exist."""
    torch.manual_seed(cfg.seed)
    policy = make_policy(cfg)
    out.mkdir(parents=True, exist_ok=True)
    # the prompt format as one object: evaluation rebuilds the prompts the policy saw
    metadata = {
        "train": {**cfg.to_json(), "credit_plan": plan.names},
        "prompt": cfg.prompt.to_json(),
    }
    run = _RunLog(out, cfg, metadata)
    if cfg.sft.steps > 0:
        data = warm_start(cfg, policy)
        nll = sft(policy, data.demos, cfg, data.weights)
        # the warm start alone, the baseline RL is measured against
        run.checkpoint(policy, out / "sft", step=0)
        run.record({"phase": "sft", "step": 0, "sft_nll": nll, **data.metrics})
    ref = reference(cfg, policy, plan)
    teachers = Teachers(policy, ref, named, max_tokens=cfg.rl.micro_batch_tokens)
    optimizer = adamw(policy.parameters(), lr=cfg.rl.lr, weight_decay=cfg.rl.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    step = generated = 0
    # one evaluation pool for the run: its envs are built once, not at every evaluation
    with _rl_progress(cfg) as progress, open_pool() as eval_pool:
        while not _rl_done(cfg, step, generated):
            step += 1
            metrics = rl_step(policy, ref, plan, pool, optimizer, cfg, step, rng, teachers)
            generated += int(metrics.get("generated_tokens", 0))
            metrics["generated_total"] = float(generated)
            last = _rl_done(cfg, step, generated)
            evaluate_now = _every(cfg.log.eval_every, step, last)
            if evaluate_now or _every(cfg.log.checkpoint_every, step, last):
                ckpt = run.checkpoint(policy, out / "steps" / f"step_{step:05d}", step=step)
                if evaluate_now:
                    with run.paused():
                        metrics["val_success"] = evaluate_checkpoint(ckpt, cfg, eval_pool)
            run.record({"phase": "rl", "step": step, **metrics})
            _advance(progress, cfg, step, metrics)
    run.close()
    save_policy_checkpoint(policy, out, metadata=metadata)
    (out / "train_config.json").write_text(json.dumps(cfg.to_json(), indent=1) + "\n")
    return out


def reference(cfg: TrainConfig, policy: Any, plan: Any) -> Any:
    """The frozen reference, for the loss's KL and the variants that read it (None: unused).

    It is ``cfg.rl.reference``'s checkpoint, or else a copy of the warm start.
    """
    if cfg.rl.reference:
        ref = load_policy(Path(cfg.rl.reference), cfg.model.device, flag="--reference")
        check_tokenizer(policy, ref, "reference")
    elif cfg.rl.kl_coef > 0 or plan.needs_reference:
        ref = copy.deepcopy(policy)
    else:
        return None
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _rl_done(cfg: TrainConfig, step: int, generated: int) -> bool:
    """Whether the RL loop has spent its budget: the token budget if set, else the steps."""
    if cfg.rl.token_budget > 0:
        return generated >= cfg.rl.token_budget
    return step >= cfg.rl.steps


class _RunLog:
    """A run's logs and its clock of training time.

    The logs are ``metrics.csv`` (rewritten each step), TensorBoard and the curve; the clock
    excludes checkpoints and periodic evaluation.
    """

    def __init__(self, out: Path, cfg: TrainConfig, metadata: dict[str, Any]):
        """Start the clock; open TensorBoard when the config asks for it."""
        self.out, self.metadata = out, metadata
        self.rows: list[dict[str, Any]] = []
        self.tb = _tensorboard(out / "tb") if cfg.log.tensorboard else None
        self._start = time.perf_counter()
        self._paused = 0.0

    @property
    def seconds(self) -> float:
        """Training seconds so far."""
        return time.perf_counter() - self._start - self._paused

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the training clock for the duration (saving, evaluating)."""
        pause = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - pause

    def checkpoint(self, policy: Any, path: Path, *, step: int) -> Path:
        """Save ``policy`` at ``path`` with the run's metadata, the step and its time."""
        meta = {**self.metadata, "step": step, "train_seconds": self.seconds}
        with self.paused():
            return save_policy_checkpoint(policy, path, metadata=meta)

    def record(self, row: dict[str, Any]) -> None:
        """Log one row (its training seconds added) to the CSV and TensorBoard."""
        row = {"phase": row["phase"], "step": row["step"], "seconds": self.seconds, **row}
        self.rows.append(row)
        _write_csv(self.out / "metrics.csv", self.rows)
        if self.tb is None:
            return
        if row["phase"] == "sft":  # sft_nll -> sft/nll, and the mode's own
            for name, value in row.items():
                if name.startswith("sft_"):
                    self.tb.add_scalar(name.replace("_", "/", 1), value, 0)
        else:
            for name, value in row.items():
                if name not in ("phase", "step", "seconds"):
                    self.tb.add_scalar(name if "/" in name else f"rl/{name}", value, row["step"])
        self.tb.flush()

    def close(self) -> None:
        """Final CSV, TensorBoard closed, the curve plotted."""
        _write_csv(self.out / "metrics.csv", self.rows)
        if self.tb is not None:
            self.tb.close()
        plot_curve(self.rows, self.out / "curve.png")


def _every(period: int, step: int, last: bool) -> bool:
    """Whether a periodic action (period > 0) falls on ``step``; the last step always counts."""
    return period > 0 and (step % period == 0 or last)


def _tensorboard(logdir: Path) -> Any:
    """A TensorBoard writer, or a clear error naming the missing package."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # torch raises ImportError when tensorboard is absent
        raise BadInput(
            "TensorBoard logs need the tensorboard package: pip install tensorboard "
            "(or pass --no-tensorboard)"
        ) from e
    return SummaryWriter(log_dir=str(logdir))


def evaluate_checkpoint(ckpt: Path, cfg: TrainConfig, pool: Pool | None = None) -> float:
    """Mean success of a checkpoint on the val split through the harness (many seeds, greedy).

    ``pool``: the run's evaluation pool, kept open between evaluations (None: one for this call).
    """
    from agentgym.harness.evaluate import evaluate

    doc = evaluate(
        str(ckpt),
        [cfg.env],
        seeds=cfg.log.eval_seeds,
        root_seed=cfg.seed,
        split="val",
        pool=pool,
        env_kwargs=env_kwargs(cfg),
    )
    return float(doc["aggregates"][cfg.env]["mean"])


def plot_curve(rows: list[dict[str, Any]], path: Path) -> None:
    """Rollout success and val success against RL steps (a PNG; matplotlib, no display)."""
    rl = [r for r in rows if r["phase"] == "rl"]
    fig = agg_figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    ax.plot([r["step"] for r in rl], [r["success"] for r in rl], label="rollout success")
    evals = [r for r in rl if "val_success" in r]
    ax.plot(
        [r["step"] for r in evals],
        [r["val_success"] for r in evals],
        "o-",
        label="val success (greedy)",
    )
    ax.set(xlabel="RL step", ylabel="success", ylim=(-0.02, 1.02))
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)


def _rl_progress(cfg: TrainConfig) -> Progress:
    """The RL phase's progress: over the token budget if there is one, else over the steps."""
    label = f"RL ({cfg.credit})"
    if cfg.rl.token_budget > 0:
        return Progress(label, cfg.rl.token_budget, unit="generated tokens")
    return Progress(label, cfg.rl.steps)


def _advance(progress: Progress, cfg: TrainConfig, step: int, metrics: dict[str, float]) -> None:
    """One line per RL step: its rollouts' mean return and success (and val success if scored)."""
    shown: dict[str, float | str] = {"return": metrics["return"], "success": metrics["success"]}
    if cfg.rl.token_budget > 0:  # the count is in tokens: say which step this was
        shown = {"step": str(step), **shown}
    if "val_success" in metrics:
        shown["val_success"] = metrics["val_success"]
    done = int(metrics.get("generated_tokens", 0)) if cfg.rl.token_budget > 0 else 1
    progress.advance(done, line=True, **shown)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
