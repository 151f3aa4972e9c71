"""BAR, the balanced adaptive sampler: scripted outcomes per task, posteriors by hand."""

import numpy as np
import pytest

from agentgym.baselines.credit import Batch, StepContext, Trajectory, compose, get
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
BAR = get("bar")


class InOrder:
    """An rng stand-in: candidates keep their listed order, seeds count up from 100."""

    def __init__(self):
        self.next_seed = 100

    def permutation(self, n):
        return np.arange(n)

    def integers(self, high):
        self.next_seed += 1
        return self.next_seed - 1


class Scripted(BAR):
    """BAR whose rollouts return the next scripted outcomes of their task."""

    def __init__(self, tasks, script, config=None):
        super().__init__(config)
        self.tasks = list(tasks)
        self.script = {task: list(outcomes) for task, outcomes in script.items()}
        self.calls = []

    def _task_ids(self, ctx):
        return list(self.tasks)

    def _collect(self, ctx, tasks, n):
        self.calls.append(([task for task, _ in tasks], n))
        return [
            Trajectory(
                task_id=task,
                group_id=f"{task}@{seed}",
                seed=seed,
                node_id=f"{task}@{seed}:{j}",
                outcome=self.script[task].pop(0),
            )
            for task, seed in tasks
            for j in range(n)
        ]


def run(bar, B=2, G=2):
    batch = Batch()
    ctx = StepContext(tasks_per_step=B, group_size=G, rng=InOrder())
    bar.sample(batch, ctx)
    return batch


def groups(batch):
    return {
        gid: [batch.trajectories[i].outcome for i in idx] for gid, idx in batch.groups().items()
    }


def metrics(batch):
    return {k.removeprefix("bar/"): v for k, v in batch.metrics.items()}


def test_bar_is_a_sampler_that_grpo_follows():
    plan = compose("bar")
    assert plan.names == ["grpo", "bar"]
    assert plan.owner("sample").name == "bar"


def test_bar_refills_an_all_equal_group_that_can_still_mix():
    bar = Scripted(["a", "b"], {"a": [1, 0], "b": [0, 0, 1, 0]})
    batch = run(bar)
    # round 0: a mixed; b failed twice, Beta(1, 3): P(a success in 2 more) = 1 − 3/4 · 4/5 = 0.4
    assert bar.calls == [(["a", "b"], 2), (["b"], 2)]
    assert groups(batch) == {"a@100": [1, 0], "b@101": [0, 0, 1, 0]}
    assert [t.node_id for t in batch.trajectories[2:]] == [f"b@101:{j}" for j in range(4)]
    assert metrics(batch) == {
        "rounds": 1.0,
        "mixed_groups": 2.0,
        "filled_groups": 0.0,
        "extra_rollouts": 2.0,
        "unused_rollouts": 0.0,
        "skipped_tasks": 0.0,
    }
    # Beta(1, 1) + one success and one failure; + one success and three failures
    assert bar.posterior == {"a": (2.0, 2.0), "b": (2.0, 4.0)}


def test_mix_chance_is_the_posterior_predictive_by_hand():
    bar = BAR()
    bar.posterior["b"] = (1.0, 3.0)
    assert bar.mix_chance("b", False, 2) == pytest.approx(1 - 3 / 4 * 4 / 5)
    assert bar.mix_chance("b", True, 2) == pytest.approx(1 - 1 / 4 * 2 / 5)
    assert bar.mean("b") == 0.25 and bar.mean("never-seen") == 0.5


def test_bar_skips_a_near_solved_task():
    bar = Scripted(["easy", "a", "b"], {"a": [1, 0], "b": [0, 1]})
    bar.posterior["easy"] = (30.0, 1.0)  # mean 30/31 > p_max = 0.95
    batch = run(bar)
    assert bar.calls == [(["a", "b"], 2)]
    assert set(groups(batch)) == {"a@100", "b@101"}
    assert metrics(batch)["skipped_tasks"] == 1.0
    assert bar.posterior["easy"] == (30.0, 1.0)


def test_bar_takes_a_skipped_task_when_too_few_remain():
    bar = Scripted(["easy", "a"], {"a": [1, 0], "easy": [1, 1]})
    bar.posterior["easy"] = (30.0, 1.0)
    batch = run(bar)
    # eligible tasks first; easy's all-success group then has 1 − 32/33 · 33/34 < 0.25 chance
    # to mix with a refill and there is no fresh task: it fills the batch as it is
    assert bar.calls == [(["a", "easy"], 2)]
    assert groups(batch) == {"a@100": [1, 0], "easy@101": [1, 1]}
    m = metrics(batch)
    assert (m["skipped_tasks"], m["rounds"], m["filled_groups"]) == (0.0, 0.0, 1.0)
    assert bar.posterior["easy"] == (32.0, 1.0)


