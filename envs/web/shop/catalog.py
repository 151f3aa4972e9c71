"""The shop's catalogue and instructions: products generated from a seed, goals from products.

A :class:`Catalog` holds the products and a BM25 index over them (the project's exact BM25,
where WebShop uses Pyserini); :meth:`Catalog.goal` makes instruction ``i`` of the kind of
WebShop's synthetic goals ("i need a machine wash and cotton t-shirt with color: navy, and
size: medium, and price lower than 30.00 dollars") from a target product.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.core.paths import cache_dir
from agentgym.envs.search.retrieval.bm25 import BM25Retriever
from agentgym.envs.web.shop import reward as _reward
from agentgym.envs.web.shop import vocab

SEARCH_RETURN_N = 50  # WebShop's SEARCH_RETURN_N: results kept per search
PRICE_STEPS = tuple(10.0 * i for i in range(1, 100))  # WebShop's PRICE_RANGE
GOAL_ATTEMPTS = 20

Options = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Product:
    """One product, with the fields WebShop's pages and reward read."""

    asin: str
    title: str
    query: str  # the search query the product was listed under (WebShop's ``query``)
    category: str  # the department (WebShop's ``category``)
    product_category: str  # the category path joined by " › "
    price: float
    attributes: tuple[str, ...]
    options: Options  # option group -> its values, in page order
    description: str
    features: tuple[str, ...]  # WebShop's ``BulletPoints``
    reviews: tuple[tuple[int, str], ...]  # (stars, text)
    rating: float | None

    def search_text(self) -> str:
        """The text the search index holds for this product."""
        values = " ".join(v for _, vs in self.options for v in vs)
        leaf = self.product_category.rsplit("›", 1)[-1]
        return f"{self.title} {' '.join(self.attributes)} {leaf} {values}"


@dataclass(frozen=True)
class Goal:
    """An instruction and what WebShop's reward compares the purchase with."""

    asin: str  # the target product the goal was made from
    instruction: str
    query: str
    name: str  # the target's title (WebShop's synthetic goals use the title)
    product_category: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]  # option group -> the wanted value
    price_upper: float
    search: str  # the instruction's key terms: the oracle's query


@dataclass(frozen=True)
class Preset:
    """Sizes and seed of one catalogue."""

    name: str
    products: int
    goals: int
    seed: int


PRESETS = {
    "small": Preset("small", 1_000, 3_000, 7_001),
    "large": Preset("large", 100_000, 12_000, 7_002),
}
GOAL_SPLITS = {"test": (0, 500), "val": (500, 1_000), "train": (1_000, None)}
"""Goal index ranges per split (WebShop puts its first 500 goals in test, as here)."""


def _one(rng: np.random.Generator, pool: Sequence[Any]) -> Any:
    """One item of ``pool`` (``rng.choice`` converts the pool to an array: 10x slower)."""
    return pool[int(rng.integers(len(pool)))]


def _brand(rng: np.random.Generator) -> str:
    return _one(rng, vocab.BRAND_HEADS) + _one(rng, vocab.BRAND_TAILS)


def _pick(rng: np.random.Generator, pool: Sequence[str], low: int, high: int) -> tuple[str, ...]:
    n = int(rng.integers(low, min(high, len(pool)) + 1))
    chosen = sorted(rng.permutation(len(pool))[:n].tolist())
    return tuple(pool[i] for i in chosen)


def _titled(words: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in words.split())


def make_product(rng: np.random.Generator, asin: str, kind: vocab.ProductType) -> Product:
    """One product of ``kind`` drawn from ``rng``."""
    brand = _brand(rng)
    order = rng.permutation(len(kind.attributes))[: int(rng.integers(2, 6))].tolist()
    attributes = tuple(kind.attributes[i] for i in order)
    options = tuple((group, _pick(rng, pool, 2, 6)) for group, pool in kind.options)
    low, high = kind.price
    price = float(np.floor(rng.uniform(low, high))) + 0.99
    shown = " ".join(_titled(a) for a in attributes[: int(rng.integers(1, 3))])
    title = f"{brand} {shown} {_titled(kind.name)}, {_titled(attributes[-1])}"
    opening = _one(rng, vocab.OPENINGS)
    description = (
        f"{opening} this {kind.name} by {brand} is {', '.join(attributes[:-1])} and "
        f"{attributes[-1]}. {_one(rng, vocab.CLOSINGS)}"
    )
    features = tuple(f"{_titled(a)}: {brand} quality you can rely on." for a in attributes)
    stars = sorted(rng.integers(1, 6, size=int(rng.integers(0, 4))).tolist(), reverse=True)
    reviews = tuple((s, _one(rng, vocab.REVIEW_BODIES[s])) for s in stars)
    rating = round(sum(stars) / len(stars), 1) if stars else None
    return Product(
        asin=asin,
        title=title,
        query=kind.name,
        category=kind.department,
        product_category=" › ".join(kind.path),
        price=price,
        attributes=attributes,
        options=options,
        description=description,
        features=features,
        reviews=reviews,
        rating=rating,
    )


