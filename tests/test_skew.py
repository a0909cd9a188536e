"""How evenly key groups split over subtasks: Flink's ranges, counted by hand and checked
against ``key_group_range_for_operator``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statesource.errors import InvalidArgumentError
from statesource.keygroups import key_group_range_for_operator
from statesource.skew import KeyGroupBalance, describe_per_subtask


@pytest.mark.parametrize(("max_parallelism", "parallelism", "fewest", "most", "near"), [
    (128, 3, 42, 43, [1, 2, 4, 8]),  # 128 = 2 * 43 + 42
    (128, 4, 32, 32, [1, 2, 8, 16]),
    (7, 3, 2, 3, [1, 7]),  # 7 = 3 + 2 + 2: one subtask carries 1.5 times the others
    (1, 1, 1, 1, []),
    (1000, 7, 142, 143, [4, 5, 8, 10]),  # 1000 = 6 * 143 + 142
    (32768, 5, 6553, 6554, [2, 4, 8, 16]),
    (32768, 32768, 1, 1, [8192, 16384]),
])
def test_key_groups_per_subtask_by_hand(max_parallelism, parallelism, fewest, most, near):
    balance = KeyGroupBalance(max_parallelism, parallelism)
    assert (balance.fewest, balance.most) == (fewest, most)
    assert balance.ratio == most / fewest
    assert balance.even == (fewest == most)
    assert balance.even_parallelisms_near() == near


@given(st.data())
def test_balance_matches_flinks_ranges(data):
    max_parallelism = data.draw(st.integers(1, 32768))
    parallelism = data.draw(st.integers(1, min(max_parallelism, 600)))
    balance = KeyGroupBalance(max_parallelism, parallelism)
    sizes = [len(key_group_range_for_operator(max_parallelism, parallelism, i))
             for i in range(parallelism)]
    assert (min(sizes), max(sizes)) == (balance.fewest, balance.most)
    assert balance.even == (max_parallelism % parallelism == 0)
    for divisor in balance.even_parallelisms_near():
        assert KeyGroupBalance(max_parallelism, divisor).even


def test_advice_reads_as_flinks_advice():
    assert KeyGroupBalance(128, 4).describe() == \
        "32 each (128 is a multiple of 4: equal loads)"
    assert KeyGroupBalance(128, 3).describe() == (
        "42 to 43 (load ratio 1.02: 128 is not a multiple of 3; parallelisms that divide it"
        " nearby: 1, 2, 4, 8)")


@pytest.mark.parametrize(("max_parallelism", "parallelism"), [(8, 9), (8, 0), (0, 1)])
def test_a_parallelism_the_key_groups_cannot_serve_is_refused(max_parallelism, parallelism):
    with pytest.raises(InvalidArgumentError, match="parallelism"):
        KeyGroupBalance(max_parallelism, parallelism)


def test_per_subtask_lines_show_the_first_eight_and_the_skew():
    assert describe_per_subtask([10, 30]) == "0: 10, 1: 30 (max/mean 1.50)"
    assert describe_per_subtask([1] * 9 + [11]) == (
        "0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, ... (10 subtasks) (max/mean 5.50)")
