"""The ``agentgym`` command line. Subcommands delegate to the library modules.

The commands of the packages above this one (the trainer, the leaderboard) are reached
through :data:`COMMANDS`, a table of import strings, the way the registry reaches env entry
points: this layer never imports ``agentgym.baselines``, ``agentgym.envs`` or
``agentgym.leaderboard``.

Exit codes: 0 success, 2 bad usage or bad input (one line on stderr), 1 internal error or a
failed check.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from typer.exceptions import TyperException

from agentgym.bench import PARTS
from agentgym.cli_options import (
    AgentOptions,
    CurveFlag,
    DeviceOption,
    EnvKwargs,
    JsonFlag,
    RecordFlag,
    RlOptions,
    SftModeOption,
    SftTeacherOption,
    SplitOption,
    parse_env_kwargs,
)
from agentgym.core.errors import BadInput
from agentgym.registry import families
from agentgym.terminal import out, print_json

COMMANDS = {
    "train": "agentgym.baselines.cli:train_command",
    "quickstart policy": "agentgym.baselines.cli:quickstart_policy",
    "submit": "agentgym.leaderboard.cli:submit",
    "leaderboard": "agentgym.leaderboard.cli:show",
    "leaderboard serve": "agentgym.leaderboard.cli:serve",
    "serve": "agentgym.envs.remote.server:serve_command",
    "leaderboard publish": "agentgym.leaderboard.cli:publish",
    "verify": "agentgym.leaderboard.cli:verify",
}
"""Command -> ``module:function`` of the package above that carries it out."""


def command(name: str) -> Callable[..., Any]:
    """The function behind ``name`` in :data:`COMMANDS`, imported on first use."""
    module, _, attr = COMMANDS[name].partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return fn


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="agentgym: environments, evaluation and training for credit assignment in LLM agents.",
)


@app.command()
def envs(
    family: Annotated[
        str | None, typer.Option(help=f"Only one family: {', '.join(families())}.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the registered environment ids."""
    from agentgym.registry import env_ids, env_info, env_note

    rows = [env_info(i) for i in env_ids(family)]
    notes = {r.id: env_note(r.id) for r in rows}
    if as_json:
        print_json(
            [
                {"id": r.id, "family": r.family, "description": r.description, "note": notes[r.id]}
                for r in rows
            ]
        )
        return
    table = Table("id", "family", "description", "note")
    for r in rows:  # descriptions are text, not markup: "[base-task]" must show
        table.add_row(r.id, r.family, escape(r.description), escape(notes[r.id]))
    out.print(table)


@app.command()
def check(
    env_id: Annotated[str, typer.Argument(help="A registered id.")],
    env_kwarg: EnvKwargs = None,
    only: Annotated[list[str] | None, typer.Option(help="Run only this check.")] = None,
) -> None:
    """Run the full environment checker on one id (exit 1 if a check fails).

    Examples:
        agentgym check agentgym/Search-Menu-Small-v1 --only oracle_wins

        agentgym check agentgym/Tools-Travel-v0 --env-kwarg world_seed=1
    """
    from agentgym.checker import CHECKS, check_agent_env

    unknown = sorted(set(only or []) - set(CHECKS))
    if unknown:
        raise BadInput(f"unknown checks {unknown}: choose from {', '.join(CHECKS)}")
    report = check_agent_env(env_id, env_kwargs=parse_env_kwargs(env_kwarg), only=only)
    table = Table("check", "result", "seconds", "detail", title=env_id)
    for r in report.results:
        verdict = "[green]pass[/green]" if r.ok else "[red]FAIL[/red]"
        table.add_row(r.name, verdict, f"{r.seconds:.2f}", escape(r.detail))
    out.print(table)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def play(
    env_id: Annotated[str, typer.Argument(help="A registered id.")],
    seed: Annotated[int, typer.Option(help="Seed of the episode.")] = 0,
    split: Annotated[str, typer.Option(help="train, val or test.")] = "train",
    env_kwarg: EnvKwargs = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Send answers and purchases without asking.")
    ] = False,
) -> None:
    """Play an episode in the terminal: type an action's number, its text or its start."""
    from agentgym.play import play_episode

    play_episode(
        env_id,
        seed=seed,
        split=split,
        env_kwargs=parse_env_kwargs(env_kwarg),
        confirm=not yes,
    )


