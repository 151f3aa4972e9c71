"""HierR's optimal matching and its all-optima certificate (CREDIT.md §13): hand-computed
cases, a brute force over every matching, the bound past EXACT_LIMIT, and the env's info."""

import itertools
import json
from collections import Counter

import numpy as np
import pytest

import agentgym
from agentgym.envs.tools.rewards import (
    CERTIFIED,
    EXACT_LIMIT,
    canonical,
    certify,
    hierr,
    tool_exact_match,
)


def c(name, **arguments):
    return {"name": name, "arguments": arguments}


def brute_force(pred, gold):
    """Every full assignment of one name's calls, each gold call its own turn (weights are
    >= 0, so every optimum extends to one): per layer its (min, max) over the optimal ones,
    and how many distinct optima there are (pairs sharing no key left out, equal calls
    interchangeable)."""
    assert len(pred) == len(gold) and len({x["name"] for x in pred + gold}) == 1

    def pair(p, g):
        pk, gk = set(p["arguments"]), set(g["arguments"])
        if not pk | gk:
            return 1.0, 1.0
        same = sum(p["arguments"][k] == g["arguments"][k] for k in pk & gk)
        return len(pk & gk) / len(pk | gk), same / len(pk | gk)

    scores = np.array([[pair(p, g) for g in gold] for p in pred])
    weight = scores.sum(axis=2)
    perms = np.array(list(itertools.permutations(range(len(gold)))))
    rows = np.arange(len(pred))
    totals = weight[rows, perms].sum(axis=1)
    best = perms[totals > totals.max() - 1e-9]
    keys = scores[rows, best, 0].sum(axis=1) / len(gold)
    values = scores[rows, best, 1].sum(axis=1) / len(gold)
    # format 1, name F1 1, parallel 1 (no gold turn holds two calls); each layer gates the next
    gated_values = np.where(keys > 0, values, 0.0)
    total = 2 + keys + gated_values + ((keys > 0) & (values > 0))
    distinct = {
        tuple(
            sorted(
                (canonical(pred[i]), canonical(gold[j]))
                for i, j in enumerate(perm)
                if weight[i, j] > 1e-9
            )
        )
        for perm in best
    }
    ranges = {
        m: (float(x.min()), float(x.max()))
        for m, x in (("param_keys", keys), ("param_values", gated_values), ("hierr", total / 5))
    }
    return ranges, len(distinct)


def test_a_unique_optimum_pairs_calls_by_content_not_by_order():
    gold = [[c("f", a=1, b=2)], [c("f", a=3, b=4)]]
    pred = [[c("f", a=3, b=4)], [c("f", a=1, b=2)]]
    # in order (the old rule) both pairs share keys but no value: param_values 0, which gates
    # parallel off, hierr (1 + 1 + 1 + 0 + 0) / 5 = 0.6. The optimum pairs equal calls: all 1.
    layers = hierr(pred, gold, format_ok=True)
    assert layers["param_values"] == 1.0 and layers["hierr"] == 1.0
    cert = certify(pred, gold, format_ok=True)
    assert cert.unique and not cert.bounded and cert.ambiguous_items == []
    assert cert.ranges == {m: (1.0, 1.0) for m in CERTIFIED}


def test_two_tied_matchings_that_split_the_layers_differently_give_a_range():
    gold = [[c("f", a=1, b=1)], [c("f", a=2)]]
    pred = [[c("f", a=2, b=2), c("f", a=1)]]
    # key Jaccard + value share of each pair:
    #   f(a=2,b=2)~f(a=1,b=1): keys 1,   values 0   -> 1     f(a=1)~f(a=2): keys 1, values 0 -> 1
    #   f(a=2,b=2)~f(a=2):     keys 1/2, values 1/2 -> 1     f(a=1)~f(a=1,b=1): 1/2, 1/2     -> 1
    # both matchings weigh 2. Straight: param_keys 2/2 = 1, param_values 0, which gates
    # parallel (1.0: no gold turn has two calls) to 0: hierr (1 + 1 + 1 + 0 + 0) / 5 = 0.6.
    # Crossed: param_keys 1/2, param_values 1/2, parallel 1: hierr (1 + 1 + .5 + .5 + 1) / 5 = 0.8.
    cert = certify(pred, gold, format_ok=True)
    assert not cert.unique and not cert.bounded
    assert cert.ranges["param_keys"] == pytest.approx((0.5, 1.0))
    assert cert.ranges["param_values"] == pytest.approx((0.0, 0.5))
    assert cert.ranges["hierr"] == pytest.approx((0.6, 0.8))
    assert cert.ambiguous_items == sorted(canonical(x) for x in pred[0])
    chosen = hierr(pred, gold, format_ok=True)  # one of the two optima
    assert chosen["hierr"] == pytest.approx(0.6) or chosen["hierr"] == pytest.approx(0.8)


