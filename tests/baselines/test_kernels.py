"""The shared advantage kernels against values worked out by hand."""

import pytest
import torch

from agentgym.baselines.batch import Batch, Trajectory, Turn
from agentgym.baselines.credit._kernels import (
    centre,
    leave_one_out,
    relative,
    state_buckets,
    zscore,
)


def test_zscore_of_a_group():
    # mean 0.5, unbiased std sqrt(1/3) = 0.57735
    R = torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert zscore(R, 0.0).tolist() == pytest.approx([0.866025, -0.866025, 0.866025, -0.866025])


def test_relative_centres_and_scales_by_the_rows_not_by_x():
    rows = torch.tensor([0.0, 2.0, 4.0])  # mean 2, std 2
    x = torch.tensor([4.0, 0.0])
    assert relative(x, rows).tolist() == [2.0, -2.0]
    assert relative(x, rows, eps=0.0).tolist() == [1.0, -1.0]


@pytest.mark.parametrize("rows", [[3.0], [0.5, 0.5, 0.5]])
def test_a_group_without_contrast_carries_no_signal(rows):
    R = torch.tensor(rows, dtype=torch.float64)
    for eps in (None, 1e-6):
        out = relative(R, R, eps)
        assert out.tolist() == [0.0] * len(rows) and out.dtype == torch.float64


def test_leave_one_out_is_the_mean_of_the_others():
    R = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # rollout 0: 1 - (0 + 0 + 1) / 3 = 2/3; rollout 1: 0 - (1 + 0 + 1) / 3 = -2/3
    assert leave_one_out(R).tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])


def test_centre_in_plain_floats():
    assert centre([1.0, 2.0, 6.0]) == [-2.0, -1.0, 3.0]
    assert centre([]) == []


def _traj(group, states):
    turns = [
        Turn(prompt_ids=torch.arange(1), response_ids=torch.arange(1), state_key=s) for s in states
    ]
    return Trajectory(task_id="t", group_id=group, turns=turns)


def test_state_buckets_split_by_group_and_state_in_first_seen_order():
    batch = Batch(
        trajectories=[_traj("g1", ["a", "b"]), _traj("g1", ["a", "c"]), _traj("g2", ["a"])]
    )
    assert state_buckets(batch, batch.keys(), "test") == [
        [(0, 0), (1, 0)],
        [(0, 1)],
        [(1, 1)],
        [(2, 0)],
    ]


def test_state_buckets_name_the_variant_when_a_state_key_is_missing():
    batch = Batch(trajectories=[_traj("g", ["a", None])])
    with pytest.raises(ValueError, match="gigpo: trajectory 0 turn 1 has no state_key"):
        state_buckets(batch, batch.keys(), "gigpo")
