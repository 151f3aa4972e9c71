"""The env service and agentgym/Remote-v0: the local env's episodes over HTTP, and the
failures a user meets (a raising env, a slow one, limits, a token, a server that dies)."""

import json
import math
import os
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

import agentgym
from agentgym.checker import check_agent_env
from agentgym.checker.transcript import transcript
from agentgym.core.errors import BadInput, ResetNeeded, SnapshotMismatch
from agentgym.envs.remote import wire
from agentgym.envs.remote.env import RemoteEnvError, ServiceUnavailable
from agentgym.envs.remote.server import Limits, Service, resolve_token, serve_in_thread, spawn
from agentgym.harness.evaluate import evaluate
from agentgym.registry import env_ids, env_info, register, unregister

KEY_DOOR = "agentgym/Credit-KeyDoor-v0"
MENU = "agentgym/Search-Menu-Small-v1"
HERE = Path(__file__).parent

# Every id the checker runs on directly (no Large preset, loader or browser), by family.
PLAYED = [
    i
    for i in env_ids()
    if env_info(i).family != "remote"
    and "-Large-" not in i
    and "Official" not in i
    and not i.startswith(("agentgym/MiniWoB-", "agentgym/Shop-Browser-"))
]
ONE_PER_FAMILY = [
    "agentgym/Credit-KeyDoor-v0",
    "agentgym/Search-Menu-Small-v1",
    "agentgym/Shop-Small-v0",
    "agentgym/TextWorld-Small-v0",
    "agentgym/Tools-Ecommerce-v0",
]


def test_the_checked_ids_cover_every_family_but_remote():
    families = {env_info(i).family for i in ONE_PER_FAMILY}
    assert families == {env_info(i).family for i in PLAYED} and set(ONE_PER_FAMILY) <= set(PLAYED)


@pytest.fixture(scope="module")
def url():
    with serve_in_thread() as url:
        yield url


def remote(url, env_id, **kwargs):
    return agentgym.make("agentgym/Remote-v0", url=url, env_id=env_id, **kwargs)


# ---------------------------------------------------------------------- the wire
def test_wire_values_come_back_equal_and_of_the_same_type():
    mask = np.array([1, 0, 1], dtype=np.int8)
    value = {
        "mask": mask,
        "pair": (1, "a"),
        "blob": b"\x00\xff",
        "n": np.int64(7),
        "x": np.float32(0.5),
        "inf": float("inf"),
        "keys": {1: "one", (2, 3): "tuple"},
        "__tuple__": "a key that looks like a tag",
        "nested": [{"ok": True, "none": None}],
    }
    back = wire.loads(wire.dumps(value))
    assert back["mask"].dtype == np.int8 and back["mask"].tolist() == [1, 0, 1]
    assert back["pair"] == (1, "a") and back["blob"] == b"\x00\xff"
    assert type(back["n"]) is np.int64 and type(back["x"]) is np.float32
    assert math.isinf(back["inf"]) and back["keys"] == {1: "one", (2, 3): "tuple"}
    assert back["__tuple__"] == "a key that looks like a tag" and back["nested"] == value["nested"]
    assert math.isnan(wire.loads(wire.dumps(float("nan"))))


def test_wire_refuses_objects_and_malformed_tags():
    with pytest.raises(BadInput, match="cannot send"):
        wire.dumps(object())
    with pytest.raises(BadInput, match="cannot send"):
        wire.dumps(np.array(["a"], dtype=object))
    with pytest.raises(BadInput, match="refusing numpy dtype"):
        wire.loads(json.dumps({"__ndarray__": ["|O", [1], [1]]}))
    with pytest.raises(BadInput, match="not JSON"):
        wire.loads(b"{not json")


# ---------------------------------------------------------------------- the same episodes
@pytest.mark.parametrize("env_id", PLAYED)
def test_remote_transcripts_are_the_local_ones_byte_for_byte(url, env_id):
    local = transcript(env_id, seed=4)
    assert transcript("agentgym/Remote-v0", 4, env_kwargs={"url": url, "env_id": env_id}) == local


@pytest.mark.parametrize("env_id", ONE_PER_FAMILY)
def test_remote_envs_pass_the_checker(url, env_id):
    report = check_agent_env("agentgym/Remote-v0", env_kwargs={"url": url, "env_id": env_id})
    assert report.ok, report.failures()


