"""The one way the CLI tests run ``agentgym``: a fresh process, wide columns, text out."""

import os
import subprocess
import sys


def cli(*args, stdin=None, cwd=None, env=None):
    """Run ``python -m agentgym.cli ARGS`` and return the completed process."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agentgym.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