def test_a_tie_that_moves_no_layer_is_not_unique_but_has_ranges_of_width_zero():
    # every pair: keys 1, values 1/2 (a equal, b not); both matchings weigh 3
    pred = [[c("f", a=1, b=5), c("f", a=1, b=6)]]
    gold = [[c("f", a=1, b=2), c("f", a=1, b=3)]]
    cert = certify(pred, gold, format_ok=True)
    assert not cert.unique and len(cert.ambiguous_items) == 2
    assert cert.ranges["param_keys"] == (1.0, 1.0)
    assert cert.ranges["param_values"] == (0.5, 0.5)


def test_identical_calls_are_interchangeable_not_ambiguous():
    pred = [[c("f", a=1), c("f", a=1)]]
    gold = [[c("f", a=1, b=2), c("f", a=1, b=3)]]
    cert = certify(pred, gold, format_ok=True)
    assert cert.unique and cert.ambiguous_items == []
    # each pair: keys 1/2, values 1/2; parallel 0 (the gold turn's calls were not all issued)
    assert cert.ranges["hierr"] == pytest.approx((0.6, 0.6))


def test_tool_exact_match_is_the_same_under_every_maximum_matching_of_equal_calls():
    # the same example is ambiguous for HierR; for exact equality every maximum matching
    # pairs as many calls as the multiset intersection, so the score has one value
    pred = [c("f", a=2, b=2), c("f", a=1), c("f", a=1), c("g")]
    gold = [c("f", a=1), c("f", a=1), c("f", a=1, b=1), c("g"), c("g")]
    sizes = set()
    for perm in itertools.permutations(range(len(gold)), len(pred)):
        pairs = [i for i, j in enumerate(perm) if pred[i] == gold[j]]
        sizes.add(len(pairs))
    best = max(sizes)
    intersection = sum((Counter(map(canonical, pred)) & Counter(map(canonical, gold))).values())
    assert best == intersection == 3
    assert tool_exact_match(pred, gold) == best / 5
    assert not certify([pred[:2]], [[gold[2]], [c("f", a=2)]], format_ok=True).unique


CALL_POOL = [
    *(c("f", a=x, b=y) for x in (1, 2) for y in (1, 2)),
    c("f", a=1),
    c("f", a=2),
    c("f", b=3),
]
"""Calls of one name with overlapping keys and values: ties are common (15 of the 60 cases
below have several optima, 2 of them with different layers)."""


