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
# Browser ids drive headless Chromium (marked browser, in tests/envs/web): the shop's browser
# mode gets the full checker on Small there (Large is the same code over the Large catalogue);
# MiniWoB++ ids take about 40 s of checker each and random clicks win some of its easiest
# tasks, so tests/envs/web/test_miniwob.py runs the checker on a sample and an oracle on every
# task that has one.
BROWSER = [i for i in env_ids() if i.startswith(("agentgym/MiniWoB-", "agentgym/Shop-Browser-"))]
# agentgym/Remote-v0 plays another id on a server: tests/envs/remote runs the checker on it
# through the service, for an id of each family.
REMOTE = env_ids("remote")
CHECKED = [
    i
    for i in env_ids()
    if env_info(i).preset != "Large" and "Official" not in i and i not in BROWSER + REMOTE
]
LARGE = [i for i in env_ids() if env_info(i).preset == "Large" and i not in BROWSER]


def test_every_id_is_checked_somewhere():
    official = [i for i in env_ids() if "Official" in i]
    assert sorted(official) == sorted(OFFICIAL_FIXTURES)
    assert set(CHECKED) | set(LARGE) | set(official) | set(BROWSER) | set(REMOTE) == set(env_ids())
    assert REMOTE == ["agentgym/Remote-v0"]
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
