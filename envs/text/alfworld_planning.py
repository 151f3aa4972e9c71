"""Fast Downward and TextWorld's PDDL engine, as the ALFWorld games use them.

Planner libraries are pooled (:data:`LIBS`); a game's translation, parsed logic and initial
state are made once per process; :func:`plan` asks Fast Downward for a plan on the part of the
state the goal can involve (:func:`~agentgym.envs.text.alfworld_pddl.relevant_problem`: on a
whole floor plan its search can take over a minute otherwise). :func:`check_solvable` is the
check every generated game passes: the plan, executed operator by operator in the whole game,
reaches the goal.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import json
import re
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from agentgym.envs.text.alfworld_data import import_alfworld
from agentgym.envs.text.alfworld_pddl import goal_section, relevant_problem


@contextlib.contextmanager
def preserved_argv() -> Iterator[None]:
    """Keep ``sys.argv`` intact across Fast Downward's translator (which overwrites it)."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


class LibPool:
    """Fast Downward libraries, reused across games.

    TextWorld's ``fast_downward.load_lib`` copies the 33 MB shared library and loads the copy
    (the planner's state is global to a copy), so each live game needs its own; a game that
    ends hands its library back here instead of loading a new copy every time.
    """

    def __init__(self) -> None:
        """Start with no library loaded."""
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def acquire(self) -> Any:
        """A library no live game uses."""
        with self._lock:
            if self._free:
                return self._free.pop()
        import fast_downward

        return fast_downward.load_lib()

    def release(self, lib: Any) -> None:
        """Hand ``lib`` back for the next game."""
        with self._lock:
            self._free.append(lib)


LIBS = LibPool()


def plan(domain: str, state: Any, goal: str) -> list[str] | None:
    """Fast Downward's plan (operator names) from the state's current facts to the goal."""
    import fast_downward

    problem = relevant_problem(state, goal)
    lib = LIBS.acquire()
    try:
        with preserved_argv():
            _, sas = fast_downward.pddl2sas(domain, problem, optimize=True)
        if not lib.solve_sas(sas.encode("utf-8"), False):
            return None
        ops = (fast_downward.Operator * lib.get_last_plan_length())()
        lib.get_last_plan(ops)
        return [op.name for op in ops]
    finally:
        LIBS.release(lib)


@functools.lru_cache(maxsize=16)
def _parsed_logic(domain: str, grammar: str) -> Any:
    from textworld.envs.pddl import logic

    return logic.GameLogic(domain=domain, grammar=grammar)


_TASK_RULE = re.compile(r'"task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"((?:[^"\\]|\\.)*)"\s*\}\s*\]')
_TASK_SLOT = "UNKNOWN GOAL"


@functools.lru_cache(maxsize=64)
def game_logic(domain: str, grammar: str) -> Any:
    """TextWorld's game logic (actions, grammar) of a game, parsed once per process.

    ALFWorld's games share one grammar but for the task sentence, so a grammar whose only
    ``"task"`` rule is a plain sentence is parsed once with the sentence as a slot, and each
    game gets a copy whose ``task`` rule is the sentence parsed as TextWorld parses it (the
    rest of the parsed grammar is shared, read-only).
    """
    match = _TASK_RULE.search(grammar)
    if match is None or grammar.count('"task"') != 1:
        return _parsed_logic(domain, grammar)
    template = grammar[: match.start(1)] + _TASK_SLOT + grammar[match.end(1) :]
    base = _parsed_logic(domain, template)
    textgen = importlib.import_module("textworld.envs.pddl.textgen")
    sentence = json.loads(f'"{match.group(1)}"')
    task = textgen.ProductionRule(
        lhs="task",
        rhs=textgen._parse_and_convert(sentence, rule_name="symbols"),
        weight=1,
        condition="",
    )
    grammar_copy = textgen.ContextSensitiveGrammar()
    grammar_copy._rules.update({k: list(v) for k, v in base.grammar._rules.items()})
    grammar_copy._rules["task"] = [task]
    logic = copy.copy(base)
    logic.grammar = grammar_copy
    return logic


