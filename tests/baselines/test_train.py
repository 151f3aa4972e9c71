"""The loop: one step moves every policy parameter; zero advantages move none; the CLI refuses
bad variants; a tiny run leaves a checkpoint that the harness evaluates."""

import copy
import csv
import json

import numpy as np
import pytest
import torch
from clirun import cli, rl_rows
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch, StepContext
from agentgym.baselines.config import TrainConfig
from agentgym.baselines.credit import compose
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.prompt import PromptFormat
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.train import oracle_demos
from agentgym.baselines.update import policy_loss

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    policy = TinyPolicy.from_preset(
        "nano", train_tokenizer(collect_env_text(SMALL, episodes=8), vocab_size=500)
    )
    pool = EnvPool(SMALL, 8)
    tasks = [(pool.envs[0].unwrapped.task_ids()[i], i) for i in range(2)]
    with torch.no_grad():
        trajs = collect(policy, pool, tasks, 4, RolloutConfig(max_new_tokens=40))
    return policy, trajs


def _policy_params(policy):
    return {n: p for n, p in policy.named_parameters() if not n.startswith("value")}


def _step(policy, trajs, fill):
    batch = Batch(trajectories=trajs)
    keys = batch.keys()  # (trajectory, turn) pairs
    batch.advantages = {k: fill(batch.turn(k).response_ids.shape) for k in keys}
    cfg = TrainConfig.from_options(weight_decay=0.0)
    before = {n: p.detach().clone() for n, p in _policy_params(policy).items()}
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3, weight_decay=0.0)
    loss, _ = policy_loss(batch, policy, None, compose("grpo", cfg), cfg)
    optimizer.zero_grad()
    loss.backward()
    for p in policy.parameters():  # parameters the loss does not reach get a zero gradient
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    return {n: not torch.equal(before[n], p) for n, p in _policy_params(policy).items()}


def test_one_step_changes_every_policy_parameter(setup):
    policy, trajs = setup
    rng = np.random.default_rng(0)
    changed = _step(policy, trajs, lambda shape: torch.tensor(rng.normal(size=shape)).float())
    assert all(changed.values()), [n for n, c in changed.items() if not c]


def test_a_step_raises_the_likelihood_of_positive_advantages_and_lowers_negative(setup):
    """The sign of the update: descent on the clipped-surrogate loss makes a rollout with
    A > 0 more likely and one with A < 0 less likely."""
    policy, trajs = setup
    policy = copy.deepcopy(policy)
    batch = Batch(trajectories=trajs[:2])
    keys = batch.keys()
    sign = {0: 1.0, 1: -1.0}
    batch.advantages = {k: torch.full(batch.turn(k).response_ids.shape, sign[k[0]]) for k in keys}

    def logp(i):
        turns = batch.trajectories[i].turns
        with torch.no_grad():
            lps = policy.logprobs([t.prompt_ids for t in turns], [t.response_ids for t in turns])
        return float(torch.cat(lps).sum())

    before = [logp(0), logp(1)]
    cfg = TrainConfig.from_options(weight_decay=0.0)
    loss, _ = policy_loss(batch, policy, None, compose("grpo", cfg), cfg)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.05)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert logp(0) > before[0] and logp(1) < before[1]


def test_zero_advantages_change_no_policy_parameter(setup):
    policy, trajs = setup
    changed = _step(policy, trajs, torch.zeros)
    assert not any(changed.values()), [n for n, c in changed.items() if c]


def test_noisy_warm_start_leaves_the_oracle_path_deterministically(setup):
    policy, _ = setup
    clean = oracle_demos(TrainConfig.from_options(sft_episodes=6), policy)
    noisy = oracle_demos(TrainConfig.from_options(sft_episodes=6, sft_noise=0.5), policy)
    on_path = {tuple(p.tolist()) for p, _ in clean}
    assert any(tuple(p.tolist()) not in on_path for p, _ in noisy)
    again = oracle_demos(TrainConfig.from_options(sft_episodes=6, sft_noise=0.5), policy)
    assert len(again) == len(noisy)
    for (p1, r1), (p2, r2) in zip(noisy, again, strict=True):
        assert torch.equal(p1, p2) and torch.equal(r1, r2)


