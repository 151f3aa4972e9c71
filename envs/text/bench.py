"""Text-game family speed: ALFWorld and TextWorld steps per second, and game generation time.

ALFWorld steps per second are measured against ALFWorld's own ``AlfredTWEnv`` on the same
generated games (the stock env in a separate process), with the observation agreement rate;
TextWorld steps per second against textworld's own gym env on the same games and commands;
and the time it takes to generate a game. Every comparison is measured in the same run, in
alternating repeated rounds (:func:`agentgym.core.timing.alternate`): each side's median and
range on wall and CPU time, and the ratios from the medians. Speed targets live here, never
in tests.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.core.timing import Alternated, Sample, Stopwatch, alternate, summed
from agentgym.envs.text.alfworld_env import NOTHING_HAPPENS
from agentgym.envs.text.alfworld_game import AlfredGame
from agentgym.registry import make

GOAL_ALFWORLD_SPEEDUP = 3.0
GOAL_TEXTWORLD_OVERHEAD = 0.10
ALFWORLD_PRESETS = ("Small", "Standard")
TEXTWORLD_PRESETS = ("Small", "Medium")
INVALID_RATE = 0.1
"""Share of commands that are not admissible (an agent's typos), on both sides."""


# ---------------------------------------------------------------------- ALFWorld
def _random_commands(env: Any, task_id: str, steps: int, rng: np.random.Generator) -> list[str]:
    """Commands of one random episode on ``env``, until the goal holds or ``steps`` run out.

    The commands are admissible ones, and an unknown one :data:`INVALID_RATE` of the time.
    """
    _, info = env.reset(options={"task_id": task_id})
    commands = []
    for _ in range(steps):
        admissible = info["admissible_actions"]
        if rng.random() < INVALID_RATE:
            command = "do a barrel roll"
        else:
            command = admissible[int(rng.integers(len(admissible)))]
        commands.append(command)
        _, _, terminated, truncated, info = env.step(command)
        if terminated or truncated:
            break
    return commands


def alfworld_row(preset: str, games: int, steps: int, repeats: int = 3) -> dict[str, Any]:
    """Ours (the engine alone, and the whole env with its info) against ``AlfredTWEnv``.

    The engine, the env and ``AlfredTWEnv`` play the same commands ``repeats`` times each in
    alternating rounds; speeds and speed-ups come from each side's median, on wall and CPU
    time, with the rounds' range.
    """
    env = make(f"agentgym/ALFWorld-{preset}-v0", split="test")
    base: Any = env.unwrapped
    task_ids = list(base.task_ids("test")[:games])
    paths = [base.game_path(t) for t in task_ids]
    rng = np.random.default_rng(0)
    episodes = [(t, _random_commands(env, t, steps, rng)) for t in task_ids]
    result = compare_with_stock(
        paths,
        commands=[c for _, c in episodes],
        repeats=repeats,
        also={"env": _our_side(env, episodes)},
    )
    env.close()
    rounds, n = result.rounds, result.steps
    assert rounds is not None
    names = {"ours": "engine", "env": "env", "stock": "AlfredTWEnv"}
    return {
        "env": f"ALFWorld-{preset}",
        "games": games,
        "steps": n,
        "repeats": result.repeats,
        "agreement": result.agreement,
        "engine_steps_per_s": result.ours_steps_per_s,
        "engine_cpu_steps_per_s": result.ours_cpu_steps_per_s,
        "env_steps_per_s": n / rounds.median("env"),
        "env_cpu_steps_per_s": n / max(rounds.median("env", "cpu"), 1e-9),
        "peer": "alfworld AlfredTWEnv",
        "peer_steps_per_s": result.stock_steps_per_s,
        "peer_cpu_steps_per_s": result.stock_cpu_steps_per_s,
        "ratio": rounds.ratio("stock", "env"),
        "ratio_cpu": rounds.ratio("stock", "env", clock="cpu"),
        "ratio_range": _rounded(rounds.ratio_range("stock", "env")),
        "ratio_cpu_range": _rounded(rounds.ratio_range("stock", "env", clock="cpu")),
        "engine_ratio": rounds.ratio("stock", "ours"),
        "engine_ratio_cpu": rounds.ratio("stock", "ours", clock="cpu"),
        "timing_ms_per_step": {
            names[side]: row for side, row in rounds.summary(per=n, unit="ms").items()
        },
    }


def _rounded(pair: tuple[float, float], shift: float = 0.0) -> list[float]:
    """``[lo + shift, hi + shift]`` to four places (JSON-ready)."""
    return [round(pair[0] + shift, 4), round(pair[1] + shift, 4)]


# ---------------------------------------------------------------------- TextWorld
def _stock_textworld_side(
    paths: list[Path], episodes: list[tuple[str, list[str]]]
) -> Callable[[], Sample]:
    """textworld.gym on the same games and commands, timed over its steps (resets excluded).

    The admissible commands are requested each step, as ours does.
    """
    import jericho
    import textworld
    import textworld.gym

    infos = textworld.EnvInfos(admissible_commands=True)

    def play() -> Sample:
        watch = Stopwatch()
        for path, (_, commands) in zip(paths, episodes, strict=True):
            env_id = textworld.gym.register_game(
                str(path), infos, max_episode_steps=len(commands) + 1, asynchronous=False
            )
            env = textworld.gym.make(env_id)
            with warnings.catch_warnings():
                # jericho warns that a generated story is not one of its known games.
                warnings.simplefilter("ignore", jericho.UnsupportedGameWarning)
                env.reset()
            with watch:
                for command in commands:
                    env.step(command)
            env.close()
        return watch.sample

    return play


def _our_side(env: Any, episodes: list[tuple[str, list[str]]]) -> Callable[[], Sample]:
    """Our env on ``episodes``, timed over its steps (resets excluded)."""

    def play() -> Sample:
        watch = Stopwatch()
        for task_id, commands in episodes:
            env.reset(options={"task_id": task_id})
            with watch:
                for command in commands:
                    env.step(command)
        return watch.sample

    return play


def textworld_row(preset: str, games: int, steps: int, repeats: int = 5) -> dict[str, Any]:
    """Ours against textworld's gym env on the same games and commands.

    Both sides play each episode ``repeats`` times in alternating order (after one warm-up
    round), game by game; round ``r`` of a side adds up its ``r``-th run of every game.
    Steps per second come from the median of each side's rounds, on wall and CPU time.
    """
    env = make(f"agentgym/TextWorld-{preset}-v0", split="test")
    base: Any = env.unwrapped
    task_ids = list(base.task_ids("test")[:games])
    rng = np.random.default_rng(0)
    # Commands both sides accept: ours refuses a non-admissible command without a turn of the
    # engine, textworld's env parses it; admissible commands keep the two sides comparable.
    episodes = []
    for task_id in task_ids:
        _, info = env.reset(options={"task_id": task_id})
        commands = []
        for _ in range(steps):
            admissible = info["admissible_actions"]
            commands.append(admissible[int(rng.integers(len(admissible)))])
            _, _, terminated, truncated, info = env.step(commands[-1])
            if terminated or truncated:
                break
        episodes.append((task_id, commands))
    from agentgym.envs.text._tw import ensure_game

    paths = [ensure_game(base.preset.spec(int(t))) for t in task_ids]
    # game by game, so that drift on a shared host moves both sides' runs of a game alike
    timed = summed(
        [
            alternate(
                {
                    "ours": _our_side(env, [episode]),
                    "textworld.gym": _stock_textworld_side([path], [episode]),
                },
                repeats=repeats,
                warmup=1,
            )
            for path, episode in zip(paths, episodes, strict=True)
        ]
    )
    env.close()
    n = sum(len(c) for _, c in episodes)
    return {
        "env": f"TextWorld-{preset}",
        "games": games,
        "steps": n,
        "repeats": repeats,
        "env_steps_per_s": n / timed.median("ours"),
        "peer": "textworld.gym",
        "peer_steps_per_s": n / timed.median("textworld.gym"),
        "ratio": timed.ratio("textworld.gym", "ours"),
        "overhead": timed.ratio("ours", "textworld.gym") - 1.0,
        "overhead_cpu": timed.ratio("ours", "textworld.gym", clock="cpu") - 1.0,
        "overhead_range": _rounded(timed.ratio_range("ours", "textworld.gym"), -1.0),
        "overhead_cpu_range": _rounded(
            timed.ratio_range("ours", "textworld.gym", clock="cpu"), -1.0
        ),
        "timing_ms_per_step": timed.summary(per=n, unit="ms"),
    }


# ---------------------------------------------------------------------- generation
def generation_rows(games: int) -> list[dict[str, Any]]:
    """Seconds to generate one game of each preset, into a fresh folder (no cache)."""
    from agentgym.envs.text import _tw
    from agentgym.envs.text import alfworld_gen as gen
    from agentgym.envs.text.textworld_env import PRESETS

    rows = []
    with tempfile.TemporaryDirectory(prefix="agentgym-gen-") as tmp:
        for preset in ("small", "standard"):
            cache = gen.GameCache(gen.PRESETS[preset], root=Path(tmp) / "alfworld")
            start = time.perf_counter()
            for i in range(games):
                cache.path("test", i)
            rows.append(_generation_row(f"ALFWorld-{preset.title()}", games, start))
        for preset in ("small", "medium"):
            start = time.perf_counter()
            for i in range(games):
                spec = PRESETS[preset].spec(1100 + i)
                _tw._generate(spec, Path(tmp) / "textworld" / preset / f"{spec.seed}.z8")
            rows.append(_generation_row(f"TextWorld-{preset.title()}", games, start))
    return rows


def _generation_row(env: str, games: int, start: float) -> dict[str, Any]:
    seconds = time.perf_counter() - start
    return {"env": env, "games": games, "s_per_game": seconds / games}


# ---------------------------------------------------------------------- run
def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """All three tables; ``quick`` plays fewer games and steps, repeated less (a smoke run)."""
    games, steps, generated, repeats = (2, 10, 1, 2) if quick else (12, 40, 4, 5)
    alfworld = [alfworld_row(p, games, steps, repeats=min(repeats, 3)) for p in ALFWORLD_PRESETS]
    textworld = [textworld_row(p, games, steps, repeats) for p in TEXTWORLD_PRESETS]
    generation = generation_rows(generated)
    ratios = {f"{r['env']}_vs_{r['peer'].split()[-1]}": r["ratio"] for r in alfworld + textworld}
    _print(console, alfworld, textworld, generation)
    return {
        "part": "text",
        "rows": alfworld + textworld + generation,
        "alfworld": alfworld,
        "textworld": textworld,
        "generation": generation,
        "ratios": ratios,
        "goals": {
            "alfworld_speedup": GOAL_ALFWORLD_SPEEDUP,
            "textworld_overhead": GOAL_TEXTWORLD_OVERHEAD,
        },
    }


def _print(
    console: Console,
    alfworld: list[dict[str, Any]],
    textworld: list[dict[str, Any]],
    generation: list[dict[str, Any]],
) -> None:
    table = Table(
        *("env", "games", "steps", "agree", "engine st/s", "env st/s", "stock st/s"),
        *("env / stock", "round range", "env / stock (CPU)", "engine / stock (CPU)"),
        title=f"ALFWorld against AlfredTWEnv (goal: ≥{GOAL_ALFWORLD_SPEEDUP:g}×; medians of "
        "alternating runs)",
    )
    for r in alfworld:
        lo, hi = r["ratio_range"]
        table.add_row(
            r["env"],
            str(r["games"]),
            f"{r['steps']} × {r['repeats']}",
            f"{r['agreement']:.1%}",
            f"{r['engine_steps_per_s']:,.0f}",
            f"{r['env_steps_per_s']:,.0f}",
            f"{r['peer_steps_per_s']:,.1f}",
            f"{r['ratio']:.1f}×",
            f"{lo:.1f}× … {hi:.1f}×",
            f"{r['ratio_cpu']:.1f}×",
            f"{r['engine_ratio_cpu']:.1f}×",
        )
    console.print(table)
    table = Table(
        *("env", "games", "steps", "ours st/s", "textworld.gym st/s", "overhead"),
        *("round range", "overhead (CPU)", "round range (CPU)"),
        title=f"TextWorld against textworld.gym (goal: ≤{GOAL_TEXTWORLD_OVERHEAD:.0%} overhead; "
        "medians of alternating runs)",
    )
    for r in textworld:
        lo, hi = r["overhead_range"]
        cpu_lo, cpu_hi = r["overhead_cpu_range"]
        table.add_row(
            r["env"],
            str(r["games"]),
            f"{r['steps']} × {r['repeats']}",
            f"{r['env_steps_per_s']:,.0f}",
            f"{r['peer_steps_per_s']:,.0f}",
            f"{r['overhead']:+.1%}",
            f"{lo:+.1%} … {hi:+.1%}",
            f"{r['overhead_cpu']:+.1%}",
            f"{cpu_lo:+.1%} … {cpu_hi:+.1%}",
        )
    console.print(table)
    table = Table("env", "games", "s / game", title="Game generation (no cache)")
    for r in generation:
        table.add_row(r["env"], str(r["games"]), f"{r['s_per_game']:.2f}")
    console.print(table)


# ---------------------------------------------------------------------- the stock reference
_STOCK_RUNNER = r"""
import json, sys, time
spec_path, out_path = sys.argv[1:3]  # Fast Downward's translator overwrites sys.argv
spec = json.load(open(spec_path))
from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv
config = {
    "env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6],
            "domain_randomization": False, "expert_type": "handcoded"},
    "dataset": {"data_path": spec["root"], "eval_id_data_path": spec["root"],
                "eval_ood_data_path": spec["root"], "num_train_games": -1, "num_eval_games": -1},
    "general": {"training_method": "dqn"},
    "rl": {"training": {"max_nb_steps_per_episode": 10000}},
}
env = AlfredTWEnv(config, train_eval="train").init_env(batch_size=1)
records, seconds, cpu, steps = {}, 0.0, 0.0, 0
for _ in spec["commands"]:
    obs, infos = env.reset()
    game = infos["extra.gamefile"][0]
    rows = [[obs[0], infos["admissible_commands"][0], bool(infos["won"][0])]]  # batch of one
    start, cpu_start = time.perf_counter(), time.process_time()
    for command in spec["commands"][game]:
        obs, _, _, infos = env.step([command])
        rows.append([obs[0], infos["admissible_commands"][0], bool(infos["won"][0])])
    seconds += time.perf_counter() - start
    cpu += time.process_time() - cpu_start
    steps += len(spec["commands"][game])
    records[game] = rows
with open(out_path, "w") as f:
    json.dump({"records": records, "seconds": seconds, "cpu": cpu, "steps": steps}, f)
"""


@dataclass(frozen=True)
class StockComparison:
    """Ours against ALFWorld's ``AlfredTWEnv`` on the same games and commands.

    Attributes:
        observations: observations compared (intros and step feedback).
        agreeing: how many were byte-identical with an identical admissible list and won flag.
        steps: commands played per side and round.
        ours_steps_per_s: our steps per second (steps only, resets excluded), from the median
            round.
        stock_steps_per_s: ``AlfredTWEnv``'s, measured in a separate process, the same way.
        ours_cpu_steps_per_s: ours on CPU time.
        stock_cpu_steps_per_s: ``AlfredTWEnv``'s on its process's CPU time.
        repeats: rounds each side played (alternating which side goes first).
        rounds: every timed run, per side (``"ours"``, ``"stock"`` and any other side).
    """

    observations: int
    agreeing: int
    steps: int
    ours_steps_per_s: float
    stock_steps_per_s: float
    ours_cpu_steps_per_s: float = 0.0
    stock_cpu_steps_per_s: float = 0.0
    repeats: int = 1
    rounds: Alternated | None = field(default=None, compare=False, repr=False)

    @property
    def agreement(self) -> float:
        """Fraction of observations that agree."""
        return self.agreeing / self.observations

    @property
    def speedup(self) -> float:
        """Our steps per second over the stock env's."""
        return self.ours_steps_per_s / self.stock_steps_per_s


def compare_with_stock(
    games: Sequence[Path],
    steps: int = 40,
    seed: int = 0,
    invalid_rate: float = 0.1,
    commands: Sequence[Sequence[str]] | None = None,
    repeats: int = 1,
    also: Mapping[str, Callable[[], Sample]] | None = None,
) -> StockComparison:
    """Play the same commands on ``games`` here and in ALFWorld's ``AlfredTWEnv``, and compare.

    ``AlfredTWEnv`` runs in a separate process, with the dqn setting, which adds no expert,
    over a folder holding exactly these games, timing its steps on its own wall and CPU
    clocks. Every observation, admissible list and won flag is compared (its first run
    against our untimed first pass).

    Commands: ``commands[i]`` on game ``i`` if given, else up to ``steps`` per game, uniform
    over the admissible commands, with an unknown command ``invalid_rate`` of the time; either
    way until the game is won (drawn in our untimed first pass). Each game folder needs its
    ``traj_data.json`` (``AlfredTWEnv`` skips games without one). Then ``repeats`` rounds,
    alternating which side goes first, each side's steps timed (resets excluded); speeds are
    the medians. ``also``: more sides timed in the same rounds (name -> a function returning
    the :class:`~agentgym.core.timing.Sample` of its steps), e.g. the whole env on these games.
    """
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="alfworld-stock-") as tmp:
        root = Path(tmp) / "games"
        paths = []
        for i, src in enumerate(games):
            dst = root / f"{i:04d}"
            dst.mkdir(parents=True)
            for name in ("game.tw-pddl", "traj_data.json"):
                (dst / name).write_bytes((Path(src).parent / name).read_bytes())
            paths.append(dst / "game.tw-pddl")
        ours, to_play, _ = _play_ours(paths, _Plan(steps, rng, invalid_rate, commands))
        replay = _Plan(0, rng, 0.0, list(to_play.values()))
        stock: dict[str, Any] = {}

        def play_stock() -> Sample:
            records, sample = _play_stock(Path(tmp), root, to_play)
            stock.setdefault("records", records)
            return sample

        sides = {"stock": play_stock, "ours": lambda: _play_ours(paths, replay)[2], **(also or {})}
        rounds = alternate(sides, repeats=max(repeats, 1), warmup=0)
    agreeing = sum(
        a == b
        for key, rows in ours.items()
        for a, b in itertools.zip_longest(rows, stock["records"][key])
        if a is not None
    )
    n = sum(len(c) for c in to_play.values())
    return StockComparison(
        observations=sum(len(rows) for rows in ours.values()),
        agreeing=agreeing,
        steps=n,
        ours_steps_per_s=n / rounds.median("ours"),
        stock_steps_per_s=n / rounds.median("stock"),
        ours_cpu_steps_per_s=n / max(rounds.median("ours", "cpu"), 1e-9),
        stock_cpu_steps_per_s=n / max(rounds.median("stock", "cpu"), 1e-9),
        repeats=max(repeats, 1),
        rounds=rounds,
    )