@functools.lru_cache(maxsize=64)
def translate(domain: str, problem: str) -> tuple[Any, str, frozenset[str]]:
    """Fast Downward's translation of a game, done once per process.

    Returns its task, SAS text, and the predicates actions change.
    """
    import fast_downward

    with preserved_argv():
        task, sas = fast_downward.pddl2sas(domain, problem)
    dynamic = frozenset(e.literal.predicate for a in task.actions for e in a.effects)
    return task, sas, dynamic


def new_state(lib: Any, problem: str, logic: Any, translation: tuple[Any, str, Any]) -> Any:
    """TextWorld's ``PddlState`` of a game's initial state, on the library ``lib``.

    The body of ``PddlState.__init__`` with the translation reused (see :func:`translate`) and
    without the second, optimised translation it makes for its own replanner: plans come from
    :func:`plan` instead.
    """
    import fast_downward
    import textworld.logic as tw_logic
    from textworld.envs.pddl.logic import Atom, PddlState

    state = PddlState.__new__(PddlState)
    state._facts = defaultdict(set)
    state._vars_by_name = {}
    state._vars_by_type = defaultdict(set)
    state._var_counts = Counter()
    state._logic = logic
    state.downward_lib = lib
    state.pddl_problem = problem
    state.task, state.sas, _ = translation
    state._actions = {a.name: a for a in state.task.actions}
    for type_ in state.task.types:
        with contextlib.suppress(ValueError):
            logic.types.add(tw_logic.Type(type_.name, type_.supertype_names))
    lib.load_sas(state.sas.encode("utf-8"))
    name2type = {o.name: o.type_name for o in state.task.objects}
    state.name2type = name2type
    pddl = fast_downward.translate.pddl

    def proposition(atom: Any) -> Any:
        if isinstance(atom, pddl.conditions.Atom):
            if atom.predicate == "=":
                return None
            args = [tw_logic.Variable(a, name2type[a]) for a in atom.args]
            return tw_logic.Proposition(atom.predicate, args)
        if isinstance(atom, pddl.f_expression.Assign):
            if atom.fluent.symbol == "total-cost":
                return None
            name = f"{atom.expression.value}"
            if str.isdigit(name):
                return None
            args = [tw_logic.Variable(a, name2type[a]) for a in atom.fluent.args]
            return tw_logic.Proposition(name, args)
        return None

    state.add_facts([p for p in map(proposition, state.task.init) if p is not None])
    atoms = (Atom * lib.get_state_size())()
    lib.get_state(atoms)
    facts = [atom.get_fact(name2type) for atom in atoms]
    state.add_facts([f for f in facts if not f.is_negation])
    return state


def execute(state: Any, operator_names: Sequence[str]) -> bool:
    """Apply the operators by name from the current state; True when the goal then holds."""
    for name in operator_names:
        actions = state.all_applicable_actions()
        by_name = {state._operators[a.id].name: a for a in actions}
        if name not in by_name:
            return False
        state.apply(by_name[name])
    return bool(state.check_goal())


def check_solvable(domain: str, grammar: str, problem: str) -> list[str] | None:
    """The planner's plan as commands if executing it in the game reaches the goal, else None."""
    lib = LIBS.acquire()
    try:
        state = new_state(lib, problem, game_logic(domain, grammar), translate(domain, problem))
        if state.check_goal():
            return None  # already won: not a task
        operators = plan(domain, state, goal_section(problem))
        if not operators:
            return None
        commands = state.plan_to_templated_actions(operators, entity_infos(state))
        return list(commands) if execute(state, operators) else None
    finally:
        LIBS.release(lib)


def entity_infos(state: Any) -> dict[str, Any]:
    """TextWorld's entity infos of a state, named as ALFWorld names them (``AlfredDemangler``)."""
    from textworld.generator.game import EntityInfo

    misc = import_alfworld("alfworld.agents.utils.misc")
    infos = {}
    for fact in state.facts:
        for v in fact.arguments:
            if v.name not in infos:
                info = EntityInfo(v.name, v.type)
                info.name, info.definite, info.indefinite = v.name, "the", "a"
                infos[v.name] = info
    demangler = misc.Demangler(game_infos=infos, shuffle=False)
    for info in infos.values():
        info.name = demangler.demangle_alfred_name(info.id)
    return infos
