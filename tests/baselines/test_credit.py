import itertools
from dataclasses import is_dataclass
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.registration import EnvSpec

from agentgym.baselines import credit
from agentgym.baselines.credit import (
    HOOKS,
    REGISTRY,
    Batch,
    CreditVariant,
    Plan,
    StepContext,
    Trajectory,
    Turn,
    compose,
    get,
    names,
    register,
    resolve_config,
)
from agentgym.baselines.losses import AGGREGATIONS
from agentgym.core.errors import BadInput
from agentgym.core.info import AgentInfo

BUILTINS = {"group", "grpo", "drgrpo", "rloo", "ppo", "gigpo"}
FILLS_ADVANTAGES = [n for n in names() if "advantages" in get(n).slots]
LOCAL = {"critical"}  # trains only the turns its nested samples select, from its own sampler
ADVANTAGE_VARIANTS = [n for n in FILLS_ADVANTAGES if n not in LOCAL]
GROUP_RELATIVE = ["grpo", "drgrpo", "rloo", "gigpo"]  # zero-mean advantages within a group


# ---------------------------------------------------------------- fixtures made here


def make_turn(L=2, *, reward=0.0, state="s", values=None, mask=None):
    return Turn(
        prompt_ids=torch.arange(3),
        response_ids=torch.arange(L),
        reward=reward,
        state_key=state,
        info={"state_key": state, "won": False},
        logp_old=torch.full((L,), -1.0),
        ref_logp=torch.full((L,), -1.1),
        values=torch.full((L,), 0.5) if values is None else torch.tensor(values),
        policy_mask=None if mask is None else torch.tensor(mask),
        segment_tags=["think"] * L,
    )


def make_traj(group, outcome, states=("s0", "s1"), *, terminated=True, L=2):
    turns = [make_turn(L, state=s) for s in states]
    return Trajectory(
        task_id=f"task-{group}",
        group_id=group,
        seed=0,
        turns=turns,
        outcome=outcome,
        terminated=terminated,
        truncated=not terminated,
    )


def rich_batch():
    """Two groups of three rollouts, two turns each, one observation token in one turn."""
    trajs = [
        make_traj("a", 1.0, ("s0", "x1")),
        make_traj("a", 0.0, ("s0", "x1")),
        make_traj("a", 0.5, ("s0", "x2")),
        make_traj("b", 0.0, ("t0", "y1")),
        make_traj("b", 1.0, ("t0", "y2")),
        make_traj("b", 1.0, ("t0", "y2")),
    ]
    trajs[0].turns[1] = make_turn(3, state="x1", values=[0.5, 0.5, 0.5], mask=[1, 0, 1])
    return Batch(trajectories=trajs)


class FakePolicy:
    """Constant log-probs and a one-parameter value head."""

    def __init__(self):
        self.v = torch.nn.Parameter(torch.tensor(0.25))

    def logprobs(self, prompt_ids_list, response_ids_list, *, grad=False):
        return [torch.full(r.shape, -1.0) for r in response_ids_list]

    def values(self, prompt_ids_list, response_ids_list, *, grad=False):
        v = self.v if grad else self.v.detach()
        return [v * torch.ones(r.shape) for r in response_ids_list]


def ctx():
    return StepContext(config=None, policy=FakePolicy(), ref=FakePolicy())


def run_advantages(spec, batch, config=None):
    plan = compose(spec, config)
    c = ctx()
    for hook in ("transform", "score", "advantages", "shape"):
        plan.run(hook, batch, c)
    return batch.advantages


def first_token(adv, key):
    return adv[key][0].item()


