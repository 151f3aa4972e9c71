"""The shop in text mode: WebShop's pages and actions over a seeded catalogue."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Discrete

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import BadInput
from agentgym.core.info import Segment
from agentgym.core.menu import Menu, shorten
from agentgym.core.spaces import String
from agentgym.envs.web.shop import official, pages, vocab
from agentgym.envs.web.shop import reward as _reward
from agentgym.envs.web.shop.catalog import PRESETS, Catalog, Goal, catalog
from agentgym.envs.web.shop.pages import Page, ShopState

MAX_MENU = 64
N_SUGGESTIONS = 5


class ShopEnv(AgentEnv[str, Any]):
    """Buy the product an instruction describes in a WebShop-style store.

    ## Description
    A seeded catalogue (``small``: 1,000 products, ``large``: 100,000) across 33 product
    types in five departments, each product with a title, category path, price, attributes,
    option groups, description, features and reviews. An instruction of WebShop's kind ("i
    need a machine wash and cotton t-shirt with color: navy, and size: medium, and price lower
    than 30.00 dollars") is made from a target product; every instruction is solvable (the
    instruction's key terms find a product that earns the full reward). Search is the
    project's exact BM25 over the catalogue; 50 results, ten per page.

    ## Observation
    Text (:class:`~agentgym.core.spaces.String`): the page as WebShop's text mode shows it
    (``[button] X [button_]`` around each button, ``[clicked button]`` for chosen options),
    with the numbered menu under it in the menu form.

    ## Action
    ``search[query]`` on the search page and ``click[button]`` on any button shown (letter
    case ignored); anything else is an invalid action. ``info["admissible_actions"]`` lists the
    clicks and, on the search page, five suggested queries (the instruction's key terms among
    them). With ``menu=True``: ``Discrete(64)`` over those actions with
    ``info["action_mask"]`` (the action's text or number is accepted too).

    ## Rewards
    WebShop's, on Buy Now (:mod:`agentgym.envs.web.shop.reward`): attribute, option and price
    matches scaled by the product-type match; ``info["reward_components"]`` holds the parts.
    ``won`` when the reward is 1.

    ## Termination
    Terminates on Buy Now; truncates after ``max_turns`` turns (15 by default).

    ## Registered ids
    ``agentgym/Shop-Small-v0``, ``agentgym/Shop-Large-v0``; ``menu=True`` on either for the
    menu form. ``agentgym/Shop-Official-v0`` reads WebShop's own files from ``path``.

    ## Version history
    v0: first version.
    """

    family = "web"
    domain = "shop"
    default_max_turns = 15
    task_prefix: ClassVar[str] = "shop"

    def __init__(self, preset: str = "small", menu: bool = False, **kwargs: Any):
        """Create the env.

        Args:
            preset: ``small`` (1,000 products, 3,000 instructions) or ``large`` (100,000
                products, 12,000 instructions; generated in about 7 s per process, the BM25
                index cached).
            menu: numbered menu actions (``Discrete(64)``) instead of free text.
            **kwargs: as :class:`~agentgym.core.env.AgentEnv` (split, privileged, max_turns,
                render_mode).
        """
        if preset not in PRESETS:
            raise BadInput(f"unknown shop preset {preset!r}: choose one of {sorted(PRESETS)}")
        self.preset = preset
        self.menu = bool(menu)
        super().__init__(**kwargs)
        self.observation_space = String()
        self.action_space = Discrete(MAX_MENU) if self.menu else String()
        self._state = ShopState()
        self._goal: Goal | None = None
        self._score: dict[str, float] = {}

    # ------------------------------------------------------------------ the world
    @property
    def catalog(self) -> Catalog:
        """The catalogue of this id."""
        return catalog(self.preset)

    def _config(self) -> dict[str, Any]:
        return {"preset": self.preset, "menu": self.menu}

    def _goal_of(self, task_id: str) -> Goal:
        return self.catalog.goal(int(task_id.rpartition("-")[2]))

    def task_ids(self, split: str | None = None) -> list[str]:
        """Task ``shop-<i>`` is instruction ``i`` of the catalogue."""
        return [f"{self.task_prefix}-{i:05d}" for i in self.catalog.goal_ids(split or self.split)]

    def _has_task(self, task_id: str) -> bool:
        head, _, number = task_id.rpartition("-")
        return head == self.task_prefix and number.isdigit() and int(number) < self.catalog.n_goals

    def task_type_of(self, task_id: str) -> str:
        """The department of the target product (beauty, electronics, fashion, ...)."""
        return self.catalog.by_asin[self._goal_of(task_id).asin].category

    @property
    def goal(self) -> Goal:
        """The current instruction's goal."""
        assert self._goal is not None, "reset() first"
        return self._goal

    # ------------------------------------------------------------------ pages
    def page(self) -> Page:
        """The page shown now."""
        score = self._score.get("reward", 0.0)
        return pages.render(self._state, self.catalog, self.goal.instruction, score)

    def suggestions(self) -> list[str]:
        """The search page's suggested queries: key terms, type, and two other types."""
        goal = self.goal
        index = int(self.task_id.rpartition("-")[2]) if self.task_id else 0
        rng = np.random.default_rng([self.catalog.seed, index, 1])
        others = [t.name for t in vocab.TYPES if t.name != goal.query]
        picked = rng.choice(len(others), size=2, replace=False).tolist()
        queries = [goal.search, goal.query, f"{goal.attributes[0]} {goal.query}"]
        queries += [others[i] for i in picked]
        unique = list(dict.fromkeys(queries))
        return [unique[i] for i in rng.permutation(len(unique)).tolist()][:N_SUGGESTIONS]

    def actions(self, page: Page | None = None) -> list[str]:
        """The admissible actions of the page shown now."""
        page = page or self.page()
        found = [f"search[{q}]" for q in self.suggestions()] if page.has_search else []
        return found + [f"click[{b}]" for b in page.buttons()]

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._goal = self._goal_of(task_id)
        self._state = ShopState()
        self._score = {}
        page = self.page()
        return self._observe(page, ""), self._info(page, valid=True)

    def _apply(self, action: Any) -> Transition:
        page = self.page()
        text, error = self._resolve(action, page)
        if text is not None:
            error = pages.apply(self._state, page, text, self.catalog)
        done = error is None and self._state.page == "done"
        if done:
            product = self.catalog.by_asin[self._state.asin]
            self._score = _reward.reward(product, self.goal, self._state.options)
        new_page = self.page()
        message = f"Invalid action: {error}." if error else ""
        info = self._info(new_page, valid=error is None, action=text)
        reward = self._score.get("reward", 0.0) if done else 0.0
        return Transition(self._observe(new_page, message), reward, done, info)

    def _resolve(self, action: Any, page: Page) -> tuple[str | None, str | None]:
        if self.menu:
            items = self.actions(page)
            index, error = Menu(items, MAX_MENU).resolve(action)
            return (None, error) if index is None else (items[index], None)
        if isinstance(action, str):
            return action, None
        return None, f"invalid action {shorten(repr(action))}: write search[query] or click[x]"

    def _observe(self, page: Page, message: str) -> str:
        parts = [message] if message else []
        parts.append(page.text())
        if self.menu and page.name != "done":
            parts.append("Actions:\n" + Menu(self.actions(page), MAX_MENU).render())
        return "\n".join(parts)

    def _info(self, page: Page, *, valid: bool, action: str | None = None) -> dict[str, Any]:
        won = self._score.get("reward", 0.0) >= 1.0
        info: dict[str, Any] = {
            "action_valid": valid,
            "won": bool(won),
            "state_key": hashlib.sha256(self._state.key().encode()).hexdigest()[:32],
            "progress": self._progress(),
            "segments": _segments(action) if valid and action and not self.menu else [],
        }
        if page.name != "done":
            acts = self.actions(page)
            info["admissible_actions"] = acts
            if self.menu:
                info["action_mask"] = Menu(acts, MAX_MENU).mask()
        if self._score:
            info["reward_components"] = dict(self._score)
        return info

    def _progress(self) -> float:
        """How far the episode is along the oracle's way, in [0, 1].

        0 on the search page; 0.25 with a fully rewarded product among the results; 0.5 on
        such a product's page, plus 0.4 times the share of its best options chosen; the
        reward once bought.
        """
        s, goal, cat = self._state, self.goal, self.catalog
        if s.page == "done":
            return float(self._score.get("reward", 0.0))
        if s.page == "search":
            return 0.0
        if s.page == "results":
            found = any(_reward.is_full(cat.by_asin[a], goal) for a in pages.results_of(s, cat))
            return 0.25 if found else 0.0
        product = cat.by_asin[s.asin]
        if not _reward.is_full(product, goal):
            return 0.0
        wanted = _reward.best_options(product, goal)
        right = sum(s.options.get(g) == v for g, v in wanted.items())
        return 0.5 + 0.4 * right / max(1, len(wanted))

    def _privileged_info(self) -> dict[str, Any]:
        goal = self.goal
        product = self.catalog.by_asin[goal.asin]
        chosen = ", ".join(f"{g}: {v}" for g, v in goal.options) or "no options"
        return {
            "privileged_context": (
                f"The instruction describes {product.title} (asin {product.asin}, "
                f"${product.price:.2f}). Search for '{goal.search}', open {product.asin}, "
                f"choose {chosen}, then click Buy Now."
            ),
            "gold_answer": product.asin,
        }

    def check_answer(self, text: str) -> float:
        """1.0 when ``text`` names the target's asin, else 0.0."""
        return float(text.strip().upper() == self.goal.asin)

    # ------------------------------------------------------------------ the oracle
    def oracle_action(self) -> Any:
        """Search the key terms, page to the best product, choose its options, buy."""
        s, goal, cat = self._state, self.goal, self.catalog
        act = self._oracle_text(s, goal, cat)
        return self.actions().index(act) if self.menu else act

    @staticmethod
    def _oracle_text(s: ShopState, goal: Goal, cat: Catalog) -> str:
        if s.page == "search":
            return f"search[{goal.search}]"
        if s.page == "tab":
            return f"click[{pages.PREV_PAGE}]"
        best = _best_product(pages.results_of(s, cat), goal, cat) if s.query == goal.search else -1
        if best < 0:
            return f"click[{pages.BACK_TO_SEARCH}]"
        if s.page == "results":
            on_page = (best // pages.PRODUCT_WINDOW) + 1
            if on_page > s.page_no:
                return f"click[{pages.NEXT_PAGE}]"
            if on_page < s.page_no:
                return f"click[{pages.PREV_PAGE}]"
            return f"click[{pages.results_of(s, cat)[best]}]"
        target = pages.results_of(s, cat)[best]
        if s.asin != target:
            return f"click[{pages.PREV_PAGE}]"
        for group, value in _reward.best_options(cat.by_asin[target], goal).items():
            if s.options.get(group) != value:
                return f"click[{value}]"
        return f"click[{pages.BUY_NOW}]"

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        return {"page": dataclasses.asdict(self._state), "score": dict(self._score)}

    def _set_state(self, state: dict[str, Any]) -> None:
        assert self.task_id is not None
        self._goal = self._goal_of(self.task_id)
        self._state = ShopState(**state["page"])
        self._score = dict(state["score"])


def _best_product(asins: tuple[str, ...], goal: Goal, cat: Catalog) -> int:
    """The position of the target, else of the first fully rewarded product; -1 if none."""
    if goal.asin in asins:
        return asins.index(goal.asin)
    full = [i for i, a in enumerate(asins) if _reward.is_full(cat.by_asin[a], goal)]
    return full[0] if full else -1


def _segments(action: str) -> list[Segment]:
    parsed = pages.parse(action)
    if parsed is None or parsed[0] != "search":
        return []
    start = action.index("[") + 1
    end = action.rindex("]")
    return [Segment(tag="search_query", start=start, end=end)]


class ShopOfficialEnv(ShopEnv):
    """The shop over WebShop's own products and human instructions, read from ``path``.

    Pages, actions, reward and oracle as :class:`ShopEnv`; the data and splits as
    :mod:`agentgym.envs.web.shop.official` reads them (WebShop's goal order and splits).
    """

    def __init__(self, path: str | None = None, menu: bool = False, **kwargs: Any):
        """Read WebShop's files from ``path`` (its ``data/`` folder); keywords as ShopEnv."""
        if not path:
            raise BadInput("Shop-Official needs path=DIR: the folder with WebShop's data files")
        self.path = str(Path(path).expanduser().resolve())
        self._official = official.load(self.path)
        super().__init__(menu=menu, **kwargs)

    @property
    def catalog(self) -> Catalog:
        """The catalogue read from ``path``."""
        return self._official

    def _config(self) -> dict[str, Any]:
        return {"path": self.path, "data": self._official.name, "menu": self.menu}
