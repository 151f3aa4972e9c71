"""Rubric-to-Code: rubric items judged from the env's own info, each item's group z-score
added to the tokens it concerns; and the layered reward."""

import copy
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.credit.rubric import (
    ITEMS,
    OUTCOME,
    Item,
    Layers,
    item_z,
    layered_reward,
    tool_layers,
)
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect, pick_tasks
from agentgym.core.errors import BadInput

TOOLS = "agentgym/Tools-Ecommerce-v1"
NO_SCHEMAS = {"schemas": False}
SEARCH = "agentgym/Search-Menu-Small-v1"
Rubric = get("rubric")
EPS = 1e-6
Z2 = 0.5 / (2**-0.5 + EPS)  # z-score of the higher of two different scores


# ---------------------------------------------------------------------- by hand
def test_item_z_by_hand_and_constant_items_give_zero():
    # (1, .5, 0): mean .5, unbiased std .5
    assert item_z([1.0, 0.5, 0.0], EPS) == pytest.approx(
        [0.5 / (0.5 + EPS), 0.0, -0.5 / (0.5 + EPS)]
    )
    assert item_z([0.3, 0.3, 0.3], EPS) == [0.0, 0.0, 0.0]
    assert item_z([1.0], EPS) == [0.0]


def hand_turn(L, mask=None):
    m = None if mask is None else torch.tensor(mask, dtype=torch.float32)
    return Turn(torch.arange(2), torch.arange(L), policy_mask=m)


def hand_traj(outcome, items, group="g", turns=1, L=3, mask=None):
    traj = Trajectory("t", group, 0, [hand_turn(L, mask) for _ in range(turns)], outcome=outcome)
    traj.extras[ITEMS] = items
    return traj


def span(k, *tokens):
    return {k: torch.tensor(tokens, dtype=torch.float32)}


def run(batch, settings=None, spec="grpo+rubric"):
    plan = compose(spec, settings)
    for hook in ("transform", "score", "advantages", "shape"):
        plan.run(hook, batch, StepContext())
    return batch.advantages


def test_two_items_covering_one_token_add_up():
    # item a covers tokens 0-1, item b tokens 1-2 of rollout 0; rollout 1 attempted a only
    # (its b spans nothing); token 2 of rollout 0 is an observation token
    items0 = [
        Item("a", "a", 1.0, 1.0, span(0, 1, 1, 0)),
        Item("b", "b", 1.0, 1.0, span(0, 0, 1, 1)),
    ]
    items1 = [Item("a", "a", 0.0, 1.0, span(0, 1, 1, 0)), Item("b", "b", 0.0, 1.0)]
    batch = Batch([hand_traj(1.0, items0, mask=[1, 1, 0]), hand_traj(0.0, items1)])
    adv = run(batch, {"rubric": {"lam": 0.5}})
    g = Z2  # GRPO's z-score of (1, 0): the same two-point z
    assert adv[(0, 0)].tolist() == pytest.approx([g + 0.5 * Z2, g + 0.5 * (Z2 + Z2), 0.0])
    assert adv[(1, 0)].tolist() == pytest.approx([-g - 0.5 * Z2, -g - 0.5 * Z2, -g])


def test_z_normalisation_across_a_group_by_hand_and_a_constant_item_adds_nothing():
    # equal outcomes: GRPO gives 0, what is left is the rubric's term
    z = 0.5 / (0.5 + EPS)
    rows = []
    for score in (1.0, 0.5, 0.0):
        judged = [
            Item("varies", "v", score, 2.0, span(1, 0, 1, 1)),
            Item("constant", "c", 1.0, 5.0, {0: torch.ones(3), 1: torch.ones(3)}),
        ]
        rows.append(hand_traj(1.0, judged, turns=2))
    batch = Batch(rows)
    adv = run(batch, {"rubric": {"lam": 0.25}})
    for i, z_i in enumerate((z, 0.0, -z)):
        assert adv[(i, 0)].tolist() == [0.0, 0.0, 0.0]
        assert adv[(i, 1)].tolist() == pytest.approx([0.0, 0.25 * 2 * z_i, 0.25 * 2 * z_i])
    assert batch.metrics["rubric/constant_items"] == 0.5


