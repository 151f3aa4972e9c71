"""The wire form of what crosses the env service: JSON that round-trips every value exactly.

Observations, actions, ``info`` and method results are plain JSON where they can be; what plain
JSON would change travels tagged, so that the client gets back the same Python value the env
returned (an ``int8`` action mask stays an ``int8`` array, a tuple stays a tuple, snapshot
bytes stay bytes):

* ``{"__ndarray__": [dtype, shape, flat values]}`` for numpy arrays (numeric and bool only);
* ``{"__npscalar__": [dtype, value]}`` for numpy scalars;
* ``{"__tuple__": [...]}``, ``{"__bytes__": base64}``, ``{"__float__": "nan" | "inf" | "-inf"}``;
* ``{"__dict__": [[key, value], ...]}`` for a dict with a non-string key or a key that could be
  read as a tag.

Nothing is ever pickled: decoding builds only these types, so a hostile payload can at worst
be refused. Spaces travel as small descriptions (:func:`encode_space`).
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np
from gymnasium import spaces

from agentgym.core.errors import BadInput
from agentgym.core.spaces import String

__all__ = ["decode", "decode_space", "dumps", "encode", "encode_space", "loads"]

_TAGS = frozenset(
    {"__ndarray__", "__npscalar__", "__tuple__", "__bytes__", "__float__", "__dict__"}
)
_PLAIN = (str, int, bool, type(None))


def encode(value: Any) -> Any:
    """``value`` as JSON data that :func:`decode` turns back into an equal value of equal type.

    Raises:
        BadInput: a value of a type the wire does not carry (objects, object arrays).
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is list:
        return [encode(v) for v in value]
    if kind is dict:
        if all(type(k) is str for k in value) and not _TAGS.intersection(value):
            return {k: encode(v) for k, v in value.items()}
        return {"__dict__": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is tuple:
        return {"__tuple__": [encode(v) for v in value]}
    if kind is bytes:
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise BadInput(f"cannot send a numpy array of dtype {value.dtype}")
        flat = [encode(v) for v in value.ravel().tolist()]
        return {"__ndarray__": [value.dtype.str, list(value.shape), flat]}
    if isinstance(value, np.generic):
        if value.dtype.kind not in "biuf":
            raise BadInput(f"cannot send a numpy scalar of dtype {value.dtype}")
        return {"__npscalar__": [value.dtype.str, encode(value.item())]}
    raise BadInput(f"cannot send a value of type {kind.__name__}")


def decode(value: Any) -> Any:
    """The value :func:`encode` was given."""
    kind = type(value)
    if kind in _PLAIN or kind is float:
        return value
    if kind is list:
        return [decode(v) for v in value]
    if kind is not dict:
        raise BadInput(f"not wire data: {kind.__name__}")
    if len(value) == 1:
        ((tag, body),) = value.items()
        if tag in _TAGS:
            return _decode_tagged(tag, body)
    return {k: decode(v) for k, v in value.items()}


def _decode_tagged(tag: str, body: Any) -> Any:
    try:
        if tag == "__tuple__":
            return tuple(decode(v) for v in body)
        if tag == "__bytes__":
            return base64.b64decode(body, validate=True)
        if tag == "__float__":
            return float({"nan": "nan", "inf": "inf", "-inf": "-inf"}[body])
        if tag == "__dict__":
            return {_hashable(decode(k)): decode(v) for k, v in body}
        dtype = np.dtype(body[0])
        if dtype.kind not in "biuf":
            raise BadInput(f"refusing numpy dtype {dtype}")
        if tag == "__npscalar__":
            return dtype.type(decode(body[1]))
        shape = tuple(int(n) for n in body[1])
        return np.array([decode(v) for v in body[2]], dtype=dtype).reshape(shape)
    except BadInput:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise BadInput(f"malformed {tag} on the wire: {e}") from None


def _hashable(key: Any) -> Any:
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key


def dumps(value: Any) -> bytes:
    """The JSON bytes of ``encode(value)``."""
    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False).encode()


def loads(data: bytes | str) -> Any:
    """``decode`` of JSON bytes; :class:`BadInput` on anything that is not wire data."""
    try:
        raw = json.loads(data)
    except ValueError as e:
        raise BadInput(f"not JSON: {e}") from None
    return decode(raw)


def encode_space(space: spaces.Space[Any]) -> dict[str, Any]:
    """A JSON description of an env's space (the kinds agentgym envs use)."""
    if isinstance(space, String):
        return {"kind": "String", "sample_length": space.sample_length}
    if isinstance(space, spaces.Discrete):
        return {"kind": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise BadInput(f"cannot describe a {type(space).__name__} space on the wire")


def decode_space(data: dict[str, Any]) -> spaces.Space[Any]:
    """The space :func:`encode_space` described."""
    kind = data.get("kind")
    if kind == "String":
        return String(sample_length=int(data["sample_length"]))
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data["start"]))
    raise BadInput(f"unknown space kind {kind!r}")
