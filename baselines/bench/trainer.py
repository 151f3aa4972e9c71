"""Trainer speed: throughput of our GRPO step against TRL's ``GRPOTrainer``.

Throughput is rollout + update completion tokens per second, on the same tiny Hugging Face
model and the same single-turn task, in alternating runs of one process. The goal (ours at
least twice TRL's rate) is reported, never asserted.

The model and tokenizer are built offline on the spot (nothing is downloaded): a byte-level
BPE tokenizer trained on the task text and a randomly initialised 2-layer GPT-2, written
with ``save_pretrained`` into a temporary directory that both sides load.

The task: prompt ``"Say the word: apple"``; reward 1.0 when the completion contains the
word, else half the share of the word's distinct letters that occur in it (so groups carry
a signal even from a random model). Prompts come in a fixed order, the same for both sides.

One step, both sides: ``prompts`` prompts × ``completions`` sampled completions (one batched
generation of all of them, temperature 1, at most ``max_new_tokens`` tokens), rewards,
group-normalised advantages (GRPO, per-sequence token mean), one forward + backward of the
clipped surrogate over all completions, gradient clipping, one AdamW step. No reference
model (β = 0), one optimisation pass per batch (so the behaviour log-probs of the sampler
serve as the old log-probs on both sides), no dropout, float32, no gradient checkpointing,
the same ``torch.set_num_threads`` for both.

* Ours: :class:`~agentgym.baselines.policies.hf.HFPolicy` (``generate``: KV-cached sampling
  that returns behaviour log-probs), the credit plan ``compose("grpo")``, and the trainer's
  own :func:`~agentgym.baselines.update.policy_backward` (``logprobs(grad=True)``,
  :func:`~agentgym.baselines.losses.clipped_surrogate`, the aggregation's token weights),
  then ``clip_grad_norm_`` and the trainer's AdamW (:func:`~agentgym.baselines.update.adamw`).
* TRL: ``GRPOTrainer`` with ``num_generations=completions``,
  ``per_device_train_batch_size = prompts × completions``, ``gradient_accumulation_steps=1``
  (one generation batch = one optimiser step), ``num_iterations=1``, ``beta=0``,
  ``loss_type="grpo"``, ``optim="adamw_torch"``, constant learning rate, ``use_cpu``,
  ``bf16=False``, ``gradient_checkpointing=False``, ``disable_dropout``, no shuffling.

Counting: completion tokens actually generated, up to and including EOS. Ours: ``len(ids)``
of each :class:`~agentgym.baselines.policies.base.GenOut`. TRL: the reward function receives
``completion_ids`` (TRL's completions cut after the first EOS, EOS kept) and sums their
lengths; this is exact, unlike the per-step mean ``completions/mean_length``.

Timing: each run is one fresh policy (ours) or one fresh trainer (TRL) doing ``warmup`` steps
and then ``steps`` timed steps; the clock runs from the end of the last warm-up step to the
end of the last step (TRL: ``on_step_end`` callbacks, so its whole loop between steps
counts: data loading, its bookkeeping, its logging hooks). Model loading and trainer
construction are outside the clock. Runs alternate (ours, TRL, then TRL, ours...) so host
noise hits both alike, and medians over runs are reported.

Where the time goes (2 shared CPU cores, one thread, default settings, about 0.11 s per step
of 64 completions against TRL's 0.21 s). Ours decodes and scores through the lean forward
(:mod:`~agentgym.baselines.policies.hf_lean`: the same GPT-2 function as plain tensor ops
on the model's parameters, a preallocated KV cache, one mask per batch, each group's prompt
run once) and keeps the sampler's log-probs as the old ones (one epoch: no scoring pass
without gradient). Its step splits into decoding ~42% (31 decode steps of ~1.1 ms: the four
projections per layer ~0.35 ms, close to one core's float32 matmul peak; attention ~0.2 ms;
GELU ~0.1 ms; sampling ~0.15 ms), the scoring forward ~20% and backward ~30% (~5 GFLOP per
step at ~100-140 GFLOP/s: compute-bound), rewards and advantages ~2%, fused AdamW ~1%.
TRL spends ~45% in ``generate`` and the rest in its scoring forward/backward and its
bookkeeping. With both sides near the arithmetic of the same model, the ratio lands at
1.8-2.0x depending on host load; what is left would need less arithmetic (lower precision,
which the fairness pins rule out) rather than less overhead.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentgym.baselines.bench.grpo_task import (
    GOAL,
    QUICK,
    PeakMemory,
    RunResult,
    Settings,
    build_model_dir,
    max_rss_mib,
    mean,
    reward,
    set_threads,
    task_rows,
)
from agentgym.baselines.bench.trainer_report import print_tables, row
from agentgym.baselines.bench.trainer_report import shares as phase_shares
from agentgym.core.errors import BadInput

if TYPE_CHECKING:
    import torch

    from agentgym.baselines.batch import Batch
    from agentgym.baselines.config import TrainConfig
    from agentgym.baselines.credit import Plan
    from agentgym.baselines.policies.base import GenOut
    from agentgym.baselines.policies.hf import HFPolicy

INSTALL_HINT = "bench trainer needs TRL: pip install 'agentgym[bench]'"
FAIRNESS: dict[str, dict[str, Any]] = {
    "trl": {
        "beta": 0.0,
        "num_iterations": 1,
        "bf16": False,
        "gradient_checkpointing": False,
        "disable_dropout": True,
    },
    "ours": {"kl_coef": 0.0, "epochs": 1, "minibatches": 1, "lean_forward": True},
}
"""What both sides are pinned to (module docstring); the JSON doc carries it."""


def run_ours(model_dir: Path, settings: Settings, run: int) -> RunResult:
    """``warmup + steps`` steps of our GRPO trainer on a fresh copy of the model."""
    import torch

    from agentgym.baselines.credit import compose
    from agentgym.baselines.policies.hf import HFPolicy
    from agentgym.baselines.update import adamw

    set_threads(settings)
    torch.manual_seed(settings.seed + run)
    policy = HFPolicy.from_pretrained(model_dir, value_head=False)
    cfg = _our_config(model_dir, settings)
    plan = compose(cfg.credit, cfg)
    optimizer = adamw(policy.parameters(), lr=settings.lr, weight_decay=0.0)
    total = settings.warmup + settings.steps
    rows = task_rows(settings.prompts * total)
    encoded = [policy.tokenizer.encode(r["prompt"]) for r in rows]
    phases = dict.fromkeys(("generate", "reward+advantages", "forward+backward", "optimizer"), 0.0)
    tokens, start, cpu_start = 0, 0.0, 0.0
    rewards: list[float] = []
    for step in range(total):
        # the clock starts after the warm-up steps
        if step == settings.warmup:
            tokens, rewards, phases = 0, [], dict.fromkeys(phases, 0.0)
            start, cpu_start = time.perf_counter(), time.process_time()
        outs, batch, spent = _our_step(policy, plan, cfg, optimizer, settings, rows, encoded, step)
        for name, seconds in zip(phases, spent, strict=True):
            phases[name] += seconds
        tokens += sum(len(o.ids) for o in outs)
        rewards.extend(t.outcome for t in batch.trajectories)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return RunResult(
        "ours",
        run,
        tokens,
        seconds,
        settings.steps,
        phases,
        mean(rewards),
        torch.get_num_threads(),
        cpu_seconds=cpu,
    )


def _our_config(model_dir: Path, settings: Settings) -> TrainConfig:
    """Our trainer's settings for the benchmark: GRPO, β = 0, no weight decay."""
    from agentgym.baselines.config import TrainConfig

    return TrainConfig.from_options(
        credit="grpo",
        policy=str(model_dir),
        tasks_per_step=settings.prompts,
        group_size=settings.completions,
        lr=settings.lr,
        weight_decay=0.0,
        clip=settings.clip,
        kl_coef=FAIRNESS["ours"]["kl_coef"],
        epochs=FAIRNESS["ours"]["epochs"],
        minibatches=FAIRNESS["ours"]["minibatches"],
        max_grad_norm=settings.max_grad_norm,
        temperature=settings.temperature,
        max_new_tokens=settings.max_new_tokens,
        constant_norm=float(settings.max_new_tokens),
        seed=settings.seed,
    )


