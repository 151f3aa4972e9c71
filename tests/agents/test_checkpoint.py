"""Checkpoint directories: save, hash, load (JSON and safetensors only, never pickle)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentgym
from agentgym.agents.checkpoint import (
    CHECKPOINT_FILE,
    TENSORS_FILE,
    checkpoint_files,
    checkpoint_sha256,
    is_checkpoint_dir,
    load_checkpoint_agent,
    load_tensors,
    read_manifest,
    save_checkpoint,
)
from agentgym.agents.protocol import Agent
from agentgym.core.errors import BadInput

MODULE = "agentgym_test_checkpoint_agents"
AGENT = f"{MODULE}:MenuPreferenceAgent"
AGENT_SOURCE = textwrap.dedent(
    '''
    """Agents for the checkpoint tests, imported from a temporary directory."""

    import numpy as np

    from agentgym.agents.checkpoint import load_tensors


    class MenuPreferenceAgent:
        """Picks the first allowed menu index in a preference order read from safetensors."""

        def __init__(self, preference, name):
            self.preference = [int(i) for i in preference]
            self.name = name
            self.tokens_used = 0

        @classmethod
        def from_checkpoint(cls, path, config):
            return cls(load_tensors(path)["preference"], config["name"])

        def reset(self, env_id, seed):
            pass

        def act(self, observation, info):
            mask = info["action_mask"]
            for i in self.preference:
                if i < len(mask) and mask[i]:
                    return i
            return int(np.flatnonzero(mask)[0])


    class NoLoader:
        def reset(self, env_id, seed):
            pass

        def act(self, observation, info):
            return 0


    class NotAnAgent:
        @classmethod
        def from_checkpoint(cls, path, config):
            return object()


    class Exploding:
        @classmethod
        def from_checkpoint(cls, path, config):
            raise KeyError("weights.layer0")
    '''
)


@pytest.fixture(autouse=True)
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test agents as an importable module in a temporary directory."""
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(AGENT_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(MODULE, None)
    yield
    sys.modules.pop(MODULE, None)


def save(path: Path, preference: list[int] | None = None, **config: Any) -> Path:
    tensors = {"preference": np.asarray(preference or [2, 0, 1], dtype=np.int64)}
    return save_checkpoint(path, AGENT, {"name": "pref", **config}, tensors)


def write_manifest(path: Path, doc: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (path / CHECKPOINT_FILE).write_text(text)
    return path


# -- round trip --------------------------------------------------------------------------


def test_save_load_act_round_trip(tmp_path: Path) -> None:
    ckpt = save(tmp_path / "ckpt", [2, 0, 1])
    assert is_checkpoint_dir(ckpt) and is_checkpoint_dir(str(ckpt))
    assert sorted(p.name for p in ckpt.iterdir()) == [CHECKPOINT_FILE, TENSORS_FILE]
    manifest = json.loads((ckpt / CHECKPOINT_FILE).read_text())
    assert manifest == {"format": 1, "agent": AGENT, "config": {"name": "pref"}}

    agent = load_checkpoint_agent(ckpt)
    assert isinstance(agent, Agent)
    assert agent.name == "pref"
    agent.reset("agentgym/Fake-v0", 0)
    assert agent.act("", {"action_mask": np.array([1, 1, 1], dtype=np.int8)}) == 2
    assert agent.act("", {"action_mask": np.array([1, 1, 0], dtype=np.int8)}) == 0
    assert agent.act("", {"action_mask": np.array([0, 1, 0], dtype=np.int8)}) == 1


def test_checkpoint_agent_plays_a_menu_env(tmp_path: Path) -> None:
    agent = load_checkpoint_agent(save(tmp_path / "ckpt", [0]))
    env = agentgym.make("agentgym/Search-Menu-Small-v0")
    obs, info = env.reset(seed=1)
    agent.reset("agentgym/Search-Menu-Small-v0", 1)
    for _ in range(3):
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        assert info["action_valid"]
        if terminated or truncated:
            break
    env.close()


def test_save_without_tensors_and_overwrite(tmp_path: Path) -> None:
    ckpt = save_checkpoint(tmp_path / "a" / "b", AGENT, {"name": "x"})
    assert [p.name for p in ckpt.iterdir()] == [CHECKPOINT_FILE]
    save(ckpt, [1])
    save(ckpt, [2])
    assert load_tensors(ckpt)["preference"].tolist() == [2]
    assert sorted(p.name for p in ckpt.iterdir()) == [CHECKPOINT_FILE, TENSORS_FILE]
    assert oct((ckpt / TENSORS_FILE).stat().st_mode & 0o777) == oct(0o644)


def test_tensors_round_trip_dtypes(tmp_path: Path) -> None:
    tensors = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not contiguous
        "b": np.array([True, False]),
        "h": np.ones(2, dtype=np.float16),
    }
    save_checkpoint(tmp_path, AGENT, {}, tensors)
    loaded = load_tensors(tmp_path)
    assert set(loaded) == set(tensors)
    for name, array in tensors.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)


