"""Backends give identical records; killed runs resume with nothing lost or duplicated."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

from agentgym.harness.evaluate import evaluate
from agentgym.harness.journal import journal_path, transcripts_path

SMALL = "agentgym/Search-Menu-Small-v0"


def strip(doc):
    return [{k: v for k, v in e.items() if k != "seconds"} for e in doc["episodes"]]


@pytest.fixture(scope="module")
def local_run():
    return evaluate("random", [SMALL], seeds=12, episodes_per_seed=2)


def test_process_backend_gives_identical_records(local_run):
    doc = evaluate("random", [SMALL], seeds=12, episodes_per_seed=2, backend="process", workers=2)
    assert strip(doc) == strip(local_run)
    assert doc["aggregates"] == local_run["aggregates"]


def test_ray_backend_gives_identical_records_and_leaves_no_files(local_run, tmp_path):
    """Nothing in HOME, and no session folder where Ray puts it by default ($TMPDIR/ray)."""
    code = textwrap.dedent(f"""
        import json
        from agentgym.harness.evaluate import evaluate
        doc = evaluate("random", [{SMALL!r}], seeds=12, episodes_per_seed=2, backend="ray",
                       workers=2)
        print(json.dumps(doc["episodes"]))
    """)
    home = tmp_path / "home"
    home.mkdir()
    tmp = tempfile.mkdtemp(prefix="agt-", dir="/tmp")  # short: Ray puts sockets in it
    env = {k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"}
    env.update(HOME=str(home), TMPDIR=tmp)
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        left = os.listdir(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-2000:]
    episodes = json.loads(out.stdout.strip().splitlines()[-1])
    assert strip({"episodes": episodes}) == strip(local_run)
    assert not (home / ".ray").exists()
    assert left == []  # neither ray/session_* nor the session's own temporary folder


SLOW_AGENT = """
import os, time
from agentgym.agents.builtin import RandomAgent

class Slow(RandomAgent):
    def act(self, observation, info):
        time.sleep(float(os.environ.get("SLOW_AGENT_SECONDS", "0.01")))
        return super().act(observation, info)
"""


def _journal_lines(out):
    path = journal_path(out)
    return len(path.read_text().splitlines()) if path.exists() else 0


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_episodes(out, n, timeout=120):
    """Block until the journal of ``out`` holds ``n`` finished episodes."""
    path, end = journal_path(out), time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and len(path.read_text().splitlines()) > n:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {n} episodes in {path} after {timeout} s")


def _eval_cmd(out):
    return [
        sys.executable,
        "-m",
        "agentgym.cli",
        "eval",
        "--agent",
        "slow_agent:Slow",
        "--env",
        SMALL,
        "--seeds",
        "60",
        "--out",
        str(out),
    ]


def test_kills_at_random_points_lose_and_duplicate_nothing(tmp_path):
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = tmp_path / "r.json"
    rng = np.random.default_rng(0)
    for _ in range(4):
        before = _journal_lines(out)
        proc = subprocess.Popen(
            _eval_cmd(out),
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_episodes(out, max(before, 1))  # some progress, then a kill at any moment
        time.sleep(float(rng.uniform(0.0, 0.5)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = subprocess.run(
        _eval_cmd(out),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    keys = [(e["env_id"], e["run"], e["episode"]) for e in doc["episodes"]]
    assert len(keys) == len(set(keys)) == 60
    assert not journal_path(out).exists()
    clean = subprocess.run(
        [*_eval_cmd(tmp_path / "clean.json")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert clean.returncode == 0, clean.stderr
    assert strip(doc) == strip(json.loads((tmp_path / "clean.json").read_text()))


def test_ctrl_c_flushes_and_says_how_to_resume(tmp_path):
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        _eval_cmd(out),
        # slow enough that the run is still going when Ctrl-C comes, even on a busy machine
        env={**env, "SLOW_AGENT_SECONDS": "0.2"},
        # a test run started in the background inherits SIGINT ignored; Ctrl-C must reach it
        preexec_fn=_default_sigint,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_episodes(out, 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "run the same command to resume" in err and "Traceback" not in err
    lines = journal_path(out).read_text().splitlines()
    assert len(lines) > 1  # the identity, then finished episodes
    again = subprocess.run(
        _eval_cmd(out),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert len(json.loads(out.read_text())["episodes"]) == 60


def test_transcripts_side_file_matches_the_hashes(tmp_path):
    import hashlib

    from agentgym.core.canonical import canonical

    out = tmp_path / "r.json"
    doc = evaluate("random", [SMALL], seeds=5, out=out, transcripts=True)
    lines = [json.loads(line) for line in transcripts_path(out).read_text().splitlines()]
    assert len(lines) == 5
    by_key = {tuple(t["key"]): t["steps"] for t in lines}
    for ep in doc["episodes"]:
        steps = by_key[(ep["env_id"], ep["run"], ep["episode"])]
        digest = hashlib.sha256()
        for item in steps:
            digest.update(canonical(item))
        assert digest.hexdigest() == ep["transcript_sha256"]
        assert len(steps) == ep["steps"] + 1


def test_controls_pass_on_a_sound_metric():
    doc = evaluate("random", [SMALL], seeds=30, controls=True)
    c = doc["controls"][SMALL]
    assert c["positive"] == {"agent": "oracle", "mean": 1.0, "ok": True}
    assert c["null"]["ok"] and c["null"]["mean"] <= c["null"]["chance"] + 0.1


def test_aggregates_carry_intervals_and_task_types():
    doc = evaluate("random", [SMALL], seeds=20)
    agg = doc["aggregates"][SMALL]
    assert agg["ci_low"] <= agg["mean"] <= agg["ci_high"]
    assert set(agg["by_task_type"]) <= {"bridge", "comparison", "compositional"}
    assert doc["bootstrap"]["reps"] > 0
