import subprocess
import sys

import gymnasium as gym
import pytest

import agentgym
from agentgym.core.errors import BadInput, UnknownEnv
from agentgym.registry import accepted_kwargs, env_ids, env_info, register


def test_ids_follow_the_naming_scheme_and_are_known_to_gymnasium():
    ids = env_ids()
    assert "agentgym/Search-Menu-Small-v0" in ids
    for env_id in ids:
        assert env_id.startswith("agentgym/") and "-v" in env_id
        assert env_id in gym.registry
        assert isinstance(gym.registry[env_id].entry_point, str)


def test_family_filter():
    assert env_ids("search") == [i for i in env_ids() if env_info(i).family == "search"]
    with pytest.raises(UnknownEnv):
        env_ids("games")


def test_unknown_id_suggests_the_closest():
    with pytest.raises(UnknownEnv, match="Did you mean agentgym/Search-Menu-Small-v0"):
        agentgym.make("agentgym/Search-Menu-Smal-v0")


def test_bad_constructor_argument_is_bad_input_listing_the_accepted_ones():
    takes = "it takes: preset, path, fmt, retriever, search_k, ablation, provenance, split,"
    with pytest.raises(BadInput, match=f"does not take colour; {takes}"):
        agentgym.make("agentgym/Search-Menu-Small-v0", colour="blue")
    with pytest.raises(BadInput, match=r"does not take retriver \(did you mean retriever\?\)"):
        agentgym.make("agentgym/Search-Menu-Small-v0", retriver="bm25")


def test_every_id_knows_the_keyword_arguments_its_class_takes():
    for env_id in env_ids():
        accepted = accepted_kwargs(env_id)
        if env_info(env_id).family == "remote":  # forwarded: the hosted env checks them
            assert accepted is None, env_id
            continue
        assert accepted is not None, env_id
        assert {"split", "privileged", "max_turns", "render_mode"} <= set(accepted), env_id
        assert set(env_info(env_id).kwargs) <= set(accepted), env_id


def test_registration_is_idempotent_and_refuses_a_conflicting_spec():
    info = env_info("agentgym/Search-Menu-Small-v0")
    register(
        info.id,
        info.entry_point,
        family=info.family,
        description=info.description,
        kwargs=info.kwargs,
    )
    with pytest.raises(ValueError, match="different spec"):
        register(info.id, info.entry_point, family=info.family, description="changed")


def test_a_fresh_process_knows_every_id_after_import_agentgym():
    code = (
        "import gymnasium as gym, agentgym;"
        "env = gym.make('agentgym/Search-Menu-Small-v0');"
        "print(env.reset(seed=0)[1]['task_id'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().startswith("q")


def test_async_vector_env_in_spawned_workers():
    envs = agentgym.make_vec(
        "agentgym/Search-Menu-Small-v0", 2, vectorization_mode="async", context="spawn"
    )
    try:
        obs, info = envs.reset(seed=[0, 1])
        assert isinstance(obs, tuple) and all(isinstance(o, str) for o in obs)
        obs, reward, _term, _trunc, info = envs.step([0, 0])
        assert len(obs) == 2 and reward.shape == (2,)
        assert info["action_mask"].shape == (2, 256)
    finally:
        envs.close()


def test_sync_vector_env_matches_single_envs():
    envs = agentgym.make_vec("agentgym/Search-Menu-Small-v0", 3)
    obs, _ = envs.reset(seed=10)
    singles = [
        agentgym.make("agentgym/Search-Menu-Small-v0").reset(seed=10 + i)[0] for i in range(3)
    ]
    assert list(obs) == singles  # gymnasium seeds sub-env i with seed + i
    obs, _, _, _, info = envs.step(["0", 0, "not an action"])
    assert info["action_valid"].tolist() == [True, True, False]
    envs.close()


def test_every_folder_of_envs_is_a_family():
    from pathlib import Path

    import agentgym.envs
    from agentgym.bench import PARTS
    from agentgym.registry import families

    root = Path(agentgym.envs.__file__).parent
    folders = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
    assert families() == tuple(folders) and {"search", "text", "tools"} <= set(folders)
    # a family with a bench module is an `agentgym bench` part under its own name
    for name in folders:
        if (root / name / "bench.py").is_file() or (root / name / "bench").is_dir():
            assert PARTS[name] == f"agentgym.envs.{name}.bench"


def test_an_id_with_a_newer_version_makes_without_an_out_of_date_warning():
    # Search-Menu-Small-v0 stays a benchmark of its own beside v1; CLI errors stay one line
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agentgym.make("agentgym/Search-Menu-Small-v0").close()
    with pytest.warns(DeprecationWarning, match="out of date"):  # gymnasium's own make hints
        gym.make("agentgym/Search-Menu-Small-v0").close()
