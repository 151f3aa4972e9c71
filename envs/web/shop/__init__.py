"""The shop: a WebShop-style store over a seeded catalogue, in text and browser modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register_ids(register: Callable[..., Any]) -> None:
    """Register the shop's ids with the registry's ``register``."""
