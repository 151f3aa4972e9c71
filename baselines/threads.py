"""torch's CPU thread count, pinned for a block.

The thread count orders the floating-point sums of every matrix product, and a greedy policy
turns that rounding into whole episodes won or lost, so training and scoring each run on a
stated count rather than on whatever the host's cores make torch's default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block on ``n`` torch threads (0: the count as it is), then restore the count."""
    before = torch.get_num_threads()
    if n and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
