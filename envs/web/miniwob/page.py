"""One headless Chromium playing MiniWoB++ task pages under a virtual clock.

The pages are the task files the ``miniwob`` package ships; the episode logic is theirs
(``core.startEpisodeReal``, ``core.elementClick``, ``core.getDOMInfo`` and the reward globals
of miniwob's ``core.js``). What differs from ``miniwob``'s own Selenium instance is time and
isolation, so that a seed gives the same episode byte for byte in any process:

* a script installed before any page script replaces ``setTimeout``, ``setInterval``,
  ``requestAnimationFrame``, ``Date`` and ``performance.now`` by a virtual clock; each action
  is followed by :data:`STEP_MS` of virtual time, run at once (animations and delayed content
  settle the same way whatever the host's speed), and dates are fixed (2017-01-01, UTC);
* ``Math.random`` is seeded before the task's own scripts run; the task's seed then reseeds it
  through miniwob's ``Math.seedrandom`` exactly as ``miniwob`` does;
* the page is loaded afresh on every episode (no widget state leaks from one to the next);
* miniwob's 10-second episode timer is switched off: the env's turn limit ends episodes.

An action and the observation after it take one ``execute_script`` where the action allows
(clicks, waits); typing and key presses go through miniwob's own Selenium key actions. The
browser itself (its start, temp home, time limits and teardown) is the web family's
:class:`~agentgym.envs.web.browser.Browser`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from agentgym.envs.web.browser import Browser, BrowserConfig, BrowserError

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
STEP_MS = 1000
"""Virtual milliseconds that pass after every action (and after the episode starts)."""
WINDOW = (500, 320)
"""miniwob's window size (its tasks lay out in the top-left 160 x 210 pixels)."""
CLOCK_JS = r"""
(function () {
  var RealDate = Date, start = 1483228800000, now = start, seq = 0, timers = {};
  var s = 0x9e3779b9;
  Math.random = function () {  // deterministic until the task's seed replaces it
    s = (s + 0x6d2b79f5) | 0;
    var t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  function add(fn, ms, args, every) {
    var id = ++seq, delay = Math.max(0, Number(ms) || 0);
    timers[id] = {id: id, at: now + delay, fn: fn, args: args,
                  every: every ? Math.max(1, delay) : 0, order: id};
    return id;
  }
  function clear(id) { delete timers[id]; }
  window.setTimeout = function (fn, ms) { return add(fn, ms, [].slice.call(arguments, 2), false); };
  window.setInterval = function (fn, ms) { return add(fn, ms, [].slice.call(arguments, 2), true); };
  window.clearTimeout = window.clearInterval = clear;
  window.requestAnimationFrame = function (fn) {
    return add(function () { fn(now - start); }, 16, [], false);
  };
  window.cancelAnimationFrame = clear;
  function FakeDate(a, b, c, d, e, f, g) {
    var n = arguments.length;
    if (!(this instanceof FakeDate)) return new RealDate(now).toString();
    var date = n === 0 ? new RealDate(now) : n === 1 ? new RealDate(a)
      : new RealDate(a, b, n > 2 ? c : 1, n > 3 ? d : 0, n > 4 ? e : 0, n > 5 ? f : 0,
                     n > 6 ? g : 0);
    Object.setPrototypeOf(date, FakeDate.prototype);
    return date;
  }
  FakeDate.prototype = Object.create(RealDate.prototype);
  FakeDate.prototype.constructor = FakeDate;
  FakeDate.now = function () { return now; };
  FakeDate.UTC = RealDate.UTC;
  FakeDate.parse = RealDate.parse;
  window.Date = FakeDate;
  performance.now = function () { return now - start; };
  window.__agentgymClock = {
    advance: function (ms) {
      var end = now + ms;
      for (var guard = 0; guard < 100000; guard++) {
        var next = null;
        for (var k in timers) {
          var t = timers[k];
          if (t.at <= end && (next === null || t.at < next.at ||
                              (t.at === next.at && t.order < next.order))) next = t;
        }
        if (next === null) break;
        if (next.at > now) now = next.at;
        if (next.every) { next.at += next.every; next.order = ++seq; } else delete timers[next.id];
        try {
          if (typeof next.fn === 'function') next.fn.apply(window, next.args);
          else (0, eval)(String(next.fn));
        } catch (err) { console.error(err); }
      }
      now = end;
    }
  };
})();
"""

# Once the task has ended, time stops and the page is not read (as miniwob returns an empty
# observation then).
_OBSERVE = (
    "if (!WOB_DONE_GLOBAL) __agentgymClock.advance({ms}); var over = WOB_DONE_GLOBAL;"
    "return {{done: over, raw: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON,"
    " utterance: core.getUtterance(), dom: over ? null : core.getDOMInfo(), error: error,"
    # after getDOMInfo, which gives every listed element its data-wob_ref
    " selects: over ? [] : Array.prototype.map.call(document.querySelectorAll('select'),"
    "   function (s) {{ return [s.dataset.wob_ref || null,"
    "     Array.prototype.map.call(s.options, function (o) {{ return o.text; }}),"
    "     s.selectedIndex]; }})}};"
)
_START = (
    "var error = null; __agentgymClock.advance(0);"
    "Math.seedrandom({seed}); core.setDataMode({mode}); core.startEpisodeReal();"
    # no episode timer: EP_TIMER must stay non-null, or endEpisode ignores the outcome
    "clearTimeout(core.EP_TIMER); core.EP_TIMER = -1; clearInterval(core.CD_TIMER);"
)
_CLICK = "var r = core.elementClick({ref}); var error = r === true ? null : String(r);"