def test_bar_replaces_a_group_that_cannot_mix_with_a_fresh_task():
    bar = Scripted(["a", "b", "c"], {"a": [1, 0], "b": [0, 0], "c": [0, 1]})
    bar.posterior["b"] = (1.0, 15.0)  # mean 1/16, not skipped
    batch = run(bar)
    # after b's two failures Beta(1, 17): 1 − 17/18 · 18/19 = 2/19 < 0.25, so c replaces b
    assert bar.calls == [(["a", "b"], 2), (["c"], 2)]
    assert groups(batch) == {"a@100": [1, 0], "c@102": [0, 1]}
    m = metrics(batch)
    assert (m["rounds"], m["extra_rollouts"], m["unused_rollouts"]) == (1.0, 2.0, 2.0)
    assert bar.posterior["b"] == (1.0, 17.0)


def test_bar_stops_at_max_rounds_and_fills_with_the_best_group():
    config = {"bar": {"min_mix": 0.0, "max_rounds": 3, "max_extra": 100}}
    bar = Scripted(["a", "b"], {"a": [1, 0], "b": [0] * 8}, config)
    batch = run(bar)
    assert bar.calls == [(["a", "b"], 2)] + [(["b"], 2)] * 3
    assert groups(batch) == {"a@100": [1, 0], "b@101": [0] * 8}
    m = metrics(batch)
    assert (m["rounds"], m["extra_rollouts"]) == (3.0, 6.0)
    assert (m["mixed_groups"], m["filled_groups"]) == (1.0, 1.0)
    assert bar.posterior["b"] == (1.0, 9.0)


def test_bar_caps_the_extra_rollouts():
    config = {"bar": {"min_mix": 0.0, "max_rounds": 3, "max_extra": 3}}
    bar = Scripted(["a", "b"], {"a": [1, 0], "b": [0] * 8}, config)
    batch = run(bar)
    assert bar.calls == [(["a", "b"], 2), (["b"], 2)]  # a second refill would make 4 > 3
    assert metrics(batch)["extra_rollouts"] == 2.0


def test_bar_forgets_toward_the_prior():
    bar = Scripted(["a", "b"], {"a": [1, 0], "b": [0, 1]}, {"bar": {"decay": 0.5}})
    bar.posterior["old"] = (5.0, 1.0)
    run(bar)
    assert bar.posterior["old"] == (3.0, 1.0)  # 1 + 0.5 · (5 − 1), 1 + 0.5 · 0


@pytest.mark.parametrize(
    "bad", [{"p_min": 0.6, "p_max": 0.4}, {"refill": 0}, {"decay": 0.0}, {"alpha0": 0.0}]
)
def test_bar_refuses_bad_settings(bad):
    with pytest.raises(BadInput, match="bar"):
        BAR({"bar": bad})


def test_bar_samples_balanced_groups_on_search_menu_small(policy):
    from agentgym.baselines.rollout import EnvPool, RolloutConfig

    ctx = StepContext(
        tasks_per_step=2,
        group_size=2,
        policy=policy,
        envs=EnvPool(SMALL, 2, max_turns=4),
        rollout=RolloutConfig(max_new_tokens=48),
        rng=np.random.default_rng(0),
    )
    plan = compose("bar")
    bar = plan.owner("sample")
    batch = Batch()
    for hook in ("sample", "advantages"):
        plan.run(hook, batch, ctx)
    m = metrics(batch)
    assert len(batch.groups()) == 2
    assert m["mixed_groups"] + m["filled_groups"] == 2.0
    for idx in batch.groups().values():
        trajs = [batch.trajectories[i] for i in idx]
        assert len({(t.task_id, t.seed) for t in trajs}) == 1
        assert len(trajs) >= 2 and len(trajs) % 2 == 0
        assert [t.node_id for t in trajs] == [f"{trajs[0].group_id}:{j}" for j in range(len(trajs))]
    assert m["rounds"] <= bar.cfg.max_rounds and m["extra_rollouts"] <= 4  # B·G
    # every rollout collected, kept or not, updated its task's posterior once
    collected = 4 + m["extra_rollouts"]
    assert len(batch.trajectories) + m["unused_rollouts"] == collected
    assert sum(a + b - 2.0 for a, b in bar.posterior.values()) == collected
    assert set(batch.advantages) == set(batch.keys())
