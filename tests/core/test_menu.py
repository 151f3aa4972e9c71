import numpy as np
import pytest

from agentgym.core.menu import Menu


@pytest.fixture
def menu():
    return Menu(["search: Night Harbor", "read: Night Harbor #0", "answer: 1994"], max_size=8)


def test_mask_is_int8_and_marks_the_offered_items(menu):
    mask = menu.mask()
    assert mask.dtype == np.int8
    assert mask.tolist() == [1, 1, 1, 0, 0, 0, 0, 0]


@pytest.mark.parametrize(
    "action, index",
    [
        (0, 0),
        (np.int64(2), 2),
        ("read: Night Harbor #0", 1),
        ("  ANSWER: 1994 \n", 2),
        ("1", 1),
    ],
)
def test_valid_actions_resolve_to_their_item(menu, action, index):
    assert menu.resolve(action) == (index, None)


@pytest.mark.parametrize(
    "action, words",
    [
        (3, "not available"),
        (8, "out of range"),
        (-1, "out of range"),
        ("", "empty"),
        ("   ", "empty"),
        ("search: Nowhere", "not on the menu"),
        ("x" * 1_000_000, "1,000,000 characters"),
        (True, "invalid action"),
        (1.0, "type float"),
        (None, "type NoneType"),
        ("٣", "not on the menu"),
    ],
)
def test_invalid_actions_explain_themselves(menu, action, words):
    index, error = menu.resolve(action)
    assert index is None
    assert words in error
    assert len(error) < 300


def test_render_numbers_items_in_order(menu):
    assert menu.render().splitlines() == [
        "[0] search: Night Harbor",
        "[1] read: Night Harbor #0",
        "[2] answer: 1994",
    ]


def test_too_many_items_is_a_programming_error():
    with pytest.raises(ValueError):
        Menu(["a", "b", "c"], max_size=2)