@app.command(name="eval")
def eval_(
    agent: Annotated[
        str,
        typer.Option(
            help="random, oracle, gradcuit:DIR, gbc:DIR, module:Class, a checkpoint dir or "
            "openai:URL#model."
        ),
    ],
    env: Annotated[list[str], typer.Option(help="Env id (repeat for several).")],
    seeds: Annotated[int, typer.Option(help="Number of runs, each with its own seed.")],
    out_path: Annotated[Path, typer.Option("--out", help="Results file to write.")],
    episodes_per_seed: Annotated[int, typer.Option(help="Episodes per run.")] = 1,
    root_seed: Annotated[int, typer.Option(help="Root of the seed tree.")] = 0,
    split: Annotated[str, typer.Option(help="Task split: train, val or test.")] = "test",
    env_kwarg: EnvKwargs = None,
    overwrite: Annotated[bool, typer.Option(help="Replace --out if it is another run's.")] = False,
    workers: Annotated[int, typer.Option(help="Worker processes (or Ray CPUs).")] = 1,
    backend: Annotated[str, typer.Option(help="local, process or ray.")] = "local",
    address: Annotated[str | None, typer.Option(help="Address of a Ray cluster.")] = None,
    transcripts: Annotated[
        bool, typer.Option(help="Write every exchange to OUT.transcripts.jsonl.")
    ] = False,
    controls: Annotated[
        bool,
        typer.Option(help="Also run the metric controls: positive (oracle), null, perturbation."),
    ] = False,
    env_url: Annotated[
        str | None,
        typer.Option(help="Play the envs on this env service (agentgym serve), same results."),
    ] = None,
    agent_option: AgentOptions = None,
) -> None:
    """Score an agent over many random seeds and write the results file.

    Examples:
        agentgym eval --agent oracle --env agentgym/Search-Menu-Small-v1 --seeds 50 --out r.json

        agentgym eval --agent random --env agentgym/Tools-Travel-v0 --seeds 20 --out t.json
    """
    from agentgym.harness.evaluate import Interrupted, evaluate
    from agentgym.harness.report import print_report

    if backend == "local" and workers > 1:
        backend = "process"
    try:
        result = evaluate(
            agent,
            env,
            seeds=seeds,
            episodes_per_seed=episodes_per_seed,
            root_seed=root_seed,
            split=split,
            env_kwargs=parse_env_kwargs(env_kwarg),
            out=out_path,
            overwrite=overwrite,
            backend=backend,
            workers=workers,
            address=address,
            transcripts=transcripts,
            controls=controls,
            progress=True,
            env_url=env_url,
            agent_options=parse_env_kwargs(agent_option, flag="--agent-option"),
        )
    except Interrupted as e:
        print(f"agentgym: {e}", file=sys.stderr)
        raise typer.Exit(130) from None
    print_report(out, result)


