"""Every example command in README.md's bash blocks and in the CLI's help texts works.

Which text is an example (the convention for whoever writes the README or a help text):

- README.md: every command of a fenced ```bash block, lines joined at a trailing backslash,
  split at ``&&``, ``# comments`` dropped. Set-up commands (:data:`SETUP`: apt-get, sudo, pip,
  python, python3, ``.``) are skipped by rule; every other command must start with ``agentgym``.
- Help texts: each command's help (its docstring: examples go in an ``Examples:`` section, one
  per paragraph), each option's help, and all that ``agentgym train --help`` prints. A line
  that starts with ``agentgym `` is an example, and so is a backticked ``agentgym …`` span.
  Quoted values after "e.g." in a train option's help are examples of that option's value.
  Every ``agentgym/<Name>-v<N>`` a help text names must be a registered id.

Each example is parsed by the CLI's own parser (typer's, or ``TrainConfig``'s for ``train``)
without running it, then its values are checked: env ids are registered and take the
``--env-kwarg`` names given; credit variants (``--credit a+b``, ``--credit-settings``,
``bench --variants``) are registered, compose, and the env has what they need; ``--only``
names real checks; a ``module:Class`` agent imports; a results file or checkpoint an example
reads was written by an earlier example of the same text, and no two examples of one text write
the same path. The cheap examples (:data:`RUN`, and any ``--help``) really run.
"""

import importlib
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.exceptions import TyperException

from agentgym.baselines import cli as train_cli
from agentgym.baselines.config import TrainConfig
from agentgym.baselines.credit import compose, get
from agentgym.baselines.options import options
from agentgym.baselines.train import plan_settings
from agentgym.bench import PARTS
from agentgym.checker import CHECKS
from agentgym.cli import app, main, parse_env_kwargs
from agentgym.core.errors import BadInput
from agentgym.registry import check_kwargs, env_info, make

README = Path(__file__).resolve().parents[1] / "README.md"
SETUP = ("apt-get", "sudo", "pip", "python", "python3", ".")
"""Set-up commands of the README's blocks, which are not agentgym examples."""
RUN = {("envs",), ("leaderboard",)}
"""Examples cheap enough to run for real (besides any ``--help``); the rest are parsed."""
BUILTIN_AGENTS = ("random", "oracle")
READS = ("results", "a", "b")
"""Parameters naming a file that an earlier example wrote (results files)."""
WRITES = ("out_path", "json_out", "plot")
"""Parameters naming a file an example writes."""


# ---------------------------------------------------------------------- extraction
def readme_examples(text: str) -> Iterator[list[str]]:
    """The argv (after ``agentgym``) of every example in the bash blocks of a README text."""
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            tokens = shlex.split(line, comments=True)
            while tokens:
                command = tokens[: tokens.index("&&")] if "&&" in tokens else tokens
                tokens = tokens[len(command) + 1 :]
                if command[0] in SETUP:
                    continue
                assert command[0] == "agentgym", f"not an agentgym command: {shlex.join(command)}"
                yield command[1:]


def help_texts() -> dict[str, str]:
    """Every help text of the CLI by the command whose ``--help`` shows it."""
    texts: dict[str, str] = {}

    def walk(cmd: Any, path: list[str]) -> None:
        parts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        texts[shlex.join(["agentgym", *path, "--help"])] = "\n".join(parts)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    texts["agentgym train --help"] += "\n" + train_cli.train_help()
    return texts


def help_examples(text: str) -> list[list[str]]:
    """The argv (after ``agentgym``) of the examples in one help text."""
    found = [line.strip() for line in text.splitlines() if line.strip().startswith("agentgym ")]
    found += re.findall(r"`(agentgym [^`]+)`", text)
    return [shlex.split(example)[1:] for example in found]


def value_examples(doc: str) -> list[str]:
    """The quoted values after "e.g." in an option's help: ``e.g. 'a' or 'b+c'``."""
    m = re.search(r"e\.g\. ('[^']*'(?:(?:, | or )'[^']*')*)", doc)
    return re.findall(r"'([^']*)'", m.group(1)) if m else []