@pytest.mark.parametrize(
    ("agent_spec", "config", "tensors", "match"),
    [
        ("no_colon", {}, None, "module:Class"),
        ("mod:", {}, None, "module:Class"),
        (AGENT, {"s": {1, 2}}, None, "not plain JSON"),
        (AGENT, {"x": float("nan")}, None, "not plain JSON"),
        (AGENT, {}, {"t": np.array(["a"], dtype=object)}, "bool, int or float"),
        (AGENT, {}, {"t": np.array(["a"])}, "bool, int or float"),
    ],
)
def test_save_refuses_bad_input(
    tmp_path: Path, agent_spec: str, config: dict[str, Any], tensors: Any, match: str
) -> None:
    with pytest.raises(BadInput, match=match):
        save_checkpoint(tmp_path / "ckpt", agent_spec, config, tensors)
    assert not is_checkpoint_dir(tmp_path / "ckpt")


# -- hashing -----------------------------------------------------------------------------


def test_sha256_is_stable_and_content_addressed(tmp_path: Path) -> None:
    a, b = save(tmp_path / "a"), save(tmp_path / "b")
    (a / "tokenizer").mkdir()
    (b / "tokenizer").mkdir()
    (a / "tokenizer" / "vocab.json").write_text('{"x": 1}')
    (b / "tokenizer" / "vocab.json").write_text('{"x": 1}')
    digest = checkpoint_sha256(a)
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert checkpoint_sha256(b) == digest == checkpoint_sha256(str(a))

    os.utime(b / TENSORS_FILE, (0, 0))  # timestamps do not count
    (b / "empty").mkdir()  # nor empty folders
    (b / ".DS_Store").write_bytes(b"junk")  # nor OS junk
    nested = save(b / "steps" / "100", [9])  # nor nested checkpoints
    assert checkpoint_sha256(b) == digest
    assert checkpoint_sha256(nested) != digest

    data = bytearray((b / TENSORS_FILE).read_bytes())
    data[-1] ^= 1
    (b / TENSORS_FILE).write_bytes(bytes(data))
    assert checkpoint_sha256(b) != digest


@pytest.mark.parametrize("change", ["rename", "extra_file", "move_into_folder"])
def test_sha256_sees_names_and_shape(tmp_path: Path, change: str) -> None:
    ckpt = save(tmp_path / "ckpt")
    (ckpt / "extra.json").write_text("{}")
    digest = checkpoint_sha256(ckpt)
    if change == "rename":
        (ckpt / "extra.json").rename(ckpt / "other.json")
    elif change == "extra_file":
        (ckpt / "notes.txt").write_text("")
    else:
        (ckpt / "sub").mkdir()
        (ckpt / "extra.json").rename(ckpt / "sub" / "extra.json")
    assert checkpoint_sha256(ckpt) != digest


def test_sha256_follows_the_documented_rule(tmp_path: Path) -> None:
    ckpt = write_manifest(tmp_path / "ckpt", {"format": 1, "agent": AGENT})
    (ckpt / "sub").mkdir()
    (ckpt / "sub" / "w.bin").write_bytes(b"\x00\x01")
    expected = hashlib.sha256(b"agentgym-checkpoint-sha256-v1\0")
    for rel in [CHECKPOINT_FILE, "sub/w.bin"]:
        data = (ckpt / rel).read_bytes()
        expected.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    assert checkpoint_sha256(ckpt) == expected.hexdigest()
    assert [rel for rel, _ in checkpoint_files(ckpt)] == [CHECKPOINT_FILE, "sub/w.bin"]