@app.command()
def report(
    results: Annotated[
        list[Path], typer.Argument(help="Results files written by eval (several: side by side).")
    ],
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of means and intervals.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Mean, IQM and 95% intervals per env, agent and task type (recomputed).

    With one file --json prints {env_id: summary}; with several, a list of {agent, file,
    report} in the order given.
    """
    from agentgym.harness.plot import plot_report
    from agentgym.harness.report import print_report, report_json
    from agentgym.harness.results import agent_labels, read_results

    docs = [read_results(path) for path in results]  # every file is checked before any output
    labels = agent_labels(docs, [str(path) for path in results])
    summaries = [report_json(doc) for doc in docs]
    if plot is not None:
        plot_report(dict(zip(labels, summaries, strict=True)), plot)
    if as_json:
        if len(docs) == 1:
            print_json(summaries[0])
        else:
            print_json(
                [
                    {"agent": label, "file": str(path), "report": summary}
                    for label, path, summary in zip(labels, results, summaries, strict=True)
                ]
            )
        return
    print_report(out, docs[0] if len(docs) == 1 else dict(zip(labels, docs, strict=True)))
    if plot is not None:
        out.print(f"wrote {plot}")


@app.command()
def compare(
    a: Annotated[Path, typer.Argument(help="Results file A (the baseline).")],
    b: Annotated[Path, typer.Argument(help="Results file B.")],
    as_json: JsonFlag = False,
) -> None:
    """Paired difference B - A on the episodes both files share, naming both sides."""
    from agentgym.harness.compare import compare as paired
    from agentgym.harness.results import read_results

    doc = paired(read_results(a), read_results(b), files=(str(a), str(b)))
    if as_json:
        print_json(doc)
        return
    out.print(escape(doc["verdict"]), soft_wrap=True)
    for env_id, sub in (doc.get("by_env") or {}).items():
        out.print(escape(f"  on {env_id}: {sub['verdict']}"), soft_wrap=True)


@app.command()
def ablate(
    agent: Annotated[str, typer.Option(help="random, oracle or module:Class.")],
    env: Annotated[str, typer.Option(help="An env id with graph ablations (search family).")],
    seeds: Annotated[int, typer.Option(help="Number of seeds (one episode each).")],
    root_seed: Annotated[int, typer.Option(help="Root of the seed tree.")] = 0,
    split: Annotated[str, typer.Option(help="Task split: train, val or test.")] = "test",
    as_json: JsonFlag = False,
) -> None:
    """Success with the agent's own visited/cited evidence removed or kept alone."""
    from agentgym.harness.ablate import ablate as run_ablate

    doc = run_ablate(agent, env, seeds=seeds, root_seed=root_seed, split=split)
    if as_json:
        print_json(doc)
        return
    table = Table("corpus", "runs", "mean success", "paired change", title=f"{env} · {agent}")
    base = doc["baseline"]
    table.add_row("intact", str(base["n"]), f"{base['mean']:.3f}", "")
    for mode, agg in doc["ablations"].items():
        table.add_row(mode, str(agg["n"]), f"{agg['mean']:.3f}", f"{agg['delta']:+.3f}")
    out.print(table)


@app.command()
def bench(
    part: Annotated[str, typer.Argument(help=f"What to measure: {', '.join(PARTS)}.")],
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write JSON here.")] = None,
    quick: Annotated[
        bool,
        typer.Option(
            help="Small sizes: a smoke run, not a measurement. learning without --env: the "
            "main job's recipe at a small budget, checked against the recorded figures."
        ),
    ] = False,
    variants: Annotated[
        str | None,
        typer.Option(
            help="learning, credit: credit variants, comma-separated (default: learning "
            "grpo,gigpo; credit every registered one)."
        ),
    ] = None,
    rl_steps: Annotated[
        int | None,
        typer.Option(help="learning only: RL steps of each variant instead of a token budget."),
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(
            help="learning, credit, attribution: the env (default: learning "
            "agentgym/Search-Menu-Small-v1, credit agentgym/Credit-KeyDoor-v0, attribution "
            "agentgym/Tools-Ecommerce-v1)."
        ),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(help="learning only: training seeds per variant (default 3; --quick 1)."),
    ] = None,
    first_seed: Annotated[
        int | None, typer.Option(help="learning only: the first training seed (default 0).")
    ] = None,
    work: Annotated[
        Path | None,
        typer.Option(
            help="learning only: keep the runs in this folder and reuse the finished ones "
            "(resume, or run seeds in parallel processes; default: a temporary folder)."
        ),
    ] = None,
    tokens: Annotated[
        int | None,
        typer.Option(
            help="learning only: generated tokens per RL run (default: the recipe's, else 80,000)."
        ),
    ] = None,
    aggregation: Annotated[
        str | None,
        typer.Option(
            help="learning only: the loss aggregation of every variant (default token-mean; "
            "'own': each variant its paper's)."
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="learning, credit: write the figure here (PNG): learning curves, or rank "
            "correlation against cost."
        ),
    ] = None,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            help="credit: the policy measured: a checkpoint directory or 'uniform' "
            "(default: uniform where the env states its values, else a short warm start); "
            "attribution: the policy checkpoint whose gradients weigh the blocks."
        ),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option("--k", help="credit only: paired Monte-Carlo continuations per turn (8)."),
    ] = None,
    tasks: Annotated[
        int | None,
        typer.Option(
            help="credit: groups in the measured batch (8); attribution: faulted episodes (90)."
        ),
    ] = None,
    group_size: Annotated[
        int | None, typer.Option(help="credit only: rollouts per group (4).")
    ] = None,
    device: DeviceOption = None,
    curve: CurveFlag = None,
    sft_mode: SftModeOption = None,
    sft_teacher: SftTeacherOption = None,
    split: SplitOption = None,
    rl_option: RlOptions = None,
    record: RecordFlag = None,
) -> None:
    """Measure one part (speed against a peer in the same run, learning, credit fidelity)."""
    from agentgym.bench import run_bench
    from agentgym.harness.results import write_atomic

    learning = {
        "seeds": seeds,
        "first_seed": first_seed,
        "tokens": tokens,
        "aggregation": aggregation,
        "work": None if work is None else str(work),
        "checkpoint": checkpoint,
        "k": k,
        "tasks": tasks,
        "group_size": group_size,
        "device": device,
        "curve": curve,
        "sft_mode": sft_mode,
        "sft_teacher": sft_teacher,
        "split": split,
        "rl_options": tuple(rl_option) if rl_option else None,
        "record": record,
    }
    doc = run_bench(
        part,
        out,
        quick=quick,
        variants=variants,
        rl_steps=rl_steps,
        env=env,
        plot=None if plot is None else str(plot),
        **learning,
    )
    if json_out is not None:
        write_atomic(json_out, doc)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def train(ctx: typer.Context) -> None:
    """Train a policy with credit variants: --env ID --credit NAME[+NAME] --out DIR [options].

    Run `agentgym train --help` for every option (the fields of TrainConfig).
    """
    command("train")(list(ctx.args))


