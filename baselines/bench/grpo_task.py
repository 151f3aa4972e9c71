"""The task both sides of ``agentgym bench trainer`` run, its model and its settings.

The task: prompt ``"Say the word: apple"``; reward 1.0 when the completion contains the
word, else half the share of the word's distinct letters that occur in it (so groups carry
a signal even from a random model). The model: a byte-level BPE tokenizer trained on the
task text and a randomly initialised GPT-2, built offline on the spot.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import resource
import statistics
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

WORDS = (
    "apple",
    "river",
    "stone",
    "cloud",
    "green",
    "tiger",
    "music",
    "bread",
    "light",
    "ocean",
    "paper",
    "house",
    "chair",
    "smile",
    "plant",
    "train",
)
PROMPT = "Say the word: {word}"
SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>")
GOAL = 2.0
"""The throughput ratio ours/TRL we aim for (reported, never asserted)."""


@dataclass(frozen=True)
class Settings:
    """One benchmark configuration; both sides run exactly these."""

    prompts: int = 8
    """Prompts (groups) per step."""
    completions: int = 8
    """Completions sampled per prompt (the group size)."""
    max_new_tokens: int = 32
    """Most tokens per completion, EOS included."""
    steps: int = 10
    """Timed optimiser steps per run."""
    warmup: int = 1
    """Untimed steps at the start of each run."""
    alternations: int = 3
    """Runs of each side, alternating."""
    lr: float = 1e-5
    """AdamW learning rate (constant)."""
    temperature: float = 1.0
    """Sampling temperature."""
    clip: float = 0.2
    """PPO clip epsilon."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    n_layer: int = 2
    """Layers of the random GPT-2."""
    n_embd: int = 128
    """Width of the random GPT-2."""
    n_head: int = 2
    """Attention heads of the random GPT-2."""
    threads: int = 1
    """``torch.set_num_threads`` for both sides (0: torch's default on this host). One thread
    by default: with two threads on two cores and any busy neighbour process, OpenMP's
    barriers stall (a 64×128 by 128×384 matmul took 86 µs on one thread and 4.9 ms on two),
    and the noise buries the comparison."""
    seed: int = 0
    """Seed of the model's weights and of each run's sampling."""


QUICK = Settings(prompts=2, completions=2, max_new_tokens=8, steps=2, warmup=1, alternations=1)


# ------------------------------------------------------------------------------------- task


def task_rows(n: int) -> list[dict[str, str]]:
    """The first ``n`` rows of the task, in the order both sides consume them."""
    words = [WORDS[i % len(WORDS)] for i in range(n)]
    return [{"prompt": PROMPT.format(word=w), "word": w} for w in words]


def reward(completion: str, word: str) -> float:
    """1.0 if ``completion`` contains ``word``, else partial credit for its letters.

    The partial credit is half the share of the word's distinct letters that occur in it.
    """
    if word in completion:
        return 1.0
    letters = set(word)
    return 0.5 * len(letters & set(completion)) / len(letters)


# ------------------------------------------------------------------------------------ model


def build_tokenizer(vocab_size: int = 320) -> Any:
    """A byte-level BPE tokenizer trained on the task text, as a ``PreTrainedTokenizerFast``.

    It has ``<pad>`` = 0, ``<eos>`` = 1, ``<bos>`` = 2 and no post-processor (no special token
    is added to an encoded prompt, by TRL or by us).
    """
    from agentgym.baselines.policies.tokenizer import hf_tokenizer

    corpus = [r["prompt"] for r in task_rows(len(WORDS))] * 20 + list(WORDS) * 20
    return hf_tokenizer(corpus, vocab_size)


def build_model_dir(out: Path, settings: Settings = Settings()) -> Path:
    """Write a random GPT-2 (no dropout) and the task tokenizer into ``out``; returns ``out``.

    Built offline, seeded by ``settings.seed``: the same settings give the same weights.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_tokenizer()
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    config = GPT2Config(
        vocab_size=len(tok),
        n_embd=settings.n_embd,
        n_layer=settings.n_layer,
        n_head=settings.n_head,
        n_positions=128,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    torch.manual_seed(settings.seed)
    model = GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    model.generation_config.bos_token_id = 2
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out)
    model.save_pretrained(out)
    return out


# ------------------------------------------------------------------------------------ runs


@dataclass
class RunResult:
    """One timed run of one side."""

    side: str
    run: int
    tokens: int
    seconds: float
    steps: int
    phases: dict[str, float]
    """seconds per phase over the timed steps (``generate`` and ``other`` for TRL)."""
    mean_reward: float
    threads: int = 0
    """``torch.get_num_threads()`` at the end of the run."""
    peak_mib: float = 0.0
    """Peak resident memory above the run's start, MiB (:class:`PeakMemory`)."""
    cpu_seconds: float = 0.0
    """This process's CPU time over the timed steps."""

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second of the timed steps (0 when no time was measured)."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def set_threads(settings: Settings) -> None:
    """Apply ``settings.threads`` to torch (0 leaves torch's default)."""
    import torch

    if settings.threads > 0:
        torch.set_num_threads(settings.threads)


def mean(xs: list[float]) -> float:
    """The mean of ``xs``; 0.0 for none."""
    return float(statistics.fmean(xs)) if xs else 0.0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    """Glibc's ``mallinfo2`` (2.33 and later), or None elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return cast(Callable[[], _MallInfo2], fn)


_MALLINFO2 = _mallinfo2()


def heap_mib() -> float | None:
    """Bytes the process's allocator holds for live allocations now, MiB (glibc only).

    ``uordblks`` (in-use heap chunks) plus ``hblkhd`` (large blocks, mmapped one by one):
    torch's CPU tensors are allocated through it, and a freed tensor leaves it at once,
    unlike the resident set, which keeps pages the allocator has not returned.
    """
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return (info.uordblks + info.hblkhd) / 2**20


def rss_mib() -> float | None:
    """This process's resident memory now, MiB (None where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def max_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


class PeakMemory:
    """Peak memory in use above the start of a ``with`` block, sampled by a thread.

    Every ``interval`` seconds a daemon thread reads the live heap (:func:`heap_mib`, glibc)
    or, without glibc, the resident set (:func:`rss_mib`); :attr:`mib` is the highest reading
    minus the one at entry (garbage collected first), and :attr:`source` names the reading.
    With neither, the growth of the process's lifetime peak (``ru_maxrss``) stands in.
    """

    def __init__(self, interval: float = 0.002):
        """Sample every ``interval`` seconds."""
        self.interval = interval
        self.mib = 0.0
        self._stop = threading.Event()
        self._start = self._peak = 0.0
        self._thread: threading.Thread | None = None
        self._lifetime = 0.0
        self._read: Callable[[], float | None] = rss_mib
        self.source = "ru_maxrss"

    def __enter__(self) -> PeakMemory:
        """Take the starting reading and start sampling."""
        gc.collect()
        self._read = heap_mib if heap_mib() is not None else rss_mib
        self.source = "heap" if self._read is heap_mib else "rss"
        now = self._read()
        self._lifetime = max_rss_mib()
        if now is not None:
            self._start = self._peak = now
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            now = self._read()
            if now is not None and now > self._peak:
                self._peak = now

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Stop sampling and set :attr:`mib`."""
        if self._thread is None:
            self.source = "ru_maxrss"
            self.mib = max(0.0, max_rss_mib() - self._lifetime)
            return
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._read() or 0.0)
        self.mib = self._peak - self._start
