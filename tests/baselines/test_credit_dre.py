"""DRE, dynamic rollout editing, on the real Search-Menu-Small env; and the replay engine."""

import copy

import numpy as np
import pytest
import torch

from agentgym.baselines.credit import REGISTRY, Batch, CreditVariant, StepContext, compose
from agentgym.baselines.prompt import PromptFormat
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect, replay
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
TASK, SEED = "q00002", 5  # a two-hop question whose answer shows up only in its last read
LAYOUTS = [("per-step", 0), ("per-step", 2), ("concat", 0)]


@pytest.fixture(scope="module")
def pool():
    return EnvPool(SMALL, 1)


@pytest.fixture(scope="module")
def paths(pool):
    """The oracle's actions, the same with a detour before the answer, and a wrong answer."""
    env = pool.envs[0]
    _, info = env.reset(seed=SEED, options={"task_id": TASK})
    oracle = []
    while True:
        action = env.unwrapped.oracle_action()
        if action.startswith("answer:"):
            break
        oracle.append(action)
        _, _, _, _, info = env.step(action)
    menu = info["admissible_actions"]
    detour = next(a for a in menu if a.split(":")[0] in ("read", "expand"))
    wrong = next(a for a in menu if a.startswith("answer:") and a != action)
    return {
        "oracle": [*oracle, action],
        "detour": [*oracle, detour, action],
        "wrong": [*oracle, wrong],
    }


def actions(traj):
    return [t.extras["action"] for t in traj.turns]


def play(policy, pool, path, cfg, node):
    return replay(policy, pool, TASK, SEED, path, cfg, group_id="g", node_id=node)


def edit(policy, pool, batch, config=None, cfg=None):
    ctx = StepContext(policy=policy, envs=pool, rollout=cfg or RolloutConfig())
    compose("dre", config).run("transform", batch, ctx)
    return batch


# ---------------------------------------------------------------- replay


@pytest.mark.parametrize(("layout", "history"), LAYOUTS)
def test_replay_reproduces_collected_turns_byte_for_byte(policy, layout, history):
    pool = EnvPool(SMALL, 1, max_turns=4)
    cfg = RolloutConfig(max_new_tokens=48, prompt=PromptFormat(layout=layout, history=history))
    task = pool.envs[0].unwrapped.task_ids("train")[3]
    (played,) = collect(policy, pool, [(task, 17)], 1, cfg)
    again = replay(policy, pool, task, 17, actions(played), cfg)
    assert again.group_id == played.group_id and again.prompt == played.prompt
    assert (again.outcome, again.terminated, again.truncated) == (
        played.outcome,
        played.terminated,
        played.truncated,
    )
    assert len(again.turns) == len(played.turns) >= 2
    for old, new in zip(played.turns, again.turns, strict=True):
        assert new.prompt_ids.tolist() == old.prompt_ids.tolist()
        assert new.response_ids.tolist() == old.response_ids.tolist()
        assert new.allowed_tokens == old.allowed_tokens is not None
        assert (new.state_key, new.reward, new.terminated) == (
            old.state_key,
            old.reward,
            old.terminated,
        )
        assert new.info["state_key"] == old.info["state_key"]
        # behaviour log-probs at temperature 1 are the policy's scoring under the mask
        torch.testing.assert_close(new.logp_old, old.logp_old, atol=1e-4, rtol=1e-4)


def test_replay_refuses_actions_after_the_end(policy, pool, paths):
    with pytest.raises(ValueError, match="ended at turn 5"):
        replay(policy, pool, TASK, SEED, [*paths["oracle"], "search: again"], RolloutConfig())
    partial = replay(policy, pool, TASK, SEED, paths["oracle"][:2], RolloutConfig(), score=False)
    assert not (partial.terminated or partial.truncated) and partial.outcome == 0.0
    assert all(t.logp_old is None for t in partial.turns)


# ---------------------------------------------------------------- DRE


@pytest.mark.parametrize(("layout", "history"), LAYOUTS)
def test_dre_edits_out_exactly_the_detour(policy, pool, paths, layout, history):
    cfg = RolloutConfig(prompt=PromptFormat(layout=layout, history=history))
    long = play(policy, pool, paths["detour"], cfg, "detour")
    minimal = play(policy, pool, paths["oracle"], cfg, "oracle")
    failed = play(policy, pool, paths["wrong"], cfg, "wrong")
    assert (long.outcome, minimal.outcome, failed.outcome) == (1.0, 1.0, 0.0)
    assert len(long.turns) == 7 and actions(long) == paths["detour"]
    batch = Batch(trajectories=[long, minimal, failed])
    edit(
        policy,
        pool,
        batch,
        {"dre": {"length_bonus": 0.5}},
        RolloutConfig(prompt=PromptFormat(history=1)),
    )

    assert batch.trajectories[0] is long and batch.trajectories[2:] == [minimal, failed]
    edited = batch.trajectories[1]
    assert actions(edited) == paths["oracle"]  # the detour, turn 5, is gone
    assert edited.group_id == "g" and edited.edited and edited.node_id == "detour/dre"
    assert edited.extras["dre"] == {"source": "detour", "removed": [5], "env_outcome": 1.0}
    assert edited.prompt == PromptFormat(layout=layout, history=history)
    # no bonus: the group already holds a natural success as short as the edit (6 turns)
    assert edited.outcome == 1.0
    assert edited.terminated and not edited.truncated
    # the edited turns are the prompts the policy sees on the short path, in the rollout's
    # own layout (not the run's), with the decoding masks of a constrained rollout
    for new, ref in zip(edited.turns, minimal.turns, strict=True):
        assert torch.equal(new.prompt_ids, ref.prompt_ids)
        assert torch.equal(new.response_ids, ref.response_ids)
        assert new.allowed_tokens == ref.allowed_tokens is not None
        assert new.state_key == ref.state_key and new.info["won"] == ref.info["won"]
    # logp_old: the policy's own log-probs of the edited turns
    turns = edited.turns
    logps = policy.logprobs(
        [t.prompt_ids for t in turns],
        [t.response_ids for t in turns],
        allowed_tokens=[t.allowed_tokens for t in turns],
    )
    for turn, logp in zip(turns, logps, strict=True):
        torch.testing.assert_close(turn.logp_old, logp)
    # the edit wins on replay
    again = replay(policy, pool, TASK, SEED, actions(edited), cfg, score=False)
    assert again.terminated and again.outcome == 1.0
    # failed and already minimal rollouts are untouched
    assert len(minimal.turns) == 6 and minimal.outcome == 1.0 and not minimal.edited
    assert len(failed.turns) == 6 and failed.outcome == 0.0 and not failed.edited
    assert batch.metrics == {"dre/edited": 1.0, "dre/turns_removed": 1.0, "dre/rewarded": 0.0}