def _our_step(
    policy: HFPolicy,
    plan: Plan,
    cfg: TrainConfig,
    optimizer: torch.optim.Optimizer,
    settings: Settings,
    rows: list[dict[str, str]],
    encoded: list[list[int]],
    step: int,
) -> tuple[list[GenOut], Batch, tuple[float, float, float, float]]:
    """One GRPO step of our trainer on the step's prompts.

    Returns:
        The completions, the scored batch, and the seconds of each phase: generation,
        rewards + advantages, forward + backward, optimiser.
    """
    import torch

    from agentgym.baselines.batch import StepContext
    from agentgym.baselines.update import policy_backward

    # 1. generate: `completions` samples of each of the step's prompts in one batch
    t0 = time.perf_counter()
    picked = range(step * settings.prompts, (step + 1) * settings.prompts)
    prompts = [encoded[i] for i in picked for _ in range(settings.completions)]
    words = [rows[i]["word"] for i in picked for _ in range(settings.completions)]
    outs = policy.generate(
        prompts, max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
    )

    # 2. rewards and group-normalised advantages through the credit plan
    t1 = time.perf_counter()
    batch = _our_batch(prompts, outs, words, settings.completions)
    ctx = StepContext(config=cfg, policy=policy, ref=None, envs=None, step=step)
    for hook in ("transform", "score", "advantages", "shape"):
        plan.run(hook, batch, ctx)

    # 3. the clipped surrogate's forward and backward
    t2 = time.perf_counter()
    optimizer.zero_grad()
    policy_backward(batch, policy, None, plan, cfg)
    for aux, _aux_metrics in plan.run("aux_loss", batch, ctx):
        aux.backward()
    plan.run("grad_hook", batch, ctx)

    # 4. gradient clipping and the AdamW step
    t3 = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    optimizer.step()
    t4 = time.perf_counter()
    return outs, batch, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)


