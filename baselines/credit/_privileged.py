"""What the self-distillation variants share: a teacher reading the env's privileged text.

:class:`PrivilegedTeacher` is the base of the variants whose teacher is the current policy
under the privileged view (:mod:`agentgym.baselines.teachers`): they play on privileged envs
and refuse, before any work, an env whose privileged reset info has no privileged text, or an
empty one. Also here: masked means and ``log(1 − e^x)``, computed stably.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from agentgym.baselines.credit import CreditVariant
from agentgym.baselines.prompt import PRIVILEGED_KEY
from agentgym.core.errors import BadInput

CONTEXTS = ("env",)
"""Where the teacher's privileged text comes from: the env's ``privileged_context``."""


def check_context(name: str, context: str, contexts: tuple[str, ...] = CONTEXTS) -> None:
    """Refuse a teacher context other than ``contexts``."""
    if context not in contexts:
        raise BadInput(f"{name} context must be one of {contexts}, got {context!r}")


class PrivilegedTeacher(CreditVariant):
    """A variant whose teacher is the policy reading the env's privileged text."""

    requires_abilities: ClassVar[frozenset[str]] = frozenset({"privileged"})
    requires_info: ClassVar[frozenset[str]] = frozenset({PRIVILEGED_KEY})

    def info_problems(self, env_id: str, info: Mapping[str, Any]) -> list[str]:
        """A privileged reset whose privileged text is empty (a teacher would read nothing)."""
        text = info.get(PRIVILEGED_KEY)
        if text is None or not str(text).strip():
            return [f"a non-empty {PRIVILEGED_KEY!r} in privileged reset info, got {text!r}"]
        return []


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """``Σ_t m_t x_t / Σ_t m_t`` (0 when the mask is empty), differentiable in ``x``."""
    m = mask.to(x.device, x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1.0)


LOG_HALF = -math.log(2.0)


def log1mexp(x: Tensor, *, ceiling: float = -1e-7) -> Tensor:
    """``log(1 − e^x)`` for log-probabilities ``x ≤ 0``, stable at both ends.

    ``log(−expm1(x))`` near 0, ``log1p(−e^x)`` below ``−log 2`` (Mächler 2012); ``x`` is first
    clamped to ``ceiling`` so that a certain token (``x = 0``) gives a finite value.
    """
    x = x.clamp(max=ceiling)
    return torch.where(x > LOG_HALF, torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))
