"""GBC: blame follows the gradients to the call that broke a run, and the pipeline records it."""

from __future__ import annotations

import json

import gymnasium as gym
import jsonschema
import pytest
import torch

from agentgym.baselines.gbc.attribution import REDUCERS, Block, Call, connect, propagate, top
from agentgym.baselines.gbc.pipeline import PipelineAgent, PipelineSettings
from agentgym.baselines.gbc.script import Script, carry_out, fault_message, plan_of, tools_in
from agentgym.baselines.policies.agent import save_policy_checkpoint
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.core.errors import BadInput
from agentgym.harness.episode import run_episode
from agentgym.harness.results import results_schema
from tests.clirun import cli

TOOLS = "agentgym/Tools-Ecommerce-v1"
WORDS = "you are a b answer with the colour and number you read always say red blue three seven"


class _Words:
    """A word-level tokenizer over :data:`WORDS` (eos 0)."""

    eos_id, pad_id = 0, 0

    def __init__(self) -> None:
        self.vocab = ["<eos>", *dict.fromkeys(WORDS.split())]
        self.vocab_size = len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.vocab.index(w) for w in text.split()]

    def decode(self, ids) -> str:
        return " ".join(self.vocab[i] for i in ids if i)


class CopyScorer:
    """A hand-built one-block model that copies: ``p(y) ∝ Σ_t exp(β e_t · E_y)`` over the
    prompt's input states ``e_t`` (block 0's input, where the hook sits). Its output depends on
    exactly the prompt tokens it copies, so the gradients' answer is known."""

    num_blocks = 1

    def __init__(self) -> None:
        self.tokenizer = _Words()
        torch.manual_seed(0)
        table = torch.randn(self.tokenizer.vocab_size, 16)
        self.table = table / table.norm(dim=-1, keepdim=True)
        self.hook = None

    def set_block_hook(self, hook) -> None:
        self.hook = hook

    def parameters(self):
        return iter(())

    def encode_prompt(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def logprobs(self, prompts, responses, *, grad=False, **_):
        out = []
        for prompt, response in zip(prompts, responses, strict=True):
            x = self.table[prompt][None]
            pos = torch.arange(len(prompt))[None]
            if self.hook is not None:
                x = self.hook(0, x, pos)
            scores = torch.logsumexp(6.0 * x[0] @ self.table.T, dim=0)  # [V]
            out.append(torch.log_softmax(scores, dim=-1)[response])
        return out


def _call(scorer, role, text_role, blocks, response, source_of):
    tok = scorer.tokenizer
    prompt = tok.encode(text_role)
    spans = [Block("role", None, 0, len(prompt), own=True)]
    for name, text in blocks:
        ids = tok.encode(text)
        spans.append(Block(name, source_of.get(name), len(prompt), len(prompt) + len(ids)))
        prompt += ids
    return Call(role, 0, prompt, tok.encode(response), response, spans)


@pytest.mark.parametrize(
    ("a_role", "a_says", "b_role", "b_says", "faulty"),
    [  # the task asks for "red three"
        ("you are a always say blue seven", "blue seven", "you are b", "blue seven", "a"),
        ("you are a answer with the colour", "red three", "you are b always say blue seven",
         "blue seven", "b"),
    ],
)  # fmt: skip
def test_blame_lands_on_the_agent_that_injected_the_fault(a_role, a_says, b_role, b_says, faulty):
    """A reads the task and writes a message; B reads A's message and answers. The wrong words
    come from A's prompt in the first case (B copies them) and from B's in the second."""
    scorer = CopyScorer()
    a = _call(scorer, "a", a_role, [("task", "red three")], a_says, {})
    b = _call(scorer, "b", b_role, [("msg:0", a_says)], b_says, {"msg:0": 0})
    for call in (a, b):
        connect(scorer, call, "mean_l1")
        assert sum(call.weights.values()) == pytest.approx(1.0)
    own, task = propagate([a, b], failure=1.0)
    assert sum(own) + task == pytest.approx(1.0)
    assert [a, b][top(own)].role == faulty, (own, task, a.weights, b.weights)


def test_propagation_follows_the_graph_and_conserves_the_failure():
    calls = [
        Call("p", 0, [], [], "", [Block("role", None, 0, 1, own=True), Block("t", None, 1, 2)]),
        Call("c", 0, [], [], "", [Block("role", None, 0, 1, own=True), Block("plan", 0, 1, 2)]),
    ]
    calls[0].weights = {"role": 0.25, "t": 0.75}
    calls[1].weights = {"role": 0.4, "plan": 0.6}
    own, task = propagate(calls, failure=0.5)
    assert own == pytest.approx([0.5 * 0.6 * 0.25, 0.5 * 0.4])
    assert task == pytest.approx(0.5 * 0.6 * 0.75)


def test_scripted_roles_carry_a_fault_downstream():
    clean = '<tool_call>{"name": "get_order", "arguments": {"order_id": "o23"}}</tool_call>'
    assert plan_of(clean) == "call get_order"
    assert carry_out("call get_order", clean) == clean
    script = Script((clean, "<summary>placed; 520.87.</summary>"), ("520.87",), ("get_order", "x"))
    wrong_plan = fault_message("planner", "call get_order", script)
    assert wrong_plan == "call x" and '"name": "x"' in carry_out(wrong_plan, clean)
    assert '"o23x"' in fault_message("caller", clean, script)
    summary = script.message("summariser", 1, "reply to the user", "result: placed")
    assert summary == "<summary>placed; unknown.</summary>"  # 520.87 was never seen
    assert script.message("summariser", 1, "reply to the user", "total 520.87") == script.actions[1]


@pytest.mark.parametrize("schemas", [False, True])
def test_the_scripted_planner_reads_the_tools_off_the_first_observation(schemas):
    observation, _ = gym.make(TOOLS, schemas=schemas).reset(seed=0)
    tools = tools_in(observation)
    assert "get_order" in tools and "place_order" in tools and len(set(tools)) == len(tools)


@pytest.fixture(scope="module")
def tools_policy() -> TinyPolicy:
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(TOOLS, episodes=10), 800)
    return TinyPolicy.from_preset("nano", tokenizer, max_len=1024)


