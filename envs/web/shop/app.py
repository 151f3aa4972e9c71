"""The shop as a web site: the text mode's pages served as HTML for the browser mode.

One site per process (:func:`site`), served on 127.0.0.1 from a background thread, holds the
sessions (session id -> :class:`Session`: the navigation state, the goal and the score). A
click in the browser is an HTTP request: ``POST /s/<sid>/act`` with the element's ``bid``
(and the search box's text), which the app performs with :func:`pages.apply` on the session's
state before rendering the new page. Every other page is ``GET /s/<sid><path>``, where the
path and query spell the whole state (:func:`state_url`), as WebShop's URLs do: loading a URL
sets the session's state to it, so reloading, going back and restoring are page loads.

Pages are Jinja2 templates with autoescaping on, so titles and instructions always show as
text; a Content-Security-Policy allows only this site's own script. That script
(``static/shop.js``) loads the next page in place (``fetch`` and swap the body), which is
several times faster than a navigation in Chromium; without it the forms post as usual.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from agentgym.envs.web.server import ThreadedServer
from agentgym.envs.web.shop import pages
from agentgym.envs.web.shop import reward as _reward
from agentgym.envs.web.shop.catalog import Catalog, Goal
from agentgym.envs.web.shop.pages import Element, Page, ShopState

_HERE = Path(__file__).resolve().parent
STATIC = {"shop.js": "text/javascript", "shop.css": "text/css"}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
_TEMPLATES = Environment(
    loader=FileSystemLoader(_HERE / "templates"), autoescape=True, undefined=StrictUndefined
)


@dataclass(eq=False)
class Session:
    """One shopper's server-side state; the env that owns it reads and sets it directly.

    Attributes:
        catalog: the catalogue shown (None until the first episode).
        goal: the instruction being played (None until the first episode).
        state: the page shown.
        score: WebShop's reward parts once bought, else empty.
        error: why the last request failed, or None when it succeeded.
    """

    catalog: Catalog | None = None
    goal: Goal | None = None
    state: ShopState = field(default_factory=ShopState)
    score: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def ready(self) -> bool:
        """Whether the session has a catalogue and a goal (pages can be shown)."""
        return self.catalog is not None and self.goal is not None

    def page(self) -> Page:
        """The page the state shows."""
        assert self.catalog is not None and self.goal is not None, "the session has no episode"
        return pages.render(self.state, self.catalog, self.goal.instruction, self.score_value)

    @property
    def score_value(self) -> float:
        """The reward of the purchase (0 before it)."""
        return self.score.get("reward", 0.0)


# --------------------------------------------------------------------------- URLs and state
def state_url(state: ShopState) -> str:
    """The path and query that spell ``state`` (the session id prefix excluded)."""
    if state.page == "search":
        return "/"
    if state.page == "done":
        return "/done"
    params: list[tuple[str, Any]] = [("q", state.query), ("page", state.page_no)]
    if state.page == "results":
        return "/results?" + urlencode(params)
    params += sorted(state.options.items())
    tab = f"/{state.tab.lower()}" if state.page == "tab" else ""
    return f"/item/{quote(state.asin, safe='')}{tab}?" + urlencode(params)


def parse_state(path: str, query: str, cat: Catalog) -> ShopState | None:
    """The state a URL spells (inverse of :func:`state_url`); None for no page of the shop.

    ``/done`` is not parsed: a purchase is made by Buy Now only.
    """
    params = parse_qs(query, keep_blank_values=True)
    one = {k: v[-1] for k, v in params.items()}
    parts = [p for p in path.split("/") if p]
    if not parts:
        return ShopState() if not params else None
    q = one.pop("q", "").strip()
    number = one.pop("page", "")
    if not q or not number.isdigit() or int(number) < 1:
        return None
    n_pages = max(1, -(-len(cat.search(q)) // pages.PRODUCT_WINDOW))
    if int(number) > n_pages:
        return None
    if parts == ["results"] and not one:
        return ShopState(page="results", query=q, page_no=int(number))
    if parts[0] != "item" or len(parts) not in (2, 3) or parts[1] not in cat.by_asin:
        return None
    groups = dict(cat.by_asin[parts[1]].options)
    if any(g not in groups or v not in groups[g] for g, v in one.items()):
        return None
    state = ShopState(page="item", query=q, page_no=int(number), asin=parts[1], options=one)
    if len(parts) == 3:
        tab = next((t for t in pages.TABS if t.lower() == parts[2]), None)
        if tab is None:
            return None
        state.page, state.tab = "tab", tab
    return state


def state_token(state: ShopState) -> str:
    """A short hash of the state: a form posted from another state is refused."""
    return hashlib.sha256(state.key().encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- elements
@dataclass(frozen=True)
class Shown:
    """An element as the HTML shows it: ``kind`` text, textbox or button, with its bid."""

    kind: str
    text: str
    bid: str = ""
    pressed: bool = False
    element: Element | None = None


def numbered(page: Page) -> list[list[Shown]]:
    """The page's rows with a bid (``b1``, ``b2``, ... in page order) on each actionable element.

    The search box becomes a textbox and its Search button.
    """
    rows: list[list[Shown]] = []
    n = 0
    for row in page.rows:
        shown = []
        for e in row:
            if e.kind == "text":
                shown.append(Shown("text", e.text))
                continue
            n += 1
            if e.kind == "search":
                shown.append(Shown("textbox", e.text, f"b{n}", element=e))
                n += 1
                shown.append(Shown("button", "Search", f"b{n}", element=e))
            else:
                shown.append(Shown("button", e.text, f"b{n}", e.kind == "clicked", e))
        rows.append(shown)
    return rows


def _action_of(page: Page, bid: str | None, query: str | None) -> tuple[str | None, str | None]:
    """The text-mode action a posted form means, or an error."""
    target = next((s for row in numbered(page) for s in row if s.bid and s.bid == bid), None)
    if target is None and bid:
        return None, f"there is no element {bid!r} on this page"
    if target is None or (target.element is not None and target.element.kind == "search"):
        if query is None:
            return None, "there is no search box on this page"
        return f"search[{query}]", None
    return f"click[{target.text}]", None


# --------------------------------------------------------------------------- the site
class ShopSite:
    """The app, its server and its sessions (held weakly: a session lives as long as its env)."""

    def __init__(self) -> None:
        """Build the app; the server starts on the first :meth:`url`."""
        self.sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._count = 0
        self._lock = threading.Lock()
        self.app = create_app(self)
        self.server = ThreadedServer(self.app)

    def add(self, session: Session) -> str:
        """Register ``session``; returns its id (unique in this process)."""
        with self._lock:
            self._count += 1
            sid = f"{self._count:x}{hashlib.sha256(str(id(session)).encode()).hexdigest()[:8]}"
            self.sessions[sid] = session
        return sid

    def drop(self, sid: str) -> None:
        """Forget a session."""
        self.sessions.pop(sid, None)

    def url(self, sid: str, path: str = "/") -> str:
        """The full URL of ``path`` in session ``sid`` (starts the server if needed)."""
        return f"{self.server.url}/s/{sid}{path}"


_SITE: ShopSite | None = None
_SITE_LOCK = threading.Lock()


def site() -> ShopSite:
    """The process's shop site (made on first use)."""
    global _SITE
    with _SITE_LOCK:
        if _SITE is None:
            _SITE = ShopSite()
        return _SITE


