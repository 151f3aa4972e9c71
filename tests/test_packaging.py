"""A regular (non-editable) install must import every package, including the mapped ones."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {
    "agentgym": "agentgym",
    "envs": "agentgym.envs",
    "baselines": "agentgym.baselines",
    "leaderboard": "agentgym.leaderboard",
}


def source_packages():
    """Every package in the source tree, by its installed import name."""
    names = []
    for top, name in MAPPING.items():
        for init in sorted((ROOT / top).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / top).parts
            names.append(".".join((name, *rel)))
    return names


def test_wheel_install_imports_mapped_packages_and_registers_ids(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            "-q",
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("agentgym-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    modules = ", ".join(source_packages())
    assert "agentgym.envs.search" in modules
    code = (
        f"import gymnasium as gym, {modules};"
        "print(agentgym.envs.__file__);"
        "print(gym.make('agentgym/Search-Menu-Small-v0').reset(seed=0)[1]['task_id'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    where, task = out.stdout.split()
    assert where.startswith(str(target)), f"imported {where}, not the installed wheel"
    assert task.startswith("q")
