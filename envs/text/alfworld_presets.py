"""What fixes a generated ALFWorld game: the generator version, task types and presets.

:meth:`GenParams.key` hashes :data:`GENERATOR_VERSION` with a preset's parameters; it names
the on-disk cache folder of the preset's games and seeds every task, so a change to either
regenerates every game.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

GENERATOR_VERSION = 1

# ALFWorld's numbering of the six task types (alfworld.agents.environment.alfred_tw_env).
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)


@dataclass(frozen=True)
class GenParams:
    """What a preset fixes about its games (part of the cache key).

    Attributes:
        name: preset name.
        max_receptacles: receptacles kept from the floor plan (None: all of them).
        distractor_types: (low, high) number of other object types placed (None: every object
            type the floor plan lists).
        max_instances: most instances of a distractor object type.
        max_plan: longest planner plan accepted (None: any).
        split_sizes: tasks per split (train, val, test), each a multiple of six.
    """

    name: str
    max_receptacles: int | None
    distractor_types: tuple[int, int] | None
    max_instances: int
    max_plan: int | None
    split_sizes: tuple[int, int, int]

    def key(self) -> str:
        """Short hash of the generator version and these parameters (the cache folder name)."""
        blob = json.dumps({"version": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        return f"v{GENERATOR_VERSION}-{self.name}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


PRESETS: dict[str, GenParams] = {
    "small": GenParams(
        name="small",
        max_receptacles=7,
        distractor_types=(3, 6),
        max_instances=2,
        max_plan=10,
        split_sizes=(3000, 120, 120),
    ),
    "standard": GenParams(
        name="standard",
        max_receptacles=None,
        distractor_types=None,
        max_instances=3,
        max_plan=None,
        split_sizes=(3600, 144, 144),
    ),
}
