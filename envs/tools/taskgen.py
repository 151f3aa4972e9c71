"""The shared kit of the tool domains: schema builders, task drafts, replay and drawing.

A domain describes its tools with the schema builders below and draws its tasks from
templates. A template draws entities with a seeded rng, runs its gold calls on a private copy
of the initial state (:class:`Replay`) and returns a :class:`Draft`: the request, the facts
the answer must hold and, for clarification tasks, the scripted user's reply and the detail
the request leaves out. :func:`draw_tasks` cycles each task type's templates into
:class:`~agentgym.envs.tools.backend.Task` objects under the domain's :class:`Drawing` rules.

Templates that differ only in data are recipes: rows of a domain's ``tasks.json`` that
:func:`run_recipe` turns into drafts; the others are methods of the domain's
:class:`TaskGen` subclass. ``tasks.json`` holds ``types`` (each task type's template names,
in the order they are cycled), ``tables`` (named lookup tables) and ``recipes`` (the rows,
by template name).

A recipe row has these keys, all optional but ``request``:

* ``slots``: values drawn in order before the calls, each a dict naming the ``slot`` (or a
  list of names that the drawn sequence unpacks into) and how to draw it: ``choice`` (a
  pool name or a literal list; ``rng.choice``), ``pick`` (like choice, but the template
  yields nothing when the pool is empty), ``phrase`` (like choice, over format strings
  then formatted with the slots so far), ``int`` (``[low, high]``; ``rng.randint``),
  ``sample`` with ``k`` (``rng.sample``), ``fn`` with ``args`` (a method of the
  :class:`TaskGen`; the template yields nothing when it returns None), ``lookup`` with
  ``key`` (a named table's entry) or ``mul`` with ``add`` (the product of references and
  numbers, plus a number).
* ``calls``: ``[tool name, arguments]`` pairs; run one per turn, or all in one turn when
  ``together`` is true.
* ``require``: result paths that must be truthy, else the template yields nothing.
* ``request``: a format string over the slots, or a list of them to draw one from last.
* ``facts``: result paths whose values the answer must quote.
* ``reply`` and ``hidden``: the scripted user's reply (a format string) and the detail the
  request leaves out (argument name to reference).

A reference is a string ``"$slot"`` or ``"$slot.key.0"``; any other value is literal. In
arguments, a key ``"*"`` splices in the dict its reference names. A result path such as
``"0.options.0.cost"`` starts with the call's index; a part ``":3"`` spreads over the first
three items of a list.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from agentgym.envs.tools.backend import TASK_TYPES, Call, Domain, Task
from agentgym.envs.tools.scheduler import conflicts

# --------------------------------------------------------------------------- schema builders


def typed(json_type: str | list[str], **keywords: Any) -> dict[str, Any]:
    """A JSON Schema of one type with more keywords, in the order given.

    Args:
        json_type: the ``type`` keyword, e.g. "string" or ``["string", "null"]``.
        **keywords: further keywords (description, pattern, enum, minimum, ...).

    Returns:
        The schema ``{"type": json_type, **keywords}``.
    """
    return {"type": json_type, **keywords}


def string(description: str, **extra: Any) -> dict[str, Any]:
    """A described string schema with extra keywords (pattern, format, enum, ...)."""
    return typed("string", description=description, **extra)


def integer(description: str, **extra: Any) -> dict[str, Any]:
    """A described integer schema with extra keywords (minimum, maximum)."""
    return typed("integer", description=description, **extra)


def number(description: str, **extra: Any) -> dict[str, Any]:
    """A described number schema with extra keywords (minimum, maximum)."""
    return typed("number", description=description, **extra)


def nullable(description: str) -> dict[str, Any]:
    """A described schema of a string or null."""
    return typed(["string", "null"], description=description)


def enum(values: Sequence[str], description: str = "") -> dict[str, Any]:
    """A string schema limited to ``values``, described when ``description`` is given."""
    schema = typed("string", enum=list(values))
    if description:
        schema["description"] = description
    return schema


def array(items: dict[str, Any], description: str = "") -> dict[str, Any]:
    """An array schema of ``items``, described when ``description`` is given."""
    schema = typed("array", items=items)
    if description:
        schema["description"] = description
    return schema


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A strict object schema (no other properties).

    Args:
        properties: the property schemas, in order.
        required: the required property names; every property when None.

    Returns:
        The object schema.
    """
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


# --------------------------------------------------------------------------- drafts and replay

GREETINGS = ("", "Hi! ", "Hello! ", "Hi there. ", "Good morning. ")
"""Openings a clarification request may start with (the empty one included)."""


