"""The full checker on every registered id: Official loaders on their fixtures, Large presets
only when marked slow."""

from pathlib import Path

import pytest

from agentgym.checker import check_agent_env
from agentgym.registry import env_ids, env_info

ENVS = Path(__file__).parent / "envs"
OFFICIAL_FIXTURES = {
    "agentgym/Search-Free-HotpotQA-Official-v0": ENVS / "search" / "fixtures" / "hotpotqa",
    "agentgym/Search-Free-2Wiki-Official-v0": ENVS / "search" / "fixtures" / "2wiki",
    "agentgym/ALFWorld-Official-v0": ENVS / "text" / "fixtures" / "alfworld",
    "agentgym/Shop-Official-v0": ENVS / "web" / "fixtures" / "webshop",
}
# MiniWoB++ ids drive a browser each (about 40 s of checker per id) and some of its tasks are
# easy enough that random clicks win them: tests/envs/web/test_miniwob.py runs the checker on
# a sample of them (marked browser), and an oracle on every task that has one.
MINIWOB = [i for i in env_ids() if i.startswith("agentgym/MiniWoB-")]
CHECKED = [
    i
    for i in env_ids()
    if env_info(i).preset != "Large" and "Official" not in i and i not in MINIWOB
]
LARGE = [i for i in env_ids() if env_info(i).preset == "Large"]


def test_every_id_is_checked_somewhere():
    official = [i for i in env_ids() if "Official" in i]
    assert sorted(official) == sorted(OFFICIAL_FIXTURES)
    assert set(CHECKED) | set(LARGE) | set(official) | set(MINIWOB) == set(env_ids())
    assert "agentgym/Search-Menu-Small-v0" in CHECKED and "agentgym/Search-Free-Small-v0" in CHECKED


@pytest.mark.parametrize("env_id", CHECKED)
def test_every_registered_env_passes_the_checker(env_id):
    report = check_agent_env(env_id)
    assert len(report.results) >= 12
    assert report.ok, report.failures()


@pytest.mark.parametrize("env_id", sorted(OFFICIAL_FIXTURES))
def test_official_loaders_pass_the_checker_on_their_fixtures(env_id):
    report = check_agent_env(env_id, env_kwargs={"path": str(OFFICIAL_FIXTURES[env_id])})
    assert report.ok, report.failures()


@pytest.mark.slow
@pytest.mark.parametrize("env_id", LARGE)
def test_large_presets_pass_the_checker(env_id):
    report = check_agent_env(env_id)
    assert report.ok, report.failures()
