"""PPO with GAE and a critic over the rollout's policy tokens, as in CREDIT.md §1.4.

Schulman et al. 2017, arXiv 1707.06347; GAE: arXiv 1506.02438.

Token MDP over policy tokens only: a rollout's policy tokens, turn after turn, form one flat
sequence; observation tokens are skipped, so the next value of a turn's last token is the value
at the first policy token of the next turn (turn-level bootstrap across the observation).
Rewards: each turn's ``reward`` on its last policy token, the outcome R on the rollout's last
policy token (optionally ``−β (logp_old − ref_logp)`` on every token). A terminated rollout
does not bootstrap; any other end bootstraps from ``next_value`` (``turn.extras`` of the last
turn or ``trajectory.extras``): ``score`` fills it from the critic at the prompt the rollout
engine records for a truncated episode's next state (``extras["next_prompt"]``), else 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, CreditVariant, Trajectory, Turn, register
from agentgym.baselines.losses import aggregate, gae, value_loss, whiten
from agentgym.baselines.scoring import turn_logprobs
from agentgym.core.errors import BadInput


def _next_value(traj: Trajectory) -> float:
    """V of the state after the last turn, if the rollout engine recorded it, else 0."""
    last = traj.turns[-1].extras.get("next_value") if traj.turns else None
    value = last if last is not None else traj.extras.get("next_value", 0.0)
    return float(value)


def _old_values(turn: Turn) -> Tensor:
    """The rollout-time values of a turn (``score`` fills them before the loss)."""
    if turn.values is None:
        raise ValueError("ppo: a turn reached the value loss without rollout-time values")
    return turn.values


@register("ppo")
class PPO(CreditVariant):
    """PPO + GAE with a critic (CREDIT.md §1.4; verl-style defaults γ = 1, λ = 1).

    ``score`` fills missing ``turn.values`` from ``ctx.policy.values``; ``advantages`` runs GAE
    and writes ``batch.returns``; ``aux_loss`` is the clipped value loss
    ``vf_coef · ½ max((V − G)², (clip(V, V_old ± c) − G)²)``.
    """

    @dataclass(frozen=True)
    class Config:
        """PPO's settings: γ, λ, whitening, the value loss and the KL penalty."""

        gamma: float = 1.0
        """discount γ per policy token."""
        lam: float = 1.0
        """GAE λ (0.95 is the other common choice)."""
        whiten: bool = True
        """whiten the advantages over the batch's policy tokens."""
        value_clip: float | None = 0.5
        """value clip c around the rollout-time values; None for the plain squared error."""
        vf_coef: float = 0.5
        """weight of the value loss added to the policy loss."""
        kl_coef: float = 0.0
        """β of the per-token KL penalty in the reward, −β (logp_old − ref_logp); 0 = off."""

    @property
    def needs_reference(self) -> bool:
        """The KL penalty in the reward reads the reference's log-probs."""
        return self.cfg.kl_coef > 0

    def score(self, batch: Batch, ctx: Context) -> None:
        """PPO's score, without grad: values, next values and reference log-probs.

        The critic's values of every turn and of a truncated episode's next state, and the
        reference's log-probs when the reward has a KL term.
        """
        self._score_values(batch, ctx)
        self._score_next_values(batch, ctx)
        if self.cfg.kl_coef > 0:
            self._score_reference(batch, ctx)

    def _score_reference(self, batch: Batch, ctx: Context) -> None:
        """Fill missing ``turn.ref_logp`` from ``ctx.ref``, at each turn's temperature."""
        all_keys = batch.keys()
        keys = [key for key in all_keys if batch.turn(key).ref_logp is None]
        if not keys:
            return
        if ctx.ref is None:
            raise BadInput("ppo's kl_coef needs the reference model (ctx.ref), which is not set")
        with torch.no_grad():
            ref_logps = turn_logprobs(ctx.ref, batch, keys, grad=False)
        for key, lp in zip(keys, ref_logps, strict=True):
            batch.turn(key).ref_logp = lp.detach().float()

    def _score_next_values(self, batch: Batch, ctx: Context) -> None:
        """V(s_K) of each truncated rollout whose next state's prompt was recorded."""
        todo = [
            t
            for t in batch.trajectories
            if t.truncated and not t.terminated and "next_value" not in t.extras
            if t.extras.get("next_prompt") is not None
        ]
        if not todo:
            return
        policy = ctx.need_policy()
        eos = policy.tokenizer.eos_id
        prompts = [torch.as_tensor(t.extras["next_prompt"], dtype=torch.long) for t in todo]
        with torch.no_grad():  # the value before the first token of a response is V(prompt)
            values = policy.values(prompts, [torch.tensor([eos])] * len(todo))
        for traj, v in zip(todo, values, strict=True):
            traj.extras["next_value"] = float(v[0])

    def _score_values(self, batch: Batch, ctx: Context) -> None:
        """Fill missing ``turn.values`` from the critic."""
        all_keys = batch.keys()
        missing = [key for key in all_keys if batch.turn(key).values is None]
        if not missing:
            return
        values_fn = getattr(ctx.policy, "values", None)
        if not callable(values_fn):
            raise BadInput(
                "ppo needs a critic: ctx.policy has no values() (use a policy with a value "
                "head) and the turns carry no precomputed values"
            )
        turns = [batch.turn(key) for key in missing]
        with torch.no_grad():
            values = values_fn([t.prompt_ids for t in turns], [t.response_ids for t in turns])
        for turn, v in zip(turns, values, strict=True):
            turn.values = v.detach().float()

    def _policy_steps(self, traj: Trajectory) -> tuple[Tensor, Tensor]:
        """Rewards r [T_i] and values V [T_i] on the rollout's T_i policy tokens."""
        rewards: list[Tensor] = []
        values: list[Tensor] = []
        ends: list[int] = []  # policy tokens up to and including each turn
        for turn in traj.turns:
            m = turn.mask() > 0
            if turn.values is None:
                raise ValueError("ppo: turn.values is missing (the score hook fills it)")
            r = torch.zeros(int(m.sum()), device=m.device)
            if self.cfg.kl_coef:
                if turn.logp_old is None or turn.ref_logp is None:
                    raise ValueError("ppo with kl_coef > 0 needs turn.logp_old and turn.ref_logp")
                r -= self.cfg.kl_coef * (turn.logp_old - turn.ref_logp)[m].float()
            rewards.append(r)
            values.append(turn.values[m].float())
            ends.append(r.numel() + (ends[-1] if ends else 0))
        if not ends or ends[-1] == 0:
            return torch.zeros(0), torch.zeros(0)
        r, V = torch.cat(rewards), torch.cat(values)
        # turn k's reward on its last policy token (a turn without any: the latest earlier one)
        for turn, end in zip(traj.turns, ends, strict=True):
            r[max(end - 1, 0)] += turn.reward
        r[-1] += traj.outcome
        return r, V

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """PPO's advantages: GAE over the policy tokens; also fills ``batch.returns``."""
        cfg = self.cfg
        # 1. one flat sequence of policy-token steps; each rollout ends with done set
        b_rewards, b_values, b_next_values, b_terminated, b_truncated = [], [], [], [], []
        for traj in batch.trajectories:
            r, V = self._policy_steps(traj)
            T_i = r.numel()
            if T_i == 0:
                continue
            V_next = torch.cat([V[1:], V.new_tensor([_next_value(traj)])])
            end = torch.zeros(T_i, dtype=torch.bool, device=r.device)
            end[-1] = True
            b_rewards.append(r)
            b_values.append(V)
            b_next_values.append(V_next)
            b_terminated.append(end & traj.terminated)
            b_truncated.append(end & (not traj.terminated))
        if not b_rewards:
            batch.advantages, batch.returns = {}, {}
            return
        # 2. GAE: a terminated end does not bootstrap, any other end does
        b_advantages, b_returns = gae(
            torch.cat(b_rewards),
            torch.cat(b_values),
            torch.cat(b_next_values),
            torch.cat(b_terminated),
            torch.cat(b_truncated),
            cfg.gamma,
            cfg.lam,
        )
        if cfg.whiten:
            b_advantages = whiten(b_advantages, torch.ones_like(b_advantages))
        # 3. scatter back onto each turn's policy tokens; 0 elsewhere
        batch.advantages, batch.returns = {}, {}
        pos = 0
        all_keys = batch.keys()
        for key in all_keys:
            turn = batch.turn(key)
            m = turn.mask() > 0
            n = int(m.sum())
            A = torch.zeros(m.shape, device=m.device)
            G = torch.zeros(m.shape, device=m.device)
            A[m] = b_advantages[pos : pos + n]
            G[m] = b_returns[pos : pos + n]
            batch.advantages[key], batch.returns[key] = A, G
            pos += n
        batch.metrics["ppo/returns_mean"] = float(b_returns.mean())
        batch.metrics["ppo/values_mean"] = float(torch.cat(b_values).mean())

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Tensor, dict[str, float]] | None:
        """PPO's value loss: ``vf_coef`` times the clipped value loss, or None without returns."""
        if not batch.returns:
            return None
        keys = list(batch.returns)
        turns = [batch.turn(key) for key in keys]
        new_values = ctx.need_policy().values(
            [t.prompt_ids for t in turns], [t.response_ids for t in turns], grad=True
        )
        token_loss = torch.cat(
            [
                value_loss(V, _old_values(t).to(V.dtype), batch.returns[key], self.cfg.value_clip)
                for V, t, key in zip(new_values, turns, keys, strict=True)
            ]
        )
        mask = torch.cat([t.mask() for t in turns])
        v_loss = aggregate(token_loss, mask, "token-mean")
        return self.cfg.vf_coef * v_loss, {"ppo/value_loss": float(v_loss.detach())}