def _our_batch(
    prompts: list[list[int]], outs: list[GenOut], words: list[str], completions: int
) -> Batch:
    """One single-turn trajectory per completion, ``completions`` per group, with its reward."""
    import torch

    from agentgym.baselines.batch import Batch, Trajectory, Turn

    return Batch(
        trajectories=[
            Trajectory(
                task_id=word,
                group_id=str(j // completions),
                turns=[
                    Turn(
                        prompt_ids=torch.tensor(p),
                        response_ids=torch.tensor(o.ids),
                        terminated=True,
                        logp_old=torch.tensor(o.logps),
                    )
                ],
                outcome=reward(o.text, word),
                terminated=True,
            )
            for j, (p, o, word) in enumerate(zip(prompts, outs, words, strict=True))
        ]
    )


# -------------------------------------------------------------------------------------- TRL


def run_trl(model_dir: Path, settings: Settings, run: int, work: Path) -> RunResult:
    """``warmup + steps`` steps of TRL's ``GRPOTrainer`` on a fresh copy of the model."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOTrainer

    set_threads(settings)
    total = settings.warmup + settings.steps
    counted: list[int] = []  # completion tokens per reward call
    rewards: list[float] = []
    clock: list[tuple[float, float, int, int]] = []  # (wall, cpu, tokens, rewards) at step ends
    args = _trl_args(settings, run, work, total)
    torch.manual_seed(settings.seed + run)
    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), dtype=torch.float32, local_files_only=True
    )
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    dataset = Dataset.from_list(task_rows(settings.prompts * total))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=_trl_reward(counted, rewards),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[_step_clock(clock, counted, rewards)],
    )
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    gen_time = _time_generation(trainer)
    set_threads(settings)
    trainer.train()
    if len(clock) != total or len(gen_time) != total:
        raise RuntimeError(f"TRL ran {len(clock)} steps ({len(gen_time)} generations), not {total}")
    (t_start, c_start, tok_start, r_start) = clock[settings.warmup - 1]
    (t_end, c_end, tok_end, _) = clock[-1]
    seconds = t_end - t_start
    gen = sum(gen_time[settings.warmup :])
    phases = {"generate": gen, "other": seconds - gen}
    return RunResult(
        "trl",
        run,
        tok_end - tok_start,
        seconds,
        settings.steps,
        phases,
        mean(rewards[r_start:]),
        torch.get_num_threads(),
        cpu_seconds=c_end - c_start,
    )


def _trl_args(settings: Settings, run: int, work: Path, total: int) -> Any:
    """TRL's ``GRPOConfig`` matching our step (module docstring), for ``total`` steps."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(work / f"trl-{run}"),
        per_device_train_batch_size=settings.prompts * settings.completions,
        gradient_accumulation_steps=1,
        num_generations=settings.completions,
        max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature,
        num_iterations=FAIRNESS["trl"]["num_iterations"],
        beta=FAIRNESS["trl"]["beta"],
        epsilon=settings.clip,
        loss_type="grpo",
        scale_rewards="group",
        learning_rate=settings.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        optim="adamw_torch",
        max_grad_norm=settings.max_grad_norm,
        max_steps=total,
        logging_steps=10**9,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=FAIRNESS["trl"]["bf16"],
        gradient_checkpointing=FAIRNESS["trl"]["gradient_checkpointing"],
        dataloader_num_workers=0,
        disable_tqdm=True,
        disable_dropout=FAIRNESS["trl"]["disable_dropout"],
        shuffle_dataset=False,
        seed=settings.seed + run,
    )


def _trl_reward(counted: list[int], rewards: list[float]) -> Callable[..., list[float | None]]:
    """The task's reward function for TRL; it appends each call's token count and rewards."""

    def reward_fn(
        prompts: list[str], completions: list[str], completion_ids: list[list[int]], **kw: Any
    ) -> list[float | None]:
        counted.append(sum(len(ids) for ids in completion_ids))
        scores = [reward(c, w) for c, w in zip(completions, kw["word"], strict=True)]
        rewards.extend(scores)
        out: list[float | None] = list(scores)
        return out

    reward_fn.__name__ = "say_the_word"
    return reward_fn


