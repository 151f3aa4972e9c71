"""Fixtures shared by the trainer's tests: one intra-op thread and a nano policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and do not fight other test workers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def policy() -> TinyPolicy:
    """An untrained nano policy whose tokenizer is fitted to Search-Menu-Small; its context
    holds a whole concatenated episode."""
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(SMALL, episodes=10), vocab_size=600)
    return TinyPolicy.from_preset("nano", tokenizer, max_len=4096)
