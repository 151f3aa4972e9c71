import math

import pytest
import torch

from agentgym.baselines.losses import (
    AGGREGATIONS,
    aggregate,
    clipped_surrogate,
    gae,
    gae_loop,
    kl_k3,
    value_loss,
    whiten,
)

# ---------------------------------------------------------------- clipped surrogate


def test_clipped_surrogate_by_hand():
    ratio = torch.tensor([1.5, 1.5, 0.5, 0.5])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss = clipped_surrogate(ratio.log(), torch.zeros(4), adv, 0.2, 0.2)
    # -min(ρA, clip(ρ)A): gains are clipped, losses are not
    torch.testing.assert_close(loss, torch.tensor([-1.2, 1.5, -0.5, 0.8]))


def test_clip_higher_is_asymmetric():
    loss = clipped_surrogate(torch.tensor([1.5]).log(), torch.zeros(1), torch.ones(1), 0.2, 0.28)
    torch.testing.assert_close(loss, torch.tensor([-1.28]))


def test_clipped_surrogate_has_no_gradient_once_clipped():
    logp = torch.tensor([math.log(1.5), math.log(1.1)], requires_grad=True)
    clipped_surrogate(logp, torch.zeros(2), torch.ones(2)).sum().backward()
    assert logp.grad[0] == 0 and logp.grad[1] != 0


# ---------------------------------------------------------------- aggregation

LOSS = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
MASK = torch.tensor([1, 1, 0, 1, 1, 1])
SEQ = torch.tensor([0, 0, 0, 1, 1, 1])
TURN = torch.tensor([0, 0, 1, 2, 2, 3])  # turn 1 has no policy token


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 18 / 5),
        ("seq-mean-token-mean", ((1 + 2) / 2 + (4 + 5 + 6) / 3) / 2),
        ("seq-mean-token-sum", (3 + 15) / 2),
        ("constant-norm", (3 / 10 + 15 / 10) / 2),
        # each rollout's sum over its active turns (turn 1 has none), then the mean: CREDIT.md
        # §5; a global Σ / |K| (18 / 3) weighted rollouts by their turn counts
        ("turn-normalized", ((1 + 2) / 1 + (4 + 5 + 6) / 2) / 2),
    ],
)
def test_every_aggregation_mode_by_hand(mode, expected):
    out = aggregate(LOSS, MASK, mode, seq_ids=SEQ, turn_ids=TURN, constant=10)
    assert out.item() == pytest.approx(expected)


def test_the_hand_example_covers_every_mode():
    assert set(AGGREGATIONS) == {
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "constant-norm",
        "turn-normalized",
    }


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_two_dimensional_input_uses_rows_as_sequences(mode):
    flat = aggregate(LOSS, MASK, mode, seq_ids=SEQ, turn_ids=SEQ, constant=10)
    rows = aggregate(LOSS.view(2, 3), MASK.view(2, 3), mode, constant=10)
    assert rows.item() == pytest.approx(flat.item())


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_masked_tokens_never_leak(mode):
    poisoned = LOSS.clone()
    poisoned[2] = float("nan")
    out = aggregate(poisoned, MASK, mode, seq_ids=SEQ, turn_ids=TURN, constant=10)
    ref = aggregate(LOSS, MASK, mode, seq_ids=SEQ, turn_ids=TURN, constant=10)
    assert out.item() == pytest.approx(ref.item())


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_empty_mask_gives_zero(mode):
    out = aggregate(LOSS, torch.zeros(6), mode, seq_ids=SEQ, turn_ids=TURN, constant=10)
    assert out.item() == 0.0


def test_aggregate_refuses_bad_arguments():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate(LOSS, MASK, "sum")
    with pytest.raises(ValueError, match="constant"):
        aggregate(LOSS, MASK, "constant-norm", seq_ids=SEQ)
    with pytest.raises(ValueError, match="seq_ids"):
        aggregate(LOSS, MASK, "seq-mean-token-mean")
    with pytest.raises(ValueError, match="seq_ids"):
        aggregate(LOSS, MASK, "turn-normalized", turn_ids=TURN)
    with pytest.raises(ValueError, match="turn_ids"):
        aggregate(LOSS, MASK, "turn-normalized", seq_ids=SEQ)


# ---------------------------------------------------------------- KL, value loss, whitening


def test_kl_k3_is_zero_when_equal_and_positive_otherwise():
    logp = torch.tensor([-0.1, -2.0, -5.0])
    assert torch.equal(kl_k3(logp, logp), torch.zeros(3))
    assert (kl_k3(logp, logp - 0.5) > 0).all()
    x = torch.tensor(-0.5)  # ref_logp − logp
    assert kl_k3(torch.tensor(0.0), x).item() == pytest.approx(math.exp(-0.5) + 0.5 - 1)


