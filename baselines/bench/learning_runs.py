"""The finished runs a ``bench learning --work`` folder keeps, and when they are reused.

A run leaves :data:`DONE` in its folder: the settings it was trained and scored with, and its
result. A later call with the same settings reuses it; one that trains alike but scores
otherwise (another split, more seeds) scores it again without training it again; anything
else clears the folder and runs anew.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from agentgym.baselines.config import TrainConfig

DONE = "bench-learning.json"
"""The file a finished run leaves in its folder: its settings and its scores."""


SCORING = ("test_seeds", "split")
"""The settings of a finished run that say how it was scored, not how it was trained."""
SCORING_DEFAULTS = {"split": "test"}
"""What a run scored before a scoring option existed was scored with."""


def reused(
    console: Console,
    title: str,
    folder: Path,
    key: dict[str, Any],
    work: Callable[[], dict[str, Any]],
    rescore: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``work()``'s result, or the one a finished run with settings ``key`` left in ``folder``.

    A finished run trained alike but scored otherwise (another split, more seeds) is scored
    again by ``rescore()``, not retrained; where ``rescore`` is None the result does not
    depend on scoring and is reused. A folder holding anything else (an interrupted run,
    other settings) is cleared first.
    """
    from agentgym.harness.results import write_atomic

    done = folder / DONE
    previous: dict[str, Any] = {}
    if done.is_file():
        try:
            previous = json.loads(done.read_text())
        except (OSError, ValueError):
            previous = {}
    if not isinstance(previous, dict):
        previous = {}
    settings = previous.get("settings")
    if same_settings(settings, key):
        console.print(f"{title}: finished earlier, reused from {folder}")
        result: dict[str, Any] = previous["result"]
        return result
    if isinstance(settings, dict) and same_settings(trained(settings), trained(key)):
        if rescore is None:
            result = previous["result"]
        else:
            console.print(f"{title}: trained earlier in {folder}, scored again")
            result = {**previous["result"], **rescore()}  # what training recorded stays
        write_atomic(done, {"settings": key, "result": result})
        return result
    console.print(title)
    shutil.rmtree(folder, ignore_errors=True)
    result = work()
    write_atomic(done, {"settings": key, "result": result})
    return result


def trained(settings: dict[str, Any]) -> dict[str, Any]:
    """A run's settings without :data:`SCORING`."""
    return {k: v for k, v in settings.items() if k not in SCORING}


def same_settings(previous: Any, key: Any) -> bool:
    """Whether a finished run's settings are ``key``.

    Equal, except that an option the run predates counts as equal where ``key`` holds that
    option's default: a new option, added with its old behaviour as the default, does not
    invalidate finished runs.
    """
    if not (isinstance(previous, dict) and isinstance(key, dict)):
        return bool(previous == key)
    if set(previous) - set(key):
        return False
    defaults = {**TrainConfig().to_json(), **SCORING_DEFAULTS}
    return all(
        same_settings(previous[name], value)
        if name in previous
        else name in defaults and defaults[name] == value
        for name, value in key.items()
    )