# ---------------------------------------------------------------------- checks
def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """The command an argv names and its parameters, by typer's parser (nothing runs)."""
    cmd, ctx, args, name = typer.main.get_command(app), None, list(argv), "agentgym"
    while hasattr(cmd, "commands") and args and args[0] in cmd.commands:
        ctx = cmd.make_context(name, [], parent=ctx, resilient_parsing=True)
        name, cmd, args = args[0], cmd.commands[args[0]], args[1:]
    sub = cmd.make_context(name, args, parent=ctx)
    leftover = [*sub.args, *getattr(sub, "_protected_args", [])]
    if leftover:
        raise BadInput(f"{name} does not take the arguments {leftover}")
    return name, dict(sub.params)


def check_env_and_credit(env_id: str, credit: str, settings: dict[str, Any]) -> None:
    """The id is registered, the credit variants compose, and the env has what they need."""
    env_info(env_id)
    plan = compose(credit, settings)
    env = make(env_id)
    try:
        plan.check(env)
    finally:
        env.close()


def check_train(args: list[str], written: list[str]) -> None:
    """Parse ``agentgym train`` arguments as the trainer does and check what they name."""
    cfg, out = train_cli.parse_train_args(args)
    check_env_and_credit(cfg.env, cfg.credit, plan_settings(cfg))
    if cfg.model.init:
        reads(cfg.model.init, written)
    writes(str(out), written)


def check_agent(agent: str, written: list[str]) -> None:
    """A built-in agent, an OpenAI-compatible server, a named agent's checkpoint, an
    importable class or a checkpoint."""
    from agentgym.agents import NAMED

    if agent in BUILTIN_AGENTS or agent.startswith("openai:"):
        return
    named, _, arg = agent.partition(":")
    if named in NAMED:
        reads(arg, written)
        return
    if ":" in agent:
        module, _, name = agent.partition(":")
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise BadInput(f"cannot load the agent {agent}: {e}") from None
        return
    reads(agent, written)


def reads(path: str, written: list[str]) -> None:
    """Refuse a path that no earlier example wrote."""
    if str(Path(path)) not in written:
        raise BadInput(f"reads {path}, which no earlier example writes")


def writes(path: str, written: list[str]) -> None:
    """Record a path an example writes; refuse one that an earlier example writes too."""
    if str(Path(path)) in written:
        raise BadInput(f"writes {path}, which an earlier example writes too")
    written.append(str(Path(path)))


def check_values(params: dict[str, Any], written: list[str]) -> None:
    """Check what a parsed command's parameters name (see the module docstring)."""
    env = params.get("env")
    ids = [*(env if isinstance(env, (list, tuple)) else [env]), params.get("env_id")]
    ids = [i for i in ids if i]
    kwargs = parse_env_kwargs(list(params.get("env_kwarg") or []))
    for env_id in ids:
        env_info(env_id)
        check_kwargs(env_id, kwargs)
    unknown_checks = sorted(set(params.get("only") or []) - set(CHECKS))
    if unknown_checks:
        raise BadInput(f"unknown checks {unknown_checks}")
    if params.get("part") is not None and params["part"] not in PARTS:
        raise BadInput(f"unknown bench part {params['part']!r}")
    for variant in (params.get("variants") or "").split(","):
        if variant:
            get(variant.strip())
    if params.get("agent"):
        check_agent(params["agent"], written)
    for name in READS:
        value = params.get(name)
        for path in value if isinstance(value, (list, tuple)) else [value]:
            if path is not None:
                reads(str(path), written)
    for name in WRITES:
        if params.get(name) is not None:
            writes(str(params[name]), written)


def check_example(argv: list[str], written: list[str]) -> None:
    """Parse one example (argv after ``agentgym``) and check it; run it if it is cheap."""
    example = shlex.join(["agentgym", *argv])
    try:
        if argv[-1:] == ["--help"] or tuple(argv) in RUN:
            with pytest.raises(SystemExit) as done:
                main(list(argv))
            assert done.value.code == 0, f"{example} exited with {done.value.code}"
        elif argv[:1] == ["train"]:
            check_train(argv[1:], written)
        else:
            check_values(parse(argv)[1], written)
    except (TyperException, BadInput) as e:
        message = e.format_message() if isinstance(e, TyperException) else str(e)
        pytest.fail(f"{example}: {message}")


# ---------------------------------------------------------------------- the tests
def test_readme_examples_parse_and_name_what_exists():
    examples = list(readme_examples(README.read_text()))
    assert ["quickstart"] in examples  # the end of the install line
    assert any(argv[:1] == ["train"] for argv in examples)
    written: list[str] = []
    for argv in examples:
        check_example(argv, written)


