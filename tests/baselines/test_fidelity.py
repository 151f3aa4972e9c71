"""Credit fidelity's parts: the uniform policy, the paired truth and the statistics."""

import math

import numpy as np
import pytest

from agentgym.baselines.bench.fidelity import (
    batch_noise,
    fidelity,
    paired_difference,
    reliability,
    sign_agreement,
    spearman,
    truth_summary,
)
from agentgym.baselines.policies.uniform import UniformPolicy, sequence_logprobs
from agentgym.baselines.truth import TurnTruth, paired
from agentgym.core.errors import BadInput


class _Tokens:
    eos_id = 0

    def decode(self, ids):
        return " ".join(map(str, ids))


def test_uniform_sequence_logprobs_make_every_choice_equally_likely():
    choices = [(1, 2), (1, 3), (4,), (1,)]
    for pick in range(len(choices)):
        logps = sequence_logprobs(choices, pick, eos=0)
        assert len(logps) == len(choices[pick]) + 1
        assert math.isclose(sum(logps), math.log(1 / 4))
    # the shared first token carries three of the four choices
    assert math.isclose(sequence_logprobs(choices, 0, eos=0)[0], math.log(3 / 4))


def test_uniform_policy_draws_evenly_and_replays_a_key():
    policy = UniformPolicy(_Tokens())
    allowed = [[(1, 2), (1, 3), (4,)]]
    picks = [
        tuple(policy.generate([[9]], max_new_tokens=8, gumbel_keys=[key], allowed=allowed)[0].ids)
        for key in range(600)
    ]
    counts = {seq: picks.count(seq) for seq in set(picks)}
    assert sorted(counts) == [(1, 2, 0), (1, 3, 0), (4, 0)]
    assert all(150 <= c <= 250 for c in counts.values())  # 200 expected each; 5 sigma is 58
    again = policy.generate([[9]], max_new_tokens=8, gumbel_keys=[7], allowed=allowed)
    assert tuple(again[0].ids) == picks[7]
    with pytest.raises(BadInput, match="admissible actions"):
        policy.generate([[9]], max_new_tokens=8, allowed=[None])


def test_paired_truth_is_the_mean_difference_with_its_standard_error():
    truth = paired([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    assert truth.advantage == pytest.approx(0.5)
    assert truth.q == pytest.approx(0.75) and truth.v == pytest.approx(0.25)
    assert truth.se == pytest.approx(np.std([1, 0, 0, 1], ddof=1) / 2)
    assert truth.halves == (0.5, 0.5) and truth.n == 4 and not truth.exact


def _exact(a):
    return TurnTruth(advantage=a, se=0.0, q=a, v=0.0, halves=(a, a))


def test_perfect_reversed_and_absent_credit():
    truth = {(i, k): _exact(float(i - k)) for i in range(6) for k in range(3)}
    groups = {i: f"g{i // 2}" for i in range(6)}
    same = {key: t.advantage for key, t in truth.items()}
    perfect = fidelity(same, truth, groups)
    assert perfect["spearman"] == pytest.approx(1.0) and perfect["sign_agreement"] == 1.0
    assert perfect["sign_ci"] == [1.0, 1.0]
    assert perfect["ci_low"] == pytest.approx(1.0)
    reversed_ = fidelity({key: -a for key, a in same.items()}, truth, groups)
    assert reversed_["spearman"] == pytest.approx(-1.0) and reversed_["sign_agreement"] == 0.0
    none = fidelity(dict.fromkeys(same, 0.0), truth, groups)
    assert none["spearman"] == 0.0 and none["sign_agreement"] == 0.0
    assert none["credited_share"] == 0.0
    # turns whose true advantage is 0 have no sign to agree with
    assert perfect["resolved_turns"] == sum(1 for t in truth.values() if t.advantage != 0)


def test_unresolved_estimates_do_not_count_for_signs():
    noisy = TurnTruth(advantage=0.1, se=0.1, q=0.1, v=0.0, halves=(0.0, 0.2), n=16)
    clear = TurnTruth(advantage=0.5, se=0.1, q=0.5, v=0.0, halves=(0.4, 0.6), n=16)
    share, n = sign_agreement(np.array([-1.0, 1.0]), [noisy, clear])
    assert (share, n) == (1.0, 1)


def test_truth_quality_and_batch_noise():
    exact = {(0, k): _exact(float(k)) for k in range(4)}
    assert reliability(list(exact.values())) == 1.0
    assert truth_summary(exact)["median_se"] == 0.0
    halves = [TurnTruth(float(k), 0.1, 0.0, 0.0, (float(k), float(k) + 0.1), 8) for k in range(5)]
    assert reliability(halves) == pytest.approx(1.0)
    full = {(0, k): float(k) for k in range(4)}
    assert batch_noise(full, [full, full]) == 0.0
    shaken = [{key: v + s for key, v in full.items()} for s in (-1.0, 1.0)]
    assert batch_noise(full, shaken) == pytest.approx(2.0 / np.var([0, 1, 2, 3]))
    assert math.isnan(batch_noise(dict.fromkeys(full, 1.0), shaken))
    assert spearman([1, 2, 3], [3, 3, 3]) == 0.0


def test_paired_difference_uses_the_same_turns_for_both():
    truth = {(i, k): _exact(float(i * 3 + k)) for i in range(6) for k in range(3)}
    groups = {i: f"g{i}" for i in range(6)}
    perfect = {key: t.advantage for key, t in truth.items()}
    # the baseline gives each rollout one value: right across rollouts, blind within them
    per_rollout = {(i, k): float(i) for i, k in truth}
    vs = paired_difference(perfect, per_rollout, truth, groups)
    rho = spearman(list(per_rollout.values()), list(perfect.values()))
    assert vs["diff"] == pytest.approx(1.0 - rho) and 0 < vs["diff"] < 0.2
    assert 0 < vs["ci_low"] <= vs["ci_high"] < 0.2  # every resample ranks the perfect one higher
    same = paired_difference(perfect, perfect, truth, groups)
    assert (same["diff"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)
