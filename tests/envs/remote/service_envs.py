"""Envs and an agent for the env-service tests (importable by the in-thread server)."""

import os
import signal
import time

from agentgym.agents.builtin import OracleAgent
from agentgym.envs.credit.key_door import KeyDoorEnv


class RaisingEnv(KeyDoorEnv):
    """A bug: its second step raises."""

    def _apply(self, action):
        if self.turn == 2:
            raise ZeroDivisionError("a bug in the env")
        return super()._apply(action)


class SlowEnv(KeyDoorEnv):
    """Each step takes two seconds."""

    def _apply(self, action):
        time.sleep(2.0)
        return super()._apply(action)


class KillingAgent(OracleAgent):
    """The oracle, which kills the process named by $KILL_SERVER_PID at its fifth action
    (once): the env server dies in the middle of an evaluation."""

    acted = 0

    def act(self, observation, info):
        KillingAgent.acted += 1
        pid = os.environ.get("KILL_SERVER_PID")
        if pid and KillingAgent.acted == 5:
            os.environ.pop("KILL_SERVER_PID")
            os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.5)
        return super().act(observation, info)
