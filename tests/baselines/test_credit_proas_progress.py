"""ProAS with the env's progress signal: ``progress="env"`` calls a step advancing when
``info["progress"]`` rose over it, ``"both"`` when that or the graph's node progress rose;
reasonable steps still come from the graph, and steps without the signal keep its labels."""

import pytest
import torch
from test_credit_proas import FAILURE, SUCCESS, batch_with, path, shaped, turn_values

from agentgym.baselines.credit import Batch, get
from agentgym.baselines.credit.proas import env_rises
from agentgym.core.errors import BadInput

ProAS = get("proas")

# progress after each turn of FAILURE (0.0 before the first): it rises on turns 0, 1 and 4.
# graph labels: reasonable, drift, advancing, drift, drift
# env labels:   reasonable, advancing (rose), drift (flat), drift, advancing (rose)
# both:         reasonable, advancing, advancing (graph), drift, advancing
PROGRESS = [0.25, 0.5, 0.5, 0.5, 0.75]


def with_progress(batch, progress=PROGRESS, i=1):
    """Set ``info["progress"]`` on rollout ``i``'s turns (None: leave the key out)."""
    for turn, p in zip(batch.trajectories[i].turns, progress, strict=True):
        turn.info.pop("progress", None)
        if p is not None:
            turn.info["progress"] = p
    return batch


def progress_batch(per_turn, progress=PROGRESS):
    return with_progress(batch_with(per_turn), progress)


def test_env_rises_compares_each_turn_with_the_one_before():
    traj = progress_batch([-1.0] * 5).trajectories[1]
    assert env_rises(traj) == [True, True, False, False, True]
    traj.turns[2].info.pop("progress")  # no signal on turn 2, nor a "before" for turn 3
    assert env_rises(traj) == [True, True, None, None, True]


@pytest.mark.parametrize(
    ("progress", "expected"),
    [
        # drift = {2, 3}; future weights 2/3, 1/3 of M = −5
        ("env", [0.0, 0.0, -10 / 3, -5 / 3, 0.0]),
        # drift = {3}: it takes all of M
        ("both", [0.0, 0.0, 0.0, -5.0, 0.0]),
        # the graph alone: drift = {1, 3, 4}, weights 3/6, 2/6, 1/6
        ("graph", [0.0, -2.5, 0.0, -5 / 3, -5 / 6]),
    ],
)
def test_env_progress_protects_steps_the_graph_calls_drift(progress, expected):
    batch = progress_batch([-1.0] * 5)
    shaped(batch, {"proas": {"progress": progress}})
    got = turn_values(batch, 1)
    assert got == pytest.approx(expected)
    assert sum(got) == pytest.approx(-5.0)  # negative mass preserved exactly
    assert turn_values(batch, 0) == [1.0, 1.0, 1.0]  # the success is untouched


def test_env_progress_counts_and_moves_only_negative_mass():
    batch = progress_batch([-1.0] * 5)
    shaped(batch, {"proas": {"progress": "env"}})
    assert batch.metrics["proas/reasonable_share"] == pytest.approx(4 / 8)  # + the success
    assert batch.metrics["proas/advancing_share"] == pytest.approx(2 / 8)
    assert batch.metrics["proas/drift_share"] == pytest.approx(2 / 8)
    assert batch.metrics["proas/masked_steps"] == 3.0
    assert batch.metrics["proas/moved_mass"] == pytest.approx(-3.0)
    assert batch.metrics["proas/progress_fallback_steps"] == 0.0

    mixed = progress_batch([-1.0, -2.0, -0.5, 0.5, -1.0])
    shaped(mixed, {"proas": {"progress": "env"}})
    # negative steps 0, 1, 2, 4: M = −4.5; the only negative drift step is 2
    assert turn_values(mixed, 1) == pytest.approx([0.0, 0.0, -4.5, 0.5, 0.0])

    linear = progress_batch([-1.0] * 5)
    shaped(linear, {"proas": {"progress": "env", "weights": "linear"}})
    # drift k = 2, 3 (0-based) of K = 5: K − k = 3, 2
    assert turn_values(linear, 1) == pytest.approx([0.0, 0.0, -3.0, -2.0, 0.0])


def test_default_is_the_graph_exactly():
    default = progress_batch([-1.0, -2.0, -0.5, 0.5, -1.0])
    graph = progress_batch([-1.0, -2.0, -0.5, 0.5, -1.0])
    assert ProAS().cfg.progress == "graph"
    shaped(default)
    shaped(graph, {"proas": {"progress": "graph"}})
    assert default.advantages.keys() == graph.advantages.keys()
    for key, a in default.advantages.items():
        assert torch.equal(a, graph.advantages[key])
    assert default.metrics == graph.metrics
    assert "proas/progress_fallback_steps" not in default.metrics
    # the env's signal is on the batch, yet the default labels by the graph alone
    assert turn_values(default, 1) == pytest.approx([0.0, -3.0, 0.0, 0.5, -1.5])


@pytest.mark.parametrize("progress", ["env", "both"])
def test_steps_without_env_progress_keep_the_graph_labels(progress):
    # no signal at all: the same advantages as the graph
    bare = progress_batch([-1.0] * 5, [None] * 5)
    shaped(bare, {"proas": {"progress": progress}})
    assert turn_values(bare, 1) == pytest.approx([0.0, -2.5, 0.0, -5 / 3, -5 / 6])
    assert bare.metrics["proas/progress_fallback_steps"] == 4.0  # all but the reasonable

    # turn 2 lacks it (graph: advancing), so turn 3 has no "before" (graph: drift); turn 4
    # lacks it (graph: drift); turns 0, 1 rose. Drift = {3, 4}: weights 2/3, 1/3 of M = −5
    partial = progress_batch([-1.0] * 5, [0.25, 0.5, None, 0.5, None])
    shaped(partial, {"proas": {"progress": progress}})
    assert turn_values(partial, 1) == pytest.approx([0.0, 0.0, 0.0, -10 / 3, -5 / 3])
    assert partial.metrics["proas/progress_fallback_steps"] == 3.0


def test_first_turn_compares_with_the_reset_progress_when_kept():
    wander = [("A", "q"), ("Q", "r")]  # both drift on the graph (p stays 0)
    for reset, expected in ((None, [0.0, -2.0]), (0.25, [-4 / 3, -2 / 3])):
        batch = Batch(trajectories=[path(SUCCESS, "G", won=True), path(wander, "R", won=False)])
        batch.advantages = {(0, k): torch.ones(2) for k in range(3)}
        batch.advantages.update({(1, k): -torch.ones(2) for k in range(2)})
        with_progress(batch, [0.25, 0.25])
        if reset is not None:  # snapshots on: turn 0 keeps the reset's info
            batch.trajectories[1].turns[0].extras["observation_info"] = {"progress": reset}
        # without it, progress before turn 0 is 0.0: turn 0 rose and is protected
        shaped(batch, {"proas": {"progress": "env"}})
        assert turn_values(batch, 1) == pytest.approx(expected)


def test_progress_setting_is_checked_and_needs_no_new_info():
    with pytest.raises(BadInput, match=r"proas progress must be one of .*'oracle'"):
        ProAS({"proas": {"progress": "oracle"}})
    for progress in ("graph", "env", "both"):
        assert ProAS({"proas": {"progress": progress}}).requires_info == {"state_key", "won"}
    assert len(FAILURE) == len(PROGRESS)
