"""Credit-assignment variants: a registry of plugins and the plan that runs them.

A variant is a :class:`CreditVariant` subclass in ``baselines/credit/<name>.py`` (every module
of the package is imported with it), registered by name with :func:`register`, overriding only
the hooks it needs. Every hook has the signature ``hook(self, batch, ctx)``; the trainer calls
them, in this order, only through :meth:`Plan.run`, and never names a variant::

    plan = compose("gigpo+proas", config)   # refuses unknown names and clashing single slots
    plan.check(env)                        # refuses envs lacking an info key or ability
    for hook in HOOKS: plan.run(hook, batch, ctx)

``sample`` and ``advantages`` are single slots (one owner each, defaults ``group`` and
``grpo``); the other hooks chain in the order the variants were named.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar

import gymnasium as gym

from agentgym.baselines.batch import Batch, Context, Key, StepContext, Trajectory, Turn
from agentgym.baselines.losses import AGGREGATIONS
from agentgym.baselines.policies.base import Policy
from agentgym.core.errors import BadInput

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_AGGREGATION",
    "HOOKS",
    "REGISTRY",
    "SINGLE_SLOTS",
    "Batch",
    "Context",
    "CreditVariant",
    "Key",
    "Plan",
    "Policy",
    "StepContext",
    "Trajectory",
    "Turn",
    "compose",
    "env_domains",
    "get",
    "names",
    "register",
    "resolve_config",
]

HOOKS = ("sample", "transform", "score", "advantages", "shape", "aux_loss", "grad_hook")
"""Hook names in the order the training loop calls them."""
SINGLE_SLOTS: dict[str, str] = {"sample": "group", "advantages": "grpo"}
"""Hooks exactly one variant provides, with the variant used when none is named."""
DEFAULT_AGGREGATION = "token-mean"
"""Loss aggregation when neither the config nor any variant asks for one."""

_MISSING = object()


def _lookup(config: Any, key: str, default: Any = _MISSING) -> Any:
    """``config[key]`` for a mapping, ``config.key`` otherwise."""
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


class CreditVariant:
    """Base class of credit-assignment variants: seven no-op hooks and what a variant needs.

    Class attributes a subclass sets:
        name: the registered name (set by :func:`register`).
        requires_info: ``info`` keys the env must return (checked on ``reset(seed=0)``).
        requires_abilities: env abilities: ``snapshot``, ``privileged``, ``check_answer``, or
            the name of any other method of ``env.unwrapped`` (e.g. ``set_rng``).
        aggregation: the loss aggregation the method's paper uses, or None for no preference.
        requires_teachers: the run must name teacher checkpoints (``--teachers``); a
            variant that reads particular teachers also overrides :meth:`teacher_problems`.
        Config: a frozen dataclass of the variant's settings (field docstrings = help text).

    ``slots`` is derived: the hooks the subclass overrides.
    """

    name: ClassVar[str] = ""
    requires_info: ClassVar[frozenset[str]] = frozenset()
    requires_abilities: ClassVar[frozenset[str]] = frozenset()
    aggregation: ClassVar[str | None] = None
    requires_teachers: ClassVar[bool] = False
    slots: ClassVar[frozenset[str]] = frozenset()

    @dataclass(frozen=True)
    class Config:
        """No settings."""

    def __init_subclass__(cls, **kwargs: Any):
        """Derive the subclass's ``slots`` and check its ``aggregation``."""
        super().__init_subclass__(**kwargs)
        cls.slots = frozenset(h for h in HOOKS if getattr(cls, h) is not getattr(CreditVariant, h))
        cls.requires_info = frozenset(cls.requires_info)
        cls.requires_abilities = frozenset(cls.requires_abilities)
        if cls.aggregation is not None and cls.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"{cls.__name__}.aggregation = {cls.aggregation!r} is not one of {AGGREGATIONS}"
            )

    def __init__(self, config: Any = None):
        """Read this variant's settings from ``config`` (see :func:`resolve_config`)."""
        self.cfg = resolve_config(type(self), config)

    def __repr__(self) -> str:
        """The class name and the settings."""
        return f"{type(self).__name__}({self.cfg})"

    @property
    def needs_reference(self) -> bool:
        """Whether this variant reads ``ctx.ref`` (the trainer then keeps a frozen copy)."""
        return False

    def teacher_problems(self, names: Sequence[str], domains: Sequence[str]) -> list[str]:
        """Why this variant cannot run with the teacher checkpoints ``names`` (empty: it can).

        ``domains`` are the ``info["domain"]`` values of the env's tasks (empty when unknown).
        Checked at start-up by :meth:`Plan.check_teachers`; the default finds nothing.
        """
        return []

    def info_problems(self, env_id: str, info: Mapping[str, Any]) -> list[str]:
        """What is wrong with env ``env_id`` beyond missing keys: e.g. an empty text in ``info``.

        ``info`` is the reset the probe made (its keys are checked by ``requires_info``);
        :meth:`Plan.check` calls this. The default finds nothing.
        """
        return []

    # ------------------------------------------------------------------ hooks, in loop order
    def sample(self, batch: Batch, ctx: Context) -> None:
        """Fill ``batch.trajectories`` with rollouts (single slot; default ``group``)."""

    def transform(self, batch: Batch, ctx: Context) -> None:
        """Edit the trajectories before scoring: rollout editing, probe insertion, tagging."""

    def score(self, batch: Batch, ctx: Context) -> None:
        """Extra forward passes without grad (values, teacher or reference log-probs, probes).

        Results go into ``Turn``/``Trajectory`` fields or their ``extras``.
        """

    def advantages(self, batch: Batch, ctx: Context) -> None:
        """Fill ``batch.advantages`` with [L] token arrays keyed by ``(i, k)``.

        A single slot; the default is ``grpo``.
        """

    def shape(self, batch: Batch, ctx: Context) -> None:
        """Edit ``batch.advantages`` in place: add a term, mask, reweight, route."""

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Any, dict[str, float]] | None:
        """An extra loss added to the policy loss, as ``(scalar tensor, metrics)``, or None."""
        return None

    def grad_hook(self, batch: Batch, ctx: Context) -> None:
        """After backward, before ``optimizer.step``: gradient surgery."""


