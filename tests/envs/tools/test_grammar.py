"""The tool-call action grammar: each form, each malformation, and a fuzz that never raises."""

from __future__ import annotations

import json
import random
import time

import pytest

from agentgym.envs.tools.grammar import GRAMMAR, CallBlock, ParsedAction, parse_action, reason

CALL_F = '<tool_call>{"name": "f", "arguments": {"a": 1, "b": "x"}}</tool_call>'
CALL_G = '<tool_call>\n{"name": "pkg.g"}\n</tool_call>'


def _check_spans(text: str, parsed: ParsedAction) -> None:
    """Each segment's slice is its whole block; call blocks carry the same spans."""
    opening = {
        "think": ("<think>",),
        "tool_call": ("<tool_call>",),
        "summary": ("<summary>", "<ask>"),
    }
    for seg in parsed.segments:
        block = text[seg["start"] : seg["end"]]
        assert block.startswith(opening[seg["tag"]]) and block.endswith(">")
    call_spans = [(s["start"], s["end"]) for s in parsed.segments if s["tag"] == "tool_call"]
    assert call_spans == [(c.start, c.end) for c in parsed.calls]


def test_think_then_calls() -> None:
    text = f"  <think>I need f and g.</think>\n{CALL_F}\n{CALL_G}\n"
    parsed = parse_action(text)
    assert parsed.kind == "tool_calls" and parsed.error is None and parsed.text == ""
    assert [(c.name, c.arguments, c.error) for c in parsed.calls] == [
        ("f", {"a": 1, "b": "x"}, None),
        ("pkg.g", {}, None),
    ]
    assert [s["tag"] for s in parsed.segments] == ["think", "tool_call", "tool_call"]
    assert text[parsed.segments[0]["start"] : parsed.segments[0]["end"]] == (
        "<think>I need f and g.</think>"
    )
    assert text[parsed.calls[0].start : parsed.calls[0].end] == CALL_F
    assert text[parsed.calls[1].start : parsed.calls[1].end] == CALL_G
    assert parsed.calls[1].raw == '\n{"name": "pkg.g"}\n'
    _check_spans(text, parsed)


def test_calls_without_think_and_several_thinks() -> None:
    assert parse_action(CALL_F).kind == "tool_calls"
    text = f"<think>a</think><think>b</think>{CALL_F}"
    parsed = parse_action(text)
    assert [s["tag"] for s in parsed.segments] == ["think", "think", "tool_call"]
    _check_spans(text, parsed)


@pytest.mark.parametrize(
    ("text", "kind", "body"),
    [
        ("<summary>  The total is 42.  </summary>", "summary", "The total is 42."),
        ("<think>done</think>\n<summary>Booked.</summary>", "summary", "Booked."),
        ("<ask>Which city do you mean?</ask>", "ask", "Which city do you mean?"),
    ],
)
def test_summary_and_ask(text: str, kind: str, body: str) -> None:
    parsed = parse_action(text)
    assert (parsed.kind, parsed.text, parsed.calls, parsed.error) == (kind, body, (), None)
    assert parsed.segments[-1]["tag"] == "summary"
    assert parsed.segments[-1]["end"] == len(text)
    _check_spans(text, parsed)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (None, "an action is text, got NoneType"),
        (3, "an action is text, got int"),
        (b"<summary>x</summary>", "an action is text, got bytes"),
        ("", "empty action"),
        (" \n\t", "empty action"),
        ("hello", "text outside the tags: 'hello'"),
        (f"Sure! {CALL_F}", "text outside the tags: 'Sure! <tool_call>"),
        (f"{CALL_F} done", "text outside the tags: 'done'"),
        (f"{CALL_F} x {CALL_F}", "text outside the tags: 'x <tool_call>"),
        ("<answer>4</answer>", "text outside the tags: '<answer>4</answer>'"),
        ("<think>only thinking</think>", "no action: write <tool_call>, <summary> or <ask>"),
        ("<think>a <summary>b</summary></think>", "<summary> opened inside <think>"),
        ("<tool_call>{}<tool_call>{}</tool_call>", "<tool_call> opened inside <tool_call>"),
        ("<summary>never closed", "<summary> is never closed"),
        ("</think><summary>x</summary>", "</think> closes nothing"),
        ("<summary>x</ask>", "</ask> closes <summary>"),
        (f"<summary>x</summary>{CALL_F}", "<tool_call> mixed with <summary>"),
        (f"{CALL_F}<ask>y</ask>", "<ask> mixed with <tool_call>"),
        ("<summary>a</summary><ask>b</ask>", "<ask> mixed with <summary>"),
        ("<summary>a</summary> <summary>b</summary>", "2 <summary> blocks: give exactly one"),
        ("<ask>a</ask><ask>b</ask><ask>c</ask>", "3 <ask> blocks: give exactly one"),
        (f"{CALL_F}<think>late</think>", "<think> after the action: think before acting"),
        ("<summary>   </summary>", "empty <summary>"),
        ("<ask></ask>", "empty <ask>"),
    ],
)
def test_invalid_actions(action: object, message: str) -> None:
    parsed = parse_action(action)
    assert parsed.kind == "invalid" and parsed.calls == () and parsed.segments == ()
    assert parsed.error is not None and parsed.error.startswith(message)
    # a short reason only; reason() appends the grammar for the v0 ids
    assert parsed.error.endswith(".") and GRAMMAR not in parsed.error


