"""The tool env's state key, kept up to date from what each call changes.

The backend state is a dict of top-level values: collections (``state[top][key]`` is one
entity) and scalars (id counters, today's date). Its digest is

    sha1( for top in sorted(state):  "top/<S_top>;"  if a collection, else  "top=<json>;" )

where ``S_top`` is the sum, modulo 2**160, of ``sha1("top/key=" + canonical_json(entity))``
over the collection's entities. A sum does not depend on the order it is taken in, so a
write only subtracts the hashes of the entities it changed and adds their new ones: the
digest costs what the call changed, not the size of the backend. Equal states give equal
digests in any process; different states collide only as sha1 sums do (about 2**-80 for a
non-adversarial pair).

The state key of a step hashes the task id, this digest, the multiset of result texts the
agent has seen (kept the same way, as a sum of their sha1s) and the asked / summarised
flags. :func:`state_key` computes it from its parts; tests compare the env's incremental
key against a from-scratch computation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

MOD = 1 << 160
"""Sums of sha1 digests are taken modulo 2**160 (the digest's size)."""


def dump(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _entity_hash(top: str, key: str, value: Any) -> int:
    blob = f"{top}/{key}=".encode() + dump(value).encode()
    return int.from_bytes(hashlib.sha1(blob).digest(), "big")


def text_hash(text: str) -> int:
    """The sha1 of ``text`` as an integer (one term of the seen-results sum)."""
    return int.from_bytes(hashlib.sha1(text.encode()).digest(), "big")


def seen_sum(texts: Iterable[str]) -> int:
    """The order-free digest of a multiset of texts: the sum of their sha1s mod 2**160."""
    return sum(map(text_hash, texts)) % MOD


def state_key(task_id: str, digest: str, seen: int, asked: bool, summarised: bool) -> str:
    """The state key of a tool episode from its parts (see the module docstring)."""
    blob = f"{task_id}|{digest}|{seen:040x}|{asked}|{summarised}"
    return hashlib.sha1(blob.encode()).hexdigest()


class StateDigest:
    """The backend state's digest, updated from the entities each write names.

    ``invalidate(paths)`` is called with a write call's changed paths (``top/key/...`` names
    one entity, ``top`` a whole collection) before or after the call; the next
    :meth:`hexdigest` re-hashes only those entities and the top-level scalars. Calls that do
    not write leave the state alone, so the digest stays cached across them. It equals a
    from-scratch ``StateDigest().hexdigest(state)`` as long as the domain's
    ``Domain.changes`` name every entity a write touches (tests/envs/tools check this).
    """

    def __init__(self) -> None:
        """Start empty: the first :meth:`hexdigest` hashes every entity."""
        self.entities: dict[tuple[str, str], int] = {}
        self.tops: dict[str, int] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._stale: set[str] = set()
        self._hex: str | None = None

    def copy(self) -> StateDigest:
        """An independent copy (the world's initial digest, copied at each reset)."""
        out = StateDigest()
        out.entities = dict(self.entities)
        out.tops = dict(self.tops)
        out._dirty = set(self._dirty)
        out._stale = set(self._stale)
        out._hex = self._hex
        return out

    def invalidate(self, paths: Iterable[str]) -> None:
        """Mark the entities (or whole collections) that ``paths`` name as changed.

        Any call, even with no paths, also marks the top-level scalars (counters) for
        re-reading.
        """
        self._hex = None
        for path in paths:
            top, _, rest = path.partition("/")
            if rest:
                self._dirty.add((top, rest.partition("/")[0]))
            else:
                self._stale.add(top)

    def hexdigest(self, state: dict[str, Any]) -> str:
        """The state's digest (equal states give equal digests)."""
        if self._hex is not None:
            return self._hex
        self._refresh(state)
        out = hashlib.sha1()
        for top in sorted(state):
            value = state[top]
            if isinstance(value, dict):
                out.update(f"{top}/{self.tops[top]:040x};".encode())
            else:
                out.update(f"{top}={dump(value)};".encode())
        self._hex = out.hexdigest()
        return self._hex

    def _refresh(self, state: dict[str, Any]) -> None:
        """Bring the per-collection sums up to date with ``state``."""
        for top in [t for t in self.tops if not isinstance(state.get(t), dict)]:
            self._drop(top)  # a collection that disappeared
        for top, value in state.items():
            if isinstance(value, dict) and (top in self._stale or top not in self.tops):
                self._drop(top)
                hashes = {(top, k): _entity_hash(top, k, v) for k, v in value.items()}
                self.entities.update(hashes)
                self.tops[top] = sum(hashes.values()) % MOD
        for top, key in self._dirty:
            if top in self._stale or top not in self.tops:
                continue  # re-hashed whole above, or not a collection
            total = self.tops[top] - self.entities.pop((top, key), 0)
            collection = state[top]
            if key in collection:
                new = self.entities[(top, key)] = _entity_hash(top, key, collection[key])
                total += new
            self.tops[top] = total % MOD
        self._dirty.clear()
        self._stale.clear()

    def _drop(self, top: str) -> None:
        self.tops.pop(top, None)
        for key in [k for k in self.entities if k[0] == top]:
            del self.entities[key]
