"""The shop in text mode: WebShop's reward on hand-computed cases, its pages and actions, the
menu form, the oracle, and the reader of WebShop's own files."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from agentgym.core.errors import BadInput
from agentgym.envs.web.shop import reward as R
from agentgym.envs.web.shop.catalog import Goal, Product, catalog
from agentgym.registry import make

SMALL = "agentgym/Shop-Small-v0"
FIXTURE = Path(__file__).parent / "fixtures" / "webshop"
SHIRTS = "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts"


def _product(**changes):
    base = Product(
        asin="B0TEST0001",
        title="Norvale Cotton T-Shirt, Crew Neck",
        query="t-shirt",
        category="fashion",
        product_category=SHIRTS,
        price=19.99,
        attributes=("machine wash", "cotton", "crew neck"),
        options=(("color", ("navy", "black")), ("size", ("small", "medium"))),
        description="A soft shirt.",
        features=("Cotton: soft.",),
        reviews=(),
        rating=None,
    )
    return dataclasses.replace(base, **changes)


def _goal(**changes):
    base = Goal(
        asin="B0TEST0001",
        instruction="i need a machine wash cotton t-shirt",
        query="t-shirt",
        name="Norvale Cotton T-Shirt, Crew Neck",
        product_category=SHIRTS,
        attributes=("machine wash", "cotton"),
        options=(("color", "navy"), ("size", "medium")),
        price_upper=30.0,
        search="machine wash cotton t-shirt navy medium",
    )
    return dataclasses.replace(base, **changes)


# ---------------------------------------------------------------------------- the reward
def test_the_target_with_the_wanted_options_earns_the_full_reward():
    out = R.reward(_product(), _goal(), {"color": "navy", "size": "medium"})
    assert out["reward"] == 1.0 and out["r_type"] == 1.0 and out["title_score"] == 1.0


def test_a_missing_attribute_and_a_wrong_option_cost_their_share():
    # attributes 1 of 2 (no "machine wash" anywhere), options 1 of 2, price ok: (1 + 1 + 1) / 5
    product = _product(attributes=("cotton",), title="Norvale Cotton T-Shirt")
    out = R.reward(product, _goal(), {"color": "black", "size": "medium"})
    assert out["reward"] == pytest.approx(3 / 5)
    assert (out["r_attribute"], out["r_option"], out["r_price"]) == (0.5, 0.5, 1.0)


def test_an_attribute_in_the_description_counts_and_a_price_over_the_cap_does_not():
    product = _product(attributes=(), description="Machine wash cold. Soft cotton.", price=31.0)
    out = R.reward(product, _goal(), {"color": "navy", "size": "medium"})
    assert out["reward"] == pytest.approx(4 / 5) and out["r_price"] == 0.0


def test_colours_are_normalised_before_the_fuzzy_option_match():
    out = R.reward(_product(), _goal(), {"color": "royal navy sheen", "size": "medium"})
    assert out["r_option"] == 1.0  # "royal navy sheen" normalises to "navy"
    # WebShop takes the first colour of its list found in the text: "blue" before "navy"
    assert R.normalize_color("heather navy blue") == "blue"
    assert R.token_set_ratio("navy", "navy blue") == 100
    assert R.token_set_ratio("medium", "x-large") < R.MATCH_THRESHOLD


def test_the_type_match_scales_everything():
    # no noun of the goal's title in the purchased title: r_type 0, whatever else matches
    other = _product(title="Velix Ceramic Mug", query="mug", product_category="Home › Kitchen")
    assert R.reward(other, _goal(), {"color": "navy", "size": "medium"})["reward"] == 0.0
    # one noun in twelve (< 10%): r_type 0.1
    long_name = "Alpha Beta Gamma Delta Epsilon Zeta Theta Iota Kappa Lambda Sigma Shirt"
    kind = R.type_reward(_product(title="Omega Shirt"), _goal(name=long_name))
    assert kind["title_score"] == pytest.approx(1 / 12) and kind["r_type"] == 0.1
    # one noun in five (20%, not above it), other query and category: r_type 0.5
    goal = _goal(name="Alpha Beta Gamma Delta Shirt", query="shirt", product_category="X › Y")
    kind = R.type_reward(_product(title="Omega Shirt", product_category="Z › W"), goal)
    assert (kind["title_score"], kind["r_type"]) == (pytest.approx(0.2), 0.5)
    # same share with the category path sharing two levels: r_type 1
    kind = R.type_reward(
        _product(title="Omega Shirt"), dataclasses.replace(goal, product_category=SHIRTS)
    )
    assert kind["category_match"] == 1.0 and kind["r_type"] == 1.0


# ---------------------------------------------------------------------------- pages and actions
def _start(seed=0, **kwargs):
    env = make(SMALL, **kwargs)
    obs, info = env.reset(seed=seed)
    return env, obs, info


def test_search_pages_ten_results_with_next_and_prev_and_back_to_search():
    env, obs, info = _start()
    assert obs.startswith("Instruction: ") and "[search box]" in obs
    obs, _, _, _, info = env.step("search[machine wash cotton]")
    assert "Page 1 (Total results: 50)" in obs and "[button] Next > [button_]" in obs
    first = [a for a in info["admissible_actions"] if a.startswith("click[B0")]
    assert len(first) == 10
    obs, *_, info = env.step("CLICK[next >]")  # letter case is ignored
    assert info["action_valid"] and "Page 2" in obs and "[button] < Prev [button_]" in obs
    assert not set(first) & set(info["admissible_actions"])
    obs, *_, info = env.step("click[< Prev]")
    assert "Page 1" in obs and [a for a in info["admissible_actions"] if "B0" in a] == first
    obs, *_, info = env.step("click[Back to Search]")
    assert "[search box]" in obs and info["action_valid"]


def test_the_item_page_has_options_tabs_and_buy_now_and_options_toggle_to_clicked():
    env, obs, info = _start()
    env.step("search[t-shirt]")
    asin = env.unwrapped.catalog.search("t-shirt")[0]
    product = env.unwrapped.catalog.by_asin[asin]
    obs, *_, info = env.step(f"click[{asin}]")
    assert product.title in obs and f"Price: ${product.price:.2f}" in obs
    for tab in ("Description", "Features", "Reviews", "Buy Now"):
        assert f"click[{tab}]" in info["admissible_actions"]
    _group, values = product.options[0]
    obs, *_, info = env.step(f"click[{values[1]}]")
    assert f"[clicked button] {values[1]} [clicked button_]" in obs
    obs, *_, info = env.step("click[Description]")
    assert product.description in obs
    obs, *_, info = env.step("click[< Prev]")  # back to the item, the option still chosen
    assert f"[clicked button] {values[1]} [clicked button_]" in obs


@pytest.mark.parametrize(
    "action",
    ["click[Buy Now]", "search[]", "buy the shirt", "click[B0NOTHERE0]", 42, None],
)
def test_bad_actions_are_invalid_observations_and_keep_the_page(action):
    env, obs, info = _start()
    page = env.unwrapped.page()
    obs, reward, term, _trunc, info = env.step(action)
    assert info["action_valid"] is False and obs.startswith("Invalid action:")
    assert env.unwrapped.page() == page and reward == 0.0 and not term


def test_search_is_refused_off_the_search_page():
    env, *_ = _start()
    env.step("search[t-shirt]")
    obs, *_, info = env.step("search[socks]")
    assert info["action_valid"] is False and "Back to Search" in obs


def test_the_oracle_buys_a_fully_rewarded_product_and_progress_rises_along_its_way():
    env, _, info = _start(seed=3, privileged=True)
    assert info["gold_answer"] in info["privileged_context"]
    progress = [info["progress"]]
    while True:
        _obs, reward, term, trunc, info = env.step(env.unwrapped.oracle_action())
        progress.append(info["progress"])
        if term or trunc:
            break
    assert term and reward == 1.0 and info["won"] and info["reward_components"]["r_type"] == 1.0
    assert progress == sorted(progress) and progress[-1] == 1.0


def test_the_search_segment_covers_the_query():
    env, *_ = _start()
    action = "search[cotton t-shirt navy]"
    info = env.step(action)[-1]
    (seg,) = info["segments"]
    assert (
        seg["tag"] == "search_query" and action[seg["start"] : seg["end"]] == "cotton t-shirt navy"
    )


def test_the_menu_form_offers_the_text_forms_actions_by_number():
    text_env, text_obs, text_info = _start(seed=5)
    menu_env, menu_obs, menu_info = _start(seed=5, menu=True)
    assert menu_info["admissible_actions"] == text_info["admissible_actions"]
    assert menu_obs.startswith(text_obs) and "[0] search[" in menu_obs
    assert int(menu_info["action_mask"].sum()) == len(menu_info["admissible_actions"])
    while True:
        action = menu_env.unwrapped.oracle_action()
        assert isinstance(action, int)
        text_action = menu_info["admissible_actions"][action]
        menu_obs, mr, mt, mtr, menu_info = menu_env.step(action)
        text_obs, tr, tt, _ttr, text_info = text_env.step(text_action)
        assert menu_obs.startswith(text_obs) and (mr, mt) == (tr, tt)
        if mt or mtr:
            break
    assert mr == 1.0


def test_every_goal_is_solvable_and_the_splits_follow_webshop():
    cat = catalog("small")
    assert len(cat.products) == 1_000 and len({p.asin for p in cat.products}) == 1_000
    assert len({p.query for p in cat.products}) >= 30
    assert cat.goal_ids("test") == range(0, 500) and cat.goal_ids("train") == range(1_000, 3_000)
    for i in (0, 499, 2_999):
        goal = cat.goal(i)
        assert any(R.is_full(cat.by_asin[a], goal) for a in cat.search(goal.search))
        assert goal.instruction.endswith(f"price lower than {goal.price_upper:.2f} dollars")


def test_an_unknown_preset_is_refused():
    with pytest.raises(BadInput, match="preset"):
        make(SMALL, preset="medium")


# ---------------------------------------------------------------------------- WebShop's files
def test_the_official_reader_follows_webshops_loader():
    env = make("agentgym/Shop-Official-v0", path=str(FIXTURE))
    cat = env.unwrapped.catalog
    assert "nan" not in cat.by_asin and len(cat.products) == 8
    shirt = cat.by_asin["B000TSHIR2"]
    assert shirt.price == 15.0 and shirt.options[0] == ("color", ("white", "red | blue"))
    assert cat.by_asin["B000EARBD2"].price == 100.0 and cat.by_asin["B000EARBD2"].options == ()
    assert cat.by_asin["B000TSHIR2"].attributes == ("slim fit", "polyester")
    assert cat.by_asin["B000SHAMP2"].features == ("Volumizing",)
    # goals: human instructions with attributes, product by product in the products file's
    # order (get_human_goals), then shuffled with random.seed(233) (SimServer)
    human = json.loads((FIXTURE / "items_human_ins.json").read_text())
    asins = [p["asin"] for p in json.loads((FIXTURE / "items_shuffle_1000.json").read_text())]
    order = [
        i["instruction"] for a in asins for i in human.get(a, []) if i["instruction_attributes"]
    ]
    random.Random(233).shuffle(order)
    made = [cat.goal(i).instruction for i in range(cat.n_goals)]
    assert [m.split(", and price lower")[0] for m in made] == [o.strip(".") for o in order]
    assert cat.n_goals == 9 and list(cat.goal_ids("test")) == [0, 1, 2]


@pytest.mark.parametrize("path", [None, "/nonexistent/webshop"])
def test_the_official_id_needs_a_folder_with_webshops_files(path, tmp_path):
    with pytest.raises(BadInput):
        make("agentgym/Shop-Official-v0", path=path)
    (tmp_path / "items_shuffle.json").write_text("{not json")
    with pytest.raises(BadInput, match=r"items_shuffle\.json"):
        make("agentgym/Shop-Official-v0", path=str(tmp_path))