def test_forwarded_methods_and_usage_errors_keep_their_types(url):
    env = remote(url, MENU, privileged=True)
    local = agentgym.make(MENU, privileged=True)
    _, info = env.reset(seed=3)
    _, local_info = local.reset(seed=3)
    base = env.unwrapped
    assert info["action_mask"].dtype == local_info["action_mask"].dtype
    assert base.task_id == local.unwrapped.task_id and base.turn == 0
    assert base.check_answer(info["gold_answer"]) == 1.0
    assert base.answer_prefix() == local.unwrapped.answer_prefix()
    assert base.oracle_action() == local.unwrapped.oracle_action()
    assert base.data_hash == local.unwrapped.data_hash
    snap = base.snapshot()
    assert snap == local.unwrapped.snapshot()
    with pytest.raises(SnapshotMismatch):
        base.restore(b"{}")
    fresh = remote(url, KEY_DOOR)
    with pytest.raises(ResetNeeded):
        fresh.step(0)  # the server's ResetNeeded, raised here; the session stays
    fresh.reset(seed=0)
    fresh.step(0)
    with pytest.raises(BadInput, match="does not take colour"):
        remote(url, MENU, colour="blue")
    with pytest.raises(BadInput, match="needs env_id"):
        agentgym.make("agentgym/Remote-v0", url=url)
    env.close()
    fresh.close()


# ---------------------------------------------------------------------- failures
@pytest.fixture(scope="module")
def test_ids():
    ids = {
        "raises": "agentgym/Credit-TestRaises-v0",
        "slow": "agentgym/Credit-TestSlow-v0",
    }
    register(ids["raises"], "service_envs:RaisingEnv", family="credit", description="test")
    register(ids["slow"], "service_envs:SlowEnv", family="credit", description="test")
    sys.path.insert(0, str(HERE))
    yield ids
    sys.path.remove(str(HERE))
    for i in ids.values():
        unregister(i)


def test_an_env_that_raises_closes_its_session_and_the_server_goes_on(test_ids):
    service = Service()
    with serve_in_thread(service) as url:
        env = remote(url, test_ids["raises"])
        env.reset(seed=0)
        env.step(0)
        with pytest.raises(RemoteEnvError, match="ZeroDivisionError: a bug in the env"):
            env.step(0)
        assert len(service) == 0
        metrics = httpx.get(f"{url}/metrics").json()
        assert metrics["errors"] == {"env": 1} and metrics["steps"] == 1
        env.reset(seed=0)  # a seeded reset opens a new session
        assert len(service) == 1
        assert transcript("agentgym/Remote-v0", 1, env_kwargs={"url": url, "env_id": KEY_DOOR})


def test_a_step_past_the_step_timeout_is_an_error_not_a_hang(test_ids):
    service = Service(limits=Limits(step_timeout_s=0.5))
    with serve_in_thread(service) as url:
        env = remote(url, test_ids["slow"])
        env.reset(seed=0)
        begin = time.monotonic()
        with pytest.raises(RemoteEnvError, match=r"longer than 0\.5 s"):
            env.step(0)
        assert time.monotonic() - begin < 1.9  # answered before the step would have ended
        assert len(service) == 0
        assert httpx.get(f"{url}/healthz").json() == {"ok": True}


def test_idle_sessions_expire_and_a_seeded_reset_opens_a_new_one():
    service = Service(limits=Limits(idle_timeout_s=0.3))
    with serve_in_thread(service) as url:
        env = remote(url, KEY_DOOR)
        first = env.unwrapped.session
        deadline = time.monotonic() + 20
        while len(service) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(service) == 0
        with pytest.raises(ServiceUnavailable, match="reset"):
            env.unwrapped.snapshot()
        env.reset(seed=2)
        assert env.unwrapped.session not in (None, first)
        assert httpx.get(f"{url}/metrics").json()["sessions_expired"] >= 1


def test_session_and_request_limits_are_refused_with_a_clear_error():
    service = Service(limits=Limits(max_sessions=2, max_request_bytes=4096))
    with serve_in_thread(service) as url:
        kept = [remote(url, KEY_DOOR) for _ in range(2)]
        with pytest.raises(RemoteEnvError, match="session limit reached"):
            remote(url, KEY_DOOR)
        kept[0].reset(seed=0)
        too_big = "x" * 10_000
        answer = httpx.post(
            f"{url}/v1/sessions/{kept[0].unwrapped.session}/step",
            content=json.dumps({"action": too_big}),
        )
        assert answer.status_code == 413
        kept[0].step(0)  # the session is unharmed


def test_only_served_ids_are_made_and_readiness_reports_them():
    with serve_in_thread(Service([KEY_DOOR]), check_readiness=True) as url:
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        ready = httpx.get(f"{url}/readyz").json()
        assert ready == {"ready": True, "checked": 1, "failed": {}}
        with pytest.raises(BadInput, match="not served here"):
            remote(url, MENU)