DbOption = Annotated[
    Path | None, typer.Option("--db", help="Leaderboard database (default: AGENTGYM_HOME).")
]
board = typer.Typer(
    help="The local leaderboard: ranked submissions (and `serve` for the web page).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(board, name="leaderboard")


@app.command()
def submit(
    results: Annotated[Path, typer.Argument(help="A results file written by eval.")],
    name: Annotated[str | None, typer.Option(help="Display name (default: the agent).")] = None,
    db: DbOption = None,
) -> None:
    """Validate a results file and add it to the leaderboard (refusals exit 2)."""
    command("submit")(results, name, db)


@board.callback()
def leaderboard(
    ctx: typer.Context,
    env: Annotated[str | None, typer.Option(help="Only this env id.")] = None,
    db: DbOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Submissions ranked per env by mean success with 95% intervals.

    Ties with the leader (overlapping intervals) are marked.
    """
    if ctx.invoked_subcommand is not None:
        return
    command("leaderboard")(env, db, as_json)


@board.command("serve")
def leaderboard_serve(
    db: DbOption = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8765,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
) -> None:
    """Serve the leaderboard's web page (read-only) on 127.0.0.1."""
    command("leaderboard serve")(db, port, host)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface; off loopback needs a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one, printed).")] = 8766,
    token: Annotated[str | None, typer.Option(help="Token every request needs.")] = None,
    env: Annotated[list[str] | None, typer.Option(help="Serve only this id (repeat).")] = None,
    max_sessions: Annotated[int, typer.Option(help="Open sessions at most.")] = 1024,
    idle_timeout: Annotated[float, typer.Option(help="Idle seconds; then closed.")] = 600.0,
    step_timeout: Annotated[float, typer.Option(help="Seconds per call; then closed.")] = 60.0,
    max_request_mb: Annotated[float, typer.Option(help="Largest request body (MiB).")] = 8.0,
) -> None:
    """Host envs over HTTP for agentgym/Remote-v0 (--env-url; token: AGENTGYM_SERVE_TOKEN).

    Examples:
        agentgym serve --env agentgym/Search-Menu-Small-v1

        AGENTGYM_SERVE_TOKEN=secret agentgym serve --host 0.0.0.0
    """
    limits = (max_sessions, idle_timeout, step_timeout, max_request_mb)
    command("serve")(host, port, token, env, *limits)


