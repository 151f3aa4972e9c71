"""The policy-facing tokenizer of :class:`~agentgym.baselines.policies.hf.HFPolicy`.

``HFTokenizer`` wraps a ``transformers`` tokenizer with the ids a policy needs (EOS, PAD,
BOS), plain encode/decode without added special tokens, and chat prompts through the
tokenizer's chat template (or a plain ``"role: content"`` join when it has none).

    tok = HFTokenizer(AutoTokenizer.from_pretrained(path, local_files_only=True))
    prompt = tok.chat_prompt([{"role": "user", "content": "Find the red key."}])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["HFTokenizer", "Message"]

Message = Mapping[str, str]
"""One chat turn: ``{"role": ..., "content": ...}``."""


class HFTokenizer:
    """The policy-facing tokenizer interface over a ``transformers`` tokenizer.

    Attributes:
        backend: the wrapped ``PreTrainedTokenizerBase``.
        eos_id: id that ends a response (the tokenizer's EOS token).
        pad_id: id used to fill batches (the PAD token, else ``eos_id``); always masked out.
        bos_id: the BOS token id, or ``None`` when the tokenizer has none.
        vocab_size: number of token ids the tokenizer knows, added tokens included. The
            model's output layer may be wider (padded vocabularies).
    """

    def __init__(self, backend: PreTrainedTokenizerBase):
        """Wrap ``backend``, which must define an EOS token."""
        self.backend = backend
        if backend.eos_token_id is None:
            raise ValueError("the tokenizer has no EOS token; a policy needs one to stop")
        self.eos_id = int(backend.eos_token_id)
        pad = backend.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_id
        bos = backend.bos_token_id
        self.bos_id: int | None = int(bos) if bos is not None else None
        self.vocab_size = len(backend)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no special tokens are added.

        Added-token strings in the text, such as ``<|im_start|>``, still map to their ids.
        """
        return [int(i) for i in self.backend.encode(text, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; special tokens are dropped."""
        return str(self.backend.decode([int(i) for i in ids], skip_special_tokens=True))

    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer ships a chat template."""
        return bool(getattr(self.backend, "chat_template", None))

    def chat_prompt(
        self, messages: Sequence[Message], *, add_generation_prompt: bool = True
    ) -> list[int]:
        r"""Token ids of a conversation, ready for the assistant's next turn.

        Uses the tokenizer's chat template when it has one. Otherwise the turns are joined as
        ``"role: content\n"`` lines, followed by ``"assistant: "`` when
        ``add_generation_prompt``, and the BOS token (if any) goes first.

        Args:
            messages: ``{"role": ..., "content": ...}`` dicts, oldest first.
            add_generation_prompt: end with the opening of an assistant turn.
        """
        msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        if self.has_chat_template:
            text = self.backend.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=add_generation_prompt
            )
            return self.encode(str(text))
        text = "".join(f"{m['role']}: {m['content']}\n" for m in msgs)
        if add_generation_prompt:
            text += "assistant: "
        ids = self.encode(text)
        return [self.bos_id, *ids] if self.bos_id is not None else ids

    def save(self, path: Path) -> None:
        """Write the tokenizer files into the directory ``path``."""
        self.backend.save_pretrained(str(path))

    def __len__(self) -> int:
        """The vocabulary size, added tokens included."""
        return self.vocab_size

    def __repr__(self) -> str:
        """The backend's class and the vocabulary size."""
        return f"HFTokenizer({type(self.backend).__name__}, vocab_size={self.vocab_size})"
