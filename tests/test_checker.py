"""The full checker on every registered id (Large presets and Official loaders run elsewhere)."""

import pytest

from agentgym.checker import check_agent_env
from agentgym.registry import env_ids, env_info

CHECKED = [i for i in env_ids() if env_info(i).preset not in ("Large",) and "Official" not in i]


def test_there_are_ids_to_check():
    assert "agentgym/Search-Menu-Small-v0" in CHECKED
    assert "agentgym/Search-Menu-Medium-v0" in CHECKED


@pytest.mark.parametrize("env_id", CHECKED)
def test_every_registered_env_passes_the_checker(env_id):
    report = check_agent_env(env_id)
    assert report.results, "no check ran"
    assert report.ok, report.failures()