def test_groups_are_normalised_apart_and_dropped_keys_stay_dropped():
    rows = [("g", 1.0, 1.0), ("g", 0.0, 0.0), ("h", 1.0, 1.0), ("h", 1.0, 0.0)]
    batch = Batch(
        [
            hand_traj(outcome, [Item("a", "a", score, 1.0, span(0, 1, 1, 1))], group=group)
            for group, outcome, score in rows
        ]
    )
    adv = run(batch, {"grpo": {"zero_std": "drop"}, "rubric": {"lam": 1.0}})
    # group h has equal outcomes: GRPO dropped it, and the rubric does not bring it back
    assert set(adv) == {(0, 0), (1, 0)}
    assert adv[(0, 0)].tolist() == pytest.approx([2 * Z2] * 3)
    kept = run(copy.deepcopy(batch), {"rubric": {"lam": 1.0}})  # zero_std "zero" keeps h
    assert kept[(2, 0)].tolist() == pytest.approx([Z2] * 3)
    assert kept[(3, 0)].tolist() == pytest.approx([-Z2] * 3)


def test_nothing_is_added_where_no_advantage_slot_ran():
    batch = Batch([hand_traj(1.0, [Item("a", "a", 1.0, 1.0, span(0, 1, 1, 1))])])
    Rubric().shape(batch, StepContext())
    assert batch.advantages is None


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        (Layers(False, True, True, 1.0), 0.0),  # no format: nothing
        (Layers(True, False, True, 1.0), 0.0),  # syntax fails: nothing above it counts
        (Layers(True, True, False, 1.0), 0.2),  # w_syn only
        (Layers(True, True, True, 0.0), 0.2 + 0.3),
        (Layers(True, True, True, 0.5), 0.2 + 0.3 + 0.5 * 0.5),
    ],
)
def test_layered_reward_by_hand(layers, expected):
    assert layered_reward(layers, 0.2, 0.3, 0.5) == pytest.approx(expected)


def test_bad_settings_refused():
    for bad in ({"reward": "return"}, {"lam": -1.0}, {"w_fun": -0.1}, {"pass_rate": []}):
        with pytest.raises(BadInput):
            Rubric({"rubric": bad})
    assert Rubric({"rubric": {"pass_rate": "success"}}).cfg.pass_rate == ("success",)


# ---------------------------------------------------------------------- scripted rollouts
@pytest.fixture(scope="module")
def tools_policy():
    """A nano policy whose tokenizer is fitted to the tool envs' text (no schemas)."""
    torch.manual_seed(0)
    text = collect_env_text(TOOLS, episodes=6, env_kwargs=NO_SCHEMAS)
    return TinyPolicy.from_preset("nano", train_tokenizer(text, vocab_size=600), max_len=1024)


def scripted(tok, env_id, task, actions, group="g", *, seed=0, finish=True, **kwargs):
    """A rollout that plays ``actions``, then (``finish``) the oracle's, recorded as the
    rollout engine records turns (action, observation acted from, the step's info)."""
    env = gym.make(env_id, privileged=True, **kwargs)
    obs, _ = env.reset(seed=seed, options={"task_id": task})
    traj, queue = Trajectory(task, group, seed), list(actions)
    while True:
        if not queue and not finish:
            return traj
        action = queue.pop(0) if queue else env.unwrapped.oracle_action()
        extras = {"action": action, "observation": obs}
        obs, reward, terminated, truncated, info = env.step(action)
        ids = torch.tensor([*tok.encode(action), tok.eos_id])
        turn = Turn(torch.arange(2), ids, terminated=terminated, truncated=truncated, info=info)
        turn.extras.update(extras)
        traj.turns.append(turn)
        if terminated or truncated:
            traj.outcome, traj.terminated, traj.truncated = float(reward), terminated, truncated
            return traj


