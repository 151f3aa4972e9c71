"""The checker is only useful if it fails broken environments: each fault is caught by name."""

import pytest

from agentgym.checker import check_agent_env
from agentgym.registry import register, unregister

CASES = {
    "LeakyEnv": "standard_info_keys",
    "UnseededEnv": "same_seed_same_transcript",
    "FragileEnv": "adversarial_actions",
    "ForgetfulEnv": "snapshot_restore",
    "GiveawayEnv": "random_rarely_wins",
}


@pytest.mark.parametrize("cls, check", sorted(CASES.items()))
def test_checker_names_the_fault(cls, check):
    env_id = f"agentgym/Search-Broken{cls}-v0"
    register(
        env_id,
        f"broken_envs:{cls}",
        family="search",
        description="broken on purpose",
        kwargs={"preset": "small"},
    )
    others = [c for c in set(CASES.values()) if c != check]
    try:
        report = check_agent_env(env_id, only=[check, *others])
    finally:
        unregister(env_id)
    failed = {r.name for r in report.results if not r.ok}
    assert check in failed, report.failures()


def test_a_sound_env_passes_the_same_checks():
    report = check_agent_env("agentgym/Search-Menu-Small-v0", only=sorted(set(CASES.values())))
    assert report.ok, report.failures()
