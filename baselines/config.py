"""The configuration of a training run, in groups, and the tiny policy's recipes.

Every field is a command-line option of ``agentgym train`` (:mod:`agentgym.baselines.options`
turns the groups into flat flags: ``cfg.sft.steps`` is ``--sft-steps``, ``cfg.rl.lr`` is
``--lr``)::

    cfg = TrainConfig.from_options(env="agentgym/ALFWorld-Small-v0", sft_steps=100, history=2)
    cfg.sft.steps, cfg.prompt.history      # 100, 2
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgym.baselines import options
from agentgym.baselines.losses import AGGREGATIONS
from agentgym.baselines.prompt import PromptFormat


@dataclass(frozen=True)
class ModelConfig:
    """The policy: what is trained."""

    policy: str = "tiny"
    """'tiny' (a small transformer trained from scratch) or a local HF model directory."""
    init: str = ""
    """Start from this checkpoint directory (an earlier run's OUT or OUT/sft) instead of a
    fresh policy; --policy and --preset are then ignored."""
    preset: str = "small"
    """Size of the tiny policy: nano, micro, small or base."""
    max_len: int = 1024
    """Context of the tiny policy in tokens (the concat layout needs room for a whole episode)."""
    lora_r: int = 0
    """LoRA rank for a Hugging Face policy (0: train all weights)."""
    device: str = "cpu"
    """Where the policy, its reference and its teachers train and score: cpu or cuda (one
    GPU; evaluation still loads checkpoints on the CPU)."""
    threads: int = 2
    """torch's CPU threads while training (0: torch's default for this host). The thread
    count sets the order of floating-point sums, and a greedy policy turns that rounding into
    whole episodes won or lost (two threads instead of one moved the main job's RL figure by 7
    points), so it is fixed: the same seed trains the same policy whatever the host's cores.
    Two, the cores of a small machine: SFT steps 1.7x and RL steps 1.3x faster than on one."""

    def __post_init__(self) -> None:
        """Refuse a negative thread count."""
        if self.threads < 0:
            raise ValueError(
                f"--threads is a count of CPU threads (0: torch's default), got {self.threads}"
            )


SFT_MODES = {
    "plain": "agentgym.baselines.train:plain_warm_start",
    "ca": "agentgym.baselines.ca_sft:ca_warm_start",
}
"""The warm start's modes, by name -> ``"module:function"`` taking ``(cfg, policy)`` and
returning a :class:`~agentgym.baselines.train.WarmStart` (what
:func:`~agentgym.baselines.train.sft` trains on)."""


@dataclass(frozen=True)
class WarmStartConfig:
    """The warm start: SFT on the oracle's demonstrations (options --sft-*)."""

    mode: str = "plain"
    """What the warm start imitates: "plain" (every state of the teacher's episodes, labelled
    by the teacher) or "ca" (credit-assignment SFT after Orchard: noisy-expert episodes, the
    NLL on every turn of the won ones and, in the failed ones, only on the turns where a
    Monte-Carlo estimate of the win probability rises; the --sft-ca-* options)."""
    steps: int = 300
    """Optimiser steps of the SFT warm start on oracle demonstrations (0: none)."""
    episodes: int = 200
    """Oracle episodes collected for the warm start (the noisy oracle's in ca mode)."""
    noise: float = 0.0
    """plain: probability that a warm-start episode takes a random admissible action instead
    of the oracle's (the state is still labelled with the oracle's action): demonstrations
    then show how to recover from mistakes (DART, Laskey et al. 2017)."""
    think: bool = True
    """Keep the oracle's <think>…</think> blocks in the demonstrations (off: drop them, e.g.
    on Search-Free where the oracle's think quotes pages a history-less prompt never shows)."""
    lr: float = 1e-3
    """AdamW learning rate of the warm start."""
    workers: int = 2
    """Processes that play the teacher's episodes (1: this one). Each episode draws its random
    actions from its own seed, so the demonstrations do not depend on this. The workers are
    spawned, so a script that trains needs ``if __name__ == "__main__":`` (as for torch's
    DataLoader workers)."""
    teacher: str = "oracle"
    """Who labels the demonstrations: "oracle" (the env's, which reads its state) or an agent
    as module:Class that sees only what the policy sees, such as
    agentgym.envs.search.reader:ReaderAgent on the menu envs."""
    ca_epsilon: float = 0.3
    """ca: probability that the noisy expert (the env's oracle) takes a uniformly random
    admissible action instead, in the episodes and in the continuations that estimate V (where
    a state lists no admissible actions the oracle acts)."""
    ca_rollouts: int = 8
    """ca: Monte-Carlo continuations of the noisy expert per turn boundary of a failed episode;
    V(s_t) is the share that win."""
    ca_delta: float = 0.1
    """ca: a turn of a failed episode is trained on iff V(s_t+1) - V(s_t) > this (its rise)."""
    ca_rise_weight: bool = False
    """ca: weight the NLL of a kept turn of a failed episode by its rise (won episodes' turns
    weigh 1)."""

    def __post_init__(self) -> None:
        """Refuse a mode that does not exist and ca settings out of range."""
        if self.workers < 1:
            raise ValueError(f"--sft-workers must be at least 1, got {self.workers}")
        if self.mode not in SFT_MODES:
            raise ValueError(f"--sft-mode must be one of {', '.join(SFT_MODES)}, got {self.mode!r}")
        if not 0.0 <= self.ca_epsilon <= 1.0:
            raise ValueError(f"--sft-ca-epsilon is a probability in [0, 1], got {self.ca_epsilon}")
        if self.ca_rollouts < 1:
            raise ValueError(f"--sft-ca-rollouts must be at least 1, got {self.ca_rollouts}")
        if not 0.0 <= self.ca_delta < 1.0:
            raise ValueError(f"--sft-ca-delta must be in [0, 1), got {self.ca_delta}")
        if self.mode == "ca" and self.teacher != "oracle":
            raise ValueError(
                f"--sft-mode ca plays the env's oracle from restored states; --sft-teacher "
                f"{self.teacher} keeps bookkeeping a restored state would not match"
            )
        if self.mode == "ca" and self.noise > 0:
            raise ValueError(
                "--sft-noise is the plain mode's; --sft-mode ca draws its mistakes with "
                "--sft-ca-epsilon (set --sft-noise 0)"
            )


