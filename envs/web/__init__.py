"""The web family: a WebShop-style shop in text and browser modes, and MiniWoB++ tasks.

The shop's catalogue and instructions are generated from a seed (or read from WebShop's own
files with the ``Official`` id); its text mode needs no browser. The browser mode serves the
same pages from the project's own app on 127.0.0.1 and drives them with Selenium and headless
Chromium. The MiniWoB++ ids are registered only when the ``miniwob`` package is installed.
"""

from __future__ import annotations

import rapidfuzz  # noqa: F401  (the family's dependency: skip registration without it)

from agentgym.registry import register as _register


def register() -> None:
    """Register the family's ids (idempotent); MiniWoB++ only with miniwob installed."""
    from agentgym.envs.web.shop import register_ids as register_shop

    register_shop(_register)
    try:
        from agentgym.envs.web.miniwob import register_ids as register_miniwob
    except ImportError:  # the optional miniwob package is missing
        return
    register_miniwob(_register)
