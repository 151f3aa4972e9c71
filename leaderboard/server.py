"""The leaderboard's read-only web page (``agentgym leaderboard serve``).

Pages: ``/`` (every env with its leader), ``/env/{env_id}`` (the ranked table, sortable by
clicking a column header), ``/submission/{id}`` (everything recorded about one submission),
and ``/api/rows[?env=ENV_ID]`` (the rows as JSON, for scripts).

The statistic columns of a submission's scores come from
:data:`agentgym.harness.stats.STATISTICS` (a submission stored before a statistic existed shows
an en dash for it).

Every page is rendered by Jinja2 with autoescaping on for every template, so names, agent
specs and env kwargs chosen by submitters always render as text. As a second line of
defence the responses carry a Content-Security-Policy that allows scripts only from this
server's own ``/static/`` files: even a string that escaped escaping could not run.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentgym.core.errors import BadInput
from agentgym.harness import stats

if TYPE_CHECKING:
    from agentgym.leaderboard.store import Leaderboard

__all__ = ["LeaderboardReader", "create_app", "serve", "template_environment"]

_HERE = Path(__file__).resolve().parent
TEMPLATES = _HERE / "templates"
STATIC = _HERE / "static"

#: Sent with every response. Inline ``style`` attributes draw the interval bars; no inline
#: or foreign script is ever allowed.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

T = TypeVar("T")


class LeaderboardReader(Protocol):
    """The part of :class:`agentgym.leaderboard.store.Leaderboard` the page reads."""

    def rows(self, env_id: str | None = None) -> list[dict[str, Any]]:
        """One row per (submission, env), ranked per env (rank 1 is best)."""
        ...

    def detail(self, submission_id: int) -> dict[str, Any]:
        """Everything recorded about one submission; raises ``BadInput`` if unknown."""
        ...

    def env_ids(self) -> list[str]:
        """The envs that have at least one submission."""
        ...


def _unit(value: Any) -> float:
    """A score clamped to [0, 1]; non-numbers and NaN count as 0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if x != x else min(max(x, 0.0), 1.0)


def _pct(value: Any) -> str:
    """A score in [0, 1] as a CSS percentage (clamped)."""
    return f"{_unit(value) * 100:.2f}%"


def _num(value: Any, digits: int = 3) -> str:
    """A float with ``digits`` decimals, or an en dash when missing."""
    if value is None:
        return "–"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def _tojson_text(value: Any) -> str:
    """Compact, key-sorted JSON for display (escaped by autoescape like any other text)."""
    return json.dumps(value, sort_keys=True, default=str)


def _bar(ci_low: Any, ci_high: Any, mean: Any) -> dict[str, str]:
    """CSS ``left``/``width`` of the interval and ``left`` of the mean tick."""
    low, high = _unit(ci_low), _unit(ci_high)
    return {"left": _pct(low), "width": _pct(max(high - low, 0.0)), "mean": _pct(mean)}


def template_environment() -> Environment:
    """The Jinja2 environment of the pages.

    Autoescape is on for every template and undefined variables are errors; the filters
    ``num``, ``pct``, ``tojson_text`` and ``url_path`` are added.
    """
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its name
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.filters["tojson_text"] = _tojson_text
    env.filters["url_path"] = lambda s: quote(str(s), safe="/")
    env.globals["bar"] = _bar
    return env


class _SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + self.headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _Views:
    """The pages and the JSON endpoint over one store, its calls serialised by a lock."""

    def __init__(self, leaderboard: LeaderboardReader) -> None:
        """Read ``leaderboard`` and render with :func:`template_environment`."""
        self.leaderboard = leaderboard
        self.templates = template_environment()
        self.lock = threading.Lock()

    def _read(self, fn: Callable[[], T]) -> T:
        with self.lock:
            return fn()

    def _page(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status_code)

    def _not_found(self, what: str) -> HTMLResponse:
        return self._page("404.html", status_code=404, what=what)

    def index(self) -> HTMLResponse:
        """Every env with its number of submissions and its leader(s)."""

        def summarise() -> list[dict[str, Any]]:
            envs = []
            for env_id in self.leaderboard.env_ids():
                rows = self.leaderboard.rows(env_id)
                top = min((r["rank"] for r in rows), default=None)
                leaders = [r for r in rows if r["rank"] == top]
                envs.append({"env_id": env_id, "count": len(rows), "leaders": leaders})
            return envs

        return self._page("index.html", envs=self._read(summarise))

    def env_page(self, env_id: str) -> HTMLResponse:
        """The ranked table of one env."""

        def load() -> list[dict[str, Any]] | None:
            if env_id not in self.leaderboard.env_ids():
                return None
            return sorted(self.leaderboard.rows(env_id), key=lambda r: (r["rank"], r["id"]))

        rows = self._read(load)
        if rows is None:
            return self._not_found(f"no submissions for env {env_id!r}")
        return self._page("env.html", env_id=env_id, rows=rows)

    def submission_page(self, submission_id: int) -> HTMLResponse:
        """Everything recorded about one submission."""
        try:
            detail = self._read(lambda: self.leaderboard.detail(submission_id))
        except BadInput:
            return self._not_found(f"no submission with id {submission_id}")
        return self._page("submission.html", s=detail, statistics=stats.STATISTICS)

    def api_rows(self, request: Request) -> JSONResponse:
        """The rows as JSON (``?env=ENV_ID`` for one env); 404 for an env with none."""
        env_id = request.query_params.get("env")

        def load() -> list[dict[str, Any]] | None:
            if env_id is not None and env_id not in self.leaderboard.env_ids():
                return None
            return self.leaderboard.rows(env_id)

        rows = self._read(load)
        if rows is None:
            return JSONResponse({"detail": f"no submissions for env {env_id!r}"}, 404)
        return JSONResponse(rows)


def create_app(leaderboard: Leaderboard | LeaderboardReader) -> FastAPI:
    """The read-only web application over a leaderboard store.

    Args:
        leaderboard: the store to read; any object with ``rows``, ``detail`` and
            ``env_ids`` as in :class:`LeaderboardReader`. Calls into it are serialised by a
            lock, so a store holding one SQLite connection is safe under the thread pool.

    Returns:
        A FastAPI app with the pages ``/``, ``/env/{env_id}``, ``/submission/{id}``, the
        JSON endpoint ``/api/rows`` and the files under ``/static/``. Unknown envs and
        submissions answer 404.
    """
    views = _Views(leaderboard)
    app = FastAPI(
        title="agentgym leaderboard",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.add_middleware(_SecurityHeaders)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.get("/", response_class=HTMLResponse)(views.index)
    app.get("/env/{env_id:path}", response_class=HTMLResponse)(views.env_page)
    app.get("/submission/{submission_id:int}", response_class=HTMLResponse)(views.submission_page)
    app.get("/api/rows")(views.api_rows)
    return app


def serve(db: Path | None, port: int = 8765, host: str = "127.0.0.1") -> None:
    """Serve the leaderboard in ``db`` until interrupted (blocks).

    Args:
        db: the SQLite database (default: the one under ``AGENTGYM_HOME``).
        port: TCP port.
        host: interface to bind; the default keeps the page on this machine.
    """
    import uvicorn

    from agentgym.leaderboard.store import Leaderboard

    uvicorn.run(create_app(Leaderboard(db)), host=host, port=port, log_level="warning")