@dataclass(frozen=True)
class RLConfig:
    """The RL loop: batch shape and the clipped-surrogate update."""

    steps: int = 20
    """RL steps: one batch of rollouts each (epochs x minibatches optimiser steps on it)."""
    token_budget: int = 0
    """Run RL until the rollouts have generated this many tokens, whatever the steps (0: run
    --steps steps): a budget variants that sample differently can share fairly."""
    tasks_per_step: int = 8
    """Groups per RL step."""
    group_size: int = 8
    """Rollouts per group (G)."""
    lr: float = 1e-4
    """AdamW learning rate of RL."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    clip: float = 0.2
    """PPO clip epsilon."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the frozen reference (0: no reference model)."""
    reference: str = ""
    """The frozen reference's checkpoint directory, for the KL and the variants that read a
    reference ("": the warm start); it must use the policy's tokenizer."""
    teachers: str = ""
    """Teacher checkpoints as NAME=DIR,NAME=DIR (multi-teacher distillation); each must use
    the policy's tokenizer (train them from the same warm start)."""
    epochs: int = 1
    """Passes of PPO updates over each batch (after the first, the ratio moves off 1 and the
    clip binds)."""
    minibatches: int = 1
    """Optimiser steps per pass: the batch's rollouts split into this many mini-batches."""
    max_grad_norm: float = 1.0
    """Gradient clipping (the warm start clips the same)."""
    micro_batch_tokens: int = 8192
    """Most padded tokens (prompt + response) per forward and backward pass of the update: a
    mini-batch above it is back-propagated in pieces whose gradients add up to the same
    (bounds memory, same result; 0: the whole mini-batch in one pass)."""
    constant_norm: float = 48.0
    """Divisor of the constant-norm aggregation (Dr. GRPO)."""
    aggregation: str = ""
    """Loss aggregation for every variant of the run: token-mean, seq-mean-token-mean,
    seq-mean-token-sum, constant-norm or turn-normalized ("": each variant's own)."""

    def __post_init__(self) -> None:
        """Refuse a loop that would take no update."""
        if self.aggregation and self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"--aggregation must be one of {', '.join(AGGREGATIONS)}, got {self.aggregation!r}"
            )
        if self.epochs < 1 or self.minibatches < 1:
            raise ValueError(
                f"--epochs and --minibatches must be at least 1, got {self.epochs} and "
                f"{self.minibatches}"
            )