@dataclass
class _Plan:
    """How our side picks commands: ``given[i]`` on game ``i``, else random (see caller)."""

    steps: int
    rng: np.random.Generator
    invalid_rate: float
    given: Sequence[Sequence[str]] | None


def _play_ours(
    paths: list[Path], plan: _Plan
) -> tuple[dict[str, list[list[Any]]], dict[str, list[str]], Sample]:
    """Our engine on each game: its rows, the commands played per game, and the steps' time."""
    to_play: dict[str, list[str]] = {}
    ours: dict[str, list[list[Any]]] = {}
    watch = Stopwatch()
    for i, path in enumerate(paths):
        game = AlfredGame(json.loads(path.read_text()))
        rows = [[game.reset(), list(game.admissible), game.won]]
        played: list[str] = []
        given = None if plan.given is None else list(plan.given[i])
        with watch:
            for turn in range(plan.steps if given is None else len(given)):
                if given is not None:
                    command = given[turn]
                elif plan.rng.random() < plan.invalid_rate:
                    command = "do a barrel roll"
                else:
                    command = game.admissible[int(plan.rng.integers(len(game.admissible)))]
                valid = game.step(command)
                played.append(command)
                obs = game.feedback if valid else NOTHING_HAPPENS
                rows.append([obs, list(game.admissible), game.won])
                if game.won:
                    break
        game.close()
        to_play[str(path)], ours[str(path)] = played, rows
    return ours, to_play, watch.sample


def _play_stock(
    tmp: Path, root: Path, to_play: dict[str, list[str]]
) -> tuple[dict[str, Any], Sample]:
    """``AlfredTWEnv`` in its own process on ``to_play``: its rows per game and its steps' time."""
    spec, out = tmp / "spec.json", tmp / "stock.json"
    spec.write_text(json.dumps({"root": str(root), "commands": to_play}))
    env = {**os.environ, "ALFWORLD_DATA": str(tmp), "HOME": str(tmp)}
    subprocess.run(
        [sys.executable, "-c", _STOCK_RUNNER, str(spec), str(out)],
        env=env,
        check=True,
        capture_output=True,
        timeout=1800,
    )
    stock = json.loads(out.read_text())
    return stock["records"], Sample(stock["seconds"], stock["cpu"])
