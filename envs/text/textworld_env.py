"""TextWorld games generated from seeds, played through textworld's Inform7 engine."""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jericho
import textworld
from textworld.envs.tw import TextWorldEnv as _LogicEnv

from agentgym.core.env import SPLITS, AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded, SnapshotMismatch
from agentgym.core.spaces import String
from agentgym.envs.text._tw import GameSpec, ensure_game


@dataclass(frozen=True)
class Preset:
    """Generation parameters of a preset; game ``seed`` gets ``world_sizes[seed % len]`` rooms."""

    world_sizes: tuple[int, ...]
    nb_objects: int
    quest_length: int
    max_turns: int

    def spec(self, seed: int) -> GameSpec:
        """The game of ``seed`` under this preset."""
        rooms = self.world_sizes[seed % len(self.world_sizes)]
        return GameSpec(rooms, self.nb_objects, self.quest_length, seed)

    @property
    def task_type(self) -> str:
        """The kind of quest every game of the preset has."""
        return f"quest-len-{self.quest_length}"


#: Presets. ``small``: 3 to 5 rooms, 6 objects, 3-step quests, 20 turns (a random admissible
#: agent won 1 of 50 test games: ``agentgym eval --agent random``; CPU-trainable). ``medium``:
#: 6 to 8 rooms, 12 objects, 5-step quests, 40 turns.
PRESETS: dict[str, Preset] = {
    "small": Preset(world_sizes=(3, 4, 5), nb_objects=6, quest_length=3, max_turns=20),
    "medium": Preset(world_sizes=(6, 7, 8), nb_objects=12, quest_length=5, max_turns=40),
}

#: Game seeds of each split (the task ids are these seeds as decimal strings).
SPLIT_SEEDS: dict[str, range] = {
    "train": range(0, 1000),
    "val": range(1000, 1100),
    "test": range(1100, 1200),
}

# What the engine computes each turn: the admissible commands (and, always, score, won, lost,
# max_score, the walkthrough and the state facts, which its state tracking keeps anyway).
_INFOS = textworld.EnvInfos(admissible_commands=True)
# The z-machine's random seed (TextWorld stories also seed their own generator).
_ZMACHINE_SEED = 1234
_MAX_COMMAND_CHARS = 200
# The story's closing question once a game ends, won or lost ("Would you like to RESTART,
# RESTORE a saved game, QUIT or UNDO the last command?"): the episode is over by then, so no
# command can answer it. v1 drops it; v0 keeps it (its observations must not change).
_END_QUESTION = re.compile(r"\n\s*Would you like to RESTART\b[^\n]*\s*\Z")


