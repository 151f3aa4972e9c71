"""A byte-level BPE tokenizer trained on environment text with the ``tokenizers`` library.

Byte-level means every string encodes, even one with characters never seen in training, and
``decode(encode(text)) == text`` for any text that holds no special-token string. The three
special tokens come first, so their ids are fixed: ``<pad>`` = 0, ``<eos>`` = 1, ``<bos>`` = 2.

    texts = collect_env_text("agentgym/Search-Menu-Small-v0")
    tok = train_tokenizer(texts, vocab_size=2000)
    tok.save(Path("ckpt/tokenizer.json")); tok = Tokenizer.load(Path("ckpt/tokenizer.json"))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
SPECIAL_TOKENS = (PAD, EOS, BOS)
TOKENIZER_FILE = "tokenizer.json"
#: A minimal chat template for toy Hugging Face models: ``<|role|>content<eos>`` per message
#: (the role tags must be special tokens of the tokenizer).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<eos>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class Tokenizer:
    """A thin typed wrapper over a ``tokenizers.Tokenizer`` with the ids a policy needs.

    Attributes:
        pad_id: id of ``<pad>`` (fills batches; never trained on).
        eos_id: id of ``<eos>`` (ends every response).
        bos_id: id of ``<bos>`` (starts every prompt).
        vocab_size: number of ids, special tokens included.
    """

    def __init__(self, backend: HFTokenizer):
        """Wrap ``backend``, which must know the three special tokens."""
        self.backend = backend
        ids = [backend.token_to_id(t) for t in SPECIAL_TOKENS]
        missing = [t for t, i in zip(SPECIAL_TOKENS, ids, strict=True) if i is None]
        if missing:
            raise ValueError(f"the tokenizer lacks the special tokens {missing}")
        self.pad_id, self.eos_id, self.bos_id = (int(i or 0) for i in ids)
        self.vocab_size = int(backend.get_vocab_size(with_added_tokens=True))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` over many texts at once."""
        encodings = self.backend.encode_batch(list(texts), add_special_tokens=False)
        return [list(e.ids) for e in encodings]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; special tokens are dropped."""
        return str(self.backend.decode([int(i) for i in ids], skip_special_tokens=True))

    def save(self, path: Path) -> None:
        """Write the tokenizer as one ``tokenizer.json`` file (``path`` is the file)."""
        Path(path).write_text(self.backend.to_str(pretty=True), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        """Read a ``tokenizer.json`` written by ``save`` (or any same-special-token BPE).

        Any byte-level BPE with the same special tokens reads as well.
        """
        return cls(HFTokenizer.from_file(str(path)))

    def __len__(self) -> int:
        """The number of ids, special tokens included."""
        return self.vocab_size

    def __repr__(self) -> str:
        """``Tokenizer(vocab_size=N)``."""
        return f"Tokenizer(vocab_size={self.vocab_size})"


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2000) -> Tokenizer:
    """Train a byte-level BPE tokenizer on ``texts``.

    Training is deterministic: the same texts in the same order give the same
    ``tokenizer.json``. The 256 byte symbols are always in the vocabulary, so ``vocab_size``
    must exceed 259 (bytes plus the special tokens).

    Args:
        texts: training text (observations, actions).
        vocab_size: size of the vocabulary, special tokens and byte symbols included.
    """
    return Tokenizer(_bpe(texts, vocab_size, SPECIAL_TOKENS))


def hf_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 2000,
    extra_special_tokens: Sequence[str] = (),
    chat_template: str | None = None,
) -> Any:
    """The same byte-level BPE as :func:`train_tokenizer`, as a ``PreTrainedTokenizerFast``.

    Its tokens are ``<pad>`` = 0, ``<eos>`` = 1, ``<bos>`` = 2, then ``extra_special_tokens``:
    the tokenizer of a tiny Hugging Face model built offline for tests and benchmarks (a
    ``transformers`` tokenizer).

    Args:
        texts: training text.
        vocab_size: size of the vocabulary, special tokens and byte symbols included.
        extra_special_tokens: more special tokens (e.g. chat roles), after the three.
        chat_template: a Jinja chat template to attach (None: none).
    """
    from transformers import PreTrainedTokenizerFast

    backend = _bpe(texts, vocab_size, (*SPECIAL_TOKENS, *extra_special_tokens))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD, eos_token=EOS, bos_token=BOS
    )
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok


def _bpe(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str]) -> HFTokenizer:
    if vocab_size < len(special_tokens) + 256:
        raise ValueError(
            f"vocab_size must be at least {len(special_tokens) + 256} for byte-level BPE with "
            f"{len(special_tokens)} special tokens, got {vocab_size}"
        )
    backend = HFTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(list(texts), trainer=trainer)
    return backend


def collect_env_text(
    env_id: str,
    *,
    episodes: int = 50,
    seed: int = 0,
    split: str = "train",
    env_kwargs: dict[str, Any] | None = None,
) -> list[str]:
    """Training text for a tokenizer: what an agent reads and writes in ``env_id``.

    Plays ``episodes`` oracle episodes and as many random ones on the ``split`` (seeds
    ``seed``, ``seed + 1``, ...), collecting every observation, every admissible action and
    every action taken. Random actions are uniform over ``info["admissible_actions"]`` where
    given, else samples of the action space. The result is deterministic.

    Args:
        env_id: a registered agentgym id.
        episodes: episodes per player (oracle, random).
        seed: first task seed; the random player's generator is seeded from it too.
        split: the task split to draw from (never ``test`` for training).
        env_kwargs: extra constructor arguments.
    """
    from agentgym.registry import make

    env = make(env_id, split=split, **(env_kwargs or {}))
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    try:
        for player in ("oracle", "random"):
            for k in range(episodes):
                obs, info = env.reset(seed=seed + k)
                done = False
                while not done:
                    texts.append(str(obs))
                    admissible = info.get("admissible_actions")
                    texts.extend(admissible or [])
                    if player == "oracle":
                        agentgym_env: Any = env.unwrapped  # declares oracle_action()
                        action = agentgym_env.oracle_action()
                    elif admissible:
                        action = admissible[int(rng.integers(len(admissible)))]
                    else:
                        action = env.action_space.sample()
                    if isinstance(action, str):
                        texts.append(action)
                    obs, _, terminated, truncated, info = env.step(action)
                    done = bool(terminated or truncated)
                texts.append(str(obs))
    finally:
        env.close()
    return texts