@dataclass(frozen=True)
class PageState:
    """What the page shows after an action: miniwob's episode globals and DOM tree."""

    done: bool
    raw_reward: float
    reason: Any
    utterance: str
    dom: dict[str, Any] | None
    """``core.getDOMInfo()``'s tree; None once the task has ended."""
    error: str | None
    selects: list[Any]
    """``[ref, option texts, selected index]`` of every ``<select>`` (its options have no box)."""
    fields: list[tuple[str, str]] | None
    """The fields a task gives with its utterance (most leave them to miniwob's extractors)."""

    @classmethod
    def of(cls, raw: dict[str, Any]) -> PageState:
        """From the dict the observing script returns."""
        utterance, fields = raw["utterance"], None
        if isinstance(utterance, dict):  # tasks that give their fields with the utterance
            utterance, fields = utterance["utterance"], list(utterance["fields"].items())
        return cls(
            done=bool(raw["done"]),
            raw_reward=float(raw["raw"] or 0.0),
            reason=raw["reason"],
            utterance=str(utterance),
            dom=raw["dom"],
            error=raw["error"],
            selects=list(raw["selects"]),
            fields=fields,
        )


def browser_environ() -> None:
    """Point Selenium and miniwob at the system Chromium, offline (Selenium Manager never runs).

    Sets ``SE_OFFLINE``, ``MINIWOB_CHROME_BINARY`` and ``MINIWOB_CHROMEDRIVER`` (both, as
    miniwob requires) unless they are set already.
    """
    os.environ.setdefault("SE_OFFLINE", "true")
    os.environ.setdefault("MINIWOB_CHROME_BINARY", CHROMIUM)
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", CHROMEDRIVER)


def task_url(task: str) -> str:
    """The file URL of a task page shipped by ``miniwob``."""
    from miniwob.selenium_instance import DEFAULT_BASE_URL

    return f"{DEFAULT_BASE_URL}{task}.html"


class Page:
    """A task page in the web family's :class:`~agentgym.envs.web.browser.Browser`.

    That is: lazy start, a temp home, hard time limits, no process left behind; a browser
    failure raises :class:`~agentgym.envs.web.browser.BrowserError` after the browser is
    torn down. It runs the Chromium that ``MINIWOB_CHROME_BINARY`` and
    ``MINIWOB_CHROMEDRIVER`` name (the system's by default) in miniwob's 500 x 320 window.
    """

    def __init__(self) -> None:
        """Nothing starts until the first :meth:`load`."""
        self.browser = Browser(
            BrowserConfig(
                chromium=os.environ.get("MINIWOB_CHROME_BINARY", CHROMIUM),
                chromedriver=os.environ.get("MINIWOB_CHROMEDRIVER", CHROMEDRIVER),
                width=WINDOW[0],
                height=WINDOW[1],
            )
        )
        self._prepared = 0  # the browser start the clock script was installed in

    def _prepare(self) -> None:
        """Start the browser if needed and install the clock before any page script."""
        self.browser.start()
        if self._prepared == self.browser.starts:
            return
        for command, params in (
            ("Page.addScriptToEvaluateOnNewDocument", {"source": CLOCK_JS}),
            ("Emulation.setTimezoneOverride", {"timezoneId": "UTC"}),
            ("Emulation.setLocaleOverride", {"locale": "en-US"}),
        ):
            self.browser.call("execute_cdp_cmd", command, params)
        self._prepared = self.browser.starts

    def load(self, task: str, seed: int, mode: str) -> PageState:
        """Open ``task``'s page afresh and start the episode of ``seed`` in data ``mode``."""
        self._prepare()
        self.browser.call("get", task_url(task))
        script = _START.format(seed=int(seed), mode=json.dumps(mode))
        return self._run(script + _OBSERVE.format(ms=STEP_MS))

    def click(self, ref: int) -> PageState:
        """``core.elementClick(ref)`` (miniwob's CLICK_ELEMENT), then time passes."""
        return self._run(_CLICK.format(ref=int(ref)) + _OBSERVE.format(ms=STEP_MS))

    def type(self, ref: int, text: str) -> PageState:
        """FOCUS_ELEMENT_AND_TYPE_TEXT as miniwob does it: click ``ref``, then type key by key."""
        from miniwob.selenium_actions import execute_type_text

        error = self.browser.call("execute_script", f"return core.elementClick({int(ref)});")
        if error is not True:
            return self.observe(str(error))
        self._keys(execute_type_text, text)
        return self.observe()

    def press(self, key: str) -> PageState:
        """PRESS_KEY as miniwob does it, a key in its syntax (``<Enter>``, ``C-a``, ``x``)."""
        from miniwob.selenium_actions import execute_press_key

        self._keys(execute_press_key, key)
        return self.observe()

    def observe(self, error: str | None = None, ms: int = STEP_MS) -> PageState:
        """Let ``ms`` virtual milliseconds pass, then read the page."""
        return self._run(f"var error = {json.dumps(error)};" + _OBSERVE.format(ms=int(ms)))

    def close(self) -> None:
        """Quit the browser (idempotent; the next :meth:`load` starts another)."""
        self.browser.close()

    def _run(self, script: str) -> PageState:
        return PageState.of(self.browser.call("execute_script", script))

    def _keys(self, send: Any, keys: str) -> None:
        """Send keys with miniwob's Selenium key actions; failures as :meth:`Browser.call`."""
        from selenium.common.exceptions import WebDriverException
        from urllib3.exceptions import HTTPError

        try:
            send(keys, self.browser.driver)
        except (WebDriverException, HTTPError, OSError) as e:
            self.browser.abort()
            raise BrowserError(f"the browser failed ({type(e).__name__})") from e