def test_kl_k3_is_clamped_like_verl():
    assert kl_k3(torch.tensor([-100.0]), torch.tensor([0.0])).item() == 10.0


def test_value_loss_by_hand():
    V, V_old, G = torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0])
    # clipped V = 0.5: max((1-2)², (0.5-2)²) / 2
    assert value_loss(V, V_old, G, clip=0.5).item() == pytest.approx(1.125)
    assert value_loss(V, V_old, G, clip=None).item() == pytest.approx(0.5)


def test_whiten_over_the_mask_only():
    x = torch.tensor([1.0, 2.0, 3.0, 100.0])
    mask = torch.tensor([1, 1, 1, 0])
    w = whiten(x, mask)
    torch.testing.assert_close(w, torch.tensor([-1.0, 0.0, 1.0, 0.0]), atol=1e-6, rtol=0)


# ---------------------------------------------------------------- GAE


def _random_episodes(T, seed):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, generator=g)
    values = torch.randn(T, generator=g)
    next_values = torch.cat([values[1:], torch.randn(1, generator=g)])
    ends = torch.rand(T, generator=g) < 0.1
    ends[-1] = True
    terminated = ends & (torch.rand(T, generator=g) < 0.5)
    truncated = ends & ~terminated
    # a new episode's first value is not the previous one's bootstrap
    next_values = torch.where(ends, torch.randn(T, generator=g), next_values)
    return rewards, values, next_values, terminated, truncated


@pytest.mark.parametrize("T", [1, 2, 3, 7, 64, 257])
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (0.5, 0.0), (0.9, 1.0)])
def test_vectorised_gae_equals_the_loop(T, gamma, lam):
    args = _random_episodes(T, seed=T)
    A_loop, G_loop = gae_loop(*args, gamma, lam)
    A_vec, G_vec = gae(*args, gamma, lam)
    torch.testing.assert_close(A_vec, A_loop, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(G_vec, G_loop, atol=1e-5, rtol=1e-5)


def test_vectorised_gae_with_a_batch_dimension():
    rows = [_random_episodes(33, seed=s) for s in range(4)]
    batched = [torch.stack(parts) for parts in zip(*rows, strict=True)]
    A_vec, _ = gae(*batched, 0.97, 0.9)
    for b, args in enumerate(rows):
        torch.testing.assert_close(A_vec[b], gae_loop(*args, 0.97, 0.9)[0], atol=1e-5, rtol=1e-5)


def test_gae_by_hand():
    # one terminated episode of 2 steps: r = (0, 1), V = (0.5, 0.25), γ = 0.9, λ = 0.5
    # δ1 = 1 − 0.25 = 0.75;  δ0 = 0 + 0.9·0.25 − 0.5 = −0.275;  A0 = δ0 + 0.45·δ1 = 0.0625
    r, V = torch.tensor([0.0, 1.0]), torch.tensor([0.5, 0.25])
    V_next = torch.tensor([0.25, 7.0])  # 7.0 is ignored: the episode terminated
    term, trunc = torch.tensor([False, True]), torch.tensor([False, False])
    for fn in (gae, gae_loop):
        A, G = fn(r, V, V_next, term, trunc, 0.9, 0.5)
        torch.testing.assert_close(A, torch.tensor([0.0625, 0.75]))
        torch.testing.assert_close(G, torch.tensor([0.5625, 1.0]))


@pytest.mark.parametrize("fn", [gae, gae_loop])
def test_truncated_bootstraps_and_terminated_does_not(fn):
    r, V, V_next = torch.zeros(1), torch.zeros(1), torch.ones(1)
    yes, no = torch.tensor([True]), torch.tensor([False])
    A_trunc, _ = fn(r, V, V_next, no, yes, 0.9, 1.0)
    A_term, _ = fn(r, V, V_next, yes, no, 0.9, 1.0)
    assert A_trunc.item() == pytest.approx(0.9)
    assert A_term.item() == 0.0


def test_gae_does_not_leak_across_episode_boundaries():
    r = torch.tensor([0.0, 0.0, 5.0])
    V = torch.zeros(3)
    trunc = torch.tensor([True, False, False])
    term = torch.tensor([False, False, True])
    A, _ = gae(r, V, torch.zeros(3), term, trunc, 1.0, 1.0)
    torch.testing.assert_close(A, torch.tensor([0.0, 5.0, 5.0]))


def test_gae_is_differentiable_through_the_scan():
    V = torch.randn(9, requires_grad=True)
    A, _ = gae(torch.randn(9), V, torch.randn(9), torch.zeros(9), torch.zeros(9), 0.9, 0.9)
    A.sum().backward()
    assert V.grad is not None and torch.isfinite(V.grad).all()