def test_symlinks_are_refused(tmp_path: Path) -> None:
    ckpt = save(tmp_path / "ckpt")
    (tmp_path / "outside.json").write_text("{}")
    (ckpt / "linked.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(BadInput, match="symbolic link"):
        checkpoint_sha256(ckpt)
    with pytest.raises(BadInput, match="symbolic link"):
        load_checkpoint_agent(ckpt)
    (ckpt / "linked.json").unlink()
    (tmp_path / "alias").symlink_to(ckpt)  # the directory itself may be a link
    assert checkpoint_sha256(tmp_path / "alias") == checkpoint_sha256(ckpt)


def test_sha256_of_a_non_checkpoint_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"no agentgym_agent\.json"):
        checkpoint_sha256(tmp_path)
    with pytest.raises(BadInput, match="no checkpoint directory"):
        checkpoint_sha256(tmp_path / "missing")


# -- malformed checkpoints ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        ("{", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ({"agent": AGENT}, "format None"),
        ({"format": 2, "agent": AGENT}, "format 2"),
        ({"format": "1", "agent": AGENT}, "format '1'"),
        ({"format": True, "agent": AGENT}, "format True"),
        ({"format": 1}, "'agent' must be"),
        ({"format": 1, "agent": "no_colon"}, "'agent' must be"),
        ({"format": 1, "agent": AGENT, "config": [1]}, "'config' must be"),
        ({"format": 1, "agent": "agentgym_no_such_module_xyz:A"}, "cannot import"),
        ({"format": 1, "agent": f"{MODULE}:Missing"}, "has no class 'Missing'"),
        ({"format": 1, "agent": f"{MODULE}:NoLoader"}, "needs a classmethod from_checkpoint"),
        ({"format": 1, "agent": f"{MODULE}:NotAnAgent"}, "does not follow the Agent protocol"),
        ({"format": 1, "agent": f"{MODULE}:Exploding"}, "KeyError: 'weights.layer0'"),
        ({"format": 1, "agent": AGENT, "config": {"name": "x"}}, "has no model.safetensors"),
    ],
)
def test_malformed_checkpoint_is_bad_input(tmp_path: Path, manifest: Any, match: str) -> None:
    ckpt = write_manifest(tmp_path / "ckpt", manifest)
    with pytest.raises(BadInput, match=match):
        load_checkpoint_agent(ckpt)


def test_missing_manifest_and_missing_dir_are_bad_input(tmp_path: Path) -> None:
    (tmp_path / TENSORS_FILE).write_bytes(b"")
    assert not is_checkpoint_dir(tmp_path)
    with pytest.raises(BadInput, match=r"no agentgym_agent\.json.*save_checkpoint"):
        load_checkpoint_agent(tmp_path)
    with pytest.raises(BadInput, match="no checkpoint directory"):
        load_checkpoint_agent(tmp_path / "missing")
    with pytest.raises(BadInput, match="no checkpoint directory"):
        load_checkpoint_agent(tmp_path / TENSORS_FILE)


def test_corrupt_tensors_are_bad_input(tmp_path: Path) -> None:
    ckpt = save(tmp_path / "ckpt")
    (ckpt / TENSORS_FILE).write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header")
    with pytest.raises(BadInput, match="not a readable safetensors file"):
        load_checkpoint_agent(ckpt)


def test_read_manifest_defaults_config_and_ignores_unknown_keys(tmp_path: Path) -> None:
    ckpt = write_manifest(tmp_path / "ckpt", {"format": 1, "agent": AGENT, "note": "x"})
    assert read_manifest(ckpt) == {"format": 1, "agent": AGENT, "config": {}}


# -- never pickle ------------------------------------------------------------------------


def test_loading_never_unpickles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = save(tmp_path / "ckpt", [1])
    (ckpt / "model.pkl").write_bytes(pickle.dumps({"preference": [2]}))
    shutil.copy(ckpt / "model.pkl", ckpt / "pytorch_model.bin")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a checkpoint was unpickled")

    class RefusingUnpickler:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            refuse()

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", RefusingUnpickler)
    monkeypatch.setattr(np, "load", refuse)
    agent = load_checkpoint_agent(ckpt)
    assert agent.act("", {"action_mask": np.array([1, 1, 1], dtype=np.int8)}) == 1
    checkpoint_sha256(ckpt)  # the pickle is hashed as bytes, never opened as a pickle
