"""``agentgym play`` driven through a pseudo-terminal, the way a person types into it."""

import os
import select
import subprocess
import sys
import termios
from typing import Any

import pytest

from agentgym.play import ends_episode, match_action
from agentgym.registry import make

MENU = "agentgym/Search-Menu-Small-v1"
ALFWORLD = "agentgym/ALFWorld-Small-v0"
END_OF_INPUT = "\x04"  # Ctrl-D at the start of a line
SURE = "this ends the episode; sure? [y/N]"


class Terminal:
    """``python -m agentgym.cli play ARGS`` on a pseudo-terminal without echo."""

    def __init__(self, *args: str) -> None:
        self.fd, child = os.openpty()
        attrs = termios.tcgetattr(child)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(child, termios.TCSANOW, attrs)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentgym.cli", "play", *args],
            stdin=child,
            stdout=child,
            stderr=child,
            env={**os.environ, "COLUMNS": "200"},
            start_new_session=True,
        )
        os.close(child)
        self.pending = ""

    def expect(self, text: str, timeout: float = 120.0) -> str:
        """Everything printed up to and including ``text``; fails if it never comes."""
        while text not in self.pending:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            chunk = self._read() if ready else b""
            if not chunk:
                raise AssertionError(f"never printed {text!r}; printed:\n{self.pending}")
            self.pending += chunk.decode().replace("\r\n", "\n")
        end = self.pending.index(text) + len(text)
        seen, self.pending = self.pending[:end], self.pending[end:]
        return seen

    def _read(self) -> bytes:
        try:
            return os.read(self.fd, 65536)
        except OSError:  # the child closed its side
            return b""

    def send(self, line: str) -> None:
        """Type ``line`` and Enter (Ctrl-D is sent as is)."""
        os.write(self.fd, (line if line == END_OF_INPUT else line + "\n").encode())

    def finish(self) -> tuple[int, str]:
        """Exit code and the rest of the output."""
        rest = self._drain()
        code = self.proc.wait(timeout=120)
        os.close(self.fd)
        return code, rest

    def _drain(self) -> str:
        rest = self.pending
        while select.select([self.fd], [], [], 120)[0]:
            chunk = self._read()
            if not chunk:
                break
            rest += chunk.decode().replace("\r\n", "\n")
        return rest


@pytest.fixture
def terminals():
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        opened.append(Terminal(*args))
        return opened[-1]

    yield start
    for t in opened:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()


def oracle_path(env_id: str, seed: int) -> list[tuple[str, int]]:
    """The oracle's winning actions on ``seed``: each one's text and its number on the list."""
    env = make(env_id, split="train")
    expert: Any = env.unwrapped
    _, info = env.reset(seed=seed)
    path, done = [], False
    while not done:
        action = expert.oracle_action()
        path.append((action, info["admissible_actions"].index(action)))
        _, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    assert info["won"]
    env.close()
    return path


def test_a_prefix_and_a_label_without_its_parenthetical_are_sent(terminals):
    path = [text for text, _ in oracle_path(MENU, 0)]
    assert path[2].endswith(")")  # a read item with its "(mentions ...)" hint
    plain = path[2][: path[2].rindex(" (")]
    t = terminals(MENU, "--seed", "0")
    t.expect("Turn 1 of 20.")
    t.send(path[0][:10].upper())  # a case-insensitive prefix of the only item
    t.expect("Turn 2 of 20.")
    t.send(path[1])
    t.expect("Turn 3 of 20.")
    t.send(plain)
    seen = t.expect("Turn 4 of 20.")
    assert f"Last result: {plain.removeprefix('read: ')}: " in seen  # the sentence was read
    t.expect("> ")
    t.send(END_OF_INPUT)
    code, rest = t.finish()
    assert code == 0 and "(input ended)" in rest and "Traceback" not in rest


def test_lines_that_match_no_action_or_several_cost_no_turn(terminals):
    path = oracle_path(MENU, 0)
    t = terminals(MENU, "--seed", "0", "-y")
    t.expect("Turn 1 of 20.")
    # two refused lines before each of the winning actions: 2 * 10 would pass the 20-turn limit
    for turn, (action, number) in enumerate(path, start=1):
        t.expect("> ")
        t.send("xyzzy")
        assert "no action matches 'xyzzy'; type a number from 0 to" in t.expect("\n")
        t.send("99")
        assert "no action is numbered 99" in t.expect("\n")
        t.send(str(number) if turn % 2 else action)
        if turn < len(path):
            seen = t.expect(f"Turn {turn + 1} of 20.")
            assert "not valid" not in seen
    seen = t.expect("Return 1.")
    assert "Episode over: you won." in seen and SURE not in seen
    assert t.finish()[0] == 0


def test_several_matches_are_named_and_asked_again(terminals):
    t = terminals(MENU, "--seed", "0")
    t.expect("> ")
    t.send("0")
    t.expect("Turn 2 of 20.")
    t.expect("> ")
    t.send("expand: yusuf")
    message = t.expect("\n")
    assert "matches 4 actions" in message and "[0] expand: Yusuf Kingsley" in message
    t.send("expand: Yusuf Kingsley")
    t.expect("Turn 3 of 20.")


def test_a_number_chooses_an_admissible_command_of_a_text_game(terminals):
    path = oracle_path(ALFWORLD, 0)
    t = terminals(ALFWORLD, "--seed", "0")
    first = t.expect("> ")
    action, number = path[0]
    assert "Actions:\n[0] " in first and f"\n[{number}] {action}\n" in first
    for _, number in path:
        t.send(str(number))
    seen = t.expect("Return 1.")
    assert "Episode over: you won." in seen and "not valid" not in seen
    assert t.finish()[0] == 0


