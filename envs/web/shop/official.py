"""WebShop's own data: products and human instructions read from the user's copy.

The folder holds WebShop's files as its ``setup.sh`` downloads them: ``items_shuffle.json``
(or ``items_shuffle_1000.json``) with the products, ``items_ins_v2.json`` (or
``items_ins_v2_1000.json``) with each product's attributes, and ``items_human_ins.json`` with
the human instructions. Products are read as ``web_agent_site/engine/engine.py``'s
``load_products`` reads them and goals as ``get_human_goals`` makes them, shuffled with
``random.seed(233)`` as WebShop's ``SimServer`` does, so goal ``i`` is WebShop's goal ``i``;
test is goals 0-499, val 500-1,499 and train the rest, as in WebShop (a file with fewer
than 1,500 goals is cut in thirds instead). Two choices where WebShop draws unseeded random
numbers: a price range's price is its lower end, and goal ``i``'s price cap is drawn from
``random.Random(i)``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentgym.core.errors import BadInput
from agentgym.envs.web.shop.catalog import PRICE_STEPS, Catalog, Goal, Product

PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
ATTRIBUTE_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
HUMAN_FILE = "items_human_ins.json"
SHUFFLE_SEED = 233  # WebShop's SimServer: random.seed(233); random.shuffle(goals)


def _find(folder: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise BadInput(f"{folder} has none of {', '.join(names)}: point path at WebShop's data/")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadInput(f"cannot read {path}: {e}") from e


def _prices(pricing: Any) -> float:
    """The product's price: the first dollar amount of ``pricing`` (100.0 when there is none)."""
    if not pricing:
        return 100.0
    amounts = []
    for part in str(pricing).split("$")[1:]:
        try:
            amounts.append(float(Decimal(re.sub(r"[^\d.]", "", part))))
        except InvalidOperation:
            continue
    return amounts[0] if amounts else 100.0


def product_from(raw: dict[str, Any], attributes: dict[str, Any]) -> Product:
    """One WebShop product record as a :class:`Product` (``load_products``'s conversions)."""
    asin = str(raw["asin"])
    options = []
    for name, contents in (raw.get("customization_options") or {}).items():
        if contents is None:
            continue
        values = [str(c["value"]).strip().replace("/", " | ").lower() for c in contents]
        options.append((str(name).lower(), tuple(values)))
    bullets = raw.get("small_description") or []
    features = tuple(bullets if isinstance(bullets, list) else [bullets])
    attrs = attributes.get(asin, {}).get("attributes") or ["DUMMY_ATTR"]
    return Product(
        asin=asin,
        title=str(raw.get("name", "")),
        query=str(raw.get("query", "")).lower().strip(),
        category=str(raw.get("category", "")),
        product_category=str(raw.get("product_category", "")),
        price=_prices(raw.get("pricing")),
        attributes=tuple(str(a) for a in attrs),
        options=tuple(options),
        description=str(raw.get("full_description") or ""),
        features=tuple(str(f) for f in features),
        reviews=(),
        rating=None,
    )


def _goal(index: int, product: Product, human: dict[str, Any]) -> Goal:
    rng = random.Random(index)
    steps = [p for p in PRICE_STEPS if p > product.price][:4]
    if len(steps) >= 2:
        price_upper = sorted(rng.sample(steps, 2))[1]
        price_text = f", and price lower than {price_upper:.2f} dollars"
    else:
        price_upper, price_text = 1_000_000.0, ""
    options = human.get("instruction_options") or []
    if isinstance(options, dict):
        pairs = tuple((str(k), str(v)) for k, v in options.items())
    else:
        pairs = tuple(("", str(v)) for v in options)
    return Goal(
        asin=product.asin,
        instruction=str(human["instruction"]).strip(".") + price_text,
        query=product.query,
        name=product.title,
        product_category=product.product_category,
        attributes=tuple(str(a) for a in human["instruction_attributes"]),
        options=pairs,
        price_upper=float(price_upper),
        search=product.title,
    )


@functools.cache
def load(folder: str) -> Catalog:
    """The catalogue and human goals of WebShop's files in ``folder`` (read once per process)."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise BadInput(f"WebShop data folder {root} does not exist")
    raw_products = _read(_find(root, PRODUCT_FILES))
    attributes = _read(_find(root, ATTRIBUTE_FILES))
    human = _read(_find(root, (HUMAN_FILE,)))
    products: dict[str, Product] = {}
    for raw in raw_products:
        asin = str(raw.get("asin", ""))
        if asin == "nan" or len(asin) > 10 or asin in products:
            continue  # as load_products skips them
        products[asin] = product_from(raw, attributes)
    goals = []
    for asin, product in products.items():
        for ins in human.get(asin, []):
            if ins.get("instruction_attributes"):
                goals.append((product, ins))
    random.Random(SHUFFLE_SEED).shuffle(goals)
    made = [_goal(i, p, ins) for i, (p, ins) in enumerate(goals)]
    n = len(made)
    if n > 1_500:
        splits: dict[str, tuple[int, int | None]] = {
            "test": (0, 500), "val": (500, 1_500), "train": (1_500, None),
        }  # fmt: skip
    else:
        splits = {"test": (0, n // 3), "val": (n // 3, 2 * n // 3), "train": (2 * n // 3, None)}
    digest = hashlib.sha256(json.dumps([raw_products, human], sort_keys=True).encode())
    return Catalog(
        list(products.values()),
        name=f"official-{digest.hexdigest()[:12]}",
        seed=0,
        n_goals=n,
        goals=made,
        splits=splits,
    )