def test_demonstrations_are_the_same_whatever_the_number_of_workers(setup, monkeypatch):
    """An episode's random actions come from its own seed: two workers playing chunks of two
    episodes in spawned processes give the demonstrations one process gives."""
    from agentgym.baselines import demos

    policy, _ = setup
    monkeypatch.setattr(demos, "CHUNK", 2)
    cfg = TrainConfig.from_options(sft_episodes=5, sft_noise=0.5, sft_workers=1)
    here = oracle_demos(cfg, policy)
    spread = oracle_demos(cfg.with_options(sft_workers=2), policy)
    assert len(spread) == len(here)
    for (p1, r1), (p2, r2) in zip(here, spread, strict=True):
        assert torch.equal(p1, p2) and torch.equal(r1, r2)


def test_a_warm_start_without_think_keeps_the_actions_and_drops_the_quotes(setup):
    policy, _ = setup
    free = "agentgym/Search-Free-Small-v0"
    tok = policy.tokenizer
    kept = oracle_demos(TrainConfig.from_options(env=free, sft_episodes=3), policy)
    dropped = oracle_demos(
        TrainConfig.from_options(env=free, sft_episodes=3, sft_think=False), policy
    )
    kept_text = [tok.decode(r[:-1].tolist()) for _, r in kept]
    dropped_text = [tok.decode(r[:-1].tolist()) for _, r in dropped]
    assert len(kept) == len(dropped)  # the env played the oracle's real actions both times
    answers = [t for t in kept_text if "<answer>" in t]
    assert answers and all(t.startswith("<think>") for t in answers)
    assert not any("<think>" in t for t in dropped_text)
    stripped = [t.split("</think>")[-1].strip() if "</think>" in t else t for t in kept_text]
    assert [t.replace(" ", "") for t in dropped_text] == [t.replace(" ", "") for t in stripped]


