"""PDDL text for ALFWorld's domain: a drawn scene's problem and the planner's smaller problem.

Problems follow the layout of ALFWorld's own games: sections objects, init, goal; ALFRED's
mangled ids (``Fridge|+00.20|...`` written ``Fridge_bar__plus_00_dot_20...``); ``canContain``
facts for every receptacle and object type present (putting needs them); cleaning, heating and
cooling wired to ``SinkBasinType``, ``MicrowaveType`` and ``FridgeType`` by the domain.
:func:`relevant_problem` restates a game's current state on the part of it the goal can
involve, which is what the planner searches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentgym.envs.text.alfworld_data import LAMPS, AlfworldData, mangle, receptacle_type
from agentgym.envs.text.alfworld_scenes import Scene

_PROPERTY_FACTS = {
    "Cleanable": "cleanable",
    "Heatable": "heatable",
    "Coolable": "coolable",
    "Toggleable": "toggleable",
}


def render_problem(scene: Scene, name: str, data: AlfworldData) -> str:
    """The PDDL problem of ``scene`` in the layout of ALFWorld's games."""
    d = data
    otypes_present = sorted({oid.split("|")[0] for oid in scene.objects})
    rtypes_present = sorted({receptacle_type(r) for r in scene.receptacles})
    locations = sorted({*scene.receptacles.values(), scene.agent_location})

    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in d.otypes]
    decl += [f"{t}Type - rtype" for t in d.rtypes]
    decl += [f"{mangle(o)} - object" for o in sorted(scene.objects)]
    decl += [f"{mangle(r)} - receptacle" for r in sorted(scene.receptacles)]
    decl += [f"{mangle(loc)} - location" for loc in locations]

    init = [f"(atLocation agent1 {mangle(scene.agent_location)})"]
    for rid in sorted(scene.receptacles):
        rtype = receptacle_type(rid)
        init.append(f"(receptacleType {mangle(rid)} {rtype}Type)")
        init.append(f"(receptacleAtLocation {mangle(rid)} {mangle(scene.receptacles[rid])})")
        if rtype in d.openable:
            init.append(f"(openable {mangle(rid)})")
    for rtype in rtypes_present:
        for otype in otypes_present:
            if otype in d.can_contain.get(rtype, ()):
                init.append(f"(canContain {rtype}Type {otype}Type)")
    for oid in sorted(scene.objects):
        otype, m = oid.split("|")[0], mangle(oid)
        rid = scene.objects[oid]
        init.append(f"(objectType {m} {otype}Type)")
        if otype not in LAMPS:
            init.append(f"(pickupable {m})")
        if otype in d.movable:
            init.append(f"(isReceptacleObject {m})")
        for prop, fact in _PROPERTY_FACTS.items():
            if otype in d.action_objects[prop]:
                init.append(f"({fact} {m})")
        init.append(f"(inReceptacle {m} {mangle(rid)})")
        init.append(f"(objectAtLocation {m} {mangle(scene.receptacles[rid])})")

    goal = d.goals[scene.task_type]["pddl"].replace("#", "-")
    goal = goal.format(
        obj=scene.object_target, recep=scene.parent_target, toggle=scene.toggle_target
    )
    pad = "\n        "
    return (
        f"\n(define (problem {name})\n(:domain alfred)\n(:objects{pad}"
        + pad.join(decl)
        + f"\n        )\n\n(:init{pad}"
        + pad.join(init)
        + "\n        )\n\n"
        + goal
    )


def task_grammar(grammar: str, task_text: str) -> str:
    """ALFWorld's grammar with the task sentence (``add_task_to_grammar``)."""
    return grammar.replace("UNKNOWN GOAL", task_text)


# Receptacle types the domain wires to a goal predicate (CleanObject, HeatObject, CoolObject).
_WIRED = {
    "isclean": ("sinkbasintype", "sinktype"),
    "ishot": ("microwavetype",),
    "iscool": ("fridgetype",),
}
_GOAL_TYPE = re.compile(r"\b([a-z0-9]+type)\b")


def goal_section(problem: str) -> str:
    """The ``(:goal ...)`` section of a problem, with the closing parenthesis of ``define``."""
    i = problem.lower().rfind("(:goal")
    if i < 0:
        raise ValueError("the PDDL problem has no (:goal ...) section")
    return problem[i:]


def pairs(rows: Iterable[tuple[str, ...]]) -> dict[str, str]:
    """Binary facts' arguments as a mapping from the first to the second."""
    return {row[0]: row[1] for row in rows}


def relevant_problem(state: Any, goal: str) -> str:
    """A PDDL problem of the state's current facts restricted to what the goal can involve.

    Kept: the objects of the goal's types and whatever the agent holds; the receptacles of the
    goal's types, of the appliances the goal's predicates need, holding a kept object, or at the
    agent's location (plus one that can take a held object, if none of those can); their
    locations and the agent's. Every other receptacle and object only widens the search (each
    move costs 1 wherever it goes), so a plan here is a plan of the whole game, of the same
    length when the dropped parts would not shorten it.
    """
    facts: dict[str, list[tuple[str, ...]]] = {}
    for f in state.facts:
        # TextWorld records removed facts as "not_" facts; axioms are derived: neither is PDDL.
        if not f.name.startswith(("new-axiom", "not_")):
            facts.setdefault(f.name, []).append(tuple(v.name for v in f.arguments))
    types = set(_GOAL_TYPE.findall(goal.lower()))
    for pred, wired in _WIRED.items():
        if pred in goal.lower():
            types.update(wired)
    otype = pairs(facts.get("objecttype", []))
    rtype = pairs(facts.get("receptacletype", []))
    inside = facts.get("inreceptacle", [])
    r_loc = pairs(facts.get("receptacleatlocation", []))
    o_loc = pairs(facts.get("objectatlocation", []))
    agents = facts.get("atlocation", [])
    here = {loc for _, loc in agents}
    held = {o for _, o in facts.get("holds", [])}

    objects = {o for o, t in otype.items() if t in types} | held
    receptacles = {r for r, t in rtype.items() if t in types}
    receptacles |= {r for o, r in inside if o in objects}
    receptacles |= {r for r, loc in r_loc.items() if loc in here}
    can = set(facts.get("cancontain", []))
    for o in sorted(held - {o for o, t in otype.items() if t in types}):
        if not any((rtype[r], otype[o]) in can for r in receptacles):
            fits = sorted(r for r in rtype if (rtype[r], otype[o]) in can)
            receptacles.update(fits[:1])
    locations = here | {r_loc[r] for r in receptacles} | {o_loc[o] for o in objects if o in o_loc}
    kinds = {"agent", "otype", "rtype"}
    keep = {n for n, t in state.name2type.items() if t in kinds} | objects | receptacles | locations

    decl = sorted(f"{n} - {state.name2type[n]}" for n in keep)
    init = sorted(
        f"({name} {' '.join(args)})"
        for name, rows in facts.items()
        for args in rows
        if all(a in keep for a in args)
    )
    pad = "\n        "
    return (
        f"(define (problem relevant)\n(:domain alfred)\n(:objects{pad}"
        + pad.join(decl)
        + f"\n)\n(:init{pad}"
        + pad.join(init)
        + "\n)\n"
        + goal
    )
