"""A headless Chromium driven by Selenium, for the web envs: one browser per env instance.

:class:`Browser` starts lazily, keeps every file under a fresh temp dir (profile, crash
reports, caches), never lets Selenium Manager reach the network, and shuts down on
:meth:`Browser.close`, when it is garbage-collected and at interpreter exit, killing any
process of its own that outlived the driver. Every call to the browser has a hard time
limit; a crashed, killed or hung browser surfaces as :class:`BrowserError` after the browser
is torn down, so the caller can report the episode and start a new one.

Pages are read as an accessibility-tree-like listing (:func:`listing`): one item per element
with a ``bid`` attribute (the agent's handle on it), per heading or alert, and per piece of
static text. Sites served for the web envs can load their next page in place: a page script
that, on a form submit, sets ``window.agentgymPending`` to a promise resolving once the new
page is shown (and defines ``window.agentgymLoad(url)`` doing the same for a URL) lets one
script round trip click and read the next page (:meth:`Browser.act`). Pages without that
script still work: their navigation is waited for by the driver.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.core.errors import AgentGymError

INSTALL_HINT = "run `apt-get update && apt-get install -y chromium chromium-driver`"


def tag_prefix() -> str:
    """The start of the temp dir name of every browser this process starts."""
    return f"agentgym-browser-{os.getpid()}-"


FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-crash-reporter",
    # History API calls are throttled past 200 per 10 s; pages here change the URL per step.
    "--disable-ipc-flooding-protection",
)


class BrowserError(AgentGymError, RuntimeError):
    """The browser crashed, hung or could not start; it has been torn down already."""


class BrowserMissing(BrowserError):
    """Chromium or chromedriver is not installed."""


@dataclass(frozen=True)
class BrowserConfig:
    """How to start the browser.

    Attributes:
        chromium: the Chromium binary.
        chromedriver: the matching chromedriver.
        width: viewport width in CSS pixels (screenshots are this wide).
        height: viewport height in CSS pixels (screenshots are this tall).
        timeout_s: limit on a page load or a script; the HTTP call to the driver gets 5 s
            more, so a hung browser cannot block forever.
        start_timeout_s: the same limits while the browser starts (at least ``timeout_s``):
            a first renderer on a busy machine can take longer than a page load may.
    """

    chromium: str = "/usr/bin/chromium"
    chromedriver: str = "/usr/bin/chromedriver"
    width: int = 1024
    height: int = 768
    timeout_s: float = 10.0
    start_timeout_s: float = 60.0


@dataclass
class _Handles:
    """What shutting a browser down needs; kept apart so a finalizer holds no browser."""

    tag: str = ""
    home: str = ""
    driver: Any = None
    pid: int = 0  # the process that started the browser: a forked child leaves it alone
    lock: threading.Lock = field(default_factory=threading.Lock)


class Browser:
    """One headless Chromium session, started on first use.

    Attributes:
        config: the :class:`BrowserConfig`.
        starts: how many times a browser was started (restarts after failures included).
    """

    def __init__(self, config: BrowserConfig | None = None):
        """Prepare; nothing starts until a page is opened or :meth:`start` is called."""
        self.config = config or BrowserConfig()
        self.starts = 0
        self._h = _Handles()
        self._finalizer = weakref.finalize(self, _shutdown, self._h, True)

    # ------------------------------------------------------------------ lifecycle
    @property
    def started(self) -> bool:
        """Whether a browser is running (as far as this object knows)."""
        return self._h.driver is not None

    @property
    def driver(self) -> Any:
        """The Selenium driver, started if needed (calls through it are not guarded)."""
        self.start()
        return self._h.driver

    def start(self) -> None:
        """Start Chromium and its driver (no-op when started); :class:`BrowserError` if not."""
        if self.started:
            return
        cfg = self.config
        missing = [p for p in (cfg.chromium, cfg.chromedriver) if not Path(p).exists()]
        if missing:
            raise BrowserMissing(
                f"headless Chromium is needed ({', '.join(missing)}): {INSTALL_HINT}"
            )
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download
        home = tempfile.mkdtemp(prefix=tag_prefix())
        options = webdriver.ChromeOptions()
        options.binary_location = cfg.chromium
        for flag in (*FLAGS, f"--user-data-dir={home}/profile"):
            options.add_argument(flag)
        # Chromium writes crash reports and caches under XDG dirs whatever the profile.
        env = dict(
            os.environ,
            XDG_CONFIG_HOME=f"{home}/config",
            XDG_CACHE_HOME=f"{home}/cache",
            AGENTGYM_BROWSER=home,
        )
        self._h.tag, self._h.home, self._h.pid = home, home, os.getpid()
        try:
            driver = webdriver.Chrome(options=options, service=Service(cfg.chromedriver, env=env))
            _set_timeouts(driver, max(cfg.start_timeout_s, cfg.timeout_s))
            metrics = {"width": cfg.width, "height": cfg.height}
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {**metrics, "deviceScaleFactor": 1, "mobile": False},
            )
            _set_timeouts(driver, cfg.timeout_s)
        except Exception as e:  # anything at all: tear down what started, then report
            _shutdown(self._h, False)
            raise BrowserError(f"Chromium did not start: {type(e).__name__}: {e}") from e
        self._h.driver = driver
        self.starts += 1

    def close(self) -> None:
        """Quit the browser, kill any of its processes left, remove its temp dir (idempotent)."""
        _shutdown(self._h, True)

    def abort(self) -> None:
        """Kill the browser's processes without asking the driver (for a hung browser)."""
        _shutdown(self._h, False)

    # ------------------------------------------------------------------ calls
    def call(self, method: str, *args: Any) -> Any:
        """``driver.<method>(*args)``, starting the browser first if needed.

        Raises:
            BrowserError: the browser failed (it is torn down; the next call starts anew).
        """
        self.start()
        from selenium.common.exceptions import WebDriverException
        from urllib3.exceptions import HTTPError

        try:
            return getattr(self._h.driver, method)(*args)
        except (WebDriverException, HTTPError, OSError) as e:
            self.abort()
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise BrowserError(f"the browser failed ({type(e).__name__}: {first})") from e

    def open(self, url: str) -> dict[str, Any]:
        """Show ``url`` and read it (see :meth:`act` for the result).

        In place when the page shown offers ``window.agentgymLoad`` (one round trip), else by
        a full page load.
        """
        if self.started:
            page = self.act("load", "", url)
            if page["error"] is None:
                return page
        self.call("get", url)
        page = self.act("read")
        page["loaded"] = True
        return page

    def act(self, op: str, bid: str = "", arg: Any = None) -> dict[str, Any]:
        """Do one thing on the page and read the page that follows, in one round trip.

        Args:
            op: ``read``, ``click``, ``fill`` (``arg``: the text), ``submit`` (submits the
                form of element ``bid``), ``fill_submit`` (both), ``scroll`` (``arg``: the
                y offset in CSS pixels) or ``load`` (``arg``: a URL of the same site).
            bid: the element's ``bid`` attribute (click, fill, submit).
            arg: as described for ``op``.

        Returns:
            ``{"url", "title", "items", "scroll_y", "loaded", "error"}``: the page's path and
            query, its title, the listing's raw items, the vertical scroll offset, whether a
            new page was loaded, and a script-side error or None.
        """
        return dict(self.call("execute_async_script", ACT_JS, op, bid, arg))

    def screenshot(self) -> np.ndarray:
        """The viewport as an ``(height, width, 3)`` uint8 array."""
        from PIL import Image

        png = self.call("get_screenshot_as_png")
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    # ------------------------------------------------------------------ processes
    def pids(self) -> list[int]:
        """The pids of this browser's processes (driver, Chromium and its helpers)."""
        return tagged_pids(self._h.tag) if self._h.tag else []

    def memory(self) -> dict[str, int]:
        """Bytes of memory held by this browser's processes: ``rss`` (summed) and ``pss``."""
        return process_memory(self.pids())


