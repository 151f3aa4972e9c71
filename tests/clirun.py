"""The one way the tests run ``agentgym``: a fresh process, wide columns, text out.

Also what they read back from a training run, and the smallest run the trainer accepts.
"""

import csv
import os
import subprocess
import sys
from pathlib import Path

TINY_RUN = (
    *("--sft-steps", "2", "--sft-episodes", "2", "--steps", "1", "--tasks-per-step", "2"),
    *("--group-size", "2", "--eval-every", "0", "--no-tensorboard"),
)
"""``agentgym train`` options for one RL step of two groups of two after two SFT steps."""


def cli(*args, stdin=None, cwd=None, env=None, timeout=600):
    """Run ``python -m agentgym.cli ARGS`` and return the completed process."""
    return _run([sys.executable, "-m", "agentgym.cli", *args], stdin, cwd, env, timeout)


def script(code, *args, env=None, timeout=600):
    """Run ``python -c CODE ARGS`` (a CLI entry wrapped by a test) like :func:`cli`."""
    return _run([sys.executable, "-c", code, *args], None, None, env, timeout)


def _run(argv, stdin, cwd, env, timeout):
    return subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=timeout,
        check=False,
    )


def rl_rows(run_dir):
    """The RL steps' rows of a training run's ``metrics.csv``, as dicts of strings."""
    with (Path(run_dir) / "metrics.csv").open() as f:
        return [row for row in csv.DictReader(f) if row["phase"] == "rl"]