SINGLE = "ecommerce-single-0000"  # gold: add_to_cart(u7, p28, 2); facts "273.48", "2"
RIGHT = '<tool_call>{"name": "add_to_cart", "arguments": {"user_id": "u7", "product_id": "p28", "quantity": 2}}</tool_call>'  # noqa: E501
WRONG_QTY = RIGHT.replace('"quantity": 2', '"quantity": 1')
UNKNOWN = '<tool_call>{"name": "add_to_basket", "arguments": {}}</tool_call>'
MISSING = '<tool_call>{"name": "add_to_cart", "arguments": {"user_id": "u7"}}</tool_call>'
NOT_FOUND = '<tool_call>{"name": "get_order", "arguments": {"order_id": "o99999"}}</tool_call>'
MALFORMED = RIGHT + "<tool_call>{oops</tool_call>"
SORRY = "<summary>Sorry, that did not work.</summary>"


@pytest.mark.parametrize(
    ("actions", "finish", "layers"),
    [
        ([], True, (True, True, True)),
        ([UNKNOWN], True, (True, False, True)),  # schema error, shown in the next observation
        ([MISSING], True, (True, False, True)),
        ([NOT_FOUND], True, (True, True, False)),  # valid call, fails at run time
        (["just text"], True, (False, True, True)),  # breaks the grammar
        ([MALFORMED], True, (False, True, True)),  # a call block whose JSON fails
        ([NOT_FOUND, RIGHT], False, (True, True, False)),  # truncated after a valid call
        # truncated on a failing call: its error is never shown, and it is charged to syntax
        ([RIGHT, NOT_FOUND], False, (True, False, True)),
    ],
)
def test_tool_layers_come_from_the_envs_own_errors(tools_policy, actions, finish, layers):
    tok = tools_policy.tokenizer
    traj = scripted(tok, TOOLS, SINGLE, actions, finish=finish, max_turns=2 if not finish else 6)
    got = tool_layers(traj, ("success", "hierr"))
    assert (got.format, got.syntax, got.runs) == layers
    last = traj.turns[-1].info["reward_components"]
    assert got.pass_rate == pytest.approx((last["success"] + last["hierr"]) / 2)
    if not actions:
        assert got.pass_rate == 1.0 and traj.outcome == 1.0


def test_layered_reward_replaces_the_outcome_and_keeps_the_envs(tools_policy):
    tok = tools_policy.tokenizer
    trajs = [
        scripted(tok, TOOLS, SINGLE, []),  # served: R = 1
        scripted(tok, TOOLS, SINGLE, [NOT_FOUND]),  # a run-time error: R = w_syn
        scripted(tok, TOOLS, SINGLE, [UNKNOWN]),  # a schema error: R = 0
        scripted(tok, TOOLS, SINGLE, [WRONG_QTY, SORRY]),  # runs, fails the task
    ]
    env_outcomes = [t.outcome for t in trajs]
    assert env_outcomes == [1.0, 1.0, 1.0, 0.0]
    batch = Batch(trajs)
    compose("grpo+rubric", {"rubric": {"reward": "layered"}}).run("transform", batch, StepContext())
    hierr = trajs[3].turns[-1].info["reward_components"]["hierr"]
    assert 0.0 < hierr < 1.0
    expected = [1.0, 0.1, 0.0, 0.1 + 0.1 + 0.8 * (0.0 + hierr) / 2]
    assert [t.outcome for t in trajs] == pytest.approx(expected)
    assert [t.extras[OUTCOME] for t in trajs] == env_outcomes
    assert batch.metrics["rubric/outcome_mean"] == 0.75
    compose("rubric", {"rubric": {"reward": "layered"}}).run("transform", batch, StepContext())
    assert [t.extras[OUTCOME] for t in trajs] == env_outcomes  # the env's, not overwritten


def judged(batch, policy, env_id, **kwargs):
    pool = EnvPool(env_id, 1, privileged=True, **kwargs)
    Rubric().score(batch, StepContext(policy=policy, envs=pool))
    return [{it.name: it for it in t.extras[ITEMS]} for t in batch.trajectories]


def decoded(tok, traj, item):
    ((k, mask),) = item.span.items()
    ids = traj.turns[k].response_ids[mask.bool()].tolist()
    return k, tok.decode(ids).strip()