def _shutdown(h: _Handles, polite: bool) -> None:
    """Stop the driver (politely if asked), kill what is left of the tag, remove the dir."""
    with h.lock:
        if h.pid and h.pid != os.getpid():  # a fork's copy: the browser is its parent's
            h.driver, h.tag, h.home = None, "", ""
            return
        driver, h.driver = h.driver, None
        if driver is not None:
            service = getattr(driver, "service", None)
            if polite:
                try:
                    _set_http_timeout(driver, 5)
                    driver.quit()
                except Exception:  # a dead or hung browser: the kill below ends it
                    pass
            _kill(tagged_pids(h.tag) if h.tag else [])
            process = getattr(service, "process", None)
            if process is not None:
                try:
                    process.kill()
                    process.wait(timeout=5)
                except Exception:  # already gone
                    pass
        if h.tag:
            _kill(tagged_pids(h.tag))
        if h.home:
            shutil.rmtree(h.home, ignore_errors=True)
        h.tag = h.home = ""


def _set_timeouts(driver: Any, seconds: float) -> None:
    """Page loads and scripts get ``seconds``; the HTTP call to the driver 5 s more."""
    _set_http_timeout(driver, seconds + 5)
    driver.set_page_load_timeout(seconds)
    driver.set_script_timeout(seconds)


def _set_http_timeout(driver: Any, seconds: float) -> None:
    """Limit every HTTP call to the driver to ``seconds`` (a hung browser cannot block)."""
    executor = driver.command_executor
    if not isinstance(executor, str):
        executor.client_config.timeout = seconds


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):  # exited meanwhile
            os.kill(pid, signal.SIGKILL)


