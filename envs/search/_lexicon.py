"""Word lists, name formats, title descriptors and sentence templates of the search world."""

from __future__ import annotations

from collections.abc import Mapping
from string import ascii_uppercase
from types import MappingProxyType

ENTITY_TYPES: tuple[str, ...] = ("person", "film", "city", "company", "award", "university")


def _words(text: str, sep: str | None = None) -> tuple[str, ...]:
    """Split a word list on whitespace, or on ``sep`` (stripping the items)."""
    return tuple(item.strip() for item in text.split(sep) if item.strip())


def _table(text: str) -> Mapping[str, tuple[str, ...]]:
    """Parse ``key: item | item`` lines; an indented line continues the previous key."""
    rows: dict[str, list[str]] = {}
    key = ""
    for line in text.strip("\n").splitlines():
        if not line[0].isspace():
            key, _, line = line.partition(":")
            rows[key] = []
        rows[key].extend(_words(line, "|"))
    return MappingProxyType({k: tuple(items) for k, items in rows.items()})


_FIRST = _words("""Alice Arthur Beatrice Bernard Camille Cedric Dana Declan Elena Edmund Fiona
Felix Greta Gideon Hazel Hugo Iris Isaac Joanna Jasper Katrin Kieran Lena Lucas Mara Milo Nadia
Nolan Olive Oscar Petra Quentin Rosa Rupert Sylvie Simon Tessa Tobias Una Victor Vera Walter
Wren Xavier Yara Yusuf Zara Zachary Agnes Ansel Bianca Boris Clara Conrad Delia Dorian Eliza
Emil Freya Gregor Helena Ivo Ingrid Julian Lydia Leon Maeve Marcus Nina Otto Paloma Pierce Ruth
Silas Thea Anton Ada Ezra""")
_SURNAMES = _words("""Marlow Ashby Bennett Calloway Draper Ellison Fairbanks Garrow Holloway
Ingram Jessop Keane Lockhart Merriweather Norcross Oakley Pembroke Quill Rourke Sterling Thorne
Underwood Vance Whitlock Yardley Abernathy Blackwood Carver Dunmore Everly Fenwick Gallagher
Hartley Irving Kendrick Langford Mercer Nyland Orwell Prescott Radcliffe Sinclair Tolliver Upton
Voss Winslow Ashcroft Brennan Crane Delacroix Eastwood Fletcher Grayson Hale Jarvis Kingsley
Lowell Montague Novak Osborne Pike Quinlan Rowe Sutton Tate Wilder Avery Barlow Cole Drummond
Foster Gable Harlan Ives Kerr Lund Mallory Vale""")
_FILM_ADJ = _words("""Silent Crimson Hollow Distant Broken Golden Frozen Hidden Last Burning Quiet
Wandering Pale Velvet Iron Scarlet Endless Shattered Bitter Gentle Restless Midnight Lonely
Savage Faded Electric Fallen Sunken Wild Amber Paper Glass Northern Secret Forgotten Lost Crooked
Winter Summer Bright Grey Night Copper Silver Hungry Sleeping Painted Drifting Open Falling
Cold""")
_FILM_NOUN = _words("""Harbor Lantern River Empire Garden Mirror Horizon Station Letter Orchard
Tide Kingdom Signal Passage Compass Shadow Voyage Meadow Citadel Archive Carnival Lighthouse
Cathedral Frontier Ember Canyon Orbit Promise Verdict Echo Season Island Corridor Parade Tower
Highway Lullaby Requiem Circus Monsoon Valley Prairie Glacier Bridge Anthem Labyrinth Sparrow
Falcon Wolf Harvest""")
_CITY_A = _words("""Val Kes Dor Mar Bel Ash Cor Fen Gal Hal Ist Jor Kal Lor Mel Nor Or Pel Quen
Ros Sal Tor Ul Ven Wyn Yar Zel Bran Cal Tam""")
_CITY_M = ("", "a", "e", "i", "o", "an", "en", "ar")
_CITY_B = _words("""mora burg ford haven ton ville stead mouth dale field port wick by more ley
gate holm crest reach vale bridge wood shire minster""")
_CO_A = _words("""Vex Nor Zen Ast Cor Lum Quad Ver Syn Tri Omni Hel Kin Orb Pax Rad Sol Tel Ultra
Vita Xen Zyl Arc Nova""")
_CO_B = _words("ora tek ium on ex ix ara eon ant is ica yn ent us io ar")
_CO_KINDS = _words("Group Labs Holdings Industries Systems Media Pictures Partners Works Dynamics")
_AWARD_ROOTS = _SURNAMES + _words("""Liberty Meridian Aurora Pioneer Beacon Laurel Crown Harmony
Keystone Lodestar Vanguard Zenith Heritage Odyssey Sentinel Trident Evergreen Monarch Phoenix
Equinox""")
_AWARD_KINDS = _words("Prize Award Medal Trophy Fellowship Cup")
_AWARD_FIELDS = _words("""Film Literature Science Music Architecture Journalism Design Poetry
Innovation Peace Photography Theatre""")
_UNI_ROOTS = _SURNAMES + _words("""Ashford Brookline Carrow Dunhill Elmstead Glenmoor Highgate
Kingsbridge Larkspur Millbrook Northgate Oakridge Redcliff Stonehaven Thornbury Westbrook
Whitmore Ravenscar Fairmont Silverlake""")
_UNI_KINDS = _words(
    """University | College | Institute | Institute of Technology | Polytechnic |
Academy | Conservatory | State University | School of Economics""",
    "|",
)
_PLACE_PREFIXES = _words("North South East West New Port Fort Lake Upper Lower")