def fact(value: Any) -> str:
    """A result value as its JSON text shows it: strings as they are, the rest JSON-encoded."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class Draft:
    """A task before its id.

    Attributes:
        request: what the user asks.
        facts: the strings the final summary must contain.
        reply: the scripted user's answer to a question ("" for the default one).
        hidden: for clarification tasks, the argument the request leaves out and its value.
    """

    request: str
    facts: Sequence[str] = ()
    reply: str = ""
    hidden: dict[str, str] = field(default_factory=dict)


class Replay:
    """Gold calls of one draft, run turn by turn on a private copy of the initial state."""

    def __init__(self, domain: Domain, state: dict[str, Any]) -> None:
        """Copy ``state`` (JSON-able) for ``domain``'s calls to change."""
        self.domain = domain
        self.state: dict[str, Any] = json.loads(json.dumps(state))
        self.turns: list[tuple[Call, ...]] = []
        self.results: list[Any] = []

    def turn(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        """Issue ``calls`` (name, arguments) together as one turn; their results in order."""
        made = tuple(Call(name, args) for name, args in calls)
        out = [self.domain.call(self.state, c.name, copy.deepcopy(c.arguments)) for c in made]
        self.turns.append(made)
        self.results.extend(out)
        return out

    def one(self, name: str, arguments: dict[str, Any] | None = None, /, **more: Any) -> Any:
        """A turn of one call (``arguments`` updated with ``more``); its result."""
        return self.turn((name, {**(arguments or {}), **more}))[0]


def keeps_rules(task_type: str, draft: Draft, run: Replay) -> bool:
    """Whether a draft has the shape its type asks for (see ``TASK_TYPES``).

    Every tool task quotes one to three facts found in its results. Single and clarification
    tasks make one call; multiple tasks two or three different calls over as many turns;
    parallel tasks two to four calls in one turn on resources that do not conflict; dependent
    tasks chain two or three calls, each later one taking a string found only in earlier
    results; clarification tasks hide an argument value that only the reply gives.

    Args:
        task_type: one of ``TASK_TYPES``.
        draft: the template's draft.
        run: the replay that made the draft's gold calls.

    Returns:
        True when the draft keeps its type's rules.
    """
    turns, facts = run.turns, draft.facts
    if task_type == "irrelevance":
        return not turns and not facts
    shown = [json.dumps(r) for r in run.results]
    if not 1 <= len(facts) <= 3 or any(f not in " ".join(shown) for f in facts):
        return False
    shape = [len(t) for t in turns]
    if task_type in ("single", "clarification") and shape != [1]:
        return False
    if task_type == "multiple":
        names = [c.name for t in turns for c in t]
        return 2 <= len(turns) <= 3 and set(shape) == {1} and len(set(names)) == len(names)
    if task_type == "parallel":
        res = [run.domain.resources(c.name, c.arguments) for c in turns[0]] if turns else []
        return (
            len(turns) == 1
            and 2 <= len(res) <= 4
            and not any(conflicts(*a, *b) for i, a in enumerate(res) for b in res[i + 1 :])
        )
    if task_type == "dependent":
        if not 2 <= len(turns) <= 3 or set(shape) != {1}:
            return False
        return all(
            any(
                isinstance(v, str) and v not in draft.request and v in " ".join(shown[:j])
                for v in turns[j][0].arguments.values()
            )
            for j in range(1, len(turns))
        )
    if task_type == "clarification":
        args = turns[0][0].arguments
        return bool(draft.hidden) and all(
            v not in draft.request and v in draft.reply and args.get(k) == v
            for k, v in draft.hidden.items()
        )
    return True


# --------------------------------------------------------------------------- drawing

Template = Callable[[], Draft | None]
"""A template bound to its :class:`TaskGen`: a draft, or None when no entity fits."""


class NoTaskFits(RuntimeError):
    """No template of a task type gave an acceptable draft for this state."""


@dataclass(frozen=True)
class Recipes:
    """A domain's ``tasks.json``: template order per type, lookup tables and recipe rows."""

    types: dict[str, list[str]]
    tables: dict[str, Any]
    recipes: dict[str, dict[str, Any]]


@functools.cache
def load_recipes(package: str, name: str = "tasks.json") -> Recipes:
    """Read a domain package's recipe file (cached).

    Args:
        package: the domain package, e.g. "agentgym.envs.tools.domains.ecommerce".
        name: the data file inside it.

    Returns:
        The file's types, tables and recipes.
    """
    data = json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    missing = [t for t in TASK_TYPES if t not in data["types"]]
    if missing:
        raise ValueError(f"{package}/{name} lists no templates for {missing}")
    return Recipes(data["types"], data.get("tables", {}), data.get("recipes", {}))


@dataclass(frozen=True)
class Drawing:
    """How a domain turns templates into tasks.

    Attributes:
        type_seed: each type draws from ``random.Random(seed * type_seed + type index)``;
            when 0, one ``random.Random(seed)`` serves every type in turn.
        tries: consecutive attempts per template before moving to the next one.
        attempts: attempts per task before giving up (0: ``tries`` times the templates).
        unique: what must not repeat: "" (nothing), "request" or "request+reply".
        unique_across_types: whether uniqueness spans all types rather than each one.
        rules: whether drafts must keep :func:`keeps_rules`.
    """

    type_seed: int = 0
    tries: int = 1
    attempts: int = 0
    unique: str = ""
    unique_across_types: bool = False
    rules: bool = False

    def key(self, draft: Draft) -> tuple[str, ...]:
        """What identifies ``draft`` among the drafts that must differ."""
        if self.unique == "request":
            return (draft.request,)
        if self.unique == "request+reply":
            return (draft.request, draft.reply)
        return ()


class TaskGen:
    """The context templates draw from: the domain, its initial state and a seeded rng.

    Subclasses add their entity pools (``pools``), pickers and the templates that are
    Python methods; :meth:`templates` binds recipes and methods in ``tasks.json`` order.
    """

    def __init__(self, domain: Domain, state: dict[str, Any], recipes: Recipes) -> None:
        """Bind the generator to ``domain``'s initial ``state`` (never changed here)."""
        self.domain = domain
        self.state = state
        self.recipes = recipes
        self.tables: dict[str, Any] = dict(recipes.tables)
        self.pools: dict[str, Sequence[Any]] = {"greetings": GREETINGS}
        self.rng = random.Random(0)
        self.run = Replay(domain, state)

    def pick(self, items: Sequence[Any]) -> Any:
        """A random item of ``items``, or None (drawing nothing) when it is empty."""
        return self.rng.choice(items) if items else None

    def phrase(self, *options: str) -> str:
        """One of ``options``, at random."""
        return self.rng.choice(options)

    def entity(self, collection: str, key: str) -> dict[str, Any]:
        """The entity ``state[collection][key]`` of the initial state."""
        found: dict[str, Any] = self.state[collection][key]
        return found

    def templates(self, task_type: str) -> list[Template]:
        """The type's templates in cycling order: recipes and methods by name."""
        out: list[Template] = []
        for name in self.recipes.types[task_type]:
            row = self.recipes.recipes.get(name)
            out.append(
                getattr(self, name) if row is None else functools.partial(run_recipe, self, row)
            )
        return out


def draw_tasks(gen: TaskGen, seed: int, per_type: int, drawing: Drawing) -> list[Task]:
    """``per_type`` tasks of every type, ids ``<domain>-<type>-<k:04d>``.

    The k-th task of a type comes from the first acceptable draft of template k, then the
    next templates in turn; each attempt runs on a fresh :class:`Replay`.

    Args:
        gen: the domain's generator over the initial state.
        seed: the task seed.
        per_type: tasks of each type.
        drawing: the domain's drawing rules.

    Returns:
        The tasks, type by type in ``TASK_TYPES`` order.
    """
    out: list[Task] = []
    seen: set[tuple[str, ...]] = set()
    gen.rng = random.Random(seed)
    for index, task_type in enumerate(TASK_TYPES):
        if drawing.type_seed:
            gen.rng = random.Random(seed * drawing.type_seed + index)
        if not drawing.unique_across_types:
            seen = set()
        templates = gen.templates(task_type)
        out += [_draw_one(gen, task_type, templates, k, seen, drawing) for k in range(per_type)]
    return out


def _draw_one(
    gen: TaskGen,
    task_type: str,
    templates: list[Template],
    k: int,
    seen: set[tuple[str, ...]],
    drawing: Drawing,
) -> Task:
    """The k-th task of a type (see :func:`draw_tasks`)."""
    for attempt in range(drawing.attempts or drawing.tries * len(templates)):
        gen.run = Replay(gen.domain, gen.state)
        draft = templates[(k + attempt // drawing.tries) % len(templates)]()
        if draft is None:
            continue
        key = drawing.key(draft)
        if key and key in seen:
            continue
        if drawing.rules and not keeps_rules(task_type, draft, gen.run):
            continue
        if key:
            seen.add(key)
        extra = {"clarify_reply": draft.reply} if draft.reply else {}
        return Task(
            id=f"{gen.domain.name}-{task_type}-{k:04d}",
            task_type=task_type,
            request=draft.request,
            gold_calls=tuple(gen.run.turns),
            answer_facts=tuple(draft.facts),
            hidden_facts=dict(draft.hidden),
            **extra,
        )
    raise NoTaskFits(f"no acceptable {task_type} {gen.domain.name} task #{k} for this state")


# --------------------------------------------------------------------------- recipes

_SKIP = object()
"""What a slot draws when the template has no entity that fits."""


def values_at(value: Any, path: str) -> list[Any]:
    """The values at a dotted ``path`` under ``value`` (a ``":n"`` part spreads).

    Args:
        value: nested dicts and lists.
        path: e.g. "0.options.0.cost" or "0.orders.:3.order_id".

    Returns:
        One value per item the spread parts reached (one value without them).
    """
    found = [value]
    for part in path.split("."):
        if part.startswith(":"):
            found = [item for v in found for item in v[: int(part[1:])]]
        elif part.lstrip("-").isdigit():
            found = [v[int(part)] for v in found]
        else:
            found = [v[part] for v in found]
    return found


def resolve(template: Any, slots: Mapping[str, Any]) -> Any:
    """``template`` with its references replaced by copies of the slot values they name."""
    if isinstance(template, str):
        if not template.startswith("$"):
            return template
        name, _, path = template[1:].partition(".")
        value = slots[name]
        return copy.deepcopy(values_at(value, path)[0] if path else value)
    if isinstance(template, dict):
        out: dict[str, Any] = {}
        for key, item in template.items():
            if key == "*":
                out.update(resolve(item, slots))
            else:
                out[key] = resolve(item, slots)
        return out
    if isinstance(template, list):
        return [resolve(item, slots) for item in template]
    return template


def _pool(gen: TaskGen, source: Any) -> Sequence[Any]:
    """A literal list, or the generator's pool or table of that name."""
    if not isinstance(source, str):
        return list(source)
    return gen.pools[source] if source in gen.pools else gen.tables[source]


def _draw(gen: TaskGen, spec: Mapping[str, Any], slots: Mapping[str, Any]) -> Any:
    """One slot's value (``_SKIP`` when no entity fits); see the module docstring."""
    rng = gen.rng
    if "choice" in spec:
        return rng.choice(_pool(gen, spec["choice"]))
    if "pick" in spec:
        found = gen.pick(_pool(gen, spec["pick"]))
        return _SKIP if found is None else found
    if "phrase" in spec:
        return str(rng.choice(_pool(gen, spec["phrase"]))).format(**slots)
    if "int" in spec:
        low, high = spec["int"]
        return rng.randint(low, high)
    if "sample" in spec:
        return rng.sample(_pool(gen, spec["sample"]), spec["k"])
    if "fn" in spec:
        found = getattr(gen, spec["fn"])(*resolve(spec.get("args", []), slots))
        return _SKIP if found is None else found
    if "lookup" in spec:
        return gen.tables[spec["lookup"]][resolve(spec["key"], slots)]
    if "mul" in spec:
        return math.prod(resolve(spec["mul"], slots)) + spec.get("add", 0)
    raise ValueError(f"a recipe slot without a way to draw it: {dict(spec)}")


def _fill(gen: TaskGen, specs: Sequence[Mapping[str, Any]], slots: dict[str, Any]) -> bool:
    """Draw ``specs`` into ``slots`` in order; False as soon as one finds nothing."""
    for spec in specs:
        value = _draw(gen, spec, slots)
        if value is _SKIP:
            return False
        name = spec["slot"]
        if isinstance(name, list):
            slots.update(zip(name, value, strict=True))
        else:
            slots[name] = value
    return True


def run_recipe(gen: TaskGen, row: Mapping[str, Any]) -> Draft | None:
    """The draft of one recipe row (see the module docstring), or None when none fits.

    Args:
        gen: the generator, whose ``run`` is a fresh replay.
        row: the recipe.

    Returns:
        The draft, or None.
    """
    slots: dict[str, Any] = {}
    if not _fill(gen, row.get("slots", ()), slots):
        return None
    calls = [(name, resolve(args, slots)) for name, args in row.get("calls", ())]
    if row.get("together"):
        gen.run.turn(*calls)
    else:
        for call in calls:
            gen.run.turn(call)
    results = gen.run.results
    if not all(values_at(results, path)[0] for path in row.get("require", ())):
        return None
    request = row["request"]
    if isinstance(request, list):
        request = gen.rng.choice(request)
    return Draft(
        request.format(**slots),
        [fact(v) for path in row.get("facts", ()) for v in values_at(results, path)],
        row.get("reply", "").format(**slots),
        {k: resolve(v, slots) for k, v in row.get("hidden", {}).items()},
    )