@pytest.mark.parametrize(
    "args, words",
    [
        (("--credit", "grpo+rloo"), "grpo and rloo"),
        (("--credit", "nope"), "unknown credit variant 'nope'"),
        (("--steps", "many"), "--steps expects int"),
        (("--colour", "red"), "unknown option --colour"),
        (("--credit-settings", "{bad"), "not valid JSON"),
        (("--sft-noise", "1.5"), "--sft-noise is a probability in [0, 1], got 1.5"),
        (("--credit-settings", '{"gigpo": {}}'), "which --credit 'grpo' lacks"),
        (("--credit-settings", '{"grpo": {"zero_stdd": 1}}'), "unknown grpo settings"),
        (("--device", "gpu0"), "use cpu or cuda"),
        (("--threads", "-1"), "--threads is a count of CPU threads"),
        (("--teachers", "a=/x,a=/y"), "--teachers names 'a' twice"),
        (("--reference", "/no/such/dir"), "not a checkpoint directory"),
    ],
)
def test_train_refuses_bad_options_with_exit_2(tmp_path, args, words):
    out = cli("train", "--out", str(tmp_path / "ckpt"), *args)
    assert out.returncode == 2, out.stderr
    assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_tiny_run_leaves_a_checkpoint_the_harness_evaluates(tmp_path):
    ckpt = tmp_path / "ckpt"
    out = cli(
        "train",
        "--out",
        str(ckpt),
        "--preset",
        "nano",
        "--sft-steps",
        "20",
        "--sft-episodes",
        "10",
        "--steps",
        "2",
        "--tasks-per-step",
        "2",
        "--group-size",
        "2",
        "--credit",
        "gigpo",
        "--eval-every",
        "1",
        "--eval-seeds",
        "2",
    )
    assert out.returncode == 0, out.stderr
    # not a terminal: plain progress lines on stderr, one per phase and one per RL step
    lines = out.stderr.splitlines()
    assert any(line.startswith("agentgym: warm start (SFT): done, 20 steps") for line in lines)
    steps = [line for line in lines if line.startswith("agentgym: RL (gigpo): ")]
    assert [s.split(": ")[2].split(",")[0] for s in steps[1:3]] == ["1/2 steps", "2/2 steps"]
    assert "success" in steps[1] and "val_success" in steps[1] and "about" in steps[1]
    assert (ckpt / "agentgym_agent.json").exists() and (ckpt / "metrics.csv").exists()
    assert (ckpt / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (ckpt / "steps").iterdir()) == ["step_00001", "step_00002"]
    assert (ckpt / "sft" / "agentgym_agent.json").exists()  # the warm start alone
    assert any(p.name.startswith("events.out.tfevents") for p in (ckpt / "tb").iterdir())
    assert "val_success" in (ckpt / "metrics.csv").read_text().splitlines()[0]
    manifest = json.loads((ckpt / "agentgym_agent.json").read_text())
    assert manifest["config"]["train"]["credit"] == "gigpo"
    # the second evaluation ran on the run's warm pool; a cold one scores the same
    from agentgym.harness.evaluate import evaluate

    env_id, seed = manifest["config"]["train"]["env"], manifest["config"]["train"]["seed"]
    step2 = str(ckpt / "steps" / "step_00002")
    cold = evaluate(step2, [env_id], seeds=2, root_seed=seed, split="val")
    last = list(csv.DictReader((ckpt / "metrics.csv").open()))[-1]
    assert float(last["val_success"]) == cold["aggregates"][env_id]["mean"]
    results = tmp_path / "r.json"
    evaluated = cli(
        "eval", "--agent", str(ckpt), "--env", SMALL, "--seeds", "3", "--out", str(results)
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"agentgym: eval {ckpt} on {SMALL} (test): done, 3 episodes" in evaluated.stderr
    doc = json.loads(results.read_text())
    assert doc["agent"]["checkpoint_sha256"] and all(e["error"] is None for e in doc["episodes"])


@pytest.mark.parametrize(
    "env_id",
    ["agentgym/ALFWorld-Small-v0", "agentgym/TextWorld-Small-v0", "agentgym/Tools-Ecommerce-v0"],
)
def test_each_family_trains_a_step_and_its_checkpoint_plays(tmp_path, env_id):
    """The trainer is not tied to the search envs: warm start, one gigpo step (state keys)
    and an evaluation of the checkpoint on a text game and on the tool-call env."""
    ckpt = tmp_path / "ckpt"
    out = cli(
        "train",
        *("--env", env_id, "--out", str(ckpt), "--preset", "nano", "--credit", "gigpo"),
        *("--sft-steps", "10", "--sft-episodes", "4", "--steps", "1", "--history", "1"),
        *("--tasks-per-step", "2", "--group-size", "2", "--eval-every", "0"),
    )
    assert out.returncode == 0, out.stderr
    rl = rl_rows(ckpt)
    assert len(rl) == 1 and float(rl[0]["tokens"]) > 0
    if "World" in env_id:  # decoding is constrained to the admissible commands
        assert float(rl[0]["invalid_rate"]) == 0.0
    results = tmp_path / "r.json"
    evaluated = cli(
        "eval", "--agent", str(ckpt), "--env", env_id, "--seeds", "2", "--out", str(results)
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert all(e["error"] is None for e in json.loads(results.read_text())["episodes"])


def test_train_passes_env_kwargs_to_every_env_it_makes(tmp_path):
    """The shop's menu form (``menu=True`` on the text id): warm start, one RL step and an
    evaluation with the same constructor argument; a malformed or split-setting one is exit 2."""
    ckpt = tmp_path / "ckpt"
    shop = "agentgym/Shop-Small-v0"
    out = cli(
        "train",
        *("--env", shop, "--env-kwargs", '{"menu": true}', "--out", str(ckpt)),
        *("--preset", "nano", "--sft-steps", "5", "--sft-episodes", "2", "--steps", "1"),
        *("--tasks-per-step", "2", "--group-size", "2", "--eval-every", "0"),
    )
    assert out.returncode == 0, out.stderr
    manifest = json.loads((ckpt / "agentgym_agent.json").read_text())
    assert manifest["config"]["train"]["env_kwargs"] == '{"menu": true}'
    results = tmp_path / "r.json"
    evaluated = cli(
        "eval", "--agent", str(ckpt), "--env", shop, "--env-kwarg", "menu=true",
        "--seeds", "2", "--out", str(results),
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    doc = json.loads(results.read_text())
    assert all(e["error"] is None for e in doc["episodes"])
    for bad in ("[1]", '{"split": "test"}', "{menu"):
        refused = cli("train", "--env", shop, "--env-kwargs", bad, "--out", str(tmp_path / "x"))
        assert refused.returncode == 2 and "--env-kwargs" in refused.stderr


def test_a_hugging_face_policy_trains_with_lora_end_to_end(tmp_path):
    from agentgym.agents import load_agent
    from agentgym.baselines.train import train
    from agentgym.harness.evaluate import evaluate

    model = write_hf_model(tmp_path / "model", collect_env_text(SMALL, episodes=8))
    cfg = TrainConfig.from_options(
        policy=str(model),
        lora_r=4,
        credit="grpo",
        sft_steps=2,
        sft_episodes=2,
        steps=2,
        tasks_per_step=2,
        group_size=2,
        lr=1e-2,
        eval_every=0,
        tensorboard=False,
    )
    ckpt = train(cfg, tmp_path / "ckpt")
    rows = (ckpt / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["sft", "rl", "rl"]
    agent = load_agent(str(ckpt))
    assert type(agent).__name__ == "PolicyAgent"
    doc = evaluate(str(ckpt), [SMALL], seeds=2, root_seed=0, split="val")
    assert len(doc["episodes"]) == 2 and all(e["error"] is None for e in doc["episodes"])
    # the adapters were trained: the checkpoint's log-probs differ from the base model's
    from agentgym.baselines.policies.hf import HFPolicy

    base, tuned = HFPolicy.from_pretrained(model), HFPolicy.load(ckpt)
    prompt = [base.encode_prompt("Question: who?")]
    response = [torch.tensor([*base.tokenizer.encode("search: x"), base.tokenizer.eos_id])]
    assert not torch.allclose(
        base.logprobs([torch.tensor(prompt[0])], response)[0],
        tuned.logprobs([torch.tensor(prompt[0])], response)[0],
    )


@pytest.mark.parametrize(
    ("layout", "history", "pin_first"),
    [("concat", 0, False), ("per-step", 2, False), ("per-step", 1, True)],
    ids=["concat", "history-2", "history-1-pinned"],
)
def test_both_layouts_train_and_evaluate_with_the_prompts_they_trained_on(
    tmp_path, layout, history, pin_first
):
    from agentgym.agents import load_agent
    from agentgym.agents.checkpoint import read_manifest
    from agentgym.baselines.train import train
    from agentgym.harness.evaluate import evaluate

    cfg = TrainConfig.from_options(
        preset="nano",
        max_len=4096,
        layout=layout,
        history=history,
        pin_first=pin_first,
        sft_steps=3,
        sft_episodes=2,
        steps=1,
        tasks_per_step=1,
        group_size=2,
        eval_every=0,
        tensorboard=False,
    )
    ckpt = train(cfg, tmp_path / "ckpt")
    trained_on = PromptFormat(layout=layout, history=history, pin_first=pin_first)
    config = read_manifest(ckpt)["config"]
    assert config["prompt"] == trained_on.to_json()  # one object, not fields strewn about
    agent = load_agent(str(ckpt))
    assert agent.prompt == trained_on
    doc = evaluate(str(ckpt), [SMALL], seeds=2, root_seed=0, split="val")
    assert all(e["error"] is None for e in doc["episodes"])


def test_a_bad_layout_is_refused_before_any_work(tmp_path):
    out = cli("train", "--out", str(tmp_path / "ckpt"), "--layout", "sideways")
    assert out.returncode == 2 and "layout" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ckpt").exists()


def test_credit_settings_reach_their_variant():
    from agentgym.baselines.train import credit_settings

    cfg = TrainConfig.from_options(credit="gigpo", credit_settings='{"gigpo": {"omega": 0.5}}')
    plan = compose(cfg.credit, credit_settings(cfg))
    assert plan.owner("advantages").cfg.omega == 0.5


class _CountingAdamW(torch.optim.AdamW):
    steps = 0

    def step(self, closure=None):
        type(self).steps += 1
        return super().step(closure)


def _advantaged(trajs, policy):
    """A batch of copies of ``trajs`` with ±1 advantages and ``logp_old`` rescored under
    ``policy`` (other tests of this module move the shared policy)."""
    from agentgym.baselines.scoring import turn_logprobs

    batch = Batch(trajectories=copy.deepcopy(list(trajs)))
    keys = batch.keys()
    with torch.no_grad():
        for key, lp in zip(keys, turn_logprobs(policy, batch, keys, grad=False), strict=True):
            batch.turn(key).logp_old = lp
    batch.advantages = {
        k: torch.full(batch.turn(k).response_ids.shape, 1.0 if k[0] % 2 else -1.0) for k in keys
    }
    return batch


def test_several_updates_per_batch_move_the_ratio_until_the_clip_binds(setup):
    """With one optimiser step per batch the ratio is exactly 1 and the clip never acts; with
    PPO epochs and mini-batches the later steps see the moved policy and get clipped."""
    from agentgym.baselines.update import update

    base, trajs = setup
    plan = compose("grpo")
    one = TrainConfig.from_options(weight_decay=0.0)
    ctx = StepContext(rng=np.random.default_rng(0))
    policy = copy.deepcopy(base)
    opt = _CountingAdamW(policy.parameters(), lr=0.05)
    _CountingAdamW.steps = 0
    single = update(_advantaged(trajs, policy), policy, None, plan, opt, one, ctx)
    assert _CountingAdamW.steps == 1
    assert single["clip_frac"] == 0.0 and abs(single["approx_kl"]) < 1e-6

    many = one.with_options(epochs=3, minibatches=2)
    policy = copy.deepcopy(base)
    opt = _CountingAdamW(policy.parameters(), lr=0.05)
    _CountingAdamW.steps = 0
    metrics = update(_advantaged(trajs, policy), policy, None, plan, opt, many, ctx)
    assert _CountingAdamW.steps == 6
    assert metrics["clip_frac"] > 0 and metrics["approx_kl"] > 1e-4
    assert metrics["tokens"] == single["tokens"]  # each rollout counted once, not per epoch


def test_the_kl_is_aggregated_like_the_surrogate(setup):
    """verl's rule: one aggregation for every loss term; the KL used to be a plain token mean
    whatever the plan's aggregation."""
    from agentgym.baselines.losses import aggregate, kl_k3
    from agentgym.baselines.scoring import turn_logprobs

    policy, trajs = setup
    ref = copy.deepcopy(policy)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # move the reference far enough that the KL varies by token
        for p in ref.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    cfg = TrainConfig.from_options(kl_coef=0.5)
    plan = compose("grpo", cfg)  # seq-mean-token-mean: rollouts of unequal length differ
    batch = _advantaged(trajs, policy)
    _, metrics = policy_loss(batch, policy, ref, plan, cfg)
    keys = list(batch.advantages)
    with torch.no_grad():
        logp = torch.cat(turn_logprobs(policy, batch, keys, grad=False))
        ref_logp = torch.cat(turn_logprobs(ref, batch, keys, grad=False))
    mask, seq_ids, _ = batch.token_index(keys)
    want = aggregate(kl_k3(logp, ref_logp), mask, plan.aggregation, seq_ids=seq_ids)
    token_mean = aggregate(kl_k3(logp, ref_logp), mask, "token-mean")
    assert metrics["kl"] == pytest.approx(float(want), rel=1e-5)
    assert abs(float(want) - float(token_mean)) > 1e-3 * float(want)


def test_ppo_pays_its_kl_penalty_and_bootstraps_truncated_rollouts(setup):
    """ppo with kl_coef > 0 used to crash (nothing filled the reference log-probs), and a
    truncated rollout bootstrapped from 0 although its docstring promised the critic."""
    from agentgym.baselines.train import rl_step

    base, _ = setup
    policy, ref = copy.deepcopy(base), copy.deepcopy(base)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    cfg = TrainConfig.from_options(
        credit="ppo", tasks_per_step=1, group_size=2, max_new_tokens=40, weight_decay=0.0
    )
    plan = compose("ppo", {"ppo": {"kl_coef": 0.1}})
    assert plan.needs_reference and not compose("ppo").needs_reference
    pool = EnvPool(SMALL, 2, max_turns=2)  # every rollout is cut off after two turns
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    metrics = rl_step(policy, ref, plan, pool, optimizer, cfg, 1, np.random.default_rng(0))
    assert np.isfinite(metrics["loss"]) and metrics["turns"] == 2.0

    tasks = [(pool.envs[0].unwrapped.task_ids()[0], 3)]
    trajs = collect(policy, pool, tasks, 2, RolloutConfig(max_new_tokens=40))
    assert all(t.truncated and not t.terminated for t in trajs)
    batch = Batch(trajectories=trajs)
    ctx = StepContext(policy=policy, ref=ref)
    plan.run("score", batch, ctx)
    eos = policy.tokenizer.eos_id
    for t in trajs:
        prompt = torch.tensor(t.extras["next_prompt"])
        want = policy.values([prompt], [torch.tensor([eos])])[0][0]
        assert t.extras["next_value"] == pytest.approx(float(want), abs=1e-5)
        assert all(turn.ref_logp is not None for turn in t.turns)


def test_a_token_budget_stops_rl_once_the_rollouts_generated_that_many(tmp_path):
    """Variants that sample differently (trees, refills) get the same budget in generated
    tokens; the steps then follow from it."""
    from agentgym.baselines.train import train

    base = TrainConfig.from_options(
        preset="nano", sft_steps=0, tasks_per_step=1, group_size=2, max_new_tokens=40,
        eval_every=0, tensorboard=False, aggregation="token-mean",
    )  # fmt: skip

    one = rl_rows(train(base.with_options(token_budget=1), tmp_path / "one"))
    assert len(one) == 1
    first = float(one[0]["generated_total"])
    assert first == float(one[0]["generated_tokens"]) > 0
    two = rl_rows(train(base.with_options(token_budget=int(first) + 1), tmp_path / "two"))
    assert len(two) == 2 and float(two[-1]["generated_total"]) >= first + 1


def test_training_runs_on_its_own_thread_count_and_gives_the_host_its_own_back(
    tmp_path, monkeypatch
):
    """The thread count orders the float sums a greedy policy turns into wins or losses, so a
    seed must train on the same count whatever the host's default (0 keeps the host's)."""
    from agentgym.baselines import train as loop

    seen = []

    def counted(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    real = loop.rl_step
    monkeypatch.setattr(loop, "rl_step", counted)
    base = TrainConfig.from_options(
        preset="nano", sft_steps=0, steps=1, tasks_per_step=1, group_size=2,
        max_new_tokens=40, eval_every=0, tensorboard=False,
    )  # fmt: skip
    host = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        loop.train(base, tmp_path / "pinned")
        assert seen == [2] and torch.get_num_threads() == 3
        loop.train(base.with_options(threads=1), tmp_path / "one")
        assert seen == [2, 1] and torch.get_num_threads() == 3
        loop.train(base.with_options(threads=0), tmp_path / "host")
        assert seen == [2, 1, 3] and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(host)
    config = json.loads((tmp_path / "pinned" / "train_config.json").read_text())
    assert config["threads"] == 2  # recorded with the run
