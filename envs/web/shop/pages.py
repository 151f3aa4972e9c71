"""The shop's pages and their actions, shared by the text and browser modes.

The navigation state (:class:`ShopState`) is plain JSON-able data; :func:`render` turns it into
a :class:`Page` (rows of texts and buttons) that the text mode prints and the browser mode
serves as HTML; :func:`apply` performs one WebShop action (``search[query]`` or
``click[button]``) on it. Pages as WebShop has them: a search page, results pages of ten with
next/prev, an item page with its option buttons and Description / Features / Reviews tabs,
and Buy Now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentgym.envs.web.shop.catalog import Catalog

PRODUCT_WINDOW = 10  # WebShop's results per page
BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
TABS = ("Description", "Features", "Reviews")
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


@dataclass
class ShopState:
    """Where the shopper is. ``page``: search, results, item, tab or done."""

    page: str = "search"
    query: str = ""
    page_no: int = 1
    asin: str = ""
    options: dict[str, str] = field(default_factory=dict)
    tab: str = ""

    def key(self) -> str:
        """The page's identity as text (equal for equal pages in both modes)."""
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.page}|{self.query}|{self.page_no}|{self.asin}|{opts}|{self.tab}"


@dataclass(frozen=True)
class Element:
    """One thing on a page: ``kind`` is text, button, clicked (a chosen option) or search."""

    kind: str
    text: str
    group: str = ""  # the option group of an option button


@dataclass(frozen=True)
class Page:
    """A rendered page: rows of elements, top to bottom."""

    name: str
    rows: tuple[tuple[Element, ...], ...]

    def buttons(self) -> list[str]:
        """The texts of the clickable elements, in page order (no duplicates)."""
        seen: dict[str, None] = {}
        for row in self.rows:
            for e in row:
                if e.kind in ("button", "clicked"):
                    seen.setdefault(e.text, None)
        return list(seen)

    @property
    def has_search(self) -> bool:
        """Whether the page has the search box."""
        return any(e.kind == "search" for row in self.rows for e in row)

    def text(self) -> str:
        """WebShop's text rendering: ``[button] X [button_]`` around each button."""
        return "\n".join(" ".join(_element_text(e) for e in row) for row in self.rows)


def _element_text(e: Element) -> str:
    if e.kind == "button":
        return f"[button] {e.text} [button_]"
    if e.kind == "clicked":
        return f"[clicked button] {e.text} [clicked button_]"
    if e.kind == "search":
        return "[search box] (type search[your query])"
    return e.text


def _t(text: str) -> Element:
    return Element("text", text)


def _b(text: str) -> Element:
    return Element("button", text)


def results_of(state: ShopState, catalog: Catalog) -> tuple[str, ...]:
    """All result asins of the state's query (up to 50)."""
    return catalog.search(state.query)


def render(state: ShopState, catalog: Catalog, instruction: str, score: float = 0.0) -> Page:
    """The page ``state`` shows."""
    head: tuple[tuple[Element, ...], ...] = ((_t(f"Instruction: {instruction}"),),)
    if state.page == "search":
        return Page("search", (*head, (Element("search", "Search"),)))
    if state.page == "done":
        return Page(
            "done",
            (
                (_t("Thank you for shopping with us!"),),
                (_t(f"Your score (min 0.0, max 1.0): {score:.4f}"),),
            ),
        )
    nav = (_b(BACK_TO_SEARCH),) if state.page == "results" else (_b(BACK_TO_SEARCH), _b(PREV_PAGE))
    if state.page == "results":
        return Page("results", (*head, nav, *_results_rows(state, catalog)))
    product = catalog.by_asin[state.asin]
    if state.page == "tab":
        return Page(state.tab.lower(), (*head, nav, *_tab_rows(state.tab, product)))
    rows: list[tuple[Element, ...]] = [*head, nav]
    for group, values in product.options:
        chosen = state.options.get(group)
        row = [_t(f"{group}:")]
        row += [Element("clicked" if v == chosen else "button", v, group) for v in values]
        rows.append(tuple(row))
    rows.append((_t(product.title),))
    rows.append((_t(f"Price: ${product.price:.2f}"),))
    rows.append((_t(f"Rating: {product.rating if product.rating is not None else 'N.A.'}"),))
    rows.append(tuple(_b(t) for t in TABS))
    rows.append((_b(BUY_NOW),))
    return Page("item", tuple(rows))