@app.command()
def verify(
    submission_id: Annotated[int, typer.Argument(help="The id printed by submit.")],
    sample: Annotated[int, typer.Option(help="Episodes to replay.")] = 10,
    db: DbOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay a sample of a submission's episodes and compare transcript hashes."""
    if not command("verify")(submission_id, sample, db, as_json):
        raise typer.Exit(1)


QUICKSTART_HELP = (
    "The main job end to end on a small default: train the tiny policy on ALFWorld-Small (SFT "
    "on oracle demonstrations to its validation plateau, then RL with GiGPO's step-level "
    "credit), evaluate SFT alone, SFT + GiGPO, an explorer without privileged knowledge, the "
    "oracle and a random agent over many seeds of the test split, report intervals and the "
    "paired difference, plot, submit to the local leaderboard (--db, default the one "
    "`agentgym leaderboard` shows; a result submitted before is not stored again) and print "
    "it. --env agentgym/Search-Menu-Small-v1 runs the same on the multi-hop search menu (with "
    "GRPO), with a reader as the reference without privileged knowledge."
)
"""``agentgym quickstart --help``: one paragraph, which the terminal reflows."""


@app.command(help=QUICKSTART_HELP)
def quickstart(
    seeds: Annotated[int, typer.Option(help="Test-split episodes per agent.")] = 300,
    out_dir: Annotated[
        Path, typer.Option(help="Where the checkpoint, results and plot go.")
    ] = Path("agentgym-quickstart"),
    sft_steps: Annotated[
        int | None,
        typer.Option(help="Warm-start steps on oracle demonstrations (default: the recipe's)."),
    ] = None,
    sft_episodes: Annotated[
        int | None,
        typer.Option(help="Oracle demonstrations of the warm start (default: the recipe's)."),
    ] = None,
    rl_steps: Annotated[
        int | None,
        typer.Option(help="RL steps after the warm start (default: the recipe's budget)."),
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(
            help="Train and score on this env's recipe instead (agentgym/Search-Menu-Small-v1, "
            "agentgym/Search-Menu-Small-v0, agentgym/Search-Free-Small-v0)."
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """The main job end to end on a small default (what it does: :data:`QUICKSTART_HELP`)."""
    from agentgym.harness.quickstart import score_agents

    env_id, trained = command("quickstart policy")(
        out_dir, env, {"sft_steps": sft_steps, "sft_episodes": sft_episodes, "steps": rl_steps}
    )
    results = score_agents(env_id, trained, seeds, out_dir)
    command("leaderboard publish")(db, results)  # a result stored before is not stored again


def _fail(message: str) -> None:
    """One line on stderr, exit code 2."""
    print("agentgym: error: " + " ".join(message.split()), file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn errors into exit codes."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="agentgym", standalone_mode=False)
    except TyperException as e:  # typer's usage errors (bad option, missing argument, ...)
        if e.exit_code != 2:
            raise
        _fail(e.format_message())
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except BadInput as e:
        _fail(str(e))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
