"""SDAR's skill library: short skill texts a privileged teacher reads at the head of its prompt.

SDAR (CREDIT.md §2) scores the policy's sampled tokens a second time under a teacher prompt
that holds retrieved "skills": general advice plus advice for the task's type. The paper
compares four ways of choosing them; the official code's default is keyword matching on the
task text, so ``retrieve(how="keyword")`` is the default here too, with the others as
settings: the full library, a UCB1 bandit fed by rewards, and uniform random picks (an
ablation). The libraries are small and hand-written, one per env family
(:meth:`SkillLibrary.for_env`); ALFWorld's task-type skills are the env's own skill hints
(``ALFWorldEnv.skill_hints``, read through the registry), so the two never drift apart.

Keyword matching, exactly: the task text is lower-cased; a keyword hits when it occurs in it
as whole words (a regular expression's word boundaries on both sides). A non-general skill's
score is its number of distinct keyword hits, plus one when ``task_type`` is among its
``task_types``; skills scoring 0 are left out. The result is every general skill (in library
order), then the ``k`` best-scoring others (ties in library order).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from agentgym.core.errors import BadInput
from agentgym.registry import env_class

__all__ = ["HOWS", "Skill", "SkillLibrary", "render"]

HOWS = ("keyword", "full", "random", "ucb")
"""The retrieval settings of :meth:`SkillLibrary.retrieve`."""


@dataclass(frozen=True)
class Skill:
    """One piece of advice for the teacher's prompt.

    Attributes:
        name: unique within its library (``"<family>/<topic>"``).
        text: the advice, one or two sentences.
        keywords: lower-case words or phrases whose presence in the task text selects it.
        task_types: the env task types it is for.

    A skill with neither keywords nor task types is general: keyword retrieval always gives
    it. (A skill with keywords alone, such as a tool domain's, is specific: the task text
    must name one of them.)
    """

    name: str
    text: str
    keywords: tuple[str, ...] = ()
    task_types: tuple[str, ...] = ()

    @property
    def general(self) -> bool:
        """Whether the skill is for every task of its family (no keywords, no task types)."""
        return not self.task_types and not self.keywords


class SkillLibrary:
    """A fixed list of skills with keyword, full, random and UCB1 retrieval.

    The UCB statistics (``update``) live in the instance; everything is deterministic given
    the calls made (ties go to library order).
    """

    def __init__(self, skills: Iterable[Skill], *, c: float = math.sqrt(2)):
        """Hold ``skills``; ``c`` is UCB1's exploration weight."""
        self.skills: tuple[Skill, ...] = tuple(skills)
        names = [s.name for s in self.skills]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise BadInput(f"skill names must be unique, repeated: {', '.join(dup)}")
        self.c = float(c)
        self._index = {n: i for i, n in enumerate(names)}
        self._pulls = [0] * len(names)
        self._reward = [0.0] * len(names)

    @classmethod
    def for_env(cls, env_id: str) -> SkillLibrary:
        """The hand-written library of ``env_id``'s family; BadInput for a family without one."""
        family = next((f for prefix, f in _FAMILIES if env_id.startswith(prefix)), None)
        if family is None:
            known = ", ".join(p + "*" for p, _ in _FAMILIES)
            raise BadInput(f"no skill library for {env_id!r}: libraries exist for {known}")
        skills = list(_LIBRARIES[family])
        if family == "alfworld":
            skills += _alfworld_type_skills(env_id)
        return cls(skills)

    def __len__(self) -> int:
        """Number of skills."""
        return len(self.skills)

    def __iter__(self) -> Iterator[Skill]:
        """The skills in library order."""
        return iter(self.skills)

    # ------------------------------------------------------------------ retrieval
    def retrieve(
        self,
        task_text: str,
        task_type: str | None,
        *,
        how: str = "keyword",
        k: int = 3,
        rng: np.random.Generator | None = None,
    ) -> list[Skill]:
        """The skills for one task.

        Args:
            task_text: the task as the agent sees it (instruction, question or request).
            task_type: ``info["task_type"]``, or None.
            how: "keyword" (module docstring), "full" (the whole library), "random" (``k``
                distinct skills drawn uniformly with ``rng``) or "ucb" (``k`` skills by UCB1:
                untried ones first, then mean reward + c·sqrt(ln N / n), N the total pulls).
            k: how many non-general skills ("keyword") or skills ("random", "ucb") to give.
            rng: the generator "random" draws from.

        Returns:
            Skills, general ones first for "keyword", library order for "full".
        """
        if k < 0:
            raise BadInput(f"k must be at least 0, got {k}")
        if how == "keyword":
            return self._by_keyword(task_text, task_type, k)
        if how == "full":
            return list(self.skills)
        if how == "random":
            if rng is None:
                raise BadInput('retrieve(how="random") needs rng=np.random.Generator')
            picks = rng.choice(len(self.skills), size=min(k, len(self.skills)), replace=False)
            return [self.skills[int(i)] for i in picks]
        if how == "ucb":
            order = sorted(range(len(self.skills)), key=lambda i: (-self._ucb(i), i))
            return [self.skills[i] for i in order[:k]]
        raise BadInput(f"unknown skill retrieval {how!r}: choose one of {', '.join(HOWS)}")

    def _by_keyword(self, task_text: str, task_type: str | None, k: int) -> list[Skill]:
        text = task_text.lower()
        scored = []
        for i, skill in enumerate(self.skills):
            if skill.general:
                continue
            hits = sum(bool(re.search(rf"\b{re.escape(w)}\b", text)) for w in skill.keywords)
            score = hits + (task_type is not None and task_type in skill.task_types)
            if score:
                scored.append((-score, i))
        best = [self.skills[i] for _, i in sorted(scored)[:k]]
        return [s for s in self.skills if s.general] + best

    # ------------------------------------------------------------------ UCB1
    def update(self, names: Sequence[str], reward: float) -> None:
        """Credit ``reward`` to each skill of ``names`` (those shown for one rollout)."""
        for name in names:
            if name not in self._index:
                raise BadInput(f"unknown skill {name!r}: not in this library")
            i = self._index[name]
            self._pulls[i] += 1
            self._reward[i] += float(reward)

    def _ucb(self, i: int) -> float:
        n = self._pulls[i]
        if n == 0:
            return math.inf
        total = sum(self._pulls)
        return self._reward[i] / n + self.c * math.sqrt(math.log(total) / n)

    def stats(self) -> dict[str, tuple[int, float]]:
        """``{name: (pulls, mean reward)}`` of the UCB statistics (mean 0.0 when untried)."""
        return {
            s.name: (n, r / n if n else 0.0)
            for s, n, r in zip(self.skills, self._pulls, self._reward, strict=True)
        }


