import pytest

from agentgym.envs.search.parsing import parse_action


def test_think_then_search():
    text = "<think> the director first </think>\n<search>Night Harbor director</search>"
    p = parse_action(text)
    assert p.error is None and p.kind == "search" and p.argument == "Night Harbor director"
    assert p.thoughts == ["the director first"]
    spans = {s["tag"]: text[s["start"] : s["end"]] for s in p.segments}
    assert spans == {"think": "the director first", "search_query": "Night Harbor director"}


def test_answer_with_surrounding_text_and_case():
    p = parse_action("Final: <ANSWER>  Port Elm </Answer>")
    assert p.kind == "answer" and p.argument == "Port Elm"


@pytest.mark.parametrize(
    "text, words",
    [
        ("just text", "no action"),
        ("<think>only thinking</think>", "no action"),
        ("<search>a</search><answer>b</answer>", "2 actions"),
        ("<search>unclosed", "never closed"),
        ("<answer>x</search>", "closes <answer>"),
        ("</think><answer>x</answer>", "closes nothing"),
        ("<think><search>q</search></think>", "cannot nest"),
        ("<search>   </search>", "empty"),
        ("<search>" + "q" * 2000 + "</search>", "longer than"),
    ],
)
def test_malformed_actions_say_why(text, words):
    p = parse_action(text)
    assert p.kind is None and words in p.error
