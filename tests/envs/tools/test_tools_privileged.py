"""The tool envs' privileged view: the gold calls as compact JSON in ``privileged_context``."""

import json
from pathlib import Path

import agentgym
from agentgym.core.info import PRIVILEGED_KEYS, info_problems
from agentgym.envs.tools.backend import TASK_TYPES
from agentgym.envs.tools.bfcl import BFCLEnv
from agentgym.envs.tools.grammar import parse_action

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"


def first_task_of_each_type(env):
    found = {}
    for tid in env.unwrapped.task_ids():
        found.setdefault(env.unwrapped.task_type_of(tid), tid)
    return found


def gold_line(context):
    line = context.split("\n")[0]
    assert line.startswith("Gold calls: ")
    return line.removeprefix("Gold calls: ")


def test_tools_context_holds_the_gold_calls_the_oracle_makes():
    env = agentgym.make("agentgym/Tools-Travel-v1", privileged=True)
    tasks = first_task_of_each_type(env)
    assert set(tasks) == set(TASK_TYPES)
    for task_type, tid in tasks.items():
        _, info = env.reset(options={"task_id": tid})
        assert not info_problems(info, privileged=True)
        context = info["privileged_context"]
        if task_type == "irrelevance":
            assert context == "Gold calls: none (no tool serves this request)."
            continue
        calls = json.loads(gold_line(context))
        assert calls == info["gold_tool_calls"] and " " not in gold_line(context)
        if task_type == "clarification":
            assert "\nHidden facts: " in context
            env.step(env.unwrapped.oracle_action())
        made = parse_action(env.unwrapped.oracle_action()).calls
        assert made[0].name == calls[0]["name"] and made[0].arguments == calls[0]["arguments"]
        assert context.endswith("Answer facts: " + info["gold_answer"])
    _, plain = agentgym.make("agentgym/Tools-Travel-v1").reset(options={"task_id": tid})
    assert not set(PRIVILEGED_KEYS) & set(plain)


def test_bfcl_context_names_the_gold_functions():
    env = BFCLEnv("parallel_multiple", data_dir=str(FIXTURES), privileged=True)
    plain = BFCLEnv("parallel_multiple", data_dir=str(FIXTURES))
    for tid in env.task_ids()[:3]:
        _, info = env.reset(options={"task_id": tid})
        calls = json.loads(gold_line(info["privileged_context"]))
        assert calls == info["gold_tool_calls"]
        names = [c.name for c in parse_action(env.oracle_action()).calls]
        assert names == [c["name"] for c in calls]
        assert all(f'"name":"{n}"' in info["privileged_context"] for n in names)
        _, bare = plain.reset(options={"task_id": tid})
        assert not set(PRIVILEGED_KEYS) & set(bare)
