"""A policy over any Hugging Face causal language model stored in a local directory.

``HFPolicy`` implements the ``Policy`` protocol of :mod:`agentgym.baselines.policies.base` on
top of ``transformers.AutoModelForCausalLM``: batched KV-cache sampling (greedy, temperature,
keyed Gumbel noise), constrained decoding over a set of allowed token sequences, per-token
log-probabilities and values of given responses in one padded forward pass, optional LoRA
adapters through ``peft``, and a small value head for PPO. Nothing is ever downloaded: the
model and its tokenizer are read with ``local_files_only=True`` (and ``HF_HUB_OFFLINE`` is
set to ``1`` unless the environment already says otherwise).

    policy = HFPolicy.from_pretrained("models/qwen2-0.5b", device="cuda", lora=LoraSettings(r=16))
    prompt = policy.chat_prompt([{"role": "user", "content": "Find the red key."}])
    out = policy.generate([prompt], max_new_tokens=64, temperature=1.0, gumbel_keys=[7])[0]
    lp = policy.logprobs([torch.tensor(prompt)], [torch.tensor(out.ids)], grad=True)[0]
    policy.save(Path("ckpt/step-100"))
    policy = HFPolicy.load(Path("ckpt/step-100"), device="cuda")

Layout of a batch: prompts are left-padded and responses right-padded, so every response
starts in the same column and only the response positions go through the output layer
(``hf_batch``). Beside it live the LoRA settings (``hf_lora``), the tokenizer wrapper
(``hf_tokenizer``) and the checkpoint files (``hf_checkpoint``); their names re-export here.

The model is kept in ``eval()`` mode: dropout (the base model's and LoRA's) stays off, so
``generate`` and ``logprobs`` see the same function, as PPO's ratios need.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedModel

from agentgym.baselines.policies.base import AllowedSequences, BlockHook, GenOut
from agentgym.baselines.policies.constrained import (
    AllowedTokens,
    masked_logprobs,
    position_temperatures,
)
from agentgym.baselines.policies.hf_batch import (
    as_ids,
    flat_allowed,
    response_targets,
    scoring_batch,
)
from agentgym.baselines.policies.hf_checkpoint import (
    ADAPTER_CONFIG_FILE,
    ADAPTER_DIR,
    ADAPTER_FILE,
    MODEL_FILE,
    SETTINGS_FILE,
    VALUE_HEAD_FILE,
    check_dir,
    load_lm,
    load_value_head,
    new_value_head,
    read_settings,
    resolve_dtype,
    write_checkpoint,
)
from agentgym.baselines.policies.hf_decode import (
    LeanDecoder,
    PlainDecoder,
    lean_response_states,
)
from agentgym.baselines.policies.hf_lean import LeanForward, lean_forward
from agentgym.baselines.policies.hf_lora import (
    LoraSettings,
    add_lora,
    infer_lora_targets,
    load_lora,
)
from agentgym.baselines.policies.hf_tokenizer import HFTokenizer, Message
from agentgym.baselines.policies.sampling import Responses, choose

__all__ = [
    "ADAPTER_CONFIG_FILE",
    "ADAPTER_DIR",
    "ADAPTER_FILE",
    "MODEL_FILE",
    "SETTINGS_FILE",
    "VALUE_HEAD_FILE",
    "HFPolicy",
    "HFTokenizer",
    "LoraSettings",
    "infer_lora_targets",
]


# --------------------------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------------------------


class HFPolicy:
    """A ``Policy`` over a Hugging Face causal LM, with optional LoRA and a value head.

    Build one with :meth:`from_pretrained` (a model directory) or :meth:`load` (a directory
    written by :meth:`save`).

    Attributes:
        model: the network: a ``transformers`` model, or a ``peft.PeftModel`` wrapping one.
        tokenizer: the :class:`HFTokenizer`.
        device: where the weights live.
        dtype: the floating-point type of the base weights.
        lora: the LoRA settings (target modules resolved), or ``None``.
        value_head: ``nn.Linear(hidden, 1)`` in float32 on the last hidden state, or ``None``.
        lean: decode and score through :class:`~agentgym.baselines.policies.hf_lean.LeanForward`
            where the model supports it (GPT-2, Llama, Qwen2 without LoRA; the same results,
            faster); set False to use ``transformers``' forward everywhere.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: HFTokenizer,
        *,
        device: torch.device,
        lora: LoraSettings | None,
        value_head: nn.Linear | None,
    ):
        """Assemble a policy from parts; prefer :meth:`from_pretrained` or :meth:`load`."""
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.lora = lora
        self.value_head = value_head
        lm = model.get_base_model() if lora is not None else model
        if not isinstance(lm, PreTrainedModel):
            raise TypeError(f"expected a transformers PreTrainedModel, got {type(lm).__name__}")
        self._lm: PreTrainedModel = lm
        self.dtype: torch.dtype = next(lm.parameters()).dtype
        out_emb = lm.get_output_embeddings()
        if out_emb is None:
            raise ValueError("the model has no output embedding layer")
        self._out_emb: nn.Module = out_emb
        params = inspect.signature(lm.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keeps_logits = "logits_to_keep" in params
        self._lean = lean_forward(lm) if lora is None else None
        self.lean = True
        self.model.eval()

    @classmethod
    def from_pretrained(
        cls,
        model_dir: str | os.PathLike[str],
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | str | None = None,
        lora: LoraSettings | None = None,
        value_head: bool = True,
        attn_implementation: str | None = None,
    ) -> HFPolicy:
        """Load a causal LM and its tokenizer from a local directory.

        Args:
            model_dir: a directory holding ``config.json``, the weights and tokenizer files.
            device: where to put the model.
            dtype: weight type; ``None`` means bfloat16 on CUDA and float32 elsewhere.
            lora: add fresh LoRA adapters; then only adapter (and value-head) parameters are
                trainable. ``None`` trains the full model.
            value_head: add a freshly initialised value head (deterministic: seed 0).
            attn_implementation: passed to ``transformers`` (``"sdpa"``, ``"eager"``...);
                ``None`` keeps its default.

        Raises:
            FileNotFoundError: ``model_dir`` is not a directory (nothing is downloaded).
        """
        path = check_dir(model_dir)
        dev = torch.device(device)
        model = load_lm(path, resolve_dtype(dtype, dev), attn_implementation)
        tokenizer = HFTokenizer(AutoTokenizer.from_pretrained(str(path), local_files_only=True))
        if lora is not None:
            model, lora = add_lora(model, lora)
        head = new_value_head(int(model.config.hidden_size)) if value_head else None
        return cls._finish(model, tokenizer, dev, lora, head)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        device: str | torch.device = "cpu",
        *,
        dtype: torch.dtype | str | None = None,
    ) -> HFPolicy:
        """Restore a policy written by :meth:`save`.

        Args:
            path: the checkpoint directory.
            device: where to put the model.
            dtype: weight type; ``None`` keeps the type the policy was saved with.
        """
        root = check_dir(path)
        settings = read_settings(root)
        dev = torch.device(device)
        model: Any = load_lm(root, resolve_dtype(dtype or settings["dtype"], dev), None)
        tokenizer = HFTokenizer(AutoTokenizer.from_pretrained(str(root), local_files_only=True))
        lora = LoraSettings.from_json(settings["lora"]) if settings.get("lora") else None
        if lora is not None:
            if settings.get("lora_merged"):
                lora = None  # the adapters are folded into the weights: a plain model now
            else:
                model = load_lora(model, root / ADAPTER_DIR)
        head = load_value_head(root) if settings.get("value_head") else None
        return cls._finish(model, tokenizer, dev, lora, head)

    @classmethod
    def _finish(
        cls,
        model: Any,
        tokenizer: HFTokenizer,
        device: torch.device,
        lora: LoraSettings | None,
        head: nn.Linear | None,
    ) -> HFPolicy:
        model.to(device)
        if lora is None:
            for p in model.parameters():
                p.requires_grad_(True)
        if head is not None:
            head.to(device)
        return cls(model, tokenizer, device=device, lora=lora, value_head=head)

    def parameters(self) -> Iterator[nn.Parameter]:
        """The trainable parameters: LoRA adapters (or every model weight) and the value head."""
        for _, p in self.named_parameters():
            yield p

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """``(name, parameter)`` per trainable parameter (value head: ``"value_head.*"``)."""
        for name, p in self.model.named_parameters():
            if p.requires_grad:
                yield name, p
        if self.value_head is not None:
            for name, p in self.value_head.named_parameters():
                yield f"value_head.{name}", p

    def num_parameters(self, *, trainable_only: bool = False) -> int:
        """Number of scalars in the model (and value head); only trainable ones if asked."""
        if trainable_only:
            return sum(p.numel() for p in self.parameters())
        n = sum(p.numel() for p in self.model.parameters())
        return n + (sum(p.numel() for p in self.value_head.parameters()) if self.value_head else 0)

    def chat_prompt(
        self, messages: Sequence[Message], *, add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of a conversation; see :meth:`HFTokenizer.chat_prompt`."""
        return self.tokenizer.chat_prompt(messages, add_generation_prompt=add_generation_prompt)

    def encode_prompt(self, text: str) -> list[int]:
        r"""The prompt for an observation: one user turn through the chat template.

        When the tokenizer has none, the plain ``"user: ...\nassistant: "`` join is used.
        """
        return self.chat_prompt([{"role": "user", "content": text}])

    def __repr__(self) -> str:
        """The model's class, device, dtype, LoRA settings and whether it has a value head."""
        return (
            f"HFPolicy({type(self._lm).__name__}, device={self.device}, dtype={self.dtype}, "
            f"lora={self.lora}, value_head={self.value_head is not None})"
        )

    # ---------------------------------------------------------------- forward

    def _lean_forward(self) -> LeanForward | None:
        """The lean forward when it is on and the model supports it, else None."""
        return self._lean if self.lean else None

    @property
    def num_blocks(self) -> int:
        """Transformer blocks (the layers a :data:`~.base.BlockHook` sees: 0 .. n - 1)."""
        return int(self._lm.config.num_hidden_layers)

    def set_block_hook(self, hook: BlockHook | None) -> None:
        """Install ``hook`` on every block's input (None removes it); needs the lean forward."""
        lean = self._lean_forward()
        if lean is None and hook is not None:
            raise ValueError("block hooks need the lean forward: plain GPT-2 or Llama, no LoRA")
        if lean is not None:
            lean.block_hook = hook

    def _forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        pos: torch.Tensor,
        *,
        keep: int,
        cache: Any = None,
        use_cache: bool = False,
        want_hidden: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        """One model call.

        Returns the logits of the last ``keep`` positions, the matching final hidden states
        (the output layer's input) when asked, and the KV cache.
        """
        captured: list[torch.Tensor] = []
        handle = None
        if want_hidden:
            handle = self._out_emb.register_forward_pre_hook(
                lambda _m, args: captured.append(args[0])
            )
        kwargs: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": pos,
            "use_cache": use_cache,
        }
        if cache is not None:
            kwargs[self._cache_kw] = cache
        if self._keeps_logits:
            kwargs["logits_to_keep"] = keep
        try:
            out = self._lm(**kwargs)
        finally:
            if handle is not None:
                handle.remove()
        logits = out.logits[:, -keep:, :]
        hidden = captured[-1][:, -keep:, :] if want_hidden else None
        new_cache = getattr(out, self._cache_kw, None) if use_cache else None
        return logits, hidden, new_cache

    # ---------------------------------------------------------------- generation

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int] | torch.Tensor],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        gumbel_keys: Sequence[int] | None = None,
        allowed: Sequence[AllowedSequences | None] | None = None,
    ) -> list[GenOut]:
        """Sample one response per prompt, all prompts in one KV-cached batch.

        Sampling is Gumbel-max: token = argmax(log_softmax(logits / temperature) + g). The
        noise ``g`` comes from torch's global generator (seed it with ``torch.manual_seed``),
        or, when ``gumbel_keys`` is given, from a ``torch.Generator`` on ``device`` seeded by
        ``(gumbel_keys[i], t)`` for the ``t``-th response token of row ``i``: the same key
        gives the same noise at each position whatever the batch, so the same prompt and
        key give the same response (up to float noise from padding, which only matters on
        near-ties). On CPU the keyed noise is exactly ``TinyPolicy``'s; CUDA draws differ.

        A response ends with EOS (kept as its last id) or at ``max_new_tokens``. A row with
        ``allowed[i]`` is masked to the trie of those sequences (each followed by EOS, see
        :class:`~agentgym.baselines.policies.constrained.TokenTrie`), so it always ends as
        exactly one of them plus EOS: its budget grows to the longest sequence plus EOS
        when ``max_new_tokens`` is shorter.

        Args:
            prompts: token ids per row (non-empty).
            max_new_tokens: most tokens to generate per free row, EOS included.
            temperature: divides the logits (> 0; use ``greedy=True`` for argmax).
            greedy: take the most likely allowed token, no noise.
            gumbel_keys: one integer key per row, or ``None`` for the global generator.
            allowed: per row, the token sequences the response must be one of (``None``
                leaves that row free).

        Returns:
            One :class:`GenOut` per prompt, in order: the response ids, the behaviour
            log-probability of each id, ``log_softmax(masked logits / temperature)`` at the
            chosen token (also when greedy), and the text (special tokens dropped).

        Raises:
            ValueError: bad arguments, an empty prompt, an empty ``allowed[i]``, a sequence
                holding EOS or a token outside the vocabulary.
        """
        rows = [as_ids(p) for p in prompts]
        n = len(rows)
        if n == 0:
            return []
        if any(len(r) == 0 for r in rows):
            raise ValueError("every prompt needs at least one token")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0 (use greedy=True), got {temperature}")
        if gumbel_keys is not None and len(gumbel_keys) != n:
            raise ValueError(f"{len(gumbel_keys)} gumbel_keys for {n} prompts")
        responses = Responses(allowed, n, max_new_tokens, self.tokenizer.eos_id)
        steps, top_allowed = responses.steps, responses.top_allowed
        if steps <= 0:
            return [GenOut(ids=[], logps=[], text="") for _ in range(n)]

        pad = self.tokenizer.pad_id
        lean = self._lean_forward()
        decoder = (
            LeanDecoder(lean, rows, pad, steps, self.device)
            if lean is not None
            else PlainDecoder(self._forward, rows, pad, self.device)
        )
        logits = decoder.logits
        vocab = int(logits.shape[-1])
        if top_allowed >= vocab:
            raise ValueError(f"allowed token id {top_allowed} is outside the vocabulary ({vocab})")
        for t in range(steps):
            mask = responses.mask(vocab, self.device)
            tok, logp = choose(
                logits, mask, t, temperature=temperature, greedy=greedy, keys=gumbel_keys
            )
            responses.take(tok, logp)
            if responses.finished or t == steps - 1:
                break
            logits = decoder.feed(responses.feed(tok, pad))
        return responses.results(self.tokenizer)

    # ---------------------------------------------------------------- scoring

    def logprobs(
        self,
        prompts: Sequence[torch.Tensor | Sequence[int]],
        responses: Sequence[torch.Tensor | Sequence[int]],
        *,
        grad: bool = False,
        allowed_tokens: Sequence[AllowedTokens | None] | None = None,
        temperature: float | Sequence[float] = 1.0,
    ) -> list[torch.Tensor]:
        """Log-probability of every response token given its prompt and the tokens before it.

        One padded forward pass over the batch, under softmax(logits / T).

        Args:
            prompts: token ids per row (non-empty).
            responses: token ids per row (may be empty).
            grad: keep the autograd graph (for a loss); otherwise run under ``no_grad``.
            allowed_tokens: per row, per response position, the token ids constrained
                decoding allowed (None: any); the log-probs are then renormalised over them.
            temperature: the sampling temperature, one for all rows or one per row.

        Returns:
            Per row, a float32 tensor ``[len(response)]`` on ``device``.
        """
        scored, _ = self._score(
            prompts,
            responses,
            grad=grad,
            want_values=False,
            allowed_tokens=allowed_tokens,
            temperature=temperature,
        )
        return scored

    def response_logits(
        self,
        prompts: Sequence[torch.Tensor | Sequence[int]],
        responses: Sequence[torch.Tensor | Sequence[int]],
        *,
        grad: bool = False,
    ) -> list[torch.Tensor]:
        """Raw float32 logits ``[len(response), V]`` at :meth:`logprobs`' positions."""
        p_rows, r_rows = [as_ids(p) for p in prompts], [as_ids(r) for r in responses]
        if not any(r_rows):
            return [torch.zeros(len(r), 0, device=self.device) for r in r_rows]
        with nullcontext() if grad else torch.no_grad():
            logits, _, _ = self._logits(p_rows, r_rows, want_hidden=False)
            return [logits[i, : len(r)].float() for i, r in enumerate(r_rows)]

    def values(
        self,
        prompts: Sequence[torch.Tensor | Sequence[int]],
        responses: Sequence[torch.Tensor | Sequence[int]],
        *,
        grad: bool = False,
    ) -> list[torch.Tensor]:
        """Value-head estimate before each response token.

        Entry ``t`` of a row reads the final hidden state at the position that predicts
        response token ``t`` (the state after the prompt and the first ``t`` response tokens).

        Args:
            prompts: token ids per row (non-empty).
            responses: token ids per row (may be empty).
            grad: keep the autograd graph; gradients reach the value head and the trainable
                model parameters.

        Returns:
            Per row, a float32 tensor ``[len(response)]`` on ``device``.

        Raises:
            RuntimeError: the policy was built with ``value_head=False``.
        """
        return self._score(prompts, responses, grad=grad, want_values=True, want_logps=False)[1]

    def logprobs_and_values(
        self,
        prompts: Sequence[torch.Tensor | Sequence[int]],
        responses: Sequence[torch.Tensor | Sequence[int]],
        *,
        grad: bool = False,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """:meth:`logprobs` and :meth:`values` from a single forward pass."""
        return self._score(prompts, responses, grad=grad, want_values=True)

    def _score(
        self,
        prompts: Sequence[torch.Tensor | Sequence[int]],
        responses: Sequence[torch.Tensor | Sequence[int]],
        *,
        grad: bool,
        want_values: bool,
        want_logps: bool = True,
        allowed_tokens: Sequence[AllowedTokens | None] | None = None,
        temperature: float | Sequence[float] = 1.0,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        if len(prompts) != len(responses):
            raise ValueError(f"got {len(prompts)} prompts but {len(responses)} responses")
        if want_values and self.value_head is None:
            raise RuntimeError("this policy has no value head (built with value_head=False)")
        p_rows, r_rows = [as_ids(p) for p in prompts], [as_ids(r) for r in responses]
        n, dev = len(p_rows), self.device
        if any(len(p) == 0 for p in p_rows):
            raise ValueError("every prompt needs at least one token")
        width_r = max((len(r) for r in r_rows), default=0)
        if n == 0 or width_r == 0:
            empty = [torch.zeros(len(r), device=dev) for r in r_rows]
            return empty, [e.clone() for e in empty]
        ctx: AbstractContextManager[Any] = nullcontext() if grad else torch.no_grad()
        with ctx:
            logits, hidden, targets = self._logits(p_rows, r_rows, want_hidden=want_values)
            lps: list[torch.Tensor] = []
            if want_logps:
                flat = flat_allowed(allowed_tokens, r_rows, width_r)
                v_size = logits.shape[-1]
                temps = position_temperatures(temperature, [width_r] * n, dev)
                logp = masked_logprobs(
                    logits.reshape(-1, v_size), targets.reshape(-1), flat, temps
                ).reshape(n, width_r)
                lps = [logp[i, : len(r)] for i, r in enumerate(r_rows)]
            vals: list[torch.Tensor] = []
            if want_values:
                assert hidden is not None and self.value_head is not None
                v = self.value_head(hidden.float()).squeeze(-1)
                vals = [v[i, : len(r)] for i, r in enumerate(r_rows)]
        return lps, vals

    def _logits(
        self, p_rows: list[list[int]], r_rows: list[list[int]], *, want_hidden: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """``([n, W, V] logits, hidden states or None, [n, W] targets)`` of the responses."""
        if any(len(p) == 0 for p in p_rows):
            raise ValueError("every prompt needs at least one token")
        pad, lean, dev = self.tokenizer.pad_id, self._lean_forward(), self.device
        width_r = max(len(r) for r in r_rows)
        if lean is not None:
            hidden = lean_response_states(lean, p_rows, r_rows, pad, dev)
            return lean.logits(hidden), hidden, response_targets(r_rows, dev)
        ids, mask, pos, targets = scoring_batch(p_rows, r_rows, pad, dev)
        logits, h, _ = self._forward(ids, mask, pos, keep=width_r, want_hidden=want_hidden)
        return logits, h, targets

    # ---------------------------------------------------------------- persistence

    def save(self, path: str | os.PathLike[str], *, merge: bool = False) -> None:
        """Write a self-contained checkpoint directory (safetensors and JSON only).

        Files:
            ``model.safetensors`` + ``config.json`` (+ ``generation_config.json``): the full
            network weights, a standard ``transformers`` checkpoint. With LoRA and
            ``merge=False`` (the default) these are the *base* weights, unmerged, and the
            adapters go to ``adapter/adapter_model.safetensors`` +
            ``adapter/adapter_config.json`` (the ``peft`` layout, loadable with
            ``PeftModel.from_pretrained(base, path / "adapter")``), so :meth:`load` rebuilds
            the same trainable LoRA policy and its log-probs are bit-identical. With
            ``merge=True`` the adapter updates are folded into ``model.safetensors`` (up to
            float rounding) and no adapter is written: the directory is a plain model any HF
            tool can load, and :meth:`load` returns a policy without LoRA (all weights
            trainable).
            Tokenizer files (``tokenizer.json``, ``tokenizer_config.json``...).
            ``value_head.safetensors`` when there is a value head.
            ``agentgym_policy.json``: format version, dtype, LoRA settings, merge flag and
            whether there is a value head.

        Args:
            path: the directory (created if missing; existing files of the same names are
                overwritten).
            merge: fold LoRA adapters into the base weights (no effect without LoRA).
        """
        write_checkpoint(
            Path(path),
            lm=self._lm,
            model=self.model,
            tokenizer=self.tokenizer,
            dtype=self.dtype,
            lora=self.lora,
            value_head=self.value_head,
            merge=merge,
        )