def _step_clock(
    clock: list[tuple[float, float, int, int]], counted: list[int], rewards: list[float]
) -> Any:
    """A TRL callback appending ``(wall, CPU, tokens so far, reward count)`` per step."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            now = (time.perf_counter(), time.process_time())
            clock.append((*now, sum(counted), len(rewards)))

    return StepClock()


def _time_generation(trainer: Any) -> list[float]:
    """Wrap the trainer's generation to time it; the list fills with each call's seconds."""
    gen_time: list[float] = []  # per step: seconds inside TRL's generation
    generate = trainer._generate_single_turn

    def timed_generate(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return generate(*a, **kw)
        finally:
            gen_time.append(time.perf_counter() - t0)

    setattr(trainer, "_generate_single_turn", timed_generate)  # noqa: B010
    return gen_time


# ------------------------------------------------------------------------------------- run


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence TRL/transformers warnings, progress bars and prints while runs go on."""
    import datasets
    from transformers.utils import logging as hf_logging

    loggers = [logging.getLogger(n) for n in ("transformers", "trl", "accelerate", "datasets")]
    levels = [lg.level for lg in loggers]
    bars = hf_logging.is_progress_bar_enabled(), datasets.is_progress_bar_enabled()
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bar()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        if bars[0]:
            hf_logging.enable_progress_bar()
        if bars[1]:
            datasets.enable_progress_bar()


@contextlib.contextmanager
def _restore_threads(threads: int) -> Iterator[None]:
    import torch

    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _require_trl() -> None:
    try:
        import datasets  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import trl  # noqa: F401
    except ImportError as e:
        raise BadInput(INSTALL_HINT) from e


def measure(settings: Settings) -> list[RunResult]:
    """All runs, alternating sides (ours first in even alternations, TRL first in odd)."""
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    results: list[RunResult] = []
    threads = torch.get_num_threads()
    with (
        tempfile.TemporaryDirectory(prefix="agentgym-bench-trainer-") as tmp,
        _quiet(),
        _restore_threads(threads),
    ):
        work = Path(tmp)
        model_dir = build_model_dir(work / "model", settings)
        for run in range(settings.alternations):
            order = ("ours", "trl") if run % 2 == 0 else ("trl", "ours")
            for side in order:
                with PeakMemory() as memory:
                    if side == "ours":
                        result = run_ours(model_dir, settings, run)
                    else:
                        result = run_trl(model_dir, settings, run, work)
                result.peak_mib = memory.mib
                results.append(result)
    return results


def run(console: Console, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Measure both trainers (``quick``: a smoke run) and print the table."""
    _require_trl()
    import torch
    import trl

    settings = settings or (QUICK if quick else Settings())
    if settings.warmup < 1 or settings.steps < 1 or settings.alternations < 1:
        raise BadInput("bench trainer needs warmup, steps and alternations of at least 1")
    if settings.threads <= 0:
        settings = replace(settings, threads=torch.get_num_threads())
    results = measure(settings)
    sides = ("ours", "trl")

    def median(side: str, value: Callable[[RunResult], float]) -> float:
        return float(statistics.median(value(r) for r in results if r.side == side))

    def share_of(side: str) -> dict[str, float]:
        return phase_shares([r for r in results if r.side == side])

    medians = {side: median(side, lambda r: r.tokens_per_s) for side in sides}
    per_cpu = {side: median(side, lambda r: r.tokens / max(r.cpu_seconds, 1e-9)) for side in sides}
    memory = {side: median(side, lambda r: r.peak_mib) for side in sides}
    ratio = medians["ours"] / medians["trl"]  # every completion has a token: both > 0
    shares = {side: share_of(side) for side in sides}
    doc: dict[str, Any] = {
        "part": "trainer",
        "rows": [row(r) for r in results],
        "ratios": {
            "ours/trl tokens_per_s": round(ratio, 2),
            "ours/trl tokens_per_cpu_s": round(per_cpu["ours"] / per_cpu["trl"], 2),
            "ours/trl peak_mib": round(memory["ours"] / max(memory["trl"], 1e-9), 2),
        },
        "medians_tokens_per_s": {k: round(v, 1) for k, v in medians.items()},
        "medians_tokens_per_cpu_s": {k: round(v, 1) for k, v in per_cpu.items()},
        "medians_peak_mib": {k: round(v, 1) for k, v in memory.items()},
        "phase_shares": shares,
        "goal": {"ours/trl tokens_per_s": GOAL, "met": ratio >= GOAL},
        "settings": asdict(settings),
        "fairness": FAIRNESS,
        "versions": {"torch": torch.__version__, "trl": trl.__version__},
        "counting": "completion tokens up to and including EOS; ours: len(GenOut.ids); TRL: "
        "lengths of the completion_ids its reward function receives",
        "peak_rss_mib": round(max_rss_mib(), 1),
    }
    print_tables(console, doc)
    return doc