VariantT = TypeVar("VariantT", bound=CreditVariant)


def resolve_config(cls: type[CreditVariant], config: Any) -> Any:
    """The settings of variant ``cls`` (an instance of ``cls.Config``) taken from ``config``.

    ``config`` may be None (defaults), a ``cls.Config``, or a run config (mapping or object)
    holding either a sub-config under the variant's name (``config.gigpo = {"omega": 0.5}``
    or a ``GiGPO.Config``) or flat prefixed fields (``config.gigpo_omega = 0.5``).
    """
    Config = cls.Config
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    own = _lookup(config, cls.name, None)
    if isinstance(own, Config):
        return own
    valid = [f.name for f in fields(Config)]
    given: dict[str, Any] = {}
    if isinstance(own, Mapping):
        given = dict(own)
        unknown = sorted(set(given) - set(valid))
        if unknown:
            raise BadInput(
                f"unknown {cls.name} settings {unknown}: valid are {', '.join(valid) or 'none'}"
            )
    elif own is not None:
        given = {n: getattr(own, n) for n in valid if hasattr(own, n)}
    else:
        for n in valid:
            value = _lookup(config, f"{cls.name}_{n}")
            if value is not _MISSING:
                given[n] = value
    return Config(**given)


# ---------------------------------------------------------------------- registry
REGISTRY: dict[str, type[CreditVariant]] = {}
"""Registered variants by name. Add with :func:`register`; never clear it."""


def register(name: str):
    """Class decorator: register a :class:`CreditVariant` under ``name``.

    Raises:
        ValueError: ``name`` is taken by another class, or is not a plain lowercase name.
    """
    if not name or name != name.strip().lower() or any(c in name for c in "+: "):
        raise ValueError(f"credit variant names are lowercase without '+', ':' or spaces: {name!r}")

    def decorator(cls: type[VariantT]) -> type[VariantT]:
        if not (isinstance(cls, type) and issubclass(cls, CreditVariant)):
            raise TypeError(f"@register({name!r}) needs a CreditVariant subclass, got {cls!r}")
        old = REGISTRY.get(name)
        if old is not None and old is not cls:
            raise ValueError(
                f"credit variant {name!r} is already registered by "
                f"{old.__module__}.{old.__qualname__}"
            )
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return decorator


def names() -> list[str]:
    """The registered variant names, sorted."""
    return sorted(REGISTRY)


