"""Where agentgym writes: ``AGENTGYM_HOME`` (default ``~/.agentgym``) and nothing else."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """``$AGENTGYM_HOME`` or ``~/.agentgym`` (created on first use)."""
    path = Path(os.environ.get("AGENTGYM_HOME") or Path.home() / ".agentgym").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(kind: str) -> Path:
    """``$AGENTGYM_HOME/cache/<kind>``, created on first use; safe to delete at any time."""
    path = home() / "cache" / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
