"""The package list, found instead of written by hand.

``envs/``, ``baselines/`` and ``leaderboard/`` install as ``agentgym.envs``,
``agentgym.baselines`` and ``agentgym.leaderboard`` (``package-dir`` in pyproject.toml), a
mapping setuptools' own package discovery cannot follow; so every folder holding an
``__init__.py`` under the four source folders is listed here by its installed name, and a
new env family or subpackage needs no edit of the build configuration.
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
INSTALLED_AS = {
    "agentgym": "agentgym",
    "envs": "agentgym.envs",
    "baselines": "agentgym.baselines",
    "leaderboard": "agentgym.leaderboard",
}


def packages() -> list[str]:
    """Every source package by its installed import name."""
    names = []
    for folder, name in INSTALLED_AS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT / folder).parts
            if "__pycache__" not in parts:
                names.append(".".join((name, *parts)))
    return names


setup(packages=packages())
