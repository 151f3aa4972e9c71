"""SDAR's skill library: keyword retrieval by task text and type, the full library, UCB1
over rewards, random picks, and the per-family libraries."""

import numpy as np
import pytest

from agentgym.baselines.skills import Skill, SkillLibrary, render
from agentgym.core.errors import BadInput
from agentgym.envs.text.alfworld_env import SKILL_HINTS

ALFWORLD = "agentgym/ALFWorld-Small-v0"
IDS = [
    ALFWORLD,
    "agentgym/Search-Free-Small-v0",
    "agentgym/Tools-Travel-v1",
    "agentgym/BFCL-Simple-v1",
    "agentgym/TextWorld-Small-v1",
    "agentgym/Credit-KeyDoor-v0",
    "agentgym/Shop-Small-v0",
]


def toy():
    return SkillLibrary(
        [
            Skill("g", "general advice"),
            Skill("heat", "heat it", ("heat", "hot"), ("heating",)),
            Skill("cool", "cool it", ("cool",), ("cooling",)),
            Skill("two", "two of them", ("two",), ("pairs",)),
        ]
    )


def names(skills):
    return [s.name for s in skills]


def test_keyword_retrieval_picks_the_alfworld_task_types_skill():
    lib = SkillLibrary.for_env(ALFWORLD)
    general = [s.name for s in lib if s.general]
    assert general and len(lib) == len(general) + len(SKILL_HINTS)
    got = lib.retrieve("cool some pot and put it in cabinet.", "pick_cool_then_place_in_recep")
    assert names(got)[: len(general)] == general
    assert names(got)[len(general)] == "alfworld/pick_cool_then_place_in_recep"
    assert got[len(general)].text == SKILL_HINTS["pick_cool_then_place_in_recep"]
    # without the type, the task text's words alone find it
    got = lib.retrieve("examine the pillow with the floorlamp.", None)
    assert names(got) == [*general, "alfworld/look_at_obj_in_light"]
    got = lib.retrieve("find two handtowel and put them in drawer.", None, k=1)
    assert names(got)[-1] == "alfworld/pick_two_obj_and_place"


def test_keyword_ranks_by_hits_then_library_order_and_keeps_k():
    lib = toy()
    assert names(lib.retrieve("Put a HOTTER egg, heated, in two bowls", None)) == ["g", "two"]
    assert names(lib.retrieve("heat a hot egg for two", None)) == ["g", "heat", "two"]
    assert names(lib.retrieve("heat a hot egg for two", None, k=1)) == ["g", "heat"]
    # the type counts as one hit: three ties, kept in library order
    assert names(lib.retrieve("cool two", "heating", k=2)) == ["g", "heat", "cool"]
    assert names(lib.retrieve("nothing relevant", None)) == ["g"]
    assert names(lib.retrieve("nothing relevant", None, k=0)) == ["g"]


def test_full_returns_the_whole_library():
    lib = SkillLibrary.for_env("agentgym/Tools-Travel-v1")
    assert lib.retrieve("any", None, how="full") == list(lib)
    assert len(lib) > 3


def test_ucb_tries_each_skill_once_then_prefers_the_rewarded_one():
    lib = toy()
    tried = []
    for _ in range(len(lib)):
        (pick,) = lib.retrieve("", None, how="ucb", k=1)
        tried.append(pick.name)
        lib.update([pick.name], 1.0 if pick.name == "cool" else 0.0)
    assert sorted(tried) == sorted(names(lib)), "each untried skill comes first, once"
    later = []
    for _ in range(20):
        (pick,) = lib.retrieve("", None, how="ucb", k=1)
        later.append(pick.name)
        lib.update([pick.name], 1.0 if pick.name == "cool" else 0.0)
    assert later.count("cool") > len(later) // 2
    assert lib.stats()["cool"][1] == 1.0 and lib.stats()["g"][1] == 0.0
    with pytest.raises(BadInput, match="unknown skill"):
        lib.update(["nope"], 1.0)


def test_random_needs_an_rng_and_is_deterministic_under_it():
    lib = toy()
    with pytest.raises(BadInput, match="rng"):
        lib.retrieve("x", None, how="random")
    a = lib.retrieve("x", None, how="random", k=2, rng=np.random.default_rng(7))
    b = lib.retrieve("x", None, how="random", k=2, rng=np.random.default_rng(7))
    assert a == b and len(set(names(a))) == 2
    with pytest.raises(BadInput, match="keyword, full, random, ucb"):
        lib.retrieve("x", None, how="best")


def test_libraries_are_deterministic():
    def run():
        out = []
        for env_id in IDS:
            lib = SkillLibrary.for_env(env_id)
            out.append(render(lib.retrieve("put a hot egg in two cabinets", "bridge")))
            for _ in range(5):
                picks = lib.retrieve("", None, how="ucb", k=2)
                lib.update(names(picks), float(len(picks[0].text) % 2))
            out.append(names(lib.retrieve("", None, how="ucb", k=3)))
        return out

    assert run() == run()


@pytest.mark.parametrize("env_id", IDS)
def test_every_family_has_general_and_specific_skills(env_id):
    lib = SkillLibrary.for_env(env_id)
    assert any(s.general for s in lib) and any(not s.general for s in lib)
    assert all(len(s.text) < 240 for s in lib), "skills go into a small model's prompt"


def test_unknown_env_id_is_bad_input():
    with pytest.raises(BadInput, match="no skill library for 'agentgym/MiniWoB-ClickButton-v0'"):
        SkillLibrary.for_env("agentgym/MiniWoB-ClickButton-v0")
    with pytest.raises(BadInput, match="unique"):
        SkillLibrary([Skill("a", "x"), Skill("a", "y")])


def test_render():
    lib = toy()
    assert render(lib.retrieve("heat", None)) == "Skills:\n- general advice\n- heat it"
    assert render([]) == ""