@pytest.mark.parametrize("where", sorted(help_texts()))
def test_help_text_examples_parse_and_name_what_exists(where):
    written: list[str] = []
    for argv in help_examples(help_texts()[where]):
        check_example(argv, written)


def test_the_help_texts_hold_the_examples_written_for_them():
    texts = help_texts()
    train = help_examples(texts["agentgym train --help"])
    assert ["train", "--help"] in train
    for example in train_cli.TRAIN_EXAMPLES:
        assert shlex.split(example)[1:] in train
    assert len(help_examples(texts["agentgym eval --help"])) == 2
    assert len(help_examples(texts["agentgym check --help"])) == 2


OPTION_VALUES = [(o.flag, value) for o in options(TrainConfig) for value in value_examples(o.doc)]


def test_train_options_give_value_examples():
    assert {"--credit", "--credit-settings"} <= {flag for flag, _ in OPTION_VALUES}


@pytest.mark.parametrize(("flag", "value"), OPTION_VALUES)
def test_value_examples_in_train_help_are_accepted(flag, value):
    check_example(["train", flag, value, "--out", "runs/x"], [])


def test_env_ids_named_in_help_texts_are_registered():
    named = set(re.findall(r"agentgym/[\w.-]+-v\d+", "\n".join(help_texts().values())))
    assert "agentgym/Search-Menu-Small-v1" in named
    for env_id in sorted(named):
        env_info(env_id)


MENU = "agentgym/Search-Menu-Small-v1"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"agentgym eval --agnt oracle --env {MENU} --seeds 5 --out r.json", "--agnt"),
        (f"agentgym eval --agent oracle --env {MENU} --out r.json", "--seeds"),
        ("agentgym eval --agent oracle --env agentgym/Nope-v0 --seeds 5 --out r.json", "Nope"),
        (f"agentgym check {MENU} --env-kwarg colour=blue", "does not take colour"),
        (f"agentgym check {MENU} --only everything", "unknown checks"),
        (f"agentgym train --env {MENU} --credit grpo+sdarr --out runs/x", "'sdarr'"),
        (f"agentgym train --env {MENU} --credit gigpo+slca --out runs/x", "single slot"),
        (f"agentgym train --env {MENU} --bogus 1 --out runs/x", "--bogus"),
        (f"agentgym train --env {MENU} --credit gigpo", "needs --out"),
        ("agentgym bench learning --variants grpo,sdarr", "'sdarr'"),
        ("agentgym bench everything", "unknown bench part"),
        (f"agentgym eval --agent runs/x --env {MENU} --seeds 5 --out g.json", "reads runs/x"),
        ("agentgym report r.json", "reads r.json"),
        ("agentgym leaderboard bogus", "['bogus']"),
        (f"agentgym eval --agent nowhere.mod:Agent --env {MENU} --seeds 5 --out r.json", "nowhere"),
    ],
)
def test_a_bad_example_fails_with_its_reason(text, words):
    with pytest.raises(pytest.fail.Exception, match=re.escape(words)):
        check_example(shlex.split(text)[1:], [])


def test_a_readme_example_of_an_unknown_option_or_a_reused_output_fails():
    bad = "```bash\nagentgym envs --famly search\n```\n"
    with pytest.raises(pytest.fail.Exception, match="--famly"):
        check_example(next(readme_examples(bad)), [])
    twice = f"agentgym train --env {MENU} --credit gigpo --steps 2 --out runs/g"
    written: list[str] = []
    for argv in readme_examples(f"```bash\n{twice}\n{twice}\n```\n"):
        if written:
            with pytest.raises(pytest.fail.Exception, match="an earlier example writes too"):
                check_example(argv, written)
        else:
            check_example(argv, written)
    with pytest.raises(AssertionError, match="not an agentgym command"):
        list(readme_examples("```bash\nagentgm envs\n```\n"))


def test_value_examples_are_read_from_e_g():
    assert value_examples("Credit variants joined by '+', e.g. 'gigpo' or 'grpo+sdar'.") == [
        "gigpo",
        "grpo+sdar",
    ]
    with pytest.raises(pytest.fail.Exception, match="unknown credit variant 'sdarr'"):
        check_example(["train", "--credit", "grpo+sdarr", "--out", "runs/x"], [])
