"""The checkpoint directory of :class:`~agentgym.baselines.policies.hf.HFPolicy`.

A checkpoint is safetensors and JSON only: the network (``model.safetensors`` +
``config.json``), the LoRA adapter in ``peft``'s layout under ``adapter/`` (unless merged),
the value head, the tokenizer files and ``agentgym_policy.json`` (format version, dtype, LoRA
settings, merge flag, whether there is a value head). :func:`write_checkpoint` writes one,
with the adapters kept apart (:func:`base_state`) or folded in (:func:`merged_state`);
:func:`read_settings` and :func:`load_value_head` read the parts ``HFPolicy.load`` needs
besides the model and the tokenizer.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from agentgym.baselines.policies.hf_lora import ADAPTER_NAME, LoraSettings
from agentgym.baselines.policies.hf_tokenizer import HFTokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = [
    "ADAPTER_CONFIG_FILE",
    "ADAPTER_DIR",
    "ADAPTER_FILE",
    "MODEL_FILE",
    "SETTINGS_FILE",
    "VALUE_HEAD_FILE",
    "base_state",
    "load_value_head",
    "merged_state",
    "new_value_head",
    "read_settings",
    "write_checkpoint",
]

MODEL_FILE = "model.safetensors"
ADAPTER_DIR = "adapter"
"""Sub-directory of a checkpoint holding the LoRA adapter in ``peft``'s layout. Not the top
level: ``transformers`` treats a directory with ``adapter_config.json`` as an adapter and
would load the base weights named inside it instead of ``model.safetensors``."""
ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG_FILE = "adapter_config.json"
VALUE_HEAD_FILE = "value_head.safetensors"
SETTINGS_FILE = "agentgym_policy.json"
_SETTINGS_FORMAT = "agentgym.hf_policy"
_SETTINGS_VERSION = 1


# --------------------------------------------------------------------------------------------
# Weights with the adapters stripped out or folded in
# --------------------------------------------------------------------------------------------


def base_state(lm: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The wrapped model's state dict as it was before LoRA was added.

    The adapters are stripped out and ``base_layer`` names restored.
    """
    state: dict[str, torch.Tensor] = {}
    for key, value in lm.state_dict().items():
        if "lora_" in key:
            continue
        state[key.replace(".base_layer.", ".")] = value
    return state