def render_html(session: Session, sid: str, error: str | None = None) -> str:
    """The HTML of the session's page, with ``error`` shown as an alert."""
    page = session.page()
    return _TEMPLATES.get_template("page.html").render(
        title=f"Shop - {page.name}",
        rows=numbered(page),
        action=f"/s/{sid}/act",
        key=state_token(session.state),
        error=error,
    )


def _respond(session: Session, sid: str, url: str, error: str | None, status: int) -> Response:
    session.error = error
    html = render_html(session, sid, error)
    headers = {**HEADERS, "X-Page-URL": f"/s/{sid}{url}"}
    return HTMLResponse(html, status_code=status, headers=headers)


def create_app(shop: ShopSite) -> FastAPI:
    """The FastAPI app of ``shop``: static files, page loads and actions."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    static = {name: (_HERE / "static" / name).read_bytes() for name in STATIC}

    @app.get("/static/{name}")
    async def static_file(name: str) -> Response:
        if name not in static:
            return Response("not found", status_code=404, headers=HEADERS)
        return Response(static[name], media_type=STATIC[name], headers=HEADERS)

    @app.post("/s/{sid}/act")
    async def act(sid: str, request: Request) -> Response:
        session = shop.sessions.get(sid)
        if session is None:
            return Response("no such session", status_code=404, headers=HEADERS)
        form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
        field_ = {k: v[-1] for k, v in form.items()}
        with session.lock:
            return _act(session, sid, field_)

    @app.get("/s/{sid}/{path:path}")
    async def show(sid: str, path: str, request: Request) -> Response:
        session = shop.sessions.get(sid)
        if session is None or not session.ready:
            return Response("no such session", status_code=404, headers=HEADERS)
        assert session.catalog is not None
        with session.lock:
            # A URL that is no page of the shop shows the current page, with why.
            if path.strip("/") == "done":
                error = None if session.state.page == "done" else "nothing was bought"
                return _respond(session, sid, state_url(session.state), error, 200)
            state = parse_state(path, request.url.query, session.catalog)
            if state is None:
                error = "there is no such page in this shop"
                return _respond(session, sid, state_url(session.state), error, 404)
            session.state, session.score = state, {}
            return _respond(session, sid, state_url(state), None, 200)

    return app


def _act(session: Session, sid: str, fields: dict[str, str]) -> Response:
    """Perform a posted form on the session's state (the caller holds the session's lock)."""
    state, cat = session.state, session.catalog
    if cat is None or session.goal is None or state.page == "done":
        return _respond(session, sid, state_url(state), "the episode is over", 409)
    if fields.get("key") != state_token(state):
        stale = "the page is out of date: it changed since it was shown"
        return _respond(session, sid, state_url(state), stale, 409)
    page = session.page()
    action, error = _action_of(page, fields.get("bid"), fields.get("q"))
    if action is not None:
        error = pages.apply(state, page, action, cat)
    if error is None and state.page == "done":
        product = cat.by_asin[state.asin]
        session.score = _reward.reward(product, session.goal, state.options)
    return _respond(session, sid, state_url(state), error, 200)