@dataclass(frozen=True)
class SamplingConfig:
    """Decoding: how rollouts generate actions."""

    temperature: float = 1.0
    """Sampling temperature of rollouts."""
    constrained: bool = True
    """Decode only menu actions where the env lists them."""
    max_new_tokens: int = 48
    """Most tokens per action."""


@dataclass(frozen=True)
class LogConfig:
    """Checkpoints, periodic evaluation and logs."""

    eval_every: int = 10
    """Evaluate a checkpoint on the val split every this many RL steps (0: never)."""
    eval_seeds: int = 20
    """Seeds of each periodic evaluation."""
    checkpoint_every: int = 0
    """Also keep a checkpoint under OUT/steps every this many RL steps without evaluating it
    (0: only the evaluated ones)."""
    tensorboard: bool = True
    """Also write TensorBoard scalars under OUT/tb (needs the tensorboard package)."""


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Every field of every group is a command-line option of ``agentgym train``.
    """

    env: str = "agentgym/Search-Menu-Small-v0"
    """Env id to train on (its train split)."""
    env_kwargs: str = ""
    """The env's constructor arguments as a JSON object, e.g. '{"menu": true}' (recorded in
    the checkpoint; evaluate it with the same ones: --env-kwarg menu=true)."""
    env_url: str = ""
    """Play the envs on this env service (`agentgym serve`) through agentgym/Remote-v0; the
    episodes are the local ones (empty: make them here)."""
    backend: str = "local"
    """Where the rollout envs live: local (this process) or ray (env pools in Ray actors;
    generation and the update stay here, batched)."""
    address: str = ""
    """Address of a Ray cluster for --backend ray (empty: start a local one)."""
    env_actors: int = 2
    """Ray actors holding the rollout envs (--backend ray), one CPU each."""
    credit: str = "grpo"
    """Credit variants joined by '+', e.g. 'gigpo' or 'gigpo+proas'."""
    credit_settings: str = ""
    """Settings of the named variants as JSON, e.g. '{"grpo": {"zero_std": "drop"}}' (each
    variant's Config fields; unknown names or fields are refused)."""
    seed: int = 0
    """Seed of everything."""
    model: ModelConfig = field(default_factory=ModelConfig)
    sft: WarmStartConfig = field(default_factory=WarmStartConfig, metadata={"prefix": "sft_"})
    rl: RLConfig = field(default_factory=RLConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    prompt: PromptFormat = field(default_factory=PromptFormat)
    log: LogConfig = field(default_factory=LogConfig)

    @classmethod
    def from_options(cls, **values: Any) -> TrainConfig:
        """A config from option values by their flat names (``sft_steps=20``, ``lr=3e-4``).

        Raises:
            BadInput: an unknown option, or a value a group refuses.
        """
        cfg: TrainConfig = options.build(cls, values)
        return cfg

    def with_options(self, **values: Any) -> TrainConfig:
        """A copy with the options named by their flat names changed."""
        cfg: TrainConfig = options.build(type(self), values, base=self)
        return cfg

    def to_json(self) -> dict[str, Any]:
        """The option values by flat name (as ``train_config.json`` and checkpoints keep them)."""
        return options.flat(self)


# ---------------------------------------------------------------------------------- recipes

SEARCH_MENU_SMALL = TrainConfig.from_options(
    env="agentgym/Search-Menu-Small-v1",
    credit="grpo",
    preset="micro",
    sft_steps=2000,  # the validation plateau: 1,000 steps 0.19, 2,000 0.51, 3,000 0.51
    sft_lr=3e-3,
    sft_episodes=3000,
    sft_noise=0.2,
    steps=20,
    lr=3e-4,
    tasks_per_step=4,
    group_size=8,
    eval_every=0,
)
"""The tiny policy's recipe on Search-Menu-Small-v1: ``agentgym quickstart --env
agentgym/Search-Menu-Small-v1`` and ``agentgym bench learning``'s default env (which varies only
the step counts). No RL run from its plateaued warm start has beaten it yet: the errors left
are comparing two years and counting hops, which SFT labels at every state."""

SEARCH_MENU_SMALL_V0 = SEARCH_MENU_SMALL.with_options(
    env="agentgym/Search-Menu-Small-v0", sft_steps=1000, sft_episodes=1000
)
"""The recipe as it was on v0's 300 questions, whose 210 train questions the policy memorised:
teacher-forced, it copies the question's name into its search on every train state and on 44%
of test states (test success 0.29)."""

SEARCH_FREE_SMALL = SEARCH_MENU_SMALL_V0.with_options(
    env="agentgym/Search-Free-Small-v0",
    sft_noise=0.0,  # free text lists no admissible actions to stray to
    sft_think=False,  # the oracle's think quotes pages a history-less prompt never shows
)
"""The same recipe on Search-Free-Small (free-text queries and answers, nothing constrained):
``agentgym bench learning --env agentgym/Search-Free-Small-v0``."""

ALFWORLD_SMALL = SEARCH_MENU_SMALL.with_options(
    env="agentgym/ALFWorld-Small-v0",
    sft_steps=2000,  # the validation plateau: 1,000 steps 0.28, 2,000 0.39, 3,000 0.42 (±0.05)
    sft_episodes=2000,
    token_budget=400_000,  # about 100 steps: at 80,000 RL had not moved greedy success yet
    history=2,  # what the last receptacles held: the observation alone does not say
    pin_first=True,  # the task is stated in the intro only
)
"""The tiny policy's recipe on ALFWorld-Small (constrained to the admissible commands, the last
two turns and the intro in every prompt), ``agentgym quickstart``'s default. The oracle walks
straight to the object it knows the place of; a policy cannot know it, so imitation leaves a
gap that only exploring closes, and RL has something to learn here: ``agentgym bench learning
--env agentgym/ALFWorld-Small-v0``. One optimiser step per batch: four (``--rl-option epochs=2
--rl-option minibatches=2``) gave +5.3 points on val and +9.0 on test over three seeds, with
one seed losing on both (README)."""

ALFWORLD_SMALL_MEMORY = ALFWORLD_SMALL.with_options(
    env="agentgym/ALFWorld-Small-v1",
    history=0,  # the memory line says what the window of turns said, and more
)
"""ALFWorld-Small's recipe on its ``-v1`` id, whose observations end with the memory line
(receptacles seen and what they held, those unseen, what the agent holds): the intro and the
current observation, so the policy can tell which receptacles it has searched, in shorter
prompts than the two-turn window of ``-v0``'s recipe. Measured (README): warm start 0.360,
gigpo 0.407, +4.7 points [−1.7, +11.0] over three seeds: the memory does not raise RL's gain,
because the warm start's failures are mostly not searches (it carries the wrong object, or to
the wrong receptacle, and loops taking and putting it back). The explorer's demonstrations
instead of the oracle's (``bench learning --sft-teacher ...:ExplorerAgent``) make a weaker,
more spread warm start and a larger mean gain, +8.3 on val and +11.3 on test, with no seed's
gain robust and the RL policies no better than these."""

KEY_DOOR = TrainConfig.from_options(
    env="agentgym/Credit-KeyDoor-v0",
    credit="grpo",
    preset="nano",
    sft_steps=0,  # RL from scratch: an oracle warm start would already match key and door
    lr=1e-3,
    tasks_per_step=8,
    group_size=8,
    token_budget=800_000,  # about 380 steps of 2,100 tokens: grpo takes off near step 350
    eval_every=0,
)
"""The tiny policy's recipe on Credit-KeyDoor (horizon 6): RL from a random nano policy, whose
constrained decoding already keeps every action valid, so that what is learnt is the credit:
that the key taken on turn 0 opened the door eight turns later. Learning is measured at a
budget where grpo is mid-way (``agentgym bench learning --env agentgym/Credit-KeyDoor-v0``)."""

KEY_DOOR_LONG = KEY_DOOR.with_options(
    env="agentgym/Credit-KeyDoor-Long-v0",
    token_budget=2_000_000,  # about 300 steps of 6,800 tokens (26 turns an episode)
)
"""Credit-KeyDoor at horizon 24: the same recipe, the key three times further from the door."""

TOOLS_MIXED = SEARCH_MENU_SMALL.with_options(
    env="agentgym/Tools-Mixed-v1",
    env_kwargs='{"schemas": false}',  # the schemas alone (~1,800 tokens) overflow the context
    sft_steps=500,  # a step is ~3x search's (longer prompts); NLL still falling at 500
    sft_noise=0.0,  # free-text calls: no admissible actions to stray to
    history=1,  # the last call and its results; the request opens every observation
    max_new_tokens=128,  # the oracle's longest action (three parallel calls) is ~115 tokens
)
"""The tiny policy's recipe on the three tool domains together, where ``roadmopd`` distils one
student from a teacher per domain (``agentgym bench learning --env agentgym/Tools-Mixed-v1
--variants grpo,roadmopd`` trains the teachers: :data:`DOMAIN_ENVS`). Its first observation
names the tools instead of listing their schemas, so that the request fits a policy of 1,024
tokens of context, which must learn the arguments from its demonstrations. An observation is
~200 tokens (~650 at most).
Measured (README): its 500-step warm start solves only the tasks whose right move is no call
(test success 0.13), and grpo and roadmopd learn no more than to abstain on those (0.14):
the recipe runs the comparison end to end, but only a model that can copy ids and values into
a call (``--policy DIR``) can show what the teachers add."""

RECIPES = {
    cfg.env: cfg
    for cfg in (
        SEARCH_MENU_SMALL,
        SEARCH_MENU_SMALL_V0,
        SEARCH_FREE_SMALL,
        ALFWORLD_SMALL,
        ALFWORLD_SMALL_MEMORY,
        KEY_DOOR,
        KEY_DOOR_LONG,
        TOOLS_MIXED,
    )
}
"""The tiny policy's recipe per env id."""

DOMAIN_ENVS = {
    TOOLS_MIXED.env: {
        "ecommerce": "agentgym/Tools-Ecommerce-v1",
        "accounts": "agentgym/Tools-Accounts-v1",
        "travel": "agentgym/Tools-Travel-v1",
    }
}
"""Per env whose tasks come from several domains, the env of each domain: where ``bench
learning`` trains a domain's teacher (the recipe's own variant, from the seed's warm start, at
the same token budget) for the variants that distil from teachers."""

QUICKSTART = ALFWORLD_SMALL.with_options(credit="gigpo")
"""The recipe ``agentgym quickstart`` trains and scores by default: ALFWorld-Small's with gigpo,
the variant whose gain over the warm start excluded zero in README's table there (``agentgym
bench learning --env agentgym/ALFWorld-Small-v0 --variants grpo,gigpo``: three seeds, 400,000
tokens each, 100 test seeds: gigpo − sft +7.0 points [+1.3, +13.3], grpo − sft +4.0 [−1.7,
+9.3]); re-measured since, its gain is a few points that no seed's interval keeps above zero
(README), checked at a small budget by ``agentgym bench learning --quick``. Its one run in
``agentgym quickstart`` printed +11.0 [+6.0, +16.0] (two training threads, the default, in 20
minutes on 2 cores): a draw from that spread. The env's recipe in :data:`RECIPES` keeps
grpo, the variant every other is compared to."""