def _play_up_to_the_answer(t: Terminal, path: list[tuple[str, int]]) -> None:
    for _, number in path[:-1]:
        t.expect("> ")
        t.send(str(number))
    t.expect("> ")


def test_an_answer_is_sent_only_after_yes(terminals):
    path = oracle_path(MENU, 0)
    answer = path[-1][0]
    assert answer.startswith("answer: ")
    t = terminals(MENU, "--seed", "0")
    _play_up_to_the_answer(t, path)
    t.send(answer)
    t.expect(SURE)
    t.send("n")
    t.expect("Not sent; choose an action.\n> ")
    t.send(answer[:-2])  # the same item by a prefix; anything but y/yes declined it
    t.expect(SURE)
    t.send("yes")
    seen = t.expect("Return 1.")
    assert "Episode over: you won." in seen
    assert t.finish()[0] == 0


def test_yes_flag_sends_an_answer_without_asking(terminals):
    path = oracle_path(MENU, 0)
    t = terminals(MENU, "--seed", "0", "--yes")
    _play_up_to_the_answer(t, path)
    t.send(path[-1][0])
    assert SURE not in t.expect("Episode over: you won. Return 1.")


@pytest.mark.parametrize("at_question", [False, True])
def test_end_of_input_ends_the_episode_cleanly(terminals, at_question):
    path = oracle_path(MENU, 0)
    t = terminals(MENU, "--seed", "0")
    if at_question:
        _play_up_to_the_answer(t, path)
        t.send(path[-1][0])
        t.expect(SURE)
    else:
        t.expect("> ")
    t.send(END_OF_INPUT)
    code, rest = t.finish()
    assert code == 0 and "(input ended)" in rest
    assert "Episode over" not in rest and "Traceback" not in rest


ITEMS = [
    "read: Orarshire #3 (mentions Mareminster)",
    "read: Orarshire #30",
    "expand: Yusuf Delacroix (painter)",
    "expand: Yusuf Delacroix (film director)",
    "answer: 123,000",
]


@pytest.mark.parametrize(
    "line, action",
    [
        ("1", ITEMS[1]),
        ("  READ:  orarshire #30 ", ITEMS[1]),
        ("read: Orarshire #3", ITEMS[0]),
        ("ans", ITEMS[4]),
        ("expand: Yusuf Delacroix (f", ITEMS[3]),
    ],
)
def test_match_action_finds_the_one_item_meant(line, action):
    assert match_action(line, ITEMS) == (action, None)


@pytest.mark.parametrize(
    "line, words",
    [
        ("read", "matches 2 actions: [0] read: Orarshire #3 (mentions Mareminster), [1] read"),
        ("expand: yusuf delacroix", "matches 2 actions"),
        ("5", "no action is numbered 5; type a number from 0 to 4 or an action's text"),
        ("xyz", "no action matches 'xyz'; type a number from 0 to 4 or an action's text"),
    ],
)
def test_match_action_says_why_nothing_is_sent(line, words):
    action, message = match_action(line, ITEMS)
    assert action is None and message is not None and words in message


def test_free_form_envs_get_the_line_and_empty_lines_nothing():
    line = "<search>Orarshire</search>"
    assert match_action(f"{line}\n", None) == (line, None)
    assert match_action("7", None) == ("7", None)
    assert match_action("  \n", ITEMS) == (None, "")
    assert match_action("\n", None) == (None, "")


@pytest.mark.parametrize(
    "action, ends",
    [
        ("answer: 123,000", True),
        ("Buy now", True),
        ("<think>so</think><answer>Halenley</answer>", True),
        ("read: Answerley #2", False),
        ("go to shelf 4", False),
        ("buyer: x", False),
    ],
)
def test_ends_episode_by_the_actions_kind(action, ends):
    assert ends_episode(action) is ends


def test_the_text_shop_takes_a_typed_query_and_asks_before_buying(terminals):
    """A free-text env sends a line that names no listed action as typed (the shop's search
    box takes any query); ``click[Buy Now]`` is a purchase, sent after a yes."""
    shop = "agentgym/Shop-Small-v0"
    path = oracle_path(shop, 0)
    t = terminals(shop, "--seed", "0")
    t.expect("> ")
    t.send("search[zzzz qqqq]")  # on no list, sent anyway: no results
    assert "Page 1 (Total results: 0)" in t.expect("> ")
    t.send("click[back to search]")
    t.expect("> ")
    for action, _ in path[:-1]:
        t.send(action)
        t.expect("> ")
    assert path[-1][0] == "click[Buy Now]"
    t.send("click[buy now]")
    t.expect("this ends the episode; sure? [y/N]")
    t.send("y")
    seen = t.expect("Return 1.")
    assert "Episode over: you won." in seen and "not valid" not in seen
    assert t.finish()[0] == 0


def test_a_free_text_env_still_explains_an_ambiguous_prefix():
    import io

    from agentgym.play import play_episode

    out = io.StringIO()
    play_episode(
        "agentgym/Shop-Small-v0",
        stdin=io.StringIO("search[machine wash cotton]\nclick[b0\n"),
        stdout=out,
    )
    text = out.getvalue()
    assert "'click[b0' matches 10 actions" in text and "(that action was not valid)" not in text