def _results_rows(state: ShopState, catalog: Catalog) -> list[tuple[Element, ...]]:
    asins = results_of(state, catalog)
    first = (state.page_no - 1) * PRODUCT_WINDOW
    shown = asins[first : first + PRODUCT_WINDOW]
    rows: list[tuple[Element, ...]] = [(_t(f"Page {state.page_no} (Total results: {len(asins)})"),)]
    pager = [_b(PREV_PAGE)] if state.page_no > 1 else []
    if first + PRODUCT_WINDOW < len(asins):
        pager.append(_b(NEXT_PAGE))
    if pager:
        rows.append(tuple(pager))
    for asin in shown:
        p = catalog.by_asin[asin]
        rows.append((_b(asin),))
        rows.append((_t(p.title),))
        rows.append((_t(f"${p.price:.2f}"),))
    return rows


def _tab_rows(tab: str, product: object) -> list[tuple[Element, ...]]:
    from agentgym.envs.web.shop.catalog import Product

    assert isinstance(product, Product)
    if tab == "Description":
        return [(_t(product.description),)]
    if tab == "Features":
        return [(_t(f),) for f in product.features] or [(_t("No features listed."),)]
    return [(_t(f"{s} stars: {body}"),) for s, body in product.reviews] or [
        (_t("No reviews yet."),)
    ]


def parse(action: str) -> tuple[str, str] | None:
    """``("search" | "click", argument)`` of a WebShop action, else None."""
    m = _ACTION.match(action)
    return (m.group(1).lower(), m.group(2).strip()) if m else None


def apply(state: ShopState, page: Page, action: str, catalog: Catalog) -> str | None:
    """Perform ``action`` on ``state`` (showing ``page``) in place; the error text, or None.

    ``click[Buy Now]`` only moves to the done page: the caller scores the purchase.
    """
    parsed = parse(action)
    if parsed is None:
        return "invalid action: use search[query] on the search page or click[button]"
    verb, arg = parsed
    if verb == "search":
        if not page.has_search:
            return "there is no search box on this page: click[Back to Search] first"
        if not arg:
            return "empty query: write search[what you are looking for]"
        state.page, state.query, state.page_no = "results", arg, 1
        state.asin, state.options, state.tab = "", {}, ""
        return None
    button = next((b for b in page.buttons() if b.casefold() == arg.casefold()), None)
    if button is None:
        return f"there is no button {arg!r} on this page"
    _click(state, page, button, catalog)
    return None


def _click(state: ShopState, page: Page, button: str, catalog: Catalog) -> None:
    if button == BACK_TO_SEARCH:
        state.page, state.query, state.page_no = "search", "", 1
        state.asin, state.options, state.tab = "", {}, ""
    elif button == NEXT_PAGE:
        state.page_no += 1
    elif button == PREV_PAGE and state.page == "results":
        state.page_no -= 1
    elif button == PREV_PAGE and state.page == "item":
        state.page, state.asin, state.options = "results", "", {}
    elif button == PREV_PAGE:  # a tab goes back to its item page
        state.page, state.tab = "item", ""
    elif state.page == "results":  # a product's asin
        state.page, state.asin, state.options = "item", button, {}
    elif button in TABS:
        state.page, state.tab = "tab", button
    elif button == BUY_NOW:
        state.page = "done"
    else:  # an option value
        group = next(e.group for row in page.rows for e in row if e.text == button and e.group)
        state.options[group] = button
