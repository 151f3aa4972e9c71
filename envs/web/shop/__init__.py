"""The shop: a WebShop-style store over a seeded catalogue, in text and browser modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PRESETS = {"Small": "small", "Large": "large"}


def register_ids(register: Callable[..., Any]) -> None:
    """Register the shop's ids with the registry's ``register``."""
    for name, preset in _PRESETS.items():
        register(
            f"agentgym/Shop-{name}-v0",
            "agentgym.envs.web.shop.env:ShopEnv",
            family="web",
            description=f"WebShop-style store in text mode over the {preset} catalogue",
            kwargs={"preset": preset},
        )
        register(
            f"agentgym/Shop-Browser-{name}-v0",
            "agentgym.envs.web.shop.browser_env:BrowserShopEnv",
            family="web",
            description=f"WebShop-style store in headless Chromium over the {preset} catalogue",
            kwargs={"preset": preset},
        )
    register(
        "agentgym/Shop-Official-v0",
        "agentgym.envs.web.shop.env:ShopOfficialEnv",
        family="web",
        description="WebShop-style store over WebShop's own products and human instructions",
    )
