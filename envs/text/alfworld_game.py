"""One ALFWorld game on TextWorld's PDDL engine, with the text derived fast.

The game engine is TextWorld's (``textworld.envs.pddl``: Fast Downward's successor generator
applies the operators, TextWorld's context-sensitive grammar words the feedback), and the
names are ALFWorld's (``AlfredDemangler``), so observations and admissible commands are the
ones ALFWorld's ``AlfredTWEnv`` shows. The text comes from
:class:`~agentgym.envs.text.alfworld_grammar.FastGrammar`, which derives TextWorld's text at a
fraction of the cost.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from typing import Any

from agentgym.core.errors import SnapshotMismatch
from agentgym.envs.text import alfworld_planning as planning
from agentgym.envs.text.alfworld_grammar import FastGrammar
from agentgym.envs.text.alfworld_pddl import goal_section


class AlfredGame:
    """One ALFWorld game: TextWorld's PDDL engine, ALFWorld's names, :class:`FastGrammar` text.

    ``reset()`` returns the intro; after ``step(command)``, ``feedback`` is the text of the last
    admissible command played (a command that is not admissible changes nothing: TextWorld
    then shows "Nothing happens."); ``admissible`` is the sorted list of commands (TextWorld's
    ``admissible_commands``).
    """

    def __init__(self, game: dict[str, Any]):
        """Load a parsed ``game.tw-pddl`` and take a planner library; ``reset`` starts play."""
        self.game = game
        self.domain: str = game["pddl_domain"]
        self.problem: str = game["pddl_problem"]
        self.goal = goal_section(self.problem)
        self.logic = planning.game_logic(self.domain, game["grammar"])
        self.text = FastGrammar(self.logic.grammar)
        self.translation = planning.translate(self.domain, self.problem)
        self._lib: Any = planning.LIBS.acquire()
        self.state: Any = None
        self.infos: dict[str, Any] = {}
        self.admissible: list[str] = []
        self._by_command: dict[str, Any] = {}
        self._by_operator: dict[str, Any] = {}
        self._commands: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self.feedback = ""

    def close(self) -> None:
        """Hand the planner library back (the game cannot be played afterwards)."""
        if self._lib is not None:
            planning.LIBS.release(self._lib)
            self._lib = None

    def __del__(self) -> None:
        """Hand the planner library back, as :meth:`close` does."""
        with contextlib.suppress(Exception):  # shutdown may have torn down planning
            self.close()

    # -------------------------------------------------------------- play
    def reset(self) -> str:
        """Start over; the intro text."""
        self.state = planning.new_state(self._lib, self.problem, self.logic, self.translation)
        if not self.infos:
            self.infos = planning.entity_infos(self.state)
        self.feedback = self.text.derive(self.state, self.infos, "#intro#", {}, {})
        self._refresh()
        return self.feedback

    def step(self, command: str) -> bool:
        """Play an admissible command (True; ``feedback`` is its text) or nothing (False)."""
        action = self._by_command.get(command)
        if action is None:
            return False
        self._apply(action)
        self.feedback = self.text.derive(
            self.state, self.infos, action.feedback_rule, self._variables(action), action.mapping
        )
        self._refresh()
        return True

    def replay(self, operators: Sequence[str]) -> str:
        """Apply operators by name (no text on the way); the feedback of the last one."""
        last = None
        for name in operators:
            action = self._by_operator.get(name)
            if action is None:
                raise SnapshotMismatch(f"operator {name!r} is not applicable on replay")
            self._apply(action)
            self._index_operators()
            last = action
        if last is None:
            self.feedback = self.text.derive(self.state, self.infos, "#intro#", {}, {})
        else:
            self.feedback = self.text.derive(
                self.state, self.infos, last.feedback_rule, self._variables(last), last.mapping
            )
        self._refresh()
        return self.feedback

    def operator_of(self, command: str) -> str:
        """The operator name an admissible command applies."""
        return str(self.state._operators[self._by_command[command].id].name)

    def _apply(self, action: Any) -> None:
        self.state.apply(action)

    def _variables(self, action: Any) -> dict[str, Any]:
        return {ph.name: self.infos[var.name] for ph, var in action.mapping.items()}

    def _index_operators(self) -> list[Any]:
        actions = self.state.all_applicable_actions()
        ops = self.state._operators
        self._by_operator = {ops[a.id].name: a for a in actions}
        return list(actions)

    def _command(self, action: Any) -> str:
        """An action's command as ``PddlEnv._gather_infos`` words it.

        It is remembered when the template's text cannot change during the game (see
        :meth:`FastGrammar.is_static`).
        """
        template = action.command_template
        key = (template, tuple(sorted((ph.name, v.name) for ph, v in action.mapping.items())))
        text = self._commands.get(key)
        if text is None:
            variables = self._variables(action)
            text = self.text.derive(self.state, self.infos, template, variables, action.mapping)
            if "{" in text or "}" in text:  # format_command's str.format (a no-op otherwise)
                text = text.format(**{k: info.name for k, info in self.infos.items()})
            if self.text.is_static(template, self.translation[2]):
                self._commands[key] = text
        return text

    def _refresh(self) -> None:
        """Admissible commands as TextWorld's ``PddlEnv._gather_infos`` words and orders them."""
        by_command: dict[str, Any] = {}
        for action in self._index_operators():
            by_command.setdefault(self._command(action), action)
        self._by_command = by_command
        self.admissible = sorted(by_command)

    # -------------------------------------------------------------- state
    @property
    def won(self) -> bool:
        """Whether the goal holds."""
        return bool(self.state.check_goal())

    def dynamic_facts(self) -> list[str]:
        """The facts actions can change, sorted (the engine state beyond the static scene).

        They include TextWorld's records of removed facts (``not_...``, which its grammar
        queries).
        """
        dynamic = self.translation[2]
        return sorted(
            str(f)
            for sig, fs in self.state._facts.items()
            if sig.name.removeprefix("not_") in dynamic
            for f in fs
        )

    def state_key(self) -> str:
        """sha1 of the dynamic facts."""
        return hashlib.sha1("\n".join(self.dynamic_facts()).encode()).hexdigest()

    def plan(self) -> list[str] | None:
        """The planner's commands from the current state to the goal, or None."""
        operators = planning.plan(self.domain, self.state, self.goal)
        if operators is None:
            return None
        return list(self.state.plan_to_templated_actions(operators, self.infos))