@pytest.mark.parametrize("seed", range(60))
def test_the_exact_certificate_equals_a_brute_force_over_every_matching(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    pred = [CALL_POOL[i] for i in rng.integers(len(CALL_POOL), size=n)]
    gold = [CALL_POOL[i] for i in rng.integers(len(CALL_POOL), size=n)]
    ranges, optima = brute_force(pred, gold)
    turns = [[g] for g in gold]
    cert = certify([pred], turns, format_ok=True)
    assert not cert.bounded
    assert cert.unique == (optima == 1)
    layers = hierr([pred], turns, format_ok=True)
    for m in CERTIFIED:
        assert cert.ranges[m] == pytest.approx(ranges[m])
        lo, hi = cert.ranges[m]  # hierr's own matching is one of the optima
        assert lo - 1e-9 <= layers[m] <= hi + 1e-9


def _large(n):
    """n calls a side on one name: blocks of the two-call tie above (values differ between
    blocks, so any two calls with the same keys also pair at weight 1), then f(z=1) twice."""
    pred, gold = [], []
    for i in range(n // 2):
        gold += [c("f", a=10 * i + 1, b=10 * i + 1), c("f", a=10 * i + 2)]
        pred += [c("f", a=10 * i + 2, b=10 * i + 2), c("f", a=10 * i + 1)]
    return pred + [c("f", z=1)] * (n % 2), gold + [c("f", z=1)] * (n % 2)


def test_past_the_limit_the_ranges_are_outer_bounds_of_the_true_ones():
    pred, gold = _large(EXACT_LIMIT + 1)
    turns = [[g] for g in gold]
    cert = certify([pred], turns, format_ok=True)
    assert cert.bounded and not cert.unique
    assert cert.ambiguous_items == sorted({canonical(p) for p in pred})  # none certified
    truth, _ = brute_force(pred, gold)  # 9! matchings, still feasible for a test
    layers = hierr([pred], turns, format_ok=True)
    for m in CERTIFIED:
        lo, hi = cert.ranges[m]
        assert lo - 1e-9 <= truth[m][0] <= layers[m] <= truth[m][1] + 1e-9 <= hi + 2e-9
    assert truth["param_values"][1] - truth["param_values"][0] > 0.4  # a real spread
    # one call fewer a side is within the limit: exact, and it agrees with the brute force
    pred, gold = _large(EXACT_LIMIT)
    exact = certify([pred], [[g] for g in gold], format_ok=True)
    truth, optima = brute_force(pred, gold)
    assert not exact.bounded and exact.unique == (optima == 1) and optima > 1
    assert truth["hierr"][1] - truth["hierr"][0] > 0.1
    for m in CERTIFIED:
        assert exact.ranges[m] == pytest.approx(truth[m])


# ---------------------------------------------------------------------------- the env


def test_the_env_reports_the_certificate_of_its_episode():
    env = agentgym.make("agentgym/Tools-Ecommerce-v1")
    env.reset(options={"task_id": "ecommerce-dependent-0050"})
    # gold: search_products(query=lamp, sort=rating_desc, in_stock_only=true, limit=1), then
    # add_to_cart. One search with all four values changed (keys 1, values 0) and one with two
    # of the four arguments, both right (keys 1/2, values 1/2) tie for the gold search.
    calls = [
        c("search_products", query="desk", sort="price_asc", in_stock_only=False, limit=2),
        c("search_products", query="lamp", limit=1),
    ]
    env.step("".join(f"<tool_call>{json.dumps(x)}</tool_call>" for x in calls))
    *_, info = env.step("<summary>Done.</summary>")
    cert, parts = info["certificate"], info["reward_components"]
    # tool names: 1 of 2 predicted, 1 of 2 gold -> F1 1/2. First search matched: keys 1/2,
    # values 0, parallel gated: (1 + .5 + .5 + 0 + 0) / 5 = 0.4. Second: keys 1/4, values
    # 1/4, parallel 1: (1 + .5 + .25 + .25 + 1) / 5 = 0.6.
    assert cert["unique"] is False and cert["bounded"] is False
    assert cert["ranges"]["hierr"] == pytest.approx([0.4, 0.6])
    assert cert["ranges"]["param_values"] == pytest.approx([0.0, 0.25])
    assert sorted(cert["ambiguous"]) == sorted(canonical(x) for x in calls)
    assert parts["hierr"] in (pytest.approx(0.4), pytest.approx(0.6))


def test_the_oracle_episode_has_a_unique_optimum_and_no_certificate_before_the_end():
    env = agentgym.make("agentgym/Tools-Ecommerce-v1")
    _, info = env.reset(options={"task_id": "ecommerce-parallel-0001"})
    assert "certificate" not in info
    while True:
        *_, term, trunc, info = env.step(env.unwrapped.oracle_action())
        if term or trunc:
            break
        assert "certificate" not in info
    assert info["certificate"] == {
        "unique": True,
        "bounded": False,
        "ranges": {m: [1.0, 1.0] for m in CERTIFIED},
        "ambiguous": [],
    }