def test_tool_items_by_hand_on_scripted_rollouts(tools_policy):
    tok = tools_policy.tokenizer
    oracle = scripted(tok, TOOLS, SINGLE, [])
    wrong = scripted(tok, TOOLS, SINGLE, ["<think>one</think>" + WRONG_QTY, SORRY])
    silent = scripted(tok, TOOLS, SINGLE, ["<summary>Nothing to do.</summary>"])
    batch = Batch([oracle, wrong, silent])
    items = judged(batch, tools_policy, TOOLS, **NO_SCHEMAS)
    scores = [{n: it.score for n, it in judged_.items()} for judged_ in items]
    layers = {f"hierr/{x}": 1.0 for x in ("format", "tool_name_f1", "param_keys", "parallel")}
    right = {"hierr/param_values": 1.0, "call0/tool": 1.0, "call0/args": 1.0, "summary": 1.0}
    assert scores[0] == {**layers, **right}
    # user_id and product_id agree, quantity does not: 2 of 3 keys
    two_thirds = pytest.approx(2 / 3)
    wrong_ = {"hierr/param_values": two_thirds, "call0/tool": 1.0, "call0/args": two_thirds}
    assert scores[1] == {**layers, **wrong_, "summary": 0.0}
    # no call: the name F1 is 0 and gates every layer above it; nothing to pair
    assert scores[2] == {**dict.fromkeys(scores[0], 0.0), "hierr/format": 1.0}
    # spans: the call's block (not the think before it), the summary's block
    assert decoded(tok, wrong, items[1]["call0/args"]) == (0, WRONG_QTY)
    assert decoded(tok, oracle, items[0]["summary"])[1] == oracle.turns[-1].extras["action"]
    assert items[2]["call0/tool"].span == {} and items[2]["hierr/tool_name_f1"].span == {}
    assert set(items[1]["hierr/format"].span) == {0, 1}  # every turn, whole
    assert set(items[1]["hierr/param_keys"].span) == {0}  # the call turns


def test_parallel_calls_are_paired_block_by_block_by_their_arguments(tools_policy):
    tok = tools_policy.tokenizer
    task = "ecommerce-parallel-0000"
    env = gym.make(TOOLS, privileged=True, **NO_SCHEMAS)
    env.reset(seed=0, options={"task_id": task})
    first, second = env.unwrapped.oracle_action().split("\n")
    swapped = scripted(tok, TOOLS, task, [f"{second}\n{first}"], **NO_SCHEMAS)
    (items,) = judged(Batch([swapped]), tools_policy, TOOLS, **NO_SCHEMAS)
    # gold call 0 is the first block of the oracle's action, written second here
    assert decoded(tok, swapped, items["call0/args"]) == (0, first)
    assert decoded(tok, swapped, items["call1/args"]) == (0, second)
    assert items["call0/args"].score == items["call1/args"].score == 1.0


def read_then_miss(tok, task, seed, group="g"):
    """The oracle's reading, then a wrong answer from the menu."""
    env = gym.make(SEARCH, privileged=True)
    _, info = env.reset(seed=seed, options={"task_id": task})
    actions = []
    while True:
        action = env.unwrapped.oracle_action()
        if action.startswith("answer:"):
            wrong = [
                a for a in info["admissible_actions"] if a.startswith("answer:") and a != action
            ]
            return scripted(tok, SEARCH, task, [*actions, wrong[0]], group, seed=seed)
        actions.append(action)
        *_, info = env.step(action)


