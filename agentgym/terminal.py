"""Where the command line prints: one rich console for tables and one JSON writer."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

out = Console(highlight=False)
"""The console every command prints its tables and messages on."""
if not out.is_terminal:  # piped or captured: do not cut ids to 80 columns
    out.width = 160


def print_json(doc: Any) -> None:
    """Write exactly one JSON document on stdout (the ``--json`` contract)."""
    sys.stdout.write(json.dumps(doc, indent=1) + "\n")