class TextWorldEnv(AgentEnv[str, str]):
    """Complete a TextWorld quest: a text adventure generated from a seed.

    ## Description
    Each task is a game that textworld's generator makes from ``(world size, objects, quest
    length, seed)`` (see :data:`PRESETS`): a few connected rooms with containers, supporters,
    doors and objects, and a quest such as "go north, take the dvd from the bed, put it on the
    recliner". Games are generated on first use and cached under
    ``AGENTGYM_HOME/cache/textworld/<params-hash>/``. The engine is the compiled Inform7 story
    run by jericho with textworld's state tracking (``textworld.start``), the engine that
    ``textworld.gym`` wraps in its old four-tuple API: its ``done`` becomes ``terminated``,
    the turn limit ``truncated``, and its running score a per-step reward.

    ## Observation
    Text: the game's own narration without the trailing prompt and status line (in v1 also,
    once the game is over, without the story's question whether to restart, restore or undo:
    no command can answer it). The first observation states the quest and describes the
    starting room (textworld's ASCII-art banner is removed); later ones are the game's reply
    to the last command, or why it was refused.

    ## Action
    Text (:class:`~agentgym.core.spaces.String`): one of ``info["admissible_actions"]``
    (textworld's admissible commands, sorted), matched ignoring case and extra spaces. Any other
    action is invalid: it costs a turn, changes nothing, and is never sent to the engine.

    ## Rewards
    TextWorld's score delta (1 when the quest is completed with the default one-point quest).
    ``info["reward_components"]``: ``score``. ``info["progress"]``: score / max score.

    ## Termination
    Terminates when the quest is won (``info["won"]``) or lost; truncates after ``max_turns``
    turns (20 for ``small``, 40 for ``medium``).

    ## Other info
    ``state_key``: a hash of the engine's state facts, so two action sequences that reach the
    same world state share it. Privileged (``privileged=True``): ``privileged_context`` holds
    the game's full walkthrough from the start, the same on every turn (not the remaining
    commands), as ``"Walkthrough: go east > take passkey from bed stand > ..."``.
    ``oracle_action()`` follows textworld's winning policy from the
    current state, re-planned after detours.

    ## Registered ids
    ``agentgym/TextWorld-Small-v0`` (``preset="small"``) and ``agentgym/TextWorld-Medium-v0``
    (``preset="medium"``), and the same with ``-v1`` (``end_question=False``). Task ids are game
    seeds: train 0-999, val 1000-1099, test 1100-1199.

    ## Version history
    v0: first version.
    v1: the last observation ends with the story's end (score and turns), without its question
    whether to restart, restore, quit or undo. Games, rewards and actions are those of v0.
    """

    family = "text"
    domain = "textworld"

    def __init__(self, preset: str = "small", end_question: bool = True, **kwargs: Any):
        """Create the env.

        Args:
            preset: a key of :data:`PRESETS`.
            end_question: keep the story's closing question in the last observation (the v0
                ids; the v1 ids drop it).
            **kwargs: ``split``, ``privileged``, ``max_turns`` (the preset's if None) and
                ``render_mode``, as for :class:`~agentgym.core.env.AgentEnv`.
        """
        if preset not in PRESETS:
            raise BadInput(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
        self.preset_name = preset
        self.preset = PRESETS[preset]
        self.end_question = bool(end_question)
        if kwargs.get("max_turns") is None:
            kwargs["max_turns"] = self.preset.max_turns
        super().__init__(**kwargs)
        self.observation_space = String()
        self.action_space = String()
        self._engine: Any = None  # textworld Environment of the loaded game
        self._loaded: GameSpec | None = None
        self._game: Any = None  # the engine's last GameState
        self._score = 0
        self._commands: list[str] = []  # commands sent to the engine this episode
        self._planner: Any = None  # logic-only replica of the game, made by oracle_action
        self._planned = 0  # how many of self._commands the replica has played

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> Sequence[str]:
        """The game seeds of ``split`` as strings."""
        return [str(s) for s in SPLIT_SEEDS[split or self.split]]

    def task_type_of(self, task_id: str) -> str:
        """The preset's quest kind, e.g. ``quest-len-3``."""
        return self.preset.task_type

    def _has_task(self, task_id: str) -> bool:
        seed = _seed_of(task_id)
        return seed is not None and any(seed in SPLIT_SEEDS[s] for s in SPLITS)

    def _config(self) -> dict[str, Any]:
        return {
            "preset": self.preset_name,
            **asdict(self.preset),
            "world_sizes": list(self.preset.world_sizes),
            # only when it differs from v0's, so that v0's data hash and snapshots stay as they were
            **({} if self.end_question else {"end_question": False}),
        }

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._reset_engine(task_id)
        text = _narration(self._game.feedback, self.end_question)
        return _drop_banner(text), self._info(True, 0.0)

    def _apply(self, action: Any) -> Transition:
        command = self._admissible(action)
        if command is None:
            return Transition(self._refusal(action), 0.0, False, self._info(False, 0.0))
        game, score, done = self._engine.step(command)
        self._game = game
        self._commands.append(command)
        reward = float(score - self._score)
        self._score = score
        text = _narration(game.feedback, self.end_question)
        return Transition(text, reward, bool(done), self._info(True, reward))

    def _reset_engine(self, task_id: str) -> None:
        """Load the task's game (generating it on first use) and restart it."""
        seed = _seed_of(task_id)
        assert seed is not None
        spec = self.preset.spec(seed)
        if spec != self._loaded:
            path = ensure_game(spec)
            self.close()
            with warnings.catch_warnings():
                # jericho warns that a generated story is not one of its known games.
                warnings.simplefilter("ignore", jericho.UnsupportedGameWarning)
                self._engine = textworld.start(str(path), _INFOS)
            self._engine.seed(_ZMACHINE_SEED)
            self._loaded = spec
        self._game = self._engine.reset()
        self._score = self._game["score"]
        self._commands = []
        self._planner = None
        self._planned = 0

    def _admissible(self, action: Any) -> str | None:
        """The admissible command ``action`` names (ignoring case and spacing), else None."""
        if not isinstance(action, str) or len(action) > _MAX_COMMAND_CHARS:
            return None
        admissible = self._game["admissible_commands"]
        if action in admissible:
            return action
        command = " ".join(action.lower().split())
        return command if command in admissible else None

    def _refusal(self, action: Any) -> str:
        if not isinstance(action, str):
            what = f"an action is a text command, not {type(action).__name__}"
        elif not action.strip():
            what = "the command is empty"
        elif len(action) > _MAX_COMMAND_CHARS:
            what = f"the command is longer than {_MAX_COMMAND_CHARS} characters"
        else:
            what = f"{action[:60]!r} is not a command that applies here"
        choices = ", ".join(self._game["admissible_commands"])
        return f"Invalid action: {what}. Nothing happened. Valid commands: {choices}."

    def _info(self, valid: bool, reward: float) -> dict[str, Any]:
        game = self._game
        return {
            "action_valid": valid,
            "won": bool(game["won"]),
            "admissible_actions": list(game["admissible_commands"]),
            "state_key": _facts_key(game["_facts"]),
            "reward_components": {"score": reward},
            "progress": min(1.0, self._score / game["max_score"]) if game["max_score"] else 0.0,
            "segments": [],
            "provenance": {"visited": [], "cited": [], "produced": [], "consumed": []},
        }

    def _privileged_info(self) -> dict[str, Any]:
        """The game's full walkthrough from the start (textworld's, unchanged by the turn)."""
        walkthrough = self._game["extra.walkthrough"]
        return {"privileged_context": "Walkthrough: " + " > ".join(walkthrough)}

    def close(self) -> None:
        """Stop the engine of the loaded game."""
        if self._engine is not None:
            self._engine.close()
        self._engine = None
        self._loaded = None

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        return {"commands": list(self._commands), "obs_sha1": _sha1(self._game.feedback)}

    def _set_state(self, state: dict[str, Any]) -> None:
        assert self._task_id is not None
        self._reset_engine(self._task_id)
        for command in state["commands"]:
            if command not in self._game["admissible_commands"]:
                raise SnapshotMismatch(f"snapshot command {command!r} is not admissible on replay")
            self._game, self._score, _ = self._engine.step(command)
            self._commands.append(command)
        if _sha1(self._game.feedback) != state["obs_sha1"]:
            raise SnapshotMismatch(
                f"replaying the snapshot's {len(self._commands)} commands on task "
                f"{self._task_id} gave another observation: the cached game differs from "
                "the one the snapshot was taken on"
            )

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """The next command of textworld's winning policy from the current state.

        A logic-only replica of the game (textworld's ``TextWorldEnv`` on the game's ``.json``)
        replays the episode's commands and tracks the quest; after a detour its policy leads
        back to the goal. Falls back to ``look`` if the quest can no longer be completed.
        """
        if self._task_id is None or self.done:
            raise ResetNeeded("the episode is over or not started: call reset() first")
        if self._planner is None:
            assert self._loaded is not None
            self._planner = _LogicEnv(textworld.EnvInfos(policy_commands=True))
            self._planner.load(str(self._loaded.path.with_suffix(".json")))
            self._planner.reset()
            self._planned = 0
        for command in self._commands[self._planned :]:
            self._planner.step(command)
        self._planned = len(self._commands)
        policy = self._planner.state["policy_commands"]
        return str(policy[0]) if policy else "look"


def _seed_of(task_id: str) -> int | None:
    """The game seed a task id names (its canonical decimal form only), else None."""
    if not (isinstance(task_id, str) and task_id.isascii() and task_id.isdigit()):
        return None
    seed = int(task_id)
    return seed if str(seed) == task_id else None


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _facts_key(facts: Sequence[Any]) -> str:
    """sha1 of the sorted state facts (propositions over the game's variable ids)."""
    lines = sorted([f"{p.name}({','.join([v.name for v in p.arguments])})" for p in facts])
    return _sha1("\n".join(lines))


def _narration(feedback: str, end_question: bool) -> str:
    """The game's reply without the trailing command prompt and status line.

    Without the story's closing question too, unless ``end_question`` (v0's text).
    """
    end = feedback.rfind("\n>")
    text = (feedback[:end] if end >= 0 else feedback).strip()
    return text if end_question else _END_QUESTION.sub("", text).strip()


def _drop_banner(text: str) -> str:
    """The first observation without textworld's ASCII-art title (lines without letters)."""
    lines = text.split("\n")
    start = 0
    while start < len(lines) and not any(c.isalpha() for c in lines[start]):
        start += 1
    return "\n".join(lines[start:]).strip()
