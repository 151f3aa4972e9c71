"""Rollout envs in Ray actors: the same batch as the local pool, also when an actor dies."""

import pytest
import torch
from clirun import cli, rl_rows

pytest.importorskip("ray")

from agentgym.baselines.ray_pool import RayEnvPool
from agentgym.baselines.rollout import EnvPool, RolloutConfig, branch, collect
from agentgym.harness.runner import ray_session

SMALL = "agentgym/Search-Menu-Small-v0"
CFG = RolloutConfig(max_new_tokens=40, snapshots=True)


def _batch(policy, pool, keys=True):
    tasks = [(pool.envs[0].unwrapped.task_ids("train")[i], 50 + i) for i in range(3)]
    torch.manual_seed(3)
    gumbel = list(range(100, 106)) if keys else None
    trajs = collect(policy, pool, tasks, 2, CFG, gumbel_keys=gumbel)
    # a tree step: continuations restored from a snapshot in whichever env is free
    trajs += branch(policy, pool, [(trajs[0], 1), (trajs[3], 0)], 2, CFG)
    return trajs


def _form(trajs):
    return [
        (
            t.node_id,
            t.outcome,
            t.terminated,
            t.truncated,
            [
                (
                    turn.extras["action"],
                    turn.reward,
                    turn.state_key,
                    turn.response_ids.tolist(),
                    turn.extras["snapshot"],
                )
                for turn in t.turns
            ],
        )
        for t in trajs
    ]


@pytest.fixture(scope="module", autouse=True)
def one_ray():
    """One local Ray for the module (a pool uses a running Ray as it is)."""
    with ray_session(num_cpus=2):
        yield


@pytest.fixture(scope="module")
def local_batch(policy):
    return _form(_batch(policy, EnvPool(SMALL, 4, split="train")))


class _Killing(RayEnvPool):
    """Kills actor 0 (Ray restarts it) before the given batched steps."""

    kill_at = (2, 5)

    def step_many(self, envs, actions, snapshots):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls in self.kill_at:
            self._ray.kill(self.actors[0], no_restart=False)
        return super().step_many(envs, actions, snapshots)


def test_ray_pool_gives_the_local_batch_with_two_actors(policy, local_batch):
    pool = RayEnvPool(SMALL, 4, actors=2, split="train")
    try:
        assert _form(_batch(policy, pool)) == local_batch
        assert pool.step_metrics() == {"env_restarts": 0.0, "replayed_steps": 0.0}
    finally:
        pool.close()


def test_unkeyed_sampling_also_matches_because_generation_stays_on_the_driver(policy):
    local = _form(_batch(policy, EnvPool(SMALL, 2, split="train"), keys=False))
    pool = RayEnvPool(SMALL, 2, actors=2, split="train")
    try:
        assert _form(_batch(policy, pool, keys=False)) == local
    finally:
        pool.close()


def test_a_dead_actor_is_restarted_and_its_episodes_replayed_from_their_seeds(policy, local_batch):
    pool = _Killing(SMALL, 4, actors=2, split="train")
    try:
        assert _form(_batch(policy, pool)) == local_batch
        metrics = pool.step_metrics()
        assert metrics["env_restarts"] >= 2 and metrics["replayed_steps"] > 0
        assert pool.step_metrics() == {"env_restarts": 0.0, "replayed_steps": 0.0}
    finally:
        pool.close()


def test_an_env_error_is_raised_on_the_driver_and_the_pool_goes_on(policy):
    pool = RayEnvPool(SMALL, 2, actors=1, split="train")
    try:
        env = pool.envs[0]
        with pytest.raises(Exception, match="reset"):
            env.step("search: anything")  # before reset: the env's own ResetNeeded
        obs, info = env.reset(seed=1)
        assert isinstance(obs, str) and info["task_id"]
        assert env.split == "train" and env.supports_snapshot is True
    finally:
        pool.close()


RUN = (
    *("--env", SMALL, "--preset", "nano", "--sft-steps", "4", "--sft-episodes", "2"),
    *("--steps", "2", "--tasks-per-step", "2", "--group-size", "2", "--eval-every", "0"),
    "--no-tensorboard",
)


def _rl(ckpt):
    rows = rl_rows(ckpt)
    return [(r["success"], r["return"], r["generated_tokens"], r["loss"]) for r in rows]


def test_training_on_ray_actors_gives_the_local_run(tmp_path):
    local = cli("train", "--out", str(tmp_path / "local"), *RUN)
    assert local.returncode == 0, local.stderr
    on_ray = cli(
        "train", "--out", str(tmp_path / "ray"), *RUN, "--backend", "ray", "--env-actors", "2"
    )
    assert on_ray.returncode == 0, on_ray.stderr
    assert _rl(tmp_path / "ray") == _rl(tmp_path / "local")
    weights = [(tmp_path / d / "model.safetensors").read_bytes() for d in ("local", "ray")]
    assert weights[0] == weights[1]
    ray_rows = rl_rows(tmp_path / "ray")
    assert [float(r["env_restarts"]) for r in ray_rows] == [0.0, 0.0]
    refused = cli("train", "--out", str(tmp_path / "x"), *RUN, "--backend", "spark")
    assert refused.returncode == 2 and "--backend must be local or ray" in refused.stderr