def generate_products(n: int, seed: int) -> list[Product]:
    """``n`` products from ``seed``, spread evenly over the product types."""
    rng = np.random.default_rng(seed)
    codes = rng.choice(36**8, size=n, replace=False)
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    products = []
    for i, code in enumerate(codes.tolist()):
        digits = "".join(alphabet[(code // 36**k) % 36] for k in range(8))
        kind = vocab.TYPES[i % len(vocab.TYPES)]
        products.append(make_product(rng, f"B0{digits}", kind))
    return products


class Catalog:
    """Products, their search index and the goals made from them."""

    def __init__(
        self,
        products: Sequence[Product],
        *,
        name: str,
        seed: int,
        n_goals: int,
        goals: Sequence[Goal] | None = None,
        splits: dict[str, tuple[int, int | None]] | None = None,
    ):
        """Index ``products``.

        Args:
            products: the catalogue, in a fixed order.
            name: the catalogue's name (the index cache's file name).
            seed: the seed goals are drawn from.
            n_goals: how many goals there are (ids ``0 .. n_goals - 1``).
            goals: fixed goals (official data) instead of goals drawn from ``seed``.
            splits: goal index ranges per split; ``GOAL_SPLITS`` by default.
        """
        self.name = name
        self.seed = seed
        self.n_goals = len(goals) if goals is not None else n_goals
        self._goals = tuple(goals) if goals is not None else None
        self.splits = dict(splits or GOAL_SPLITS)
        self.products = tuple(products)
        self.by_asin = {p.asin: p for p in self.products}
        texts = [p.search_text() for p in self.products]
        cache = cache_dir("web") / f"shop-{name}.npz" if len(texts) > 20_000 else None
        self._index = BM25Retriever(texts, cache_path=cache)

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (catalogues live as long as the process)
    def search(self, query: str) -> tuple[str, ...]:
        """The asins of the best ``SEARCH_RETURN_N`` products for ``query``, best first."""
        return tuple(self.products[i].asin for i in self._index.search(query, SEARCH_RETURN_N))

    def goal_ids(self, split: str) -> range:
        """The goal indices of ``split``."""
        low, high = self.splits[split]
        return range(low, self.n_goals if high is None else high)

    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def goal(self, index: int) -> Goal:
        """Goal ``index``, solvable: the instruction's key terms find a fully rewarded product.

        Drawn from its own seed, again (with the next attempt's seed) until the oracle's query
        has a product that earns the full reward among its results.
        """
        if self._goals is not None:
            return self._goals[index]
        for attempt in range(GOAL_ATTEMPTS):
            rng = np.random.default_rng([self.seed, index, attempt])
            target = self.products[int(rng.integers(len(self.products)))]
            goal = make_goal(rng, target)
            if any(_reward.is_full(self.by_asin[a], goal) for a in self.search(goal.search)):
                return goal
        raise RuntimeError(f"no solvable goal for index {index} in {GOAL_ATTEMPTS} attempts")


def make_goal(rng: np.random.Generator, target: Product) -> Goal:
    """A synthetic goal of WebShop's form for ``target``: attributes, options and a price cap."""
    attributes = _pick(rng, target.attributes, 1, 3)
    options = tuple((group, _one(rng, values)) for group, values in target.options)
    # WebShop: two of the four price steps above the price, the larger is the cap
    steps = [p for p in PRICE_STEPS if p > target.price][:4]
    price_upper = max(steps[i] for i in rng.permutation(len(steps))[:2].tolist())
    opening = _one(rng, vocab.INSTRUCTION_OPENINGS)
    wanted = ", and ".join(f"{group}: {value}" for group, value in options)
    with_options = f" with {wanted}" if wanted else ""
    instruction = (
        f"{opening} {' and '.join(attributes)} {target.query}{with_options}, "
        f"and price lower than {price_upper:.2f} dollars"
    )
    search = " ".join([*attributes, target.query, *(v for _, v in options)])
    return Goal(
        asin=target.asin,
        instruction=instruction,
        query=target.query,
        name=target.title,
        product_category=target.product_category,
        attributes=attributes,
        options=options,
        price_upper=float(price_upper),
        search=search,
    )


@functools.cache
def catalog(preset: str) -> Catalog:
    """The catalogue of a preset (built once per process; Large takes tens of seconds)."""
    p = PRESETS[preset]
    products = generate_products(p.products, p.seed)
    return Catalog(products, name=p.name, seed=p.seed, n_goals=p.goals)