def get(name: str) -> type[CreditVariant]:
    """The variant class registered as ``name``, or imported from ``"module:Class"``.

    Raises:
        BadInput: unknown name (the message lists the valid ones).
    """
    if ":" in name:
        module, _, qualname = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), qualname)
        except (ImportError, AttributeError) as e:
            raise BadInput(f"cannot load credit variant {name!r}: {e}") from None
        if not (isinstance(cls, type) and issubclass(cls, CreditVariant)):
            raise BadInput(f"{name!r} is not a CreditVariant subclass")
        return cls
    if name not in REGISTRY:
        close = difflib.get_close_matches(name, REGISTRY, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise BadInput(
            f"unknown credit variant {name!r}.{hint} Valid variants: {', '.join(names())}"
        )
    return REGISTRY[name]


# ---------------------------------------------------------------------- composition
def _env_name(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__


def _lacks(env: gym.Env, ability: str) -> str | None:
    """Why ``env`` lacks ``ability``, or None if it has it."""
    u = env.unwrapped
    if ability == "snapshot":
        if not getattr(u, "supports_snapshot", False):
            return "env.unwrapped.supports_snapshot is not True"
        return None
    if ability == "privileged":
        try:
            spec = getattr(env, "spec", None)
            if spec is not None:
                twin = gym.make(spec, privileged=True)
            else:
                args, kwargs = getattr(u, "_init_args", ((), {}))
                twin = type(u)(*args, **{**kwargs, "privileged": True})
        except Exception as e:
            return f"it cannot be made with privileged=True ({type(e).__name__}: {e})"
        twin.close()
        return None
    method = getattr(u, ability, None)
    if not callable(method):
        return f"env.unwrapped has no {ability}() method"
    if ability == "check_answer":
        try:
            method("")
        except NotImplementedError as e:
            return f"check_answer() is not implemented ({e})"
    return None


def env_domains(env: gym.Env) -> list[str]:
    """The domains ``env``'s tasks come from.

    ``env.unwrapped.domains`` when the env lists several (a mixed env), else
    ``info["domain"]`` of ``reset(seed=0)`` (none if absent).
    """
    listed = getattr(env.unwrapped, "domains", None)
    if listed:
        return [str(d) for d in listed]
    _, info = env.reset(seed=0)
    return [str(info["domain"])] if info.get("domain") else []


@dataclass(frozen=True)
class Plan:
    """The composed variants of a run: who owns each single slot, who chains on the others.

    Attributes:
        variants: instantiated variants; defaults for empty single slots first, then the
            named ones in the order given.
        aggregation: the loss aggregation the trainer uses (one of :data:`AGGREGATIONS`).
    """

    variants: tuple[CreditVariant, ...]
    aggregation: str = DEFAULT_AGGREGATION

    @property
    def names(self) -> list[str]:
        """The variants' names, in plan order."""
        return [v.name for v in self.variants]

    @property
    def requires_info(self) -> frozenset[str]:
        """Union of the variants' required info keys."""
        return frozenset().union(*(v.requires_info for v in self.variants))

    @property
    def requires_abilities(self) -> frozenset[str]:
        """Union of the variants' required env abilities."""
        return frozenset().union(*(v.requires_abilities for v in self.variants))

    @property
    def needs_reference(self) -> bool:
        """Whether any variant reads the frozen reference model ``ctx.ref``."""
        return any(v.needs_reference for v in self.variants)

    @property
    def needs_privileged(self) -> bool:
        """Whether any variant reads privileged info: the rollouts' envs are then privileged.

        The policy's prompts never show it; the teachers' privileged view and the variants'
        own probes read it from the turns (``info``, ``extras``).
        """
        return "privileged" in self.requires_abilities

    def check_teachers(self, names: Sequence[str], env: gym.Env | None = None) -> None:
        """Refuse a run without teachers a variant distils from, or with ones it cannot use.

        The variants' :meth:`CreditVariant.teacher_problems` say what they cannot use; with
        ``env`` they also see the domains its tasks come from (:func:`env_domains`).

        Raises:
            BadInput: naming the variants (the CLI exits with code 2).
        """
        wanting = [v.name for v in self.variants if v.requires_teachers]
        if wanting and not names:
            raise BadInput(
                f"{', '.join(wanting)} distil(s) from teacher checkpoints: pass "
                "--teachers NAME=DIR,... (checkpoints sharing the policy's tokenizer)"
            )
        domains = env_domains(env) if env is not None and wanting else []
        problems = [p for v in self.variants for p in v.teacher_problems(list(names), domains)]
        if problems:
            raise BadInput(f"credit plan {self} cannot use --teachers: " + "; ".join(problems))

    def __str__(self) -> str:
        """The variants' names joined by ``+``, in plan order."""
        return "+".join(self.names)

    def chain(self, hook: str) -> tuple[CreditVariant, ...]:
        """The variants whose ``hook`` runs, in order (one for a single slot)."""
        if hook not in HOOKS:
            raise ValueError(f"unknown hook {hook!r}: hooks are {', '.join(HOOKS)}")
        return tuple(v for v in self.variants if hook in v.slots)

    def owner(self, slot: str) -> CreditVariant:
        """The variant filling single slot ``slot``."""
        if slot not in SINGLE_SLOTS:
            raise ValueError(f"{slot!r} is not a single slot: those are {', '.join(SINGLE_SLOTS)}")
        return self.chain(slot)[0]

    def run(self, hook: str, batch: Batch, ctx: Context) -> list[Any]:
        """Call ``hook(batch, ctx)`` of every variant that provides it, in plan order.

        Returns:
            The hooks' results that are not None, in order (``aux_loss``: ``(loss, metrics)``
            pairs for the trainer to add up).
        """
        results = []
        for variant in self.chain(hook):
            out = getattr(variant, hook)(batch, ctx)
            if out is not None:
                results.append(out)
        return results

    def check(self, env: gym.Env) -> None:
        """Refuse to start on an env lacking an info key or ability a variant requires.

        Resets ``env`` (``seed=0``) when an info key or ``check_answer`` must be probed.

        Raises:
            BadInput: naming each variant and what it misses (the CLI exits with code 2).
        """
        info: dict[str, Any] = {}
        if self.requires_info or "check_answer" in self.requires_abilities:
            _, info = env.reset(seed=0)
        problems = []
        for v in self.variants:
            missing = sorted(v.requires_info - set(info))
            if missing:
                problems.append(f"{v.name} needs info keys {missing}, absent from reset info")
            elif v.requires_info:
                problems += [f"{v.name} needs {p}" for p in v.info_problems(_env_name(env), info)]
            for ability in sorted(v.requires_abilities):
                why = _lacks(env, ability)
                if why is not None:
                    problems.append(f"{v.name} needs the env ability {ability!r}: {why}")
        if problems:
            raise BadInput(
                f"credit plan {self} cannot run on {_env_name(env)}: " + "; ".join(problems)
            )


def _pick_aggregation(named: list[CreditVariant], defaults: list[CreditVariant], config: Any):
    override = _lookup(config, "aggregation", None) if config is not None else None
    if override is not None:
        if override not in AGGREGATIONS:
            raise BadInput(f"unknown aggregation {override!r}: choose one of {AGGREGATIONS}")
        return override
    # Preferences of the variants the user named win over those of the defaults.
    for variants in (named, defaults):
        wanted = {v.name: v.aggregation for v in variants if v.aggregation is not None}
        if len(set(wanted.values())) > 1:
            listing = ", ".join(f"{n} wants {a}" for n, a in wanted.items())
            raise BadInput(
                f"credit variants disagree on the loss aggregation ({listing}); "
                "set config.aggregation to choose"
            )
        if wanted:
            return next(iter(wanted.values()))
    return DEFAULT_AGGREGATION


def compose(spec: str, config: Any = None) -> Plan:
    """Build the plan for ``--credit spec``, e.g. ``"gigpo+proas"`` (``""`` = the defaults).

    Each name is a registered variant or ``"module:Class"``; each variant is constructed with
    ``config``. Empty single slots get their defaults (:data:`SINGLE_SLOTS`).

    Raises:
        BadInput: unknown or repeated names, or two variants filling one single slot.
    """
    parts = [p.strip() for p in spec.split("+")] if spec.strip() else []
    if any(not p for p in parts):
        raise BadInput(f"empty variant name in --credit {spec!r}")
    repeated = sorted({p for p in parts if parts.count(p) > 1})
    if repeated:
        raise BadInput(f"credit variant(s) {repeated} named more than once in {spec!r}")
    named = [get(p)(config) for p in parts]

    owners: dict[str, CreditVariant] = {}
    for v in named:
        clashes = [s for s in SINGLE_SLOTS if s in v.slots and s in owners]
        if clashes:
            other = owners[clashes[0]].name
            which = " and ".join(repr(s) for s in clashes)
            raise BadInput(
                f"{other} and {v.name} both fill the single slot{'s' * (len(clashes) > 1)} "
                f"{which}; choose one of them"
            )
        owners.update({s: v for s in SINGLE_SLOTS if s in v.slots})
    defaults = []
    for slot, default in SINGLE_SLOTS.items():
        if slot not in owners:
            v = get(default)(config)
            defaults.append(v)
            owners[slot] = v
    return Plan(
        variants=tuple(defaults + named),
        aggregation=_pick_aggregation(named, defaults, config),
    )


# Every public module of this package is a variant that registers itself on import:
# importing them all here means every process sees the same registry, whatever a user
# happened to import, and adding a variant is adding a file.
def _import_variants() -> None:
    import pkgutil

    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if not module.startswith("_"):
            importlib.import_module(f"{__name__}.{module}")


_import_variants()
