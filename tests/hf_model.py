"""A tiny Hugging Face model directory built offline, for the tests that train through one."""

from __future__ import annotations

from pathlib import Path

import torch


def write_hf_model(out: Path, texts: list[str]) -> Path:
    """A tiny random Llama with a BPE tokenizer fitted to the env's text and a chat template,
    saved the way a Hugging Face model directory is (nothing is downloaded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from agentgym.baselines.policies.tokenizer import CHAT_TEMPLATE, hf_tokenizer

    roles = ["<|user|>", "<|assistant|>"]
    tok = hf_tokenizer(texts, 1200, extra_special_tokens=roles, chat_template=CHAT_TEMPLATE)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    tok.save_pretrained(out)
    LlamaForCausalLM(config).save_pretrained(out)
    return out
