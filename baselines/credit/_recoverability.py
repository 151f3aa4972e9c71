"""ISA-Distill's recoverability probe: value masking, answer NLL and its logistic calibration.

Pure helpers of :mod:`agentgym.baselines.credit.isa`:

* :func:`value_mask` removes the gold answer from an observation's evidence;
* :func:`fit_logistic` fits ``k = σ(a − b·NLL)`` to success rates by Newton's method;
* :func:`normalize_answer` / :func:`answer_matches`: SQuAD-style exact match of a sampled
  answer against the gold one.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence

import torch
from torch import Tensor


def value_mask(text: str, answer: str, mask: str, keep_prefix: str = "") -> str:
    """``text`` with every occurrence of ``answer`` (any case) replaced by ``mask``.

    Lines that start with ``keep_prefix`` (non-empty; e.g. ``"Question:"``) are left whole:
    a comparison question names its answer among the candidates, and only the retrieved
    evidence carries the answer-bearing value. An empty ``answer`` changes nothing.
    """
    if not answer.strip():
        return text
    pattern = re.compile(re.escape(answer.strip()), re.IGNORECASE)
    lines = text.split("\n")
    return "\n".join(
        line if keep_prefix and line.lstrip().startswith(keep_prefix) else pattern.sub(mask, line)
        for line in lines
    )


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (SQuAD's normalisation)."""
    text = text.lower()
    text = "".join(c for c in text if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def answer_matches(sampled: str, gold: str) -> bool:
    """Whether the first line of ``sampled`` is ``gold`` after normalisation."""
    first = sampled.strip().split("\n", 1)[0] if sampled.strip() else ""
    return bool(first) and normalize_answer(first) == normalize_answer(gold)


def recoverability(nll: Tensor, a: float, b: float) -> Tensor:
    """``k = σ(a − b·NLL)``, elementwise."""
    return torch.sigmoid(a - b * nll)


def fit_logistic(
    nll: Sequence[float],
    rate: Sequence[float],
    weight: Sequence[float],
    *,
    start: tuple[float, float],
    ridge: float,
    steps: int,
) -> tuple[float, float]:
    """``(a, b)`` maximising the weighted binomial likelihood of ``rate ≈ σ(a − b·nll)``.

    Each probe ``j`` has a success rate ``rate[j]`` over ``weight[j]`` samples. The fit is
    Newton's method from ``start`` on the cross-entropy plus ``ridge/2 · ‖(a, b) − start‖²``
    (which keeps it finite when every rate is 0 or 1), in float64: deterministic.
    """
    x = torch.tensor(list(nll), dtype=torch.float64)
    y = torch.tensor(list(rate), dtype=torch.float64)
    w = torch.tensor(list(weight), dtype=torch.float64)
    if x.numel() == 0 or float(w.sum()) <= 0:
        return start
    z = torch.stack([torch.ones_like(x), -x], dim=-1)  # logit = z · (a, b)
    theta0 = torch.tensor(start, dtype=torch.float64)
    theta = theta0.clone()
    eye = torch.eye(2, dtype=torch.float64)
    for _ in range(steps):
        p = torch.sigmoid(z @ theta)
        grad = z.T @ (w * (p - y)) + ridge * (theta - theta0)
        hess = (z * (w * p * (1 - p))[:, None]).T @ z + ridge * eye
        step = torch.linalg.solve(hess + 1e-12 * eye, grad)
        theta = theta - step
        if float(step.abs().max()) < 1e-10:
            break
    a, b = float(theta[0]), float(theta[1])
    if not (math.isfinite(a) and math.isfinite(b)):
        return start
    return a, b
