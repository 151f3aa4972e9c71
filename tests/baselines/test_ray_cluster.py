"""Rollout envs on a simulated two-node Ray cluster: one env actor per node, the local batch."""

import pytest

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from agentgym.baselines.ray_pool import RayEnvPool  # noqa: E402
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect  # noqa: E402

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture
def two_nodes(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token file under $HOME
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, logging_level=40)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_env_actors_on_two_nodes_give_the_local_batch(policy, two_nodes):
    cfg = RolloutConfig(max_new_tokens=40, snapshots=True)
    local = EnvPool(SMALL, 4, split="train")
    tasks = [(local.envs[0].unwrapped.task_ids("train")[i], 30 + i) for i in range(2)]
    want = collect(policy, local, tasks, 2, cfg, gumbel_keys=[1, 2, 3, 4])
    pool = RayEnvPool(SMALL, 4, actors=2, split="train")
    try:
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        # two nodes of one CPU and two actors of one CPU each: one actor on each node
        assert len(nodes) == 2 and ray.available_resources().get("CPU", 0) == 0
        got = collect(policy, pool, tasks, 2, cfg, gumbel_keys=[1, 2, 3, 4])
        form = lambda ts: [[(t.extras["action"], t.reward) for t in tr.turns] for tr in ts]  # noqa: E731
        assert form(got) == form(want)
    finally:
        pool.close()
