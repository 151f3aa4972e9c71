"""TrainConfig's groups behind flat command-line options: the flags users know stay the same."""

import pytest

from agentgym.baselines.config import SEARCH_MENU_SMALL, TrainConfig
from agentgym.baselines.options import options, options_help, parse_options
from agentgym.core.errors import BadInput

# every flag of `agentgym train` before TrainConfig was split into groups
FLAT_FLAGS = {
    "env", "credit", "credit_settings", "policy", "init", "preset", "max_len", "lora_r",
    "steps", "sft_steps", "sft_episodes", "sft_noise", "sft_think", "tasks_per_step",
    "group_size", "lr", "sft_lr", "weight_decay", "clip", "kl_coef", "max_grad_norm",
    "temperature", "constrained", "max_new_tokens", "layout", "history", "pin_first",
    "constant_norm", "eval_every", "eval_seeds", "checkpoint_every", "seed", "tensorboard",
}  # fmt: skip


def test_the_groups_keep_every_flag_name():
    names = {o.name for o in options(TrainConfig)}
    assert names >= FLAT_FLAGS
    # new ones; the privileged view is no training option
    assert names - FLAT_FLAGS == {
        "context", "epochs", "minibatches", "token_budget", "aggregation", "sft_teacher",
        "micro_batch_tokens", "env_kwargs", "reference", "teachers", "device", "sft_mode",
        "sft_ca_epsilon", "sft_ca_rollouts", "sft_ca_delta", "sft_ca_rise_weight",
        "env_url", "backend", "address", "env_actors", "threads", "sft_workers",
    }  # fmt: skip


def test_flags_land_in_their_groups():
    args = "--sft-steps 5 --no-constrained --history 2 --lr 0.01 --context none --pin-first"
    cfg = parse_options(TrainConfig, [*args.split(), "--seed", "3"])
    assert (cfg.sft.steps, cfg.rl.lr, cfg.seed) == (5, 0.01, 3)
    assert cfg.sampling.constrained is False
    assert (cfg.prompt.history, cfg.prompt.pin_first, cfg.prompt.context) == (2, True, None)
    assert cfg.rl.steps == TrainConfig().rl.steps  # --sft-steps is not --steps


def test_options_round_trip_by_their_flat_names():
    cfg = SEARCH_MENU_SMALL.with_options(steps=7, history=1)
    assert cfg.rl.steps == 7 and cfg.sft.steps == SEARCH_MENU_SMALL.sft.steps
    assert TrainConfig.from_options(**cfg.to_json()) == cfg
    assert cfg.to_json()["sft_noise"] == 0.2 and "rl" not in cfg.to_json()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stepz", "3"], "unknown option --stepz"),
        (["--steps", "three"], "--steps expects int"),
        (["--sft-think", "maybe"], "--sft-think expects true or false"),
        (["--layout", "sideways"], "layout must be one of"),
        (["--history"], "--history needs a value"),
        (["--aggregation", "mean"], "--aggregation must be one of"),
    ],
)
def test_bad_options_are_refused_with_one_clear_reason(args, message):
    with pytest.raises(BadInput, match=message):
        parse_options(TrainConfig, args)


def test_help_lists_each_group_under_its_heading():
    text = options_help(TrainConfig)
    warm = text.index("The warm start")
    assert text.index("--sft-steps") > warm > text.index("--seed")
    assert "--privileged" not in text
