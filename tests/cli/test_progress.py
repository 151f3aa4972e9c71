"""Progress on long work: plain lines where there is no terminal (at least one per phase, one per
RL step, never a minute without one), an estimate of the time left, nothing when turned off."""

import io
import itertools

import pytest

from agentgym.terminal import EVERY, Progress, duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def lines(monkeypatch):
    monkeypatch.delenv("AGENTGYM_PROGRESS", raising=False)
    stream, clock = io.StringIO(), Clock()

    def make(label="warm start (SFT)", total=100, **kw):
        return Progress(label, total, stream=stream, clock=clock, **kw)

    return make, stream, clock


def test_a_phase_writes_a_first_line_throttled_lines_and_a_closing_line(lines):
    make, stream, clock = lines
    with make() as progress:
        assert stream.getvalue() == "agentgym: warm start (SFT): started (100 steps)\n"
        clock.now += 1
        progress.advance(nll=2.5)  # a second later: no line yet
        assert stream.getvalue().count("\n") == 1
        clock.now += EVERY
        progress.advance(nll=1.25)
        assert stream.getvalue().splitlines()[-1] == (
            "agentgym: warm start (SFT): 2/100 steps, nll 1.250, 21s elapsed, about 17m09s left"
        )
        progress.advance(98, nll=0.5)
    last = stream.getvalue().splitlines()[-1]
    assert last == "agentgym: warm start (SFT): done, 100 steps in 21s (nll 0.500)"


def test_a_long_phase_never_goes_longer_than_the_period_without_a_line(lines):
    make, stream, clock = lines
    written = []
    with make(total=1000) as progress:
        for _ in range(1000):
            clock.now += 3.0
            progress.advance()
            written.append((clock.now, stream.getvalue().count("\n")))
    times_of_lines = [t for (_, before), (t, n) in itertools.pairwise(written) if n > before]
    gaps = [b - a for a, b in itertools.pairwise(times_of_lines)]
    assert gaps and max(gaps) <= EVERY + 3.0


def test_a_step_line_is_written_every_time_it_is_asked_for(lines):
    make, stream, _ = lines
    with make("RL (grpo)", 3) as progress:
        for _ in range(3):
            progress.advance(line=True, success=0.5)
    body = stream.getvalue().splitlines()
    assert [line.split(": ")[2].split(",")[0] for line in body[1:4]] == [
        "1/3 steps",
        "2/3 steps",
        "3/3 steps",
    ]


def test_an_error_inside_the_phase_says_it_stopped(lines):
    make, stream, _ = lines
    with pytest.raises(RuntimeError), make() as progress:
        progress.advance(5)
        raise RuntimeError("boom")
    assert stream.getvalue().splitlines()[-1].startswith("agentgym: warm start (SFT): stopped, 5 ")


def test_unknown_totals_count_without_an_estimate(lines):
    make, stream, clock = lines
    progress = make("generating games", None, unit="games")
    progress.advance()  # the first call starts the phase
    clock.now += EVERY
    progress.advance()
    text = stream.getvalue()
    assert text.splitlines()[0] == "agentgym: generating games: started"
    assert text.splitlines()[1] == "agentgym: generating games: 2 games, 20s elapsed"


def test_progress_can_be_turned_off_and_forced(lines, monkeypatch):
    make, stream, _ = lines
    monkeypatch.setenv("AGENTGYM_PROGRESS", "off")
    with make() as progress:
        progress.advance(line=True)
    assert stream.getvalue() == ""
    monkeypatch.setenv("AGENTGYM_PROGRESS", "bar")  # a bar, then its closing line
    with make() as progress:
        with make("inner", 5) as inner:  # one bar at a time: the inner phase writes lines
            inner.advance(line=True)
        progress.advance(100)
    text = stream.getvalue()
    assert "agentgym: inner: 1/5 steps" in text
    assert text.splitlines()[-1] == "agentgym: warm start (SFT): done, 100 steps in 0s"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (42, "42s"), (75.2, "1m15s"), (3725, "1h02m")]
)
def test_durations_read_like_a_clock(seconds, text):
    assert duration(seconds) == text


def test_alfworld_games_made_on_first_use_say_so(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AGENTGYM_PROGRESS", raising=False)
    from agentgym.envs.text.alfworld_gen import GameCache
    from agentgym.envs.text.alfworld_presets import PRESETS

    cache = GameCache(PRESETS["small"], root=tmp_path)
    cache.path("train", 0)
    cache.path("train", 0)  # kept: not made again
    GameCache(PRESETS["small"], root=tmp_path).path("train", 1)  # another env: the same phase
    err = capsys.readouterr().err.splitlines()
    assert err == [f"agentgym: generating ALFWorld small games on first use (kept in "
                   f"{cache.root}): started"]  # fmt: skip