def tagged_pids(tag: str) -> list[int]:
    """Live processes of this user whose command line or environment contains ``tag``.

    A browser's temp dir is in every Chromium process's command line (its profile or crash
    database) and in the driver's environment; zombies (empty command line) are not counted.
    Linux only (reads ``/proc``); elsewhere the list is empty.
    """
    needle = tag.encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            if not cmdline:
                continue
            if needle not in cmdline:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle not in f.read():
                        continue
        except OSError:  # exited, or another user's
            continue
        found.append(int(entry))
    return sorted(found)


def process_memory(pids: list[int]) -> dict[str, int]:
    """Summed ``rss`` and ``pss`` bytes of ``pids`` from ``/proc`` (0 where unreadable).

    RSS counts pages shared between Chromium's processes once per process; PSS splits them,
    so ``pss`` is the better estimate of what one more browser costs.
    """
    rss = pss = 0
    for pid in pids:
        for name, key in (("status", "VmRSS:"), ("smaps_rollup", "Pss:")):
            try:
                with open(f"/proc/{pid}/{name}") as f:
                    kib = next((int(line.split()[1]) for line in f if line.startswith(key)), 0)
            except (OSError, ValueError):
                kib = 0
            if name == "status":
                rss += kib * 1024
            else:
                pss += kib * 1024
    return {"rss": rss, "pss": pss}


# --------------------------------------------------------------------------- page scripts
_ITEMS_JS = r"""
const ROLES = {BUTTON: 'button', A: 'link', TEXTAREA: 'textbox', SELECT: 'combobox',
  H1: 'heading', H2: 'heading', H3: 'heading', H4: 'heading', H5: 'heading', H6: 'heading'};
const squash = (s) => s.replace(/\s+/g, ' ').trim();
function agentgymItems() {
  const out = [];
  const walk = (node) => {
    for (let n = node.firstChild; n; n = n.nextSibling) {
      if (n.nodeType === 3) {
        const t = squash(n.data);
        if (t) out.push(['StaticText', '', t, null, false]);
        continue;
      }
      if (n.nodeType !== 1) continue;
      const tag = n.tagName;
      if (tag === 'SCRIPT' || tag === 'STYLE' || tag === 'TEMPLATE' || n.hidden) continue;
      if (tag === 'INPUT' && n.type === 'hidden') continue;
      const bid = n.getAttribute('bid');
      const role = n.getAttribute('role') || ROLES[tag] || (tag === 'INPUT' ? 'textbox' : '');
      if (bid !== null || role === 'alert' || role === 'heading') {
        const name = squash(n.getAttribute('aria-label') || n.textContent);
        const value = (tag === 'INPUT' || tag === 'TEXTAREA') ? n.value : null;
        const pressed = n.getAttribute('aria-pressed') === 'true';
        out.push([role || 'generic', bid || '', name, value, pressed]);
        continue;
      }
      walk(n);
    }
  };
  if (document.body) walk(document.body);
  return out;
}
"""

ACT_JS = (
    _ITEMS_JS
    + r"""
const [op, bid, arg, done] = arguments;
let loaded = false;
const finish = (error) => done({url: location.pathname + location.search, title: document.title,
  items: agentgymItems(), scroll_y: Math.round(window.scrollY), loaded, error: error || null});
const el = bid ? document.querySelector('[bid="' + CSS.escape(bid) + '"]') : null;
if (bid && !el) return finish('no element with bid ' + JSON.stringify(bid));
window.agentgymPending = null;
try {
  if (op === 'click') el.click();
  else if (op === 'fill' || op === 'fill_submit') {
    el.focus(); el.value = arg;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
    if (op === 'fill_submit') { if (el.form) el.form.requestSubmit(); else el.click(); }
  } else if (op === 'submit') { if (el.form) el.form.requestSubmit(); else el.click(); }
  else if (op === 'scroll') window.scrollTo(0, arg);
  else if (op === 'load') {
    if (window.agentgymLoad) window.agentgymLoad(arg); else { location.href = arg; return; }
  } else if (op !== 'read') return finish('unknown operation ' + op);
} catch (e) { return finish(String(e)); }
const pending = window.agentgymPending;
window.agentgymPending = null;
if (!pending) return finish(null);
loaded = true;
pending.then(() => finish(null), (e) => finish('the page did not load: ' + e));
"""
)


def listing(page: dict[str, Any]) -> str:
    """The page's items as text, one per line, in the style of BrowserGym's AXTree text.

    ``[b12] button 'Buy Now'`` for an element with a bid (``, pressed=true`` on a chosen
    toggle, ``, value='...'`` on a filled textbox), ``heading 'X'``, ``alert 'X'`` and
    ``StaticText 'X'`` for the rest. Names are quoted as Python's ``repr`` quotes them.
    """
    lines = []
    for role, bid, name, value, pressed in page["items"]:
        head = f"[{bid}] " if bid else ""
        line = f"{head}{role} {name!r}"
        if value:
            line += f", value={value!r}"
        if pressed:
            line += ", pressed=true"
        lines.append(line)
    return "\n".join(lines)
