"""Second opinions on a step's sampled tokens: the teachers every teacher-signal variant reads.

A *view* is a model and a prompt under which the tokens the policy sampled are scored again,
without gradient:

* ``"privileged"``: the current policy, the prompt rebuilt with a privileged text at its head
  (the env's ``privileged_context`` of the state the turn acted from, or a text the variant
  gives, such as SDAR's retrieved skills): self-distillation's teacher;
* ``"reference"``: the frozen reference (the warm start, or ``--reference DIR``) on the
  turn's own prompt;
* ``"teacher:NAME"``: a teacher checkpoint given with ``--teachers NAME=DIR``, on the turn's
  own prompt.

Two things are scored per view: the log-probability of every sampled token
(:meth:`Teachers.logprobs`), and the top-``k`` distribution at every sampled position with
a tail bucket holding the rest of the mass (:meth:`Teachers.topk`), for the divergences that
need support beyond the sampled token (:mod:`agentgym.baselines.divergence`).
:meth:`Teachers.student` gives the current policy's distribution on a given support *with*
gradient, the other side of those divergences.

Every score is taken under the distribution the token was sampled from: the turn's sampling
temperature and, for constrained decoding, its mask of allowed tokens. Rows are per turn and
batched up to ``max_tokens`` padded tokens a forward. Results are cached in each turn's
``extras`` (``"logp/<view>"``, ``"topk/<view>/<k>"``): a turn is scored once per step
whatever the number of variants or mini-batches that read it. The forwards, the tokens they
covered and their seconds are added to ``batch.metrics`` under ``teachers/...``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.batch import Batch, Key, Trajectory, Turn
from agentgym.baselines.prompt import PRIVILEGED_KEY, History, PromptFormat
from agentgym.core.errors import BadInput

PRIVILEGED = "privileged"
REFERENCE = "reference"
TEACHER = "teacher:"
FLOOR = -1e4
"""Log-probability given to tokens a decoding mask excludes (finite, so ``0 · log 0`` stays 0)."""

ContextFn = Callable[[Trajectory, int], str | None]
"""``(trajectory, turn index) -> privileged text`` for the privileged view (None: none)."""


@dataclass
class TokenDist:
    """A distribution at each of ``L`` positions, kept on a support of ``k`` ids plus a tail.

    Attributes:
        ids: long ``[L, k]``: the support (a teacher's top-k ids, or ids given).
        logp: float ``[L, k]``: the log-probabilities of those ids.
        sampled: float ``[L]``: the log-probability of the token actually sampled there.
    """

    ids: Tensor
    logp: Tensor
    sampled: Tensor

    def tail(self) -> Tensor:
        """``[L]`` log of the mass outside the support (clamped away from log 0)."""
        mass = self.logp.exp().sum(-1).clamp(max=1.0 - 1e-6)
        return torch.log1p(-mass)

    def with_tail(self) -> Tensor:
        """``[L, k + 1]``: the support's log-probs and the tail's, a full distribution."""
        return torch.cat([self.logp, self.tail()[:, None]], dim=-1)


def log_distribution(
    logits: Tensor, allowed: Sequence[Sequence[int] | None] | None, temperature: Tensor
) -> Tensor:
    """``[N, V]`` log-probs of ``softmax(logits / T)``, renormalised over allowed ids.

    Ids a position's mask excludes get :data:`FLOOR`. ``temperature`` is ``[N]``.
    """
    lf = logits.float() / temperature.to(logits.device, torch.float32)[:, None]
    pairs = [] if allowed is None else [(i, a) for i, a in enumerate(allowed) if a is not None]
    if pairs:  # one scatter for every constrained position, not one per position
        dev = lf.device
        rows = torch.tensor([i for i, a in pairs for _ in a], dtype=torch.long, device=dev)
        cols = torch.tensor([int(c) for _, a in pairs for c in a], dtype=torch.long, device=dev)
        keep = torch.ones_like(lf, dtype=torch.bool)
        keep[torch.tensor([i for i, _ in pairs], dtype=torch.long, device=dev)] = False
        keep[rows, cols] = True
        lf = lf.masked_fill(~keep, -torch.inf)
    return torch.log_softmax(lf, dim=-1).clamp(min=FLOOR)


class Teachers:
    """The views of one run (module doc): the policy, its reference, named checkpoints.

    Attributes:
        policy: the model being trained (the privileged view scores with it).
        ref: the frozen reference, or None.
        named: teacher checkpoints by name.
        max_tokens: most padded tokens (prompt + response) per scoring forward.
    """

    def __init__(
        self,
        policy: Any,
        ref: Any = None,
        named: Mapping[str, Any] | None = None,
        *,
        max_tokens: int = 8192,
    ):
        """Hold the models; every one of them must use the policy's tokenizer."""
        self.policy, self.ref, self.named = policy, ref, dict(named or {})
        self.max_tokens = max_tokens
        for name, model in [("reference", ref), *self.named.items()]:
            if model is not None:
                check_tokenizer(policy, model, name)

    # ----------------------------------------------------------------- public
    def model(self, view: str) -> Any:
        """The model that scores ``view``."""
        if view == PRIVILEGED:
            return self.policy
        if view == REFERENCE:
            if self.ref is None:
                raise ValueError("the reference view needs a frozen reference model")
            return self.ref
        if view.startswith(TEACHER):
            name = view[len(TEACHER) :]
            if name not in self.named:
                raise ValueError(f"no teacher {name!r}: the run has {sorted(self.named)}")
            return self.named[name]
        raise ValueError(f"unknown view {view!r}: privileged, reference or teacher:NAME")

    def logprobs(
        self,
        batch: Batch,
        keys: Sequence[Key],
        view: str,
        *,
        context: ContextFn | None = None,
        tag: str = "",
    ) -> list[Tensor]:
        """``log p_view(y_t)`` of every sampled token of the turns at ``keys``, ``[L]`` each.

        ``context`` replaces the env's privileged text in the privileged view; ``tag`` names
        that replacement in the cache (a different text, a different ``tag``).
        """
        return [d.sampled for d in self.topk(batch, keys, view, 0, context=context, tag=tag)]

    def topk(
        self,
        batch: Batch,
        keys: Sequence[Key],
        view: str,
        k: int,
        *,
        context: ContextFn | None = None,
        tag: str = "",
    ) -> list[TokenDist]:
        """The view's top-``k`` distribution at every sampled position of ``keys`` (no grad).

        ``k = 0`` keeps only the sampled tokens' log-probs (an empty support).
        """
        name = f"{view}{'/' + tag if tag else ''}"
        slot = f"topk/{name}/{k}"
        todo = [key for key in keys if slot not in batch.turn(key).extras]
        if todo:
            model = self.model(view)
            prompts = self.prompts(batch, todo, view, context)
            dists = self._score(batch, model, todo, prompts, k=k, support=None, grad=False)
            for key, dist in zip(todo, dists, strict=True):
                turn = batch.turn(key)
                turn.extras[slot] = dist
                turn.extras.setdefault(f"logp/{name}", dist.sampled)
        return [batch.turn(key).extras[slot] for key in keys]

    def student(
        self, batch: Batch, keys: Sequence[Key], support: Sequence[TokenDist] | None = None
    ) -> list[TokenDist]:
        """The current policy's distribution on its own prompts, **with** gradient.

        On ``support[i].ids`` at key ``i`` (the teacher's top-k), or on the sampled tokens
        only when ``support`` is None. Not cached: the policy moves between mini-batches.
        """
        prompts = [batch.turn(key).prompt_ids for key in keys]
        ids = None if support is None else [d.ids for d in support]
        return self._score(batch, self.policy, keys, prompts, k=0, support=ids, grad=True)

    def prompts(
        self, batch: Batch, keys: Sequence[Key], view: str, context: ContextFn | None = None
    ) -> list[Tensor]:
        """The prompt each turn is scored on under ``view`` (its own, or the privileged one)."""
        if view != PRIVILEGED:
            return [batch.turn(key).prompt_ids for key in keys]
        return [self.privileged_prompt(batch.trajectories[i], k, context) for i, k in keys]

    def privileged_prompt(self, traj: Trajectory, k: int, context: ContextFn | None) -> Tensor:
        """Turn ``k``'s prompt rebuilt with the privileged text at its head."""
        turns = traj.turns
        missing = [j for j in range(k + 1) if "observation" not in turns[j].extras]
        if missing:
            raise ValueError(
                f"turn {missing[0]} of {traj.node_id} has no recorded observation: the "
                "privileged view rebuilds prompts from the rollout engine's turns"
            )
        text = context(traj, k) if context is not None else turns[k].extras.get(PRIVILEGED_KEY)
        fmt = dataclasses.replace(traj.prompt or PromptFormat(), privileged=True)
        history = History(
            self.policy,
            fmt,
            [t.extras["observation"] for t in turns[: k + 1]],
            [t.response_ids for t in turns[:k]],
            privileged_context=None if text is None else str(text),
        )
        return torch.tensor(history.prompt(), dtype=torch.long)

    # ----------------------------------------------------------------- scoring
    def _score(
        self,
        batch: Batch,
        model: Any,
        keys: Sequence[Key],
        prompts: Sequence[Tensor],
        *,
        k: int,
        support: Sequence[Tensor] | None,
        grad: bool,
    ) -> list[TokenDist]:
        """Score ``keys``' responses after ``prompts`` in chunks of ``max_tokens``."""
        logits_of = getattr(model, "response_logits", None)
        if not callable(logits_of):
            raise BadInput(f"{type(model).__name__} cannot give logits (no response_logits)")
        start = time.perf_counter()
        out: list[TokenDist] = []
        for chunk in _chunks(
            [
                len(p) + len(batch.turn(key).response_ids)
                for key, p in zip(keys, prompts, strict=True)
            ],
            self.max_tokens,
        ):
            turns = [batch.turn(keys[n]) for n in chunk]
            logits = logits_of(
                [prompts[n] for n in chunk], [t.response_ids for t in turns], grad=grad
            )
            for n, turn, lg in zip(chunk, turns, logits, strict=True):
                ids = None if support is None else support[n]
                out.append(_dist(turn, lg, k, ids))
        metrics = batch.metrics
        if not grad:
            metrics["teachers/forwards"] = metrics.get("teachers/forwards", 0.0) + len(keys)
            tokens = sum(
                len(p) + len(batch.turn(key).response_ids)
                for key, p in zip(keys, prompts, strict=True)
            )
            metrics["teachers/tokens"] = metrics.get("teachers/tokens", 0.0) + tokens
            seconds = time.perf_counter() - start
            metrics["teachers/seconds"] = metrics.get("teachers/seconds", 0.0) + seconds
        return out


def _dist(turn: Turn, logits: Tensor, k: int, support: Tensor | None) -> TokenDist:
    """One turn's :class:`TokenDist` from its ``[L, V]`` logits."""
    L = len(turn.response_ids)
    temps = torch.full((L,), float(turn.temperature), device=logits.device)
    logp = log_distribution(logits, turn.allowed_tokens, temps)
    target = turn.response_ids.to(logits.device, torch.long)
    sampled = logp.gather(-1, target[:, None]).squeeze(-1)
    if support is not None:
        ids = support.to(logits.device, torch.long)
    elif k > 0:
        ids = logp.topk(min(k, logp.shape[-1]), dim=-1).indices
    else:
        ids = torch.zeros(L, 0, dtype=torch.long, device=logits.device)
    return TokenDist(ids=ids, logp=logp.gather(-1, ids), sampled=sampled)


def _chunks(lengths: Sequence[int], limit: int) -> list[list[int]]:
    """Row indices cut into runs of at most ``limit`` padded tokens (rows x longest row)."""
    runs: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for n, length in enumerate(lengths):
        if current and limit > 0 and (len(current) + 1) * max(longest, length) > limit:
            runs.append(current)
            current, longest = [], 0
        current.append(n)
        longest = max(longest, length)
    if current:
        runs.append(current)
    return runs


def check_tokenizer(policy: Any, other: Any, name: str) -> None:
    """Refuse a model whose tokenizer differs from the policy's (it would score other tokens).

    Raises:
        BadInput: naming ``name``.
    """
    a, b = policy.tokenizer, other.tokenizer
    probe = "Find the key, open the door: search[capital of France] click[Buy Now] 0123"
    if a.vocab_size != b.vocab_size or list(a.encode(probe)) != list(b.encode(probe)):
        raise BadInput(
            f"the {name} model's tokenizer differs from the policy's: train it from the same "
            "warm start (--init) so both read the same tokens"
        )


def parse_teachers(spec: str) -> dict[str, str]:
    """``"name=DIR,name2=DIR2"`` as a dict (``--teachers``).

    Raises:
        BadInput: an entry without ``=``, an empty or repeated name.
    """
    out: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, eq, path = part.partition("=")
        name, path = name.strip(), path.strip()
        if not eq or not name or not path:
            raise BadInput(f"--teachers entries are NAME=DIR, got {part!r}")
        if name in out:
            raise BadInput(f"--teachers names {name!r} twice")
        out[name] = path
    return out
