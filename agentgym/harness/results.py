"""The results file: the one format ``eval`` writes and ``submit`` reads (schema_version 1)."""

from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from agentgym.core.errors import BadInput

SCHEMA_VERSION = 1
HARNESS_VERSION = "0.1"
RECORDED_PACKAGES = ("agentgym", "gymnasium", "numpy", "rank-bm25")

# Fields that tell whether an existing file came from the same command (so it may be resumed).
IDENTITY_FIELDS = ("agent", "envs", "split", "root_seed", "episodes_per_seed")


def packages() -> dict[str, str]:
    """Installed versions of the packages that can change a result."""
    out = {}
    for name in RECORDED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def write_atomic(path: Path, doc: Any) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half.

    Raises:
        BadInput: the path is a directory or cannot be written.
    """
    if path.is_dir():
        raise BadInput(f"{path} is a directory: give a file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}") from None


def read_results(path: Path) -> dict[str, Any]:
    """Load and minimally validate a results file (BadInput if unusable)."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BadInput(f"no such results file: {path}") from None
    except (OSError, ValueError) as e:
        raise BadInput(f"{path} is not a JSON results file: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise BadInput(f"{path} is not an agentgym results file (schema_version 1)")
    if not isinstance(doc.get("episodes"), list):
        raise BadInput(f"{path} has no episodes list")
    return doc
