"""Spaces for natural-language environments.

``gymnasium.spaces.Text`` restricts the alphabet and the length, so ordinary text (punctuation,
accents, a long page) is not ``in`` it. :class:`String` accepts any Python ``str``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_empty_array

SAMPLE_ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz    .,?!'<>/0123456789"))


class String(Space[str]):
    """Any Python ``str``: the observation or action space of a text environment.

    ``sample()`` draws a short random string (1 to ``sample_length`` characters) from the space's
    own generator, so a seeded space samples reproducibly. Batches in ``SyncVectorEnv`` and in
    ``AsyncVectorEnv(..., shared_memory=False)`` as a tuple of strings.

    Example:
        >>> space = String()
        >>> "Anything, même ça." in space
        True
    """

    def __init__(self, sample_length: int = 16, seed: int | np.random.Generator | None = None):
        """Create the space.

        Args:
            sample_length: the longest string ``sample()`` returns.
            seed: seed of the space's generator, used only by ``sample()``.
        """
        self.sample_length = int(sample_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Strings have no fixed-size numeric form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of 1 to ``sample_length`` characters (masks are unsupported)."""
        if mask is not None or probability is not None:
            raise NotImplementedError("String.sample takes no mask or probability")
        n = int(self.np_random.integers(1, self.sample_length + 1))
        return "".join(self.np_random.choice(SAMPLE_ALPHABET, size=n))

    def contains(self, x: Any) -> bool:
        """True for every ``str``."""
        return isinstance(x, str)

    def __repr__(self) -> str:
        """``String()``."""
        return "String()"

    def __eq__(self, other: object) -> bool:
        """Every ``String`` space equals every other: they all hold every ``str``."""
        return isinstance(other, String)

    def __hash__(self) -> int:
        """The same hash for every ``String`` space, as they are all equal."""
        return hash(String)

    def to_jsonable(self, sample_n: Any) -> list[str]:
        """Strings are already JSON."""
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        """Strings are already JSON."""
        return list(sample_n)


@create_empty_array.register(String)
def _create_empty_array_string(
    space: String, n: int = 1, fn: Callable[..., Any] = np.zeros
) -> tuple[str, ...]:
    return tuple("" for _ in range(n))