def test_search_items_on_scripted_rollouts(policy):
    tok = policy.tokenizer
    task = "q00110"  # three hops, three gold sentences on three pages
    oracle = scripted(tok, SEARCH, task, [])
    miss = read_then_miss(tok, task, 0)
    lost = scripted(tok, SEARCH, task, [oracle.turns[0].extras["action"]], finish=False)
    items = judged(Batch([oracle, miss, lost]), policy, SEARCH)
    gold = oracle.turns[0].info["gold_evidence"]
    for name in [f"evidence/{s}" for s in gold] + [f"page/{s}" for s in gold]:
        assert (items[0][name].score, items[1][name].score, items[2][name].score) == (1, 1, 0)
        assert items[2][name].span == {}
    assert [items[i]["answer"].score for i in range(3)] == [1.0, 0.0, 0.0]
    for s in gold:  # each sentence is credited to the turn that read it
        ((k, mask),) = items[0][f"evidence/{s}"].span.items()
        assert oracle.turns[k].info["tool_calls"] == [
            {"name": "read", "arguments": {"sentence": s}}
        ]
        assert mask.tolist() == [1.0] * len(oracle.turns[k].response_ids)
        ((k, _),) = items[0][f"page/{s}"].span.items()  # and the turn that opened its page
        assert oracle.turns[k].extras["action"].startswith(("expand:", "follow:"))
    ((k, _),) = items[0]["answer"].span.items()
    assert k == len(oracle.turns) - 1


# ---------------------------------------------------------------------- real rollouts
def _with_and_without(batch, ctx, settings=None):
    """GRPO's advantages, and grpo+rubric's on a copy: (rubric advantages, rubric term)."""
    alone, both = copy.deepcopy(batch), batch
    for spec, b in (("grpo", alone), ("grpo+rubric", both)):
        plan = compose(spec, settings)
        for hook in ("transform", "score", "advantages", "shape"):
            plan.run(hook, b, ctx)
    assert set(both.advantages) == set(alone.advantages) == set(batch.keys())
    return both.advantages, {k: v - alone.advantages[k] for k, v in both.advantages.items()}


def wrong_call(gold):
    """``gold`` with its first argument (by name) changed."""
    call = copy.deepcopy(gold)
    key = sorted(call["arguments"])[0]
    value = call["arguments"][key]
    call["arguments"][key] = value + 1 if isinstance(value, int) else f"{value}0"
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def test_rubric_on_real_tool_rollouts(tools_policy):
    pool = EnvPool(TOOLS, 4, privileged=True, max_turns=3, **NO_SCHEMAS)
    tasks = [("ecommerce-single-0000", 0), ("ecommerce-single-0003", 1)]
    torch.manual_seed(0)
    trajs = collect(tools_policy, pool, tasks, 2, RolloutConfig(max_new_tokens=24))
    tok, batch = tools_policy.tokenizer, Batch([])
    for g, (task, seed) in enumerate(tasks):
        group = trajs[2 * g].group_id
        batch.trajectories += trajs[2 * g : 2 * g + 2]
        wrong = wrong_call(trajs[2 * g].turns[0].info["gold_tool_calls"][0])
        batch.trajectories.append(scripted(tok, TOOLS, task, [], group, seed=seed, **NO_SCHEMAS))
        batch.trajectories.append(scripted(tok, TOOLS, task, [wrong, SORRY], group, seed=seed))
    _, term = _with_and_without(batch, StepContext(policy=tools_policy, envs=pool))
    items = [{it.name: it for it in t.extras[ITEMS]} for t in batch.trajectories]
    invalid = 0
    for g in range(len(tasks)):
        policy_rows, oracle = (4 * g, 4 * g + 1), 4 * g + 2
        # the oracle's call block: every item there (layers, name, arguments) is its group's best
        ((k, block),) = items[oracle]["call0/args"].span.items()
        assert (term[(oracle, k)][block.bool()] > 0).all()
        for i in policy_rows:
            if items[i]["hierr/format"].score == 0.0:  # an invalid action: below the others
                invalid += 1
                for k in range(len(batch.trajectories[i].turns)):
                    assert (term[(i, k)] < 0).all()
    assert invalid > 0
    assert batch.metrics["rubric/constant_items"] < 1


