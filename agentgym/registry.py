"""The agentgym registry: a thin layer over ``gymnasium.register`` with family metadata.

Registration is data: string entry points only, idempotent, and run on ``import agentgym`` and
inside :func:`make`, so every id also exists in spawned worker processes that import agentgym.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import inspect
import pkgutil
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym.core.errors import BadInput, UnknownEnv

ENVS_PACKAGE = "agentgym.envs"
"""The package holding the env families, one subpackage (folder) each, reached by name only."""


def family_dirs() -> dict[str, Path]:
    """Each env family's folder, by family name: the subpackages of :data:`ENVS_PACKAGE`.

    Found on disk, without importing a family, so that adding a family is adding a folder
    (whose ``__init__`` has ``register()``). A family whose optional dependencies are missing
    raises ImportError from its ``register()`` module and is skipped by :func:`register_all`.
    """
    spec = importlib.util.find_spec(ENVS_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return {}
    found = pkgutil.iter_modules(list(spec.submodule_search_locations))
    return {
        m.name: Path(str(getattr(m.module_finder, "path", ""))) / m.name
        for m in sorted(found, key=lambda m: m.name)
        if m.ispkg and not m.name.startswith("_")
    }


def families() -> tuple[str, ...]:
    """The env family names (``--family`` takes them), sorted."""
    return tuple(family_dirs())


@dataclass(frozen=True)
class EnvInfo:
    """What agentgym records about an id beyond gymnasium's ``EnvSpec``."""

    id: str
    family: str
    description: str
    entry_point: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def preset(self) -> str:
        """The id's preset (Small, Medium, Large, Official...), or "" if it has none."""
        parts = self.id.split("/")[-1].split("-")
        return parts[-2] if len(parts) >= 4 else ""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-able data."""
        return asdict(self)


_REGISTRY: dict[str, EnvInfo] = {}
_LOADED = False


def register(
    id: str,
    entry_point: str,
    *,
    family: str,
    description: str,
    kwargs: dict[str, Any] | None = None,
) -> None:
    """Register an id with gymnasium and agentgym. Registering the same spec again is a no-op.

    Args:
        id: ``agentgym/<Family>-<Variant>[-<Preset>]-v<N>``.
        entry_point: ``"module.path:ClassName"`` (a string, so specs stay JSON-able).
        family: one of :func:`families`.
        description: one line shown by ``agentgym envs``.
        kwargs: constructor arguments fixed by the id (preset names, sizes).
    """
    if family not in families():
        raise ValueError(f"unknown family {family!r}: use one of {families()}")
    if ":" not in entry_point:
        raise ValueError(f"entry_point must be 'module:Class', got {entry_point!r}")
    record = EnvInfo(id, family, description, entry_point, dict(kwargs or {}))
    known = _REGISTRY.get(id)
    if known is not None:
        if known != record:
            raise ValueError(f"{id} is already registered with a different spec")
        return
    _REGISTRY[id] = record
    if id not in gym.registry:
        # The env enforces reset-before-step itself (ResetNeeded), so that a fresh instance
        # can restore() a snapshot and step on; gymnasium's OrderEnforcing refuses that and
        # its PassiveEnvChecker crashes on it. `agentgym check` runs the full check_env.
        gym.register(
            id=id,
            entry_point=entry_point,
            kwargs=dict(record.kwargs),
            order_enforce=False,
            disable_env_checker=True,
        )


def unregister(env_id: str) -> None:
    """Remove an id registered with :func:`register` (temporary ids of tests and plugins)."""
    if _REGISTRY.pop(env_id, None) is not None:
        gym.registry.pop(env_id, None)


def register_all() -> None:
    """Register every family whose dependencies are installed (idempotent)."""
    global _LOADED
    if _LOADED:
        return
    for name in families():
        try:
            family = importlib.import_module(f"{ENVS_PACKAGE}.{name}")
        except ImportError:
            continue
        family.register()
    _LOADED = True


def env_ids(family: str | None = None) -> list[str]:
    """Registered ids, sorted, optionally of one family."""
    register_all()
    if family is not None and family not in families():
        raise UnknownEnv(f"unknown family {family!r}: choose one of {', '.join(families())}")
    return sorted(i for i, r in _REGISTRY.items() if family is None or r.family == family)


def env_class(env_id: str) -> type:
    """The class the id's string entry point names (imported on first use)."""
    module, _, name = env_info(env_id).entry_point.partition(":")
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def env_note(env_id: str) -> str:
    """The note the id's env class gives for it (``AgentEnv.registry_note``), or ""."""
    note = getattr(env_class(env_id), "registry_note", None)
    return str(note(**env_info(env_id).kwargs)) if note is not None else ""