def test_a_token_is_required_on_every_request_and_off_loopback():
    with pytest.raises(BadInput, match="bearer token"):
        resolve_token("0.0.0.0", None)
    assert resolve_token("0.0.0.0", "s3cret") == "s3cret"
    with serve_in_thread(token="s3cret") as url:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert httpx.get(url + path).status_code == 401
            wrong = {"authorization": "Bearer nope"}
            assert httpx.get(url + path, headers=wrong).status_code == 401
        with pytest.raises(BadInput, match="refused"):
            remote(url, KEY_DOOR)
        env = remote(url, KEY_DOOR, token="s3cret")
        env.reset(seed=0)
        assert httpx.get(url + "/healthz", headers={"authorization": "Bearer s3cret"}).is_success


def test_a_server_that_is_gone_is_a_clear_error_within_seconds():
    with serve_in_thread() as url:
        env = remote(url, KEY_DOOR, retries=2)
        env.reset(seed=0)
    begin = time.monotonic()
    with pytest.raises(ServiceUnavailable, match="unreachable"):
        env.step(0)
    with pytest.raises(ServiceUnavailable):
        env.reset(seed=0)
    assert time.monotonic() - begin < 10


def test_concurrent_sessions_keep_their_own_episodes():
    service = Service()
    with serve_in_thread(service) as url:
        expected = {seed: transcript(KEY_DOOR, seed, steps=20) for seed in range(24)}
        got: dict[int, bytes] = {}

        def play(seed):
            got[seed] = transcript(
                "agentgym/Remote-v0", seed, steps=20, env_kwargs={"url": url, "env_id": KEY_DOOR}
            )

        threads = [threading.Thread(target=play, args=(s,)) for s in expected]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert got == expected


# ---------------------------------------------------------------------- eval through a server
def test_eval_survives_a_server_killed_mid_run_and_resumes_after_a_restart(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    local = evaluate("oracle", [KEY_DOOR], seeds=6, out=tmp_path / "local.json")
    out = tmp_path / "remote.json"
    proc, url = spawn([KEY_DOOR])
    try:
        monkeypatch.setenv("KILL_SERVER_PID", str(proc.pid))
        first = evaluate("service_envs:KillingAgent", [KEY_DOOR], seeds=6, out=out, env_url=url)
    finally:
        proc.kill()
        proc.wait()
    errored = [e for e in first["episodes"] if e["error"]]
    assert errored and len(first["episodes"]) == 6
    assert all("ServiceUnavailable" in e["error"] for e in errored)
    proc, url = spawn([KEY_DOOR])  # a new server, on another port
    try:
        second = evaluate("service_envs:KillingAgent", [KEY_DOOR], seeds=6, out=out, env_url=url)
    finally:
        proc.kill()
        proc.wait()
    key = lambda e: (e["run"], e["episode"])  # noqa: E731
    episodes = sorted(second["episodes"], key=key)
    assert [key(e) for e in episodes] == sorted(key(e) for e in local["episodes"])
    assert not any(e["error"] for e in episodes)
    assert [e["transcript_sha256"] for e in episodes] == [
        e["transcript_sha256"] for e in sorted(local["episodes"], key=key)
    ]
    kept = {key(e): e for e in first["episodes"] if not e["error"]}
    assert all(e == kept.get(key(e), e) for e in episodes)  # finished ones were not replayed


def test_training_through_the_service_gives_the_local_run(tmp_path):
    sys.path.insert(0, str(HERE.parents[1]))
    from clirun import cli

    run = (
        *("--env", MENU, "--preset", "nano", "--sft-steps", "4", "--sft-episodes", "2"),
        *("--steps", "1", "--tasks-per-step", "2", "--group-size", "2", "--eval-every", "0"),
        "--no-tensorboard",
    )
    local = cli("train", "--out", str(tmp_path / "local"), *run)
    assert local.returncode == 0, local.stderr
    service = Service()
    with serve_in_thread(service) as url:
        remote_run = cli("train", "--out", str(tmp_path / "remote"), *run, "--env-url", url)
        assert remote_run.returncode == 0, remote_run.stderr
        assert service.metrics.counts["steps"] > 0  # the rollouts stepped on the server
    weights = [(tmp_path / d / "model.safetensors").read_bytes() for d in ("local", "remote")]
    assert weights[0] == weights[1]


def test_serve_refuses_another_address_without_a_token_with_exit_2():
    sys.path.insert(0, str(HERE.parents[1]))
    from clirun import cli

    out = cli("serve", "--host", "0.0.0.0", env={**os.environ, "AGENTGYM_SERVE_TOKEN": ""})
    assert out.returncode == 2 and "set a bearer token" in out.stderr
    out = cli("serve", "--env", "agentgym/Nope-v0")
    assert out.returncode == 2 and "unknown environment" in out.stderr
