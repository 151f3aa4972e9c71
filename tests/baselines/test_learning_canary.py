"""The learning canary: RL must still learn a task every working loop learns in a few steps.

Credit-Haystack (use two of the ten items that give energy, never the poisons) is learnt by a
random nano policy in a handful of grpo or gigpo steps: its greedy success goes from about 0
to about 1 on every training seed tried. A change that breaks learning (an advantage that no
longer reaches the loss, a flipped sign, a dead optimiser) leaves it near its start, and the
sabotaged runs below show that the canary notices both.
"""

from pathlib import Path

import pytest

from agentgym.baselines import train as train_module
from agentgym.baselines.config import TrainConfig
from agentgym.baselines.train import train
from agentgym.harness.evaluate import evaluate

ENV = "agentgym/Credit-Haystack-v0"
STEPS = 8
MARGIN = 0.5
"""How far greedy success must rise over the canary's steps (it rises by about 0.9)."""
CANARY = TrainConfig.from_options(
    env=ENV, preset="nano", sft_steps=0, lr=3e-3, tasks_per_step=4, group_size=8,
    eval_every=0, tensorboard=False,
)  # fmt: skip


def _success(ckpt: Path) -> float:
    doc = evaluate(str(ckpt), [ENV], seeds=30, root_seed=0, split="val")
    return float(doc["aggregates"][ENV]["mean"])


def _rise(tmp_path: Path, credit: str) -> tuple[float, float]:
    """Greedy val success of the initial policy and after the canary's RL steps."""
    cfg = CANARY.with_options(credit=credit)
    start = _success(train(cfg.with_options(steps=0), tmp_path / "start"))
    end = _success(train(cfg.with_options(steps=STEPS), tmp_path / "end"))
    return start, end


@pytest.mark.parametrize("credit", ["grpo", "gigpo"])
def test_rl_learns_the_canary_task_within_a_few_steps(tmp_path, credit):
    start, end = _rise(tmp_path, credit)
    assert end >= start + MARGIN, f"{credit}: greedy success {start:.2f} -> {end:.2f}"


@pytest.mark.parametrize("scale", [0.0, -1.0], ids=["zeroed", "flipped"])
def test_the_canary_fails_when_the_advantage_is_zeroed_or_flipped(tmp_path, monkeypatch, scale):
    real_update = train_module.update

    def sabotaged(batch, *args, **kwargs):
        batch.advantages = {k: a * scale for k, a in batch.advantages.items()}
        return real_update(batch, *args, **kwargs)

    monkeypatch.setattr(train_module, "update", sabotaged)
    start, end = _rise(tmp_path, "grpo")
    assert end < start + MARGIN, f"a sabotaged loop still learnt: {start:.2f} -> {end:.2f}"
