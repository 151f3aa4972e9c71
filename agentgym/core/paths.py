"""Where agentgym writes: ``AGENTGYM_HOME`` (default ``~/.agentgym``) and nothing else."""

from __future__ import annotations

import os
import sys
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


def use_matplotlib_dir() -> None:
    """Point matplotlib's config and font cache at ``$AGENTGYM_HOME/cache/matplotlib``.

    Call before importing matplotlib: it reads ``MPLCONFIGDIR`` once, on import, and would
    otherwise write to ``~/.cache/matplotlib`` and ``~/.config/matplotlib``. Does nothing when
    the user set ``MPLCONFIGDIR`` or matplotlib is imported already.
    """
    if not os.environ.get("MPLCONFIGDIR") and "matplotlib" not in sys.modules:
        os.environ["MPLCONFIGDIR"] = str(cache_dir("matplotlib"))
