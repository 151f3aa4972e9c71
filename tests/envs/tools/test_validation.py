"""Call validation: every kind of bad call gets its own structured error; good calls pass;
nothing raises, whatever the input."""

import json

import numpy as np
import pytest

from agentgym.envs.tools.backend import Tool
from agentgym.envs.tools.schema import Validator

ADD = Tool(
    name="add_to_cart",
    description="Add a product to a user's cart.",
    parameters={
        "type": "object",
        "properties": {
            "user_id": {"type": "string", "pattern": "^u[0-9]+$"},
            "product_id": {"type": "string"},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
            "speed": {"type": "string", "enum": ["standard", "express"]},
            "date": {"type": "string", "format": "date"},
        },
        "required": ["user_id", "product_id"],
        "additionalProperties": False,
    },
    returns={"type": "object"},
    writes=True,
)
VALIDATOR = Validator([ADD])
GOOD = {"user_id": "u1", "product_id": "p2", "quantity": 2, "speed": "express"}


def test_a_valid_call_passes():
    assert VALIDATOR.check("add_to_cart", GOOD) is None
    assert VALIDATOR.check("add_to_cart", {"user_id": "u1", "product_id": "p2"}) is None


@pytest.mark.parametrize(
    "name, arguments, code, parameter, words",
    [
        ("add_to_kart", GOOD, "unknown_tool", None, "did you mean 'add_to_cart'"),
        (7, GOOD, "unknown_tool", None, "no tool named"),
        ("add_to_cart", [1, 2], "malformed_call", None, "must be a JSON object, got array"),
        ("add_to_cart", {"user_id": "u1"}, "missing_parameter", "product_id", "product_id"),
        ("add_to_cart", {**GOOD, "colour": "red"}, "unexpected_parameter", "colour", "colour"),
        ("add_to_cart", {**GOOD, "quantity": "2"}, "wrong_type", "quantity", "must be integer"),
        ("add_to_cart", {**GOOD, "quantity": True}, "wrong_type", "quantity", "got boolean"),
        ("add_to_cart", {**GOOD, "speed": "fast"}, "not_in_enum", "speed", '"express"'),
        ("add_to_cart", {**GOOD, "quantity": 0}, "bad_value", "quantity", "minimum"),
        ("add_to_cart", {**GOOD, "user_id": "x1"}, "bad_value", "user_id", "does not match"),
        ("add_to_cart", {**GOOD, "date": "2027-13-40"}, "bad_value", "date", "date"),
    ],
)
def test_each_kind_of_bad_call_gets_a_precise_error(name, arguments, code, parameter, words):
    problem = VALIDATOR.check(name, arguments)
    assert problem is not None and problem["error"] == code
    assert problem.get("parameter") == parameter
    assert words in problem["message"]
    json.dumps(problem)  # the agent reads it as JSON


def test_thousands_of_generated_bad_calls_never_raise():
    rng = np.random.default_rng(0)
    values = [None, 1, -3, 2.5, True, "", "u1", "x" * 300, [], {}, {"a": [1]}, "2027-02-30"]
    keys = [*ADD.parameters["properties"], "extra", "", "user_id "]
    names = ["add_to_cart", "nope", "", None, 3, ["add_to_cart"]]
    for _ in range(3000):
        name = names[int(rng.integers(len(names)))]
        n = int(rng.integers(0, 6))
        arguments = {
            keys[int(rng.integers(len(keys)))]: values[int(rng.integers(len(values)))]
            for _ in range(n)
        }
        if rng.random() < 0.1:
            arguments = values[int(rng.integers(len(values)))]
        problem = VALIDATOR.check(name, arguments)
        if problem is not None:
            assert problem["error"] in {
                "unknown_tool",
                "malformed_call",
                "missing_parameter",
                "unexpected_parameter",
                "wrong_type",
                "not_in_enum",
                "bad_value",
            }