def render(skills: Sequence[Skill]) -> str:
    """The text put in the teacher's prompt: a line "Skills:", then "- <text>" per skill.

    The empty string when ``skills`` is empty.
    """
    if not skills:
        return ""
    return "\n".join(["Skills:", *(f"- {s.text}" for s in skills)])


# ---------------------------------------------------------------------- the libraries
def _alfworld_type_skills(env_id: str) -> list[Skill]:
    """One skill per ALFWorld task type: the env's hint, selected by the task's verbs."""
    hints: dict[str, str] = getattr(env_class(env_id), "skill_hints", {})
    return [
        Skill(f"alfworld/{t}", text, _ALFWORLD_KEYWORDS.get(t, ()), (t,))
        for t, text in hints.items()
    ]


_ALFWORLD_KEYWORDS: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("put a", "put some", "put an"),
    "look_at_obj_in_light": ("examine", "look at", "desklamp", "floorlamp", "lamp"),
    "pick_clean_then_place_in_recep": ("clean",),
    "pick_heat_then_place_in_recep": ("heat", "hot"),
    "pick_cool_then_place_in_recep": ("cool", "cold"),
    "pick_two_obj_and_place": ("two",),
}

_LIBRARIES: dict[str, tuple[Skill, ...]] = {
    "alfworld": (
        Skill(
            "alfworld/explore",
            "Visit likely receptacles one by one (countertops, cabinets, drawers, shelves); "
            "open a closed one and look inside before moving on, and do not revisit one "
            "found empty.",
        ),
        Skill(
            "alfworld/commands",
            "Write exactly one admissible command per turn; 'Nothing happens.' means the "
            "command was not valid where you are.",
        ),
    ),
    "search": (
        Skill(
            "search/hops",
            "Split the question into hops: search the entity it names first, then each "
            "entity the evidence reveals, one search per hop.",
        ),
        Skill(
            "search/answer",
            "Answer with the entity name or value exactly as the evidence writes it, and "
            "only once every hop is supported by a sentence you have read.",
        ),
        Skill(
            "search/bridge",
            "Follow the chain: read the sentence with the asked relation on the named page, "
            "open the entity it names, and repeat until the last relation gives the answer.",
            ("director of", "founder of", "employer of", "birthplace of", "who", "which"),
            ("bridge", "inference"),
        ),
        Skill(
            "search/comparison",
            "Look up the compared attribute for both entities (a search each), then answer "
            "with the entity whose value wins; never guess the second value.",
            ("smaller", "larger", "earlier", "later", "older", "younger", "more", "fewer"),
            ("comparison", "bridge_comparison"),
        ),
        Skill(
            "search/compositional",
            "Follow the relations to the last entity, then read the asked attribute (a year "
            "or a number) on its page and answer with the value as written.",
            ("what year", "how many", "population", "founded", "established"),
            ("compositional",),
        ),
    ),
    "tools": (
        Skill(
            "tools/schema",
            "Call tools by their exact names with every required argument, typed as the "
            "schema says; when a call returns an error, fix the argument it names.",
        ),
        Skill(
            "tools/summary",
            "End with a <summary> that quotes the exact values (ids, prices, times) the "
            "results gave.",
        ),
        Skill(
            "tools/parallel",
            "Calls that do not depend on each other go in one action, one <tool_call> block each.",
            ("both", "each of"),
            ("parallel", "multiple", "parallel_multiple"),
        ),
        Skill(
            "tools/dependent",
            "When a call needs an id that another call returns, make the first call, read "
            "the id in its result, then make the next.",
            ("then", "after"),
            ("dependent",),
        ),
        Skill(
            "tools/clarification",
            "If the request leaves out a detail a required argument needs, ask the user with "
            "<ask> before calling anything.",
            (),
            ("clarification",),
        ),
        Skill(
            "tools/irrelevance",
            "If no tool can serve the request, call nothing and say so in the summary.",
            (),
            ("irrelevance",),
        ),
        Skill(
            "tools/ecommerce",
            "Find product ids with search_products before adding to the cart or ordering; "
            "read an order's status with get_order.",
            ("cart", "order", "product", "refund", "shipment", "buy"),
        ),
        Skill(
            "tools/accounts",
            "Read the customer with get_customer first; addresses, points and tickets are "
            "listed per customer id.",
            ("customer", "address", "email", "phone", "points", "ticket"),
        ),
        Skill(
            "tools/travel",
            "Search flights or hotels for their ids before booking; a booking is paid with "
            "pay_booking and its id.",
            ("flight", "hotel", "booking", "traveller", "trip"),
        ),
    ),
    "textworld": (
        Skill(
            "textworld/quest",
            "Do the quest's steps in the order the objective states them; 'look' and "
            "'inventory' show what is around and what you carry.",
        ),
        Skill(
            "textworld/containers",
            "Open a container or door before taking from it or going through it.",
            ("chest", "box", "door", "case", "cabinet", "open"),
        ),
        Skill(
            "textworld/keys",
            "A locked door or container needs its key: take the key first, then unlock it.",
            ("key", "latchkey", "passkey", "keycard", "unlock", "lock", "locked"),
        ),
    ),
    "credit": (
        Skill(
            "credit/delay",
            "Rewards can come many turns after the choice that earns them: weigh each "
            "choice by its effect on the final outcome, not by the next reward.",
        ),
        Skill(
            "credit/key_door",
            "Take the key whose colour matches the door; what you pick before the door "
            "matters only a little.",
            ("key", "door"),
            ("key_door",),
        ),
        Skill(
            "credit/chain",
            "Pick the animal each sign shows: one hidden step decides success, so every "
            "step must be right.",
            ("sign", "pick"),
            ("chain",),
        ),
        Skill(
            "credit/haystack",
            "Use the foods and avoid the poisons; most items change nothing.",
            ("energy", "use"),
            ("haystack",),
        ),
    ),
    "shop": (
        Skill(
            "shop/search",
            "Search with the product type and its key attributes from the instruction, then "
            "open the result that matches them best.",
        ),
        Skill(
            "shop/options",
            "On the item page click every option the instruction names (color, size, ...) "
            "before clicking Buy Now.",
            ("color", "colour", "size", "style", "flavor", "pack"),
        ),
        Skill(
            "shop/price",
            "Skip results above the instruction's price limit.",
            ("price", "lower than", "dollars"),
        ),
    ),
}

_FAMILIES: tuple[tuple[str, str], ...] = (
    ("agentgym/ALFWorld-", "alfworld"),
    ("agentgym/Search-", "search"),
    ("agentgym/Tools-", "tools"),
    ("agentgym/BFCL-", "tools"),
    ("agentgym/TextWorld-", "textworld"),
    ("agentgym/Credit-", "credit"),
    ("agentgym/Shop-", "shop"),
)
"""Env id prefixes and the library each one uses."""
