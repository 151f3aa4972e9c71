import pickle

import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from agentgym.core.spaces import String


def test_any_str_is_in_the_space_and_nothing_else():
    space = String()
    for text in ["", "Hello, world!", "naïve café — 東京", "x" * 100_000, "\x00\n\t"]:
        assert text in space
    for other in [b"bytes", 3, None, ["a"], np.str_("a").encode()]:
        assert other not in space


def test_sample_is_reproducible_under_a_seed_and_in_the_space():
    a, b = String(seed=7), String(seed=7)
    samples = [a.sample() for _ in range(20)]
    assert samples == [b.sample() for _ in range(20)]
    assert all(isinstance(s, str) and 1 <= len(s) <= 16 and s in a for s in samples)
    assert len(set(samples)) > 1


def test_equality_hash_and_pickle():
    assert String() == String(seed=3)
    assert String() != "String()"
    assert hash(String()) == hash(String())
    assert pickle.loads(pickle.dumps(String())) == String()


def test_batches_as_a_tuple_of_strings():
    batched = batch_space(String(), n=3)
    out = create_empty_array(String(), n=3)
    assert out == ("", "", "")
    joined = concatenate(String(), ["a", "bb", "ccc"], out)
    assert joined == ("a", "bb", "ccc")
    assert list(iterate(batched, joined)) == ["a", "bb", "ccc"]
