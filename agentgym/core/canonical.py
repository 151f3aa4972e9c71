r"""Canonical JSON: the one byte form of data that agentgym hashes or compares.

Transcript hashes (stored in results files and checked by ``agentgym verify``), env snapshots
and the leaderboard's content hashes are all :func:`canonical` bytes, so two values are equal
exactly when their bytes are. The form is fixed: keys sorted, no whitespace, every non-ASCII
character escaped as ``\uXXXX``; changing any of it changes every stored hash.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["canonical", "jsonable"]

_PLAIN = (str, int, float, bool, type(None))


def jsonable(value: Any) -> Any:
    """The value with numpy arrays and scalars as plain JSON data.

    Args:
        value: JSON data that may hold numpy values, tuples and non-string keys.

    Returns:
        The same data built from dicts (keys turned into ``str``), lists and Python scalars;
        other objects are returned unchanged.
    """
    kind = type(value)
    if kind in _PLAIN:  # the common cases first: results files are large
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes of ``value`` (after :func:`jsonable`).

    Args:
        value: JSON data, numpy values allowed.

    Returns:
        ASCII bytes: keys sorted, separators ``,`` and ``:`` without spaces, non-ASCII
        characters escaped.
    """
    return json.dumps(
        jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    ).encode()
