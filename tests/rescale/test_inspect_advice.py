"""``statesource inspect --parallelism P``: the advice a user needs before rescaling."""

from __future__ import annotations

from rescale_originals import write_original
from sample_state import KEYS
from statesource.cli import main
from statesource.format import Checkpoint
from statesource.keygroups import key_group_range_for_operator
from statesource.state.clock import ManualClock


def test_inspect_shows_rows_per_subtask_and_the_key_group_balance(tmp_path, capsys):
    write_original(tmp_path, 2, 128, KEYS, ManualClock(5_000))
    assert main(["inspect", str(tmp_path), "--parallelism", "3"]) == 0
    out = capsys.readouterr().out
    assert "key groups per subtask at parallelism 2: 64 each (128 is a multiple of 2" in out
    assert ("key groups per subtask at parallelism 3: 42 to 43 (load ratio 1.02: 128 is not a"
            " multiple of 3; parallelisms that divide it nearby: 1, 2, 4, 8)") in out
    checkpoint = Checkpoint.open(str(tmp_path))
    rows = [sum(table.num_rows for state in checkpoint.operator().keyed_states
                for table in checkpoint.read_keyed_state(
                    state.name, key_groups=key_group_range_for_operator(128, 3, subtask)))
            for subtask in range(3)]
    assert ("rows per subtask at parallelism 3 (proposed): "
            + ", ".join(f"{i}: {n:,}" for i, n in enumerate(rows))) in out


def test_inspect_refuses_a_parallelism_above_the_max(tmp_path, capsys):
    write_original(tmp_path, 2, 128, KEYS[:10], ManualClock(0))
    assert main(["inspect", str(tmp_path), "--parallelism", "200"]) == 1
    assert ("parallelism 200 is outside [1, 128] for operator 'op', whose max parallelism is"
            " 128") in capsys.readouterr().err