def accepted_kwargs(env_id: str) -> list[str] | None:
    """The keyword arguments the id's env class takes, read from its ``__init__`` signatures.

    A constructor that passes ``**kwargs`` on to its base class adds the base's names, up the
    class's MRO. None when the names cannot be known (a ``**kwargs`` that reaches ``object``,
    or a class that forwards them to another env).
    """
    names: list[str] = []
    if getattr(env_class(env_id), "forwards_kwargs", False):
        return None  # passed on to an env that checks them itself (agentgym/Remote-v0)
    for cls in env_class(env_id).__mro__:
        init = vars(cls).get("__init__")
        if init is None:
            continue
        if cls is object:
            return None
        params = list(inspect.signature(init).parameters.values())[1:]  # without self
        keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names += [p.name for p in params if p.kind in keywords and p.name not in names]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return names
    return None


# gymnasium.make's own options (max_episode_steps, ...) are no arguments of the env's class.
_MAKE_OPTIONS = frozenset(inspect.signature(gym.make).parameters) - {"id", "kwargs"}


def check_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Refuse keyword arguments the id's env class does not take.

    Raises:
        BadInput: one line naming the unknown arguments and listing the accepted ones.
    """
    accepted = accepted_kwargs(env_id)
    if accepted is None:
        return
    unknown = sorted(set(kwargs) - set(accepted) - _MAKE_OPTIONS)
    if not unknown:
        return
    guesses = [m[0] for u in unknown if (m := difflib.get_close_matches(u, accepted, n=1))]
    hint = f" (did you mean {' or '.join(guesses)}?)" if guesses else ""
    raise BadInput(
        f"{env_id} does not take {', '.join(unknown)}{hint}; it takes: {', '.join(accepted)}"
    )


def env_info(env_id: str) -> EnvInfo:
    """The agentgym record of ``env_id``; :class:`UnknownEnv` with suggestions if unknown."""
    register_all()
    try:
        return _REGISTRY[env_id]
    except KeyError:
        close = difflib.get_close_matches(env_id, list(_REGISTRY), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise UnknownEnv(
            f"unknown environment {env_id!r}.{hint} Run `agentgym envs` to list them."
        ) from None


def make(env_id: str, /, **kwargs: Any) -> gym.Env[Any, Any]:
    """``gymnasium.make`` for agentgym ids, with a "did you mean" error for unknown ids.

    Raises:
        UnknownEnv: ``env_id`` is not registered.
        BadInput: a keyword argument the env does not take (the message lists those it does),
            or one whose value it refuses.
    """
    env_info(env_id)
    check_kwargs(env_id, kwargs)
    try:
        with warnings.catch_warnings():
            # An id whose newer version exists stays a maintained benchmark (its results stay
            # comparable), so gymnasium's "out of date" hint is not what a user should read.
            warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)
            return gym.make(env_id, **kwargs)
    except BadInput:
        raise  # the env said what is wrong already
    except (TypeError, ValueError) as e:
        if not kwargs:
            raise
        # a value of the wrong type or out of range (``--env-kwarg max_turns=x``): the user's
        # arguments, named with the env's own complaint, not a traceback
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        reason = str(e).split(" was raised from the environment creator")[0]
        raise BadInput(f"{env_id} cannot be made with {shown}: {reason}") from None


def make_vec(
    env_id: str,
    num_envs: int,
    /,
    *,
    vectorization_mode: str = "sync",
    context: str | None = None,
    **kwargs: Any,
) -> gym.vector.VectorEnv[Any, Any, Any]:
    """A vector env of ``num_envs`` copies of ``env_id``.

    ``"async"`` runs each copy in a worker process with ``shared_memory=False`` (gymnasium
    cannot place text spaces in shared memory); workers import agentgym, so ids resolve there
    even under the ``spawn`` start method.
    """
    env_info(env_id)
    fns = [functools.partial(make, env_id, **kwargs) for _ in range(num_envs)]
    if vectorization_mode == "sync":
        return gym.vector.SyncVectorEnv(fns)
    if vectorization_mode == "async":
        return gym.vector.AsyncVectorEnv(fns, shared_memory=False, context=context)
    raise BadInput(f"vectorization_mode must be 'sync' or 'async', got {vectorization_mode!r}")
