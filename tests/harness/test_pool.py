"""Warm pools: the same workers serve later calls, records never depend on the pool, closing
leaves no process behind, and a worker that dies costs one errored episode, not the run."""

import glob
import multiprocessing
import os
import sys
from multiprocessing import resource_tracker

import pytest

from agentgym.core.errors import BadInput
from agentgym.harness.evaluate import RunPlan, evaluate, plan_units
from agentgym.harness.pool import LocalPool, ProcessPool, open_pool
from agentgym.harness.seeds import episode_seeds
from agentgym.harness.worker import iter_unit

SMALL = "agentgym/Search-Menu-Small-v0"
SEEDS, EPISODES = 6, 2
FATAL = (2, 0)  # (run, episode) whose seed kills the worker playing it

AGENTS = """
import os
from agentgym.agents.builtin import RandomAgent

class Pid(RandomAgent):
    '''The random agent, reporting the process that played as its token count.'''
    def __init__(self):
        super().__init__()
        self.tokens_used = os.getpid()

class DiesOn(RandomAgent):
    '''The random agent, except that its process dies at once on seed FATAL_SEED.'''
    def reset(self, env_id, seed):
        if seed == FATAL_SEED:
            os._exit(3)
        super().reset(env_id, seed)
"""


def strip(doc):
    return [{k: v for k, v in e.items() if k != "seconds"} for e in doc["episodes"]]


def small(**kwargs):
    return evaluate(
        kwargs.pop("agent", "random"), [SMALL], seeds=SEEDS, episodes_per_seed=EPISODES, **kwargs
    )


def children():
    """The ids of this process's living child processes (from /proc where there is one).

    multiprocessing's resource tracker, one helper for the whole interpreter, is started
    first, so a pool's first spawn does not add it to what the caller sees.
    """
    resource_tracker.ensure_running()
    if not os.path.isdir("/proc/self"):
        return {p.pid for p in multiprocessing.active_children()}
    found = set()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the command's name
        except OSError:
            continue  # ended while we looked
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(stat.split("/")[2]))
    return found


@pytest.fixture(scope="module")
def cold():
    """The records of a call that starts nothing: in this process, fresh envs."""
    return small()


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    """The test agents' module name, importable here and in workers spawned from here."""
    folder = tmp_path_factory.mktemp("agents")
    fatal_seed = episode_seeds(0, SEEDS, EPISODES)[FATAL[0]][FATAL[1]]
    (folder / "pool_agents.py").write_text(AGENTS.replace("FATAL_SEED", str(fatal_seed)))
    sys.path.insert(0, str(folder))
    yield "pool_agents"
    sys.path.remove(str(folder))


def test_a_warm_pool_serves_a_second_call_with_the_same_worker_processes(agents):
    with ProcessPool(2) as pool:
        pids = pool.pids
        first = small(agent=f"{agents}:Pid", pool=pool)
        second = small(agent=f"{agents}:Pid", pool=pool, root_seed=1)
        assert pool.pids == pids
    assert len(set(pids)) == 2 and os.getpid() not in pids
    players = {e["tokens"] for e in first["episodes"] + second["episodes"]}
    assert players <= set(pids)  # every episode of both calls was played by those workers


@pytest.mark.parametrize(("backend", "workers"), [("local", 1), ("process", 1), ("process", 2)])
def test_records_do_not_depend_on_the_pool_its_warmth_or_its_size(cold, backend, workers):
    with open_pool(backend, workers) as pool:
        small(pool=pool, root_seed=5)  # warm: other episodes on the same envs first
        warm = small(pool=pool)
    assert strip(warm) == strip(cold)
    assert warm["aggregates"] == cold["aggregates"]


@pytest.mark.parametrize(
    "env_id",
    ["agentgym/Credit-KeyDoor-v0", "agentgym/Search-Free-Small-v1", "agentgym/Tools-Travel-v1"],
)
@pytest.mark.parametrize("agent", ["random", "oracle"])
def test_a_kept_env_plays_what_a_fresh_one_plays(env_id, agent):
    units = plan_units(RunPlan(agent, (env_id,), 4, 2), done=set())
    fresh = [record for unit in units for record, _ in iter_unit(unit)]
    with LocalPool() as pool:
        list(pool.run(units[::-1]))  # every env has played other seeds before
        kept = sorted((r for r, _ in pool.run(units)), key=lambda r: (r["run"], r["episode"]))
    assert strip({"episodes": kept}) == strip({"episodes": fresh})


def test_closing_leaves_no_worker_process(cold):
    before = children()
    pool = ProcessPool(2)
    pids = set(pool.pids)
    assert pids <= children() - before
    assert strip(small(pool=pool)) == strip(cold)
    pool.close()
    pool.close()  # a second close is harmless
    assert children() - before == set()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(RuntimeError, match="closed"):
        next(pool.run(plan_units(RunPlan("random", (SMALL,), 1), done=set())))


def test_a_run_left_unfinished_leaves_the_pool_usable_and_nothing_behind(cold):
    before = children()
    units = plan_units(RunPlan("random", (SMALL,), 20, 4), done=set())
    with ProcessPool(2) as pool:
        run = pool.run(units)
        next(run)
        run.close()  # the caller stops reading: the busy workers are replaced
        assert strip(small(pool=pool)) == strip(cold)
    assert children() - before == set()


def test_a_dead_worker_is_replaced_and_only_its_episode_is_errored(cold, agents):
    with ProcessPool(2) as pool:
        before = set(pool.pids)
        doc = small(agent=f"{agents}:DiesOn", pool=pool)
        after = set(pool.pids)
        again = small(pool=pool)  # the pool goes on serving
    assert len(after) == 2 and len(before & after) == 1  # one worker replaced
    errored = [e for e in doc["episodes"] if e["error"]]
    assert [(e["run"], e["episode"]) for e in errored] == [FATAL]
    assert errored[0]["error"].startswith("WorkerDied") and errored[0]["steps"] == 0
    played = [e for e in strip(doc) if (e["run"], e["episode"]) != FATAL]
    assert played == [e for e in strip(cold) if (e["run"], e["episode"]) != FATAL]
    assert strip(again) == strip(cold)


def test_a_unit_that_cannot_start_raises_in_the_caller_as_in_process():
    units = plan_units(RunPlan("no_such_module:Agent", (SMALL,), 2), done=set())
    with ProcessPool(1) as pool:
        with pytest.raises(Exception, match="no_such_module") as raised:
            list(pool.run(units))
        assert list(pool.run(plan_units(RunPlan("random", (SMALL,), 2), done=set())))
    with pytest.raises(raised.type, match="no_such_module"):
        list(LocalPool().run(units))


def test_a_pool_refuses_bad_arguments_and_runs_after_close():
    with pytest.raises(BadInput, match="at least 1"):
        ProcessPool(0)
    with pytest.raises(BadInput, match="local or process"):
        open_pool("ray")
    closed = LocalPool()
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        next(closed.run(plan_units(RunPlan("random", (SMALL,), 1), done=set())))
