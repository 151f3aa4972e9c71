"""Deliberately broken environments: the checker must catch each fault."""

import random

from agentgym.envs.search.menu_env import SearchMenuEnv


class LeakyEnv(SearchMenuEnv):
    """Shows the gold answer without privileged=True."""

    def _complete_info(self, info):
        info = super()._complete_info(info)
        info["gold_answer"] = self.question.answer
        return info


class UnseededEnv(SearchMenuEnv):
    """Draws from the global random module instead of the seeded generator."""

    def _observe(self, result):
        return super()._observe(result) + f"\nWeather: {random.random():.6f}"


class FragileEnv(SearchMenuEnv):
    """Crashes on text actions it does not know."""

    def _apply(self, action):
        if isinstance(action, str) and action not in self._menu.items:
            raise ValueError("unknown action")
        return super()._apply(action)


class ForgetfulEnv(SearchMenuEnv):
    """Its snapshot forgets the sentences read."""

    def _get_state(self):
        state = super()._get_state()
        state["read"] = []
        return state


class GiveawayEnv(SearchMenuEnv):
    """Every answer counts as correct."""

    def _golds(self):
        return [self.question.answer, *(op[1] for op in self._ops if op[0] == "answer")]
