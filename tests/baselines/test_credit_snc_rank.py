"""SNC's rank form of the frontier-relative term: the centred rank of a sample's action among
the distinct actions observed at its state, each valued by its mean step return."""

import pytest
import torch

# the batch helpers of the main SNC tests (tests/baselines is on sys.path under pytest)
from test_credit_snc import run, shared_state_group, traj, turn, value

from agentgym.baselines.credit import Batch, get
from agentgym.baselines.credit.snc import frontier_rank
from agentgym.core.errors import BadInput

SNC = get("snc")
RANK = {"snc": {"frontier": "rank"}}


def acting(state, action, **kw):
    """A turn from ``state`` that took the menu action ``action``."""
    t = turn(state, **kw)
    t.extras["action"] = action
    return t


def three_options_group():
    """Four one-turn rollouts from s0: action a twice (R^s 1 and 0, value .5), b once (the
    step penalty, R^s −.1), c once (R^s 1)."""
    return Batch(
        trajectories=[
            traj([acting("s0", "a")], 1.0),
            traj([acting("s0", "a")], 0.0),
            traj([acting("s0", "b", reward=-0.1)], 0.0),
            traj([acting("s0", "c")], 1.0),
        ]
    )


def test_three_options_by_hand():
    adv = run(three_options_group(), RANK)
    # A^E over rows (1, 0, 0, 1): mean .5 -> (.5, −.5, −.5, .5)
    # option values b −.1 < a .5 < c 1 -> ranks −.5, 0, +.5; both a samples get a's rank
    expected = {(0, 0): 0.5 + 0.0, (1, 0): -0.5 + 0.0, (2, 0): -0.5 - 0.5, (3, 0): 0.5 + 0.5}
    for key, v in expected.items():
        assert value(adv, key) == pytest.approx(v, abs=1e-6)
    doubled = run(three_options_group(), {"snc": {"frontier": "rank", "omega": 2.0}})
    assert value(doubled, (2, 0)) == pytest.approx(-0.5 - 1.0, abs=1e-6)
    assert value(doubled, (3, 0)) == pytest.approx(0.5 + 1.0, abs=1e-6)


def test_frontier_rank_by_hand_and_scale_free():
    assert frontier_rank([1.0, 0.0, -0.1, 1.0], "aabc") == [0.0, 0.0, -0.5, 0.5]
    # a lucky rollout 100× larger moves its option to the top and no further
    assert frontier_rank([100.0, 0.0, -0.1, 1.0], "aabc") == [0.5, 0.5, -0.5, 0.0]
    # four options: ranks 0..3 -> −.5, −1/6, 1/6, .5
    assert frontier_rank([3.0, 1.0, 2.0, 0.0], "wxyz") == pytest.approx([0.5, -1 / 6, 1 / 6, -0.5])


def test_tied_options_share_the_average_rank():
    # values a 0, b 1, c 1: b and c share ranks 1 and 2 -> 1.5 / 2 − .5 = .25
    assert frontier_rank([0.0, 1.0, 1.0], "abc") == [-0.5, 0.25, 0.25]
    # b's two samples average to c's value: tied too
    assert frontier_rank([0.0, 2.0, 0.0, 1.0], "abbc") == [-0.5, 0.25, 0.25, 0.25]
    batch = Batch(
        trajectories=[
            traj([acting("s0", "a")], 0.0),
            traj([acting("s0", "b")], 1.0),
            traj([acting("s0", "c")], 1.0),
        ]
    )
    adv = run(batch, RANK)
    assert value(adv, (1, 0)) == value(adv, (2, 0))
    A_E = 1 - 2 / 3
    assert value(adv, (1, 0)) == pytest.approx(A_E + 0.25, abs=1e-6)
    assert value(adv, (0, 0)) == pytest.approx(-2 / 3 - 0.5, abs=1e-6)
    # every option tied: 0
    assert frontier_rank([1.0, 1.0, 1.0], "abc") == [0.0, 0.0, 0.0]


def test_singleton_and_one_option_buckets_give_zero():
    assert frontier_rank([0.7], "a") == [0.0]
    assert frontier_rank([1.0, 0.0, 0.3], "aaa") == [0.0, 0.0, 0.0]
    # s0: two samples, one action (mean form: ±.5, rank form: 0); s1 and s2 singletons
    batch = Batch(
        trajectories=[
            traj([acting("s0", "a"), acting("s1", "x")], 1.0),
            traj([acting("s0", "a"), acting("s2", "y")], 0.0),
        ]
    )
    rank = run(batch, {"snc": {"frontier": "rank", "gamma": 0.5}})
    mean = run(Batch(trajectories=batch.trajectories), {"snc": {"frontier": "mean", "gamma": 0.5}})
    for k in (0, 1):  # A^E alone: ±.5
        assert value(rank, (0, k)) == pytest.approx(0.5, abs=1e-6)
        assert value(rank, (1, k)) == pytest.approx(-0.5, abs=1e-6)
    # R^s at s0: .5 and 0 -> the mean form does credit them
    assert value(mean, (0, 0)) == pytest.approx(0.5 + 0.25, abs=1e-6)


def test_without_action_text_the_response_tokens_name_the_option():
    def tokens(ids, outcome):
        t = turn("s0")
        t.response_ids = torch.tensor(ids)
        return traj([t], outcome)

    batch = Batch(trajectories=[tokens([1, 2], 1.0), tokens([1, 2], 0.0), tokens([3], 0.0)])
    adv = run(batch, RANK)
    # options (1, 2): value .5 > (3,): 0 -> +.5 and −.5 on top of A^E (2/3, −1/3, −1/3)
    assert value(adv, (0, 0)) == pytest.approx(2 / 3 + 0.5, abs=1e-6)
    assert value(adv, (1, 0)) == pytest.approx(-1 / 3 + 0.5, abs=1e-6)
    assert value(adv, (2, 0)) == pytest.approx(-1 / 3 - 0.5, abs=1e-6)


@pytest.mark.parametrize("make", [shared_state_group, three_options_group])
def test_default_is_the_mean_form(make):
    assert SNC({}).cfg.frontier == "mean"
    for extra in ({}, {"gamma": 0.5, "lam": 0.5}):
        default = run(make(), {"snc": extra})
        mean = run(make(), {"snc": {**extra, "frontier": "mean"}})
        assert set(default) == set(mean)
        for key, a in default.items():
            assert torch.equal(a, mean[key])
    rank = run(make(), RANK)
    assert any(not torch.equal(a, rank[key]) for key, a in default.items())


def test_an_unknown_frontier_is_refused():
    for bad in ("median", "Rank", ""):
        with pytest.raises(BadInput, match=r"snc frontier must be one of \('mean', 'rank'\)"):
            SNC({"snc": {"frontier": bad}})