def test_the_oracle_pipeline_wins_clean_and_blames_a_failed_run(tools_policy):
    env = gym.make(TOOLS, schemas=False)
    clean = PipelineAgent(tools_policy, PipelineSettings(driver="oracle"))
    record = run_episode(env, clean, env_id=TOOLS, run=0, episode=0, seed=6)
    assert record["success"] and "blame" not in record
    assert [c.role for c in clean.calls] == ["planner", "caller", "planner", "summariser"]
    faulty = PipelineAgent(tools_policy, PipelineSettings(driver="oracle", fault="planner@0"))
    transcript: list = []
    record = run_episode(env, faulty, env_id=TOOLS, run=0, episode=0, seed=6,
                         transcript=transcript)  # fmt: skip
    assert not record["success"]
    blame = record["blame"]
    assert [(b["agent"], b["step"]) for b in blame] == [
        ("planner", 0), ("caller", 0), ("planner", 1), ("summariser", 1), ("task", 0)
    ]  # fmt: skip
    assert sum(b["blame"] for b in blame) == pytest.approx(1.0, abs=1e-5)
    assert record["compute"] == {"calls": 4, "generations": 0, "forward": 4, "backward": 4}
    healed = PipelineSettings(driver="oracle", fault="planner@0", heal="planner@0")
    again = run_episode(env, PipelineAgent(tools_policy, healed), env_id=TOOLS, run=0,
                        episode=0, seed=6)  # fmt: skip
    assert again["success"]


@pytest.fixture(scope="module")
def tools_hf(tmp_path_factory):
    from agentgym.baselines.policies.hf import HFPolicy
    from tests.hf_model import write_hf_model

    out = tmp_path_factory.mktemp("hf")
    write_hf_model(out, collect_env_text(TOOLS, episodes=10))
    return HFPolicy.from_pretrained(out, value_head=False)


@pytest.mark.parametrize("kind", ["tools_policy", "tools_hf"])
def test_eval_plays_the_pipeline_and_keeps_blame_in_results_and_transcripts(
    kind, request, tmp_path
):
    ckpt = save_policy_checkpoint(request.getfixturevalue(kind), tmp_path / "ckpt")
    out = tmp_path / "r.json"
    result = cli(
        *("eval", "--agent", f"gbc:{ckpt}", "--env", TOOLS, "--env-kwarg", "schemas=false"),
        *("--seeds", "6", "--out", str(out), "--transcripts"),
        *("--agent-option", "driver=oracle", "--agent-option", "fault=planner@0"),
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, results_schema())
    assert doc["agent"]["options"] == {"driver": "oracle", "fault": "planner@0"}
    failed = [e for e in doc["episodes"] if not e["success"]]
    assert failed  # a wrong first plan breaks every episode that starts with a tool call
    assert all(e["blame"] and e["compute"]["backward"] == len(e["blame"]) - 1 for e in failed)
    lines = [json.loads(line) for line in (tmp_path / "r.json.transcripts.jsonl").open()]
    assert sum("blame" in line for line in lines) == len(failed)
    assert "blame of" in result.stdout and "summariser" in result.stdout  # the report's line