class FakeEnv(gym.Env):
    """A one-step env whose reset info holds exactly ``info_keys``."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)
    supports_snapshot = False

    def __init__(self, info_keys=("won",), privileged=False):
        self.info_keys = tuple(info_keys)
        self.privileged = privileged

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, dict.fromkeys(self.info_keys, "v")

    def step(self, action):
        return 0, 0.0, True, False, {}


class RichEnv(FakeEnv):
    """Every standard info key and every ability."""

    supports_snapshot = True

    def __init__(self, privileged=False):
        super().__init__(tuple(AgentInfo.__annotations__), privileged)

    def snapshot(self):
        return b""

    def restore(self, snapshot):
        pass

    def set_rng(self, key):
        pass

    def oracle_action(self):
        return 0

    def check_answer(self, text):
        return 1.0

    def answer_prefix(self):
        return "answer: "

    def search(self, query):
        return []


class NoPrivilegedEnv(FakeEnv):
    def __init__(self):
        super().__init__()

    def check_answer(self, text):
        raise NotImplementedError("no gold answer here")


# ---------------------------------------------------------------- registry


def test_builtins_are_registered_and_names_sorted():
    assert set(names()) >= BUILTINS
    assert names() == sorted(names())


def test_unknown_variant_lists_the_valid_ones():
    with pytest.raises(BadInput) as e:
        get("gipgo")
    assert ", ".join(names()) in str(e.value)
    assert "Did you mean 'gigpo'" in str(e.value)
    with pytest.raises(BadInput, match="unknown credit variant 'nope'"):
        compose("gigpo+nope")


def test_duplicate_names_raise_and_leave_the_registry_alone():
    original = REGISTRY["grpo"]

    class Impostor(CreditVariant):
        """Not GRPO."""

    with pytest.raises(ValueError, match="already registered"):
        register("grpo")(Impostor)
    assert REGISTRY["grpo"] is original
    register("grpo")(original)  # re-registering the same class is harmless


@pytest.mark.parametrize("bad", ["", "a+b", "mod:Cls", "Upper", "with space"])
def test_register_refuses_unusable_names(bad):
    with pytest.raises(ValueError):
        register(bad)


@pytest.mark.parametrize("name", names())
def test_every_variant_declares_itself(name):
    cls = get(name)
    assert cls.name == name
    assert cls.__doc__ and cls.__doc__.strip()
    assert cls.slots and cls.slots <= set(HOOKS)
    assert isinstance(cls.requires_info, frozenset)
    assert all(isinstance(k, str) for k in cls.requires_info)
    assert isinstance(cls.requires_abilities, frozenset)
    assert cls.aggregation is None or cls.aggregation in AGGREGATIONS
    assert is_dataclass(cls.Config)
    variant = cls(None)
    assert variant.cfg == cls.Config()
    assert name in compose(name).names


@pytest.mark.parametrize("name", names())
def test_every_variant_starts_on_a_complete_env(name):
    compose(name).check(RichEnv(privileged=True))


@pytest.mark.parametrize("name", names())
def test_every_variant_refuses_a_bare_env_by_name(name):
    plan = compose(name)
    cls = get(name)
    if not (cls.requires_info or cls.requires_abilities):
        plan.check(NoPrivilegedEnv())
        return
    with pytest.raises(BadInput, match=name):
        plan.check(NoPrivilegedEnv())


def test_slots_come_from_the_overridden_hooks():
    assert get("group").slots == {"sample"}
    assert get("grpo").slots == {"advantages"}
    assert get("rloo").slots == {"advantages"}
    assert get("ppo").slots == {"score", "advantages", "aux_loss"}


# ---------------------------------------------------------------- composition


def test_the_empty_spec_is_the_defaults():
    plan = compose("")
    assert str(plan) == "group+grpo"
    assert plan.owner("sample").name == "group"
    assert plan.owner("advantages").name == "grpo"


def test_a_named_estimator_replaces_the_default():
    plan = compose("gigpo")
    assert plan.names == ["group", "gigpo"]
    assert plan.owner("advantages").name == "gigpo"
    assert plan.requires_info == {"state_key"}


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(FILLS_ADVANTAGES, 2)))
def test_two_estimators_are_refused_naming_both(a, b):
    with pytest.raises(BadInput) as e:
        compose(f"{a}+{b}")
    assert a in str(e.value) and b in str(e.value) and "advantages" in str(e.value)


def test_grpo_plus_rloo_is_refused_naming_both():
    with pytest.raises(BadInput, match="grpo and rloo both fill the single slot 'advantages'"):
        compose("grpo+rloo")


@pytest.mark.parametrize("spec", ["gigpo+gigpo", "gigpo+", "+grpo"])
def test_malformed_specs_are_refused(spec):
    with pytest.raises(BadInput):
        compose(spec)


def test_a_module_path_spec_loads_the_class():
    plan = compose("agentgym.baselines.credit.rloo:RLOO")
    assert plan.owner("advantages").name == "rloo"
    with pytest.raises(BadInput, match="cannot load"):
        compose("agentgym.nowhere:Variant")


class TagA(CreditVariant):
    """Appends its name to ``batch.extras["order"]``."""

    name = "tag_a"

    def shape(self, batch, ctx):
        batch.extras.setdefault("order", []).append(self.name)

    def aux_loss(self, batch, ctx):
        return torch.tensor(1.0), {"tag_a/x": 1.0}


class TagB(TagA):
    """Like TagA, with another name and a loss aggregation preference."""

    name = "tag_b"
    aggregation = "turn-normalized"


class OtherSampler(CreditVariant):
    """A second sampler."""

    name = "other_sampler"

    def sample(self, batch, ctx):
        batch.extras["sampled"] = True


@pytest.fixture
def test_variants(monkeypatch):
    for cls in (TagA, TagB, OtherSampler):
        monkeypatch.setitem(REGISTRY, cls.name, cls)


@pytest.mark.usefixtures("test_variants")
def test_chained_hooks_run_in_the_order_given():
    for spec, order in [("tag_a+tag_b", ["tag_a", "tag_b"]), ("tag_b+tag_a", ["tag_b", "tag_a"])]:
        batch = Batch()
        compose(spec).run("shape", batch, ctx())
        assert batch.extras["order"] == order


@pytest.mark.usefixtures("test_variants")
def test_run_collects_aux_losses_and_refuses_unknown_hooks():
    plan = compose("gigpo+tag_a")
    results = plan.run("aux_loss", Batch(), ctx())
    assert [m for _, m in results] == [{"tag_a/x": 1.0}]
    with pytest.raises(ValueError, match="grad_hook"):
        plan.run("backward", Batch(), ctx())


@pytest.mark.usefixtures("test_variants")
def test_a_second_sampler_is_refused_and_a_lone_one_replaces_group():
    with pytest.raises(BadInput, match="group and other_sampler"):
        compose("group+other_sampler")
    batch = Batch()
    compose("other_sampler").run("sample", batch, ctx())
    assert batch.extras["sampled"]


def test_the_default_sampler_fills_groups_of_one_task_and_one_seed(policy):
    from agentgym.baselines.rollout import EnvPool, RolloutConfig

    step = StepContext(
        tasks_per_step=3,
        group_size=2,
        policy=policy,
        envs=EnvPool("agentgym/Search-Menu-Small-v0", 2, max_turns=3),
        rollout=RolloutConfig(max_new_tokens=40),
        rng=np.random.default_rng(0),
    )
    batch = Batch()
    compose("").run("sample", batch, step)
    groups = batch.groups()
    assert sorted(len(idx) for idx in groups.values()) == [2, 2, 2]
    starts = [
        {(batch.trajectories[i].task_id, batch.trajectories[i].seed) for i in idx}
        for idx in groups.values()
    ]
    assert all(len(s) == 1 for s in starts)
    assert len({next(iter(s))[0] for s in starts}) == 3  # distinct tasks


@pytest.mark.usefixtures("test_variants")
def test_loss_aggregation_preferences():
    assert compose("").aggregation == "seq-mean-token-mean"  # GRPO's own loss
    assert compose("drgrpo").aggregation == "constant-norm"
    assert compose("gigpo").aggregation == credit.DEFAULT_AGGREGATION
    assert compose("tag_b").aggregation == "turn-normalized"  # named beats default grpo
    assert compose("drgrpo", {"aggregation": "token-mean"}).aggregation == "token-mean"
    with pytest.raises(BadInput, match="disagree"):
        compose("drgrpo+tag_b")
    with pytest.raises(BadInput, match="unknown aggregation"):
        compose("grpo", {"aggregation": "sum"})


# ---------------------------------------------------------------- settings


def test_settings_from_sub_configs_prefixed_fields_and_instances():
    GiGPO = get("gigpo")
    assert GiGPO({"gigpo": {"omega": 0.5}}).cfg.omega == 0.5
    assert GiGPO(SimpleNamespace(gigpo_omega=0.25, lr=1e-6)).cfg.omega == 0.25
    assert GiGPO(GiGPO.Config(gamma=0.5)).cfg.gamma == 0.5
    assert resolve_config(GiGPO, SimpleNamespace(gigpo=GiGPO.Config(omega=2.0))).omega == 2.0
    with pytest.raises(BadInput, match="omega"):
        GiGPO({"gigpo": {"omgea": 0.5}})
    with pytest.raises(BadInput, match="mean_norm"):
        GiGPO({"gigpo": {"mode": "zscore"}})
    with pytest.raises(BadInput, match="zero_std"):
        get("grpo")({"grpo": {"zero_std": "skip"}})


# ---------------------------------------------------------------- advantages, every estimator


@pytest.mark.parametrize("name", ADVANTAGE_VARIANTS)
def test_advantages_cover_every_turn_with_token_arrays(name):
    batch = rich_batch()
    adv = run_advantages(name, batch)
    assert set(adv) == set(batch.keys())
    for key, a in adv.items():
        turn = batch.turn(key)
        assert a.shape == turn.response_ids.shape
        assert torch.isfinite(a).all()
        assert (a[turn.mask() == 0] == 0).all()


@pytest.mark.parametrize("name", GROUP_RELATIVE)
def test_group_relative_advantages_have_zero_mean_per_group(name):
    batch = rich_batch()
    adv = run_advantages(name, batch)
    for idx in batch.groups().values():
        total = sum(first_token(adv, (i, k)) for i in idx for k in range(2))
        assert total == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize("name", ADVANTAGE_VARIANTS)
def test_advantages_do_not_depend_on_the_trajectory_order_within_a_group(name):
    batch = rich_batch()
    adv = run_advantages(name, batch)
    swapped = rich_batch()
    swapped.trajectories[1], swapped.trajectories[2] = (
        swapped.trajectories[2],
        swapped.trajectories[1],
    )
    adv_swapped = run_advantages(name, swapped)
    torch.testing.assert_close(adv[(1, 0)], adv_swapped[(2, 0)])


# ---------------------------------------------------------------- GRPO family by hand


def grpo_batch():
    return Batch(
        trajectories=[make_traj("a", r) for r in (1.0, 0.0, 0.0, 1.0)]
        + [make_traj("b", 0.5), make_traj("b", 0.5)]
    )


def test_grpo_by_hand():
    adv = run_advantages("grpo", grpo_batch())
    z = 0.5 / (3**-0.5 + 1e-6)  # (R − 0.5) / (unbiased std 1/√3 + ε)
    for i, sign in enumerate([1, -1, -1, 1]):
        for k in range(2):
            torch.testing.assert_close(adv[(i, k)], torch.full((2,), sign * z))
    assert first_token(adv, (4, 0)) == 0.0 and first_token(adv, (5, 1)) == 0.0


def test_grpo_can_drop_zero_variance_groups():
    batch = grpo_batch()
    adv = run_advantages("grpo", batch, {"grpo": {"zero_std": "drop"}})
    assert {i for i, _ in adv} == {0, 1, 2, 3}
    assert batch.metrics["grpo/zero_std_groups"] == 1.0


def test_drgrpo_by_hand():
    batch = Batch(trajectories=[make_traj("a", r) for r in (1.0, 0.0, 0.0, 0.0)])
    adv = run_advantages("drgrpo", batch)
    assert [first_token(adv, (i, 1)) for i in range(4)] == [0.75, -0.25, -0.25, -0.25]


def test_rloo_by_hand():
    batch = Batch(trajectories=[make_traj("a", r) for r in (1.0, 0.0, 0.0, 0.0)])
    adv = run_advantages("rloo", batch)
    expected = [1.0, -1 / 3, -1 / 3, -1 / 3]  # R_i − mean of the others
    assert [first_token(adv, (i, 0)) for i in range(4)] == pytest.approx(expected)


# ---------------------------------------------------------------- PPO


def ppo_batch(obs_value=9.9):
    turn0 = make_turn(3, reward=-0.1, values=[0.1, 0.2, obs_value], mask=[1, 1, 0])
    turn1 = make_turn(2, values=[0.3, 0.4])
    traj = Trajectory("t", "g", 0, [turn0, turn1], outcome=1.0, terminated=True)
    return Batch(trajectories=[traj])


NO_WHITEN = {"ppo": {"gamma": 0.9, "lam": 0.8, "whiten": False}}


def test_ppo_by_hand():
    batch = ppo_batch()
    adv = run_advantages("ppo", batch, NO_WHITEN)
    # policy steps: V = (.1, .2, .3, .4), r = (0, −.1, 0, 1), terminated after the last
    # δ = (.08, −.03, .06, .6); A_t = δ_t + .72 A_{t+1}
    torch.testing.assert_close(adv[(0, 0)], torch.tensor([0.3134528, 0.32424, 0.0]))
    torch.testing.assert_close(adv[(0, 1)], torch.tensor([0.492, 0.6]))
    torch.testing.assert_close(batch.returns[(0, 0)], torch.tensor([0.4134528, 0.52424, 0.0]))
    torch.testing.assert_close(batch.returns[(0, 1)], torch.tensor([0.792, 1.0]))


@pytest.mark.parametrize("config", [NO_WHITEN, None])
def test_ppo_values_at_observation_tokens_do_not_change_advantages(config):
    a = run_advantages("ppo", ppo_batch(obs_value=9.9), config)
    b = run_advantages("ppo", ppo_batch(obs_value=-3.0), config)
    for key in a:
        torch.testing.assert_close(a[key], b[key])


def one_step(terminated, *, next_value=1.0, where="turn"):
    turn = make_turn(1, values=[0.0])
    traj = Trajectory("t", "g", 0, [turn], outcome=0.0, terminated=terminated)
    traj.truncated = not terminated
    (turn.extras if where == "turn" else traj.extras)["next_value"] = next_value
    return Batch(trajectories=[traj])


@pytest.mark.parametrize("where", ["turn", "trajectory"])
def test_ppo_truncated_bootstraps_and_terminated_does_not(where):
    config = {"ppo": {"gamma": 0.9, "whiten": False}}
    truncated = run_advantages("ppo", one_step(False, where=where), config)
    terminated = run_advantages("ppo", one_step(True, where=where), config)
    assert first_token(truncated, (0, 0)) == pytest.approx(0.9)
    assert first_token(terminated, (0, 0)) == 0.0


def test_ppo_scores_missing_values_with_the_critic_and_trains_it():
    batch = ppo_batch()
    for turn in batch.trajectories[0].turns:
        turn.values = None
    plan, c = compose("ppo", NO_WHITEN), ctx()
    for hook in ("score", "advantages"):
        plan.run(hook, batch, c)
    assert torch.equal(batch.trajectories[0].turns[1].values, torch.full((2,), 0.25))
    [(loss, metrics)] = plan.run("aux_loss", batch, c)
    loss.backward()
    assert c.policy.v.grad is not None and c.policy.v.grad != 0
    assert metrics["ppo/value_loss"] > 0


def test_ppo_without_a_critic_is_refused():
    batch = ppo_batch()
    batch.trajectories[0].turns[0].values = None
    no_critic = StepContext(policy=SimpleNamespace(logprobs=FakePolicy().logprobs))
    with pytest.raises(BadInput, match="critic"):
        compose("ppo").run("score", batch, no_critic)


# ---------------------------------------------------------------- GiGPO


def gigpo_batch():
    t0 = make_traj("g", 1.0, ("s0", "s1"))
    t1 = make_traj("g", 0.0, ("s0", "s2"))
    t1.turns[0].reward = -0.1
    return Batch(trajectories=[t0, t1])


def test_gigpo_by_hand():
    adv = run_advantages("gigpo", gigpo_batch(), {"gigpo": {"gamma": 0.5, "omega": 1.0}})
    # A^E = ±0.5; step returns R^s = (.5, 1) and (−.1, 0); bucket s0 = {.5, −.1}, mean .2
    expected = {(0, 0): 0.8, (0, 1): 0.5, (1, 0): -0.8, (1, 1): -0.5}
    for key, value in expected.items():
        torch.testing.assert_close(adv[key], torch.full((2,), value))


def test_gigpo_mean_std_norm_and_omega():
    config = {"gigpo": {"gamma": 0.5, "omega": 2.0, "mode": "mean_std_norm"}}
    adv = run_advantages("gigpo", gigpo_batch(), config)
    a_e = 0.5 / (torch.tensor([1.0, 1.0, 0.0, 0.0]).std().item() + 1e-6)
    a_s = 0.3 / (torch.tensor([0.5, -0.1]).std().item() + 1e-6)
    assert first_token(adv, (0, 0)) == pytest.approx(a_e + 2.0 * a_s, rel=1e-5)
    assert first_token(adv, (0, 1)) == pytest.approx(a_e, rel=1e-5)


def test_gigpo_episode_statistics_over_steps_or_rollouts():
    batch = Batch(trajectories=[make_traj("g", 1.0, ("a", "b", "c")), make_traj("g", 0.0, ("d",))])
    by_steps = run_advantages("gigpo", batch)
    # step rows (1, 1, 1, 0): mean .75; singleton anchor buckets add nothing
    assert first_token(by_steps, (0, 0)) == pytest.approx(0.25)
    by_rollouts = run_advantages("gigpo", batch, {"gigpo": {"episode_stats": "rollouts"}})
    assert first_token(by_rollouts, (0, 0)) == pytest.approx(0.5)


def test_gigpo_fuzzy_anchor_states():
    def near_twins():
        batch = gigpo_batch()
        batch.trajectories[1].turns[0].state_key = "s0 "  # nearly the same observation
        return batch

    exact = run_advantages("gigpo", near_twins(), {"gigpo": {"gamma": 0.5}})
    assert first_token(exact, (0, 0)) == pytest.approx(0.5)  # two singleton buckets
    fuzzy = run_advantages("gigpo", near_twins(), {"gigpo": {"gamma": 0.5, "similarity": 0.8}})
    assert first_token(fuzzy, (0, 0)) == pytest.approx(0.8)


def test_gigpo_without_a_state_key_fails_loudly():
    batch = gigpo_batch()
    batch.trajectories[1].turns[1].state_key = None
    with pytest.raises(ValueError, match="state_key"):
        run_advantages("gigpo", batch)


# ---------------------------------------------------------------- start-up checks


def test_gigpo_refuses_an_env_without_state_key():
    with pytest.raises(BadInput) as e:
        compose("gigpo").check(FakeEnv(info_keys=("won",)))
    assert "gigpo" in str(e.value) and "state_key" in str(e.value)
    compose("gigpo").check(FakeEnv(info_keys=("won", "state_key")))
    compose("grpo").check(FakeEnv(info_keys=("won",)))


class NeedsEverything(CreditVariant):
    """Asks for each ability."""

    name = "needs_everything"
    requires_abilities = frozenset({"snapshot", "privileged", "check_answer", "set_rng"})

    def shape(self, batch, ctx):
        pass


def test_abilities_are_checked_and_each_missing_one_is_named():
    plan = Plan(variants=(NeedsEverything(),))
    plan.check(RichEnv())
    with pytest.raises(BadInput) as e:
        plan.check(NoPrivilegedEnv())
    message = str(e.value)
    for ability in ("snapshot", "privileged", "check_answer", "set_rng"):
        assert f"needs_everything needs the env ability {ability!r}" in message
    assert "no gold answer here" in message


def test_abilities_are_checked_through_wrappers_and_specs():
    plan = Plan(variants=(NeedsEverything(),))
    spec = EnvSpec("test/Rich-v0", entry_point=RichEnv, disable_env_checker=True)
    env = gym.make(spec)
    plan.check(env)
    bare = gym.make(EnvSpec("test/Bare-v0", entry_point=NoPrivilegedEnv, disable_env_checker=True))
    with pytest.raises(BadInput, match="test/Bare-v0"):
        plan.check(bare)


@pytest.mark.parametrize("spec", ["grpo", "rloo", "drgrpo"])
def test_outcome_variants_score_by_outcome_or_by_return(spec):
    """Two rollouts both win (R = 1), but one collected a 0.5 intermediate reward on the way:
    by outcome they tie (no signal), by return the richer one is ahead."""
    rich, plain = make_traj("g", 1.0), make_traj("g", 1.0)
    rich.turns[0].reward = 0.5
    assert (rich.total_return, plain.total_return) == (1.5, 1.0)
    by_outcome = run_advantages(spec, Batch(trajectories=[rich, plain]))
    assert first_token(by_outcome, (0, 0)) == first_token(by_outcome, (1, 0)) == 0.0
    by_return = run_advantages(
        spec, Batch(trajectories=[rich, plain]), {spec: {"reward": "return"}}
    )
    assert first_token(by_return, (0, 0)) > 0 > first_token(by_return, (1, 0))
    with pytest.raises(BadInput, match="reward must be one of"):
        compose(spec, {spec: {"reward": "sum"}})
