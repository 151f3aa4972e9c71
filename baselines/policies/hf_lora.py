"""LoRA adapters for :class:`~agentgym.baselines.policies.hf.HFPolicy`: settings and targets.

``LoraSettings`` holds the adapter's rank, scale, dropout and target layers;
:func:`infer_lora_targets` finds every linear layer except the output layer when no targets are
named. :func:`add_lora` wraps a model in fresh ``peft`` adapters and :func:`load_lora` restores
saved ones; both use the one adapter name :data:`ADAPTER_NAME`.

    lora = LoraSettings(r=16)                      # every linear layer but the output layer
    model, lora = add_lora(model, lora)            # lora.target_modules now resolved
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["ADAPTER_NAME", "LoraSettings", "add_lora", "infer_lora_targets", "load_lora"]

ADAPTER_NAME = "default"
"""The ``peft`` adapter name of every HFPolicy adapter."""


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings (see ``peft.LoraConfig``).

    Attributes:
        r: rank of the update matrices.
        alpha: scaling numerator; the update is scaled by ``alpha / r``.
        dropout: dropout on the adapter input. The policy runs in ``eval()`` mode, so this only
            acts if a caller puts ``policy.model`` in training mode itself.
        target_modules: leaf module names to adapt (``"q_proj"``, ``"c_attn"``...). ``None``
            means every linear layer of the network except the output layer, as found by
            :func:`infer_lora_targets`; the resolved names are what ``save`` records.
    """

    r: int = 16
    alpha: float = 32.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Validate the values and freeze ``target_modules`` into a sorted tuple."""
        if self.r <= 0:
            raise ValueError(f"LoRA rank must be positive, got {self.r}")
        if self.alpha <= 0:
            raise ValueError(f"LoRA alpha must be positive, got {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if self.target_modules is not None:
            names = tuple(sorted({str(n) for n in self.target_modules}))
            if not names:
                raise ValueError("target_modules must name at least one module (or be None)")
            object.__setattr__(self, "target_modules", names)

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        d = asdict(self)
        d["target_modules"] = list(self.target_modules) if self.target_modules else None
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LoraSettings:
        """Inverse of :meth:`to_json`."""
        tm = d.get("target_modules")
        return cls(
            r=int(d["r"]),
            alpha=float(d["alpha"]),
            dropout=float(d["dropout"]),
            target_modules=tuple(tm) if tm else None,
        )


def infer_lora_targets(model: nn.Module) -> tuple[str, ...]:
    """Leaf names of every linear layer in ``model`` except its output layer.

    Covers ``nn.Linear`` and the ``Conv1D`` of GPT-2-style models; names are deduplicated
    (``"q_proj"`` stands for the ``q_proj`` of every layer) and sorted.

    Args:
        model: a ``transformers`` causal LM.

    Raises:
        ValueError: when the model holds no linear layer besides the output layer.
    """
    try:
        from transformers.pytorch_utils import Conv1D

        linear_types: tuple[type[nn.Module], ...] = (nn.Linear, Conv1D)
    except ImportError:  # pragma: no cover - every transformers release we support has it
        linear_types = (nn.Linear,)
    get_out = getattr(model, "get_output_embeddings", None)
    out_emb = get_out() if callable(get_out) else None
    names: set[str] = set()
    for qual, module in model.named_modules():
        if module is out_emb or not isinstance(module, linear_types):
            continue
        names.add(qual.rsplit(".", 1)[-1])
    if not names:
        raise ValueError("found no linear layer to put LoRA adapters on")
    return tuple(sorted(names))


def _targets_conv1d(model: nn.Module, targets: Sequence[str]) -> bool:
    """Whether the targeted layers are GPT-2 ``Conv1D``s (weights stored transposed)."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover
        return False
    wanted = set(targets)
    return any(
        isinstance(m, Conv1D) and name.rsplit(".", 1)[-1] in wanted
        for name, m in model.named_modules()
    )


def add_lora(model: PreTrainedModel, lora: LoraSettings) -> tuple[Any, LoraSettings]:
    """Wrap ``model`` in fresh LoRA adapters.

    Args:
        model: a ``transformers`` causal LM.
        lora: the settings; ``target_modules=None`` adapts :func:`infer_lora_targets`.

    Returns:
        The ``peft.PeftModel`` and the settings with ``target_modules`` resolved.
    """
    from peft import LoraConfig, get_peft_model

    targets = lora.target_modules or infer_lora_targets(model)
    lora = LoraSettings(lora.r, lora.alpha, lora.dropout, targets)
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,  # type: ignore[arg-type]  # annotated int, any number works
        lora_dropout=lora.dropout,
        target_modules=list(targets),
        fan_in_fan_out=_targets_conv1d(model, targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():  # peft calls an API transformers 5 deprecates
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        peft_model = get_peft_model(model, config, adapter_name=ADAPTER_NAME)
    return peft_model, lora


def load_lora(model: Any, adapter_dir: Path) -> Any:
    """Wrap ``model`` in the trainable LoRA adapters saved in ``adapter_dir`` (``peft`` layout)."""
    from peft import PeftModel

    with warnings.catch_warnings():  # peft calls an API transformers 5 deprecates
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        model = PeftModel.from_pretrained(
            model,
            str(adapter_dir),
            adapter_name=ADAPTER_NAME,
            is_trainable=True,
        )
    return model