def test_the_policy_driver_generates_every_message(tools_policy):
    env = gym.make(TOOLS, schemas=False, max_turns=3)
    agent = PipelineAgent(tools_policy, PipelineSettings(plan_tokens=4, max_new_tokens=8))
    record = run_episode(env, agent, env_id=TOOLS, run=0, episode=0, seed=1)
    assert record["error"] is None
    assert record["compute"]["generations"] == record["compute"]["calls"] == 2 * record["steps"]
    assert agent.calls[-1].role == "summariser"  # the env's last turn is the summariser's


@pytest.mark.parametrize(
    ("option", "message"),
    [("fault=boss@1", "gbc fault and heal are ROLE@STEP"), ("nonsense=1", "gbc has no option")],
)
def test_bad_gbc_options_exit_2_with_one_line(tools_policy, tmp_path, option, message):
    ckpt = save_policy_checkpoint(tools_policy, tmp_path / "ckpt")
    result = cli(
        *("eval", "--agent", f"gbc:{ckpt}", "--env", TOOLS, "--seeds", "1"),
        *("--agent-option", option, "--out", str(tmp_path / "r.json")),
    )
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- the gbc credit variant


def _rollout(scorer, turns):
    """A rollout whose turn k reads ``context_k`` then the earlier responses, and answers."""
    from agentgym.baselines.credit import Trajectory, Turn

    tok = scorer.tokenizer
    out, before = [], []
    for context, response in turns:
        prompt = [*tok.encode(context), *before]
        ids = tok.encode(response)
        out.append(Turn(torch.tensor(prompt), torch.tensor(ids)))
        before += ids
    return Trajectory("t", "g", 0, out, outcome=0.0, terminated=True)


@pytest.mark.parametrize(
    ("turns", "heavier"),
    [
        ([("you are a", "blue seven"), ("you are b", "blue seven")], 0),  # turn 1 copies 0
        ([("you are a", "red three"), ("always say blue seven", "blue seven")], 1),
    ],
)
def test_gbc_weighs_the_turn_the_outcome_rests_on(turns, heavier):
    from agentgym.baselines.credit import Batch, StepContext, get

    scorer = CopyScorer()
    batch = Batch(trajectories=[_rollout(scorer, turns)])
    batch.advantages = {(0, k): torch.full((2,), -1.0) for k in range(2)}
    get("gbc")(None).shape(batch, StepContext(policy=scorer))
    w = [float(batch.advantages[(0, k)][0]) * -1 for k in range(2)]
    assert sum(w) / 2 == pytest.approx(1.0)
    assert w[heavier] > 1.0 > w[1 - heavier]
    assert batch.metrics["gbc/passes"] == 2.0


def test_gbc_refuses_a_prompt_without_earlier_turns_and_a_policy_without_hooks():
    from agentgym.baselines.credit import Batch, StepContext, get
    from agentgym.baselines.prompt import PromptFormat
    from agentgym.baselines.rollout import RolloutConfig

    scorer = CopyScorer()
    batch = Batch(trajectories=[_rollout(scorer, [("you are a", "red")])])
    batch.advantages = {(0, 0): torch.ones(1)}
    alone = RolloutConfig(prompt=PromptFormat(history=0))
    with pytest.raises(BadInput, match="earlier turns"):
        get("gbc")(None).shape(batch, StepContext(policy=scorer, rollout=alone))
    with pytest.raises(BadInput, match="block hooks"):
        get("gbc")(None).shape(batch, StepContext(policy=object()))


def test_train_runs_grpo_plus_gbc(tmp_path):
    from tests.clirun import TINY_RUN, rl_rows

    out = tmp_path / "run"
    r = cli("train", *TINY_RUN, "--credit", "grpo+gbc", "--history", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    (row,) = rl_rows(out)
    assert float(row["gbc/passes"]) > 0


def test_bench_attribution_scores_every_method_on_failed_faulted_episodes():
    from rich.console import Console

    from agentgym.baselines.bench import attribution

    doc = attribution.run(Console(quiet=True), quick=True, tasks=6)
    rows = {row["method"]: row for row in doc["rows"]}
    assert set(rows) == {*(f"gbc-{r}" for r in REDUCERS), "uniform", "leave-one-out"}
    failed = rows["uniform"]["all_n"]
    assert failed + sum(doc["skipped"].values()) == 6 and failed > 0
    assert rows["leave-one-out"]["all_step"] == 1.0  # re-running the faulted call fixes it
    assert (
        rows["leave-one-out"]["reruns_per_episode"] == rows["gbc-mean_l1"]["backward_per_episode"]
    )
    assert 0.0 <= rows["gbc-mean_l1"]["all_step"] <= 1.0
