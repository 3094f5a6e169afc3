"""_lib.lua's int_arg: the seat scripts hand it their numbers instead of the numbers
themselves (an integer formatted once with '%d' rather than by Redis's and Lua's float
printing each time), so it must make exactly the text each of those made: for every number,
what a key holds after redis.call and what a concatenation (the event JSON) reads."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seatlease.seats.scripts import helpers_source

PROBE = """
local n = tonumber(ARGV[1])
redis.call('SET', KEYS[1], n)
redis.call('SET', KEYS[2], int_arg(n))
return {'' .. n, '' .. int_arg(n), redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}
"""


@pytest.fixture
def probe(redis_client):
    lib = helpers_source()
    script = redis_client.register_script(lib + PROBE)

    def run(number: float) -> list[str]:
        return [str(v) for v in script(keys=["n:plain", "n:int_arg"], args=[repr(number)])]

    return run


def check(run, number: float) -> None:
    concat, concat_arg, stored, stored_arg = run(number)
    assert concat_arg == concat, number
    assert stored_arg == stored, number


@pytest.mark.parametrize(
    "number",
    [0, 1, -1, 5, 100, 1790000000000, 1790000000000 + 360000, 2**53, -(2**53),
     10**14 - 1, 10**14, 10**15, 1e20, 0.5, 333.3333333333333, 1790000000333.3333,
     -0.25, 1e-7, float("inf"), float("-inf")],
)  # fmt: skip
def test_same_text_as_the_number_itself(probe, number: float) -> None:
    check(probe, number)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.integers(min_value=-(2**53), max_value=2**53).map(float),
        st.floats(allow_nan=False),
        # times in ms and a rate budget's fractional intervals around them
        st.integers(min_value=1_700_000_000_000, max_value=1_900_000_000_000).map(float),
        st.floats(min_value=1.7e12, max_value=1.9e12),
    )
)
def test_same_text_for_any_number(probe, number: float) -> None:
    check(probe, number)
