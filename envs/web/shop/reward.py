"""WebShop's reward, defined once: attribute, option and price matches scaled by the type match.

``reward = r_type * (n_attributes_matched + n_options_matched + price_ok) /
(n_goal_attributes + n_goal_options + 1)``, as ``web_agent_site/engine/goal.py`` computes it:

* an attribute matches when a purchased attribute is within fuzzy token-set ratio > 85 of it,
  or it occurs in the title, the features or the description (lowercased);
* an option matches when a chosen option (colours normalised to WebShop's colour list) is
  within token-set ratio > 85 of it;
* the price is ok when it is at most the goal's cap;
* ``r_type`` is 1, 0.5, 0.1 or 0 from the query match, the category-path match (two shared
  levels) and the title score (the share of the goal title's nouns found in the purchased
  title): 0 when no noun is shared, 0.1 under 10%, 0.5 when nothing matches, else 1.

One documented difference: WebShop finds the titles' nouns with spaCy's tagger, which needs a
model download; here a title's "nouns" are its words of two or more letters that are not
stop words or WebShop's colour and size words (titles are noun phrases, so the rest are
nearly all nouns). The fuzzy ratio is thefuzz's ``token_set_ratio`` (ASCII, processed,
rounded), computed by rapidfuzz, which thefuzz itself calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

if TYPE_CHECKING:
    from agentgym.envs.web.shop.catalog import Goal, Product

# WebShop's COLOR_SET (web_agent_site/engine/normalize.py), in its order.
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black",
    "blue", "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel",
    "champagne", "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee",
    "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark", "denim", "eggplant",
    "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray",
    "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight",
    "mint", "mocha", "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive",
    "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red", "rose", "royal",
    "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut",
    "wheat", "white", "wine", "yellow",
)  # fmt: skip
_STOP = """a an and or the of for with in on to by from at as is are be this that these those
your our my his her its their it men women mens womens man woman unisex kids boys girls new
pack set count piece pcs inch ft oz lb fl x small medium large extra xl xxl"""
_NOT_NOUNS = frozenset(_STOP.split()) | frozenset(COLOR_SET)
_WORD = re.compile(r"[a-z]{2,}")
MATCH_THRESHOLD = 85  # WebShop's fuzzy-match threshold (strictly above)


def normalize_color(text: str) -> str:
    """WebShop's ``normalize_color``: the first colour of its list found in ``text``, else it."""
    return next((c for c in COLOR_SET if c in text), text)


def token_set_ratio(a: str, b: str) -> int:
    """The fuzzy ratio WebShop uses: thefuzz's ``token_set_ratio`` (ASCII, processed, rounded)."""
    a = default_process(a.encode("ascii", "ignore").decode())
    b = default_process(b.encode("ascii", "ignore").decode())
    if not a or not b:
        return 0
    return round(fuzz.token_set_ratio(a, b))


def title_nouns(title: str) -> list[str]:
    """The words of ``title`` taken as its nouns (see the module docstring)."""
    return [w for w in _WORD.findall(title.lower()) if w not in _NOT_NOUNS]


def type_reward(product: Product, goal: Goal) -> dict[str, float]:
    """``r_type`` and what it is made of (WebShop's ``get_type_reward``)."""
    query_match = product.query == goal.query
    bought = {x.strip() for x in product.product_category.split("›")}
    wanted = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought & wanted) >= 2
    desired = title_nouns(goal.name)
    shared = set(title_nouns(product.title)) & set(desired)
    title_score = len(shared) / len(desired) if desired else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": float(query_match),
        "category_match": float(category_match),
        "title_score": title_score,
    }


def attribute_matches(product: Product, goal: Goal) -> int:
    """How many goal attributes the product has (WebShop's ``get_attribute_reward``)."""
    text = [product.title.lower(), " ".join(product.features).lower(), product.description.lower()]
    n = 0
    for wanted in goal.attributes:
        fuzzy = (token_set_ratio(have, wanted) > MATCH_THRESHOLD for have in product.attributes)
        n += any(fuzzy) or any(wanted in t for t in text)
    return n


def option_matches(chosen: Sequence[str], wanted: Sequence[str]) -> int:
    """How many wanted options a chosen one matches (WebShop's ``get_option_reward``)."""
    have = [normalize_color(o) for o in chosen]
    return sum(
        any(token_set_ratio(h, normalize_color(w)) > MATCH_THRESHOLD for h in have) for w in wanted
    )


def reward(product: Product, goal: Goal, options: Mapping[str, str]) -> dict[str, float]:
    """The reward of buying ``product`` with ``options`` chosen, and its components.

    Returns:
        ``{"reward", "r_type", "r_attribute", "r_option", "r_price", "query_match",
        "category_match", "title_score"}``, all floats; ``reward`` is in [0, 1].
    """
    kind = type_reward(product, goal)
    n_attr = attribute_matches(product, goal)
    wanted = [value for _, value in goal.options]
    n_opt = option_matches(list(options.values()), wanted)
    price_ok = product.price <= goal.price_upper
    total = (n_attr + n_opt + price_ok) / (len(goal.attributes) + len(wanted) + 1)
    return {
        "reward": total * kind["r_type"],
        **kind,
        "r_attribute": n_attr / len(goal.attributes) if goal.attributes else 0.0,
        "r_option": n_opt / len(wanted) if wanted else 1.0,
        "r_price": float(price_ok),
    }


def best_options(product: Product, goal: Goal) -> dict[str, str]:
    """For each option group of ``product``, the value that matches the goal best."""
    wanted = [normalize_color(v) for _, v in goal.options]
    chosen = {}
    for group, values in product.options:
        scores = [max((token_set_ratio(normalize_color(v), w) for w in wanted), default=0)
                  for v in values]  # fmt: skip
        chosen[group] = values[max(range(len(values)), key=lambda i: (scores[i], -i))]
    return chosen


def is_full(product: Product, goal: Goal) -> bool:
    """Whether buying ``product`` with its best options earns the full reward."""
    return reward(product, goal, best_options(product, goal))["reward"] >= 1.0