def test_dre_replace_mode_and_grpo_prefers_the_short_version(policy, pool, paths):
    cfg = RolloutConfig()
    long = play(policy, pool, paths["detour"], cfg, "detour")
    failed = play(policy, pool, paths["wrong"], cfg, "wrong")
    batch = edit(policy, pool, Batch(trajectories=[long, failed]), {"dre": {"mode": "replace"}})
    assert [t.node_id for t in batch.trajectories] == ["detour/dre", "wrong"]

    batch = edit(policy, pool, Batch(trajectories=[long, failed]))
    assert [t.node_id for t in batch.trajectories] == ["detour", "detour/dre", "wrong"]
    compose("dre").run("advantages", batch, StepContext())
    A = [batch.advantages[(i, 0)][0].item() for i in range(3)]
    assert A[1] > A[0] > 0 > A[2]  # R = 1 + 0.1/7, 1, 0


def test_an_edit_never_outscores_a_success_as_short_and_an_all_win_group_stays_neutral(
    policy, pool, paths
):
    """The bonus used to be relative to the rollout's own length: the 7-turn rollout's 6-turn
    edit out-scored the natural 6-turn success, and a group where both had won (no signal)
    got full-strength advantages from the bonus alone."""
    cfg = RolloutConfig()
    long = play(policy, pool, paths["detour"], cfg, "detour")
    minimal = play(policy, pool, paths["oracle"], cfg, "oracle")
    batch = edit(policy, pool, Batch(trajectories=[long, minimal]), {"dre": {"length_bonus": 1}})
    assert [t.node_id for t in batch.trajectories] == ["detour", "detour/dre", "oracle"]
    assert [t.outcome for t in batch.trajectories] == [1.0, 1.0, 1.0]
    compose("dre").run("advantages", batch, StepContext())
    assert all(float(a.abs().max()) == 0.0 for a in batch.advantages.values())


def test_dre_leaves_unreplayable_rollouts_alone(policy, pool, paths):
    long = play(policy, pool, paths["detour"], RolloutConfig(), "detour")
    long.seed = None
    batch = edit(policy, pool, Batch(trajectories=[long]))
    assert batch.trajectories == [long] and batch.metrics["dre/edited"] == 0.0
    with pytest.raises(BadInput, match="env pool"):
        compose("dre").run("transform", Batch(), StepContext())


def test_dre_never_cuts_the_reading_an_answer_rests_on(policy, pool, oracle_rollout):
    # On Search-Free an answer is checked by its string alone: answering at once "wins" on
    # replay, but the policy could only know the answer from the searches it would cut.
    free = "agentgym/Search-Free-Small-v0"
    traj = oracle_rollout(policy.tokenizer, free, "q00002", 5, "g")
    assert traj.outcome == 1.0 and len(traj.turns) >= 3
    assert traj.turns[-1].info["progress"] == 1.0
    acts = actions(traj)
    ctx = StepContext(policy=policy, envs=EnvPool(free, 1), rollout=RolloutConfig())
    guarded = REGISTRY["dre"]()
    assert guarded.earliest_cut(ctx, traj, acts) is None
    naive = REGISTRY["dre"]({"dre": {"keep_progress": False}})
    assert naive.earliest_cut(ctx, traj, acts) == 0


@pytest.mark.parametrize("bad", [{"mode": "swap"}, {"length_bonus": -0.1}])
def test_dre_refuses_bad_settings(bad):
    with pytest.raises(BadInput, match="dre"):
        compose("dre", {"dre": bad})


def test_the_trainer_steps_on_an_edited_batch(policy, pool, paths, monkeypatch):
    from agentgym.baselines.train import TrainConfig, rl_step

    class Detours(CreditVariant):
        """Samples the detour rollout and the wrong answer."""

        name = "detours"

        def sample(self, batch, ctx):
            batch.trajectories = [
                play(ctx.policy, ctx.envs, paths[p], ctx.rollout, p) for p in ("detour", "wrong")
            ]

    monkeypatch.setitem(REGISTRY, "detours", Detours)
    model = copy.deepcopy(policy)
    before = [w.detach().clone() for w in model.parameters()]
    cfg = TrainConfig.from_options(credit="detours+dre", tasks_per_step=1, group_size=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    plan = compose(cfg.credit)
    metrics = rl_step(model, None, plan, pool, optimizer, cfg, 1, np.random.default_rng(0))
    assert metrics["dre/edited"] == 1.0 and metrics["dre/turns_removed"] == 1.0
    assert metrics["tokens"] > 0 and np.isfinite(metrics["loss"])
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
