"""The text-game family: generated TextWorld and ALFWorld games on TextWorld's engines.

The TextWorld games are generated from seeds and the ALFWorld household tasks for ALFWorld's
own PDDL domain.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from agentgym.registry import register as _register

# The family's dependencies, checked without importing them: importing textworld takes half a
# second and ``import alfworld`` writes under $HOME (see alfworld_data.import_alfworld).
for _dependency in ("textworld", "alfworld"):
    if find_spec(_dependency) is None:
        raise ImportError(f"the text family needs {_dependency}: pip install 'agentgym[text]'")

_TEXTWORLD = "agentgym.envs.text.textworld_env:TextWorldEnv"
_ALFWORLD = "agentgym.envs.text.alfworld_env:ALFWorldEnv"

_IDS: dict[str, tuple[str, dict[str, Any], str]] = {
    "agentgym/TextWorld-Small-v0": (
        _TEXTWORLD,
        {"preset": "small"},
        "TextWorld quests generated from seeds: 3-5 rooms, 3-step quests (small)",
    ),
    "agentgym/TextWorld-Medium-v0": (
        _TEXTWORLD,
        {"preset": "medium"},
        "TextWorld quests generated from seeds: 6-8 rooms, 5-step quests (medium)",
    ),
    # v1: the last observation without the story's question whether to restart, restore, quit
    # or undo. v0 keeps its text byte for byte (recorded transcripts replay on it).
    "agentgym/TextWorld-Small-v1": (
        _TEXTWORLD,
        {"preset": "small", "end_question": False},
        "TextWorld quests generated from seeds: 3-5 rooms, 3-step quests (small); "
        "no restart question at the end",
    ),
    "agentgym/TextWorld-Medium-v1": (
        _TEXTWORLD,
        {"preset": "medium", "end_question": False},
        "TextWorld quests generated from seeds: 6-8 rooms, 5-step quests (medium); "
        "no restart question at the end",
    ),
    "agentgym/ALFWorld-Small-v0": (
        _ALFWORLD,
        {"preset": "small"},
        "ALFWorld household tasks on a few receptacles of an ALFRED room (short plans)",
    ),
    "agentgym/ALFWorld-Standard-v0": (
        _ALFWORLD,
        {"preset": "standard"},
        "ALFWorld household tasks on whole ALFRED floor plans",
    ),
    # v1: every observation after the intro ends with the memory line of what the agent has
    # been shown (receptacles seen and their contents, those unseen, what it holds).
    "agentgym/ALFWorld-Small-v1": (
        _ALFWORLD,
        {"preset": "small", "memory": True},
        "ALFWorld-Small with a memory line: receptacles seen and unseen, what it holds",
    ),
    "agentgym/ALFWorld-Standard-v1": (
        _ALFWORLD,
        {"preset": "standard", "memory": True},
        "ALFWorld-Standard with a memory line: receptacles seen and unseen, what it holds",
    ),
    "agentgym/ALFWorld-Official-v0": (
        _ALFWORLD,
        {"preset": "official"},
        "ALFWorld's official games (path=DIR or ALFWORLD_DATA)",
    ),
}


def register() -> None:
    """Register the family's ids (idempotent)."""
    for env_id, (entry, kwargs, description) in _IDS.items():
        _register(env_id, entry, family="text", description=description, kwargs=kwargs)