def test_the_shown_reason_repeats_the_grammar_only_when_asked() -> None:
    error = parse_action("<summary>").error
    assert error == "<summary> is never closed."
    # v0's text: the reason, one space, the grammar (as parse_action's error read before v1)
    assert reason(error, grammar=True) == f"<summary> is never closed. {GRAMMAR}"
    assert reason(error, grammar=False) == error


def test_long_outside_text_is_cut_in_the_error() -> None:
    parsed = parse_action("x" * 100_000)
    assert parsed.error is not None and len(parsed.error) < 100


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ('{"name": "f" "arguments": {}}', "malformed JSON at char 13: Expecting ',' delimiter"),
        ("", "malformed JSON at char 0: Expecting value"),
        ('{"name": "f", "arguments": {"a": }}', "malformed JSON at char 33: Expecting value"),
        ('{"name": "f", "arguments": {"a": NaN}}', "malformed JSON: NaN is not a JSON value"),
        ("[" * 100_000, "malformed JSON: nested too deeply"),
        ('["f", {}]', "a call must be a JSON object, got list"),
        ('{"arguments": {}}', 'missing "name"'),
        ('{"name": "", "arguments": {}}', '"name" must be a non-empty string'),
        ('{"name": 7}', '"name" must be a non-empty string'),
        ('{"name": "f", "arguments": "{\\"a\\": 1}"}', '"arguments" must be an object'),
        ('{"name": "f", "arguments": null}', '"arguments" must be an object'),
        ('{"name": "f", "args": {}}', 'unexpected key "args": a call has only "name" and'),
    ],
)
def test_malformed_call_blocks(raw: str, error: str) -> None:
    text = f"<think>t</think>{CALL_F}<tool_call>{raw}</tool_call>"
    parsed = parse_action(text)
    assert parsed.kind == "tool_calls" and parsed.error is None
    good, bad = parsed.calls
    assert good.error is None and good.name == "f"
    assert isinstance(bad, CallBlock) and bad.raw == raw
    assert bad.name is None and bad.arguments is None
    assert bad.error is not None and bad.error.startswith(error)
    _check_spans(text, parsed)


def test_tags_tolerate_case_and_inner_space() -> None:
    parsed = parse_action('<TOOL_CALL >{"name": "f"}</tool_call>')
    assert parsed.kind == "tool_calls" and parsed.calls[0].name == "f"


# ---------------------------------------------------------------------- fuzz
PIECES = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<summary>",
    "</summary>",
    "<ask>",
    "</ask>",
    "<",
    ">",
    "/",
    '{"name": "f", "arguments": {"a": 1}}',
    '{"name": ',
    '"arguments"',
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    '"',
    "\\",
    "NaN",
    "null",
    " ",
    "\n",
    "text",
    "é✓",
    "\x00",
]
VALID = [
    f"<think>plan</think>\n{CALL_F}\n{CALL_G}",
    "<summary>The answer is 42.</summary>",
    "<think>hmm</think><ask>Which one?</ask>",
]


def _mutate(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        op, i = rng.random(), rng.randrange(len(chars) + 1)
        if op < 0.4 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(i, rng.choice(PIECES))
        else:
            chars[i:i] = list(rng.choice(VALID))
    return "".join(chars)


def _fuzz_inputs(n: int) -> list[object]:
    rng = random.Random(1234)
    out: list[object] = []
    for k in range(n):
        if k % 3 == 0:
            out.append("".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))))
        elif k % 3 == 1:
            out.append(_mutate(rng.choice(VALID), rng))
        else:
            out.append("".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(0, 40))))
    return [*out, None, 1.5, ["<summary>x</summary>"], {"name": "f"}]


def test_fuzz_never_raises_and_keeps_invariants() -> None:
    kinds = set()
    for action in _fuzz_inputs(4000):
        parsed = parse_action(action)
        kinds.add(parsed.kind)
        assert parsed.kind in ("tool_calls", "summary", "ask", "invalid")
        if parsed.kind == "invalid":
            assert parsed.error and GRAMMAR not in parsed.error
            assert parsed.calls == () and parsed.segments == ()
            continue
        assert isinstance(action, str) and parsed.error is None
        assert [s["start"] for s in parsed.segments] == sorted(s["start"] for s in parsed.segments)
        _check_spans(action, parsed)
        for call in parsed.calls:
            assert (call.error is None) == (call.name is not None and call.arguments is not None)
            if call.error is None:
                json.dumps(call.arguments)
        if parsed.kind != "tool_calls":
            assert parsed.text and parsed.calls == ()
    assert kinds == {"tool_calls", "summary", "ask", "invalid"}


def test_parsing_is_fast() -> None:
    action = VALID[0]
    start = time.perf_counter()
    for _ in range(2000):
        parse_action(action)
    assert (time.perf_counter() - start) / 2000 < 1e-3
