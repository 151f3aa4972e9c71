"""``check_agent_env``: gymnasium's ``check_env`` plus agentgym's own named checks."""

from agentgym.checker.checks import CHECKS, CheckReport, CheckResult, check_agent_env
from agentgym.checker.transcript import ADVERSARIAL_ACTIONS, transcript, transcript_digest

__all__ = [
    "ADVERSARIAL_ACTIONS",
    "CHECKS",
    "CheckReport",
    "CheckResult",
    "check_agent_env",
    "transcript",
    "transcript_digest",
]
