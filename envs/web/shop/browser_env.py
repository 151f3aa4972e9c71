"""The shop in a real browser: the project's web app driven by Selenium and headless Chromium."""

from __future__ import annotations

import re
from typing import Any

from agentgym.core.env import Transition
from agentgym.core.menu import Menu, shorten
from agentgym.envs.web.actions import USAGE, Call, parse_call
from agentgym.envs.web.browser import Browser, BrowserConfig, BrowserError, BrowserMissing, listing
from agentgym.envs.web.shop import pages
from agentgym.envs.web.shop.app import Session, site, state_url
from agentgym.envs.web.shop.catalog import Goal
from agentgym.envs.web.shop.env import MAX_MENU, ShopEnv
from agentgym.envs.web.shop.pages import ShopState

MAX_QUERY = 500
"""Longest text a search box takes (the query travels in the page's URL)."""
SCROLL_STEP = 0.8  # share of the viewport height one scroll moves
_SESSION_PREFIX = re.compile(r"^/s/[^/?]+")
_ACTIONS_HINT = "write search[query], click[button] or one of " + ", ".join(USAGE.values())


class BrowserShopEnv(ShopEnv):
    """Buy the product an instruction describes, in the shop's web site in headless Chromium.

    ## Description
    The tasks, catalogue, pages and reward of :class:`~agentgym.envs.web.shop.env.ShopEnv`
    (the text mode), served as HTML by the project's own app on 127.0.0.1
    (:mod:`agentgym.envs.web.shop.app`) and driven through Selenium. The app holds the
    navigation state; a click is an HTTP request that it performs on that state. One browser
    per env, started on the first reset, reused across episodes, closed by ``close()``, at
    garbage collection and at exit.

    ## Observation
    Text (:class:`~agentgym.core.spaces.String`): ``URL: <path?query>`` (no host, port or
    session), then the page read from the DOM, one element per line as BrowserGym's AXTree
    text: ``[b12] button 'Buy Now'``, ``[b1] textbox 'Search'``, ``StaticText '...'``
    (:func:`agentgym.envs.web.browser.listing`). With ``screenshot=True``,
    ``info["screenshot"]`` holds the viewport as a ``(768, 1024, 3)`` uint8 array.

    ## Action
    Text. BrowserGym's calls on element ids: ``click('b12')``, ``fill('b1', 'text')``,
    ``press('b1', 'Enter')`` (submits a text box's form; on a button, clicks it),
    ``scroll('down')`` / ``scroll('up')``, ``go_back()`` (the previous page of this
    episode). The text mode's ``search[query]`` and ``click[button]`` work too, on the
    page's search box and buttons, so text-mode agents and the oracle play unchanged.
    ``info["admissible_actions"]`` is the text mode's list. A search box takes one line of
    at most 500 characters (line breaks become spaces; longer text is an invalid action).
    With ``menu=True``: the text mode's numbered menu (``Discrete(64)`` with
    ``info["action_mask"]``), listed under the page; each item is performed in the browser.

    ## Rewards
    The text mode's (WebShop's reward on Buy Now); ``info["reward_components"]`` its parts.

    ## Termination
    Terminates on Buy Now; truncates after ``max_turns`` turns (15 by default). When the
    browser crashes or hangs (no page within ``timeout_s``), the step truncates with reward
    0, ``info["error"]`` says what happened and the observation says so; the browser is torn
    down and the next reset starts a new one.

    ## Registered ids
    ``agentgym/Shop-Browser-Small-v0``, ``agentgym/Shop-Browser-Large-v0``; ``menu=True`` on
    either for the menu form.

    ## Version history
    v0: first version.
    """

    def __init__(
        self,
        preset: str = "small",
        menu: bool = False,
        *,
        screenshot: bool = False,
        timeout_s: float = 10.0,
        **kwargs: Any,
    ):
        """Create the env; the browser starts on the first reset.

        Args:
            preset: ``small`` or ``large``, as the text mode.
            menu: the text mode's numbered menu (``Discrete(64)``) instead of free text.
            screenshot: put the viewport in ``info["screenshot"]`` after every reset and step.
            timeout_s: how long a page or script may take before the browser counts as hung.
            **kwargs: as :class:`~agentgym.core.env.AgentEnv` (split, privileged, max_turns,
                render_mode).
        """
        self._session = Session()
        super().__init__(preset=preset, menu=menu, **kwargs)
        self.screenshot = bool(screenshot)
        self.browser = Browser(BrowserConfig(timeout_s=float(timeout_s)))
        self._sid = site().add(self._session)
        self._history: list[str] = []  # URLs of earlier pages of the episode, for go_back
        self._typed: dict[str, str] = {}  # text filled into boxes of the page shown
        self._scroll = 0
        self._shown: dict[str, Any] = {"url": "/", "items": []}  # the page as last read
        self._synced = False  # whether the browser shows the session's page
        self._failure: str | None = None

    # ------------------------------------------------------------------ server-side state
    @property
    def _state(self) -> ShopState:
        return self._session.state

    @_state.setter
    def _state(self, value: ShopState) -> None:
        with self._session.lock:
            self._session.state = value

    @property
    def _goal(self) -> Goal | None:
        return self._session.goal

    @_goal.setter
    def _goal(self, value: Goal | None) -> None:
        with self._session.lock:
            self._session.goal = value

    @property
    def _score(self) -> dict[str, float]:
        return self._session.score

    @_score.setter
    def _score(self, value: dict[str, float]) -> None:
        with self._session.lock:
            self._session.score = value

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._session.catalog = self.catalog
        self._goal = self._goal_of(task_id)
        self._state, self._score = ShopState(), {}
        self._history, self._typed, self._scroll = [], {}, 0
        self._synced = False
        for attempt in (1, 2):  # a browser that died between episodes is replaced once
            try:
                self._sync()
                info = self._info(self.page(), valid=True)
                self._add_screenshot(info)
                break
            except BrowserMissing:
                raise
            except BrowserError:
                if attempt == 2:
                    raise
        return self._observe_shown(None), info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """As :meth:`AgentEnv.step`; a browser failure truncates the episode (see Termination)."""
        self._failure = None
        obs, reward, terminated, truncated, info = super().step(action)
        if self._failure is not None:
            self._done, truncated = True, True
        return obs, reward, terminated, truncated, info

    def _apply(self, action: Any) -> Transition:
        try:
            self._sync()
            error = self._perform(action)
            done = error is None and self._state.page == "done"
            text = action if isinstance(action, str) and pages.parse(action) else None
            info = self._info(self.page(), valid=error is None, action=text)
            self._add_screenshot(info)
        except BrowserError as e:
            return self._fail(e)
        reward = self._score.get("reward", 0.0) if done else 0.0
        return Transition(self._observe_shown(error), reward, done, info)

    def _fail(self, e: BrowserError) -> Transition:
        self._synced = False
        self._failure = str(e)
        info = self._info(self.page(), valid=False)
        info["error"] = self._failure
        obs = f"Browser error: {e}. The episode ends here; reset() starts a new browser."
        return Transition(obs, 0.0, False, info)

    def _add_screenshot(self, info: dict[str, Any]) -> None:
        if self.screenshot:
            info["screenshot"] = self.browser.screenshot()

    def _observe_shown(self, error: str | None) -> str:
        parts = [f"Invalid action: {error}."] if error else []
        parts.append("URL: " + _SESSION_PREFIX.sub("", self._shown["url"]))
        parts.append(listing(self._shown))
        page = self.page()
        if self.menu and page.name != "done":
            parts.append("Actions:\n" + Menu(self.actions(page), MAX_MENU).render())
        return "\n".join(parts)

    # ------------------------------------------------------------------ the browser
    def _sync(self) -> None:
        """Make the browser show the session's page (after a reset, a restore or a restart)."""
        if self._synced and self.browser.started:
            return
        self._session.error = None
        shown = self.browser.open(site().url(self._sid, state_url(self._state)))
        if shown["error"] is not None or self._session.error is not None:
            self.browser.abort()
            raise BrowserError(
                f"the shop page did not load: {shown['error'] or self._session.error}"
            )
        for bid, text in self._typed.items():
            shown = self.browser.act("fill", bid, text)
        if self._scroll:
            shown = self.browser.act("scroll", "", self._scroll)
            self._scroll = shown["scroll_y"]
        self._shown, self._synced = shown, True

    def _perform(self, action: Any) -> str | None:
        """Carry out ``action`` in the browser; the error text, or None."""
        if self.menu:
            action, error = self._resolve(action, self.page())
            if action is None:
                return error
        if not isinstance(action, str):
            return f"invalid action {shorten(repr(action))}: {_ACTIONS_HINT}"
        parsed = pages.parse(action)
        if parsed is not None:
            return self._text_action(*parsed)
        call, error = parse_call(action)
        if call is None:
            return error or f"invalid action {shorten(action)}: {_ACTIONS_HINT}"
        return self._call(call)

    def _text_action(self, verb: str, arg: str) -> str | None:
        """``search[query]`` on the search box, ``click[text]`` on the first such button."""
        if verb == "search":
            box = next((i for i in self._shown["items"] if i[0] == "textbox" and i[1]), None)
            if box is None:
                return "there is no search box on this page: click[Back to Search] first"
            return self._fill(box[1], arg, submit=True)
        wanted = arg.casefold()
        button = next(
            (i for i in self._shown["items"] if i[0] == "button" and i[2].casefold() == wanted),
            None,
        )
        if button is None:
            return f"there is no button {arg!r} on this page"
        return self._do("click", button[1])

    def _call(self, call: Call) -> str | None:
        """A BrowserGym-style call."""
        if call.name == "go_back":
            if not self._history:
                return "there is no earlier page in this episode"
            url = self._history.pop()
            return self._do("load", "", site().url(self._sid, url), remember=False)
        if call.name == "scroll":
            if call.args[0] not in ("up", "down"):
                return f"scroll takes 'up' or 'down', not {shorten(call.args[0])}"
            step = int(self.browser.config.height * SCROLL_STEP)
            offset = self._scroll + (step if call.args[0] == "down" else -step)
            return self._do("scroll", "", max(0, offset))
        bid = call.args[0]
        item = next((i for i in self._shown["items"] if i[1] and i[1] == bid), None)
        if item is None:
            return f"there is no element {shorten(bid)} on this page"
        role = item[0]
        if call.name == "click":
            return self._do("click", bid)
        if call.name == "fill":
            if role != "textbox":
                return f"{bid} is a {role}, not a textbox"
            return self._fill(bid, call.args[1], submit=False)
        if call.args[1] != "Enter":
            return f"press supports the Enter key, not {shorten(call.args[1])}"
        return self._do("submit" if role == "textbox" else "click", bid)

    def _fill(self, bid: str, text: str, *, submit: bool) -> str | None:
        line = " ".join(text.splitlines()) if "\n" in text or "\r" in text else text
        if len(line) > MAX_QUERY:
            return f"the text is too long ({len(line):,} characters; a box takes {MAX_QUERY})"
        return self._do("fill_submit" if submit else "fill", bid, line)

    def _do(self, op: str, bid: str, arg: Any = None, *, remember: bool = True) -> str | None:
        """One operation on the page; remembers the page left and what was typed."""
        before = state_url(self._state)
        self._session.error = None
        shown = self.browser.act(op, bid, arg)
        self._shown = shown
        if shown["error"] is not None:
            return str(shown["error"])
        if op == "fill":
            self._typed[bid] = arg
        self._scroll = shown["scroll_y"]
        if not shown["loaded"]:
            return None
        self._typed = {}
        if self._session.error is None and remember:
            self._history.append(before)
        return self._session.error

    # ------------------------------------------------------------------ snapshots, closing
    def _get_state(self) -> dict[str, Any]:
        state = super()._get_state()
        state.update(history=list(self._history), typed=dict(self._typed), scroll=self._scroll)
        return state

    def _set_state(self, state: dict[str, Any]) -> None:
        self._session.catalog = self.catalog
        super()._set_state(state)
        self._history = list(state["history"])
        self._typed = dict(state["typed"])
        self._scroll = int(state["scroll"])
        self._synced = False  # the browser catches up on the next step

    def close(self) -> None:
        """Close the browser (a later reset starts a new one)."""
        self.browser.close()
        super().close()