def merged_state(lm: PreTrainedModel) -> dict[str, torch.Tensor]:
    """:func:`base_state` with every adapter update ``scale * B @ A`` added in.

    The live model is not touched.
    """
    from peft.tuners.lora import LoraLayer

    state = base_state(lm)
    with torch.no_grad():
        for name, module in lm.named_modules():
            if not isinstance(module, LoraLayer) or ADAPTER_NAME not in module.lora_A:
                continue
            key = f"{name}.weight"
            base = state[key]
            delta = getattr(module, "get_delta_weight")(ADAPTER_NAME)  # noqa: B009
            state[key] = (base.float() + delta.float()).to(base.dtype)
    return state


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_checkpoint(
    root: Path,
    *,
    lm: PreTrainedModel,
    model: Any,
    tokenizer: HFTokenizer,
    dtype: torch.dtype,
    lora: LoraSettings | None,
    value_head: nn.Linear | None,
    merge: bool,
) -> None:
    """Write the files of ``HFPolicy.save`` (which documents them) into the directory ``root``.

    Args:
        root: the directory (created if missing; files of the same names are overwritten).
        lm: the ``transformers`` model (the base model inside ``model`` with LoRA).
        model: the network: ``lm``, or the ``peft.PeftModel`` wrapping it.
        tokenizer: the policy's tokenizer.
        dtype: the floating-point type of the base weights.
        lora: the LoRA settings, or ``None``.
        value_head: the value head, or ``None``.
        merge: fold LoRA adapters into the base weights (no effect without LoRA).
    """
    root.mkdir(parents=True, exist_ok=True)
    merged = bool(merge and lora is not None)
    state: dict[str, torch.Tensor] | None = None  # None: the model's own state dict
    if lora is not None:
        state = merged_state(lm) if merged else base_state(lm)
    lm.save_pretrained(str(root), state_dict=state)
    if lora is not None and not merged:
        _write_adapter(root / ADAPTER_DIR, model)
    else:
        _remove_adapter(root / ADAPTER_DIR)
    if value_head is not None:
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in value_head.state_dict().items()},
            str(root / VALUE_HEAD_FILE),
            metadata={"format": "pt"},
        )
    tokenizer.save(root)
    settings = {
        "format": _SETTINGS_FORMAT,
        "version": _SETTINGS_VERSION,
        "dtype": str(dtype).removeprefix("torch."),
        "lora": lora.to_json() if lora is not None else None,
        "lora_merged": merged,
        "value_head": value_head is not None,
    }
    (root / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")


def _write_adapter(adapter_dir: Path, model: Any) -> None:
    """The adapter weights and ``peft`` config of the ``PeftModel`` ``model``."""
    from peft import get_peft_model_state_dict

    adapter_dir.mkdir(exist_ok=True)
    adapter = get_peft_model_state_dict(model, adapter_name=ADAPTER_NAME)
    save_file(
        {k: v.detach().contiguous().cpu() for k, v in adapter.items()},
        str(adapter_dir / ADAPTER_FILE),
        metadata={"format": "pt"},
    )
    model.peft_config[ADAPTER_NAME].save_pretrained(str(adapter_dir))


def _remove_adapter(adapter_dir: Path) -> None:
    """Delete a stale adapter left by an earlier save, and its directory once empty."""
    for stale in (ADAPTER_FILE, ADAPTER_CONFIG_FILE):
        (adapter_dir / stale).unlink(missing_ok=True)
    if adapter_dir.is_dir() and not any(adapter_dir.iterdir()):
        adapter_dir.rmdir()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def read_settings(root: Path) -> dict[str, Any]:
    """The ``agentgym_policy.json`` of the checkpoint ``root``, checked.

    Raises:
        ValueError: the file is not an HFPolicy checkpoint's, or is newer than this code.
    """
    settings: dict[str, Any] = json.loads((root / SETTINGS_FILE).read_text(encoding="utf-8"))
    if settings.get("format") != _SETTINGS_FORMAT:
        raise ValueError(f"{root / SETTINGS_FILE} is not an HFPolicy checkpoint")
    if int(settings.get("version", 0)) > _SETTINGS_VERSION:
        raise ValueError(f"checkpoint version {settings['version']} is newer than this code")
    return settings


def load_value_head(root: Path) -> nn.Linear:
    """The float32 value head saved in the checkpoint ``root`` (on the CPU)."""
    state = load_file(str(root / VALUE_HEAD_FILE))
    head = nn.Linear(state["weight"].shape[1], 1, dtype=torch.float32)
    head.load_state_dict({k: v.float() for k, v in state.items()})
    return head


def new_value_head(width: int) -> nn.Linear:
    """A fresh float32 value head over ``width``-wide hidden states (seed 0: deterministic)."""
    head = nn.Linear(width, 1, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        head.weight.normal_(0.0, 1.0 / math.sqrt(head.in_features + 1), generator=gen)
        head.bias.zero_()
    return head


def resolve_dtype(dtype: torch.dtype | str | None, device: torch.device) -> torch.dtype:
    """A ``torch.dtype`` from a dtype, its name, or None (bfloat16 on CUDA, float32 elsewhere).

    Raises:
        ValueError: an unknown name.
    """
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return resolved


def load_lm(path: Path, dtype: torch.dtype, attn: str | None) -> PreTrainedModel:
    """The causal LM in ``path``, read from local files only (``attn``: its attention kind)."""
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": dtype, "local_files_only": True}
    if attn is not None:
        kwargs["attn_implementation"] = attn
    return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)


def check_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path`` when it is a local directory (nothing is ever downloaded).

    Raises:
        FileNotFoundError: it is not.
    """
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(
            f"{str(p)!r} is not a local directory; HFPolicy only loads models from disk"
        )
    return p