def test_rubric_on_real_search_rollouts(policy):
    pool = EnvPool(SEARCH, 4, privileged=True, max_turns=6)
    tasks = pick_tasks(pool, 2, np.random.default_rng(0))
    torch.manual_seed(0)
    trajs = collect(policy, pool, tasks, 2, RolloutConfig(max_new_tokens=32))
    tok, batch = policy.tokenizer, Batch([])
    for g, (task, seed) in enumerate(tasks):
        group = trajs[2 * g].group_id
        batch.trajectories += trajs[2 * g : 2 * g + 2]
        batch.trajectories.append(scripted(tok, SEARCH, task, [], group, seed=seed))
        batch.trajectories.append(read_then_miss(tok, task, seed, group))
    _, term = _with_and_without(batch, StepContext(policy=policy, envs=pool))
    for g in range(len(tasks)):
        oracle, miss = 4 * g + 2, 4 * g + 3
        # the same reading, a right and a wrong answer: the last turns get opposite terms,
        # the rest of their turns the same one
        assert float(term[(oracle, len(batch.trajectories[oracle].turns) - 1)][0]) > 0
        assert float(term[(miss, len(batch.trajectories[miss].turns) - 1)][0]) < 0
        for k in range(len(batch.trajectories[miss].turns) - 1):
            torch.testing.assert_close(term[(oracle, k)], term[(miss, k)])
        # a turn of the oracle that read a gold sentence no policy rollout read is credited
        assert any(
            float(term[(oracle, k)].max()) > 0
            for k in range(len(batch.trajectories[oracle].turns) - 1)
        )
    assert batch.metrics["rubric/answer"] == pytest.approx(
        np.mean([float(t.extras[ITEMS][-1].score) for t in batch.trajectories])
    )


# ---------------------------------------------------------------------- fit and CLI
@pytest.mark.parametrize(
    ("env_id", "kwargs", "settings", "words"),
    [
        (
            "agentgym/Credit-KeyDoor-v0",
            {"privileged": True},
            None,
            "needs info keys ['tool_calls']",
        ),
        (TOOLS, NO_SCHEMAS, None, "gold_tool_calls or gold_evidence"),  # not privileged
        (SEARCH, {"privileged": True}, {"reward": "layered"}, "reward='layered'"),
    ],
)
def test_misfitting_envs_are_refused(env_id, kwargs, settings, words):
    plan = compose("grpo+rubric", {"rubric": settings or {}})
    with pytest.raises(BadInput, match="rubric") as e:
        plan.check(gym.make(env_id, **kwargs))
    assert words in str(e.value)


@pytest.mark.parametrize(("env_id", "reward"), [(TOOLS, "layered"), (SEARCH, "outcome")])
def test_fitting_envs_pass(env_id, reward):
    compose("grpo+rubric", {"rubric": {"reward": reward}}).check(gym.make(env_id, privileged=True))


def test_layered_refuses_search_rollouts_at_run_time(policy):
    batch = Batch([scripted(policy.tokenizer, SEARCH, "q00110", [])])
    with pytest.raises(BadInput, match="layered"):
        compose("rubric", {"rubric": {"reward": "layered"}}).run("transform", batch, StepContext())


def test_cli_trains_one_step_on_tool_calls(tmp_path):
    out = tmp_path / "run"
    r = cli(
        "train",
        *TINY_RUN,
        *("--env", TOOLS, "--env-kwargs", '{"schemas": false}', "--credit", "grpo+rubric"),
        *("--credit-settings", '{"rubric": {"reward": "layered"}}', "--preset", "nano"),
        *("--max-len", "1024", "--max-new-tokens", "24", "--out", str(out)),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (row,) = rl_rows(out)
    assert float(row["rubric/items"]) >= 8  # five layers, a gold call's two, the summary
    assert 0.0 <= float(row["rubric/layered_mean"]) <= 1.0


@pytest.mark.parametrize(
    ("env", "settings", "words"),
    [
        ("agentgym/Credit-KeyDoor-v0", "", "rubric needs info keys"),
        (SEARCH, '{"rubric": {"reward": "layered"}}', "reward='layered'"),
    ],
)
def test_cli_refuses_a_misfitting_env_with_exit_2_and_one_line(tmp_path, env, settings, words):
    args = ["--env", env, "--credit", "grpo+rubric", "--out", str(tmp_path / "run")]
    r = cli("train", *TINY_RUN, *args, *(["--credit-settings", settings] if settings else []))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and env in lines[0]
