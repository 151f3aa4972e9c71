"""MiniWoB++: the ``miniwob`` package's tasks in headless Chromium, as text environments.

Registered only when ``miniwob`` is installed (the ``web`` extra); the browser is the system
Chromium (``/usr/bin/chromium`` and ``/usr/bin/chromedriver``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from agentgym.envs.web.miniwob.tasks import EXCLUDED, TASKS

if importlib.util.find_spec("miniwob") is None:  # checked without importing it
    raise ImportError("the miniwob package is not installed: pip install 'agentgym[web]'")


def camel(task: str) -> str:
    """A task name in CamelCase for its id: ``click-tab-2-easy`` -> ``ClickTab2Easy``."""
    return "".join(part[:1].upper() + part[1:] for part in task.split("-"))


def env_id(task: str) -> str:
    """The registered id of a miniwob task (``agentgym/MiniWoB-ClickButton-v0``)."""
    return f"agentgym/MiniWoB-{camel(task)}-v0"


def register_ids(register: Callable[..., Any]) -> None:
    """Register one id per supported task with the registry's ``register``."""
    from agentgym.envs.web.miniwob.oracle import SOLVERS

    for task, description in TASKS.items():
        if task in EXCLUDED:
            continue
        note = "" if task in SOLVERS else " (no oracle)"
        register(
            env_id(task),
            "agentgym.envs.web.miniwob.env:MiniWoBEnv",
            family="web",
            description=f"MiniWoB++ {task}: {description}{note}",
            kwargs={"task": task},
        )