# type -> (word lists, name formats by tier over one word of each list). Names of tier 0 are
# preferred; tiers past the formats append a Roman numeral, so every type has enough names.
NAME_SPACES: Mapping[str, tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]]
NAME_SPACES = MappingProxyType(
    {
        "person": (
            (_FIRST, _SURNAMES),
            ("{0} {1}", *(f"{{0}} {c}. {{1}}" for c in ascii_uppercase)),
        ),
        "film": (
            (_FILM_ADJ, _FILM_NOUN),
            (
                "{0} {1}",
                *(p + " {0} {1}" for p in _words("The | Beyond the | Under the | After the", "|")),
            ),
        ),
        "city": (
            (_CITY_A, _CITY_M, _CITY_B),
            ("{0}{1}{2}", *(p + " {0}{1}{2}" for p in _PLACE_PREFIXES)),
        ),
        "company": (
            (_CO_A, _CO_B, _CO_KINDS),
            ("{0}{1} {2}", "{0}{1} {2} International", "{0}{1} {2} Global"),
        ),
        "award": (
            (_AWARD_ROOTS, _AWARD_KINDS),
            ("{0} {1}", *("{0} {1} for " + f for f in _AWARD_FIELDS)),
        ),
        "university": (
            (_UNI_ROOTS, _UNI_KINDS),
            ("{0} {1}", *(p + " {0} {1}" for p in _PLACE_PREFIXES[:5])),
        ),
    }
)

# Per type, the descriptors of the intro ("Alice Marlow is an engineer.") and of the title
# disambiguating a shared name ("Alice Marlow (engineer)").
DESCRIPTORS = _table("""
person: actor | architect | composer | economist | engineer | film director | historian |
    journalist | lawyer | novelist | painter | physician | photographer | physicist | poet |
    screenwriter | sculptor
film: comedy film | crime film | documentary film | drama film | fantasy film | horror film |
    musical film | mystery film | romance film | science fiction film | thriller film |
    war film | western film | animated film
city: city | town | port city | market town | river town | coastal city | mountain town |
    capital city
company: software company | film studio | publishing house | bank | retail company | airline |
    engineering firm | media company | shipping company | pharmaceutical company |
    energy company | consulting firm
award: film award | literary award | science prize | music award | architecture prize |
    journalism award | design award | photography award
university: public university | private university | research university |
    technical university | liberal arts college | medical school | art school
""")
GENERIC = {t: f"The {t}" for t in ENTITY_TYPES if t != "person"}
# Sentence templates: the intro ({d}: "a" or "an" and the descriptor), one list per relation,
# and fillers that name other entities ({O}, a city {C}) or a year ({Y}) but state no fact.
# ``{S}`` (only ever first) may become a generic reference such as "The film"; ``{N}`` is
# always the page entity's name; ``{O}`` the object entity; ``{V}`` the value.
TEMPLATES = _table("""
intro: {N} is {d}. | {N} is best known as {d}. | {N} is {d} described in many sources.
filler: {N} is often mentioned alongside {O}. | A {Y} survey compared {N} with {O}. |
    In {Y}, {N} was the subject of a retrospective in {C}. |
    Writers have long associated {N} with {O}. | {N} was featured in a {Y} exhibition in {C}. |
    An archive in {C} holds records about {N}.
directed_by: {S} was directed by {O}. | {O} directed {N}. | {N} is a film by director {O}. |
    {S} was made under the direction of {O}.
produced_by: {S} was produced by {O}. | {O} produced {N}. | {N} was financed and produced by {O}.
born_in: {N} was born in {O}. | {N} is a native of {O}. | {N} was born in the city of {O}.
works_for: {N} works for {O}. | {N} is employed by {O}. | {N} holds a position at {O}.
educated_at: {N} studied at {O}. | {N} graduated from {O}. | {N} was educated at {O}.
headquartered_in: {S} is headquartered in {O}. | {S} has its headquarters in {O}. |
    The headquarters of {N} are in {O}.
founded_by: {S} was founded by {O}. | {O} founded {N}. | {S} was established by {O}.
located_in: {S} is located in {O}. | {S} is based in {O}. | The campus of {N} is in {O}.
won: {S} won {O}. | {S} received {O}. | {N} was awarded {O}.
directed: {N} directed {O}. | {N} is credited as the director of {O}.
produced: {S} produced {O}. | {N} was the production company behind {O}.
founded: {N} founded {O}. | {N} is the founder of {O}.
birth_year: {N} was born in {V}. | {N} was born in the year {V}. | {N}'s year of birth is {V}.
release_year: {S} was released in {V}. | {S} premiered in {V}. | {S} was first shown in {V}.
founded_year: {S} was founded in {V}. | {S} was established in {V}. | {S} has existed since {V}.
population: {S} has a population of {V}. | {S} is home to {V} people. |
    The population of {N} is {V}.
established_year: {S} was established in {V}. | {S} was first presented in {V}. |
    {S} has been awarded since {V}.
""")
